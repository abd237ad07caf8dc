# Builds libtern with `cargo build --release` into a target directory inside the CMake
# build directory, and defines the imported targets tern::static, tern::shared and
# tern::tern.
#
# Cache variables:
#   TERN_RUSTC        the rustc to build with (default: $RUSTC, else rustc on the PATH)
#   TERN_RUST_TARGET  Rust target triple to build for (empty: the host). When set, cargo
#                     links with CMAKE_C_COMPILER (e.g. from a cross toolchain file).
#   TERN_CARGO_PROFILE  cargo profile: release (no debug info, what ships) or
#                     release-debug (the same code with line tables, for profilers).
#   TERN_CARGO_TARGET_DIR  cargo's target directory (default: cargo/ in the build directory).
#                     Builds of the same tree for the same target can share one, so that
#                     cargo compiles the library once for all of them.
#
# On Linux the shared library is laid out as a packager would install it, in lib/ of the
# build directory: libtern.so.X.Y.Z (soname libtern.so.ABI, set by build.rs: X from 1.0
# on, 0.Y before), with the symlinks libtern.so.ABI -> libtern.so.X.Y.Z and
# libtern.so -> libtern.so.ABI.

# The PATH first (the user's choice, e.g. rustup's proxies), then rustup's default homes.
set(_tern_cargo_homes "$ENV{HOME}/.cargo/bin")
if(DEFINED ENV{CARGO_HOME})
  list(PREPEND _tern_cargo_homes "$ENV{CARGO_HOME}/bin")
endif()
find_program(TERN_CARGO cargo PATHS ${_tern_cargo_homes} REQUIRED)
# Honour RUSTC like cargo does (e.g. a distribution rustc that has a cross target's std).
if(DEFINED ENV{RUSTC} AND NOT TERN_RUSTC)
  set(TERN_RUSTC "$ENV{RUSTC}" CACHE FILEPATH "The rustc cargo builds libtern with")
endif()
find_program(TERN_RUSTC rustc PATHS ${_tern_cargo_homes} REQUIRED)
set(TERN_RUST_TARGET "" CACHE STRING "Rust target triple to build libtern for (empty: the host)")

set(TERN_CARGO_TARGET_DIR "${CMAKE_CURRENT_BINARY_DIR}/cargo" CACHE PATH
    "cargo's target directory for libtern (can be shared by builds of the same source tree)")
set(TERN_CARGO_PROFILE "release" CACHE STRING "cargo profile for libtern: release or release-debug")
set(_tern_cargo_args build --profile "${TERN_CARGO_PROFILE}" --lib --manifest-path "${PROJECT_SOURCE_DIR}/Cargo.toml")
set(_tern_cargo_env "CARGO_TARGET_DIR=${TERN_CARGO_TARGET_DIR}" "RUSTC=${TERN_RUSTC}")
if(TERN_RUST_TARGET)
  list(APPEND _tern_cargo_args --target "${TERN_RUST_TARGET}")
  string(TOUPPER "${TERN_RUST_TARGET}" _tern_triple_env)
  string(REPLACE "-" "_" _tern_triple_env "${_tern_triple_env}")
  list(APPEND _tern_cargo_env "CARGO_TARGET_${_tern_triple_env}_LINKER=${CMAKE_C_COMPILER}")
  set(_tern_out_dir "${TERN_CARGO_TARGET_DIR}/${TERN_RUST_TARGET}/${TERN_CARGO_PROFILE}")
else()
  set(_tern_out_dir "${TERN_CARGO_TARGET_DIR}/${TERN_CARGO_PROFILE}")
endif()

set(_tern_cargo_static
    "${_tern_out_dir}/${CMAKE_STATIC_LIBRARY_PREFIX}tern${CMAKE_STATIC_LIBRARY_SUFFIX}")
set(TERN_STATIC_LIBRARY "${_tern_cargo_static}")
set(_tern_cargo_shared
    "${_tern_out_dir}/${CMAKE_SHARED_LIBRARY_PREFIX}tern${CMAKE_SHARED_LIBRARY_SUFFIX}")
set(_tern_layout_commands)
if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
  # The file is copied, not linked, so that installing it installs the library itself.
  set(TERN_LIBRARY_DIR "${PROJECT_BINARY_DIR}/lib")
  # The ABI version (build.rs): every 0.Y may break the ABI, from 1.0 on only a major.
  if(PROJECT_VERSION_MAJOR EQUAL 0)
    set(TERN_ABI_VERSION "0.${PROJECT_VERSION_MINOR}")
  else()
    set(TERN_ABI_VERSION "${PROJECT_VERSION_MAJOR}")
  endif()
  set(TERN_SHARED_SONAME "libtern.so.${TERN_ABI_VERSION}")
  set(TERN_SHARED_LIBRARY "${TERN_LIBRARY_DIR}/libtern.so.${PROJECT_VERSION}")
  set(TERN_SHARED_LINKS "${TERN_LIBRARY_DIR}/${TERN_SHARED_SONAME}" "${TERN_LIBRARY_DIR}/libtern.so")
  set(_tern_layout_commands
    COMMAND ${CMAKE_COMMAND} -E make_directory "${TERN_LIBRARY_DIR}"
    COMMAND ${CMAKE_COMMAND} -E copy "${_tern_cargo_shared}" "${TERN_SHARED_LIBRARY}"
    COMMAND ${CMAKE_COMMAND} -E create_symlink "libtern.so.${PROJECT_VERSION}" "${TERN_LIBRARY_DIR}/${TERN_SHARED_SONAME}"
    COMMAND ${CMAKE_COMMAND} -E create_symlink "${TERN_SHARED_SONAME}" "${TERN_LIBRARY_DIR}/libtern.so")
  # The static library holds Rust's std, whose objects come with debug info (23 MB in all,
  # 14 MB without it): the release profile's copy here is stripped of it.
  if(TERN_CARGO_PROFILE STREQUAL "release" AND CMAKE_STRIP AND NOT CMAKE_CROSSCOMPILING)
    set(TERN_STATIC_LIBRARY "${TERN_LIBRARY_DIR}/libtern.a")
    list(APPEND _tern_layout_commands
      COMMAND ${CMAKE_COMMAND} -E copy "${_tern_cargo_static}" "${TERN_STATIC_LIBRARY}"
      COMMAND "${CMAKE_STRIP}" --strip-debug "${TERN_STATIC_LIBRARY}")
  endif()
else()
  # Elsewhere the library is used as cargo names it (no versioned names).
  set(TERN_SHARED_SONAME "")
  set(TERN_SHARED_LIBRARY "${_tern_cargo_shared}")
  set(TERN_SHARED_LINKS)
endif()
set(TERN_INCLUDE_DIR "${PROJECT_SOURCE_DIR}/include")

# Rebuild when any Rust source or the manifest changes; cargo itself decides what to redo.
file(GLOB_RECURSE _tern_rust_sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/src/*.rs")
set(_tern_cargo_inputs ${_tern_rust_sources} "${PROJECT_SOURCE_DIR}/Cargo.toml")
foreach(_f Cargo.lock build.rs)
  if(EXISTS "${PROJECT_SOURCE_DIR}/${_f}")
    list(APPEND _tern_cargo_inputs "${PROJECT_SOURCE_DIR}/${_f}")
  endif()
endforeach()

set(_tern_outputs "${_tern_cargo_static}" "${TERN_STATIC_LIBRARY}" "${_tern_cargo_shared}" "${TERN_SHARED_LIBRARY}"
    ${TERN_SHARED_LINKS})
list(REMOVE_DUPLICATES _tern_outputs)
add_custom_command(
  OUTPUT ${_tern_outputs}
  COMMAND ${CMAKE_COMMAND} -E env ${_tern_cargo_env} "${TERN_CARGO}" ${_tern_cargo_args}
  # cargo leaves up-to-date outputs alone; touching them keeps make from re-running it.
  COMMAND ${CMAKE_COMMAND} -E touch_nocreate "${_tern_cargo_static}" "${_tern_cargo_shared}"
  ${_tern_layout_commands}
  DEPENDS ${_tern_cargo_inputs}
  WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
  COMMENT "cargo build --profile ${TERN_CARGO_PROFILE}: libtern"
  USES_TERMINAL
  VERBATIM)
add_custom_target(tern_cargo DEPENDS ${_tern_outputs})

include(TernNativeLibs)
tern_native_static_libs(TERN_NATIVE_STATIC_LIBS)

# The build tree's Kotlin/Native definition (the installed tree gets its own).
include(TernKotlinDef)
get_filename_component(_tern_static_dir "${TERN_STATIC_LIBRARY}" DIRECTORY)
tern_write_def("${PROJECT_BINARY_DIR}/tern.def" "${TERN_INCLUDE_DIR}" "${_tern_static_dir}" "${TERN_NATIVE_STATIC_LIBS}")

add_library(tern_static STATIC IMPORTED GLOBAL)
set_target_properties(tern_static PROPERTIES
  IMPORTED_LOCATION "${TERN_STATIC_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${TERN_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES "${TERN_NATIVE_STATIC_LIBS}")
add_dependencies(tern_static tern_cargo)
add_library(tern::static ALIAS tern_static)

add_library(tern_shared SHARED IMPORTED GLOBAL)
set_target_properties(tern_shared PROPERTIES
  IMPORTED_LOCATION "${TERN_SHARED_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${TERN_INCLUDE_DIR}")
if(TERN_SHARED_SONAME)
  # Executables record libtern.so.X and find it through the rpath CMake gives them.
  set_target_properties(tern_shared PROPERTIES IMPORTED_SONAME "${TERN_SHARED_SONAME}")
else()
  # Link it as -ltern (its directory in the rpath) rather than recording the build path.
  set_target_properties(tern_shared PROPERTIES IMPORTED_NO_SONAME TRUE)
endif()
add_dependencies(tern_shared tern_cargo)
add_library(tern::shared ALIAS tern_shared)

add_library(tern_tern INTERFACE)
if(BUILD_SHARED_LIBS)
  target_link_libraries(tern_tern INTERFACE tern::shared)
else()
  target_link_libraries(tern_tern INTERFACE tern::static)
endif()
add_library(tern::tern ALIAS tern_tern)
