// The WASI preview1 calls tern_js.wasm uses (the Rust std on wasm32-wasip1 calls them for
// Instant, HashMap seeds, environment variables and panic messages), the same in node and
// in the browser, so the package needs neither node:wasi nor a WASI polyfill. Every other
// import of the module (the file system, which only tern's unused path-based C calls
// reach) returns ENOSYS: there is no file system here.

const ESUCCESS = 0;
const EBADF = 8;
const ENOSYS = 52;

/**
 * @param {WebAssembly.Module} module the module whose wasi_snapshot_preview1 imports to serve
 * @param {() => WebAssembly.Memory} memory the instance's memory, once it exists
 * @param {Record<string, string>} env environment variables the module sees (e.g. TERN_KERNEL)
 */
export function wasiImports(module, memory, env) {
    const calls = implemented(memory, env);
    for (const { module: from, name, kind } of WebAssembly.Module.imports(module)) {
        if (from === 'wasi_snapshot_preview1' && kind === 'function' && !(name in calls)) calls[name] = () => ENOSYS;
    }
    return calls;
}

function implemented(memory, env) {
    const encoder = new TextEncoder();
    const vars = Object.entries(env).map(([k, v]) => encoder.encode(`${k}=${v}\0`));
    const decoder = new TextDecoder();
    let stderr = '';
    const view = () => new DataView(memory().buffer);
    return {
        random_get(ptr, len) {
            // getRandomValues fills at most 65,536 bytes per call.
            for (let off = 0; off < len; off += 65536) {
                crypto.getRandomValues(new Uint8Array(memory().buffer, ptr + off, Math.min(65536, len - off)));
            }
            return ESUCCESS;
        },
        environ_sizes_get(countPtr, sizePtr) {
            view().setUint32(countPtr, vars.length, true);
            view().setUint32(sizePtr, vars.reduce((n, v) => n + v.length, 0), true);
            return ESUCCESS;
        },
        environ_get(ptrsPtr, bufPtr) {
            const bytes = new Uint8Array(memory().buffer);
            for (const [i, v] of vars.entries()) {
                view().setUint32(ptrsPtr + 4 * i, bufPtr, true);
                bytes.set(v, bufPtr);
                bufPtr += v.length;
            }
            return ESUCCESS;
        },
        clock_time_get(id, _precision, outPtr) {
            // Realtime (0) from Date; the others from performance.now(), whose resolution
            // the host sets (5 us in a cross-origin-isolated page, 100 us otherwise).
            const nanos = id === 0 ? BigInt(Date.now()) * 1000000n : BigInt(Math.round(performance.now() * 1e6));
            view().setBigUint64(outPtr, nanos, true);
            return ESUCCESS;
        },
        fd_write(fd, iovs, iovsLen, nwrittenPtr) {
            if (fd !== 1 && fd !== 2) return EBADF;
            let written = 0;
            for (let i = 0; i < iovsLen; i++) {
                const ptr = view().getUint32(iovs + 8 * i, true);
                const len = view().getUint32(iovs + 8 * i + 4, true);
                stderr += decoder.decode(new Uint8Array(memory().buffer, ptr, len));
                written += len;
            }
            // Whole lines to the console (a panic message before the trap that follows it).
            const end = stderr.lastIndexOf('\n');
            if (end >= 0) {
                console.error(stderr.slice(0, end));
                stderr = stderr.slice(end + 1);
            }
            view().setUint32(nwrittenPtr, written, true);
            return ESUCCESS;
        },
        proc_exit(code) {
            throw new Error(`tern_js.wasm called proc_exit(${code})`);
        },
    };
}
