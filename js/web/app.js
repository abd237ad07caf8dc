// The page: open a GGUF file (from disk or from the server), list its tensors, run one
// random F32 token through the dispatcher for every tensor tern has a kernel for, and show
// the events and timings. Errors (a corrupt file, a refused call) go to #error; the page
// keeps working.
import { Format, load } from '../src/index.js';

const $ = (id) => document.getElementById(id);
const FORMATS = Object.fromEntries(Object.entries(Format).map(([k, v]) => [v, k]));
const TERNARY = [Format.TQ1_0, Format.TQ2_0, Format.BITNET_B1_58];
const GGML_TYPES = { 0: 'F32', 1: 'F16', 34: 'TQ1_0', 35: 'TQ2_0' };

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

function open(bytes, source) {
    $('error').textContent = '';
    for (const id of ['tensors', 'events']) $(id).querySelector('tbody').replaceChildren();
    $('tensors').hidden = $('events').hidden = $('events-title').hidden = true;
    $('run').disabled = true;
    $('timing').textContent = '';
    file?.close();
    file = null;
    const start = performance.now();
    try {
        file = tern.openGguf(bytes);
    } catch (e) {
        $('source').textContent = `${source}: ${bytes.length.toLocaleString()} bytes, not opened`;
        showError(e);
        return;
    }
    const ms = performance.now() - start;
    $('source').textContent = `${source}: ${bytes.length.toLocaleString()} bytes, ${file.tensors.length} tensors, parsed in ${ms.toFixed(2)} ms`;
    for (const t of file.tensors) {
        row('tensors', [
            [t.name, 'mono'],
            [GGML_TYPES[t.ggmlType] ?? `type ${t.ggmlType}`],
            [t.format ? FORMATS[t.format] : '(none)'],
            [t.shape.join(' x '), 'num'],
            [t.byteLength?.toLocaleString() ?? '?', 'num'],
        ]);
    }
    $('tensors').hidden = false;
    $('run').disabled = !file.tensors.some((t) => TERNARY.includes(t.format));
}

function runOneToken() {
    $('error').textContent = '';
    $('events').querySelector('tbody').replaceChildren();
    const start = performance.now();
    let calls = 0;
    try {
        for (const [index, info] of file.tensors.entries()) {
            if (!TERNARY.includes(info.format)) continue;
            const weight = file.tensor(index);
            const k = weight.cols;
            const act = tern.encode(Format.F32, Float32Array.from({ length: k }, () => Math.random() * 2 - 1), 1, k);
            const dispatcher = tern.dispatcher({
                onEvent: (e) =>
                    row('events', [
                        [info.name, 'mono'],
                        [e.kind],
                        [e.name, 'mono'],
                        [`${e.from} → ${e.to}`],
                        [`${e.rows} x ${e.cols}`, 'num'],
                        [e.bytes.toLocaleString(), 'num'],
                        [(e.nanos / 1000).toFixed(1), 'num'],
                    ]),
            });
            try {
                dispatcher.matmul(act, weight);
                calls++;
            } finally {
                for (const h of [dispatcher, act, weight]) h.close();
            }
        }
    } catch (e) {
        showError(e);
    }
    $('events').hidden = $('events-title').hidden = false;
    const resolution = crossOriginIsolated ? '5 µs' : '100 µs';
    $('timing').textContent =
        `${calls} matmuls in ${(performance.now() - start).toFixed(2)} ms (page side, with encoding the token and ` +
        `copying each weight into tern); this page's timer resolves ${resolution}`;
}

$('file').addEventListener('change', async () => {
    const f = $('file').files[0];
    if (f) open(new Uint8Array(await f.arrayBuffer()), f.name);
});
$('server').addEventListener('click', async () => {
    try {
        const response = await fetch('/model.gguf');
        if (!response.ok) throw new Error(`GET /model.gguf: HTTP ${response.status}`);
        open(new Uint8Array(await response.arrayBuffer()), '/model.gguf');
    } catch (e) {
        showError(e);
    }
});
$('run').addEventListener('click', runOneToken);

try {
    const start = performance.now();
    tern = await load({ baseUrl: new URL('../dist/', import.meta.url) });
    $('engine').textContent = `tern ${tern.variant} build, loaded in ${(performance.now() - start).toFixed(1)} ms`;
    document.body.dataset.ready = 'true';
} catch (e) {
    $('engine').textContent = 'tern did not load';
    showError(e);
}
