# tern_native_static_libs(<var>): the system libraries a Rust static library needs on
# this target (std's threads, dlopen, math, unwinding, ...), as link items.
#
# Asks rustc itself (`--print native-static-libs` while building an empty staticlib), so
# the list matches the toolchain; falls back to pthread, dl and m if that fails.

function(tern_native_static_libs out_var)
  set(_dir "${CMAKE_CURRENT_BINARY_DIR}/native-static-libs")
  file(MAKE_DIRECTORY "${_dir}")
  file(WRITE "${_dir}/probe.rs" "")
  set(_target_args)
  if(TERN_RUST_TARGET)
    set(_target_args --target "${TERN_RUST_TARGET}")
  endif()
  execute_process(
    COMMAND "${TERN_RUSTC}" --crate-type staticlib --crate-name tern_probe ${_target_args}
            --print native-static-libs -o "${_dir}/libtern_probe.a" "${_dir}/probe.rs"
    RESULT_VARIABLE _rc
    OUTPUT_VARIABLE _out
    ERROR_VARIABLE _err)
  file(REMOVE "${_dir}/libtern_probe.a")
  string(REGEX MATCH "native-static-libs: ([^\r\n]*)" _match "${_out}${_err}")
  if(_rc EQUAL 0 AND _match)
    separate_arguments(_libs UNIX_COMMAND "${CMAKE_MATCH_1}")
    message(STATUS "tern: system libraries for the static library: ${CMAKE_MATCH_1}")
  elseif(TERN_RUST_TARGET)
    # Almost always a rustc without the target's std; the build would fail later, worse.
    message(FATAL_ERROR "tern: ${TERN_RUSTC} cannot build for ${TERN_RUST_TARGET}:\n${_err}\n"
            "For aarch64, run `. scripts/setup-aarch64.sh` first (it exports RUSTC, a rustc "
            "with an aarch64 std), then configure a fresh build directory.")
  else()
    message(WARNING "tern: rustc --print native-static-libs failed; using pthread, dl and m")
    set(_libs pthread ${CMAKE_DL_LIBS} m)
  endif()
  set(${out_var} "${_libs}" PARENT_SCOPE)
endfunction()
