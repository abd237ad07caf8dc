import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { Format, TernError, VARIANTS } from '../src/index.js';
import { loadTern, values } from './helpers.js';

const tern = await loadTern();
const TERNARY = [Format.TQ1_0, Format.TQ2_0, Format.BITNET_B1_58];
const fixture = (name) => readFile(new URL(`../../tests/fixtures/gguf/${name}`, import.meta.url));

test('load picks the best build this engine runs as specified', async () => {
    // scripts/test-wasm.sh says what to expect of each engine it runs these tests on.
    const want = process.env.TERN_JS_EXPECT_VARIANT;
    if (want) assert.equal(tern.variant, want, JSON.stringify(tern.skipped));
    assert.ok(Object.hasOwn(VARIANTS, tern.variant));
    for (const { variant, reason } of tern.skipped) {
        assert.match(reason, /does not validate|otherwise than specified/);
        // Forcing a build the engine cannot run is an error, not a wrong answer.
        await assert.rejects(loadTern({ variant }), /cannot be used/);
    }
});

test('encode, bytes and decode round trip', () => {
    const x = values(2 * 256, 1);
    const t = tern.encode(Format.TQ2_0, x, 2, 256);
    assert.deepEqual([t.formatName, t.rows, t.cols, t.byteLength], ['TQ2_0', 2, 256, 2 * 66]);
    const again = tern.wrap(Format.TQ2_0, t.bytes(), 2, 256);
    assert.deepEqual(again.decode(), t.decode());
    const f32 = tern.encode(Format.F32, x, 2, 256);
    assert.deepEqual(f32.decode(), x);
    for (const h of [t, again, f32]) h.close();
});

test('matmul: the best kernel, events after the call, parity with the reference kernel', () => {
    const k = 512;
    for (const format of TERNARY) {
        for (const m of [1, 2, 7, 33]) {
            const n = 40;
            const w = tern.encode(format, values(n * k, 7 + m, 0.02), n, k);
            const a = tern.encode(Format.F32, values(m * k, 3 + m), m, k);
            const events = [];
            const best = tern.dispatcher({ onEvent: (e) => events.push(e) });
            const reference = tern.dispatcher({ kernel: 'bitnet_gemv/reference' });
            const got = best.matmul(a, w);
            const want = reference.matmul(a, w);
            assert.deepEqual(
                events.map((e) => [e.kind, e.name, e.from, e.to, e.rows, e.cols]),
                [
                    ['ADAPTER_INSERTED', 'requantize-i8-absmax', 'F32', 'I8_ABSMAX', m, k],
                    ['KERNEL_SELECTED', VARIANTS[tern.variant].kernel, w.formatName, 'I8_ABSMAX', m, n],
                ],
            );
            assert.equal(events[1].bytes, w.byteLength);
            assert.ok(events.every((e) => e.nanos >= 0));
            // The README's tolerance: max |got - want| / max(1, |want|) <= 1e-5.
            for (let i = 0; i < got.length; i++) {
                const err = Math.abs(got[i] - want[i]) / Math.max(1, Math.abs(want[i]));
                assert.ok(err <= 1e-5, `${w.formatName} m=${m} [${i}]: ${got[i]} vs ${want[i]}`);
            }
            for (const h of [w, a, best, reference]) h.close();
        }
    }
});

test('GGUF: tensors listed, wrapped with the ggml shape, run through the dispatcher', async () => {
    const g = tern.openGguf(await fixture('tiny_bitnet.gguf'));
    const ternary = g.tensors.filter((t) => t.format === Format.TQ1_0 || t.format === Format.TQ2_0);
    assert.ok(ternary.length >= 2, JSON.stringify(g.tensors));
    for (const info of ternary) {
        const w = g.tensor(info.name);
        assert.deepEqual([w.rows, w.cols, w.byteLength], [info.shape[1], info.shape[0], info.byteLength]);
        const a = tern.encode(Format.F32, values(w.cols, 5), 1, w.cols);
        const d = tern.dispatcher();
        assert.equal(d.matmul(a, w).length, w.rows);
        for (const h of [w, a, d]) h.close();
    }
    g.close();
});

test('the environment reaches tern: TERN_KERNEL forces a kernel, and load() still checks its build', async () => {
    const forced = await loadTern({ env: { TERN_KERNEL: 'bitnet_gemv/reference' } });
    assert.equal(forced.variant, tern.variant);
    const events = [];
    const w = forced.encode(Format.TQ2_0, values(8 * 256, 4), 8, 256);
    const a = forced.encode(Format.F32, values(256, 5), 1, 256);
    forced.dispatcher({ onEvent: (e) => events.push(e.name) }).matmul(a, w);
    assert.deepEqual(events, ['requantize-i8-absmax', 'bitnet_gemv/reference']);
    // A name tern does not know is refused when a dispatcher reads it.
    const unknown = await loadTern({ env: { TERN_KERNEL: 'bitnet_gemv/nope' } });
    refused(() => unknown.dispatcher(), 'TERN_ERR_UNKNOWN_KERNEL', /bitnet_gemv\/nope/);
});

/** Asserts that `f` throws a TernError with `code` and a message matching `message`. */
function refused(f, code, message) {
    assert.throws(f, (e) => e instanceof TernError && e.code === code && message.test(e.message), code);
}

test('bad input: typed errors, checked before calling into wasm', () => {
    const w = tern.encode(Format.TQ2_0, values(4 * 256, 2), 4, 256);
    const a = tern.encode(Format.F32, values(256, 3), 1, 256);
    const d = tern.dispatcher();
    refused(() => tern.encode(99, values(4, 1), 2, 2), 'TERN_ERR_UNKNOWN_FORMAT', /format must be one of/);
    refused(() => tern.encode(Format.F32, values(5, 1), 2, 2), 'TERN_ERR_LENGTH_MISMATCH', /data holds 5 floats, rows x cols = 4/);
    refused(() => tern.encode(Format.F32, values(4, 1), 0, 4), 'TERN_ERR_INVALID_SHAPE', /rows must be a positive integer/);
    refused(() => tern.encode(Format.F32, values(4, 1), 2.5, 4), 'TERN_ERR_INVALID_SHAPE', /rows/);
    refused(() => tern.encode(Format.F32, values(4, 1), 2 ** 20, 2 ** 20), 'TERN_ERR_SIZE_OVERFLOW', /does not fit/);
    assert.throws(() => tern.encode(Format.F32, [1, 2, 3, 4], 2, 2), TypeError);
    assert.throws(() => tern.wrap(Format.TQ2_0, values(66, 1), 1, 256), TypeError);
    refused(() => d.matmul(tern.encode(Format.F32, values(512, 1), 1, 512), w), 'TERN_ERR_SHAPE_MISMATCH', /act has 512 cols, weight 256/);
    refused(() => d.matmul(a, w, new Float32Array(3)), 'TERN_ERR_LENGTH_MISMATCH', /out holds 3 floats/);
    assert.throws(() => d.matmul(a, w, new Float64Array(4)), TypeError);
    assert.throws(() => d.matmul(a, {}), TypeError);
    assert.throws(() => tern.dispatcher({ onEvent: 3 }), TypeError);
    // Refused by tern itself, with its status and message.
    refused(() => tern.encode(Format.TQ2_0, values(100, 1), 1, 100), 'TERN_ERR_INVALID_SHAPE', /multiple of the 256-element block/);
    refused(() => tern.encode(Format.TQ2_0, Float32Array.of(...values(255, 1), NaN), 1, 256), 'TERN_ERR_NON_FINITE', /element 255/);
    refused(() => tern.wrap(Format.TQ2_0, new Uint8Array(65), 1, 256), 'TERN_ERR_LENGTH_MISMATCH', /66 required/);
    refused(() => tern.dispatcher({ kernel: 'bitnet_gemv/nope' }), 'TERN_ERR_UNKNOWN_KERNEL', /bitnet_gemv\/nope/);
    refused(() => tern.dispatcher({ threads: 2 }), 'TERN_ERR_INVALID_ARGUMENT', /no threads: pass 0 or 1/);
    // Closed handles.
    const closed = tern.encode(Format.F32, values(256, 1), 1, 256);
    closed.close();
    closed.close();
    refused(() => d.matmul(closed, w), 'TERN_ERR_INVALID_ARGUMENT', /was closed/);
    for (const h of [w, a, d]) h.close();
});

test('corrupt and truncated GGUF files are errors with the reader\'s message', async () => {
    const good = await fixture('tiny_bitnet.gguf');
    refused(() => tern.openGguf(Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8)), 'TERN_ERR_INVALID_FILE', /not a GGUF file: magic/);
    refused(() => tern.openGguf(new Uint8Array(0)), 'TERN_ERR_INVALID_FILE', /truncated at offset 0/);
    for (const len of [4, 23, 100, 1000, good.length - 1]) {
        refused(() => tern.openGguf(good.subarray(0, len)), 'TERN_ERR_INVALID_FILE', /truncated|past the end|absurd/);
    }
    const absurd = Uint8Array.from(good);
    new DataView(absurd.buffer).setBigUint64(8, 1n << 60n, true); // tensor count
    refused(() => tern.openGguf(absurd), 'TERN_ERR_INVALID_FILE', /truncated or corrupt: tensor count/);
    const g = tern.openGguf(good);
    refused(() => g.tensor('no such tensor'), 'TERN_ERR_NOT_FOUND', /no tensor named "no such tensor"/);
    refused(() => g.tensor(99), 'TERN_ERR_OUT_OF_BOUNDS', /tensor index 99 is not in 0..5/);
    g.close();
});
