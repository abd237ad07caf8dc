// A static server for the page: js/ at /, and a GGUF file at /model.gguf.
//   node web/serve.mjs [--port N] [MODEL.gguf]   (default: the repository's test fixture)
// Prints the URL when listening. Port 0 (the default) picks a free one.
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { extname, normalize, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const portAt = args.indexOf('--port');
const port = portAt >= 0 ? Number(args.splice(portAt, 2)[1]) : 0;
const model = resolve(args[0] ?? fileURLToPath(new URL('../../tests/fixtures/gguf/tiny_bitnet.gguf', import.meta.url)));
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.gguf': 'application/octet-stream' };

const server = createServer(async (req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://localhost').pathname);
    if (path === '/') {
        res.writeHead(302, { location: '/web/' }).end();
        return;
    }
    const file = path === '/model.gguf' ? model : resolve(root, `.${normalize(path.endsWith('/') ? `${path}index.html` : path)}`);
    if (!file.startsWith(root) && file !== model) {
        res.writeHead(403).end();
        return;
    }
    try {
        const body = await readFile(file);
        res.writeHead(200, {
            'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
            // Cross-origin isolation: the page's timer then resolves 5 us instead of 100 us.
            'cross-origin-opener-policy': 'same-origin',
            'cross-origin-embedder-policy': 'require-corp',
        }).end(body);
    } catch {
        res.writeHead(404).end('not found');
    }
});
server.listen(port, '127.0.0.1', () => console.log(`http://127.0.0.1:${server.address().port}/`));
