# tern_write_def(OUTPUT INCLUDEDIR LIBDIR NATIVE_LIBS): writes the Kotlin/Native cinterop
# definition (cmake/tern.def.in) for a tree whose tern.h is in INCLUDEDIR and libtern.a in
# LIBDIR. Used for the build tree (configure time) and the installed tree (install time,
# when the prefix is known). cinterop splits compilerOpts on spaces: the paths must have
# none.
set(_tern_def_template "${CMAKE_CURRENT_LIST_DIR}/tern.def.in")

function(tern_write_def output includedir libdir native_libs)
  set(TERN_DEF_INCLUDEDIR "${includedir}")
  set(TERN_DEF_LIBDIR "${libdir}")
  string(JOIN " " TERN_NATIVE_STATIC_LIBS_STRING ${native_libs})
  configure_file("${_tern_def_template}" "${output}" @ONLY)
endfunction()
