#!/usr/bin/env bash
# Fuzz smoke test: builds the cargo-fuzz targets (nightly) and runs each for a few seconds
# from its committed seed corpus; fails on the first crash. For long runs see
# docs/testing.md. Environment: FUZZ_SECONDS (per target, default 8), CARGO_TARGET_DIR
# (default target/fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-8}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target/fuzz}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

# cargo-fuzz compiles with one codegen unit unless told: 16 let both cores of a CI machine
# build tern (3:10 -> 2:21 on a 2-vCPU Xeon). Rust then adds a local ThinLTO pass over the
# 16, which cannot inline across them anyway once sancov has instrumented the code (cargo-fuzz
# says as much); without it, 2:28 -> 1:59. The run below must use the same flags, or it
# builds again.
build=(-O --codegen-units 16)
export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-Clto=off"
# At opt-level 1 the build takes a third less (AMD EPYC Zen 3, 2 vCPUs, from nothing: 226 ->
# 154 s, 415 -> 282 CPU-s) and the targets run 0.45-0.86x as many inputs per second; 8 s per
# target instead of 5 gives back about as many inputs for 9 s. Long runs: -O as it is.
export CARGO_PROFILE_RELEASE_OPT_LEVEL=1
cargo +nightly fuzz build "${build[@]}"
# New inputs go to a scratch copy: the committed corpora stay small and hand-made.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Two targets at a time: a fuzzer is one process on one core.
smoke() {
    local target=$1
    mkdir -p "$work/$target"
    if cargo +nightly fuzz run "${build[@]}" "$target" "$work/$target" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" >"$work/$target.log" 2>&1; then
        touch "$work/$target.ok"
    fi
}
targets=$(cargo +nightly fuzz list)
for target in $targets; do
    smoke "$target" &
    [ "$(jobs -pr | wc -l)" -lt 2 ] || wait -n || true
done
wait
for target in $targets; do
    echo "== $target (${seconds}s)"
    if ! [ -e "$work/$target.ok" ]; then
        tail -n 40 "$work/$target.log"
        echo "fuzz target $target crashed (artifact in fuzz/artifacts/$target/)" >&2
        exit 1
    fi
    grep -E '^#[0-9]+[[:space:]]+DONE' "$work/$target.log" || true
done
