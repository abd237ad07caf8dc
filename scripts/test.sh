#!/usr/bin/env bash
# Every test suite of tern, in the order a failure is cheapest to find:
#   0. style: rustfmt (rustfmt.toml) and clippy with warnings as errors;
#   1. the Rust tests of the workspace (library, C API from Rust, CLI, the panic probe);
#   2. the C harness under ctest: C11 and C++17 programs, valgrind memcheck, consumers of
#      the installed package (find_package, pkg-config, add_subdirectory), packaging checks;
#   3. the same C harness built with ASAN+UBSAN (the asan-ubsan CMake preset);
#   4. the Rust suite under AddressSanitizer, and the concurrency tests under ThreadSanitizer;
#   5. a smoke run of every fuzz target;
#   6. the aarch64 suite (Rust and C) under qemu on three CPU models (max: i8mm and dotprod,
#      cortex-a76: dotprod, cortex-a53: plain NEON);
#   7. WebAssembly: the Rust suite and the C harness for wasm32-wasip1 under node (SIMD128
#      and relaxed-SIMD builds) and the JS package's tests, and
#   8. the JVM library (scripts/test-jvm.sh): Kotlin tests through FFM on JDK 25 and JNI on
#      JDK 17, the docs' example, the calling overhead: 7 and 8 side by side; then the JS
#      package's browser page end to end in headless Chromium;
#   9. llama.cpp on tern: the ggml backend libggml-tern under llama.cpp's own tests and
#      llama-bench (scripts/test-ggml.sh; the llama.cpp source comes from PyPI, cached).
# Missing system tools are installed when running as root on Debian (scripts/setup.sh,
# scripts/setup-aarch64.sh, scripts/setup-wasm.sh, scripts/setup-jvm.sh,
# scripts/test-browser.sh, scripts/test-ggml.sh); otherwise the scripts say what to install.
# TERN_SKIP="asan fuzz aarch64 wasm jvm ggml" skips legs (for quick local runs); CI runs them all.
set -euo pipefail
cd "$(dirname "$0")/.."
# Every build here starts from nothing on CI: incremental compilation only adds its
# bookkeeping to those (set CARGO_INCREMENTAL=1 to keep it for local reruns).
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
# shellcheck source=scripts/setup.sh
. scripts/setup.sh

skip() { [[ " ${TERN_SKIP:-} " == *" $1 "* ]]; }
leg() { echo; echo "=== tern tests: $* ($(date +%T))"; }

# rustfmt and clippy come with rustup's default profile; a minimal toolchain gets them here.
tool() { cargo "$1" --version >/dev/null 2>&1 || rustup component add "$2"; }

leg "style"
tool fmt rustfmt && cargo fmt --all --check
tool clippy clippy && cargo clippy --workspace --all-targets --quiet -- -D warnings

leg "Rust"
# One build for every test: the test-only panic-probe feature does nothing until
# tests/panic_probe.rs arms it, and a second build of tern without it would cost minutes.
cargo test --workspace --features tern/panic-probe

leg "C harness (ctest)"
cmake --preset release >/dev/null
cmake --build --preset release --parallel
ctest --preset release

if ! skip asan; then
    leg "C harness with ASAN+UBSAN"
    cmake --preset asan-ubsan >/dev/null
    cmake --build --preset asan-ubsan --parallel
    ctest --preset asan-ubsan --output-on-failure

    leg "Rust under AddressSanitizer and ThreadSanitizer"
    bash scripts/test-sanitizers.sh
fi

if ! skip fuzz; then
    leg "fuzz smoke"
    bash scripts/fuzz-smoke.sh
fi

if ! skip aarch64; then
    leg "aarch64 under qemu"
    bash scripts/test-aarch64.sh
fi

# The wasm and JVM legs run side by side: most of their time is one node, one JVM or one
# qemu process on one core, so the two cores are half idle with either alone. Their
# installs (apt, npm, pip) run first, one after the other; each leg's output is shown
# when both have finished.
parallel_names=() parallel_pids=()
parallel() {
    local name=$1
    shift
    "$@" >"$logs/$name.log" 2>&1 &
    parallel_names+=("$name") parallel_pids+=($!)
}
logs=$(mktemp -d)
skip wasm && skip jvm || leg "WebAssembly and JVM, in parallel"
if ! skip wasm; then
    (. scripts/setup-wasm.sh)
    parallel "WebAssembly (node, clang wasm32-wasi, the JS package)" bash scripts/test-wasm.sh
fi
if ! skip jvm; then
    (. scripts/setup-jvm.sh)
    parallel "JVM (Kotlin over FFM on JDK 25 and JNI on JDK 17)" bash scripts/test-jvm.sh
fi
failed=()
for i in "${!parallel_pids[@]}"; do
    wait "${parallel_pids[$i]}" || failed+=("${parallel_names[$i]}")
done
for name in "${parallel_names[@]}"; do
    leg "$name: its output"
    cat "$logs/$name.log"
done
rm -rf "$logs"
if [ ${#failed[@]} -gt 0 ]; then
    printf 'tern tests: FAILED: %s\n' "${failed[@]}" >&2
    exit 1
fi

if ! skip wasm; then
    leg "WebAssembly: the browser page in headless Chromium"
    bash scripts/test-browser.sh
fi

if ! skip ggml; then
    leg "llama.cpp on tern (ggml backend)"
    bash scripts/test-ggml.sh
fi

echo
echo "=== tern tests: all suites passed ($(date +%T))"
