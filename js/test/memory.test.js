import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Format, TernError } from 'tern-wasm';
import { loadTern, values } from './helpers.js';
import { GGML, ggufParts } from './gguf.js';

test('1,000 calls do not grow wasm memory (buffers are freed or reused)', async () => {
    const tern = await loadTern();
    const [k, n] = [1024, 256];
    const w = tern.encode(Format.TQ2_0, values(n * k, 1, 0.02), n, k);
    const d = tern.dispatcher({ onEvent: () => {} });
    const x = values(4 * k, 2);
    const round = () => {
        const a = tern.encode(Format.F32, x, 4, k);
        d.matmul(a, w);
        d.matmulMany(a, [w, w]);
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

/** Bytes of wasm memory a loaded instance may use beside the file: the module's own data and
 *  stack (about 1.1 MiB), the load-time known-answer check, allocator slack, and one
 *  matmul's activation and output. */
const FIXED = 4 << 20;

/** A 33.6 MB GGUF of TQ2_0 weights the shapes of a 3B BitNet layer (7 of 6912 x 2560, one
 *  2560 x 2560), as parts: rows of one encoded 256 x 2560 tensor repeated, so that making
 *  it stays cheap. */
async function bigModel() {
    const maker = await loadTern();
    const tile = maker.encode(Format.TQ2_0, values(256 * 2560, 3, 0.02), 256, 2560).bytes();
    const tensor = (name, rows) => {
        const data = new Uint8Array((rows / 256) * tile.length);
        for (let at = 0; at < data.length; at += tile.length) data.set(tile, at);
        return { name, ggmlType: GGML.TQ2_0, shape: [2560, rows], data };
    };
    const tensors = Array.from({ length: 7 }, (_, i) => tensor(`blk.${i}.ffn_up.weight`, 6912));
    tensors.push(tensor('blk.0.attn_q.weight', 2560));
    return ggufParts([['general.architecture', 8, 'bitnet']], tensors);
}

const { parts, length } = await bigModel();

for (const [how, open] of [
    ['openGguf(Uint8Array)', (tern) => tern.openGguf(new Uint8Array(Buffer.concat(parts)))],
    ['readGguf(Blob)', (tern) => tern.readGguf(new Blob(parts))],
]) {
    test(`a ${(length / 1e6).toFixed(1)} MB GGUF through ${how}, every tensor wrapped: wasm memory < 1.2 x file + ${FIXED >> 20} MiB`, async (t) => {
        const tern = await loadTern();
        const start = tern.memoryBytes;
        const g = await open(tern);
        const tensors = g.tensors.map((_, i) => g.tensor(i));
        const a = tern.encode(Format.F32, values(2560, 4), 1, 2560);
        const d = tern.dispatcher();
        assert.equal(d.matmul(a, tensors[0]).length, 6912);
        const used = tern.memoryBytes;
        t.diagnostic(`file ${length} bytes; wasm memory ${start} bytes after load, ${used} with the file open and ${tensors.length} tensors wrapped (${(used / length).toFixed(3)} x the file)`);
        assert.ok(used < 1.2 * length + FIXED, `wasm memory ${used} bytes for a ${length}-byte file`);
        for (const h of [...tensors, a, d, g]) h.close();
    });
}
