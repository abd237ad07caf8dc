//! SIMD128 activation requantizer, bit-identical to [`crate::format::i8_absmax::encode_row`]:
//! the same absmax (max is exact in any order; NaN is skipped as `f32::max` skips it), the
//! same f32 scale `absmax / 127`, a real division `x / scale` per element, and
//! round-half-away-from-zero done as the scalar code does it (truncate, then compare the
//! exact fraction with +-0.5) before clamping to +-127.

use crate::format::i8_absmax::{round_half_away, MAX_CODE};
use core::arch::wasm32::*;

/// A [`crate::kernel::RequantRowFn`].
pub(super) fn requant_row(x: &[f32], codes: &mut [i8]) -> f32 {
    let scale = absmax(x) / MAX_CODE;
    if scale == 0.0 {
        codes.fill(0);
        return scale;
    }
    let len = x.len().min(codes.len());
    let body = len / 16 * 16;
    let scale_v = f32x4_splat(scale);
    for (x, c) in x[..body].chunks_exact(16).zip(codes[..body].chunks_exact_mut(16)) {
        let mut q = [i32x4_splat(0); 4];
        for (j, q) in q.iter_mut().enumerate() {
            // SAFETY: `x` holds 16 floats, so 4 at offset 4 * j are in bounds.
            let v = unsafe { v128_load(x.as_ptr().add(4 * j) as *const v128) };
            *q = quantize(f32x4_div(v, scale_v));
        }
        // Codes are within +-127, so the saturating narrowings are exact.
        let bytes = i8x16_narrow_i16x8(i16x8_narrow_i32x4(q[0], q[1]), i16x8_narrow_i32x4(q[2], q[3]));
        // SAFETY: `c` holds 16 bytes.
        unsafe { v128_store(c.as_mut_ptr() as *mut v128, bytes) };
    }
    // The tail through the definition itself, with this row's scale: only its elements
    // are passed, and `encode_row` of a sub-slice would derive a different scale.
    for (c, &v) in codes[body..len].iter_mut().zip(&x[body..len]) {
        *c = round_half_away(v / scale).clamp(-127, 127) as i8;
    }
    scale
}

/// `max |x|`, ignoring NaN: `pmax(m, v)` is `m < v ? v : m`, so a NaN `v` keeps `m`.
fn absmax(x: &[f32]) -> f32 {
    let mut m = [f32x4_splat(0.0); 4];
    let body = x.len() / 16 * 16;
    for chunk in x[..body].chunks_exact(16) {
        for (j, m) in m.iter_mut().enumerate() {
            // SAFETY: `chunk` holds 16 floats.
            let v = unsafe { v128_load(chunk.as_ptr().add(4 * j) as *const v128) };
            *m = f32x4_pmax(*m, f32x4_abs(v));
        }
    }
    let m = f32x4_pmax(f32x4_pmax(m[0], m[1]), f32x4_pmax(m[2], m[3]));
    let lanes = [
        f32x4_extract_lane::<0>(m),
        f32x4_extract_lane::<1>(m),
        f32x4_extract_lane::<2>(m),
        f32x4_extract_lane::<3>(m),
    ];
    lanes.iter().chain(&x[body..]).fold(0.0f32, |m, v| m.max(v.abs()))
}

/// Codes of 4 scaled values as int32: round half away from zero, clamp to +-127, and NaN
/// (from a NaN or infinite input) to 0, as the scalar conversion gives.
#[inline]
fn quantize(v: v128) -> v128 {
    let t = f32x4_trunc(v);
    let frac = f32x4_sub(v, t);
    let one = f32x4_splat(1.0);
    let up = v128_and(f32x4_ge(frac, f32x4_splat(0.5)), one);
    let down = v128_and(f32x4_le(frac, f32x4_splat(-0.5)), one);
    let r = f32x4_sub(f32x4_add(t, up), down);
    let r = f32x4_pmin(f32x4_pmax(r, f32x4_splat(-MAX_CODE)), f32x4_splat(MAX_CODE));
    // The saturating conversion turns NaN into 0, as `as i32` does.
    i32x4_trunc_sat_f32x4(r)
}
