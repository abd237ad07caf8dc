// The wasm GEMMs against the GEMVs they replace, through the JS package (js/src, the
// modules in js/dist: `npm run build` in js/), for shapes that node 22 cannot run through
// node:wasi (`tern bench` at 6912x2560 crashes it; see docs/wasm.md). Both builds are loaded
// into one process; each round times, for every build and format, the build's GEMV and GEMM
// forced by name on the same weight and activations (F32, so the requantization is in both).
// Time is the process's CPU time (process.cpuUsage) per call, median of the calls; the GEMM's
// output must agree with the GEMV's within 1e-5 (both are checked against the reference
// kernel by the test suite). Prints a markdown table of medians over the rounds and of the
// per-round ratios GEMV time / GEMM time.
//
//   node scripts/wasm/bench-gemm-js.mjs [--shape NxK] [--tokens M] [--rounds N] [--calls N]
//   (default 6912x2560, 64 tokens, 3 rounds, 5 calls per kernel and round)
import { load, Format, VARIANTS } from '../../js/src/index.js';

const opt = { shape: '6912x2560', tokens: '64', rounds: '3', calls: '5' };
for (let i = 2; i < process.argv.length; i += 2) {
    const key = process.argv[i].replace(/^--/, '');
    if (!Object.hasOwn(opt, key) || process.argv[i + 1] === undefined) {
        console.error('usage: bench-gemm-js.mjs [--shape NxK] [--tokens M] [--rounds N] [--calls N]');
        process.exit(2);
    }
    opt[key] = process.argv[i + 1];
}
const [n, k] = opt.shape.split('x').map(Number);
const [m, rounds, calls] = [opt.tokens, opt.rounds, opt.calls].map(Number);

let seed = 42;
const unit = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1;
const weights = Float32Array.from({ length: n * k }, unit);
const act = Float32Array.from({ length: m * k }, unit);
const median = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    const h = s.length >> 1;
    return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
};
const cpuNs = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) * 1000;
};

const formats = ['TQ1_0', 'TQ2_0', 'BITNET_B1_58'];
const variants = ['simd128', 'relaxed-simd128'];
const builds = {};
for (const variant of variants) {
    const tern = await load({ variant });
    const x = tern.encode(Format.F32, act, m, k);
    const w = Object.fromEntries(formats.map((f) => [f, tern.encode(Format[f], weights, n, k)]));
    const { kernel, gemm } = VARIANTS[variant];
    builds[variant] = { x, w, gemv: tern.dispatcher({ kernel }), gemm: tern.dispatcher({ kernel: gemm }) };
}
// times[variant][format][kind]: one median per round.
const times = Object.fromEntries(variants.map((v) => [v, Object.fromEntries(formats.map((f) => [f, { gemv: [], gemm: [] }]))]));
for (let round = 1; round <= rounds; round++) {
    console.error(`bench-gemm-js: round ${round} of ${rounds}`);
    for (const variant of variants) {
        const b = builds[variant];
        for (const format of formats) {
            const outs = {};
            for (const kind of ['gemv', 'gemm']) {
                outs[kind] = b[kind].matmul(b.x, b.w[format]); // warm-up, and the output compared
                const ns = [];
                for (let c = 0; c < calls; c++) {
                    const t = cpuNs();
                    b[kind].matmul(b.x, b.w[format]);
                    ns.push(cpuNs() - t);
                }
                times[variant][format][kind].push(median(ns));
            }
            for (let i = 0; i < outs.gemv.length; i++) {
                const [g, v] = [outs.gemm[i], outs.gemv[i]];
                if (!(Math.abs(g - v) <= 1e-5 * Math.max(1, Math.abs(v)))) {
                    throw new Error(`${variant} ${format}: the GEMM gives ${g} where the GEMV gives ${v} (output ${i})`);
                }
            }
        }
    }
}
const ms = (x) => (x / 1e6).toFixed(2);
console.log(`| ${opt.shape}, m = ${m} | simd128 GEMV | simd128 GEMM | simd128 GEMV / GEMM | relaxed GEMV | relaxed GEMM | relaxed GEMV / GEMM |`);
console.log('|---|---|---|---|---|---|---|');
for (const format of formats) {
    const cells = variants.flatMap((variant) => {
        const { gemv, gemm } = times[variant][format];
        return [`${ms(median(gemv))} ms`, `${ms(median(gemm))} ms`, `${median(gemv.map((v, i) => v / gemm[i])).toFixed(2)}x`];
    });
    console.log(`| ${format} | ${cells.join(' | ')} |`);
}
