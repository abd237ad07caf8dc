#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/: a handful of inputs per target,
laid out as the targets read them (see fuzz/src/lib.rs `Input`), so that the fuzzer
starts from valid shapes in every format instead of having to find them.

    python3 fuzz/gen_corpus.py

Deterministic. The fuzzer adds what it finds to a working copy, not to these files
(scripts/fuzz-smoke.sh runs on a temporary copy). Files it does not write (regression
inputs added by hand, such as fuzz/corpus/matmul/all_zero_products) are left alone.
"""

import random
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parent
FIXTURE = ROOT.parent / "tests" / "fixtures" / "gguf" / "tiny_bitnet.gguf"
ALL_TYPES = ROOT.parent / "tests" / "fixtures" / "gguf" / "all_types.gguf"
F32, TQ1_0, TQ2_0, BITNET, I8 = 1, 2, 3, 4, 5

# Dimensions as `Input::dim` reads them: (tag, value).
ONE, TWO = (1, 0), (1, 1)
COLS_256, COLS_512 = (3, 0), (3, 1)
COLS_8 = (2, 1)


def cols_for(fmt):
    return COLS_256 if fmt in (TQ1_0, TQ2_0) else COLS_8


def floats(rng, n, scale=1.0):
    return b"".join(struct.pack("<f", rng.gauss(0.0, scale)) for _ in range(n))


def write(target, name, data):
    d = ROOT / "corpus" / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(bytes(data))


def main():
    rng = random.Random(1)
    for fmt in (F32, TQ1_0, TQ2_0, BITNET, I8):
        cols = cols_for(fmt)
        # tensor: format, rows, cols, length delta, four probes, transcode target, payload
        probes = [*TWO, *ONE, 4, 3, 1, 200]
        write("tensor", f"f{fmt}", [fmt, *TWO, *cols, 0, *probes, fmt] + list(rng.randbytes(96)))
        # encode: format, rows, cols, palette?, src delta, dst delta, payload
        write("encode", f"f{fmt}_floats", [fmt, *TWO, *cols, 0, 0, 0] + list(floats(rng, 32)))
        write("encode", f"f{fmt}_palette", [fmt, *ONE, *cols, 1, 0, 0] + list(rng.randbytes(64)))
    # adapter: F32 selector, rows, cols, palette?, src/codes/scales deltas, initial, payload
    write("adapter", "rows2", [1, *TWO, *COLS_8, 0, 0, 0, 0, 1] + list(floats(rng, 16)))
    write("adapter", "palette", [1, *(1, 3), *COLS_256, 1, 0, 0, 0, 0] + list(rng.randbytes(64)))
    write("adapter", "zeros", [1, *ONE, *COLS_8, 0, 0, 0, 0, 0] + [0] * 32)
    # matmul: weight format, n, k, activation selector (1: F32; 0 then a format),
    # m selector and m, k selector, scope?, out delta, gemv rows, split, operand modes
    for fmt in (TQ1_0, TQ2_0, BITNET):
        k = cols_for(fmt)
        head = [fmt, *(1, 7), *k, 1, 1, 1, 1, 1, 0, *ONE, *TWO, 128, 1, 2]
        write("matmul", f"w{fmt}_f32", head + list(floats(rng, 64)))
        head = [fmt, *(1, 7), *k, 0, I8, 1, 0, 1, 1, 0, *ONE, *(1, 5), 64, 0, 1]
        write("matmul", f"w{fmt}_i8", head + list(rng.randbytes(160)))
    write("matmul", "dense", [F32, *TWO, *COLS_8, 1, 1, 1, 1, 1, 0, *ONE, *ONE, 32, 2, 2] + list(floats(rng, 24)))
    # gguf: the fixture models (one with every metadata type), a truncated copy and the
    # smallest valid file
    model = FIXTURE.read_bytes()
    write("gguf", "tiny_bitnet", model)
    write("gguf", "all_types", ALL_TYPES.read_bytes())
    write("gguf", "truncated", model[:2048])
    write("gguf", "empty_v3", b"GGUF" + struct.pack("<IQQ", 3, 0, 0))
    # tensor: valid TQ1_0 and TQ2_0 blocks (random bytes almost never are), each transcoded
    # to the other format
    blocks = random.Random(2)
    probes = [*TWO, *ONE, 4, 3, 1, 200]
    scale = struct.pack("<e", 0.5)
    # TQ1_0: canonical bytes ceil(v * 256 / 243); qh's fifth digit 0 (v a multiple of 3).
    tq1 = [-(-v * 256 // 243) for v in [blocks.randrange(243) for _ in range(48)] + [3 * blocks.randrange(81) for _ in range(4)]]
    write("tensor", "tq1_to_tq2", [TQ1_0, *TWO, *COLS_256, 0, *probes, TQ2_0] + tq1 + list(scale))
    # TQ2_0: four codes 0..2 per byte.
    tq2 = [sum(blocks.randrange(3) << (2 * i) for i in range(4)) for _ in range(64)]
    write("tensor", "tq2_to_tq1", [TQ2_0, *TWO, *COLS_256, 0, *probes, TQ1_0] + tq2 + list(scale))


if __name__ == "__main__":
    main()
