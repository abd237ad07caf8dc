//! SIMD128 activation quantizer, bit-identical to [`crate::format::i8_absmax::quantize`]: a
//! real division `x / scale` per element, and round-half-away-from-zero done as the scalar
//! code does it (truncate, then compare the exact fraction with +-0.5) before clamping to
//! +-127.

use crate::format::i8_absmax::MAX_CODE;
use core::arch::wasm32::*;

/// [`crate::format::i8_absmax::quantize`] with SIMD128.
pub(super) fn quantize(x: &[f32], scale: f32, codes: &mut [i8]) {
    let len = x.len().min(codes.len());
    let body = len / 16 * 16;
    let scale_v = f32x4_splat(scale);
    for (x, c) in x[..body].chunks_exact(16).zip(codes[..body].chunks_exact_mut(16)) {
        let mut q = [i32x4_splat(0); 4];
        for (j, q) in q.iter_mut().enumerate() {
            // SAFETY: `x` holds 16 floats, so 4 at offset 4 * j are in bounds.
            let v = unsafe { v128_load(x.as_ptr().add(4 * j) as *const v128) };
            *q = quantize4(f32x4_div(v, scale_v));
        }
        // Codes are within +-127, so the saturating narrowings are exact.
        let bytes = i8x16_narrow_i16x8(i16x8_narrow_i32x4(q[0], q[1]), i16x8_narrow_i32x4(q[2], q[3]));
        // SAFETY: `c` holds 16 bytes.
        unsafe { v128_store(c.as_mut_ptr() as *mut v128, bytes) };
    }
    crate::format::i8_absmax::quantize(&x[body..len], scale, &mut codes[body..len]);
}

/// Codes of 4 scaled values as int32: round half away from zero, clamp to +-127, and NaN
/// (from a NaN or infinite input) to 0, as the scalar conversion gives.
#[inline]
fn quantize4(v: v128) -> v128 {
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
