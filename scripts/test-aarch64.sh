#!/usr/bin/env bash
# Runs the Rust integration tests and the C harness (ctest, through
# cmake/aarch64-linux-gnu.cmake) for aarch64 under qemu-user, once per CPU model:
# QEMU_CPU=max (i8mm and dotprod), cortex-a76 (dotprod, no i8mm) and cortex-a53 (plain
# NEON), so that every aarch64 kernel path and the runtime feature detection are exercised
# on an x86 host, and the kernel the dispatcher picks for m = 1, 8 and 128 is asserted.
#
# Usage: scripts/test-aarch64.sh [extra cargo test args...]
# Env: TERN_AARCH64_TARGET_DIR (default target/aarch64), TERN_QEMU_CPUS (default
# "max cortex-a76 cortex-a53"), TERN_AARCH64_TIMEOUT (seconds per test run, default 1800).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup-aarch64.sh
. scripts/setup-aarch64.sh

echo "test-aarch64: $("$RUSTC" --version), $(qemu-aarch64 --version | head -n1)"
cargo test --target "$TRIPLE" --test '*' --no-run -q "$@"

cpus="${TERN_QEMU_CPUS:-max cortex-a76 cortex-a53}"
for cpu in $cpus; do
    # The kernels the test must find best for m = 1, 8 and 128 (i8mm serves from 3 to 7
    # tokens on, by format, the dotprod GEMM from 3 to 7, the plain NEON GEMM from 3 to 8); for
    # CPUs not listed here it only checks that the choice agrees with the detected features.
    case "$cpu" in
        max | neoverse-v1)
            expect=bitnet_gemv/neon-dotprod batch=bitnet_gemm/neon-i8mm large=bitnet_gemm/neon-i8mm ;;
        cortex-a76 | neoverse-n1)
            expect=bitnet_gemv/neon-dotprod batch=bitnet_gemm/neon-dotprod large=bitnet_gemm/neon-dotprod ;;
        cortex-a35 | cortex-a53 | cortex-a57 | cortex-a72)
            expect=bitnet_gemv/neon batch=bitnet_gemm/neon large=bitnet_gemm/neon ;;
        *) expect='' batch='' large='' ;;
    esac
    echo "test-aarch64: QEMU_CPU=$cpu${expect:+ (expecting $expect for m = 1, $batch for m = 8, $large for m = 128)}"
    log="$(mktemp)"
    # A hung emulator must not hang CI.
    if ! QEMU_CPU="$cpu" TERN_EXPECT_KERNEL="$expect" TERN_EXPECT_BATCH_KERNEL="$batch" \
        TERN_EXPECT_LARGE_BATCH_KERNEL="$large" \
        timeout "${TERN_AARCH64_TIMEOUT:-1800}" \
        cargo test --target "$TRIPLE" --test '*' -q "$@" >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "test-aarch64: FAILED under QEMU_CPU=$cpu" >&2
        exit 1
    fi
    grep '^test result:' "$log" | grep -v ' 0 passed; 0 failed' || true
    rm -f "$log"
done
# The C harness, cross-built; ctest runs each program through CMAKE_CROSSCOMPILING_EMULATOR.
build="${TERN_AARCH64_CMAKE_DIR:-build/aarch64}"
cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --parallel >/dev/null
for cpu in $cpus; do
    echo "test-aarch64: C harness, QEMU_CPU=$cpu"
    log="$(mktemp)"
    if ! QEMU_CPU="$cpu" ctest --test-dir "$build" --output-on-failure --timeout "${TERN_AARCH64_TIMEOUT:-1800}" >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "test-aarch64: C harness FAILED under QEMU_CPU=$cpu" >&2
        exit 1
    fi
    grep -E 'tests passed|tests failed' "$log"
    rm -f "$log"
done
echo "test-aarch64: all passed"
