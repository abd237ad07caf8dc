//! The NEON I8_ABSMAX quantizer, bit-identical to `format::i8_absmax::quantize`: the same
//! IEEE division `x / scale`, and `fcvtas` rounds half away from zero as `round_half_away`
//! does.

use core::arch::aarch64::*;

pub(super) fn quantize(x: &[f32], scale: f32, codes: &mut [i8]) {
    // SAFETY: NEON is part of every aarch64 target Rust builds for (the `neon` feature is
    // on by default), so the CPU running this code has it.
    unsafe { quantize_neon(x, scale, codes) }
}

#[target_feature(enable = "neon")]
fn quantize_neon(x: &[f32], scale: f32, codes: &mut [i8]) {
    let n = x.len().min(codes.len());
    let vscale = vdupq_n_f32(scale);
    let lo = vdupq_n_s8(-127);
    let (src, dst) = (x.as_ptr(), codes.as_mut_ptr());
    // SAFETY: every call has `i + 4 <= n`, within `x`.
    let quant = |i: usize| vcvtaq_s32_f32(vdivq_f32(unsafe { vld1q_f32(src.add(i)) }, vscale));
    let full = n / 16 * 16;
    for i in (0..full).step_by(16) {
        // In bounds: i + 16 <= n <= both lengths.
        let h0 = vqmovn_high_s32(vqmovn_s32(quant(i)), quant(i + 4));
        let h1 = vqmovn_high_s32(vqmovn_s32(quant(i + 8)), quant(i + 12));
        // Saturating narrows clamp to [-128, 127]; the scalar code clamps to -127.
        let q = vmaxq_s8(vqmovn_high_s16(vqmovn_s16(h0), h1), lo);
        // SAFETY: in bounds, as above.
        unsafe { vst1q_s8(dst.add(i), q) };
    }
    crate::format::i8_absmax::quantize(&x[full..n], scale, &mut codes[full..n]);
}
