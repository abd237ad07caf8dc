// tern for JavaScript: the wasm build of tern (tern_js.wasm, from js/wasm) behind a small
// API for node and the browser. Arguments are checked here, before anything is copied into
// wasm; tern checks them again. Every failure is a TernError carrying tern's status name.
import { wasiImports } from './wasi.js';

/** tern's format ids (stable). */
export const Format = Object.freeze({ F32: 1, TQ1_0: 2, TQ2_0: 3, BITNET_B1_58: 4, I8_ABSMAX: 5 });
const FORMAT_NAMES = Object.fromEntries(Object.entries(Format).map(([k, v]) => [v, k]));
const EVENT_KINDS = { 1: 'ADAPTER_INSERTED', 2: 'KERNEL_SELECTED' };

/** The two builds, best first: their files and the kernel each one's dispatcher picks. */
export const VARIANTS = Object.freeze({
    'relaxed-simd128': Object.freeze({ file: 'tern-relaxed-simd128.wasm', kernel: 'bitnet_gemv/wasm-relaxed-simd128' }),
    simd128: Object.freeze({ file: 'tern-simd128.wasm', kernel: 'bitnet_gemv/wasm-simd128' }),
});

/** A refused or failed call: `code` is tern's status name, `status` its number. */
export class TernError extends Error {
    constructor(code, status, message) {
        super(`${code}: ${message}`);
        this.name = 'TernError';
        this.code = code;
        this.status = status;
    }
}

// The statuses the checks in this file raise (their numbers are tern's, include/tern.h).
const STATUS = {
    TERN_ERR_UNKNOWN_FORMAT: 2,
    TERN_ERR_INVALID_SHAPE: 3,
    TERN_ERR_SIZE_OVERFLOW: 4,
    TERN_ERR_LENGTH_MISMATCH: 5,
    TERN_ERR_OUT_OF_BOUNDS: 9,
    TERN_ERR_SHAPE_MISMATCH: 11,
    TERN_ERR_INVALID_ARGUMENT: 17,
    TERN_ERR_PANIC: 18,
    TERN_ERR_NOT_FOUND: 19,
};

function refuse(code, message) {
    return new TernError(code, STATUS[code], message);
}

function checkDim(name, v) {
    if (!Number.isSafeInteger(v) || v <= 0) {
        throw refuse('TERN_ERR_INVALID_SHAPE', `${name} must be a positive integer, got ${v}`);
    }
}

function checkFormat(format) {
    if (!(format in FORMAT_NAMES)) {
        throw refuse('TERN_ERR_UNKNOWN_FORMAT', `format must be one of ${Object.values(Format).join(', ')}, got ${format}`);
    }
}

function checkShape(rows, cols) {
    checkDim('rows', rows);
    checkDim('cols', cols);
    if (rows * cols > 0xffffffff) {
        throw refuse('TERN_ERR_SIZE_OVERFLOW', `rows x cols = ${rows * cols} does not fit wasm32 memory`);
    }
}

async function fetchBytes(url) {
    if (url.protocol === 'file:') {
        const { readFile } = await import('node:fs/promises');
        return readFile(url);
    }
    const response = await fetch(url);
    if (!response.ok) throw new Error(`fetching ${url}: HTTP ${response.status}`);
    return new Uint8Array(await response.arrayBuffer());
}

/**
 * Loads tern: the relaxed-SIMD build if this engine validates it and computes it as
 * specified (a known-answer check against tern's reference kernel, in the module), else the
 * SIMD128 one. `options.variant` forces one; `options.baseUrl` is where the .wasm files are
 * (default: ../dist/ next to this file); `options.env` the environment tern sees (e.g.
 * TERN_KERNEL). The builds passed over are in the result's `skipped`, with the reason.
 */
export async function load(options = {}) {
    const base = options.baseUrl ?? new URL('../dist/', import.meta.url);
    const names = options.variant ? [options.variant] : Object.keys(VARIANTS);
    const skipped = [];
    for (const variant of names) {
        if (!Object.hasOwn(VARIANTS, variant)) {
            throw new TypeError(`unknown variant ${variant}: ${Object.keys(VARIANTS).join(' or ')}`);
        }
        const { file } = VARIANTS[variant];
        const bytes = await fetchBytes(new URL(file, base));
        let reason = null;
        if (WebAssembly.validate(bytes)) {
            const tern = await Tern.instantiate(await WebAssembly.compile(bytes), variant, options.env ?? {});
            try {
                reason = tern._knownAnswerCheck();
            } catch (e) {
                reason = `its known-answer check failed: ${e.message}`;
            }
            if (reason === null) {
                tern.skipped = skipped;
                return tern;
            }
        } else {
            reason = 'this engine does not validate it';
        }
        if (options.variant) throw new Error(`the ${variant} build (${file}) cannot be used: ${reason}`);
        skipped.push({ variant, reason });
    }
    throw new Error(`no tern build works here: ${skipped.map((s) => `${s.variant}: ${s.reason}`).join('; ')}`);
}

export class Tern {
    #x;
    #memory;
    #events = [];
    #dead = null;
    #decoder = new TextDecoder();

    /** Use `load()`; this is for a module compiled elsewhere. */
    static async instantiate(module, variant, env = {}) {
        const tern = new Tern();
        const imports = {
            wasi_snapshot_preview1: wasiImports(module, () => tern.#memory, env),
            tern_js: {
                event: (kind, namePtr, nameLen, from, to, rows, cols, bytes, nanos) => {
                    tern.#events.push({
                        kind: EVENT_KINDS[kind] ?? `unknown(${kind})`,
                        name: tern.#string(namePtr, nameLen),
                        from: FORMAT_NAMES[from] ?? `unknown(${from})`,
                        to: FORMAT_NAMES[to] ?? `unknown(${to})`,
                        rows,
                        cols,
                        bytes,
                        nanos,
                    });
                },
            },
        };
        const instance = await WebAssembly.instantiate(module, imports);
        tern.#x = instance.exports;
        tern.#memory = instance.exports.memory;
        tern.variant = variant;
        tern.skipped = [];
        return tern;
    }

    /** Bytes of wasm memory (grows, never shrinks; tests watch it for leaks). */
    get memoryBytes() {
        return this.#memory.buffer.byteLength;
    }

    #string(ptr, len) {
        return this.#decoder.decode(new Uint8Array(this.#memory.buffer, ptr, len));
    }

    /** Runs `f` on the exports; a trap (a bug in tern: wasm panics abort) kills the instance. */
    #call(f) {
        if (this.#dead) throw this.#dead;
        try {
            return f(this.#x);
        } catch (e) {
            if (e instanceof WebAssembly.RuntimeError) {
                this.#dead = refuse('TERN_ERR_PANIC', `tern trapped (${e.message}); this instance is unusable, load() a new one`);
                throw this.#dead;
            }
            throw e;
        }
    }

    /** Throws the TernError of a non-zero status. */
    #check(status) {
        if (status === 0) return;
        const [code] = this.#cstring(this.#x.tjs_status_str(status)).split(':');
        const message = this.#string(this.#x.tjs_last_error(), this.#x.tjs_last_error_len());
        throw new TernError(code, status, message);
    }

    #cstring(ptr) {
        const bytes = new Uint8Array(this.#memory.buffer, ptr);
        return this.#decoder.decode(bytes.subarray(0, bytes.indexOf(0)));
    }

    /** Runs `f(ptr)` with `len` bytes of scratch wasm memory, freed afterwards. */
    #scratch(len, f) {
        const ptr = this.#x.tjs_alloc(len);
        if (ptr === 0) throw refuse('TERN_ERR_INVALID_ARGUMENT', `wasm memory cannot hold ${len} more bytes`);
        try {
            return f(ptr);
        } finally {
            this.#x.tjs_free(ptr, len);
        }
    }

    /** `ptr` of a scratch buffer holding a copy of `bytes` (a typed array), for `f`. */
    #withCopy(bytes, f) {
        const src = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
        return this.#scratch(src.length, (ptr) => {
            new Uint8Array(this.#memory.buffer, ptr, src.length).set(src);
            return f(ptr);
        });
    }

    /** A new handle from `f(outPtr)`. */
    #handle(f) {
        return this.#scratch(4, (out) => {
            this.#check(f(out));
            return new DataView(this.#memory.buffer).getUint32(out, true);
        });
    }

    /** Encodes `rows x cols` floats (row-major) into a tensor of `format`. */
    encode(format, data, rows, cols) {
        checkFormat(format);
        if (!(data instanceof Float32Array)) throw new TypeError('data must be a Float32Array');
        checkShape(rows, cols);
        if (data.length !== rows * cols) {
            throw refuse('TERN_ERR_LENGTH_MISMATCH', `data holds ${data.length} floats, rows x cols = ${rows * cols}`);
        }
        const h = this.#call((x) =>
            this.#withCopy(data, (ptr) => this.#handle((out) => x.tjs_tensor_encode(format, ptr, data.length, rows, cols, out))),
        );
        return new Tensor(this, h);
    }

    /** A tensor over a copy of `bytes`, already encoded in `format` (e.g. GGUF tensor data). */
    wrap(format, bytes, rows, cols) {
        checkFormat(format);
        if (!(bytes instanceof Uint8Array)) throw new TypeError('bytes must be a Uint8Array');
        checkShape(rows, cols);
        const h = this.#call((x) =>
            this.#withCopy(bytes, (ptr) => this.#handle((out) => x.tjs_tensor_wrap(format, ptr, bytes.length, rows, cols, out))),
        );
        return new Tensor(this, h);
    }

    /** Parses GGUF file bytes with tern's checked reader. */
    openGguf(bytes) {
        if (!(bytes instanceof Uint8Array)) throw new TypeError('bytes must be a Uint8Array');
        const h = this.#call((x) => {
            const ptr = x.tjs_alloc(bytes.length);
            if (ptr === 0) throw refuse('TERN_ERR_INVALID_ARGUMENT', `wasm memory cannot hold a ${bytes.length}-byte file`);
            new Uint8Array(this.#memory.buffer, ptr, bytes.length).set(bytes);
            // tjs_gguf_open takes the buffer over, on success and on failure.
            return this.#handle((out) => x.tjs_gguf_open(ptr, bytes.length, out));
        });
        return new GgufFile(this, h);
    }

    /** A dispatcher; `kernel` forces a kernel by name, `onEvent` receives its events. */
    dispatcher({ kernel = '', onEvent = null, threads = 1 } = {}) {
        if (typeof kernel !== 'string') throw new TypeError('kernel must be a string');
        if (onEvent !== null && typeof onEvent !== 'function') throw new TypeError('onEvent must be a function');
        const name = new TextEncoder().encode(kernel);
        const h = this.#call((x) =>
            this.#withCopy(name, (ptr) => this.#handle((out) => x.tjs_dispatcher_new(ptr, name.length, threads, out))),
        );
        return new Dispatcher(this, h, onEvent);
    }

    /**
     * null if this build's kernel agrees with tern's reference kernel on a small
     * known case (every ternary format, activations of both signs), else why not. Engines
     * have shipped relaxed SIMD that validates but computes otherwise: node 20's
     * --experimental-wasm-relaxed-simd gets `i32x4.relaxed_dot_i8x16_i7x16_add` wrong.
     */
    _knownAnswerCheck() {
        const [n, k] = [4, 256];
        const w = Float32Array.from({ length: n * k }, (_, i) => (((i * 7919) % 201) - 100) / 100);
        const x = Float32Array.from({ length: k }, (_, i) => (((i * 104729) % 255) - 127) / 127);
        // The build's own kernel by name, whatever TERN_KERNEL in `env` says.
        const best = this.dispatcher({ kernel: VARIANTS[this.variant].kernel });
        const reference = this.dispatcher({ kernel: 'bitnet_gemv/reference' });
        const act = this.encode(Format.F32, x, 1, k);
        try {
            for (const format of [Format.TQ1_0, Format.TQ2_0, Format.BITNET_B1_58]) {
                const weight = this.encode(format, w, n, k);
                const [got, want] = [best.matmul(act, weight), reference.matmul(act, weight)];
                weight.close();
                for (let i = 0; i < n; i++) {
                    if (!(Math.abs(got[i] - want[i]) <= 1e-5 * Math.max(1, Math.abs(want[i])))) {
                        return `its kernel gives ${got[i]} where the reference kernel gives ${want[i]} (${FORMAT_NAMES[format]}, row ${i}): the engine computes an instruction otherwise than specified`;
                    }
                }
            }
            return null;
        } finally {
            for (const h of [act, best, reference]) h.close();
        }
    }

    // Internal, for Tensor, GgufFile and Dispatcher.

    _release(h) {
        this.#call((x) => x.tjs_release(h));
    }

    _tensorInfo(h) {
        return this.#call(() =>
            this.#scratch(20, (out) => {
                this.#check(this.#x.tjs_tensor_info(h, out));
                const v = new Uint32Array(this.#memory.buffer, out, 5);
                return { format: v[0], rows: v[1], cols: v[2], byteLength: v[3], ptr: v[4] };
            }),
        );
    }

    _tensorBytes(h) {
        const info = this._tensorInfo(h);
        return new Uint8Array(this.#memory.buffer, info.ptr, info.byteLength).slice();
    }

    _decode(h, rows, cols) {
        const n = rows * cols;
        return this.#call((x) =>
            this.#scratch(4 * n, (ptr) => {
                this.#check(x.tjs_tensor_decode(h, ptr, n));
                return new Float32Array(this.#memory.buffer, ptr, n).slice();
            }),
        );
    }

    _matmul(d, act, weight, out, onEvent) {
        const n = out.length;
        this.#events.length = 0;
        try {
            this.#call((x) =>
                this.#scratch(4 * n, (ptr) => {
                    this.#check(x.tjs_matmul(d, act, weight, ptr, n));
                    out.set(new Float32Array(this.#memory.buffer, ptr, n));
                }),
            );
        } finally {
            // After the call, so a callback may call tern again.
            const events = this.#events.splice(0);
            if (onEvent) for (const e of events) onEvent(e);
        }
    }

    _ggufTensors(h) {
        return this.#call((x) => {
            const count = this.#scratch(4, (out) => {
                this.#check(x.tjs_gguf_count(h, out));
                return new DataView(this.#memory.buffer).getUint32(out, true);
            });
            return this.#scratch(88, (out) => {
                const tensors = [];
                for (let i = 0; i < count; i++) {
                    this.#check(x.tjs_gguf_info(h, i, out));
                    const v = new Float64Array(this.#memory.buffer, out, 11);
                    tensors.push({
                        name: this.#string(v[9], v[10]),
                        ggmlType: v[0],
                        format: v[1] === 0 ? null : v[1],
                        shape: Array.from(v.subarray(3, 3 + v[2])),
                        offset: v[7],
                        byteLength: v[8] < 0 ? null : v[8],
                    });
                }
                return tensors;
            });
        });
    }

    _ggufWrap(h, index) {
        return new Tensor(this, this.#call((x) => this.#handle((out) => x.tjs_gguf_wrap(h, index, out))));
    }
}

/** Something that holds a handle: `close()` frees it (also `using`). */
class Handle {
    #tern;
    #h;

    constructor(tern, h) {
        this.#tern = tern;
        this.#h = h;
    }

    get _tern() {
        return this.#tern;
    }

    get _h() {
        if (this.#h === 0) throw refuse('TERN_ERR_INVALID_ARGUMENT', `this ${this.constructor.name} was closed`);
        return this.#h;
    }

    close() {
        if (this.#h !== 0) this.#tern._release(this.#h);
        this.#h = 0;
    }

    [Symbol.dispose ?? Symbol.for('Symbol.dispose')]() {
        this.close();
    }
}

export class Tensor extends Handle {
    constructor(tern, h) {
        super(tern, h);
        const { format, rows, cols, byteLength } = tern._tensorInfo(h);
        Object.assign(this, { format, formatName: FORMAT_NAMES[format], rows, cols, byteLength });
    }

    /** A copy of the encoded bytes. */
    bytes() {
        return this._tern._tensorBytes(this._h);
    }

    /** The values as floats (row-major). */
    decode() {
        return this._tern._decode(this._h, this.rows, this.cols);
    }
}

export class Dispatcher extends Handle {
    #onEvent;

    constructor(tern, h, onEvent) {
        super(tern, h);
        this.#onEvent = onEvent;
    }

    /**
     * `out[m][n] = sum_k act[m][k] * weight[n][k]`: `act` is m x k, `weight` n x k. Returns
     * `out` (m * n floats), a new Float32Array unless one is given. Events reach `onEvent`
     * once the call has returned.
     */
    matmul(act, weight, out) {
        if (!(act instanceof Tensor) || !(weight instanceof Tensor)) throw new TypeError('act and weight must be Tensors');
        if (act._tern !== this._tern || weight._tern !== this._tern) {
            throw refuse('TERN_ERR_INVALID_ARGUMENT', 'act, weight and dispatcher come from different tern instances');
        }
        if (act.cols !== weight.cols) {
            throw refuse('TERN_ERR_SHAPE_MISMATCH', `act has ${act.cols} cols, weight ${weight.cols}: they must agree (k)`);
        }
        const n = act.rows * weight.rows;
        out ??= new Float32Array(n);
        if (!(out instanceof Float32Array)) throw new TypeError('out must be a Float32Array');
        if (out.length !== n) {
            throw refuse('TERN_ERR_LENGTH_MISMATCH', `out holds ${out.length} floats, act.rows x weight.rows = ${n}`);
        }
        this._tern._matmul(this._h, act._h, weight._h, out, this.#onEvent);
        return out;
    }
}

export class GgufFile extends Handle {
    constructor(tern, h) {
        super(tern, h);
        /** Every tensor: name, ggmlType, format (tern's id, or null), shape (ne), offset, byteLength. */
        this.tensors = tern._ggufTensors(h);
    }

    /** Tensor `nameOrIndex` as a tern Tensor (a copy of its bytes; rows = ne[1], cols = ne[0]). */
    tensor(nameOrIndex) {
        const index =
            typeof nameOrIndex === 'number' ? nameOrIndex : this.tensors.findIndex((t) => t.name === nameOrIndex);
        if (typeof nameOrIndex !== 'number' && index < 0) {
            throw refuse('TERN_ERR_NOT_FOUND', `no tensor named ${JSON.stringify(nameOrIndex)} in this file`);
        }
        if (!Number.isInteger(index) || index < 0 || index >= this.tensors.length) {
            throw refuse('TERN_ERR_OUT_OF_BOUNDS', `tensor index ${nameOrIndex} is not in 0..${this.tensors.length}`);
        }
        return this._tern._ggufWrap(this._h, index);
    }
}
