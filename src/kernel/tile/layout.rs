//! What the GEMV needs of a weight format: [`Tq`] for formats with block scales, [`OneScale`]
//! for formats with one scale per tensor. The formats implement them in `kernel/weights/`.

use super::prepare::{cached_runs, one_scale_period, tq_runs};
use super::simd::Simd;
use crate::kernel::prep;
use crate::kernel::weights::{Codes, Scale};
use std::borrow::Cow;

/// A format with block scales (TQ1_0, TQ2_0, Q2_0) as the GEMV reads it on `S`: the block
/// loop takes steps of `PER_STEP` blocks, and per step and row adds the int32 dot products
/// to float sums scaled by the blocks' scales.
pub(crate) trait Tq<S: Simd>: Codes {
    /// Blocks per step: 1, or (Q2_0) the blocks one vector load holds.
    const PER_STEP: usize = 1;
    /// Activation scales per block when the activations have their own per block (the
    /// format's accurate activation format): 1 for TQ1_0/TQ2_0 (I8_BLOCK256), 2 for Q2_0
    /// (I8_BLOCK32).
    const ACT_SCALES: usize = 1;
    /// Whether a tensor whose blocks all have one scale runs tiles that read no block scale
    /// (by per-token activations its rows in int32, [`Tq::row_block`]; by per-block ones
    /// scaled by the activations' scales alone): the code of more tiles, kept where it pays.
    const UNIFORM_ROWS: bool = true;
    /// Offset of the f16 scale in a block.
    const SCALE_AT: usize = match Self::SCALE {
        Scale::Block(at) => at,
        Scale::Tensor(_) => panic!("a format with block scales"),
    };
    /// Bytes past a step's blocks that [`Tq::block`] and [`Tq::row_block`] may read: a
    /// vector load of a whole block shorter than a vector, cheaper than a load of its bytes
    /// alone (TQ1_0 on x86: one 64-byte load on AVX-512, see `avx512vnni.rs`, two of 32
    /// bytes on AVX2). The lanes past the block meet zero activations. The tile reads the
    /// tensor's last row, when the tensor ends before these bytes, from a zero-padded copy.
    const OVERREAD: usize = 0;
    /// Prepared activation bytes per step.
    fn act_block() -> usize;
    /// Slot of element `e` of a step in its prepared activations.
    fn slot(e: usize) -> usize;
    /// Where one step of activations goes: the runs of [`Tq::slot`], computed once.
    fn placement() -> Cow<'static, prep::Placement> {
        Cow::Borrowed(tq_runs::<S, Self>())
    }
    /// Adds the dot products of one step (`n` blocks, `n < PER_STEP` only in a row's last
    /// step) per row `w[r]` with the prepared activations at `a[t]` to `acc[r][t]`.
    ///
    /// # Safety
    /// The CPU must have `S`'s features; every `w[r]` points at `n` whole blocks followed by
    /// `OVERREAD` readable bytes, and every `a[t]` at `act_block()` prepared bytes.
    unsafe fn block<const R: usize, const T: usize>(
        w: [*const u8; R],
        n: usize,
        a: [*const i8; T],
        acc: &mut [[S::V; T]; R],
    );
    /// As [`Tq::block`] for weights of one scale, into accumulators that run along the whole
    /// row: `lo` takes what [`Tq::block`] adds to `acc`, unless the format's dot products
    /// are cheaper with the odd bit planes masked in place (as BITNET_B1_58's, see
    /// `dot_2bit_x4`), which then go to `hi` as four times their dot product, or another
    /// format's sums that [`Tq::row_dot`] combines at the row's end.
    ///
    /// # Safety
    /// As for [`Tq::block`].
    #[inline(always)]
    unsafe fn row_block<const R: usize, const T: usize>(
        w: [*const u8; R],
        n: usize,
        a: [*const i8; T],
        lo: &mut [[S::V; T]; R],
        _hi: &mut [[S::V; T]; R],
    ) {
        // SAFETY: the caller's contract.
        unsafe { Self::block::<R, T>(w, n, a, lo) }
    }
    /// The dot product of one row and token from the accumulators [`Tq::row_block`] ran
    /// along the row in a tile of `T` tokens (their seeds not included).
    ///
    /// # Safety
    /// The CPU must have `S`'s features.
    #[inline(always)]
    unsafe fn row_dot<const T: usize>(lo: S::V, hi: S::V) -> i32 {
        // SAFETY: the caller's contract.
        unsafe { S::hsum_planes(lo, hi) }
    }
    /// One token's per-block activation scales of a step (`n * ACT_SCALES` f32 at `a`) in
    /// the lanes [`Tq::scale_add`] multiplies them into: the block's one scale in every lane.
    /// Built once per step and token, not per row.
    ///
    /// # Safety
    /// The CPU must have `S`'s features; `n * ACT_SCALES` f32 are readable at `a`.
    #[inline(always)]
    unsafe fn act_scales(a: *const f32, _n: usize) -> S::F {
        // SAFETY: the caller's contract.
        unsafe { S::fsplat(*a) }
    }
    /// `f[t] += float(acc[t]) * scale` for the scale(s) of the step at `w` (`n` blocks),
    /// times token `t`'s activation scales `a[t]` ([`Tq::act_scales`]) when the activations
    /// have them per block (`d * a` first: the reference's order).
    ///
    /// # Safety
    /// The CPU must have `S`'s features; `w` points at `n` whole blocks.
    #[inline(always)]
    unsafe fn scale_add<const T: usize>(
        w: *const u8,
        _n: usize,
        acc: &[S::V; T],
        a: Option<&[S::F; T]>,
        f: &mut [S::F; T],
    ) {
        // SAFETY: the block's f16 scale lies at `SCALE_AT`, as the caller guarantees; its
        // features.
        unsafe {
            let d = S::fsplat(S::f16(w.add(Self::SCALE_AT)));
            for t in 0..T {
                let s = a.map_or(d, |a| S::fmul(d, a[t]));
                f[t] = S::fmadd_lanes(acc[t], s, f[t]);
            }
        }
    }
}

/// A format with one scale per tensor as the GEMV reads it (BITNET_B1_58, I2_S): rows of
/// `k / 4` bytes of 2-bit codes `t + 1`, loaded `W` bytes at a time, each load split into
/// its four bit planes. Only the order of the codes differs between such formats, and the
/// activation preparation absorbs it ([`OneScale::placement`]).
pub(crate) trait OneScale: Codes {
    /// Elements after which the positions repeat, `PERIOD / 4` bytes further on.
    const PERIOD: usize;

    /// (byte, plane) of element `e < PERIOD` of a row: plane = bit shift / 2.
    fn position(e: usize) -> (usize, usize);

    /// Where one period of activations (`lcm(PERIOD, 4 W)` elements) goes in `S`'s unpack
    /// order: computed once per (ISA, format) from [`OneScale::position`].
    fn placement<S: Simd>() -> Cow<'static, prep::Placement> {
        let period = one_scale_period::<S, Self>();
        Cow::Borrowed(cached_runs::<S, Self>(period, |e| {
            let (byte, plane) = Self::position(e % Self::PERIOD);
            prep::unpack_slot(byte + e / Self::PERIOD * Self::PERIOD / 4, plane, S::W, 4)
        }))
    }
}
