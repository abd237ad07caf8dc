# ctest script (cmake -P): installs the build into a scratch prefix, then builds the API
# test against the installed tree as an engine would, through find_package(tern) (static
# and shared) and through pkg-config, and runs each build.
#
# -D variables: BUILD_DIR (the tern build), SCRATCH (a directory to use), C_TESTS (the
# c_tests source dir), C_COMPILER, PKG_CONFIG (empty: skip the pkg-config check).

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n${out}")
  endif()
  message(STATUS "ok: ${ARGV0} ${ARGV1} ${ARGV2}")
endfunction()

file(REMOVE_RECURSE "${SCRATCH}")
set(prefix "${SCRATCH}/prefix")
run("${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}")

set(consumer "${SCRATCH}/consumer")
run("${CMAKE_COMMAND}" -S "${C_TESTS}/consumer" -B "${consumer}" "-DCMAKE_PREFIX_PATH=${prefix}"
    "-DTERN_C_TESTS=${C_TESTS}" "-DCMAKE_C_COMPILER=${C_COMPILER}")
run("${CMAKE_COMMAND}" --build "${consumer}")
run("${consumer}/consumer_static")
run("${consumer}/consumer_shared")

if(PKG_CONFIG)
  set(ENV{PKG_CONFIG_PATH} "${prefix}/lib/pkgconfig")
  execute_process(COMMAND "${PKG_CONFIG}" --cflags --libs tern OUTPUT_VARIABLE flags
                  RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config does not find tern in ${prefix}/lib/pkgconfig")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run("${C_COMPILER}" -std=c11 "-I${C_TESTS}" "${C_TESTS}/test_api.c" ${flags} -lm
      -o "${SCRATCH}/pkgconfig_api")
  set(ENV{LD_LIBRARY_PATH} "${prefix}/lib")
  run("${SCRATCH}/pkgconfig_api")
endif()
