//! The NEON I8_ABSMAX row requantizer, bit-identical to `format::i8_absmax::encode_row`:
//! the same absmax (`fmaxnm` ignores NaN as `f32::max` does), the same IEEE division
//! `x / scale`, and `fcvtas` rounds half away from zero as `round_half_away` does.

use crate::format::i8_absmax::{round_half_away, MAX_CODE};
use core::arch::aarch64::*;

pub(super) fn encode_row(x: &[f32], codes: &mut [i8]) -> f32 {
    // SAFETY: NEON is part of every aarch64 target Rust builds for (the `neon` feature is
    // on by default), so the CPU running this code has it.
    unsafe { encode_row_neon(x, codes) }
}

#[target_feature(enable = "neon")]
fn encode_row_neon(x: &[f32], codes: &mut [i8]) -> f32 {
    let scale = absmax(x) / MAX_CODE;
    if scale == 0.0 {
        codes.fill(0);
        return scale;
    }
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
    for (c, &v) in codes[full..n].iter_mut().zip(&x[full..n]) {
        *c = round_half_away(v / scale).clamp(-127, 127) as i8;
    }
    scale
}

#[target_feature(enable = "neon")]
fn absmax(x: &[f32]) -> f32 {
    let mut m = [vdupq_n_f32(0.0); 4];
    let chunks = x.chunks_exact(16);
    let rest = chunks.remainder();
    for c in chunks {
        for (j, m) in m.iter_mut().enumerate() {
            // SAFETY: in bounds: `c` has 16 floats.
            let v = unsafe { vld1q_f32(c.as_ptr().add(4 * j)) };
            *m = vmaxnmq_f32(*m, vabsq_f32(v));
        }
    }
    let v = vmaxnmq_f32(vmaxnmq_f32(m[0], m[1]), vmaxnmq_f32(m[2], m[3]));
    rest.iter().fold(vmaxnmvq_f32(v), |m, x| m.max(x.abs()))
}
