// End-to-end test of the page in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core), run from wherever the package is (the repository's js/, or the
// package installed from its tarball into a fresh project: scripts/test-browser.sh): a
// model written by the tests' GGUF writer is served and listed with its metadata; one
// token and a batch run through each ternary weight with the relaxed-SIMD kernel and agree
// with the reference kernel; corrupt and truncated files picked with the file picker show
// tern's error, not a crash, and the page keeps working.
//   node web/e2e.mjs [--screenshot FILE.png]
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { load } from 'tern-wasm';
import { model, MODEL_METADATA, MODEL_TENSORS } from '../test/gguf.js';

const args = process.argv.slice(2);
const shotAt = args.indexOf('--screenshot');
const screenshot = shotAt >= 0 ? args[shotAt + 1] : null;

const dir = await mkdtemp(join(tmpdir(), 'tern-e2e-'));
const good = model(await load());
await writeFile(join(dir, 'model.gguf'), good);
const server = spawn(process.execPath, [new URL('serve.mjs', import.meta.url).pathname, join(dir, 'model.gguf')], { stdio: ['ignore', 'pipe', 'inherit'] });
const url = await new Promise((ok, fail) => {
    server.stdout.once('data', (d) => ok(String(d).trim()));
    server.once('exit', (code) => fail(new Error(`the server exited (${code})`)));
});
const browser = await chromium.launch({
    executablePath: process.env.TERN_CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    // No sandbox as root; no network beyond localhost (this machine's is closed).
    args: [
        '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
});
try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
    const crashes = [];
    page.on('pageerror', (e) => crashes.push(e.message));
    page.on('crash', () => crashes.push('the page crashed'));
    await page.goto(url);
    await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
    const engine = await page.textContent('#engine');
    // Current Chromium validates relaxed SIMD, so the loader must pick that build.
    assert.match(engine, /relaxed-simd128 build/);

    const text = (sel) => page.$$eval(sel, (cells) => cells.map((c) => c.textContent));
    const listModel = async () => {
        await page.click('#server');
        await page.waitForSelector('#contents:not([hidden])');
        return text('#tensors tbody tr td:first-child');
    };
    assert.deepEqual(await listModel(), MODEL_TENSORS.map(([name]) => name));
    assert.deepEqual(await text('#metadata tbody tr td:first-child'), MODEL_METADATA.map(([key]) => key));
    const meta = Object.fromEntries((await page.$$eval('#metadata tbody tr', (rows) => rows.map((r) => [r.cells[0].textContent, r.cells[1].textContent]))));
    assert.equal(meta['general.architecture'], '"bitnet"');
    assert.equal(meta['tokenizer.ggml.tokens'], '["<s>", "</s>", "hello", "world"]');
    assert.equal(meta['tern.u64'], String(2n ** 63n + 5n));

    // Every ternary weight: one token (the relaxed GEMV) and a batch of 16 (the relaxed GEMM,
    // which serves every format from 8 tokens at most), parity ok.
    const weights = await text('#weight option');
    assert.deepEqual(weights, ['blk.0.attn_q.weight', 'blk.0.ffn_down.weight', 'blk.0.ffn_up.weight']);
    for (const weight of [...weights.slice(1), weights[0]]) {
        await page.selectOption('#weight', weight);
        await page.click('#run');
        await page.waitForSelector('#results:not([hidden])');
        const rows = await page.$$eval('#results tbody tr', (rs) => rs.map((r) => [...r.cells].map((c) => c.textContent)));
        assert.deepEqual(rows.map((r) => [r[0], r[1].split(' ')[0], r[2], r[7]]), [
            ['1', weight, 'bitnet_gemv/wasm-relaxed-simd128', 'ok'],
            ['16', weight, 'bitnet_gemm/wasm-relaxed-simd128', 'ok'],
        ]);
        assert.ok(rows.every((r) => Number(r[6]) <= 1e-5), JSON.stringify(rows));
        assert.equal(await page.textContent('#error'), '');
    }
    if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });

    // Corrupt and truncated files: tern's status and message on the page, nothing else.
    const cases = [
        ['truncated.gguf', good.subarray(0, 1000), /TERN_ERR_INVALID_FILE: .*(runs past the end|truncated)/],
        ['garbage.gguf', Buffer.from('this is not a GGUF file at all, just text'), /TERN_ERR_INVALID_FILE: not a GGUF file: magic/],
        ['empty.gguf', Buffer.alloc(0), /truncated at offset 0/],
    ];
    for (const [name, buffer, message] of cases) {
        await page.setInputFiles('#file', { name, mimeType: 'application/octet-stream', buffer: Buffer.from(buffer) });
        await page.waitForFunction(() => document.getElementById('error').textContent !== '');
        assert.match(await page.textContent('#error'), message, name);
        assert.equal(await page.isHidden('#contents'), true, name);
        // The page still works: the good model opens again and the error is gone.
        assert.equal((await listModel()).length, MODEL_TENSORS.length);
        assert.equal(await page.textContent('#error'), '');
    }
    // The file picker opens a good file as well.
    await page.setInputFiles('#file', { name: 'model.gguf', mimeType: 'application/octet-stream', buffer: Buffer.from(good) });
    await page.waitForFunction(() => document.getElementById('source').textContent.startsWith('model.gguf: 5 tensors'));
    assert.deepEqual(crashes, []);
    console.log(`e2e: ok (${engine.trim()})`);
} finally {
    await browser.close();
    server.kill();
    await rm(dir, { recursive: true, force: true });
}
