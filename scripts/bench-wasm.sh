#!/usr/bin/env bash
# The wasm kernels against the wasm reference kernel and against the native AVX2 kernel,
# same shape, same machine, interleaved rounds: `tern bench` built natively and for
# wasm32-wasip1 (+simd128, and +simd128,+relaxed-simd), the wasm builds run by node 22
# (scripts/setup-wasm.sh) through scripts/wasm/wasi-run.mjs. One thread, m = 1. Prints a
# markdown table of medians over the rounds, and ratios taken within each round.
#
# Usage: scripts/bench-wasm.sh [--shape NxK] [--rounds N]   (default 2560x2560, 5 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup-wasm.sh
. scripts/setup-wasm.sh

shape=2560x2560 rounds=5
while [ $# -gt 0 ]; do
    case "$1" in
        --shape) shape="$2" && shift 2 ;;
        --rounds) rounds="$2" && shift 2 ;;
        *) echo "usage: $0 [--shape NxK] [--rounds N]" >&2 && exit 2 ;;
    esac
done

cargo build -q --release -p tern-cli
for build in simd128 relaxed; do
    case "$build" in
        simd128) features="+simd128" ;;
        relaxed) features="+simd128,+relaxed-simd" ;;
    esac
    RUSTFLAGS="-C target-feature=$features" cargo build -q --release --target wasm32-wasip1 \
        --target-dir "target/wasm-$build" -p tern-cli
    # The CLI's binary and the library's cdylib are both named tern.wasm: keep this one.
    cp "target/wasm-$build/wasm32-wasip1/release/tern.wasm" "target/wasm-$build/tern-cli.wasm"
done

out="$(mktemp -d)"
# --no-liftoff: V8 compiles every function optimized before it first runs. By default the
# first calls run baseline (Liftoff) code until the optimized one is ready, and the median
# of half a second of calls mixed the two (AMD Zen 3, TQ2_0 simd128 at 2560x2560: medians
# 0.82-1.35 ms, fastest runs 0.43; with the flag, medians 0.43).
wasm() { "$TERN_NODE22" --no-warnings --no-liftoff scripts/wasm/wasi-run.mjs "target/wasm-$1/tern-cli.wasm" "${@:2}"; }
for round in $(seq "$rounds"); do
    echo "bench-wasm: round $round of $rounds" >&2
    for format in TQ1_0 TQ2_0 BITNET_B1_58; do
        common=(bench --shape "$shape" --format "$format" --json)
        ./target/release/tern "${common[@]}" --kernel bitnet_gemv/avx2 >"$out/$round-$format-avx2.json"
        wasm simd128 "${common[@]}" --kernel bitnet_gemv/wasm-simd128 >"$out/$round-$format-simd128.json"
        wasm relaxed "${common[@]}" --kernel bitnet_gemv/wasm-relaxed-simd128 >"$out/$round-$format-relaxed.json"
        wasm simd128 "${common[@]}" --kernel bitnet_gemv/reference --runs 5 >"$out/$round-$format-reference.json"
    done
done

node - "$out" "$rounds" "$shape" <<'JS'
const fs = require('fs');
const [dir, rounds, shape] = process.argv.slice(2);
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const ns = (round, format, kind) => {
    const r = JSON.parse(fs.readFileSync(`${dir}/${round}-${format}-${kind}.json`)).results[0];
    if (!r.parity_ok) throw new Error(`${format} ${kind} round ${round}: parity failed`);
    return r.median_ns;
};
const us = (x) => (x / 1000).toFixed(1);
console.log(`| ${shape} m=1 | native avx2 | wasm reference | wasm simd128 | wasm relaxed | simd128 / avx2 speed | relaxed / simd128 speed | simd128 / reference speed |`);
console.log('|---|---|---|---|---|---|---|---|');
for (const format of ['TQ1_0', 'TQ2_0', 'BITNET_B1_58']) {
    const r = Array.from({ length: Number(rounds) }, (_, i) => i + 1);
    const t = (kind) => r.map((i) => ns(i, format, kind));
    const [avx2, simd, relaxed, ref] = ['avx2', 'simd128', 'relaxed', 'reference'].map(t);
    const ratio = (a, b) => median(r.map((_, i) => a[i] / b[i]));
    console.log(`| ${format} | ${us(median(avx2))} µs | ${us(median(ref))} µs | ${us(median(simd))} µs | ${us(median(relaxed))} µs | ` +
        `${(100 * ratio(avx2, simd)).toFixed(0)} % | ${ratio(simd, relaxed).toFixed(2)}x | ${ratio(ref, simd).toFixed(0)}x |`);
}
JS
rm -rf "$out"
