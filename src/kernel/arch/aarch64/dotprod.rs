//! `bitnet_gemv/neon-dotprod`: `sdot` of codes by activations into i32 lanes. `vdotq_s32`
//! is not stable Rust, so `sdot` is written with `asm!` inside functions compiled with the
//! `dotprod` target feature, and the kernels run only where it is detected.

use super::gemv::Mac;
use core::arch::aarch64::*;
use core::arch::asm;

pub(super) struct Dotprod;

impl Mac for Dotprod {
    type Acc = int32x4_t;

    #[inline(always)]
    unsafe fn zero() -> int32x4_t {
        vdupq_n_s32(0)
    }

    #[inline(always)]
    unsafe fn start(bias: int32x4_t) -> int32x4_t {
        bias
    }

    #[inline(always)]
    unsafe fn mac(acc: int32x4_t, codes: uint8x16_t, act: int8x16_t) -> int32x4_t {
        let mut acc = acc;
        // Codes are at most 3, so reading them as signed bytes is exact.
        // `.arch_extension`: closures that LLVM declines to inline do not inherit the
        // caller's `dotprod` target feature, and the assembler must still accept `sdot`.
        asm!(
            ".arch_extension dotprod",
            "sdot {acc:v}.4s, {c:v}.16b, {a:v}.16b",
            acc = inout(vreg) acc,
            c = in(vreg) codes,
            a = in(vreg) act,
            options(pure, nomem, nostack, preserves_flags),
        );
        acc
    }

    #[inline(always)]
    unsafe fn sum2(a: int32x4_t, b: int32x4_t) -> i32 {
        vaddvq_s32(vaddq_s32(a, b))
    }
}

pub(super) fn available() -> bool {
    std::arch::is_aarch64_feature_detected!("dotprod")
}

super::gemv::path_kernels!(Dotprod, "neon,dotprod", available);
