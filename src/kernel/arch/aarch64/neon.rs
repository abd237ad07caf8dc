//! `bitnet_gemv/neon`, for CPUs without dotprod (Cortex-A53): `smlal`/`smlal2` of codes by
//! activations into int16 lanes, pairwise-widened into the int32 accumulator (`sadalp`)
//! once per weight load.

use super::simd::{Mac, Neon};
use core::arch::aarch64::*;

pub(super) const FEATURES: &str = "neon";

pub(super) fn available() -> bool {
    std::arch::is_aarch64_feature_detected!("neon")
}

pub(super) struct Smlal;

impl Mac for Smlal {
    type P = int16x8_t;

    #[inline(always)]
    unsafe fn p_start(_acc: uint8x16_t) -> int16x8_t {
        // SAFETY: register-only NEON (the trait's contract).
        unsafe { vdupq_n_s16(0) }
    }

    /// Lane j gains the products of bytes j and j + 8: two per dot, which keeps the int16
    /// lanes exact within the bound of [`Simd::p_dot`](crate::kernel::tile::Simd::p_dot).
    #[inline(always)]
    unsafe fn p_dot(p: int16x8_t, u: uint8x16_t, s: uint8x16_t) -> int16x8_t {
        // SAFETY: register-only NEON (the trait's contract).
        unsafe {
            let (u, s) = (vreinterpretq_s8_u8(u), vreinterpretq_s8_u8(s));
            vmlal_high_s8(vmlal_s8(p, vget_low_s8(u), vget_low_s8(s)), u, s)
        }
    }

    #[inline(always)]
    unsafe fn p_end(p: int16x8_t, acc: uint8x16_t) -> uint8x16_t {
        // SAFETY: register-only NEON (the trait's contract).
        unsafe { vreinterpretq_u8_s32(vpadalq_s16(vreinterpretq_s32_u8(acc), p)) }
    }

    /// int16 lane j holds bytes j and j + 8; `sadalp` adds lanes 2i and 2i + 1 to lane i.
    fn lane(byte: usize) -> usize {
        (byte % 8) / 2
    }
}

crate::kernel::tile::isa_kernels!(Neon<Smlal>, c"bitnet_gemv/neon", "neon", 4, 2, 2);
