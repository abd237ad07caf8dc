#!/usr/bin/env python3
"""Writes the small GGUF files under tests/fixtures/gguf/ with the `gguf` PyPI package
(0.19.0), whose numpy TQ1_0/TQ2_0 quantizers are byte-identical to ggml's.

    python3 scripts/gen_gguf_fixtures.py

Deterministic: the same package version writes the same bytes. tests/suite/gguf.rs checks tern's
decoding against tiny_bitnet.expected.gguf; cli/tests/cli.rs runs `tern inspect` on the
model (and on truncated and corrupted copies it makes) and on tiny_q2_i2s.gguf, whose Q2_0
(type 42) and I2_S (type 36) tensors gguf 0.19.0 has no quantizer for: their bytes come
from scripts/gen_fixtures.py's transcriptions, written as raw tensors of those type ids.
tiny_attention.gguf holds one attention block's Q/K/V, its hyperparameters and an F16
token embedding for the engine example (c_tests/example_engine.c, in the README).
all_types.gguf has a metadata entry of every GGUF value type (and an array of each),
tensors of common ggml types tern has no format for (F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K),
and a 3-D TQ2_0 tensor (two "experts"): tests/ffi_gguf.rs reads them through the C API.
"""

from pathlib import Path

import numpy as np
from gguf import GGUFValueType, GGUFWriter, GGMLQuantizationType
from gguf.quants import dequantize, quantize

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "gguf"


def ternary(rng: np.random.Generator, n: int, k: int, qtype: GGMLQuantizationType) -> np.ndarray:
    """An n x k weight (n rows of k), quantized: uint8 of shape (n, bytes per row).
    GGUFWriter turns that byte shape back into the element shape (ggml ne = [k, n])."""
    w = rng.standard_normal((n, k), dtype=np.float32) * 0.02
    return quantize(w, qtype)


TERNARY = (GGMLQuantizationType.TQ1_0, GGMLQuantizationType.TQ2_0)


def write_model(path: Path, expected: Path) -> None:
    """The model, and beside it gguf's own dequantization of each ternary tensor as F16
    (exact: every value is +-d or 0 with d an f16), the oracle for tern's decoding."""
    rng = np.random.default_rng(1234)
    writer = GGUFWriter(str(path), arch="bitnet")
    writer.add_name("tern fixture")
    writer.add_uint32("bitnet.block_count", 1)
    writer.add_float32("bitnet.rms_eps", 1e-5)
    writer.add_bool("tern.fixture", True)
    writer.add_array("tokenizer.ggml.tokens", ["<s>", "</s>", "hello", "world"])
    writer.add_array("tern.scores", [0.5, -1.25, 2.0])
    writer.add_tensor("token_embd.weight", rng.standard_normal((8, 256), dtype=np.float32))
    writer.add_tensor("blk.0.attn_q.weight", ternary(rng, 64, 512, GGMLQuantizationType.TQ2_0),
                      raw_dtype=GGMLQuantizationType.TQ2_0)
    writer.add_tensor("blk.0.ffn_down.weight", ternary(rng, 32, 768, GGMLQuantizationType.TQ1_0),
                      raw_dtype=GGMLQuantizationType.TQ1_0)
    writer.add_tensor("blk.0.ffn_up.weight", ternary(rng, 48, 256, GGMLQuantizationType.TQ2_0),
                      raw_dtype=GGMLQuantizationType.TQ2_0)
    writer.add_tensor("output_norm.weight", np.ones(256, dtype=np.float32))
    ternary_tensors = [(name, info) for name, info in writer.tensors[0].items() if info.dtype in TERNARY]
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    from gguf import GGUFReader
    reader = GGUFReader(str(path))
    oracle = GGUFWriter(str(expected), arch="bitnet")
    for t in reader.tensors:
        if t.tensor_type in TERNARY:
            values = dequantize(np.asarray(t.data), t.tensor_type)
            oracle.add_tensor(t.name, values.astype(np.float16))
    assert len(oracle.tensors[0]) == len(ternary_tensors)
    oracle.write_header_to_file()
    oracle.write_kv_data_to_file()
    oracle.write_tensors_to_file()
    oracle.close()


def write_attention(path: Path) -> None:
    """Q, K and V of one attention block (grouped-query shapes: K and V have fewer rows),
    TQ2_0 over the same k = 256, as an engine would run them against one activation; the
    hyperparameters an engine reads (llama.cpp's key names) and an F16 token embedding of
    an 8-token vocabulary."""
    rng = np.random.default_rng(5678)
    writer = GGUFWriter(str(path), arch="bitnet")
    writer.add_name("tern attention fixture")
    writer.add_embedding_length(256)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_key_length(16)  # Q: 4 heads x 16 rows; K and V: 2 heads x 16 rows
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_array("tokenizer.ggml.tokens", ["<s>", "</s>", "the", "cat", "sat", "on", "a", "mat"])
    for name, rows in (("q", 64), ("k", 32), ("v", 32)):
        writer.add_tensor(f"blk.0.attn_{name}.weight", ternary(rng, rows, 256, GGMLQuantizationType.TQ2_0),
                          raw_dtype=GGMLQuantizationType.TQ2_0)
    embd = (np.arange(8 * 256, dtype=np.float32).reshape(8, 256) % 17 - 8) / 16
    writer.add_tensor("token_embd.weight", embd.astype(np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_all_types(path: Path) -> None:
    """One metadata entry of every GGUF value type, an array of each, a nested array;
    tensors of types tern has no format for (their bytes are random: only sizes matter),
    a 3-D TQ2_0 tensor of two 64 x 256 slices, and an F32 tensor named `patch.type` whose
    type id tests overwrite with an unknown one."""
    rng = np.random.default_rng(91011)
    writer = GGUFWriter(str(path), arch="tern")
    t = GGUFValueType
    scalars = [("u8", 200, t.UINT8), ("i8", -100, t.INT8), ("u16", 60000, t.UINT16), ("i16", -30000, t.INT16),
               ("u32", 4000000000, t.UINT32), ("i32", -2000000000, t.INT32), ("u64", 2**63 + 5, t.UINT64),
               ("i64", -(2**62), t.INT64), ("f32", 0.25, t.FLOAT32), ("f64", -1.5e300, t.FLOAT64),
               ("bool", True, t.BOOL)]
    for name, value, vtype in scalars:
        writer.add_key_value(f"test.{name}", value, vtype)
        writer.add_key_value(f"test.array.{name}", [value, value if vtype == t.BOOL else 0, value], t.ARRAY,
                             sub_type=vtype)
    writer.add_key_value("test.str", "héllo", t.STRING)
    writer.add_key_value("test.array.str", ["a", "", "ccc"], t.ARRAY, sub_type=t.STRING)
    writer.add_key_value("test.array.nested", [[1, 2], [3]], t.ARRAY, sub_type=t.ARRAY)
    q = GGMLQuantizationType
    # (name, type, rows, cols, bytes per block, elements per block): ggml's type traits.
    for name, qtype, bb, be in (("f16", q.F16, 2, 1), ("bf16", q.BF16, 2, 1), ("q8_0", q.Q8_0, 34, 32),
                                ("q4_0", q.Q4_0, 18, 32), ("q4_k", q.Q4_K, 144, 256), ("q6_k", q.Q6_K, 210, 256)):
        raw = rng.integers(0, 256, size=(2, 512 // be * bb), dtype=np.uint8)
        writer.add_tensor(f"{name}.weight", raw, raw_dtype=qtype)
    experts = np.stack([ternary(rng, 64, 256, q.TQ2_0) for _ in range(2)])
    writer.add_tensor("ffn_up_exps.weight", experts, raw_dtype=q.TQ2_0)
    writer.add_tensor("patch.type", np.zeros(32, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_q2_i2s(path: Path) -> None:
    """One Q2_0 and one I2_S (x86 packing, as the official 2B4T file) weight beside an F32
    norm, as a converted Ternary-Bonsai or BitNet b1.58 file would hold them."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gen_fixtures import i2s_encode, q2_0_encode

    rng = np.random.default_rng(91011)
    writer = GGUFWriter(str(path), arch="bitnet")
    writer.add_name("tern Q2_0 and I2_S fixture")
    w = (rng.standard_normal((32, 192)) * 0.02).astype(np.float32)
    q2 = np.frombuffer(q2_0_encode(w), dtype=np.int8)
    writer.add_tensor("blk.0.attn_q.weight", q2, raw_shape=(32, 192), raw_dtype=42)
    s = np.float32(0.031)
    t = rng.choice(np.array([-s, 0, s], dtype=np.float32), (16, 256))
    i2s = np.frombuffer(i2s_encode("i2_s", t), dtype=np.int8)
    writer.add_tensor("blk.0.ffn_up.weight", i2s, raw_shape=(16, 256), raw_dtype=36)
    writer.add_tensor("output_norm.weight", np.ones(256, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    write_model(OUT / "tiny_bitnet.gguf", OUT / "tiny_bitnet.expected.gguf")
    write_attention(OUT / "tiny_attention.gguf")
    write_q2_i2s(OUT / "tiny_q2_i2s.gguf")
    write_all_types(OUT / "all_types.gguf")
    print(f"wrote {OUT}/tiny_bitnet.gguf, tiny_bitnet.expected.gguf, tiny_attention.gguf, tiny_q2_i2s.gguf and all_types.gguf")
