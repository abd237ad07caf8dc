# ctest script (cmake -P): installs the build into a scratch prefix, then builds the API
# test against the installed tree as an engine would, through find_package(tern) (static,
# shared and tern::tern; from one directory and from two sibling directories) and through
# pkg-config (shared, and static through the pc file's static_libs variable), and runs
# each build. Then the installed Swift package and module map (clang -fmodules) and the
# installed Kotlin/Native .def (its headers and options, then a link with its libraries).
#
# -D variables: BUILD_DIR (the tern build), LIBDIR (its CMAKE_INSTALL_LIBDIR), SCRATCH (a
# directory to use), C_TESTS (the c_tests source dir), C_COMPILER, PKG_CONFIG (empty: skip
# the pkg-config check), CHECK (scripts/check-packaging.sh; empty: skip the checks of the
# installed shared library's names, soname and symlinks), VERSION (the project version),
# SONAME (the shared library's), CLANG (empty: skip the module map), DEF_CC (the compiler
# standing in for cinterop; empty: skip the .def), NATIVE_LIBS (rustc's native-static-libs).

include("${CMAKE_CURRENT_LIST_DIR}/TernScriptRun.cmake")

file(REMOVE_RECURSE "${SCRATCH}")
set(prefix "${SCRATCH}/prefix")
run("${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}")

set(consumer "${SCRATCH}/consumer")
run("${CMAKE_COMMAND}" -S "${C_TESTS}/consumer" -B "${consumer}" "-DCMAKE_PREFIX_PATH=${prefix}"
    "-DTERN_C_TESTS=${C_TESTS}" "-DCMAKE_C_COMPILER=${C_COMPILER}")
run("${CMAKE_COMMAND}" --build "${consumer}")
run("${consumer}/consumer_static")
run("${consumer}/consumer_shared")
run("${consumer}/consumer_tern")

set(siblings "${SCRATCH}/siblings")
run("${CMAKE_COMMAND}" -S "${C_TESTS}/consumer/siblings" -B "${siblings}" "-DCMAKE_PREFIX_PATH=${prefix}"
    "-DTERN_C_TESTS=${C_TESTS}" "-DCMAKE_C_COMPILER=${C_COMPILER}")
run("${CMAKE_COMMAND}" --build "${siblings}")
run("${siblings}/a/sibling_a")
run("${siblings}/b/sibling_b")

if(CHECK)
  run(bash "${CHECK}" shared-layout "${prefix}/${LIBDIR}" "${VERSION}")
  run(bash "${CHECK}" needs-soname "${consumer}/consumer_shared" "${SONAME}")
  run(bash "${CHECK}" swift-package "${prefix}/share/tern/CTern")
  if(CLANG)
    run(bash "${CHECK}" modulemap "${CLANG}" "${prefix}/share/tern/CTern/CTern/module.modulemap"
        "${prefix}/include" "${prefix}/${LIBDIR}" "${SCRATCH}/modulemap")
  endif()
  if(DEF_CC)
    get_filename_component(src "${C_TESTS}" DIRECTORY)
    run(bash "${CHECK}" kotlin-def "${DEF_CC}" "${prefix}/share/tern/tern.def" "${src}" "${SCRATCH}/kotlin-def"
        ${NATIVE_LIBS})
  endif()
endif()

if(PKG_CONFIG)
  set(ENV{PKG_CONFIG_PATH} "${prefix}/${LIBDIR}/pkgconfig")
  execute_process(COMMAND "${PKG_CONFIG}" --cflags --libs tern OUTPUT_VARIABLE flags
                  RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config does not find tern in ${prefix}/${LIBDIR}/pkgconfig")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run("${C_COMPILER}" -std=c11 "-I${C_TESTS}" "${C_TESTS}/test_api.c" ${flags} -lm
      -o "${SCRATCH}/pkgconfig_api")
  set(ENV{LD_LIBRARY_PATH} "${prefix}/${LIBDIR}")
  run("${SCRATCH}/pkgconfig_api")
  if(CHECK)
    run(bash "${CHECK}" needs-soname "${SCRATCH}/pkgconfig_api" "${SONAME}")
  endif()

  # The static library through the pc file's static_libs variable.
  execute_process(COMMAND "${PKG_CONFIG}" --cflags tern OUTPUT_VARIABLE cflags
                  OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND "${PKG_CONFIG}" --variable=static_libs tern OUTPUT_VARIABLE static_libs
                  OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
  separate_arguments(cflags UNIX_COMMAND "${cflags}")
  separate_arguments(static_libs UNIX_COMMAND "${static_libs}")
  unset(ENV{LD_LIBRARY_PATH})
  run("${C_COMPILER}" -std=c11 "-I${C_TESTS}" ${cflags} "${C_TESTS}/test_api.c" ${static_libs} -lm
      -o "${SCRATCH}/pkgconfig_api_static")
  run("${SCRATCH}/pkgconfig_api_static")
  if(CHECK)
    execute_process(COMMAND readelf -d "${SCRATCH}/pkgconfig_api_static" OUTPUT_VARIABLE dynamic)
    if(dynamic MATCHES "libtern")
      message(FATAL_ERROR "pkgconfig_api_static needs a libtern shared library:\n${dynamic}")
    endif()
  endif()
endif()
