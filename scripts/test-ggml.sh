#!/usr/bin/env bash
# llama.cpp on tern: builds libggml-tern (ggml-tern/) against the llama.cpp tree vendored
# in the PyPI sdist of llama-cpp-python, then checks it with llama.cpp's own tools:
#   1. test-backend-ops -b tern -o MUL_MAT: every case tern claims passes, and the claimed
#      cases include every TQ1_0/TQ2_0/Q2_0 x F32 case of the suite but those whose weight
#      rows are not adjacent (a permuted view: tern wraps weights in place, never copies);
#   2. ggml-tern/test/ops.cpp: batched and broadcast MUL_MATs against an f64 reference, next
#      to the CPU backend's error, and the shapes supports_op must refuse;
#   3. a synthetic model at BitNet b1.58 2B4T's shapes (fewer layers), quantized by
#      llama-quantize to TQ1_0, TQ2_0 and Q2_0, runs through llama-bench with and without the
#      backend, and the backend's counts show the ternary MUL_MATs ran on tern;
#   4. one forward pass's logits with the backend against the CPU backend, both against
#      the F16 model (which holds the same ternary weights) as the reference;
#   5. valgrind: models, contexts and backends made and freed repeatedly leak nothing.
# Everything downloaded or built for llama.cpp is cached in TERN_GGML_CACHE (default
# ~/.cache/tern/llama.cpp-<version>), so a rerun only rebuilds the backend. No network or
# no PyPI: prints a SKIP line and exits 0.
#   TERN_GGML_CPU_FLAGS  ggml's CPU features (GGML_BACKEND_DL refuses GGML_NATIVE);
#                        default: a portable AVX2 set
#   TERN_GGML_LAYERS     layers of the synthetic model (default 4; BitNet 2B4T has 30)
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.3.36
cache=${TERN_GGML_CACHE:-$HOME/.cache/tern/llama.cpp-$version}
cpu_flags=${TERN_GGML_CPU_FLAGS:-"-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"}
layers=${TERN_GGML_LAYERS:-4}
jobs=$(nproc)
src=$cache/src
bin=$cache/build/bin
models=$cache/models
here=$PWD
build=$here/build/ggml
module=$build/libggml-tern.so
step() { echo "--- ggml: $* ($(date +%T))"; }
# logged LOG COMMAND...: runs the command with its output in LOG; on failure shows the end.
logged() {
    local log=$1
    shift
    "$@" >"$log" 2>&1 || { tail -30 "$log"; echo "FAIL ggml: $*"; exit 1; }
}
# The backend's count of the MUL_MATs it ran of one type (ggml's name, e.g. tq2_0), summed
# over the stats lines in a log (TERN_GGML_STATS: one line per backend freed).
tern_runs() {
    grep -o "ggml-tern stats: .*" "$1" | grep -o " $2=[0-9]*" | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }'
}
no_tern() { env -u GGML_BACKEND_PATH "$@"; }
# The ternary weight types the backend must claim, as llama-quantize names them.
types=(TQ1_0 TQ2_0 Q2_0)

if [[ ! -f $src/tests/test-backend-ops.cpp ]]; then
    step "llama.cpp source: llama-cpp-python==$version sdist from PyPI"
    dl=$(mktemp -d)
    trap 'rm -rf "$dl"' EXIT
    if ! (cd "$dl" && python3 -m pip download --no-deps --no-binary :all: \
        "llama-cpp-python==$version" >pip.log 2>&1); then
        tail -3 "$dl/pip.log"
        echo "SKIP ggml: cannot download llama-cpp-python==$version from PyPI (the llama.cpp source)"
        exit 0
    fi
    mkdir -p "$cache"
    tar -xzf "$dl/llama_cpp_python-$version.tar.gz" -C "$dl"
    rm -rf "$src"
    mv "$dl/llama_cpp_python-$version/vendor/llama.cpp" "$src"
fi

# gguf-py (the synthetic model) and the logits check need numpy, which a fresh machine's
# python3 lacks: installed from PyPI into the cache, not into the system's python.
if ! python3 -c 'import numpy' 2>/dev/null; then
    pydeps=$cache/python
    if ! PYTHONPATH=$pydeps python3 -c 'import numpy' 2>/dev/null; then
        step "numpy from PyPI into $pydeps"
        if ! python3 -m pip install --quiet --disable-pip-version-check --target "$pydeps" numpy; then
            echo "SKIP ggml: cannot install numpy from PyPI (gguf-py needs it)"
            exit 0
        fi
    fi
    export PYTHONPATH=$pydeps${PYTHONPATH:+:$PYTHONPATH}
fi

step "llama.cpp build (ggml $cpu_flags)"
# GGML_BACKEND_DL: ggml loads its CPU backend and GGML_BACKEND_PATH's as modules.
# shellcheck disable=SC2086 # cpu_flags is a list of -D options
logged "$cache/configure.log" cmake -S "$src" -B "$cache/build" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=ON -DGGML_BACKEND_DL=ON -DGGML_NATIVE=OFF $cpu_flags -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_EXAMPLES=OFF
logged "$cache/build.log" cmake --build "$cache/build" -j "$jobs" \
    --target ggml-cpu llama test-backend-ops llama-bench llama-quantize

step "libggml-tern and its test programs"
mkdir -p "$build"
logged "$build/configure.log" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTERN_BUILD_TESTS=OFF \
    -DTERN_INSTALL=OFF -DTERN_CARGO_TARGET_DIR="$here/build/cargo" -DTERN_GGML_SOURCE_DIR="$src"
logged "$build/build.log" cmake --build "$build" -j "$jobs" --target ggml-tern ggml-tern-static
tools_flags=(-O2 -std=c++17 -Wall -Wextra -Werror -I"$src/include" -I"$src/ggml/include"
             -L"$bin" -Wl,-rpath,"$bin")
c++ "${tools_flags[@]}" ggml-tern/test/logits.cpp -o "$build/logits" -lllama -lggml -lggml-base
c++ "${tools_flags[@]}" ggml-tern/test/ops.cpp -o "$build/ops" -lggml -lggml-base
# The second way in: libggml-tern.a linked in and registered with ggml_backend_register
# (with the OpenMP flag it was built with, if any).
openmp_flags=$(sed -n 's/^OpenMP_CXX_FLAGS:STRING=//p' "$build/CMakeCache.txt")
# shellcheck disable=SC2086 # openmp_flags is a list of flags, or none
c++ "${tools_flags[@]}" -DTERN_GGML_REGISTER -Iggml-tern ggml-tern/test/ops.cpp -o "$build/ops-registered" \
    "$build/ggml-tern/libggml-tern.a" "$build/lib/libtern.a" -lggml -lggml-base $openmp_flags \
    -lgcc_s -lutil -lrt -lpthread -lm -ldl
export GGML_BACKEND_PATH=$module
# ggml finds its CPU backend module next to the program or in the current directory.
cd "$bin"

step "test-backend-ops -b tern -o MUL_MAT"
logged "$build/backend-ops.log" ./test-backend-ops -b tern -o MUL_MAT
python3 - "$build/backend-ops.log" "${types[@]}" <<'EOF'
import re, sys
log = re.sub(r"\x1b\[[0-9;]*m", "", open(sys.argv[1]).read())  # no colours
lines = [l.strip() for l in log.splitlines() if l.lstrip().startswith("MUL_MAT(")]
claimed = [l for l in lines if l.endswith(("OK", "FAIL"))]
passed = [l for l in claimed if l.endswith("OK")]
print(f"test-backend-ops MUL_MAT on tern: {len(lines)} cases, {len(claimed)} claimed, {len(passed)} passed")
assert "Backend 2/2: tern" in log and "Backend tern: OK" in log, "test-backend-ops did not pass on tern"
assert len(passed) == len(claimed), "a case tern claims failed"
ternary = []
for t in sys.argv[2:]:
    cases = [l for l in lines if f"type_a={t.lower()},type_b=f32," in l]
    # A weight permuted so that its rows are no longer adjacent (per[1] != 1) is not a
    # matrix tern can wrap in place (weights are never copied): refused. Every other case
    # of the type, batch dims permuted included, must be claimed.
    strided_rows = [l for l in cases if not re.search(r"per=\[0,1,", l)]
    refused = [l for l in cases if "not supported" in l]
    print(f"  {t} x F32: {len(cases)} cases, {len(cases) - len(refused)} claimed, "
          f"{len(refused)} refused (weight rows not adjacent: {len(strided_rows)})")
    assert len(cases) >= 10, f"the suite's {t} cases are missing: a different llama.cpp?"
    assert set(refused) <= set(strided_rows), f"tern refused a {t} case:\n" + "\n".join(set(refused) - set(strided_rows))
    assert set(strided_rows) <= set(refused), f"tern claimed a {t} weight with strided rows:\n" + "\n".join(set(strided_rows) - set(refused))
    ternary += cases
assert set(claimed) <= set(ternary), "tern claimed a non-ternary case"
EOF

# Whose threads run tern's tasks: where ggml's CPU backend runs on OpenMP (this build links
# libgomp), the backend must run them on the same OpenMP team (docs/ggml-backend.md).
# grep reads all of ldd's output: `grep -q` stops at the first match, and under pipefail
# ldd's SIGPIPE then fails the pipeline (seen in CI: the check took the wrong branch).
if ldd ./libggml-cpu.so | grep libgomp >/dev/null; then
    threads="the OpenMP team of ggml's CPU backend" executor=openmp
else
    threads="tern's own pool" executor=tern
fi
grep -q "Device description: tern .*threads: $threads)" "$build/backend-ops.log" ||
    { grep "Device description: tern" "$build/backend-ops.log"; echo "FAIL ggml: tern's tasks do not run on $threads"; exit 1; }
echo "tern's tasks run on $threads"

step "batched MUL_MAT, refusals, activation drift against f64 (ggml-tern/test/ops.cpp)"
"$build/ops"
step "the same with libggml-tern.a linked in and registered (ggml_backend_register)"
logged "$build/ops-registered.log" no_tern "$build/ops-registered"
tail -1 "$build/ops-registered.log"

step "synthetic model ($layers layers), quantized by llama-quantize"
mkdir -p "$models"
# synthetic-model PATH LAYERS [OPTIONS]: the F16 file and its quantizations to each type;
# token_embd and output stay F16, so that all of them hold the same weights.
synthetic_model() {
    local f16=$1-f16.gguf
    if [[ ! -f $f16 ]]; then
        PYTHONPATH=$src/gguf-py${PYTHONPATH:+:$PYTHONPATH} python3 "$here/ggml-tern/test/synthetic_model.py" "$f16.tmp" "${@:2}"
        mv "$f16.tmp" "$f16"
    fi
    for type in "${types[@]}"; do
        [[ -f $1-$type.gguf ]] || logged "$1-$type.log" ./llama-quantize --output-tensor-type f16 \
            --token-embedding-type f16 "$f16" "$1-$type.gguf" "$type"
    done
}
model=$models/synthetic-$layers
synthetic_model "$model" --layers "$layers"

for type in "${types[@]}"; do
    step "llama-bench $type, with and without tern"
    bench=(./llama-bench -m "$model-$type.gguf" -p 32 -n 4 -r 1 -t 2)
    logged "$build/bench-cpu-$type.log" no_tern "${bench[@]}"
    TERN_GGML_STATS=1 logged "$build/bench-tern-$type.log" "${bench[@]}"
    grep -hE "^\| .*(pp|tg)[0-9]+" "$build/bench-cpu-$type.log" "$build/bench-tern-$type.log"
    ran=$(tern_runs "$build/bench-tern-$type.log" "${type,,}")
    # 7 ternary MUL_MATs a layer (Q, K, V, O, gate, up, down) per batch; pp32 and tg4 with
    # a warm-up each are 1 + 1 + 1 + 4 batches.
    want=$((7 * layers * 7))
    echo "tern ran $ran $type MUL_MATs in llama-bench (at least $want expected)"
    [[ $ran -ge $want ]] || { echo "FAIL ggml: the ternary MUL_MATs did not run on tern"; exit 1; }
    grep -q "ggml-tern stats: .* threads=2/$executor$" "$build/bench-tern-$type.log" ||
        { echo "FAIL ggml: llama-bench -t 2 did not run tern on 2 threads of $threads"; exit 1; }
    ! grep -q "ggml-tern stats" "$build/bench-cpu-$type.log" \
        || { echo "FAIL ggml: tern ran without GGML_BACKEND_PATH"; exit 1; }
done

step "one forward pass: logits with tern against the CPU backend and the F16 model"
n_tokens=16
logged "$build/logits-f16.log" no_tern "$build/logits" "$model-f16.gguf" $n_tokens 2 "$build/logits-f16.bin"
for type in "${types[@]}"; do
    logged "$build/logits-cpu-$type.log" \
        no_tern "$build/logits" "$model-$type.gguf" $n_tokens 2 "$build/logits-cpu-$type.bin"
    TERN_GGML_STATS=1 logged "$build/logits-tern-$type.log" \
        "$build/logits" "$model-$type.gguf" $n_tokens 2 "$build/logits-tern-$type.bin"
    ran=$(tern_runs "$build/logits-tern-$type.log" "${type,,}")
    [[ $ran -eq $((7 * layers)) ]] || { echo "FAIL ggml: tern ran $ran $type MUL_MATs, not $((7 * layers))"; exit 1; }
done
# TQ2_0 again on the kernel TQ1_0 ran: the dispatcher may pick another kernel for each at
# this token count (on AVX-512 the TQ1_0 GEMM serves from 4 tokens, TQ2_0's from 24), whose
# f32 sums differ in the last bits, and this random model amplifies that to ~1e-2 in its
# logits (requantized activations round the other way, attention sharpens it).
same_kernel=$(grep -o "kernels: [^=]*" "$build/logits-tern-TQ1_0.log" | head -1 | cut -d' ' -f2)
TERN_KERNEL=$same_kernel TERN_GGML_STATS=1 logged "$build/logits-tern-TQ2_0-same.log" \
    "$build/logits" "$model-TQ2_0.gguf" $n_tokens 2 "$build/logits-tern-TQ2_0-same.bin"
grep -q "kernels: $same_kernel=" "$build/logits-tern-TQ2_0-same.log" ||
    { echo "FAIL ggml: TERN_KERNEL=$same_kernel did not run TQ2_0"; exit 1; }
python3 - "$build" $n_tokens "$same_kernel" "${types[@]}" <<'EOF'
import sys
import numpy as np
build, n_tokens, same_kernel = sys.argv[1], int(sys.argv[2]), sys.argv[3]
load = lambda name: np.fromfile(f"{build}/logits-{name}.bin", dtype=np.float32).reshape(n_tokens, -1).astype(np.float64)
ref = load("f16")

def rel(a, b):
    """Per-token relative L2 distance of two logit rows, the worst token."""
    return float(np.max(np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)))

types = sys.argv[4:]
for t in types:
    cpu, tern = load(f"cpu-{t}"), load(f"tern-{t}")
    cpu_ref, tern_ref, tern_cpu = rel(cpu, ref), rel(tern, ref), rel(tern, cpu)
    top1 = float(np.mean(np.argmax(tern, 1) == np.argmax(cpu, 1)))
    print(f"{t}: worst-token relative L2 of the logits: CPU vs F16 {cpu_ref:.4f}, tern vs F16 "
          f"{tern_ref:.4f}, tern vs CPU {tern_cpu:.4f}; top-1 agreement tern/CPU {top1:.2f}")
    # Both backends round the activations to 8 bits per block before each ternary matmul:
    # for TQ1_0/TQ2_0 per 256 (ggml's Q8_K, tern's I8_BLOCK256), for Q2_0 per 32 (Q8_0,
    # I8_BLOCK32), so tern drifts no further from the F16 model than the CPU backend (bound
    # 1.1x, for ties rounded otherwise). A wrong kernel, layout or slice would be off by ~100%.
    drift, disagree = 1.1, 1.5
    assert tern_ref <= drift * cpu_ref, f"{t}: tern drifts from the F16 model over {drift}x as far as the CPU backend"
    assert tern_cpu <= disagree * cpu_ref, f"{t}: tern and the CPU backend disagree beyond their rounding"
# TQ1_0 and TQ2_0 hold the same trits and scales and tern quantizes their activations the
# same way (per block): on one kernel their logits agree to float rounding (bit for bit, here).
same = rel(load("tern-TQ2_0-same"), load("tern-TQ1_0"))
print(f"TQ2_0 on {same_kernel}, the kernel of TQ1_0: relative L2 to TQ1_0's logits {same:.1e}")
assert same <= 1e-5, f"TQ2_0: tern's logits differ from its TQ1_0 logits on one kernel"
EOF

if command -v valgrind >/dev/null; then
    step "valgrind: 5 x (model, context, tern and CPU backends, one pass) leak nothing"
    tiny=$models/tiny
    synthetic_model "$tiny" --layers 1 --hidden 256 --ffn 512 --heads 4 --kv-heads 1
    TERN_GGML_STATS=1 logged "$build/valgrind.log" valgrind --quiet --leak-check=full \
        --errors-for-leak-kinds=definite,indirect --error-exitcode=99 \
        "$build/logits" "$tiny-TQ2_0.gguf" 4 2 "$build/logits-tiny.bin" 5
    ran=$(tern_runs "$build/valgrind.log" tq2_0)
    [[ $ran -eq $((5 * 7)) ]] || { echo "FAIL ggml: under valgrind tern ran $ran MUL_MATs, not 35"; exit 1; }
    echo "valgrind: no leaks, no errors; tern ran $ran MUL_MATs"
else
    echo "SKIP ggml valgrind check: valgrind is not installed"
fi

step "passed"
