# Sourced by scripts/test-aarch64.sh and scripts/count-arm-insns.sh: makes sure the aarch64
# cross toolchain is there (installing it when root on Debian) and exports the cargo
# settings for it. Settings go through environment variables only, so the x86 build and
# the rustup toolchain are unaffected.
#
# Debian's rustc (rustc-web) is used because Debian ships an aarch64 std for it as a
# package (libstd-rust-web-dev:arm64). Env: TERN_AARCH64_TARGET_DIR (default target/aarch64).

TRIPLE=aarch64-unknown-linux-gnu
DEBIAN_RUSTC=/usr/bin/rustc
APT_PACKAGES="rustc-web libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu g++-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-user"

have_aarch64_toolchain() {
    [ -x "$DEBIAN_RUSTC" ] &&
        [ -d "$("$DEBIAN_RUSTC" --print sysroot)/lib/rustlib/$TRIPLE/lib" ] &&
        command -v aarch64-linux-gnu-gcc >/dev/null &&
        command -v aarch64-linux-gnu-g++ >/dev/null &&
        command -v aarch64-linux-gnu-objdump >/dev/null &&
        command -v qemu-aarch64 >/dev/null
}

if ! have_aarch64_toolchain; then
    if [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then
        echo "aarch64: installing the cross toolchain (apt)" >&2
        dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        # shellcheck disable=SC2086 # word splitting of the package list is intended
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $APT_PACKAGES >/dev/null
    else
        echo "aarch64: the cross toolchain is missing; as root on Debian run:" >&2
        echo "  dpkg --add-architecture arm64 && apt-get update && apt-get install -y $APT_PACKAGES" >&2
        exit 1
    fi
    have_aarch64_toolchain || { echo "aarch64: toolchain still incomplete after apt" >&2; exit 1; }
fi

export RUSTC="$DEBIAN_RUSTC"
export RUSTDOC=/usr/bin/rustdoc
export CARGO_TARGET_DIR="${TERN_AARCH64_TARGET_DIR:-target/aarch64}"
# The path CMake's toolchain file resolves it to (cmake/TernCargo.cmake passes that on): cargo
# rebuilds everything for another linker, and the C harness links the tests' library.
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER="$(command -v aarch64-linux-gnu-gcc)"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER
# `-L /`: the multiarch loader and libc under / work; `-L /usr/aarch64-linux-gnu` pairs the
# cross loader with the multiarch libc and hangs on the first thread.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
