import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { Format, VARIANTS } from 'tern-wasm';
import { loadTern, refused, rejected, values } from './helpers.js';
import { gguf, model, MODEL_METADATA, MODEL_TENSORS, T } from './gguf.js';

const tern = await loadTern();
const TERNARY = [Format.TQ1_0, Format.TQ2_0, Format.BITNET_B1_58];
/**
 * The token counts from which each build's GEMM serves TQ1_0, TQ2_0 and BITNET_B1_58
 * (measured; src/kernel/arch/wasm32/mod.rs), stated here, not read from the module, so a
 * wrong threshold fails.
 */
const GEMM_FROM = { 'relaxed-simd128': [3, 4, 8], simd128: [2, 2, 4] };
/** The kernel the build's dispatcher must pick for `m` tokens of `format`. */
const bestKernel = (format, m) => {
    const { kernel, gemm } = VARIANTS[tern.variant];
    return m >= GEMM_FROM[tern.variant][TERNARY.indexOf(format)] ? gemm : kernel;
};
const modelBytes = model(tern);

test('the known-answer check refuses kernels that disagree with the reference', () => {
    // No engine at hand computes tern's kernels otherwise than specified (node 20's wrong
    // relaxed instruction is not in tern's code), so a dispatcher whose GEMM is one off
    // stands in for one.
    assert.equal(tern._knownAnswerCheck(), null);
    const { gemm } = VARIANTS[tern.variant];
    const dispatcher = tern.dispatcher;
    tern.dispatcher = function (options) {
        const d = dispatcher.call(this, options);
        if (options?.kernel !== gemm) return d;
        const matmul = d.matmul.bind(d);
        d.matmul = (...args) => matmul(...args).map((y, i) => (i === 2 ? y + 1 : y));
        return d;
    };
    try {
        assert.match(tern._knownAnswerCheck(), new RegExp(`its kernel ${gemm} gives .* row 2\\): the engine computes an instruction otherwise than specified`));
    } finally {
        delete tern.dispatcher;
    }
});

test('load picks the best build this engine runs as specified', async () => {
    // scripts/test-wasm.sh says what to expect of each engine it runs these tests on.
    const want = process.env.TERN_JS_EXPECT_VARIANT;
    if (want) assert.equal(tern.variant, want, JSON.stringify(tern.skipped));
    assert.ok(Object.hasOwn(VARIANTS, tern.variant));
    for (const { variant, reason } of tern.skipped) {
        assert.match(reason, /does not validate|otherwise than specified/);
        // Forcing a build the engine cannot run is an error, not a wrong answer.
        await rejected(loadTern({ variant }), 'TERN_ERR_UNSUPPORTED', /cannot be used/);
    }
    await rejected(loadTern({ variant: 'sse2' }), 'TERN_ERR_INVALID_ARGUMENT', /unknown variant sse2/);
    await rejected(loadTern({ varaint: 'simd128' }), 'TERN_ERR_INVALID_ARGUMENT', /unknown load option varaint/);
    await rejected(loadTern({ env: { TERN_KERNEL: 3 } }), 'TERN_ERR_INVALID_ARGUMENT', /env must be an object of strings/);
    await rejected(loadTern({ baseUrl: 'file:///nonexistent/' }), 'TERN_ERR_IO', /reading file:\/\/\/nonexistent\/tern-/);
});

test('the package, the module and tern have one version', async () => {
    const pkg = JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8'));
    assert.match(pkg.version, /^\d+\.\d+\.\d+$/);
    assert.deepEqual(tern.versions, { tern: pkg.version, module: pkg.version });
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

/** Asserts max |got - want| / max(1, |want|) <= 1e-5 (the README's tolerance). */
function close(got, want, what) {
    assert.equal(got.length, want.length, what);
    for (let i = 0; i < got.length; i++) {
        const err = Math.abs(got[i] - want[i]) / Math.max(1, Math.abs(want[i]));
        assert.ok(err <= 1e-5, `${what} [${i}]: ${got[i]} vs ${want[i]}`);
    }
}

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
                    ['KERNEL_SELECTED', bestKernel(format, m), w.formatName, 'I8_ABSMAX', m, n],
                ],
            );
            assert.equal(events[1].bytes, w.byteLength);
            assert.ok(events.every((e) => e.nanos >= 0));
            close(got, want, `${w.formatName} m=${m}`);
            for (const h of [w, a, best, reference]) h.close();
        }
    }
});

test('Q2_0 and the I2_S packings: bytes round trip, and the dispatcher agrees with the reference kernel', () => {
    // Three tokens: the token counts from which each build's GEMM serves these formats
    // (measured, src/kernel/arch/wasm32/mod.rs; stated here so that a wrong one fails) put
    // m = 3 on the GEMM for the 128- and 64-element packings with simd128 (from 2), on the
    // GEMV for every packing in the relaxed build, for I2_S_R4 with simd128 (from 4) and
    // for Q2_0 in both.
    const gemmFrom = {
        'relaxed-simd128': { [Format.Q2_0]: 5, [Format.I2_S]: 4, [Format.I2_S_64]: 4, [Format.I2_S_R4]: 6 },
        simd128: { [Format.Q2_0]: 4, [Format.I2_S]: 2, [Format.I2_S_64]: 2, [Format.I2_S_R4]: 4 },
    }[tern.variant];
    const [n, k, m] = [8, 256, 3];
    const a = tern.encode(Format.F32, values(m * k, 11), m, k);
    for (const format of [Format.Q2_0, Format.I2_S, Format.I2_S_64, Format.I2_S_R4]) {
        const w = tern.encode(format, values(n * k, 12 + format, 0.02), n, k);
        const again = tern.wrap(format, w.bytes(), n, k);
        assert.deepEqual(again.decode(), w.decode(), w.formatName);
        const events = [];
        const best = tern.dispatcher({ onEvent: (e) => events.push(e.name) });
        const reference = tern.dispatcher({ kernel: 'bitnet_gemv/reference' });
        const [got, want] = [best.matmul(a, again), reference.matmul(a, w)];
        if (format === Format.Q2_0) {
            // One scale per 64-element block: the kernel adds the blocks in another order.
            got.forEach((x, i) => assert.ok(Math.abs(x - want[i]) <= 1e-5 * Math.max(1, Math.abs(want[i])), w.formatName));
        } else {
            // One scale per tensor: the integer dot is exact, and so is the result.
            assert.deepEqual(got, want, w.formatName);
        }
        const { kernel: gemv, gemm } = VARIANTS[tern.variant];
        const kernel = m >= gemmFrom[format] ? gemm : gemv;
        assert.deepEqual(events, ['requantize-i8-absmax', kernel], w.formatName);
        for (const h of [w, again, best, reference]) h.close();
    }
    a.close();
});

test('transcode: TQ1_0 as TQ2_0 and back, BITNET_B1_58 as I2_S; other families refused', () => {
    const [n, k] = [4, 512];
    const x = values(n * k, 21, 0.02);
    const tq1 = tern.encode(Format.TQ1_0, x, n, k);
    const tq2 = tern.encode(Format.TQ2_0, x, n, k);
    const asTq2 = tq1.transcode(Format.TQ2_0);
    assert.equal(asTq2.formatName, 'TQ2_0');
    assert.deepEqual([asTq2.rows, asTq2.cols], [n, k]);
    // The bytes TQ2_0's encoder writes for the same floats, and the way back TQ1_0's.
    assert.deepEqual(asTq2.bytes(), tq2.bytes());
    const back = asTq2.transcode(Format.TQ1_0);
    assert.deepEqual(back.bytes(), tq1.bytes());
    assert.deepEqual(asTq2.decode(), tq1.decode());
    const bitnet = tern.encode(Format.BITNET_B1_58, x, n, k);
    const i2s = bitnet.transcode(Format.I2_S);
    assert.deepEqual(i2s.decode(), bitnet.decode());
    refused(() => tq1.transcode(Format.BITNET_B1_58), 'TERN_ERR_INVALID_ARGUMENT', /TQ1_0 and TQ2_0/);
    refused(() => tq1.transcode(99), 'TERN_ERR_UNKNOWN_FORMAT', /format must be one of/);
    for (const t of [tq1, tq2, asTq2, back, bitnet, i2s]) t.close();
    refused(() => tq1.transcode(Format.TQ2_0), 'TERN_ERR_INVALID_ARGUMENT', /closed/);
});

test('matmulMany: one adapter, one kernel event per weight, bit-identical to separate matmuls', () => {
    const [m, k] = [5, 512];
    const weights = TERNARY.map((f, i) => tern.encode(f, values((16 + 8 * i) * k, 40 + i, 0.02), 16 + 8 * i, k));
    const a = tern.encode(Format.F32, values(m * k, 9), m, k);
    const events = [];
    const d = tern.dispatcher({ onEvent: (e) => events.push([e.kind, e.name, e.rows, e.cols]) });
    const outs = d.matmulMany(a, weights);
    assert.deepEqual(events, [
        ['ADAPTER_INSERTED', 'requantize-i8-absmax', m, k],
        ...weights.map((w, i) => ['KERNEL_SELECTED', bestKernel(TERNARY[i], m), m, w.rows]),
    ]);
    assert.deepEqual(outs.map((o) => o.length), weights.map((w) => m * w.rows));
    for (const [i, w] of weights.entries()) assert.deepEqual(outs[i], d.matmul(a, w), `weight ${i}`);
    // Given outputs are filled and returned.
    const given = weights.map((w) => new Float32Array(m * w.rows));
    assert.equal(d.matmulMany(a, weights, given), given);
    assert.deepEqual(given, outs);
    for (const h of [...weights, a, d]) h.close();
});

test('dispatcher options: strict refuses what would run matmul/reference, ignoreEnv, unknown options', async () => {
    const w = tern.encode(Format.TQ2_0, values(8 * 256, 4, 0.02), 8, 256);
    const a = tern.encode(Format.F32, values(2 * 256, 5), 2, 256);
    // Swapped operands: no kernel serves an F32 weight by a TQ2_0 activation.
    const lenient = tern.dispatcher();
    const names = [];
    const strict = tern.dispatcher({ strict: true, onEvent: (e) => names.push(e.name) });
    const swapped = lenient.matmul(w, a);
    assert.equal(swapped.length, 8 * 2);
    const out = new Float32Array(16).fill(7);
    refused(() => strict.matmul(w, a, out), 'TERN_ERR_UNSUPPORTED', /dispatcher is strict \(it would run matmul\/reference\)/);
    assert.deepEqual(out, new Float32Array(16).fill(7));
    assert.deepEqual(names, []);
    // The right way round, a strict dispatcher runs as usual.
    assert.deepEqual(strict.matmul(a, w), lenient.matmul(a, w));
    refused(() => strict.matmulMany(w, [a]), 'TERN_ERR_UNSUPPORTED', /strict/);

    // ignoreEnv: TERN_KERNEL from load()'s env is not read.
    const forced = await loadTern({ env: { TERN_KERNEL: 'bitnet_gemv/reference' } });
    const fw = forced.encode(Format.TQ2_0, values(8 * 256, 4, 0.02), 8, 256);
    const fa = forced.encode(Format.F32, values(256, 5), 1, 256);
    const seen = (options) => {
        const kernels = [];
        forced.dispatcher({ ...options, onEvent: (e) => e.kind === 'KERNEL_SELECTED' && kernels.push(e.name) }).matmul(fa, fw);
        return kernels;
    };
    assert.deepEqual(seen({}), ['bitnet_gemv/reference']);
    assert.deepEqual(seen({ ignoreEnv: true }), [VARIANTS[forced.variant].kernel]);
    // The kernel option wins over the environment.
    assert.deepEqual(seen({ kernel: VARIANTS[forced.variant].kernel }), [VARIANTS[forced.variant].kernel]);

    refused(() => tern.dispatcher({ stric: true }), 'TERN_ERR_INVALID_ARGUMENT', /unknown dispatcher option stric: known are kernel, strict/);
    refused(() => tern.dispatcher({ strict: 'yes' }), 'TERN_ERR_INVALID_ARGUMENT', /strict must be a boolean/);
    refused(() => tern.dispatcher({ ignoreEnv: 1 }), 'TERN_ERR_INVALID_ARGUMENT', /ignoreEnv must be a boolean/);
    refused(() => tern.dispatcher({ accurateActivations: 1 }), 'TERN_ERR_INVALID_ARGUMENT', /accurateActivations must be a boolean/);
    // accurateActivations: TQ2_0 meets activations with one scale per 256-block.
    const adapted = [];
    const accurate = tern.dispatcher({ accurateActivations: true, onEvent: (e) => e.kind === 'ADAPTER_INSERTED' && adapted.push(e.to) });
    const blocked = accurate.matmul(a, w);
    assert.deepEqual(adapted, ['I8_BLOCK256']);
    assert.equal(blocked.length, 2 * 8);
    // Q2_0 meets one scale per 32 elements, on the build's SIMD GEMV, agreeing with the
    // reference kernel on the same I8_BLOCK32 activations.
    const q2 = tern.encode(Format.Q2_0, values(8 * 256, 6, 0.02), 8, 256);
    const q2Events = [];
    const q2Accurate = tern.dispatcher({ accurateActivations: true, onEvent: (e) => q2Events.push([e.name, e.to]) });
    const perHalf = q2Accurate.matmul(a, q2);
    assert.deepEqual(q2Events, [['requantize-i8-block32', 'I8_BLOCK32'], [VARIANTS[tern.variant].kernel, 'I8_BLOCK32']]);
    const a32 = tern.encode(Format.I8_BLOCK32, values(2 * 256, 5), 2, 256);
    const reference = tern.dispatcher({ kernel: 'bitnet_gemv/reference' });
    const want = reference.matmul(a32, q2);
    perHalf.forEach((x, i) => assert.ok(Math.abs(x - want[i]) <= 1e-5 * Math.max(1, Math.abs(want[i]))));
    for (const h of [accurate, q2Accurate, q2, a32, reference]) h.close();
    refused(() => tern.dispatcher({ kernel: 3 }), 'TERN_ERR_INVALID_ARGUMENT', /kernel must be a string/);
    refused(() => tern.dispatcher({ onEvent: 3 }), 'TERN_ERR_INVALID_ARGUMENT', /onEvent must be a function/);
    refused(() => tern.dispatcher({ threads: -1 }), 'TERN_ERR_INVALID_ARGUMENT', /threads must be a count/);
    refused(() => tern.dispatcher({ threads: 2 }), 'TERN_ERR_INVALID_ARGUMENT', /no threads: pass 0 or 1/);
    refused(() => tern.dispatcher(null), 'TERN_ERR_INVALID_ARGUMENT', /dispatcher options must be an object/);
    refused(() => tern.dispatcher({ kernel: 'bitnet_gemv/nope' }), 'TERN_ERR_UNKNOWN_KERNEL', /bitnet_gemv\/nope/);
    const unknown = await loadTern({ env: { TERN_KERNEL: 'bitnet_gemv/nope' } });
    refused(() => unknown.dispatcher(), 'TERN_ERR_UNKNOWN_KERNEL', /bitnet_gemv\/nope.*TERN_KERNEL/);
    unknown.dispatcher({ ignoreEnv: true }).close();
    for (const h of [w, a, lenient, strict, fw, fa]) h.close();
});

test('GGUF: tensors and metadata listed, tensors wrapped with the ggml shape and run', () => {
    const g = tern.openGguf(modelBytes);
    assert.deepEqual(g.tensors.map((t) => t.name), MODEL_TENSORS.map(([name]) => name));
    assert.deepEqual(g.metadataKeys, MODEL_METADATA.map(([key]) => key));
    const f32 = (x) => new Float32Array([x])[0];
    const want = {
        'general.architecture': 'bitnet',
        'general.name': 'tern fixture ✓',
        'bitnet.block_count': 1,
        'bitnet.rms_eps': f32(1e-5),
        'tern.fixture': true,
        'tern.u8': 200,
        'tern.i8': -100,
        'tern.u16': 60000,
        'tern.i16': -30000,
        'tern.i32': -2000000000,
        'tern.u64': 2n ** 63n + 5n,
        'tern.i64': -(2n ** 62n),
        'tern.f64': Math.PI,
        'tokenizer.ggml.tokens': ['<s>', '</s>', 'hello', 'world'],
        'tern.scores': [0.5, -1.25, 2.0],
        'tern.nested': [[1, 2], []],
    };
    for (const key of g.metadataKeys) assert.deepEqual(g.metadata(key), want[key], key);
    refused(() => g.metadata('general.nope'), 'TERN_ERR_NOT_FOUND', /no metadata key named "general.nope"/);
    refused(() => g.metadata(3), 'TERN_ERR_INVALID_ARGUMENT', /key must be a string/);

    const ternary = g.tensors.filter((t) => t.format === Format.TQ1_0 || t.format === Format.TQ2_0);
    assert.equal(ternary.length, 3);
    const d = tern.dispatcher({ strict: true });
    for (const info of ternary) {
        const w = g.tensor(info.name);
        assert.deepEqual([w.rows, w.cols, w.byteLength], [info.shape[1], info.shape[0], info.byteLength]);
        // The view's bytes are the file's bytes at the tensor's offset.
        assert.deepEqual(w.bytes(), modelBytes.subarray(info.offset, info.offset + info.byteLength));
        const a = tern.encode(Format.F32, values(w.cols, 5), 1, w.cols);
        assert.equal(d.matmul(a, w).length, w.rows);
        for (const h of [w, a]) h.close();
    }
    // A view keeps the file's bytes: it outlives the file's handle.
    const w = g.tensor('blk.0.ffn_up.weight');
    const a = tern.encode(Format.F32, values(w.cols, 6), 1, w.cols);
    const before = d.matmul(a, w);
    g.close();
    assert.deepEqual(d.matmul(a, w), before);
    refused(() => g.tensor(0), 'TERN_ERR_INVALID_ARGUMENT', /this GgufFile was closed/);
    refused(() => g.metadata('general.name'), 'TERN_ERR_INVALID_ARGUMENT', /this GgufFile was closed/);
    for (const h of [w, a, d]) h.close();
});

test('readGguf: from a Blob, a Response and a stream of unknown length, into wasm memory', async () => {
    const names = MODEL_TENSORS.map(([name]) => name);
    const chunks = (bytes, size) => new ReadableStream({
        start(c) {
            for (let at = 0; at < bytes.length; at += size) c.enqueue(bytes.slice(at, at + size));
            c.close();
        },
    });
    const sources = [
        new Blob([modelBytes]),
        new Response(modelBytes, { headers: { 'content-length': String(modelBytes.length) } }),
        new Response(chunks(modelBytes, 1000)),
        chunks(modelBytes, 777),
    ];
    for (const source of sources) {
        const g = await tern.readGguf(source);
        assert.deepEqual(g.tensors.map((t) => t.name), names, source.constructor.name);
        assert.equal(g.metadata('general.architecture'), 'bitnet');
        const info = g.tensors[1];
        const w = g.tensor(1);
        assert.deepEqual(w.bytes(), modelBytes.subarray(info.offset, info.offset + info.byteLength));
        for (const h of [w, g]) h.close();
    }
    // A declared size shorter than the stream: the buffer grows.
    (await tern.readGguf(chunks(modelBytes, 4096), { size: 100 })).close();
    await rejected(tern.readGguf(new Blob([modelBytes.subarray(0, 1000)])), 'TERN_ERR_INVALID_FILE', /runs past the end|truncated/);
    await rejected(tern.readGguf(new Response('nope', { status: 404 })), 'TERN_ERR_IO', /HTTP 404/);
    await rejected(tern.readGguf(modelBytes), 'TERN_ERR_INVALID_ARGUMENT', /a Response, a Blob or a ReadableStream/);
    await rejected(tern.readGguf(new Blob([modelBytes]), { size: -1 }), 'TERN_ERR_INVALID_ARGUMENT', /size must be a byte count/);
    await rejected(tern.readGguf(new Blob([modelBytes]), { length: 3 }), 'TERN_ERR_INVALID_ARGUMENT', /unknown readGguf option length/);
    const failing = new ReadableStream({ pull: (c) => c.error(new Error('the network went away')) });
    await rejected(tern.readGguf(failing), 'TERN_ERR_IO', /the network went away/);
    const wrongChunks = new ReadableStream({ start: (c) => c.enqueue('text') });
    await rejected(tern.readGguf(wrongChunks), 'TERN_ERR_INVALID_ARGUMENT', /Uint8Array chunks/);
});

test('bad input: TernErrors with the right code, outputs left as they were', async () => {
    const w = tern.encode(Format.TQ2_0, values(4 * 256, 2), 4, 256);
    const a = tern.encode(Format.F32, values(256, 3), 1, 256);
    const d = tern.dispatcher();
    const out = new Float32Array(4).fill(-3);
    const untouched = () => assert.deepEqual(out, new Float32Array(4).fill(-3));
    refused(() => tern.encode(99, values(4, 1), 2, 2), 'TERN_ERR_UNKNOWN_FORMAT', /format must be one of/);
    refused(() => tern.encode(Format.F32, values(5, 1), 2, 2), 'TERN_ERR_LENGTH_MISMATCH', /data holds 5 floats, rows x cols = 4/);
    refused(() => tern.encode(Format.F32, values(4, 1), 0, 4), 'TERN_ERR_INVALID_SHAPE', /rows must be a positive integer/);
    refused(() => tern.encode(Format.F32, values(4, 1), 2.5, 4), 'TERN_ERR_INVALID_SHAPE', /rows/);
    refused(() => tern.encode(Format.F32, values(4, 1), 2 ** 20, 2 ** 20), 'TERN_ERR_SIZE_OVERFLOW', /does not fit/);
    refused(() => tern.encode(Format.F32, [1, 2, 3, 4], 2, 2), 'TERN_ERR_INVALID_ARGUMENT', /data must be a Float32Array/);
    refused(() => tern.wrap(Format.TQ2_0, values(66, 1), 1, 256), 'TERN_ERR_INVALID_ARGUMENT', /bytes must be a Uint8Array/);
    refused(() => d.matmul(tern.encode(Format.F32, values(512, 1), 1, 512), w, out), 'TERN_ERR_SHAPE_MISMATCH', /act has 512 cols, weight 0 256/);
    untouched();
    refused(() => d.matmul(a, w, new Float32Array(3)), 'TERN_ERR_LENGTH_MISMATCH', /out 0 holds 3 floats/);
    refused(() => d.matmul(a, w, new Float64Array(4)), 'TERN_ERR_INVALID_ARGUMENT', /outs must be an array of Float32Arrays/);
    refused(() => d.matmul(a, {}, out), 'TERN_ERR_INVALID_ARGUMENT', /weights must be a non-empty array of Tensors/);
    refused(() => d.matmul({}, w, out), 'TERN_ERR_INVALID_ARGUMENT', /act must be a Tensor/);
    refused(() => d.matmulMany(a, [], []), 'TERN_ERR_INVALID_ARGUMENT', /non-empty array/);
    refused(() => d.matmulMany(a, [w, w], [out]), 'TERN_ERR_LENGTH_MISMATCH', /outs holds 1 arrays, one per weight \(2\)/);
    refused(() => d.matmulMany(a, [w, w], [out, new Float32Array(5)]), 'TERN_ERR_LENGTH_MISMATCH', /out 1 holds 5 floats/);
    untouched();
    refused(() => tern.openGguf('GGUF'), 'TERN_ERR_INVALID_ARGUMENT', /bytes must be a Uint8Array/);
    // Refused by tern itself, with its status and message.
    refused(() => tern.encode(Format.TQ2_0, values(100, 1), 1, 100), 'TERN_ERR_INVALID_SHAPE', /multiple of the 256-element block/);
    refused(() => tern.encode(Format.TQ2_0, Float32Array.of(...values(255, 1), NaN), 1, 256), 'TERN_ERR_NON_FINITE', /element 255/);
    refused(() => tern.wrap(Format.TQ2_0, new Uint8Array(65), 1, 256), 'TERN_ERR_LENGTH_MISMATCH', /66 required/);
    // Another instance's objects.
    const another = await loadTern();
    const foreign = another.encode(Format.TQ2_0, values(4 * 256, 2), 4, 256);
    refused(() => d.matmul(a, foreign, out), 'TERN_ERR_INVALID_ARGUMENT', /different tern instances/);
    untouched();
    const other = tern.dispatcher();
    other.close();
    // Closed handles: closing twice is fine, using is refused.
    const closed = tern.encode(Format.F32, values(256, 1), 1, 256);
    closed.close();
    closed.close();
    refused(() => d.matmul(closed, w, out), 'TERN_ERR_INVALID_ARGUMENT', /this Tensor was closed/);
    refused(() => closed.decode(), 'TERN_ERR_INVALID_ARGUMENT', /this Tensor was closed/);
    refused(() => closed.bytes(), 'TERN_ERR_INVALID_ARGUMENT', /this Tensor was closed/);
    refused(() => other.matmul(a, w, out), 'TERN_ERR_INVALID_ARGUMENT', /this Dispatcher was closed/);
    untouched();
    for (const h of [w, a, d]) h.close();
});

test('corrupt and truncated GGUF files are errors with the reader\'s message', () => {
    refused(() => tern.openGguf(Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8)), 'TERN_ERR_INVALID_FILE', /not a GGUF file: magic/);
    refused(() => tern.openGguf(new Uint8Array(0)), 'TERN_ERR_INVALID_FILE', /truncated at offset 0/);
    for (const len of [4, 23, 100, 1000, modelBytes.length - 1]) {
        refused(() => tern.openGguf(modelBytes.subarray(0, len)), 'TERN_ERR_INVALID_FILE', /truncated|past the end|absurd/);
    }
    const absurd = Uint8Array.from(modelBytes);
    new DataView(absurd.buffer).setBigUint64(8, 1n << 60n, true); // tensor count
    refused(() => tern.openGguf(absurd), 'TERN_ERR_INVALID_FILE', /truncated or corrupt: tensor count/);
    const duplicate = gguf([['a', T.u8, 1], ['a', T.u8, 2]], []);
    refused(() => tern.openGguf(duplicate), 'TERN_ERR_INVALID_FILE', /duplicate/i);
    const g = tern.openGguf(modelBytes);
    refused(() => g.tensor('no such tensor'), 'TERN_ERR_NOT_FOUND', /no tensor named "no such tensor"/);
    refused(() => g.tensor(99), 'TERN_ERR_OUT_OF_BOUNDS', /tensor index 99 is not in 0..5/);
    g.close();
    // A 3-D tensor and one of a type tern has no format for: listed, not wrapped.
    const odd = gguf([], [
        { name: 'cube', ggmlType: 0, shape: [256, 2, 2], data: new Uint8Array(4 * 1024) },
        { name: 'f16', ggmlType: 1, shape: [256], data: new Uint8Array(512) },
    ]);
    const h = tern.openGguf(odd);
    assert.deepEqual(h.tensors.map((t) => [t.name, t.format, t.shape]), [['cube', Format.F32, [256, 2, 2]], ['f16', null, [256]]]);
    refused(() => h.tensor('cube'), 'TERN_ERR_INVALID_SHAPE', /tensor "cube": ne = \[256, 2, 2, 1\] is not a matrix/);
    refused(() => h.tensor('f16'), 'TERN_ERR_UNSUPPORTED', /tensor "f16": ggml type 1 has no tern format/);
    h.close();
});
