// tern for JavaScript: the wasm build of tern (dist/*.wasm, from js/wasm) behind a small
// API for node and the browser. Arguments are checked here, before anything is copied into
// wasm; tern checks them again. Every failure is a TernError carrying tern's status name,
// and a failed call leaves the caller's outputs as they were.
import { wasiImports } from './wasi.js';

/** tern's format ids (stable). */
export const Format = Object.freeze({
    F32: 1,
    TQ1_0: 2,
    TQ2_0: 3,
    BITNET_B1_58: 4,
    I8_ABSMAX: 5,
    Q2_0: 6,
    I2_S: 7,
    I2_S_64: 8,
    I2_S_R4: 9,
    I8_BLOCK256: 10,
    I8_BLOCK32: 11,
});
const FORMAT_NAMES = Object.fromEntries(Object.entries(Format).map(([k, v]) => [v, k]));
const EVENT_KINDS = { 1: 'ADAPTER_INSERTED', 2: 'KERNEL_SELECTED' };

/**
 * The two builds, best first: their files, the kernel each one's dispatcher picks for one
 * token (`kernel`), and the GEMM it picks for batches from a measured token count (`gemm`).
 */
export const VARIANTS = Object.freeze({
    'relaxed-simd128': Object.freeze({
        file: 'tern-relaxed-simd128.wasm',
        kernel: 'bitnet_gemv/wasm-relaxed-simd128',
        gemm: 'bitnet_gemm/wasm-relaxed-simd128',
    }),
    simd128: Object.freeze({ file: 'tern-simd128.wasm', kernel: 'bitnet_gemv/wasm-simd128', gemm: 'bitnet_gemm/wasm-simd128' }),
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
    TERN_ERR_UNSUPPORTED: 14,
    TERN_ERR_ALLOCATION_FAILED: 16,
    TERN_ERR_INVALID_ARGUMENT: 17,
    TERN_ERR_PANIC: 18,
    TERN_ERR_NOT_FOUND: 19,
    TERN_ERR_IO: 21,
};

// tern_dispatcher_options.flags of the C API (include/tern.h).
const TERN_DISPATCH_STRICT = 1;
const TERN_DISPATCH_IGNORE_ENV = 2;
const TERN_DISPATCH_ACCURATE_ACTIVATIONS = 8;

function refuse(code, message) {
    return new TernError(code, STATUS[code], message);
}

/** A TERN_ERR_INVALID_ARGUMENT unless `ok`. */
function expect(ok, message) {
    if (!ok) throw refuse('TERN_ERR_INVALID_ARGUMENT', message);
}

/** Refuses an options object with keys outside `known` (a misspelt option must not be ignored). */
function checkOptions(what, options, known) {
    expect(options !== null && typeof options === 'object', `${what} options must be an object, got ${options}`);
    const unknown = Object.keys(options).filter((k) => !known.includes(k));
    expect(unknown.length === 0, `unknown ${what} option ${unknown.join(', ')}: known are ${known.join(', ')}`);
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
    try {
        if (url.protocol === 'file:') {
            const { readFile } = await import('node:fs/promises');
            return await readFile(url);
        }
        const response = await fetch(url);
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        return new Uint8Array(await response.arrayBuffer());
    } catch (e) {
        throw refuse('TERN_ERR_IO', `reading ${url}: ${e.message}`);
    }
}

/**
 * Loads tern: the relaxed-SIMD build if this engine validates it and computes it as
 * specified (a known-answer check against tern's reference kernel, in the module), else the
 * SIMD128 one. `options.variant` forces one; `options.baseUrl` is where the .wasm files are
 * (default: ../dist/ next to this file); `options.env` the environment tern sees (e.g.
 * TERN_KERNEL). The builds passed over are in the result's `skipped`, with the reason.
 */
export async function load(options = {}) {
    checkOptions('load', options, ['variant', 'baseUrl', 'env']);
    const env = options.env ?? {};
    expect(typeof env === 'object' && Object.values(env).every((v) => typeof v === 'string'), 'env must be an object of strings');
    const base = new URL(options.baseUrl ?? new URL('../dist/', import.meta.url), import.meta.url);
    const names = options.variant ? [options.variant] : Object.keys(VARIANTS);
    const skipped = [];
    for (const variant of names) {
        expect(Object.hasOwn(VARIANTS, variant), `unknown variant ${variant}: ${Object.keys(VARIANTS).join(' or ')}`);
        const { file } = VARIANTS[variant];
        const bytes = await fetchBytes(new URL(file, base));
        let reason = null;
        if (WebAssembly.validate(bytes)) {
            const tern = await Tern.instantiate(await WebAssembly.compile(bytes), variant, env);
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
        if (options.variant) throw refuse('TERN_ERR_UNSUPPORTED', `the ${variant} build (${file}) cannot be used: ${reason}`);
        skipped.push({ variant, reason });
    }
    throw refuse('TERN_ERR_UNSUPPORTED', `no tern build works here: ${skipped.map((s) => `${s.variant}: ${s.reason}`).join('; ')}`);
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
        const version = (which) => tern.#cstring(tern.#x.tjs_version(which));
        /** tern's version compiled into the module, and the module's (js/wasm) own. */
        tern.versions = Object.freeze({ tern: version(0), module: version(1) });
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

    /** `len` bytes of wasm memory from tjs_alloc. */
    #alloc(len) {
        const ptr = this.#x.tjs_alloc(len);
        if (ptr === 0) throw refuse('TERN_ERR_ALLOCATION_FAILED', `wasm memory cannot hold ${len} more bytes`);
        return ptr;
    }

    /** Runs `f(ptr)` with `len` bytes of scratch wasm memory, freed afterwards. */
    #scratch(len, f) {
        const ptr = this.#alloc(len);
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
        expect(data instanceof Float32Array, 'data must be a Float32Array');
        checkShape(rows, cols);
        if (data.length !== rows * cols) {
            throw refuse('TERN_ERR_LENGTH_MISMATCH', `data holds ${data.length} floats, rows x cols = ${rows * cols}`);
        }
        const h = this.#call((x) =>
            this.#withCopy(data, (ptr) => this.#handle((out) => x.tjs_tensor_encode(format, ptr, data.length, rows, cols, out))),
        );
        return new Tensor(this, h);
    }

    /** A handle from `take(ptr, len, out)`, which takes over a wasm copy of `bytes`. */
    #takeCopy(bytes, take) {
        return this.#call(() => {
            const ptr = this.#alloc(bytes.length);
            new Uint8Array(this.#memory.buffer, ptr, bytes.length).set(bytes);
            // `take` owns the buffer from here on, on success and on failure.
            return this.#handle((out) => take(ptr, bytes.length, out));
        });
    }

    /** A tensor over `bytes`, already encoded in `format`: one copy, in wasm memory. */
    wrap(format, bytes, rows, cols) {
        checkFormat(format);
        expect(bytes instanceof Uint8Array, 'bytes must be a Uint8Array');
        checkShape(rows, cols);
        return new Tensor(this, this.#takeCopy(bytes, (ptr, len, out) => this.#x.tjs_tensor_wrap(format, ptr, len, rows, cols, out)));
    }

    /**
     * Parses GGUF file bytes with tern's checked reader. The bytes are copied once into wasm
     * memory (the module's one copy; tensors are views into it); for a large file,
     * `readGguf` reads it into wasm memory without a whole copy on the JS side.
     */
    openGguf(bytes) {
        expect(bytes instanceof Uint8Array, 'bytes must be a Uint8Array');
        return new GgufFile(this, this.#takeCopy(bytes, (ptr, len, out) => this.#x.tjs_gguf_open(ptr, len, out)));
    }

    /**
     * Reads a GGUF file from a `Response`, a `Blob` (a `File` from a file picker) or a
     * `ReadableStream` of bytes straight into wasm memory the module allocated, chunk by
     * chunk, then parses it. The size comes from the Blob, the Content-Length header or
     * `options.size`; with none, or a stream that runs longer, the buffer grows inside wasm.
     */
    async readGguf(source, options = {}) {
        checkOptions('readGguf', options, ['size']);
        let stream = source;
        let size = options.size;
        if (typeof Response !== 'undefined' && source instanceof Response) {
            if (!source.ok) throw refuse('TERN_ERR_IO', `reading ${source.url}: HTTP ${source.status}`);
            size ??= Number(source.headers.get('content-length') ?? NaN);
            stream = source.body;
        } else if (typeof Blob !== 'undefined' && source instanceof Blob) {
            size ??= source.size;
            stream = source.stream();
        }
        expect(stream && typeof stream.getReader === 'function', 'source must be a Response, a Blob or a ReadableStream');
        expect(size === undefined || Number.isNaN(size) || (Number.isSafeInteger(size) && size >= 0), `size must be a byte count, got ${size}`);
        const exact = Number.isSafeInteger(size);
        let cap = exact ? size : 1 << 20;
        let ptr = this.#call(() => this.#alloc(cap));
        let len = 0;
        const resize = (want) => {
            const moved = this.#call((x) => x.tjs_realloc(ptr, cap, want));
            if (moved === 0) throw refuse('TERN_ERR_ALLOCATION_FAILED', `wasm memory cannot hold ${want} bytes of the file`);
            [ptr, cap] = [moved, want];
        };
        const reader = stream.getReader();
        try {
            for (;;) {
                const { done, value } = await reader.read();
                if (done) break;
                expect(value instanceof Uint8Array, 'the stream must yield Uint8Array chunks');
                if (len + value.length > cap) resize(Math.max(len + value.length, Math.ceil(cap * 1.5)));
                new Uint8Array(this.#memory.buffer, ptr, cap).set(value, len);
                len += value.length;
            }
            if (len !== cap) resize(len);
        } catch (e) {
            this.#call((x) => x.tjs_free(ptr, cap));
            reader.cancel().catch(() => {});
            throw e instanceof TernError ? e : refuse('TERN_ERR_IO', `reading the GGUF file: ${e.message}`);
        }
        // tjs_gguf_open owns the buffer from here on, on success and on failure.
        return new GgufFile(this, this.#call((x) => this.#handle((out) => x.tjs_gguf_open(ptr, len, out))));
    }

    /**
     * A dispatcher. Options (others are refused): `kernel` forces a kernel by name for the
     * pairs it serves; `strict` refuses pairs no dedicated kernel serves (what would run
     * `matmul/reference`, e.g. swapped operands) with TERN_ERR_UNSUPPORTED; `ignoreEnv`
     * does not read TERN_KERNEL from `load()`'s `env`; `accurateActivations` requantizes
     * F32 activations for TQ1_0/TQ2_0 with one scale per 256-element block (I8_BLOCK256)
     * and for Q2_0 with one per 32 (I8_BLOCK32) instead of one per token; `onEvent` receives its events; `threads` is 0 or 1 (wasm
     * has no threads).
     */
    dispatcher(options = {}) {
        checkOptions('dispatcher', options, ['kernel', 'strict', 'ignoreEnv', 'accurateActivations', 'onEvent', 'threads']);
        const { kernel = '', strict = false, ignoreEnv = false, accurateActivations = false, onEvent = null, threads = 1 } =
            options;
        expect(typeof kernel === 'string', `kernel must be a string, got ${kernel}`);
        expect(typeof strict === 'boolean', `strict must be a boolean, got ${strict}`);
        expect(typeof ignoreEnv === 'boolean', `ignoreEnv must be a boolean, got ${ignoreEnv}`);
        expect(
            typeof accurateActivations === 'boolean',
            `accurateActivations must be a boolean, got ${accurateActivations}`,
        );
        expect(onEvent === null || typeof onEvent === 'function', 'onEvent must be a function');
        expect(Number.isSafeInteger(threads) && threads >= 0, `threads must be a count, got ${threads}`);
        const flags =
            (strict ? TERN_DISPATCH_STRICT : 0) |
            (ignoreEnv ? TERN_DISPATCH_IGNORE_ENV : 0) |
            (accurateActivations ? TERN_DISPATCH_ACCURATE_ACTIVATIONS : 0);
        const name = new TextEncoder().encode(kernel);
        const h = this.#call((x) =>
            this.#withCopy(name, (ptr) => this.#handle((out) => x.tjs_dispatcher_new(ptr, name.length, threads, flags, out))),
        );
        return new Dispatcher(this, h, onEvent);
    }

    /**
     * null if this build's kernels (its GEMV and its GEMM) agree with tern's reference
     * kernel on small known cases, else why not. The cases reach every tile the kernels have:
     * every ternary weight format, 12 or 13 rows (whole tiles and a one-row remainder; I2_S_R4
     * takes rows in fours) and 1, 3 and 5 tokens (the single-token tiles, the batch tiles and
     * a leftover token, the GEMM's 4-token blocks and a leftover), two blocks of 256 columns,
     * activations of both signs. Engines have shipped relaxed SIMD that validates but
     * computes otherwise: node 20's `--experimental-wasm-relaxed-simd` (V8 11) returns twice
     * the dot product for `i32x4.relaxed_dot_i8x16_i7x16_add_s` and drops the accumulator,
     * which tern's kernels never wrote but LLVM formed in one of their tiles (the relaxed
     * I2_S_R4 GEMV's batch tiles, until `Mac::dot_once`), so every tile is run.
     */
    _knownAnswerCheck() {
        const k = 512;
        const x = Float32Array.from({ length: 5 * k }, (_, i) => (((i * 104729) % 255) - 127) / 127);
        // The build's own kernels by name, whatever TERN_KERNEL in `env` says.
        const { kernel, gemm } = VARIANTS[this.variant];
        const own = [kernel, gemm].map((name) => [name, this.dispatcher({ kernel: name })]);
        const reference = this.dispatcher({ kernel: 'bitnet_gemv/reference' });
        const acts = [1, 3, 5].map((m) => this.encode(Format.F32, x.subarray(0, m * k), m, k));
        try {
            for (const format of [Format.TQ1_0, Format.TQ2_0, Format.BITNET_B1_58, Format.Q2_0, Format.I2_S, Format.I2_S_64, Format.I2_S_R4]) {
                const n = format === Format.I2_S_R4 ? 12 : 13;
                const w = Float32Array.from({ length: n * k }, (_, i) => (((i * 7919) % 201) - 100) / 100);
                const weight = this.encode(format, w, n, k);
                try {
                    for (const act of acts) {
                        const want = reference.matmul(act, weight);
                        for (const [name, d] of own) {
                            const got = d.matmul(act, weight);
                            const i = got.findIndex((y, i) => !(Math.abs(y - want[i]) <= 1e-5 * Math.max(1, Math.abs(want[i]))));
                            if (i >= 0) {
                                return `its kernel ${name} gives ${got[i]} where the reference kernel gives ${want[i]} (${FORMAT_NAMES[format]}, ${act.rows} tokens, token ${Math.floor(i / n)}, row ${i % n}): the engine computes an instruction otherwise than specified`;
                            }
                        }
                    }
                } finally {
                    weight.close();
                }
            }
            return null;
        } finally {
            for (const h of [...acts, reference, ...own.map(([, d]) => d)]) h.close();
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

    _transcode(h, format) {
        checkFormat(format);
        return new Tensor(this, this.#call((x) => this.#handle((out) => x.tjs_tensor_transcode(h, format, out))));
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

    /** `act` times each of `weights` (handles) into `outs` (checked Float32Arrays), written only on success. */
    _matmulMany(d, act, weights, outs, onEvent) {
        const n = outs.reduce((sum, o) => sum + o.length, 0);
        this.#events.length = 0;
        try {
            this.#call((x) =>
                this.#scratch(4 * weights.length, (handles) => {
                    new Uint32Array(this.#memory.buffer, handles, weights.length).set(weights);
                    this.#scratch(4 * n, (ptr) => {
                        this.#check(x.tjs_matmul_many(d, act, handles, weights.length, ptr, n));
                        let at = ptr;
                        for (const out of outs) {
                            out.set(new Float32Array(this.#memory.buffer, at, out.length));
                            at += 4 * out.length;
                        }
                    });
                }),
            );
        } finally {
            // After the call, so a callback may call tern again.
            const events = this.#events.splice(0);
            if (onEvent) for (const e of events) onEvent(e);
        }
    }

    /** The tensors and the metadata keys of a GGUF file. */
    _ggufContents(h) {
        return this.#call((x) => {
            const [count, metaCount] = this.#scratch(8, (out) => {
                this.#check(x.tjs_gguf_counts(h, out));
                return Array.from(new Uint32Array(this.#memory.buffer, out, 2));
            });
            const keys = this.#scratch(16, (out) =>
                Array.from({ length: metaCount }, (_, i) => {
                    this.#check(x.tjs_gguf_meta(h, i, out));
                    const v = new Uint32Array(this.#memory.buffer, out, 2);
                    return this.#string(v[0], v[1]);
                }),
            );
            const tensors = this.#scratch(88, (out) => {
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
            return { tensors, keys };
        });
    }

    /** Metadata entry `index` of a GGUF file, decoded (the encoding of tjs_gguf_meta). */
    _ggufMeta(h, index) {
        return this.#call((x) =>
            this.#scratch(16, (out) => {
                this.#check(x.tjs_gguf_meta(h, index, out));
                const [, , ptr, len] = new Uint32Array(this.#memory.buffer, out, 4);
                return decodeValue(new DataView(this.#memory.buffer, ptr, len), this.#decoder);
            }),
        );
    }

    _ggufWrap(h, index) {
        return new Tensor(this, this.#call((x) => this.#handle((out) => x.tjs_gguf_wrap(h, index, out))));
    }
}

// GGUF value types (their ids in the file) and how one value of each reads.
const SCALARS = {
    0: [1, (v, at) => v.getUint8(at)],
    1: [1, (v, at) => v.getInt8(at)],
    2: [2, (v, at) => v.getUint16(at, true)],
    3: [2, (v, at) => v.getInt16(at, true)],
    4: [4, (v, at) => v.getUint32(at, true)],
    5: [4, (v, at) => v.getInt32(at, true)],
    6: [4, (v, at) => v.getFloat32(at, true)],
    7: [1, (v, at) => v.getUint8(at) !== 0],
    10: [8, (v, at) => v.getBigUint64(at, true)],
    11: [8, (v, at) => v.getBigInt64(at, true)],
    12: [8, (v, at) => v.getFloat64(at, true)],
};
const GGUF_STRING = 8;
const GGUF_ARRAY = 9;

/** One value as tjs_gguf_meta encodes it: numbers (BigInt for 64-bit integers), booleans, strings and arrays. */
function decodeValue(view, decoder) {
    let at = 0;
    const next = () => {
        const type = view.getUint8(at++);
        if (type === GGUF_STRING) {
            const len = view.getUint32(at, true);
            at += 4 + len;
            return decoder.decode(new Uint8Array(view.buffer, view.byteOffset + at - len, len));
        }
        if (type === GGUF_ARRAY) {
            const count = view.getUint32(at + 1, true);
            at += 5;
            return Array.from({ length: count }, next);
        }
        const [size, read] = SCALARS[type];
        at += size;
        return read(view, at - size);
    };
    return next();
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

    /**
     * The same trits and scales in `format`, of the same family (BITNET_B1_58 and the I2_S
     * packings, or TQ1_0 and TQ2_0), as a new tensor owning its bytes: TQ1_0 as TQ2_0 takes
     * 22 % more memory and runs about twice as fast.
     */
    transcode(format) {
        return this._tern._transcode(this._h, format);
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
        return this.matmulMany(act, [weight], out === undefined ? undefined : [out])[0];
    }

    /**
     * `act` times each of `weights` (Q/K/V, gate/up) in one call: the activation is
     * requantized once, everything is checked before anything runs, and `outs[i]` (m x
     * weights[i].rows floats; new Float32Arrays unless given) receives act x weights[i].
     * Returns `outs`; results are bit-identical to separate `matmul` calls.
     */
    matmulMany(act, weights, outs) {
        expect(act instanceof Tensor, 'act must be a Tensor');
        expect(Array.isArray(weights) && weights.length > 0 && weights.every((w) => w instanceof Tensor), 'weights must be a non-empty array of Tensors');
        const tern = this._tern;
        expect(act._tern === tern && weights.every((w) => w._tern === tern), 'act, weights and dispatcher come from different tern instances');
        for (const [i, w] of weights.entries()) {
            if (act.cols !== w.cols) {
                throw refuse('TERN_ERR_SHAPE_MISMATCH', `act has ${act.cols} cols, weight ${i} ${w.cols}: they must agree (k)`);
            }
        }
        outs ??= weights.map((w) => new Float32Array(act.rows * w.rows));
        expect(Array.isArray(outs) && outs.every((o) => o instanceof Float32Array), 'outs must be an array of Float32Arrays');
        if (outs.length !== weights.length) {
            throw refuse('TERN_ERR_LENGTH_MISMATCH', `outs holds ${outs.length} arrays, one per weight (${weights.length}) is needed`);
        }
        for (const [i, w] of weights.entries()) {
            if (outs[i].length !== act.rows * w.rows) {
                throw refuse('TERN_ERR_LENGTH_MISMATCH', `out ${i} holds ${outs[i].length} floats, act.rows x weight.rows = ${act.rows * w.rows}`);
            }
        }
        tern._matmulMany(this._h, act._h, weights.map((w) => w._h), outs, this.#onEvent);
        return outs;
    }
}

export class GgufFile extends Handle {
    #keys;

    constructor(tern, h) {
        super(tern, h);
        const { tensors, keys } = tern._ggufContents(h);
        /** Every tensor: name, ggmlType, format (tern's id, or null), shape (ne), offset, byteLength. */
        this.tensors = tensors;
        /** The metadata keys, in file order. */
        this.metadataKeys = keys;
        this.#keys = new Map(keys.map((k, i) => [k, i]));
    }

    /**
     * The metadata value of `key`: a number (a BigInt for u64/i64), a boolean, a string
     * (GGUF strings decoded as UTF-8, invalid bytes replaced) or an array of these.
     */
    metadata(key) {
        expect(typeof key === 'string', `key must be a string, got ${key}`);
        const index = this.#keys.get(key);
        if (index === undefined) throw refuse('TERN_ERR_NOT_FOUND', `no metadata key named ${JSON.stringify(key)} in this file`);
        return this._tern._ggufMeta(this._h, index);
    }

    /** Tensor `nameOrIndex` as a tern Tensor: a view into the file's bytes in wasm memory, no copy (rows = ne[1], cols = ne[0]). It keeps those bytes alive after the file is closed. */
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
