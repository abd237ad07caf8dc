//! `bitnet_gemv/neon` and `bitnet_gemm/neon`, for CPUs without dotprod (Cortex-A53):
//! `smlal`/`smlal2` of codes by activations into int16 lanes, pairwise-widened into the
//! int32 accumulators before int16 can overflow.

use super::simd::Neon;
use crate::format::Format;
use crate::kernel::isa::{self, Isa};
use crate::kernel::mac::{Mac, QuadMac};
use crate::kernel::{gemm, tile, Kernel};
use core::arch::aarch64::*;

impl Isa for Neon<Smlal> {
    const FEATURES: &'static str = "neon";

    fn available() -> bool {
        std::arch::is_aarch64_feature_detected!("neon")
    }

    isa::enter!("neon");
}

pub(super) struct Smlal;

impl Mac<uint8x16_t> for Smlal {
    type P = int16x8_t;
    /// Two products of at most 3 * 128 per int16 lane and dot: 8 groups of four dots are
    /// 8 * 4 * 2 * 384 = 24,576 < 2^15.
    const GROUPS: usize = 8;

    #[inline(always)]
    unsafe fn start(_acc: uint8x16_t) -> int16x8_t {
        // SAFETY: register-only NEON (the trait's contract).
        unsafe { vdupq_n_s16(0) }
    }

    /// Lane j gains the products of bytes j and j + 8: two per dot, which keeps the int16
    /// lanes exact within the bound of [`Mac`].
    #[inline(always)]
    unsafe fn dot(p: int16x8_t, u: uint8x16_t, s: uint8x16_t) -> int16x8_t {
        // SAFETY: register-only NEON (the trait's contract).
        unsafe {
            let (u, s) = (vreinterpretq_s8_u8(u), vreinterpretq_s8_u8(s));
            vmlal_high_s8(vmlal_s8(p, vget_low_s8(u), vget_low_s8(s)), u, s)
        }
    }

    #[inline(always)]
    unsafe fn end(p: int16x8_t, acc: uint8x16_t) -> uint8x16_t {
        // SAFETY: register-only NEON (the trait's contract).
        unsafe { vreinterpretq_u8_s32(vpadalq_s16(vreinterpretq_s32_u8(acc), p)) }
    }

    /// int16 lane j holds bytes j and j + 8; `sadalp` adds lanes 2i and 2i + 1 to lane i.
    fn lane(byte: usize) -> usize {
        (byte % 8) / 2
    }
}

/// The GEMM's broadcast quad: `dup` of the quad's 32-bit lane, then `smlal`/`smlal2` of the
/// four rows' codes (`w`: rows 0-1 in the low half, 2-3 in the high) into two int16x8, lane
/// `j` of each holding code `j % 4` of row `j / 4` (of its half) times activation `j % 4`.
impl QuadMac<uint8x16_t, int8x16_t> for Smlal {
    type Q = (int16x8_t, int16x8_t);
    /// A lane takes 4 products per group (one per quad), each at most 3 * 128: 16 groups
    /// (one TQ block) are 16 * 4 * 384 = 24,576 < 2^15.
    const Q_GROUPS: usize = 16;

    #[inline(always)]
    unsafe fn q_start(_acc: uint8x16_t) -> (int16x8_t, int16x8_t) {
        // SAFETY: register-only NEON (the trait's contract).
        unsafe { (vdupq_n_s16(0), vdupq_n_s16(0)) }
    }

    #[inline(always)]
    unsafe fn q_dot<const L: i32>(q: (int16x8_t, int16x8_t), w: uint8x16_t, a: int8x16_t) -> (int16x8_t, int16x8_t) {
        // SAFETY: register-only NEON (the trait's contract).
        unsafe {
            let d = vreinterpretq_s8_s32(vdupq_laneq_s32::<L>(vreinterpretq_s32_s8(a)));
            let w = vreinterpretq_s8_u8(w);
            (vmlal_s8(q.0, vget_low_s8(w), vget_low_s8(d)), vmlal_high_s8(q.1, w, d))
        }
    }

    /// Pairwise widening (`saddlp`) leaves two int32 per row, a pairwise add (`addp`) one.
    #[inline(always)]
    unsafe fn q_end(q: (int16x8_t, int16x8_t), acc: uint8x16_t) -> uint8x16_t {
        // SAFETY: register-only NEON (the trait's contract).
        unsafe {
            let rows = vpaddq_s32(vpaddlq_s16(q.0), vpaddlq_s16(q.1));
            vreinterpretq_u8_s32(vaddq_s32(vreinterpretq_s32_u8(acc), rows))
        }
    }
}

// 4 x 2 register blocks: 16 int16 accumulators (two per row vector and token), 4 weight and
// 2 activation registers and a broadcast quad (2 x 4 executes more: a `dup` per token and
// quad). Preferred from the token count from which it executes fewer instructions than
// this GEMV at every m counted (qemu, 256 x 2048; no ARM hardware here, so counts, not
// timings; recounted after the shared GEMM's per-tile seeds and Q2_0's constant block loops): 3 /
// 4 / 4 / 3 / 3 / 4 / 5 for TQ1_0 / TQ2_0 / BITNET_B1_58 / I2_S / I2_S_64 / Q2_0 / I2_S_R4
// (docs/arm-instruction-counts.md).
/// `bitnet_gemm/neon`, then `bitnet_gemv/neon` (4 rows per single-token tile, 2 x 2 per
/// batch tile).
pub(super) fn kernels() -> impl Iterator<Item = Kernel> {
    let gemm = gemm::kernels::<Neon<Smlal>, Neon<Smlal>, 4, 2>(
        c"bitnet_gemm/neon",
        &[
            (Format::Tq1_0, 3),
            (Format::Tq2_0, 4),
            (Format::BitnetB158, 4),
            (Format::I2S, 3),
            (Format::I2S64, 3),
            (Format::I2SR4, 5),
            (Format::Q2_0, 4),
        ],
    );
    // This GEMV has no Q2_0 x I8_BLOCK32 tile (`smlal` mixes a block's halves in its lanes,
    // see `tile::every_format`): the GEMM serves that pair at every token count.
    let gemm = gemm.into_iter().map(|k| match (k.weight, k.act) {
        (Format::Q2_0, Format::I8Block32) => Kernel { min_tokens: 1, ..k },
        _ => k,
    });
    gemm.chain(tile::every_format::<Neon<Smlal>, 4, 4, 2, 2, 2, 4, 2, 2>(c"bitnet_gemv/neon"))
}
