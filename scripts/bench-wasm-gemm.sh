#!/usr/bin/env bash
# The wasm GEMMs against the wasm GEMVs they replace: `tern bench` built for wasm32-wasip1
# (+simd128, and +simd128,+relaxed-simd), both run by node 22 (scripts/setup-wasm.sh)
# through scripts/wasm/wasi-run.mjs, one thread. Each round runs, for every build, shape,
# format and token count, one process that forces the build's GEMM and its GEMV in turn
# (`--kernel`), so the two share the machine's state; the rounds interleave everything.
# Prints a markdown table of medians over the rounds and of the per-round ratios
# GEMV time / GEMM time (above 1: the GEMM is faster).
#
# Usage: scripts/bench-wasm-gemm.sh [--shapes NxK,...] [--tokens M,...] [--rounds N]
#        [--formats F,...]   (default 2560x2560,6912x2560; 64; 3 rounds; every ternary format)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup-wasm.sh
. scripts/setup-wasm.sh

shapes=2560x2560,6912x2560 tokens=64 rounds=3 formats=TQ1_0,TQ2_0,BITNET_B1_58
while [ $# -gt 0 ]; do
    case "$1" in
        --shapes) shapes="$2" && shift 2 ;;
        --tokens) tokens="$2" && shift 2 ;;
        --rounds) rounds="$2" && shift 2 ;;
        --formats) formats="$2" && shift 2 ;;
        *) echo "usage: $0 [--shapes NxK,...] [--tokens M,...] [--rounds N] [--formats F,...]" >&2 && exit 2 ;;
    esac
done

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
trap 'rm -rf "$out"' EXIT
for round in $(seq "$rounds"); do
    echo "bench-wasm-gemm: round $round of $rounds" >&2
    for shape in ${shapes//,/ }; do
        for format in ${formats//,/ }; do
            for m in ${tokens//,/ }; do
                for build in simd128 relaxed; do
                    isa="wasm-simd128"
                    [ "$build" = relaxed ] && isa="wasm-relaxed-simd128"
                    # --no-liftoff: optimized code from the first call (see bench-wasm.sh).
                    "$TERN_NODE22" --no-warnings --no-liftoff scripts/wasm/wasi-run.mjs "target/wasm-$build/tern-cli.wasm" \
                        bench --shape "$shape" --format "$format" --tokens "$m" --json \
                        --kernel "bitnet_gemv/$isa,bitnet_gemm/$isa" >"$out/$round-$shape-$format-$m-$build.json"
                done
            done
        done
    done
done

node - "$out" "$rounds" "$shapes" "$formats" "$tokens" <<'JS'
const fs = require('fs');
const [dir, rounds, shapes, formats, tokens] = process.argv.slice(2);
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const ms = (x) => (x / 1e6).toFixed(2);
console.log('| shape | format | m | simd128 GEMV | simd128 GEMM | simd128 GEMV / GEMM | relaxed GEMV | relaxed GEMM | relaxed GEMV / GEMM |');
console.log('|---|---|---|---|---|---|---|---|---|');
for (const shape of shapes.split(',')) for (const format of formats.split(',')) for (const m of tokens.split(',')) {
    const cells = [];
    for (const build of ['simd128', 'relaxed']) {
        const rs = Array.from({ length: Number(rounds) }, (_, i) => {
            const j = JSON.parse(fs.readFileSync(`${dir}/${i + 1}-${shape}-${format}-${m}-${build}.json`));
            const get = (kind) => {
                const r = j.results.find((x) => x.kernel.startsWith(kind));
                if (!r.parity_ok) throw new Error(`${shape} ${format} m=${m} ${r.kernel} round ${i + 1}: parity failed`);
                return r.median_ns;
            };
            return [get('bitnet_gemv/'), get('bitnet_gemm/')];
        });
        cells.push(`${ms(median(rs.map((r) => r[0])))} ms`, `${ms(median(rs.map((r) => r[1])))} ms`,
            `${median(rs.map((r) => r[0] / r[1])).toFixed(2)}x`);
    }
    console.log(`| ${shape} | ${format} | ${m} | ${cells.join(' | ')} |`);
}
JS
