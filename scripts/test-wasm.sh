#!/usr/bin/env bash
# The WebAssembly legs, under node's WASI (scripts/wasm/wasi-run.mjs), for each of the two
# builds (wasm has no run-time feature detection: the build's target features decide):
#   simd128  -C target-feature=+simd128                 best kernel bitnet_gemv/wasm-simd128,
#            run by the machine's node (20)
#   relaxed  -C target-feature=+simd128,+relaxed-simd   best kernel bitnet_gemv/wasm-relaxed-simd128,
#            run by node 22 from the npm registry (node 20's relaxed SIMD, behind a flag,
#            computes i32x4.relaxed_dot_i8x16_i7x16_add otherwise than specified)
# For each build:
# 1. the Rust suite for wasm32-wasip1 (lib and integration tests; tests that need threads,
#    unwinding or the host's C compiler are not run there and say so);
# 2. the C harness built with clang --target=wasm32-wasi against that build's libtern.a,
#    with the KERNEL_SELECTED name asserted (TERN_EXPECT_KERNEL);
# 3. the JS package's module of that build (js/dist).
# Then clippy on the wasm code, and the JS package's tests (node --test): under node 22,
# where load() must pick the relaxed build, and under node 20 with relaxed SIMD switched on,
# where it must fall back to simd128 (the relaxed build fails its known-answer check).
#
# Usage: scripts/test-wasm.sh [simd128] [relaxed]  (default: both, then clippy and JS).
# Target dirs target/wasm-simd128, target/wasm-relaxed; node 22 in target/wasm-tools.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup-wasm.sh
. scripts/setup-wasm.sh

runner="$PWD/scripts/wasm/wasi-run.mjs"
builds=("$@")
[ $# -gt 0 ] || builds=(simd128 relaxed)
for build in "${builds[@]}"; do
    case "$build" in
        simd128)
            features="+simd128" node="node" module="tern-simd128.wasm"
            kernel="bitnet_gemv/wasm-simd128"
            ;;
        relaxed)
            features="+simd128,+relaxed-simd" node="$TERN_NODE22" module="tern-relaxed-simd128.wasm"
            kernel="bitnet_gemv/wasm-relaxed-simd128"
            ;;
        *) echo "test-wasm: unknown build '$build' (simd128, relaxed)" >&2 && exit 2 ;;
    esac
    dir="target/wasm-$build"
    export RUSTFLAGS="-C target-feature=$features"
    export CARGO_TARGET_WASM32_WASIP1_RUNNER="$node --no-warnings $runner"
    echo "test-wasm: $build build ($RUSTFLAGS, $($node --version)): Rust suite"
    log="$(mktemp)"
    if ! TERN_EXPECT_KERNEL="$kernel" cargo test -q --target wasm32-wasip1 --target-dir "$dir" -p tern --lib --tests >"$log" 2>&1; then
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
        TERN_EXPECT_KERNEL="$kernel" $CARGO_TARGET_WASM32_WASIP1_RUNNER "$dir/test_$t.wasm" "$PWD/tests/fixtures"
    done

    echo "test-wasm: $build build: the JS package's module (js/dist/$module)"
    # No debug info in the shipped module (the release profile keeps it for native profiling).
    CARGO_PROFILE_RELEASE_DEBUG=0 cargo build -q --release --target wasm32-wasip1 --target-dir "$dir" -p tern-js
    mkdir -p js/dist
    cp "$dir/wasm32-wasip1/release/tern_js.wasm" "js/dist/$module"
done
unset RUSTFLAGS

if [ ${#builds[@]} = 2 ]; then
    echo "test-wasm: clippy on the wasm code (relaxed build: it compiles both kernel families)"
    RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd" cargo clippy -q --target wasm32-wasip1 \
        --target-dir target/wasm-relaxed -p tern -p tern-js -- -D warnings
    echo "test-wasm: the JS package under node 22 (load() must pick relaxed-simd128)"
    (cd js && TERN_JS_EXPECT_VARIANT=relaxed-simd128 "$TERN_NODE22" --test --test-reporter=spec test/*.test.js)
    echo "test-wasm: the JS package under node 20 with relaxed SIMD on (load() must fall back to simd128)"
    (cd js && TERN_JS_EXPECT_VARIANT=simd128 node --experimental-wasm-relaxed-simd --no-warnings --test \
        --test-reporter=spec test/*.test.js)
fi
echo "test-wasm: all passed"
