#!/usr/bin/env bash
# The WebAssembly legs, under node's WASI (scripts/wasm/wasi-run.mjs), for each of the two
# builds (wasm has no run-time feature detection: the build's target features decide):
#   simd128  -C target-feature=+simd128                 best kernel bitnet_gemv/wasm-simd128
#   relaxed  -C target-feature=+simd128,+relaxed-simd   best kernel bitnet_gemv/wasm-relaxed-simd128
# 1. the Rust suite for wasm32-wasip1 (lib and integration tests; tests that need threads,
#    unwinding or the host's C compiler are not run there and say so);
# 2. the C harness built with clang --target=wasm32-wasi against that build's libtern.a,
#    with the KERNEL_SELECTED name asserted (TERN_EXPECT_KERNEL);
# 3. then the JS package (js/): its two modules are these builds' tern_js.wasm, tested with
#    node's test runner.
#
# Usage: scripts/test-wasm.sh [simd128] [relaxed]  (default: both). Target dirs target/wasm-*.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup-wasm.sh
. scripts/setup-wasm.sh

# node 20 validates relaxed SIMD only behind this flag (current Chromium has it on).
export TERN_NODE="node --no-warnings --experimental-wasm-relaxed-simd"
export CARGO_TARGET_WASM32_WASIP1_RUNNER="$TERN_NODE $PWD/scripts/wasm/wasi-run.mjs"

features() {
    case "$1" in
        simd128) echo "+simd128" ;;
        relaxed) echo "+simd128,+relaxed-simd" ;;
        *) echo "test-wasm: unknown build '$1' (simd128, relaxed)" >&2 && exit 2 ;;
    esac
}
js_file() {
    case "$1" in
        simd128) echo "tern-simd128.wasm" ;;
        relaxed) echo "tern-relaxed-simd128.wasm" ;;
    esac
}
expected_kernel() {
    case "$1" in
        simd128) echo "bitnet_gemv/wasm-simd128" ;;
        relaxed) echo "bitnet_gemv/wasm-relaxed-simd128" ;;
    esac
}

builds=("$@")
[ $# -gt 0 ] || builds=(simd128 relaxed)
for build in "${builds[@]}"; do
    dir="target/wasm-$build"
    export RUSTFLAGS="-C target-feature=$(features "$build")"
    echo "test-wasm: $build build ($RUSTFLAGS): Rust suite"
    log="$(mktemp)"
    if ! cargo test -q --target wasm32-wasip1 --target-dir "$dir" -p tern --lib --tests >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "test-wasm: Rust suite FAILED ($build)" >&2
        exit 1
    fi
    grep '^test result:' "$log" | grep -v ' 0 passed; 0 failed; 0 ignored' || true
    rm -f "$log"

    echo "test-wasm: $build build: C harness against $dir/wasm32-wasip1/release/libtern.a"
    cargo build -q --release --target wasm32-wasip1 --target-dir "$dir" -p tern --lib
    for t in api errors parity dispatch; do
        # --allow-undefined: Debian's wasi-libc has no pthread stubs, and the Rust std's
        # pthread imports stay undefined; the runner makes them trap (tern never calls them).
        clang --target=wasm32-wasi --sysroot=/usr -O2 -std=c11 -Wall -Wextra -Werror -pedantic \
            -Iinclude -Ic_tests "c_tests/test_$t.c" "$dir/wasm32-wasip1/release/libtern.a" -lm \
            -Wl,--allow-undefined -o "$dir/test_$t.wasm"
        # Paths are absolute: the runner preopens '/', and WASI has no working directory.
        TERN_EXPECT_KERNEL="$(expected_kernel "$build")" \
            $CARGO_TARGET_WASM32_WASIP1_RUNNER "$dir/test_$t.wasm" "$PWD/tests/fixtures"
    done

    echo "test-wasm: $build build: the JS package's module (js/dist)"
    # No debug info in the shipped module (the release profile keeps it for native profiling).
    CARGO_PROFILE_RELEASE_DEBUG=0 cargo build -q --release --target wasm32-wasip1 --target-dir "$dir" -p tern-js
    mkdir -p js/dist
    cp "$dir/wasm32-wasip1/release/tern_js.wasm" "js/dist/$(js_file "$build")"
done

if [ ${#builds[@]} = 2 ]; then
    echo "test-wasm: lints of the wasm code (clippy, relaxed build: it compiles both kernel families)"
    RUSTFLAGS="-C target-feature=$(features relaxed)" cargo clippy -q --target wasm32-wasip1 \
        --target-dir target/wasm-relaxed -p tern -p tern-js -- -D warnings
    echo "test-wasm: the JS package (node --test), as load() picks it, then the simd128 build"
    (cd js && $TERN_NODE --test --test-reporter=spec test/*.test.js)
    (cd js && TERN_JS_VARIANT=simd128 $TERN_NODE --test --test-reporter=spec test/*.test.js)
fi
echo "test-wasm: all passed"
