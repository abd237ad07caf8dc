// Shared by the tests: the module under test, a seeded generator and error assertions. The
// tests import the package by its name, so they run the same in the repository (a
// package's self-reference) and installed from the packed tarball into another project.
import assert from 'node:assert/strict';
import { load, TernError } from 'tern-wasm';

/** TERN_JS_VARIANT (set by scripts/test-wasm.sh) forces a build; unset, load() picks. */
export const loadTern = (options = {}) => load({ ...(process.env.TERN_JS_VARIANT ? { variant: process.env.TERN_JS_VARIANT } : {}), ...options });

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

/** Asserts that `f` throws a TernError with `code` and a message matching `message`. */
export function refused(f, code, message) {
    assert.throws(f, (e) => e instanceof TernError && e.code === code && message.test(e.message), `${code} ${message}`);
}

/** As `refused`, for a promise. */
export async function rejected(p, code, message) {
    await assert.rejects(p, (e) => e instanceof TernError && e.code === code && message.test(e.message), `${code} ${message}`);
}
