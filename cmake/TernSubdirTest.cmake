# ctest script (cmake -P): builds c_tests/consumer/subdir, a project that pulls tern in
# with add_subdirectory and links tern::tern, once static and once shared
# (BUILD_SHARED_LIBS), and runs each build. It reuses the main build's cargo target
# directory, so cargo finds the library up to date instead of compiling it again.
#
# -D variables: SOURCE_DIR (tern's source tree), SCRATCH (a directory to use), C_COMPILER,
# CARGO_TARGET_DIR, CHECK (scripts/check-packaging.sh; empty: skip the soname checks),
# SONAME (the soname, libtern.so.ABI, with CHECK).

include("${CMAKE_CURRENT_LIST_DIR}/TernScriptRun.cmake")

file(REMOVE_RECURSE "${SCRATCH}")
foreach(shared OFF ON)
  set(build "${SCRATCH}/shared-${shared}")
  run("${CMAKE_COMMAND}" -S "${SOURCE_DIR}/c_tests/consumer/subdir" -B "${build}"
      "-DTERN_SOURCE_DIR=${SOURCE_DIR}" "-DTERN_C_TESTS=${SOURCE_DIR}/c_tests"
      "-DCMAKE_C_COMPILER=${C_COMPILER}" "-DBUILD_SHARED_LIBS=${shared}"
      "-DTERN_CARGO_TARGET_DIR=${CARGO_TARGET_DIR}")
  run("${CMAKE_COMMAND}" --build "${build}")
  run("${build}/app")
  if(CHECK)
    if(shared)
      run(bash "${CHECK}" needs-soname "${build}/app" "${SONAME}")
    else()
      execute_process(COMMAND readelf -d "${build}/app" OUTPUT_VARIABLE dynamic)
      if(dynamic MATCHES "libtern")
        message(FATAL_ERROR "the static build of app needs a libtern shared library:\n${dynamic}")
      endif()
    endif()
  endif()
endforeach()
