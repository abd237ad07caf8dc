//! `bitnet_gemv/neon-dotprod`: `sdot` of codes by activations into int32 lanes. `vdotq_s32`
//! is not stable Rust, so `sdot` is written with `asm!`, compiled with the `dotprod` target
//! feature, and the kernels run only where it is detected.

use super::simd::Neon;
use crate::format::Format;
use crate::kernel::isa::{self, Isa};
use crate::kernel::mac::{Mac, QuadMac};
use crate::kernel::{gemm, tile, Kernel};
use core::arch::aarch64::*;
use core::arch::asm;

impl Isa for Neon<Sdot> {
    const FEATURES: &'static str = "neon, dotprod";

    fn available() -> bool {
        std::arch::is_aarch64_feature_detected!("dotprod")
    }

    isa::enter!("neon,dotprod");
}

pub(super) struct Sdot;

impl Mac<uint8x16_t> for Sdot {
    type P = int32x4_t;
    /// int32 lanes need no folding.
    const GROUPS: usize = usize::MAX;

    #[inline(always)]
    unsafe fn start(acc: uint8x16_t) -> int32x4_t {
        // SAFETY: register-only NEON (the trait's contract).
        unsafe { vreinterpretq_s32_u8(acc) }
    }

    /// Codes are at most 12, so reading them as signed bytes is exact.
    #[inline(always)]
    unsafe fn dot(p: int32x4_t, u: uint8x16_t, s: uint8x16_t) -> int32x4_t {
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
    unsafe fn end(p: int32x4_t, _acc: uint8x16_t) -> uint8x16_t {
        // SAFETY: register-only NEON (the trait's contract).
        unsafe { vreinterpretq_u8_s32(p) }
    }
}

impl QuadMac<uint8x16_t, int8x16_t> for Sdot {
    type Q = int32x4_t;
    /// `sdot` accumulates int32 directly: no folding.
    const Q_GROUPS: usize = usize::MAX;

    #[inline(always)]
    unsafe fn q_start(acc: uint8x16_t) -> int32x4_t {
        // SAFETY: the trait's contract (this ISA's features); register operations only.
        unsafe { vreinterpretq_s32_u8(acc) }
    }

    /// One `sdot` by element: lane `L` of `a` (four activations) against each int32 lane's
    /// four codes of `w` (at most 3: exact as signed bytes).
    #[inline(always)]
    unsafe fn q_dot<const L: i32>(q: int32x4_t, w: uint8x16_t, a: int8x16_t) -> int32x4_t {
        let mut acc = q;
        // SAFETY: a register-only instruction of the dotprod extension, which the caller
        // has (`.arch_extension` as in `Sdot::dot`).
        unsafe {
            asm!(
                ".arch_extension dotprod",
                "sdot {acc:v}.4s, {w:v}.16b, {a:v}.4b[{l}]",
                acc = inout(vreg) acc,
                w = in(vreg) w,
                a = in(vreg) a,
                l = const L,
                // Not `pure`, as `ld1_next`: program order keeps its registers uncopied.
                options(nomem, nostack, preserves_flags),
            )
        };
        acc
    }

    #[inline(always)]
    unsafe fn q_end(q: int32x4_t, _acc: uint8x16_t) -> uint8x16_t {
        // SAFETY: the trait's contract (this ISA's features); register operations only.
        unsafe { vreinterpretq_u8_s32(q) }
    }
}

// GEMV: 4 x 4 batch tiles, 16 accumulators of NEON's 32 registers; BitNet's split planes
// need two per (row, token), so 4 x 2.
// GEMM: 4 x 5 register blocks: 20 accumulators, 4 weight (v24-v27) and 5 activation (v28-v31 and
// one more) registers of NEON's 32 (4 x 4 executes 1-2 more instructions per 1,000 MACs at m = 128). Preferred from the
// token count from which it executes fewer instructions than the dotprod GEMV at every m
// counted (qemu, 256 x 2048; no ARM hardware here, so counts, not timings; recounted after
// the shared GEMM's per-tile seeds and Q2_0's constant block loops): 3 / 5 / 4 / 3 / 3 / 3 / 5 for
// TQ1_0 / TQ2_0 / BITNET_B1_58 / I2_S / I2_S_64 / Q2_0 / I2_S_R4 (docs/arm-instruction-counts.md;
// I2_S_R4's panel packer takes each row's plane of its group's bytes, its GEMV one load for four rows).
/// `bitnet_gemm/neon-dotprod`, then `bitnet_gemv/neon-dotprod` (4 rows per single-token
/// tile, 4 x 4 per batch tile, 4 x 2 for BITNET_B1_58).
pub(super) fn kernels() -> impl Iterator<Item = Kernel> {
    let gemm = gemm::kernels::<Neon<Sdot>, Neon<Sdot>, 4, 5>(
        c"bitnet_gemm/neon-dotprod",
        &[
            (Format::Tq1_0, 3),
            (Format::Tq2_0, 5),
            (Format::BitnetB158, 4),
            (Format::I2S, 3),
            (Format::I2S64, 3),
            (Format::I2SR4, 5),
            (Format::Q2_0, 3),
        ],
    );
    gemm.into_iter().chain(tile::every_format::<Neon<Sdot>, 4, 4, 4, 4, 4, 4, 4, 2>(c"bitnet_gemv/neon-dotprod"))
}
