// Shared by the tests: the module under test and a seeded generator.
import { load } from '../src/index.js';

/** TERN_JS_VARIANT (set by scripts/test-wasm.sh) forces a build; unset, load() picks. */
export const loadTern = (options = {}) => load({ variant: process.env.TERN_JS_VARIANT || undefined, ...options });


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
