// The page: open a GGUF file (a file picker, or the server's /model.gguf) straight into
// wasm memory (readGguf: no copy of the file on the JS side), list its tensors and
// metadata, and run one random token and a batch through a chosen weight: the kernel the
// dispatcher picked, its time, and parity against tern's reference kernel. Errors (a
// corrupt file, a refused call) go to #error; the page keeps working.
import { Format, load } from '../src/index.js';

const $ = (id) => document.getElementById(id);
const FORMATS = Object.fromEntries(Object.entries(Format).map(([k, v]) => [v, k]));
const TERNARY = [Format.TQ1_0, Format.TQ2_0, Format.BITNET_B1_58];
const GGML_TYPES = { 0: 'F32', 1: 'F16', 34: 'TQ1_0', 35: 'TQ2_0' };
/** The README's parity tolerance: max |got - want| / max(1, |want|). */
const TOLERANCE = 1e-5;

let tern;
let file = null;

function row(table, cells) {
    const tr = document.createElement('tr');
    for (const [text, cls] of cells) {
        const td = document.createElement('td');
        td.textContent = text;
        if (cls) td.className = cls;
        tr.append(td);
    }
    $(table).querySelector('tbody').append(tr);
}

function showError(e) {
    $('error').textContent = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

/** A metadata value for a table cell: long arrays shortened. */
function show(value) {
    if (Array.isArray(value)) {
        const shown = value.slice(0, 8).map(show).join(', ');
        return `[${shown}${value.length > 8 ? `, … ${value.length - 8} more` : ''}]`;
    }
    return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

async function open(source, label) {
    $('error').textContent = '';
    for (const id of ['tensors', 'metadata', 'results']) $(id).querySelector('tbody').replaceChildren();
    $('contents').hidden = $('results').hidden = true;
    $('timing').textContent = '';
    $('weight').replaceChildren();
    file?.close();
    file = null;
    const start = performance.now();
    try {
        file = await tern.readGguf(source);
    } catch (e) {
        $('source').textContent = `${label}: not opened`;
        showError(e);
        return;
    }
    const ms = performance.now() - start;
    const bytes = file.tensors.reduce((n, t) => n + (t.byteLength ?? 0), 0);
    $('source').textContent =
        `${label}: ${file.tensors.length} tensors (${bytes.toLocaleString()} bytes of data), ` +
        `${file.metadataKeys.length} metadata keys, read into wasm memory and parsed in ${ms.toFixed(1)} ms`;
    for (const t of file.tensors) {
        row('tensors', [
            [t.name, 'mono'],
            [GGML_TYPES[t.ggmlType] ?? `type ${t.ggmlType}`],
            [t.format ? FORMATS[t.format] : '(none)'],
            [t.shape.join(' x '), 'num'],
            [t.byteLength?.toLocaleString() ?? '?', 'num'],
        ]);
        if (TERNARY.includes(t.format) && t.shape.length <= 2) $('weight').append(new Option(t.name, t.name));
    }
    for (const key of file.metadataKeys) row('metadata', [[key, 'mono'], [show(file.metadata(key)), 'mono']]);
    $('run').disabled = $('weight').options.length === 0;
    $('contents').hidden = false;
}

/** One matmul through `dispatcher`: its output, the kernel it ran, the kernel's and the page's time. */
function timed(dispatcher, kernels, act, weight) {
    kernels.length = 0;
    const start = performance.now();
    const out = dispatcher.matmul(act, weight);
    return { out, ms: performance.now() - start, kernel: kernels.at(-1) };
}

function run() {
    $('error').textContent = '';
    $('results').querySelector('tbody').replaceChildren();
    const name = $('weight').value;
    const batch = Number($('batch').value);
    const handles = [];
    try {
        const weight = file.tensor(name);
        handles.push(weight);
        const kernels = [];
        const onEvent = (e) => e.kind === 'KERNEL_SELECTED' && kernels.push(e);
        const best = tern.dispatcher({ strict: true, onEvent });
        const reference = tern.dispatcher({ kernel: 'bitnet_gemv/reference', onEvent });
        handles.push(best, reference);
        for (const m of [1, batch]) {
            const k = weight.cols;
            const act = tern.encode(Format.F32, Float32Array.from({ length: m * k }, () => Math.random() * 2 - 1), m, k);
            handles.push(act);
            const got = timed(best, kernels, act, weight);
            const want = timed(reference, kernels, act, weight);
            let err = 0;
            for (let i = 0; i < got.out.length; i++) {
                err = Math.max(err, Math.abs(got.out[i] - want.out[i]) / Math.max(1, Math.abs(want.out[i])));
            }
            const ok = err <= TOLERANCE;
            row('results', [
                [String(m), 'num'],
                [`${name} (${weight.rows} x ${weight.cols} ${weight.formatName})`, 'mono'],
                [got.kernel.name, 'mono'],
                [got.ms.toFixed(2), 'num'],
                [(got.kernel.nanos / 1000).toFixed(1), 'num'],
                [(want.kernel.nanos / 1000).toFixed(1), 'num'],
                [err.toExponential(1), 'num'],
                [ok ? 'ok' : 'FAILED', ok ? 'ok' : 'bad'],
            ]);
        }
    } catch (e) {
        showError(e);
    } finally {
        for (const h of handles) h.close();
    }
    $('results').hidden = false;
    const resolution = crossOriginIsolated ? '5 µs' : '100 µs';
    $('timing').textContent =
        `Random F32 activations, requantized to int8 by the dispatcher; kernel times from its events, ` +
        `page times around the call; this page's timer resolves ${resolution}.`;
}

$('file').addEventListener('change', () => {
    const f = $('file').files[0];
    if (f) open(f, f.name);
});
$('server').addEventListener('click', async () => {
    try {
        await open(await fetch('/model.gguf'), '/model.gguf');
    } catch (e) {
        showError(e);
    }
});
$('run').addEventListener('click', run);

try {
    const start = performance.now();
    tern = await load({ baseUrl: new URL('../dist/', import.meta.url) });
    $('engine').textContent = `tern ${tern.versions.tern}, ${tern.variant} build, loaded in ${(performance.now() - start).toFixed(1)} ms`;
    document.body.dataset.ready = 'true';
} catch (e) {
    $('engine').textContent = 'tern did not load';
    showError(e);
}
