#!/usr/bin/env bash
# Runs the Rust integration tests and the C harness (ctest, through
# cmake/aarch64-linux-gnu.cmake) for aarch64 under qemu-user, once per CPU model:
# QEMU_CPU=max (i8mm and dotprod), cortex-a76 (dotprod, no i8mm) and cortex-a53 (plain
# NEON), so that every aarch64 kernel path and the runtime feature detection are exercised
# on an x86 host, and the kernel the dispatcher picks for m = 1, 8 and 128 is asserted.
#
# Usage: scripts/test-aarch64.sh [extra cargo test args for the build...]
# Env: TERN_AARCH64_TARGET_DIR (default target/aarch64), TERN_QEMU_CPUS (default
# "max cortex-a76 cortex-a53"), TERN_AARCH64_TIMEOUT (seconds per test run, default 1800).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup-aarch64.sh
. scripts/setup-aarch64.sh

echo "test-aarch64: $("$RUSTC" --version), $(qemu-aarch64 --version | head -n1)"
# The test programs, built once; each CPU model runs them all, the three models at once
# (qemu-user is one process per program, and a test program's threads do not fill two cores).
# They test the release build: the library the C harness below links and the JVM leg packs
# is then the one they ran against, built once. The test profile's debug assertions and
# overflow checks run in the x86_64 suite, over the same loops and the same 64-bit index
# arithmetic (and in the wasm32 suites, where usize is 32 bits). One build instead of two:
# 92 s against 134 + 73 s on a 2-vCPU AMD Zen 3.
built="$(mktemp)"
cargo test --profile release --target "$TRIPLE" --test '*' --no-run "$@" 2>"$built" || { cat "$built" >&2; exit 1; }
mapfile -t programs < <(sed -n 's/^ *Executable .* (\(.*\))$/\1/p' "$built")
rm -f "$built"
[ ${#programs[@]} -gt 0 ] || { echo "test-aarch64: no test programs were built" >&2; exit 1; }

cpus="${TERN_QEMU_CPUS:-max cortex-a76 cortex-a53}"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
# run_cpu CPU: every test program under QEMU_CPU=CPU, from the package root as cargo runs
# them; its log in $logs/CPU.log, and $logs/CPU.ok if all passed.
run_cpu() {
    local cpu=$1 expect batch large program
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
    echo "test-aarch64: QEMU_CPU=$cpu${expect:+ (expecting $expect for m = 1, $batch for m = 8, $large for m = 128)}" \
        >"$logs/$cpu.log"
    for program in "${programs[@]}"; do
        # A hung emulator must not hang CI.
        QEMU_CPU="$cpu" TERN_EXPECT_KERNEL="$expect" TERN_EXPECT_BATCH_KERNEL="$batch" \
            TERN_EXPECT_LARGE_BATCH_KERNEL="$large" timeout "${TERN_AARCH64_TIMEOUT:-1800}" \
            qemu-aarch64 -L / "$program" -q >>"$logs/$cpu.log" 2>&1 || return 0
    done
    touch "$logs/$cpu.ok"
}
for cpu in $cpus; do
    run_cpu "$cpu" &
done
wait
for cpu in $cpus; do
    if ! [ -e "$logs/$cpu.ok" ]; then
        cat "$logs/$cpu.log" >&2
        echo "test-aarch64: FAILED under QEMU_CPU=$cpu" >&2
        exit 1
    fi
    head -n 1 "$logs/$cpu.log"
    grep '^test result:' "$logs/$cpu.log" | grep -v ' 0 passed; 0 failed' || true
done
# The C harness, cross-built against the library the tests above ran on (cargo finds it up
# to date); ctest runs each program through CMAKE_CROSSCOMPILING_EMULATOR.
build="${TERN_AARCH64_CMAKE_DIR:-build/aarch64}"
cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release \
    -DTERN_CARGO_TARGET_DIR="$(realpath -m "$CARGO_TARGET_DIR")" >/dev/null
cmake --build "$build" --parallel >/dev/null
for cpu in $cpus; do
    echo "test-aarch64: C harness, QEMU_CPU=$cpu"
    log="$(mktemp)"
    if ! QEMU_CPU="$cpu" ctest --test-dir "$build" --parallel "$(nproc)" --output-on-failure --timeout "${TERN_AARCH64_TIMEOUT:-1800}" >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "test-aarch64: C harness FAILED under QEMU_CPU=$cpu" >&2
        exit 1
    fi
    grep -E 'tests passed|tests failed' "$log"
    rm -f "$log"
done
echo "test-aarch64: all passed"
