// Typings of tern's JS package (src/index.js).

/** tern's format ids (stable, as in include/tern.h). */
export declare const Format: Readonly<{
    F32: 1;
    TQ1_0: 2;
    TQ2_0: 3;
    BITNET_B1_58: 4;
    I8_ABSMAX: 5;
    Q2_0: 6;
    I2_S: 7;
    I2_S_64: 8;
    I2_S_R4: 9;
    I8_BLOCK256: 10;
    I8_BLOCK32: 11;
}>;
export type FormatId = (typeof Format)[keyof typeof Format];
export type FormatName = keyof typeof Format;

export interface VariantInfo {
    /** The module's file name, under `baseUrl`. */
    readonly file: string;
    /** The kernel the build's dispatcher picks for ternary weights and one token. */
    readonly kernel: string;
    /** The GEMM it picks for batches, from a measured token count per format. */
    readonly gemm: string;
}
/** The builds, best first. */
export declare const VARIANTS: Readonly<{ 'relaxed-simd128': VariantInfo; simd128: VariantInfo }>;
export type Variant = keyof typeof VARIANTS;

/** A refused or failed call (the caller's outputs are left as they were). */
export declare class TernError extends Error {
    name: 'TernError';
    /** tern's status name, e.g. "TERN_ERR_LENGTH_MISMATCH". */
    code: string;
    /** tern's status number (include/tern.h). */
    status: number;
}

export interface LoadOptions {
    /** Force a build; default: relaxed-simd128 if the engine validates it and passes a
     *  known-answer check against the reference kernel, else simd128. */
    variant?: Variant;
    /** Where the .wasm files are; default: ../dist/ next to src/index.js (a bundler user
     *  copies dist/*.wasm to their static files and points here). */
    baseUrl?: URL | string;
    /** Environment variables tern reads (TERN_KERNEL). */
    env?: Record<string, string>;
}

export declare function load(options?: LoadOptions): Promise<Tern>;

/** What the dispatcher reports: every adapter it inserts and every kernel it runs. */
export interface TernEvent {
    kind: 'ADAPTER_INSERTED' | 'KERNEL_SELECTED';
    /** The adapter ("requantize-i8-absmax") or the kernel ("bitnet_gemv/wasm-simd128"). */
    name: string;
    /** Adapter: source format; kernel: weight format. */
    from: FormatName;
    /** Adapter: target format; kernel: activation format it consumed. */
    to: FormatName;
    /** Adapter: the converted tensor; kernel: the output (tokens x weight rows). */
    rows: number;
    cols: number;
    /** Adapter: its price in bytes; kernel: the weight bytes it read. */
    bytes: number;
    /** Wall time of the step. */
    nanos: number;
}

/** The C API's dispatcher options that make sense in JS; any other key is refused. */
export interface DispatcherOptions {
    /** Force this kernel for the pairs it serves. */
    kernel?: string;
    /** Refuse pairs no dedicated kernel serves (what would run matmul/reference, e.g.
     *  swapped operands) with TERN_ERR_UNSUPPORTED. */
    strict?: boolean;
    /** Do not read TERN_KERNEL from load()'s `env`. */
    ignoreEnv?: boolean;
    /** Requantize F32 activations for TQ1_0/TQ2_0 with one scale per 256-element block
     *  (I8_BLOCK256, as accurate as ggml's Q8_K) and for Q2_0 with one per 32 (I8_BLOCK32,
     *  as accurate as ggml's Q8_0) instead of one per token. */
    accurateActivations?: boolean;
    /** Called once per event, after the matmul has returned. */
    onEvent?: ((event: TernEvent) => void) | null;
    /** Threads per matmul: wasm has none, so more than 1 is refused. */
    threads?: number;
}

export interface ReadGgufOptions {
    /** The file's size in bytes, when the source does not say (a bare stream). */
    size?: number;
}

/** A GGUF metadata value: u64/i64 as BigInt, other numbers as number. */
export type GgufValue = number | bigint | boolean | string | GgufValue[];

export declare class Tern {
    /** The build that was loaded. */
    readonly variant: Variant;
    /** Better builds `load()` passed over, and why (not validated, or failed its known-answer check). */
    readonly skipped: { variant: Variant; reason: string }[];
    /** Bytes of wasm memory (grows, never shrinks). */
    readonly memoryBytes: number;
    /** The version of tern compiled into the module, and of the module's export layer
     *  (js/wasm); both equal the package's version. */
    readonly versions: Readonly<{ tern: string; module: string }>;
    static instantiate(module: WebAssembly.Module, variant: Variant, env?: Record<string, string>): Promise<Tern>;
    /** Encodes rows x cols floats (row-major) into a tensor of `format`. */
    encode(format: FormatId, data: Float32Array, rows: number, cols: number): Tensor;
    /** A tensor over bytes already encoded in `format`, copied once into wasm memory. */
    wrap(format: FormatId, bytes: Uint8Array, rows: number, cols: number): Tensor;
    /** Parses GGUF file bytes (copied once into wasm memory) with tern's checked reader. */
    openGguf(bytes: Uint8Array): GgufFile;
    /** Reads a GGUF file chunk by chunk into memory the module allocated (no copy of the
     *  file on the JS side), then parses it. */
    readGguf(source: Response | Blob | ReadableStream<Uint8Array>, options?: ReadGgufOptions): Promise<GgufFile>;
    dispatcher(options?: DispatcherOptions): Dispatcher;
}

declare class Handle {
    /** Frees the object inside wasm; later use throws. */
    close(): void;
    [Symbol.dispose](): void;
}

export declare class Tensor extends Handle {
    readonly format: FormatId;
    readonly formatName: FormatName;
    readonly rows: number;
    readonly cols: number;
    readonly byteLength: number;
    /** A copy of the encoded bytes. */
    bytes(): Uint8Array;
    /** The values as floats (row-major). */
    decode(): Float32Array;
    /**
     * The same trits and scales in `format`, of the same family (BITNET_B1_58 and the I2_S
     * packings, or TQ1_0 and TQ2_0), as a new tensor owning its bytes.
     */
    transcode(format: FormatId): Tensor;
}

export declare class Dispatcher extends Handle {
    /** out[m][n] = sum_k act[m][k] * weight[n][k]; returns `out` (a new array if omitted). */
    matmul(act: Tensor, weight: Tensor, out?: Float32Array): Float32Array;
    /** `act` times each weight in one call (the activation requantized once); outs[i] is
     *  m x weights[i].rows floats; returns `outs` (new arrays if omitted). */
    matmulMany(act: Tensor, weights: Tensor[], outs?: Float32Array[]): Float32Array[];
}

export interface GgufTensorInfo {
    name: string;
    ggmlType: number;
    /** tern's format id, or null if tern has none for this ggml type. */
    format: FormatId | null;
    /** ggml's ne, ne0 first. */
    shape: number[];
    /** Absolute offset of the data in the file. */
    offset: number;
    /** Bytes of data, or null for a ggml type tern cannot size. */
    byteLength: number | null;
}

export declare class GgufFile extends Handle {
    readonly tensors: GgufTensorInfo[];
    /** The metadata keys, in file order. */
    readonly metadataKeys: string[];
    /** The value of a metadata key; TERN_ERR_NOT_FOUND if the file has no such key. */
    metadata(key: string): GgufValue;
    /** A tensor as a tern Tensor: a view into the file's bytes in wasm memory, no copy
     *  (rows = ne[1], cols = ne[0]); it keeps those bytes alive after the file is closed. */
    tensor(nameOrIndex: string | number): Tensor;
}
