// End-to-end test of the page in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core): the server's model is listed and one token runs through the dispatcher
// with the expected kernel; corrupt and truncated files show tern's error, not a crash, and
// the page keeps working. Run by scripts/test-browser.sh.
//   node web/e2e.mjs [--screenshot FILE.png]
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { chromium } from 'playwright-core';

const args = process.argv.slice(2);
const shotAt = args.indexOf('--screenshot');
const screenshot = shotAt >= 0 ? args[shotAt + 1] : null;
const model = new URL('../../tests/fixtures/gguf/tiny_bitnet.gguf', import.meta.url);

const server = spawn(process.execPath, [new URL('serve.mjs', import.meta.url).pathname], { stdio: ['ignore', 'pipe', 'inherit'] });
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
    const page = await browser.newPage({ viewport: { width: 1100, height: 760 } });
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
        await page.waitForSelector('#tensors:not([hidden])');
        return text('#tensors tbody tr td:first-child');
    };
    assert.deepEqual(await listModel(), [
        'token_embd.weight', 'blk.0.attn_q.weight', 'blk.0.ffn_down.weight', 'blk.0.ffn_up.weight', 'output_norm.weight',
    ]);
    await page.click('#run');
    await page.waitForSelector('#events:not([hidden])');
    const events = await page.$$eval('#events tbody tr', (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent)));
    // Three ternary tensors: an adapter and a kernel each.
    assert.deepEqual(
        events.map((e) => [e[0], e[1], e[2]]),
        ['blk.0.attn_q.weight', 'blk.0.ffn_down.weight', 'blk.0.ffn_up.weight'].flatMap((t) => [
            [t, 'ADAPTER_INSERTED', 'requantize-i8-absmax'],
            [t, 'KERNEL_SELECTED', 'bitnet_gemv/wasm-relaxed-simd128'],
        ]),
    );
    assert.equal(await page.textContent('#error'), '');
    if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });

    // Corrupt and truncated files: tern's status and message on the page, nothing else.
    const good = await readFile(model);
    const garbage = Buffer.from('this is not a GGUF file at all, just text');
    const cases = [
        ['truncated.gguf', good.subarray(0, 1000), /TERN_ERR_INVALID_FILE: not a GGUF file tern can read: .*runs past the end/],
        ['garbage.gguf', garbage, /TERN_ERR_INVALID_FILE: not a GGUF file tern can read: not a GGUF file: magic/],
        ['empty.gguf', Buffer.alloc(0), /truncated at offset 0/],
    ];
    for (const [name, buffer, message] of cases) {
        await page.setInputFiles('#file', { name, mimeType: 'application/octet-stream', buffer });
        await page.waitForFunction(() => document.getElementById('error').textContent !== '');
        assert.match(await page.textContent('#error'), message, name);
        assert.equal(await page.isHidden('#tensors'), true, name);
        // The page still works: the good model opens again and the error is gone.
        assert.equal((await listModel()).length, 5);
        assert.equal(await page.textContent('#error'), '');
    }
    assert.deepEqual(crashes, []);
    console.log(`e2e: ok (${engine.trim()})`);
} finally {
    await browser.close();
    server.kill();
}
