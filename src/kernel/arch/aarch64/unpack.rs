//! Weight bytes -> vectors of 16 biased codes in {0, 1, 2} (3 = corrupt, counts as +2).
//!
//! Each unpacker hands out its vectors through `f(j, codes)`; with `#[inline(always)]` and
//! constant `j` the closures disappear and the codes stay in registers.

use crate::format::{tq1_0, tq2_0};
use core::arch::aarch64::*;
use core::arch::asm;

/// A 256-element TQ block format.
pub(super) trait TqBlock {
    const BYTES: usize;
    /// Calls `f(j, codes)` once for each j in 0..16, where `codes` holds the codes of the
    /// block's elements `16j .. 16j + 16`.
    ///
    /// # Safety
    /// `block` must be valid for reads of `BYTES` bytes.
    unsafe fn codes(block: *const u8, f: impl FnMut(usize, uint8x16_t));
    /// # Safety
    /// As for [`TqBlock::codes`].
    unsafe fn scale(block: *const u8) -> f32;
}

pub(super) struct Tq1;
pub(super) struct Tq2;

/// Digit n of a TQ1_0 byte b is `(q * 3) >> 8` with `q = (b * 3^n) mod 256`; computed as
/// `((q + (q >> 1)) >> 1) >> 6` in 8-bit lanes: flooring `q / 2` before the halving add
/// loses a half that can never carry `q + q/2` across a multiple of 128.
#[inline(always)]
unsafe fn top_trit(q: uint8x16_t) -> uint8x16_t {
    vshrq_n_u8::<6>(vhaddq_u8(q, vshrq_n_u8::<1>(q)))
}

/// Lane `4n + i` multiplies qh byte i by 3^n: digit n of qh[i] is element `240 + 4n + i`.
const QH_POW3: [u8; 16] = [1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27];

impl TqBlock for Tq1 {
    const BYTES: usize = tq1_0::BLOCK_BYTES;

    #[inline(always)]
    unsafe fn codes(block: *const u8, mut f: impl FnMut(usize, uint8x16_t)) {
        // qs[0..32] holds elements 32n + byte (digit n), qs[32..48] elements 160 + 16n + byte.
        let a0 = vld1q_u8(block);
        let a1 = vld1q_u8(block.add(16));
        let b = vld1q_u8(block.add(32));
        let qh = core::ptr::read_unaligned(block.add(tq1_0::QS_BYTES) as *const u32);
        f(0, top_trit(a0));
        f(1, top_trit(a1));
        f(10, top_trit(b));
        let mut pow = 1u8;
        for n in 1..5 {
            pow *= 3;
            let p = vdupq_n_u8(pow);
            f(2 * n, top_trit(vmulq_u8(a0, p)));
            f(2 * n + 1, top_trit(vmulq_u8(a1, p)));
            f(10 + n, top_trit(vmulq_u8(b, p)));
        }
        let h = vmulq_u8(vreinterpretq_u8_u32(vdupq_n_u32(qh)), vld1q_u8(QH_POW3.as_ptr()));
        f(15, top_trit(h));
    }

    #[inline(always)]
    unsafe fn scale(block: *const u8) -> f32 {
        load_f16(block.add(tq1_0::QS_BYTES + tq1_0::QH_BYTES))
    }
}

impl TqBlock for Tq2 {
    const BYTES: usize = tq2_0::BLOCK_BYTES;

    #[inline(always)]
    unsafe fn codes(block: *const u8, mut f: impl FnMut(usize, uint8x16_t)) {
        // Bytes 32h .. 32h + 32 at shift 2l hold elements 128h + 32l + byte: contiguous.
        let m3 = vdupq_n_u8(3);
        for h in 0..2 {
            let q0 = vld1q_u8(block.add(32 * h));
            let q1 = vld1q_u8(block.add(32 * h + 16));
            let j = 8 * h;
            f(j, vandq_u8(q0, m3));
            f(j + 1, vandq_u8(q1, m3));
            f(j + 2, vandq_u8(vshrq_n_u8::<2>(q0), m3));
            f(j + 3, vandq_u8(vshrq_n_u8::<2>(q1), m3));
            f(j + 4, vandq_u8(vshrq_n_u8::<4>(q0), m3));
            f(j + 5, vandq_u8(vshrq_n_u8::<4>(q1), m3));
            f(j + 6, vshrq_n_u8::<6>(q0));
            f(j + 7, vshrq_n_u8::<6>(q1));
        }
    }

    #[inline(always)]
    unsafe fn scale(block: *const u8) -> f32 {
        load_f16(block.add(tq2_0::QS_BYTES))
    }
}

/// Calls `f(s, codes)` for s in 0..4 with the codes at shift `2s` of 16 BITNET_B1_58 bytes:
/// elements `4j + s` of the 64 the bytes hold (see [`super::act::BitnetAct`]).
#[inline(always)]
pub(super) unsafe fn bitnet_chunk(q: uint8x16_t, mut f: impl FnMut(usize, uint8x16_t)) {
    let m3 = vdupq_n_u8(3);
    f(0, vandq_u8(q, m3));
    f(1, vandq_u8(vshrq_n_u8::<2>(q), m3));
    f(2, vandq_u8(vshrq_n_u8::<4>(q), m3));
    f(3, vshrq_n_u8::<6>(q));
}

/// Loads a little-endian f16 and widens it: `fcvt` from half is base ARMv8 FP, so this
/// needs no FEAT_FP16 (nor a per-call feature check, as `half` would do).
///
/// # Safety
/// `p` must be valid for reads of 2 bytes.
#[inline(always)]
pub(super) unsafe fn load_f16(p: *const u8) -> f32 {
    let out: f32;
    asm!(
        "ldr {h:h}, [{p}]",
        "fcvt {o:s}, {h:h}",
        p = in(reg) p,
        h = out(vreg) _,
        o = lateout(vreg) out,
        options(pure, readonly, nostack, preserves_flags),
    );
    out
}
