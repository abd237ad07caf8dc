#!/usr/bin/env bash
# Fuzz smoke test: builds the cargo-fuzz targets (nightly) and runs each for a few seconds
# from its committed seed corpus; fails on the first crash. For long runs see
# docs/testing.md. Environment: FUZZ_SECONDS (per target, default 15), CARGO_TARGET_DIR
# (default target/fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-15}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target/fuzz}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

cargo +nightly fuzz build -O
# New inputs go to a scratch copy: the committed corpora stay small and hand-made.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for target in $(cargo +nightly fuzz list); do
    mkdir -p "$work/$target"
    echo "== $target (${seconds}s)"
    cargo +nightly fuzz run -O "$target" "$work/$target" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -print_final_stats=1 2>&1 | grep -E '^(#[0-9]+ *DONE|stat::number_of_executed_units)|panicked|ERROR|SUMMARY|artifact' || true
    # `cargo fuzz run` exits non-zero on a crash; pipefail would hide it behind grep.
    if [ "${PIPESTATUS[0]}" -ne 0 ]; then
        echo "fuzz target $target crashed (artifact in fuzz/artifacts/$target/)" >&2
        exit 1
    fi
done
