#!/usr/bin/env python3
"""Generates the parity fixtures in tests/fixtures/: TQ1_0/TQ2_0 with gguf's numpy quantizer,
Q2_0 and the three I2_S packings with the element-by-element transcriptions below.

gguf (PyPI, 0.19.0) is byte-identical to ggml's C reference quantizer, so these files pin
tern's encoder and decoder to ggml. gguf 0.19.0 knows neither Q2_0 (ggml type 42) nor
bitnet.cpp's I2_S (type 36), so for those the script transcribes docs/design.md §1:
ggml's `quantize_row_q2_0_ref` and bitnet.cpp's `quantize_i2_s` in each packing. The Q2_0
bytes are checked against ggml's own quantizer by the peer crate (peer/, `--formats`),
which quantizes every committed Q2_0 input with ggml and compares; the I2_S bytes are
read back by a decoder written the other way round (byte by byte, where the encoder goes
element by element), and tests/suite/formats.rs checks hand-derived I2_S bytes.

Every case is written for its formats as
    <fmt>_<case>.in.f32    input, raw little-endian f32, rows x cols row-major
    <fmt>_<case>.q.bin     gguf.quants.quantize bytes
    <fmt>_<case>.deq.f32   gguf.quants.dequantize of those bytes, raw little-endian f32
and listed in manifest.txt as "<fmt> <case> <rows> <cols>".

Before writing, the script checks gguf's bytes against an independent, element-by-element
transcription of docs/design.md §1 (block = qs, [qh], then the f16 d at the END), so a layout
change in gguf cannot slip into the fixtures unnoticed.

Deterministic (fixed seed); run from anywhere:  python3 scripts/gen_fixtures.py
"""

import zlib
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

QK = 256
F16_MAX = 65504.0
OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
FORMATS = {"tq1_0": T.TQ1_0, "tq2_0": T.TQ2_0}
QK2_0 = 64
# I2_S packings: name -> elements per block (None: four rows interleaved).
I2S_PACKINGS = {"i2_s": 128, "i2_s_64": 64, "i2_s_r4": None}


def f32(xs) -> np.ndarray:
    return np.asarray(xs, dtype=np.float32)


def nudge(x: np.float32, toward: float) -> np.float32:
    return np.nextafter(np.float32(x), np.float32(toward))


def random_case(rng, scale: float) -> np.ndarray:
    # A normal spread plus a few uniform outliers, so block maxima differ from the bulk.
    x = rng.standard_normal((2, 4 * QK)).astype(np.float32)
    x[:, ::37] = rng.uniform(-3.0, 3.0, x[:, ::37].shape).astype(np.float32)
    return f32(x * np.float32(scale))


def ties_case(rng) -> np.ndarray:
    """Elements at exactly +-0.5 * block max and one ulp either side, for block maxima that
    are powers of two (the product x * (1/max) is then exactly 0.5) and ones that are not
    (where the f32 product decides)."""
    return tie_blocks(rng, (1.0, 0.125, 4096.0, 3.0, 0.7, 1e-3), QK).reshape(2, 3 * QK)


def tie_blocks(rng, maxima, block: int) -> np.ndarray:
    """One block per max: elements drawn from +-max/2, one ulp either side, and 0, with the
    max (of either sign) at one place."""
    blocks = []
    for amax in maxima:
        amax = np.float32(amax)
        half = np.float32(amax * np.float32(0.5))
        pool = [half, -half, nudge(half, 0), nudge(half, 1e9), -nudge(half, 0), -nudge(half, 1e9), 0.0]
        b = f32(rng.choice(f32(pool), block))
        b[rng.integers(block)] = amax if rng.integers(2) else -amax
        blocks.append(b)
    return np.concatenate(blocks)


def zeros_case(_rng) -> np.ndarray:
    return np.zeros((2, 2 * QK), dtype=np.float32)


def single_case(_rng) -> np.ndarray:
    """One non-zero element per block, at each region boundary of the TQ1_0 block
    (qs[0..32], qs[32..48], qh) and TQ2_0 shift boundaries."""
    positions = [0, 31, 127, 128, 159, 160, 239, 240, 255]
    values = [1.0, -2.5, 1e-3, -7.0, 0.3, -1e4, 42.0, -0.01, 6.0]
    x = np.zeros((len(positions), QK), dtype=np.float32)
    for b, (e, v) in enumerate(zip(positions, values)):
        x[b, e] = v
    return x.reshape(3, 3 * QK)


def negmax_case(rng) -> np.ndarray:
    """Each block's largest magnitude is negative (one block holds +m and -m both)."""
    x = rng.uniform(-0.9, 0.9, (4, QK)).astype(np.float32)
    for b, m in enumerate((1.0, 2.75, 1e-2, 1.0)):
        x[b] *= np.float32(m)
        x[b, rng.integers(QK)] = -m
    x[3, 7] = 1.0
    return f32(x.reshape(2, 2 * QK))


def subnormal_case(rng) -> np.ndarray:
    """Block maxima whose f16 scale is subnormal (below 6.1e-5), down to the smallest
    subnormal (5.96e-8) and below it, where d rounds to 0 while 1/max is still finite."""
    maxima = (1e-6, 3.3e-7, 6e-8, 2e-8)
    x = rng.uniform(-1.0, 1.0, (len(maxima), QK)).astype(np.float32)
    for b, m in enumerate(maxima):
        x[b] *= np.float32(m)
        x[b, rng.integers(QK)] = m if b % 2 else -m
    return f32(x.reshape(1, len(maxima) * QK))


def huge_case(rng) -> np.ndarray:
    """Block maxima near the f16 limit: 6e4, exactly 65504, and 65519 (still rounds down to
    65504; 65520 would round to +Inf and is refused by tern)."""
    maxima = (6e4, F16_MAX, 65519.0, 3e4)
    x = rng.uniform(-1.0, 1.0, (len(maxima), QK)).astype(np.float32)
    for b, m in enumerate(maxima):
        x[b] *= np.float32(m)
        x[b, rng.integers(QK)] = -m if b % 2 else m
    return f32(x.reshape(2, 2 * QK))


def round_away(v: np.float32) -> int:
    a = abs(float(v))
    r = int(np.floor(a + 0.5))  # exact for the small magnitudes seen here
    return -r if v < 0 else r


def design_encode(fmt: str, x: np.ndarray) -> bytes:
    """docs/design.md §1, one element at a time, independent of gguf's vectorized code."""
    out = bytearray()
    for block in x.reshape(-1, QK):
        amax = np.float32(np.max(np.abs(block)))
        inv = np.float32(1.0) / amax if amax != 0 else np.float32(0.0)
        codes = [round_away(np.float32(v * inv)) + 1 for v in block]
        assert all(0 <= c <= 2 for c in codes)
        if fmt == "tq2_0":
            qs = [0] * 64
            for e, c in enumerate(codes):
                qs[32 * (e // 128) + e % 32] |= c << (2 * ((e % 128) // 32))
            q = qs
        else:
            vals = [0] * 52
            for e, c in enumerate(codes):
                if e < 160:
                    byte, n = e % 32, e // 32
                elif e < 240:
                    byte, n = 32 + (e - 160) % 16, (e - 160) // 16
                else:
                    byte, n = 48 + (e - 240) % 4, (e - 240) // 4
                vals[byte] += c * 3 ** (4 - n)
            q = [(v * 256 + 242) // 243 for v in vals]
        out += bytes(q) + np.float16(amax).tobytes()  # d at the END of the block
    return bytes(out)


def design_decode(fmt: str, q: bytes, n: int) -> np.ndarray:
    bb = 54 if fmt == "tq1_0" else 66
    out = np.zeros(n, dtype=np.float32)
    for b in range(n // QK):
        block = q[b * bb:(b + 1) * bb]
        d = np.float32(np.frombuffer(block[-2:], dtype="<f2")[0])
        for e in range(QK):
            if fmt == "tq2_0":
                code = (block[32 * (e // 128) + e % 32] >> (2 * ((e % 128) // 32))) & 3
            else:
                if e < 160:
                    byte, k = e % 32, e // 32
                elif e < 240:
                    byte, k = 32 + (e - 160) % 16, (e - 160) // 16
                else:
                    byte, k = 48 + (e - 240) % 4, (e - 240) // 4
                code = (((block[byte] * 3 ** k) & 0xFF) * 3) >> 8
            out[b * QK + e] = np.float32(code - 1) * d
    return out


def q2_0_encode(x: np.ndarray) -> bytes:
    """ggml's quantize_row_q2_0_ref: per 64 elements d = max |x| as f16 (FIRST), id = 1/max
    in f32 from the unrounded max, code round_half_away(x * id) + 1 clamped to 0..3; element
    j in byte j // 4 at bit shift 2 * (j % 4)."""
    out = bytearray()
    for block in x.reshape(-1, QK2_0):
        amax = np.float32(np.max(np.abs(block)))
        with np.errstate(over="ignore"):
            inv = np.float32(1.0) / amax if amax > 0 else np.float32(0.0)
        qs = [0] * (QK2_0 // 4)
        if np.isinf(inv):
            # 1/max overflows f32: ggml converts +-inf and NaN to int, which x86 makes
            # INT_MIN, clamped to code 0 (C leaves it undefined; tern writes 0 too).
            out += np.float16(amax).tobytes() + bytes(qs)
            continue
        for j, v in enumerate(block):
            q = min(3, max(0, round_away(np.float32(v * inv)) + 1))
            qs[j // 4] |= q << (2 * (j % 4))
        out += np.float16(amax).tobytes() + bytes(qs)
    return bytes(out)


def q2_0_decode(q: bytes, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=np.float32)
    bb = 2 + QK2_0 // 4
    for b in range(n // QK2_0):
        block = q[b * bb:(b + 1) * bb]
        d = np.float32(np.frombuffer(block[:2], dtype="<f2")[0])
        for m, byte in enumerate(block[2:]):
            for f in range(4):
                out[b * QK2_0 + 4 * m + f] = np.float32(((byte >> (2 * f)) & 3) - 1) * d
    return out


def i2s_encode(packing: str, x: np.ndarray) -> bytes:
    """bitnet.cpp's quantize_i2_s: scale = max |x| over the tensor (f32 after a double max);
    code 1 where |x| < 1e-6 (compared in double), else 2 for x > 0 and 0 for x < 0. Then the
    packing (element -> byte, shift), the f32 scale at byte n / 4, and 28 zero bytes."""
    rows, cols = x.shape
    n = x.size
    scale = np.float32(np.max(np.abs(x))) if n else np.float32(0)
    packed = bytearray(n // 4)
    block = I2S_PACKINGS[packing]
    for i, v in enumerate(x.reshape(-1)):
        code = 1 if abs(float(v)) < 1e-6 else (2 if v > 0 else 0)
        if block is None:
            r, c = divmod(i, cols)
            byte, shift = (r // 4) * cols + c, 6 - 2 * (r % 4)
        else:
            group = block // 4
            j = i % block
            byte, shift = (i // block) * group + j % group, 6 - 2 * (j // group)
        packed[byte] |= code << shift
    return bytes(packed) + scale.tobytes() + bytes(28)


def i2s_decode(packing: str, q: bytes, rows: int, cols: int) -> np.ndarray:
    """The other way round: walk the bytes and say which element each 2-bit field holds
    (field f is bits 7-6 for f = 0 down to bits 1-0 for f = 3). Code 3 is not expected."""
    n = rows * cols
    scale = np.float32(np.frombuffer(q[n // 4:n // 4 + 4], dtype="<f4")[0])
    out = np.full(n, np.nan, dtype=np.float32)
    block = I2S_PACKINGS[packing]
    for m, byte in enumerate(q[:n // 4]):
        for f in range(4):
            code = (byte >> (6 - 2 * f)) & 3
            assert code != 3, f"{packing}: code 3 at byte {m}"
            if block is None:
                element = (4 * (m // cols) + f) * cols + m % cols
            else:
                group = block // 4
                element = (m // group) * block + f * group + m % group
            out[element] = np.float32(code - 1) * scale
    assert not np.isnan(out).any(), "every element decoded once"
    return out


def ties64_case(rng) -> np.ndarray:
    """ties_case with a maximum in every 64-element block (Q2_0's block)."""
    return tie_blocks(rng, (1.0, 0.125, 4096.0, 3.0, 0.7, 1e-3, 6.0, 0.3), QK2_0).reshape(2, 4 * QK2_0)


def underflow64_case(rng) -> np.ndarray:
    """Q2_0 blocks whose max is so small that 1/max overflows f32 (below about 2.9e-39),
    next to ordinary blocks."""
    x = rng.uniform(-1.0, 1.0, (4, QK2_0)).astype(np.float32)
    for b, m in enumerate((1e-40, 2e-45, 3e-39, 1.0)):
        x[b] *= np.float32(m)
        x[b, rng.integers(QK2_0)] = -m if b % 2 else m
    return f32(x.reshape(2, 2 * QK2_0))


def i2s_ternary_case(rng) -> np.ndarray:
    """What bitnet.cpp's converter hands its quantizer: weights already in {-s, 0, +s}."""
    s = np.float32(0.7321)
    return f32(rng.choice(f32([-s, 0.0, s]), (8, 384)))


def i2s_rand_case(rng) -> np.ndarray:
    """Real-valued weights: the quantizer keeps only their signs."""
    return f32(rng.standard_normal((4, 256)) * np.float32(0.05))


def i2s_deadzone_case(rng) -> np.ndarray:
    """Values at the 1e-6 dead zone: f32(1e-6) is just below the double 1e-6 (zero code),
    the next f32 above it is not; -0.0 and denormals are zeros; one large value sets the
    scale, negative."""
    at = np.float32(1e-6)
    pool = [at, -at, nudge(at, 1), -nudge(at, 1), nudge(at, 0), 0.0, -0.0, 1e-45, 2.0, -3.5]
    x = f32(rng.choice(f32(pool), (4, 128)))
    x[2, 77] = -9.25
    return x


def i2s_tiny_case(rng) -> np.ndarray:
    """Every |x| below 1e-6: all codes zero, the scale still the (tiny) max."""
    return f32(rng.uniform(-9e-7, 9e-7, (4, 256)))


I2S_CASES = [
    ("ternary", i2s_ternary_case),
    ("rand", i2s_rand_case),
    ("deadzone", i2s_deadzone_case),
    ("tiny", i2s_tiny_case),
    ("zeros", lambda r: np.zeros((4, 128), dtype=np.float32)),
]


CASES = [
    ("rand_1e-3", lambda r: random_case(r, 1e-3)),
    ("rand_1e-1", lambda r: random_case(r, 1e-1)),
    ("rand_1", lambda r: random_case(r, 1.0)),
    ("rand_1e2", lambda r: random_case(r, 1e2)),
    ("rand_1e4", lambda r: random_case(r, 1e4)),
    ("ties", ties_case),
    ("zeros", zeros_case),
    ("single", single_case),
    ("negmax", negmax_case),
    ("subnormal", subnormal_case),
    ("huge", huge_case),
]


def write_case(manifest: list, fmt: str, case: str, x: np.ndarray, q: bytes, deq: np.ndarray) -> None:
    stem = OUT / f"{fmt}_{case}"
    stem.with_name(stem.name + ".in.f32").write_bytes(x.astype("<f4").tobytes())
    stem.with_name(stem.name + ".q.bin").write_bytes(q)
    stem.with_name(stem.name + ".deq.f32").write_bytes(deq.astype("<f4").tobytes())
    manifest.append(f"{fmt} {case} {x.shape[0]} {x.shape[1]}")


def seeded(case: str) -> np.random.Generator:
    # One seed per case so that adding a case does not change the others.
    return np.random.default_rng([0x7E2, zlib.crc32(case.encode())])


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = []
    for case, make in CASES + [("ties64", ties64_case), ("underflow64", underflow64_case)]:
        x = make(seeded(case))
        assert x.dtype == np.float32 and x.ndim == 2 and x.shape[1] % QK2_0 == 0
        assert np.all(np.isfinite(x)) and np.all(np.abs(x) < 65520.0)
        for fmt, qtype in FORMATS.items() if x.shape[1] % QK == 0 else ():
            q = quants.quantize(x, qtype)
            qb = q.tobytes()
            deq = quants.dequantize(q, qtype).astype(np.float32)
            assert deq.shape == x.shape
            assert qb == design_encode(fmt, x), f"{fmt} {case}: gguf bytes differ from docs/design.md §1"
            assert np.array_equal(
                deq.reshape(-1).view(np.uint32), design_decode(fmt, qb, x.size).view(np.uint32)
            ), f"{fmt} {case}: gguf decode differs from docs/design.md §1"
            write_case(manifest, fmt, case, x, qb, deq)
        q = q2_0_encode(x)
        write_case(manifest, "q2_0", case, x, q, q2_0_decode(q, x.size))
    for case, make in I2S_CASES:
        x = make(seeded("i2_s " + case))
        assert np.all(np.isfinite(x)) and x.shape[0] % 4 == 0 and x.shape[1] % 128 == 0
        for packing in I2S_PACKINGS:
            q = i2s_encode(packing, x)
            write_case(manifest, packing, case, x, q, i2s_decode(packing, q, *x.shape))
    header = "# format case rows cols  (generated by scripts/gen_fixtures.py; do not edit)\n"
    (OUT / "manifest.txt").write_text(header + "\n".join(manifest) + "\n")
    total = sum(p.stat().st_size for p in OUT.iterdir() if p.is_file())
    print(f"{len(manifest)} fixtures, {total} bytes in {OUT}")


if __name__ == "__main__":
    main()
