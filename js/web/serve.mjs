// A static server for the page: the package's directory at / (the page is /web/), and a
// GGUF file at /model.gguf when one is given.
//   node web/serve.mjs [--port N] [MODEL.gguf]
// Prints the URL when listening. Port 0 (the default) picks a free one.
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { createReadStream } from 'node:fs';
import { extname, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const portAt = args.indexOf('--port');
const port = portAt >= 0 ? Number(args.splice(portAt, 2)[1]) : 0;
const model = args[0] ? resolve(args[0]) : null;
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.gguf': 'application/octet-stream' };
const HEADERS = {
    // Cross-origin isolation: the page's timer then resolves 5 us instead of 100 us.
    'cross-origin-opener-policy': 'same-origin',
    'cross-origin-embedder-policy': 'require-corp',
};

const server = createServer(async (req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://localhost').pathname);
    if (path === '/') {
        res.writeHead(302, { location: '/web/' }).end();
        return;
    }
    if (path === '/model.gguf') {
        if (!model) {
            res.writeHead(404).end('no model: start the server with one (node web/serve.mjs MODEL.gguf)');
            return;
        }
        // Streamed, with its length, as a web server would send a large model.
        const { size } = await stat(model);
        res.writeHead(200, { ...HEADERS, 'content-type': TYPES['.gguf'], 'content-length': size });
        createReadStream(model).pipe(res);
        return;
    }
    const file = resolve(root, `.${normalize(path.endsWith('/') ? `${path}index.html` : path)}`);
    if (!file.startsWith(root.endsWith(sep) ? root : root + sep)) {
        res.writeHead(403).end();
        return;
    }
    try {
        const body = await readFile(file);
        res.writeHead(200, { ...HEADERS, 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(body);
    } catch {
        res.writeHead(404).end('not found');
    }
});
server.listen(port, '127.0.0.1', () => console.log(`http://127.0.0.1:${server.address().port}/`));
