#!/usr/bin/env bash
# Peer benchmark: ggml's TQ1_0/TQ2_0 kernels next to tern's, same process: m = 1 on one
# thread (ggml vec_dot vs every tern kernel), and batched (ggml_mul_mat graph on a ggml
# threadpool vs tern's dispatcher, m = 1..512, 1 and 2 threads). See peer/README.md.
# Builds llama.cpp's ggml from source through llama-cpp-sys-2 (several minutes the first
# time; the target dir is reused afterwards), with -C target-cpu=native so that ggml
# compiles its best kernels (GGML_NATIVE) and tern's runtime-detected kernels run as well.
#
# Usage: scripts/bench-peer.sh [--quick] [--gemv | --batched | --formats]
#   --quick    shorter budget
#   --gemv     only the m = 1 part;  --batched  only the batched part
#   --formats  only the Q2_0 byte parity (ggml's quantizer and dequantizer vs tern's)
# Env:   CARGO_TARGET_DIR (default: peer/target)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v clang >/dev/null || missing+=(clang)
# bindgen loads libclang at build time.
ls /usr/lib/llvm-*/lib/libclang*.so* /usr/lib/*/libclang*.so* >/dev/null 2>&1 || missing+=(libclang-dev)
if ((${#missing[@]})); then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        apt-get update -qq && apt-get install -y -qq "${missing[@]}"
    else
        echo "bench-peer: missing ${missing[*]}." >&2
        echo "  Debian/Ubuntu: sudo apt-get install ${missing[*]}" >&2
        echo "  elsewhere: install CMake, Clang and libclang (set LIBCLANG_PATH if needed)." >&2
        exit 1
    fi
fi

cd "$root/peer"
export RUSTFLAGS="${RUSTFLAGS:-} -C target-cpu=native"
cargo build --release
exec cargo run --release --quiet -- "$@"
