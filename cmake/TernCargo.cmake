# Builds libtern with `cargo build --release` into a target directory inside the CMake
# build directory, and defines the imported targets tern::static, tern::shared and
# tern::tern.
#
# Cache variables:
#   TERN_RUSTC        the rustc to build with (default: $RUSTC, else rustc on the PATH)
#   TERN_RUST_TARGET  Rust target triple to build for (empty: the host). When set, cargo
#                     links with CMAKE_C_COMPILER (e.g. from a cross toolchain file).

find_program(TERN_CARGO cargo HINTS "$ENV{CARGO_HOME}/bin" "$ENV{HOME}/.cargo/bin" REQUIRED)
# Honour RUSTC like cargo does (e.g. a distribution rustc that has a cross target's std).
if(DEFINED ENV{RUSTC} AND NOT TERN_RUSTC)
  set(TERN_RUSTC "$ENV{RUSTC}" CACHE FILEPATH "The rustc cargo builds libtern with")
endif()
find_program(TERN_RUSTC rustc HINTS "$ENV{CARGO_HOME}/bin" "$ENV{HOME}/.cargo/bin" REQUIRED)
set(TERN_RUST_TARGET "" CACHE STRING "Rust target triple to build libtern for (empty: the host)")

set(TERN_CARGO_TARGET_DIR "${CMAKE_CURRENT_BINARY_DIR}/cargo")
set(_tern_cargo_args build --release --lib --manifest-path "${PROJECT_SOURCE_DIR}/Cargo.toml")
set(_tern_cargo_env "CARGO_TARGET_DIR=${TERN_CARGO_TARGET_DIR}" "RUSTC=${TERN_RUSTC}")
if(TERN_RUST_TARGET)
  list(APPEND _tern_cargo_args --target "${TERN_RUST_TARGET}")
  string(TOUPPER "${TERN_RUST_TARGET}" _tern_triple_env)
  string(REPLACE "-" "_" _tern_triple_env "${_tern_triple_env}")
  list(APPEND _tern_cargo_env "CARGO_TARGET_${_tern_triple_env}_LINKER=${CMAKE_C_COMPILER}")
  set(_tern_out_dir "${TERN_CARGO_TARGET_DIR}/${TERN_RUST_TARGET}/release")
else()
  set(_tern_out_dir "${TERN_CARGO_TARGET_DIR}/release")
endif()

set(TERN_STATIC_LIBRARY
    "${_tern_out_dir}/${CMAKE_STATIC_LIBRARY_PREFIX}tern${CMAKE_STATIC_LIBRARY_SUFFIX}")
set(TERN_SHARED_LIBRARY
    "${_tern_out_dir}/${CMAKE_SHARED_LIBRARY_PREFIX}tern${CMAKE_SHARED_LIBRARY_SUFFIX}")
set(TERN_INCLUDE_DIR "${PROJECT_SOURCE_DIR}/include")

# Rebuild when any Rust source or the manifest changes; cargo itself decides what to redo.
file(GLOB_RECURSE _tern_rust_sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/src/*.rs")
set(_tern_cargo_inputs ${_tern_rust_sources} "${PROJECT_SOURCE_DIR}/Cargo.toml")
foreach(_f Cargo.lock build.rs)
  if(EXISTS "${PROJECT_SOURCE_DIR}/${_f}")
    list(APPEND _tern_cargo_inputs "${PROJECT_SOURCE_DIR}/${_f}")
  endif()
endforeach()

add_custom_command(
  OUTPUT "${TERN_STATIC_LIBRARY}" "${TERN_SHARED_LIBRARY}"
  COMMAND ${CMAKE_COMMAND} -E env ${_tern_cargo_env} "${TERN_CARGO}" ${_tern_cargo_args}
  # cargo leaves up-to-date outputs alone; touching them keeps make from re-running it.
  COMMAND ${CMAKE_COMMAND} -E touch_nocreate "${TERN_STATIC_LIBRARY}" "${TERN_SHARED_LIBRARY}"
  DEPENDS ${_tern_cargo_inputs}
  WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
  COMMENT "cargo build --release: libtern"
  USES_TERMINAL
  VERBATIM)
add_custom_target(tern_cargo DEPENDS "${TERN_STATIC_LIBRARY}" "${TERN_SHARED_LIBRARY}")

include(TernNativeLibs)
tern_native_static_libs(TERN_NATIVE_STATIC_LIBS)

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
  # The cdylib has no SONAME: link it as -ltern (with its directory in the rpath) rather
  # than recording the build path in the executable.
  IMPORTED_NO_SONAME TRUE
  INTERFACE_INCLUDE_DIRECTORIES "${TERN_INCLUDE_DIR}")
add_dependencies(tern_shared tern_cargo)
add_library(tern::shared ALIAS tern_shared)

add_library(tern_tern INTERFACE)
if(BUILD_SHARED_LIBS)
  target_link_libraries(tern_tern INTERFACE tern::shared)
else()
  target_link_libraries(tern_tern INTERFACE tern::static)
endif()
add_library(tern::tern ALIAS tern_tern)
