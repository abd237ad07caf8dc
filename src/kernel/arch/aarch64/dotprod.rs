//! `bitnet_gemv/neon-dotprod`: `sdot` of codes by activations into int32 lanes. `vdotq_s32`
//! is not stable Rust, so `sdot` is written with `asm!`, compiled with the `dotprod` target
//! feature, and the kernels run only where it is detected.

use super::simd::{Mac, Neon};
use core::arch::aarch64::*;
use core::arch::asm;

pub(super) const FEATURES: &str = "neon, dotprod";

pub(super) fn available() -> bool {
    std::arch::is_aarch64_feature_detected!("dotprod")
}

pub(super) struct Sdot;

impl Mac for Sdot {
    type P = int32x4_t;

    #[inline(always)]
    unsafe fn p_start(acc: uint8x16_t) -> int32x4_t {
        // SAFETY: register-only NEON (the trait's contract).
        unsafe { vreinterpretq_s32_u8(acc) }
    }

    /// Codes are at most 12, so reading them as signed bytes is exact.
    #[inline(always)]
    unsafe fn p_dot(p: int32x4_t, u: uint8x16_t, s: uint8x16_t) -> int32x4_t {
        let mut acc = p;
        // SAFETY: a register-only instruction of the dotprod extension, which the caller
        // has. `.arch_extension`: the assembler must accept `sdot` even where LLVM declines
        // to inline this into a function compiled with the feature.
        unsafe {
            asm!(
                ".arch_extension dotprod",
                "sdot {acc:v}.4s, {u:v}.16b, {s:v}.16b",
                acc = inout(vreg) acc,
                u = in(vreg) u,
                s = in(vreg) s,
                options(pure, nomem, nostack, preserves_flags),
            )
        };
        acc
    }

    #[inline(always)]
    unsafe fn p_end(p: int32x4_t, _acc: uint8x16_t) -> uint8x16_t {
        // SAFETY: register-only NEON (the trait's contract).
        unsafe { vreinterpretq_u8_s32(p) }
    }

    fn lane(byte: usize) -> usize {
        byte / 4
    }
}

// 4 x 4 batch tiles: 16 accumulators of NEON's 32 registers; BitNet's split planes need
// two per (row, token), so 4 x 2.
crate::kernel::tile::isa_kernels!(Neon<Sdot>, c"bitnet_gemv/neon-dotprod", "neon,dotprod", 4, 4, 4, bitnet: 4, 2);
