#!/usr/bin/env bash
# Runs the Rust test suite (lib + integration tests) for aarch64 under qemu-user, twice:
# QEMU_CPU=max (has dotprod) and QEMU_CPU=cortex-a53 (plain NEON), so that both NEON
# kernel paths and the runtime feature detection are exercised on an x86 host.
#
# Uses Debian's rustc (rustc-web) because it ships an aarch64 std as a package; the
# rustup toolchain is left alone. Settings go through environment variables only, so the
# x86 build is unaffected. Usage: scripts/test-aarch64.sh [extra cargo test args...]
# Env: TERN_AARCH64_TARGET_DIR (default target/aarch64), TERN_QEMU_CPUS (default
# "max cortex-a53").
set -euo pipefail

cd "$(dirname "$0")/.."

TRIPLE=aarch64-unknown-linux-gnu
DEBIAN_RUSTC=/usr/bin/rustc
APT_PACKAGES="rustc-web libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-user"
APT_CMD="dpkg --add-architecture arm64 && apt-get update && apt-get install -y $APT_PACKAGES"

have_toolchain() {
    [ -x "$DEBIAN_RUSTC" ] &&
        [ -d "$("$DEBIAN_RUSTC" --print sysroot)/lib/rustlib/$TRIPLE/lib" ] &&
        command -v aarch64-linux-gnu-gcc >/dev/null &&
        command -v qemu-aarch64 >/dev/null
}

if ! have_toolchain; then
    if [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then
        echo "test-aarch64: installing the cross toolchain (apt)" >&2
        export DEBIAN_FRONTEND=noninteractive
        dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
        apt-get update -qq
        # shellcheck disable=SC2086 # word splitting of the package list is intended
        apt-get install -y -qq $APT_PACKAGES >/dev/null
    else
        echo "test-aarch64: missing the aarch64 toolchain; as root on Debian run:" >&2
        echo "  $APT_CMD" >&2
        exit 1
    fi
    have_toolchain || { echo "test-aarch64: toolchain still incomplete after apt" >&2; exit 1; }
fi

export RUSTC="$DEBIAN_RUSTC"
export RUSTDOC=/usr/bin/rustdoc
export CARGO_TARGET_DIR="${TERN_AARCH64_TARGET_DIR:-target/aarch64}"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
# `-L /`: the multiarch loader and libc under / work; `-L /usr/aarch64-linux-gnu` pairs the
# cross loader with the multiarch libc and hangs on the first thread.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

echo "test-aarch64: $("$RUSTC" --version), $(qemu-aarch64 --version | head -n1)"
cargo test --target "$TRIPLE" --lib --tests --no-run -q "$@"

for cpu in ${TERN_QEMU_CPUS:-max cortex-a53}; do
    case "$cpu" in
        cortex-a53 | cortex-a57 | cortex-a72) expect=bitnet_gemv/neon ;;
        *) expect=bitnet_gemv/neon-dotprod ;;
    esac
    echo "test-aarch64: QEMU_CPU=$cpu (expecting $expect)"
    log="$(mktemp)"
    if ! QEMU_CPU="$cpu" TERN_EXPECT_ARM_KERNEL="$expect" \
        cargo test --target "$TRIPLE" --lib --tests -q "$@" >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "test-aarch64: FAILED under QEMU_CPU=$cpu" >&2
        exit 1
    fi
    grep '^test result:' "$log" | grep -v ' 0 passed; 0 failed' || true
    rm -f "$log"
done
echo "test-aarch64: all passed"
