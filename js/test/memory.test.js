import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Format, TernError } from '../src/index.js';
import { loadTern, values } from './helpers.js';

test('1,000 calls do not grow wasm memory (buffers are freed or reused)', async () => {
    const tern = await loadTern();
    const [k, n] = [1024, 256];
    const w = tern.encode(Format.TQ2_0, values(n * k, 1, 0.02), n, k);
    const d = tern.dispatcher({ onEvent: () => {} });
    const x = values(4 * k, 2);
    const round = () => {
        const a = tern.encode(Format.F32, x, 4, k);
        d.matmul(a, w);
        a.close();
        // A refused call on the way: its error path must not leak either.
        assert.throws(() => tern.encode(Format.TQ2_0, x.subarray(0, 100), 1, 100), TernError);
    };
    for (let i = 0; i < 20; i++) round();
    const before = tern.memoryBytes;
    for (let i = 0; i < 1000; i++) round();
    assert.equal(tern.memoryBytes, before, `wasm memory grew from ${before} to ${tern.memoryBytes} bytes`);
    w.close();
    d.close();
});
