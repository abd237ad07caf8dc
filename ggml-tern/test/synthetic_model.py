"""Writes a synthetic llama-architecture GGUF (F16) with random ternary weights.

The default shapes are BitNet b1.58 2B4T's published ones (hidden 2560, FFN 6912, 20
heads, 5 KV heads) with fewer layers than its 30 and a vocabulary of 256 dummy tokens
(tokenizer "none"): big enough for the matmuls to be the real ones, small enough for CI.
Every linear weight is s * t, t in {-1, 0, 1} and s = 1/sqrt(fan_in) rounded to f16, so
llama-quantize to TQ1_0, TQ2_0 or Q2_0 is exact (each block's scale, its max |w|, is s; its
codes are t): the F16 file and its ternary quantizations hold the same model, which is
what lets the F16 run serve as the reference of the logits comparison.

    python3 synthetic_model.py OUT.gguf [--layers N] [--hidden H --ffn F --heads A --kv-heads K]

Needs numpy and the gguf package (llama.cpp's gguf-py on PYTHONPATH, or `pip install gguf`).
"""

import argparse

import gguf
import numpy as np


def ternary(rng, rows, cols):
    scale = np.float16(1.0 / np.sqrt(cols))
    trits = rng.integers(-1, 2, size=(rows, cols)).astype(np.float16)
    return trits * scale


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=2560)
    ap.add_argument("--ffn", type=int, default=6912)
    ap.add_argument("--heads", type=int, default=20)
    ap.add_argument("--kv-heads", type=int, default=5)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--seed", type=int, default=26)
    args = ap.parse_args()

    rng = np.random.default_rng(args.seed)
    h, f, v = args.hidden, args.ffn, args.vocab
    kv = h // args.heads * args.kv_heads

    w = gguf.GGUFWriter(args.out, "llama")
    w.add_name("tern synthetic ternary llama")
    w.add_context_length(4096)
    w.add_embedding_length(h)
    w.add_block_count(args.layers)
    w.add_feed_forward_length(f)
    w.add_head_count(args.heads)
    w.add_head_count_kv(args.kv_heads)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(v)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("none")

    ones = np.ones(h, dtype=np.float32)
    w.add_tensor("token_embd.weight", rng.standard_normal((v, h)).astype(np.float16))
    for i in range(args.layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", ones)
        w.add_tensor(p + "attn_q.weight", ternary(rng, h, h))
        w.add_tensor(p + "attn_k.weight", ternary(rng, kv, h))
        w.add_tensor(p + "attn_v.weight", ternary(rng, kv, h))
        w.add_tensor(p + "attn_output.weight", ternary(rng, h, h))
        w.add_tensor(p + "ffn_norm.weight", ones)
        w.add_tensor(p + "ffn_gate.weight", ternary(rng, f, h))
        w.add_tensor(p + "ffn_up.weight", ternary(rng, f, h))
        w.add_tensor(p + "ffn_down.weight", ternary(rng, h, f))
    w.add_tensor("output_norm.weight", ones)
    w.add_tensor("output.weight", ternary(rng, v, h))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
