// Typings of tern's JS package (src/index.js).

/** tern's format ids (stable, as in include/tern.h). */
export declare const Format: Readonly<{ F32: 1; TQ1_0: 2; TQ2_0: 3; BITNET_B1_58: 4; I8_ABSMAX: 5 }>;
export type FormatId = (typeof Format)[keyof typeof Format];
export type FormatName = keyof typeof Format;

export interface VariantInfo {
    /** The module's file name, under `baseUrl`. */
    readonly file: string;
    /** The kernel the build's dispatcher picks for ternary weights. */
    readonly kernel: string;
}
/** The builds, best first. */
export declare const VARIANTS: Readonly<{ 'relaxed-simd128': VariantInfo; simd128: VariantInfo }>;
export type Variant = keyof typeof VARIANTS;

/** A refused or failed call. */
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
    /** Where the .wasm files are; default: ../dist/ next to src/index.js. */
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

export interface DispatcherOptions {
    /** Force this kernel for the pairs it serves. */
    kernel?: string;
    /** Called once per event, after the matmul has returned. */
    onEvent?: ((event: TernEvent) => void) | null;
    /** Threads per matmul: wasm has none, so more than 1 is refused. */
    threads?: number;
}

export declare class Tern {
    /** The build that was loaded. */
    readonly variant: Variant;
    /** Better builds `load()` passed over, and why (not validated, or failed its known-answer check). */
    readonly skipped: { variant: Variant; reason: string }[];
    /** Bytes of wasm memory (grows, never shrinks). */
    readonly memoryBytes: number;
    static instantiate(module: WebAssembly.Module, variant: Variant, env?: Record<string, string>): Promise<Tern>;
    /** Encodes rows x cols floats (row-major) into a tensor of `format`. */
    encode(format: FormatId, data: Float32Array, rows: number, cols: number): Tensor;
    /** A tensor over a copy of bytes already encoded in `format` (e.g. GGUF tensor data). */
    wrap(format: FormatId, bytes: Uint8Array, rows: number, cols: number): Tensor;
    /** Parses GGUF file bytes with tern's checked reader. */
    openGguf(bytes: Uint8Array): GgufFile;
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
}

export declare class Dispatcher extends Handle {
    /** out[m][n] = sum_k act[m][k] * weight[n][k]; returns `out` (a new array if omitted). */
    matmul(act: Tensor, weight: Tensor, out?: Float32Array): Float32Array;
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
    /** A tensor as a tern Tensor (a copy of its bytes; rows = ne[1], cols = ne[0]). */
    tensor(nameOrIndex: string | number): Tensor;
}
