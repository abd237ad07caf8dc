//! `bitnet_gemv/neon`: widening `smlal`/`smlal2` of codes by activations into i16 lanes,
//! pairwise-widened into i32 lanes (`sadalp`) once per 256 elements.

use super::gemv::Mac;
use core::arch::aarch64::*;

pub(super) struct Neon;

/// i16 lanes for the products, beside i32 lanes for the bias.
impl Mac for Neon {
    type Acc = (int16x8_t, int32x4_t);

    #[inline(always)]
    unsafe fn zero() -> Self::Acc {
        (vdupq_n_s16(0), vdupq_n_s32(0))
    }

    #[inline(always)]
    unsafe fn start(bias: int32x4_t) -> Self::Acc {
        (vdupq_n_s16(0), bias)
    }

    #[inline(always)]
    unsafe fn mac((acc, bias): Self::Acc, codes: uint8x16_t, act: int8x16_t) -> Self::Acc {
        let codes = vreinterpretq_s8_u8(codes);
        let acc = vmlal_s8(acc, vget_low_s8(codes), vget_low_s8(act));
        (vmlal_high_s8(acc, codes, act), bias)
    }

    #[inline(always)]
    unsafe fn sum2(a: Self::Acc, b: Self::Acc) -> i32 {
        vaddvq_s32(vpadalq_s16(vaddq_s32(a.1, b.1), vaddq_s16(a.0, b.0)))
    }
}

pub(super) fn available() -> bool {
    std::arch::is_aarch64_feature_detected!("neon")
}

super::gemv::path_kernels!(Neon, "neon", available);
