// Shared by the tests: the module under test and a seeded generator.
import { load } from '../src/index.js';

/** TERN_JS_VARIANT (set by scripts/test-wasm.sh) forces a build; unset, load() picks. */
export const loadTern = (options = {}) => load({ variant: process.env.TERN_JS_VARIANT || undefined, ...options });

/** The kernel each build's dispatcher must pick for ternary weights. */
export const BEST_KERNEL = { 'relaxed-simd128': 'bitnet_gemv/wasm-relaxed-simd128', simd128: 'bitnet_gemv/wasm-simd128' };

/** Deterministic normal-ish floats (xorshift32, sum of uniforms). */
export function values(n, seed, scale = 1) {
    let s = seed >>> 0 || 1;
    const next = () => {
        s ^= s << 13;
        s >>>= 0;
        s ^= s >>> 17;
        s ^= s << 5;
        s >>>= 0;
        return s / 2 ** 32;
    };
    return Float32Array.from({ length: n }, () => (next() + next() + next() - 1.5) * scale);
}
