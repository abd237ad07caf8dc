# CMake toolchain file: cross-build for aarch64 Linux on an x86-64 Debian host, and run
# the results (ctest, try_run) under qemu-user.
#
#   cmake -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#
# Needs (Debian): gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user, plus for the Rust
# library Debian's rustc with an aarch64 std: rustc-web libstd-rust-web-dev:arm64 (after
# `dpkg --add-architecture arm64`); scripts/setup-aarch64.sh installs them all.
# Builds that drive cargo should pass `--target ${TERN_RUST_TARGET}` and use the
# environment that script exports (RUSTC=/usr/bin/rustc, linker aarch64-linux-gnu-gcc).

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# `-L /`: the multiarch loader and libc under / work; `-L /usr/aarch64-linux-gnu` pairs the
# cross loader with the multiarch libc and hangs on the first thread.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /)

# Headers and libraries of the target only; programs (cargo, cbindgen) of the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

set(TERN_RUST_TARGET aarch64-unknown-linux-gnu CACHE STRING "Rust target triple of the tern library")
