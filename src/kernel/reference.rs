//! The reference kernels: the definition every SIMD kernel must match.
//!
//! `bitnet_gemv/reference` computes, by I8_ABSMAX activations (one scale per token),
//! `out[m][n] = a_scale[m] * sum_blocks (w_scale[block] * dot[block])`, and by per-block
//! activations (I8_BLOCK256 with TQ1_0/TQ2_0, one scale per weight block; I8_BLOCK32 with
//! Q2_0, two per weight block) `out[m][n] = sum_blocks ((w_scale[wb] * a_scale[m][block]) *
//! dot[block])` over the activation's blocks, `wb` the weight block holding `block`, where
//! `dot[block] = sum_{i in block} a_code[m][i] * t[n][i]` is exact in int32 and the float
//! sums run over blocks in order. No multiply in the inner loop: a trit adds, subtracts or
//! skips. Each weight row is decoded once per call and reused for every activation row.

use super::{ActI8, Compute, Geometry, Kernel, MatRef, OutTile};
use crate::format::Format;

/// A portable kernel: no CPU features, any cut of the work, the operand as it is.
macro_rules! portable {
    ($kernel:ident, $run:ident) => {
        impl Compute for $kernel {
            type Act = ();
            const REQUIRES: &'static str = "";
            const GEOMETRY: Geometry = Geometry { rows: 1, tokens: 1 };

            fn available() -> bool {
                true
            }

            fn prepare(&self, _a: &MatRef) {}

            fn run(&self, w: &MatRef, a: &MatRef, _act: &(), out: &mut OutTile) {
                $run(w, a, out)
            }
        }
    };
}

/// `bitnet_gemv/reference`: ternary weights by I8_ABSMAX activations.
struct BitnetGemv;
portable!(BitnetGemv, bitnet_gemv);

/// `dense_gemv/reference`: F32 by F32.
struct DenseGemv;
portable!(DenseGemv, dense_gemv);

/// `matmul/reference`: any pair, decoded.
struct DecodingMatmul;
portable!(DecodingMatmul, decoding_matmul);

pub(crate) fn kernels() -> Vec<Kernel> {
    let name = c"bitnet_gemv/reference";
    let ternary = Format::ALL.into_iter().filter(|f| f.is_ternary());
    let absmax = ternary.clone().map(|weight| Kernel::new(name, weight, Format::I8Absmax, 1, &BitnetGemv));
    let accurate = ternary
        .filter_map(|weight| weight.accurate_activation().map(|act| Kernel::new(name, weight, act, 1, &BitnetGemv)));
    let dense = Kernel::new(c"dense_gemv/reference", Format::F32, Format::F32, 1, &DenseGemv);
    absmax.chain(accurate).chain([dense]).collect()
}

/// The fallback for pairs no kernel serves: decode both operands to f32, then multiply.
/// Its formats are nominal: the dispatcher runs it for any pair (see `crate::dispatch`).
pub(crate) static DECODING_MATMUL: Kernel =
    Kernel::new(c"matmul/reference", Format::F32, Format::F32, 1, &DecodingMatmul);

fn bitnet_gemv(w: &MatRef, a: &MatRef, out: &mut OutTile) {
    let act = ActI8::parse(a);
    assert!(out.tokens().end <= act.m, "an output block past the activation's tokens");
    let k = w.cols;
    let block = w.format.kernel_block(k);
    let mut trits = vec![0i8; k];
    let mut scales = vec![0f32; k / block];
    // Per-block activation scales divide the weight's blocks (the registry pairs them so):
    // `sub` activation blocks per weight block.
    let per_block = a.format != Format::I8Absmax;
    assert!(!per_block || block.is_multiple_of(act.block), "activation scale blocks split the weight's blocks");
    let step = if per_block { act.block } else { block };
    let sub = block / step;
    for r in out.rows() {
        w.format.ternary_row(w.bytes, k, r, &mut trits, &mut scales);
        for token in out.tokens() {
            let (codes, a_scales) = (act.row(token), act.row_scales(token));
            let mut acc = 0f32;
            for (b, (t, x)) in trits.chunks_exact(step).zip(codes.chunks_exact(step)).enumerate() {
                let d = if per_block { scales[b / sub] * a_scales[b] } else { scales[b] };
                acc += d * trit_dot(t, x) as f32;
            }
            out.set(token, r, if per_block { acc } else { a_scales[0] * acc });
        }
    }
}

/// `sum t * x` by adding, subtracting or skipping. A corrupt +2 (TQ2_0 or BitNet code 3)
/// adds twice, matching ggml's decode and the biased-code SIMD kernels.
fn trit_dot(t: &[i8], x: &[i8]) -> i32 {
    let mut s = 0i32;
    for (&t, &x) in t.iter().zip(x) {
        let x = x as i32;
        match t {
            1 => s += x,
            -1 => s -= x,
            2 => s += x + x,
            _ => {}
        }
    }
    s
}

fn dense_gemv(w: &MatRef, a: &MatRef, out: &mut OutTile) {
    let w_row = |r: usize| w.bytes[r * w.cols * 4..][..w.cols * 4].chunks_exact(4);
    let a_row = |i: usize| a.bytes[i * a.cols * 4..][..a.cols * 4].chunks_exact(4);
    let f = |s: &[u8]| f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    for r in out.rows() {
        for token in out.tokens() {
            let dot = w_row(r).zip(a_row(token)).map(|(x, y)| f(x) * f(y)).sum();
            out.set(token, r, dot);
        }
    }
}

fn decoding_matmul(w: &MatRef, a: &MatRef, out: &mut OutTile) {
    let decode = |m: &MatRef| {
        let mut v = vec![0f32; m.rows * m.cols];
        m.format.decode(m.bytes, m.rows, m.cols, &mut v).expect("operands were checked");
        v
    };
    let (wf, af) = (decode(w), decode(a));
    let k = w.cols;
    for r in out.rows() {
        for token in out.tokens() {
            let dot = wf[r * k..][..k].iter().zip(&af[token * k..][..k]).map(|(x, y)| x * y).sum();
            out.set(token, r, dot);
        }
    }
}
