//! The int8 activation formats: `rows * cols` int8 codes row-major, then one f32 scale per
//! scale block, in (row, block) order. I8_ABSMAX has one block per row; I8_BLOCK256 one per
//! 256 elements of a row (ggml's Q8_K granularity), I8_BLOCK32 one per 32 (Q8_0's). Per block: scale = max |x| / 127,
//! code = round_half_away(x / scale) clamped to [-127, 127]; a block of zeros keeps scale 0
//! and codes 0. Every function takes `block`, the elements per scale (`cols` for
//! I8_ABSMAX), which divides `cols`.

use super::ternary::absmax;
use crate::error::{Error, Result};

pub const MAX_CODE: f32 = 127.0;

/// Elements per scale of I8_BLOCK256.
pub const BLOCK256: usize = 256;

/// Elements per scale of I8_BLOCK32.
pub const BLOCK32: usize = 32;

/// Rounds half away from zero for |v| < 2^23 without a libm call: truncation is exact, and
/// so is the fraction `v - trunc(v)`.
#[inline(always)]
pub fn round_half_away(v: f32) -> i32 {
    let t = v as i32;
    let frac = v - t as f32;
    t + (frac >= 0.5) as i32 - (frac <= -0.5) as i32
}

/// Quantizes one scale block (a row of I8_ABSMAX) into `codes`, returning its scale. This is
/// the semantics every SIMD requantizer must reproduce bit for bit (in two parts: the
/// block's max |x| as [`super::abs_max_bits`] gives it for finite input, and [`quantize`]).
pub fn encode_row(x: &[f32], codes: &mut [i8]) -> f32 {
    let scale = absmax(x) / MAX_CODE;
    if scale == 0.0 {
        codes.fill(0);
    } else {
        quantize(x, scale, codes);
    }
    scale
}

/// The codes of a block at its nonzero `scale`: `round_half_away(x / scale)` clamped to
/// +-127, into the first `min(x.len(), codes.len())` codes.
pub fn quantize(x: &[f32], scale: f32, codes: &mut [i8]) {
    for (c, &v) in codes.iter_mut().zip(x) {
        *c = round_half_away(v / scale).clamp(-127, 127) as i8;
    }
}

/// The scales of `src`'s blocks from each block's max |x| as bits (`maxima`, as
/// [`super::abs_max_bits`] gives them), after the checks every encoder makes before writing
/// anything: a non-finite value (`NonFinite` with the first one's index) before a block
/// whose scale overflows ([`check_scales`]'s `ScaleOverflow`, the first such block).
pub fn scales_of(src: &[f32], maxima: &[u32]) -> Result<Vec<f32>> {
    if maxima.iter().any(|&bits| bits >= f32::INFINITY.to_bits()) {
        // The search for the index runs only on refusal.
        super::check_finite(src)?;
    }
    maxima
        .iter()
        .enumerate()
        .map(|(index, &bits)| {
            let amax = f32::from_bits(bits);
            match scale_overflows(amax / MAX_CODE) {
                true => Err(Error::ScaleOverflow { block: index, amax }),
                false => Ok(amax / MAX_CODE),
            }
        })
        .collect()
}

/// Refuses a block whose max |x| is so close to `f32::MAX` that code 127 times its scale
/// would decode to infinity (`ScaleOverflow` names the block: the row for I8_ABSMAX); runs
/// before anything is written. `src` must be finite ([`super::check_finite`]).
pub fn check_scales(src: &[f32], block: usize) -> Result<()> {
    let maxima: Vec<u32> = src.chunks_exact(block).map(super::abs_max_bits).collect();
    scales_of(src, &maxima).map(drop)
}

fn scale_overflows(scale: f32) -> bool {
    (scale * MAX_CODE).is_infinite()
}

/// The codes of `src`'s blocks at their `scales` (from [`scales_of`]) with `quantize`
/// (bit-identical to [`quantize`]); a block of scale 0 gets codes 0.
pub fn quantize_blocks(
    src: &[f32],
    block: usize,
    scales: &[f32],
    codes: &mut [i8],
    quantize: fn(&[f32], f32, &mut [i8]),
) {
    for ((x, c), &scale) in src.chunks_exact(block).zip(codes.chunks_exact_mut(block)).zip(scales) {
        if scale == 0.0 {
            c.fill(0);
        } else {
            quantize(x, scale, c);
        }
    }
}

pub fn encode(src: &[f32], block: usize, dst: &mut [u8]) {
    let (codes, scales) = dst.split_at_mut(src.len());
    let codes: &mut [i8] = bytemuck::cast_slice_mut(codes);
    for ((x, c), s) in src.chunks_exact(block).zip(codes.chunks_exact_mut(block)).zip(scales.chunks_exact_mut(4)) {
        s.copy_from_slice(&encode_row(x, c).to_le_bytes());
    }
}

/// The scale of block `index` (counted over the whole tensor) of an `n`-element tensor.
pub fn scale(src: &[u8], n: usize, index: usize) -> f32 {
    let s = &src[n + 4 * index..];
    f32::from_le_bytes([s[0], s[1], s[2], s[3]])
}

pub fn decode(src: &[u8], block: usize, dst: &mut [f32]) {
    let n = dst.len();
    for (index, y) in dst.chunks_exact_mut(block).enumerate() {
        let s = scale(src, n, index);
        for (y, &c) in y.iter_mut().zip(&src[index * block..]) {
            *y = c as i8 as f32 * s;
        }
    }
}

/// Element `index` of an `n`-element tensor.
pub fn get(src: &[u8], n: usize, block: usize, index: usize) -> f32 {
    src[index] as i8 as f32 * scale(src, n, index / block)
}

/// Code -128 is outside [-127, 127]; a scale must be finite, non-negative, and small enough
/// that code 127 decodes to a finite value (reported at its block's first element).
pub fn first_corrupt(src: &[u8], n: usize, block: usize) -> Option<usize> {
    (0..n / block)
        .find(|&b| {
            let s = scale(src, n, b);
            !super::ternary::scale_is_valid(s) || scale_overflows(s)
        })
        .map(|b| b * block)
        .or_else(|| src[..n].iter().position(|&c| c as i8 == -128))
}
