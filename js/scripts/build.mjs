// `npm run build`: the package's two WebAssembly modules, built from this repository's
// js/wasm crate (tern's Rust API behind a small wasm ABI) into dist/:
//   dist/tern-simd128.wasm          -C target-feature=+simd128
//   dist/tern-relaxed-simd128.wasm  -C target-feature=+simd128,+relaxed-simd
// wasm has no run-time feature detection, so the target features of each build decide its
// kernels; load() picks one at run time (src/index.js). Needs cargo and the wasm32-wasip1
// std (`rustup target add wasm32-wasip1`, done here when rustup is there). Cargo's target
// directories are the repository's target/wasm-simd128 and target/wasm-relaxed, shared with
// scripts/test-wasm.sh.
//   node scripts/build.mjs [simd128] [relaxed]   (default: both)
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const pkg = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
const repo = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/$/, '');
/** The builds: their target features and the file each one becomes (VARIANTS in src/index.js). */
const BUILDS = {
    simd128: { features: '+simd128', file: 'tern-simd128.wasm' },
    relaxed: { features: '+simd128,+relaxed-simd', file: 'tern-relaxed-simd128.wasm' },
};

const builds = process.argv.length > 2 ? process.argv.slice(2) : Object.keys(BUILDS);
const run = (cmd, args, env = {}) => {
    try {
        execFileSync(cmd, args, { cwd: repo, stdio: 'inherit', env: { ...process.env, ...env } });
    } catch (e) {
        // The tool has printed why; no stack trace of this script on top.
        console.error(`build: ${cmd} ${args.join(' ')} failed (${e.status ?? e.code})`);
        process.exit(1);
    }
};

try {
    const installed = execFileSync('rustup', ['target', 'list', '--installed'], { encoding: 'utf8' });
    if (!installed.split('\n').includes('wasm32-wasip1')) run('rustup', ['target', 'add', 'wasm32-wasip1']);
} catch (e) {
    if (e.code !== 'ENOENT') throw e; // no rustup: cargo says what is missing
}
mkdirSync(`${pkg}/dist`, { recursive: true });
for (const build of builds) {
    const spec = BUILDS[build];
    if (!spec) throw new Error(`unknown build ${build}: ${Object.keys(BUILDS).join(' or ')}`);
    const targetDir = `${repo}/target/wasm-${build}`;
    console.error(`build: ${spec.file} (${spec.features})`);
    run('cargo', ['build', '-q', '--release', '--target', 'wasm32-wasip1', '--target-dir', targetDir, '-p', 'tern-js'], {
        RUSTFLAGS: `-C target-feature=${spec.features}`,
        // No debug info in the shipped module (the release profile keeps it for native profiling).
        CARGO_PROFILE_RELEASE_DEBUG: '0',
    });
    copyFileSync(`${targetDir}/wasm32-wasip1/release/tern_js.wasm`, `${pkg}/dist/${spec.file}`);
}
