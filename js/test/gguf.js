// GGUF files for the tests and the page, written here so that the package's tests need
// nothing from the repository: a GGUF v3 writer (header, metadata of every value type,
// tensor infos, 32-byte aligned data) and the model the tests use. Ternary tensor bytes
// come from tern's own encoder (byte-identical to ggml's; the Rust suite checks that
// against files the gguf PyPI package wrote).
import { Format } from 'tern-wasm';
import { values } from './helpers.js';

/** GGUF value types by name (their ids in the file). */
export const T = Object.freeze({ u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10, i64: 11, f64: 12 });
/** ggml's type ids of tern's formats. */
export const GGML = Object.freeze({ F32: 0, TQ1_0: 34, TQ2_0: 35 });
const ALIGNMENT = 32;

/** Little-endian bytes, appended. */
class Writer {
    parts = [];
    length = 0;

    bytes(b) {
        this.parts.push(b);
        this.length += b.length;
    }

    scalar(type, v) {
        const [size, write] = {
            [T.u8]: [1, (d) => d.setUint8(0, v)],
            [T.i8]: [1, (d) => d.setInt8(0, v)],
            [T.u16]: [2, (d) => d.setUint16(0, v, true)],
            [T.i16]: [2, (d) => d.setInt16(0, v, true)],
            [T.u32]: [4, (d) => d.setUint32(0, v, true)],
            [T.i32]: [4, (d) => d.setInt32(0, v, true)],
            [T.f32]: [4, (d) => d.setFloat32(0, v, true)],
            [T.bool]: [1, (d) => d.setUint8(0, v ? 1 : 0)],
            [T.u64]: [8, (d) => d.setBigUint64(0, BigInt(v), true)],
            [T.i64]: [8, (d) => d.setBigInt64(0, BigInt(v), true)],
            [T.f64]: [8, (d) => d.setFloat64(0, v, true)],
        }[type];
        const b = new Uint8Array(size);
        write(new DataView(b.buffer));
        this.bytes(b);
    }

    string(s) {
        const b = new TextEncoder().encode(s);
        this.scalar(T.u64, b.length);
        this.bytes(b);
    }

    /** A value of `type`; an array is [elementType, elements]. */
    value(type, v) {
        if (type === T.string) return this.string(v);
        if (type !== T.array) return this.scalar(type, v);
        const [elem, items] = v;
        this.scalar(T.u32, elem);
        this.scalar(T.u64, items.length);
        for (const item of items) this.value(elem, item);
    }

    pad(alignment) {
        this.bytes(new Uint8Array((alignment - (this.length % alignment)) % alignment));
    }
}

/**
 * A GGUF v3 file. `metadata`: [key, type, value] (T ids; arrays [elementType, items]);
 * `tensors`: { name, ggmlType, shape (ne, ne0 first), data (Uint8Array) }. Returns the
 * parts (Uint8Arrays, for a Blob without one big copy) and their total length.
 */
export function ggufParts(metadata, tensors) {
    const w = new Writer();
    w.bytes(new TextEncoder().encode('GGUF'));
    w.scalar(T.u32, 3);
    w.scalar(T.u64, tensors.length);
    w.scalar(T.u64, metadata.length);
    for (const [key, type, v] of metadata) {
        w.string(key);
        w.scalar(T.u32, type);
        w.value(type, v);
    }
    let offset = 0;
    for (const t of tensors) {
        w.string(t.name);
        w.scalar(T.u32, t.shape.length);
        for (const d of t.shape) w.scalar(T.u64, d);
        w.scalar(T.u32, t.ggmlType);
        w.scalar(T.u64, offset);
        offset += t.data.length + ((ALIGNMENT - (t.data.length % ALIGNMENT)) % ALIGNMENT);
    }
    for (const t of tensors) {
        w.pad(ALIGNMENT);
        w.bytes(t.data);
    }
    return { parts: w.parts, length: w.length };
}

/** The parts of ggufParts joined into one Uint8Array. */
export function gguf(metadata, tensors) {
    const { parts, length } = ggufParts(metadata, tensors);
    const out = new Uint8Array(length);
    let at = 0;
    for (const p of parts) {
        out.set(p, at);
        at += p.length;
    }
    return out;
}

/** The metadata of the tests' model: one entry of every value type. */
export const MODEL_METADATA = Object.freeze([
    ['general.architecture', T.string, 'bitnet'],
    ['general.name', T.string, 'tern fixture ✓'],
    ['bitnet.block_count', T.u32, 1],
    ['bitnet.rms_eps', T.f32, 1e-5],
    ['tern.fixture', T.bool, true],
    ['tern.u8', T.u8, 200],
    ['tern.i8', T.i8, -100],
    ['tern.u16', T.u16, 60000],
    ['tern.i16', T.i16, -30000],
    ['tern.i32', T.i32, -2000000000],
    ['tern.u64', T.u64, 2n ** 63n + 5n],
    ['tern.i64', T.i64, -(2n ** 62n)],
    ['tern.f64', T.f64, Math.PI],
    ['tokenizer.ggml.tokens', T.array, [T.string, ['<s>', '</s>', 'hello', 'world']]],
    ['tern.scores', T.array, [T.f32, [0.5, -1.25, 2.0]]],
    ['tern.nested', T.array, [T.array, [[T.u8, [1, 2]], [T.u8, []]]]],
]);

/** The tests' model (the shapes of tests/fixtures/gguf/tiny_bitnet.gguf): [name, ggml type, rows, cols]. */
export const MODEL_TENSORS = Object.freeze([
    ['token_embd.weight', GGML.F32, 8, 256],
    ['blk.0.attn_q.weight', GGML.TQ2_0, 64, 512],
    ['blk.0.ffn_down.weight', GGML.TQ1_0, 32, 768],
    ['blk.0.ffn_up.weight', GGML.TQ2_0, 48, 256],
    ['output_norm.weight', GGML.F32, 1, 256],
]);

/** The tests' model as GGUF bytes, its tensors encoded by `tern`. */
export function model(tern) {
    const tensors = MODEL_TENSORS.map(([name, ggmlType, rows, cols], i) => {
        const format = { [GGML.F32]: Format.F32, [GGML.TQ1_0]: Format.TQ1_0, [GGML.TQ2_0]: Format.TQ2_0 }[ggmlType];
        const t = tern.encode(format, values(rows * cols, 11 + i, ggmlType === GGML.F32 ? 1 : 0.02), rows, cols);
        const data = t.bytes();
        t.close();
        return { name, ggmlType, shape: rows === 1 ? [cols] : [cols, rows], data };
    });
    return gguf(MODEL_METADATA, tensors);
}
