#!/usr/bin/env bash
# The WebAssembly legs, under node's WASI (scripts/wasm/wasi-run.mjs), for each of the two
# builds (wasm has no run-time feature detection: the build's target features decide):
#   simd128  -C target-feature=+simd128                 best kernel bitnet_gemv/wasm-simd128
#            (one token), run by the machine's node (20)
#   relaxed  -C target-feature=+simd128,+relaxed-simd   best kernel bitnet_gemv/wasm-relaxed-simd128,
#            run by node 22 from the npm registry (node 20 has relaxed SIMD only behind a
#            flag; the JS package's tests run under both)
# For each build:
# 1. the Rust suite for wasm32-wasip1, the relaxed build's also under node 20 with relaxed
#    SIMD switched on (the integration tests; the lib's unit tests are
#    index arithmetic that the main Rust leg runs, and building the lib a second time with
#    them would cost minutes of CI for nothing new; tests that need threads,
#    unwinding or the host's C compiler are not run there and say so);
# 2. the C harness built with clang --target=wasm32-wasi against that build's libtern.a,
#    with the KERNEL_SELECTED name asserted (TERN_EXPECT_KERNEL);
# 3. the JS package's module of that build (js/scripts/build.mjs, what `npm run build` runs).
# Then clippy on the wasm code, and the JS package as a user gets it: `npm pack` installed
# into a fresh project outside the repository (scripts/wasm/js-project.sh). From there, its
# README example and its tests (node --test) run under node 22, where load() must pick the
# relaxed build, with read access to that project only (node's permission model); then
# under node 20, as it is (relaxed SIMD does not validate: load() must fall back to
# simd128) and with relaxed SIMD switched on (load() must pick the relaxed build: its
# known-answer check runs every tile, and tern's code avoids the one relaxed instruction
# node 20 computes wrongly).
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
            features="+simd128" engines=("node") module="tern-simd128.wasm"
            kernel="bitnet_gemv/wasm-simd128"
            ;;
        relaxed)
            # The suite also runs under node 20 with relaxed SIMD switched on: an engine that
            # computes a relaxed instruction wrongly (see below), so that no kernel tile may
            # rely on that instruction.
            features="+simd128,+relaxed-simd" engines=("$TERN_NODE22" "node --experimental-wasm-relaxed-simd")
            module="tern-relaxed-simd128.wasm" kernel="bitnet_gemv/wasm-relaxed-simd128"
            ;;
        *) echo "test-wasm: unknown build '$build' (simd128, relaxed)" >&2 && exit 2 ;;
    esac
    dir="target/wasm-$build"
    export RUSTFLAGS="-C target-feature=$features"
    for engine in "${engines[@]}"; do
        export CARGO_TARGET_WASM32_WASIP1_RUNNER="$engine --no-warnings $runner"
        echo "test-wasm: $build build ($RUSTFLAGS): Rust suite under $engine ($($engine --version))"
        log="$(mktemp)"
        if ! TERN_EXPECT_KERNEL="$kernel" cargo test -q --target wasm32-wasip1 --target-dir "$dir" -p tern --test '*' >"$log" 2>&1; then
            cat "$log" >&2
            rm -f "$log"
            echo "test-wasm: Rust suite FAILED ($build, $engine)" >&2
            exit 1
        fi
        grep '^test result:' "$log" | grep -v ' 0 passed; 0 failed; 0 ignored' || true
        rm -f "$log"
    done
    # The C harness under the build's first engine.
    export CARGO_TARGET_WASM32_WASIP1_RUNNER="${engines[0]} --no-warnings $runner"

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
    node js/scripts/build.mjs "$build"
done
unset RUSTFLAGS

if [ ${#builds[@]} = 2 ]; then
    echo "test-wasm: clippy on the wasm code (relaxed build: it compiles both kernel families)"
    RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd" cargo clippy -q --target wasm32-wasip1 \
        --target-dir target/wasm-relaxed -p tern -p tern-js -- -D warnings
    echo "test-wasm: the JS package: npm pack, installed into a fresh project"
    fresh="$(mktemp -d)"
    trap 'rm -rf "$fresh"' EXIT
    scripts/wasm/js-project.sh "$fresh"
    project="$fresh/project"
    # Read access to the project only; the test runner passes the flags on to each file's process.
    sandbox=(--permission "--allow-fs-read=$project/" --allow-child-process --disable-warning=SecurityWarning)
    echo "test-wasm: the README example under node 22"
    example="$(cd "$project" && "$TERN_NODE22" "${sandbox[@]}" example.mjs)"
    echo "$example" | sed 's/^/  /'
    grep -qx 'KERNEL_SELECTED bitnet_gemv/wasm-relaxed-simd128' <<<"$example"
    # The example's batch: 8 tokens of a TQ2_0 weight, which the GEMM serves from 3.
    grep -qx 'KERNEL_SELECTED bitnet_gemm/wasm-relaxed-simd128' <<<"$example"
    grep -qx 'out 64, batch 512' <<<"$example"
    echo "test-wasm: the installed package's tests under node 22 (load() must pick relaxed-simd128)"
    (cd "$project/node_modules/tern-wasm" && TERN_JS_EXPECT_VARIANT=relaxed-simd128 "$TERN_NODE22" "${sandbox[@]}" \
        --test --test-reporter=spec test/*.test.js)
    # node 20 validates relaxed SIMD only behind a flag, and with it computes
    # i32x4.relaxed_dot_i8x16_i7x16_add_s as twice the dot product without the accumulator,
    # an instruction tern's wasm code does not contain (RelaxedDot in simd128.rs; where
    # LLVM formed it, the known-answer check refused the build here and this leg failed).
    echo "test-wasm: the installed package's tests under node 20 (load() must fall back to simd128)"
    (cd "$project/node_modules/tern-wasm" && TERN_JS_EXPECT_VARIANT=simd128 node \
        --no-warnings --test --test-reporter=spec test/*.test.js)
    echo "test-wasm: the installed package's tests under node 20 with relaxed SIMD on (load() must pick relaxed-simd128)"
    (cd "$project/node_modules/tern-wasm" && TERN_JS_EXPECT_VARIANT=relaxed-simd128 node --experimental-wasm-relaxed-simd \
        --no-warnings --test --test-reporter=spec test/*.test.js)
fi
echo "test-wasm: all passed"
