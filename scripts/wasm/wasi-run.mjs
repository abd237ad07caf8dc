// Runs a wasm32-wasip1 program (a cargo test binary, or the C harness) under node's WASI:
// `node wasi-run.mjs PROGRAM.wasm [ARGS...]`. Cargo uses it as CARGO_TARGET_WASM32_WASIP1_RUNNER.
//
// The whole file system is preopened at '/' and the working directory is passed as PWD, so
// tests that read fixtures by path work as they do natively. Imports from `env` that the
// program leaves undefined (the Rust std's pthread calls, when Debian's wasi-libc has no
// pthread stubs; see scripts/test-wasm.sh) become functions that trap: tern never calls
// them, since it spawns no thread on wasm, and a call would fail loudly, not silently.
import { readFile } from 'node:fs/promises';
import { setFlagsFromString } from 'node:v8';
import { WASI } from 'node:wasi';

// node 22 calls WASI's fd_write from wasm through V8's fast API path, where uvwasi's
// allocation can report memory pressure and start a garbage collection that cannot walk
// the stack: a segfault in `InnerPointerToCodeCache::GetCacheEntry` (gdb), seen running
// `tern bench` at 6912x2560 (~75 MB of wasm memory), 3 runs in 4. Without fast API calls
// (set before anything is compiled) 5 runs in 5 pass; node 20 never crashed.
setFlagsFromString('--no-turbo-fast-api-calls');

const [program, ...args] = process.argv.slice(2);
const wasi = new WASI({
    version: 'preview1',
    args: [program, ...args],
    env: { ...process.env, PWD: process.cwd() },
    preopens: { '/': '/' },
    returnOnExit: true,
});
const module = await WebAssembly.compile(await readFile(program));
const imports = wasi.getImportObject();
for (const imp of WebAssembly.Module.imports(module)) {
    if (imp.module === 'env' && imp.kind === 'function') {
        imports.env ??= {};
        imports.env[imp.name] = () => {
            throw new Error(`${program}: called the undefined import env.${imp.name}`);
        };
    }
}
const instance = await WebAssembly.instantiate(module, imports);
process.exitCode = wasi.start(instance);
