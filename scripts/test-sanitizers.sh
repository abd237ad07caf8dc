#!/usr/bin/env bash
# The Rust test suite under sanitizers (x86_64 Linux, nightly):
#   1. AddressSanitizer (+ LeakSanitizer): every integration test of the root package, with the `panic-probe` feature so that tests/panic_probe.rs runs too (the
#      feature does nothing unless a test arms it). The prebuilt std is used: ASAN's runtime
#      intercepts every allocation anyway, and the std code tern's tests exercise (Vec,
#      slices, iterators) is generic, so it is compiled, instrumented, into tern's crates.
#      Rebuilding std as well would cost minutes of CI for little more.
#   2. ThreadSanitizer: tests/concurrency.rs (one dispatcher, its pool, a sink and a weight
#      shared by several threads), with std rebuilt under the same instrumentation: TSAN
#      reports false races on synchronisation it cannot see, such as std's.
# Separate target dirs (target/asan, target/tsan; TERN_SANITIZER_TARGET_DIR replaces
# `target`): sanitized builds never mix with the normal ones. First run: the nightly
# `rust-src` component is installed if missing.
#
# Usage: scripts/test-sanitizers.sh [asan|tsan]...   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."

triple=x86_64-unknown-linux-gnu
if [ "$(uname -sm)" != "Linux x86_64" ]; then
    echo "test-sanitizers: needs an x86_64 Linux host" >&2
    exit 1
fi
rustup component list --toolchain nightly --installed | grep '^rust-src' >/dev/null ||
    rustup component add rust-src --toolchain nightly

# Build cost: LLVM is nearly all of it (tern's frontend takes 3 s). Two things double it and
# add nothing a sanitizer needs, so they are off here: overflow checks and debug assertions
# (the plain Rust leg runs with both) and the local ThinLTO pass over the test profile's 256
# codegen units. tern alone, ASAN, 2-vCPU Xeon: 123 s -> 71 s of rustc.
lean=(--config 'profile.test.package.tern.debug-assertions=false'
    --config 'profile.test.package.tern.overflow-checks=false')

# run <sanitizer> <target dir> <cargo test args...>
run() {
    local sanitizer=$1 dir=$2
    shift 2
    echo "== -Zsanitizer=$sanitizer: cargo test $*"
    RUSTFLAGS="-Zsanitizer=$sanitizer -Clto=off" RUSTDOCFLAGS="-Zsanitizer=$sanitizer" \
        cargo +nightly test "${lean[@]}" --target "$triple" --target-dir "$dir" "$@"
}

base=${TERN_SANITIZER_TARGET_DIR:-target}
sanitizers=("$@")
[ $# -gt 0 ] || sanitizers=(asan tsan)
for s in "${sanitizers[@]}"; do
    case "$s" in
        asan) ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} run address "$base/asan" --test '*' --features panic-probe ;;
        tsan) TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1} run thread "$base/tsan" -Zbuild-std --test concurrency ;;
        *) echo "test-sanitizers: unknown sanitizer '$s' (asan, tsan)" >&2; exit 2 ;;
    esac
done
