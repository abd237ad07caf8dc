//! I8_ABSMAX, the activation format: `rows * cols` int8 codes row-major, then `rows` f32
//! scales. Per row: scale = max |x| / 127, code = round_half_away(x / scale) clamped to
//! [-127, 127]; a row of zeros keeps scale 0 and codes 0.

use super::ternary::absmax;
use crate::error::{Error, Result};

pub const MAX_CODE: f32 = 127.0;

/// Rounds half away from zero for |v| < 2^23 without a libm call: truncation is exact, and
/// so is the fraction `v - trunc(v)`.
#[inline(always)]
pub fn round_half_away(v: f32) -> i32 {
    let t = v as i32;
    let frac = v - t as f32;
    t + (frac >= 0.5) as i32 - (frac <= -0.5) as i32
}

/// Quantizes one row into `codes`, returning its scale. This is the semantics every SIMD
/// requantizer must reproduce bit for bit.
pub fn encode_row(x: &[f32], codes: &mut [i8]) -> f32 {
    let scale = absmax(x) / MAX_CODE;
    if scale == 0.0 {
        codes.fill(0);
    } else {
        for (c, &v) in codes.iter_mut().zip(x) {
            *c = round_half_away(v / scale).clamp(-127, 127) as i8;
        }
    }
    scale
}

/// Refuses a row whose max |x| is so close to `f32::MAX` that code 127 times its scale
/// would decode to infinity; runs before anything is written. `src` must be finite
/// ([`super::check_finite`]).
pub fn check_row_scales(src: &[f32], cols: usize) -> Result<()> {
    for (row, x) in src.chunks_exact(cols).enumerate() {
        let amax = f32::from_bits(super::abs_max_bits(x));
        if scale_overflows(amax / MAX_CODE) {
            return Err(Error::ScaleOverflow { block: row, amax });
        }
    }
    Ok(())
}

fn scale_overflows(scale: f32) -> bool {
    (scale * MAX_CODE).is_infinite()
}

pub fn encode(src: &[f32], cols: usize, dst: &mut [u8]) {
    let rows = src.len() / cols;
    let (codes, scales) = dst.split_at_mut(rows * cols);
    let codes: &mut [i8] = bytemuck::cast_slice_mut(codes);
    for ((x, c), s) in src.chunks_exact(cols).zip(codes.chunks_exact_mut(cols)).zip(scales.chunks_exact_mut(4)) {
        s.copy_from_slice(&encode_row(x, c).to_le_bytes());
    }
}

pub fn scale(src: &[u8], rows: usize, cols: usize, row: usize) -> f32 {
    let s = &src[rows * cols + 4 * row..];
    f32::from_le_bytes([s[0], s[1], s[2], s[3]])
}

pub fn decode(src: &[u8], cols: usize, dst: &mut [f32]) {
    let rows = dst.len() / cols;
    for (row, y) in dst.chunks_exact_mut(cols).enumerate() {
        let s = scale(src, rows, cols, row);
        for (y, &c) in y.iter_mut().zip(&src[row * cols..]) {
            *y = c as i8 as f32 * s;
        }
    }
}

pub fn get(src: &[u8], rows: usize, cols: usize, row: usize, col: usize) -> f32 {
    src[row * cols + col] as i8 as f32 * scale(src, rows, cols, row)
}

/// Code -128 is outside [-127, 127]; a scale must be finite, non-negative, and small enough
/// that code 127 decodes to a finite value.
pub fn first_corrupt(src: &[u8], rows: usize, cols: usize) -> Option<usize> {
    (0..rows)
        .find(|&r| {
            let s = scale(src, rows, cols, r);
            !super::ternary::scale_is_valid(s) || scale_overflows(s)
        })
        .map(|r| r * cols)
        .or_else(|| src[..rows * cols].iter().position(|&c| c as i8 == -128))
}
