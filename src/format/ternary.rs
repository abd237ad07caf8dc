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

/// Where a block-scaled ternary format (TQ1_0, TQ2_0) keeps a 256-element block's parts,
/// and how its codes (trit + 1, element order) are read and written.
pub struct BlockLayout {
    pub bytes: usize,
    /// Offset of the f16 scale in a block.
    pub scale_at: usize,
    pub read_codes: fn(&[u8], &mut [u8; QK]),
    pub write_codes: fn(&[u8; QK], &mut [u8]),
}

impl BlockLayout {
    /// The f16 scale of `block`.
    pub fn scale(&self, block: &[u8]) -> f32 {
        read_f16(&block[self.scale_at..]).to_f32()
    }

    /// Decodes whole blocks of `src` into `dst`.
    pub fn decode(&self, src: &[u8], dst: &mut [f32]) {
        let mut codes = [0u8; QK];
        for (block, y) in src.chunks_exact(self.bytes).zip(dst.chunks_exact_mut(QK)) {
            let d = self.scale(block);
            (self.read_codes)(block, &mut codes);
            for (y, &c) in y.iter_mut().zip(&codes) {
                *y = (c as f32 - 1.0) * d;
            }
        }
    }

    /// Row `row` of a `? x cols` matrix as trits (code - 1) and its blocks' scales.
    pub fn row_trits(&self, src: &[u8], cols: usize, row: usize, trits: &mut [i8], scales: &mut [f32]) {
        let blocks = cols / QK;
        let row_bytes = &src[row * blocks * self.bytes..][..blocks * self.bytes];
        let mut codes = [0u8; QK];
        for ((block, t), s) in row_bytes.chunks_exact(self.bytes).zip(trits.chunks_exact_mut(QK)).zip(scales) {
            *s = self.scale(block);
            (self.read_codes)(block, &mut codes);
            for (t, &c) in t.iter_mut().zip(&codes) {
                *t = c as i8 - 1;
            }
        }
    }

    /// `src` in this layout rewritten in `to`'s, block by block: the codes rewritten, the
    /// f16 scale's bytes copied. `dst` holds exactly as many of `to`'s blocks.
    pub fn transcode(&self, src: &[u8], to: &BlockLayout, dst: &mut [u8]) {
        let mut codes = [0u8; QK];
        for (s, d) in src.chunks_exact(self.bytes).zip(dst.chunks_exact_mut(to.bytes)) {
            (self.read_codes)(s, &mut codes);
            (to.write_codes)(&codes, d);
            d[to.scale_at..].copy_from_slice(&s[self.scale_at..self.scale_at + 2]);
        }
    }
}
