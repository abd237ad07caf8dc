#!/usr/bin/env bash
# Fuzz smoke test: builds the cargo-fuzz targets (nightly) and runs each for a few seconds
# from its committed seed corpus; fails on the first crash. For long runs see
# docs/testing.md. Environment: FUZZ_SECONDS (per target, default 10), CARGO_TARGET_DIR
# (default target/fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-10}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target/fuzz}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

cargo +nightly fuzz build -O
# New inputs go to a scratch copy: the committed corpora stay small and hand-made.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for target in $(cargo +nightly fuzz list); do
    mkdir -p "$work/$target"
    echo "== $target (${seconds}s)"
    if ! cargo +nightly fuzz run -O "$target" "$work/$target" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" >"$work/$target.log" 2>&1; then
        tail -n 40 "$work/$target.log"
        echo "fuzz target $target crashed (artifact in fuzz/artifacts/$target/)" >&2
        exit 1
    fi
    grep -E '^#[0-9]+[[:space:]]+DONE' "$work/$target.log" || true
done
