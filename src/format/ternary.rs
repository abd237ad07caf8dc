//! What the ternary formats share: the code alphabet, ggml's per-block absmax scale and
//! round-half-away-from-zero.

use crate::error::{Error, Result};
use half::f16;

/// Elements per TQ1_0/TQ2_0 block (ggml's QK_K).
pub const QK: usize = 256;

/// Code for the zero trit; a trit t is stored as t + 1.
pub const ZERO_CODE: u8 = 1;

/// The stored code of `round_half_away_from_zero(v)` for `v` in about [-1.5, 1.5]: the
/// ternary formats only ever round values in that range, where rounding is two compares
/// (and no libm call on baseline x86-64).
#[inline(always)]
pub fn code_of_scaled(v: f32) -> u8 {
    ZERO_CODE + (v >= 0.5) as u8 - (v <= -0.5) as u8
}

/// ggml's block scale: `d` = max |x| stored as f16, and `id` = 1/d from the unrounded max.
#[inline]
pub fn block_scale(block: &[f32]) -> (f16, f32) {
    let amax = absmax(block);
    let id = if amax != 0.0 { 1.0 / amax } else { 0.0 };
    (f16::from_f32(amax), id)
}

/// max |x| (0 for an empty slice). Eight independent running maxima let the loop
/// vectorize; max is exact, so the lane order does not change the result.
#[inline]
pub fn absmax(xs: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let chunks = xs.chunks_exact(8);
    let tail = chunks.remainder().iter().fold(0.0f32, |m, x| m.max(x.abs()));
    for c in chunks {
        for (m, x) in lanes.iter_mut().zip(c) {
            *m = m.max(x.abs());
        }
    }
    lanes.iter().fold(tail, |m, &x| m.max(x))
}

/// Refuses input whose max over a block of `block_elems` overflows the f16 scale (ggml
/// would store +Inf and decode NaNs); runs before anything is written.
pub fn check_block_scales(src: &[f32], block_elems: usize) -> Result<()> {
    for (block, xs) in src.chunks_exact(block_elems).enumerate() {
        let amax = absmax(xs);
        if f16::from_f32(amax).is_infinite() {
            return Err(Error::ScaleOverflow { block, amax });
        }
    }
    Ok(())
}

/// Decodes a block scale; a non-finite scale marks the block corrupt.
#[inline]
pub fn read_f16(bytes: &[u8]) -> f16 {
    f16::from_le_bytes([bytes[0], bytes[1]])
}

/// Whether a stored scale is one an encoder can write: finite, with the sign bit clear.
/// Every scale is a maximum or mean of |x| (ggml's and gguf's quantizers, and tern's), so a
/// negative one, -0.0 included, means the bytes are not what they claim to be (a wrong
/// offset, say). Kernels still compute with such scales; validation reports them.
pub fn scale_is_valid(scale: f32) -> bool {
    scale.is_finite() && scale.is_sign_positive()
}
