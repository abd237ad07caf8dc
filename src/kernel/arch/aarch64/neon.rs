//! `bitnet_gemv/neon`: widening `smull`/`smlal` of codes by activations into i16 lanes,
//! widened to i32 by `saddlv` once per 256 elements.

use super::gemv::Mac;
use core::arch::aarch64::*;

pub(super) struct Neon;

impl Mac for Neon {
    type Acc = int16x8_t;

    #[inline(always)]
    unsafe fn zero() -> int16x8_t {
        vdupq_n_s16(0)
    }

    #[inline(always)]
    unsafe fn mac(acc: int16x8_t, codes: uint8x16_t, act: int8x16_t) -> int16x8_t {
        let codes = vreinterpretq_s8_u8(codes);
        let acc = vmlal_s8(acc, vget_low_s8(codes), vget_low_s8(act));
        vmlal_high_s8(acc, codes, act)
    }

    #[inline(always)]
    unsafe fn sum2(a: int16x8_t, b: int16x8_t) -> i32 {
        vaddlvq_s16(vaddq_s16(a, b))
    }
}

pub(super) fn available() -> bool {
    std::arch::is_aarch64_feature_detected!("neon")
}

super::gemv::path_kernels!(Neon, "neon", available);
