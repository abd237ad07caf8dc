//! TQ1_0 (ggml): base-3 digits, five per byte, 256-element blocks with an f16 scale.

use super::{Codes, Scale};
use crate::format::{tq1_0, Format};
use crate::kernel::gemm::{GemmSimd, Layout, QuadSink};
use crate::kernel::prep;
use crate::kernel::tile::{gemv_format, Simd, Tq};

/// TQ1_0: base-3 digits, five per byte, 256-element blocks with an f16 scale.
pub(crate) struct Tq1;

impl Codes for Tq1 {
    const FORMAT: Format = Format::Tq1_0;
    const BLOCK: usize = 256;
    const BLOCK_BYTES: usize = tq1_0::BLOCK_BYTES;
    const CODE_AT: usize = 0;
    /// `qs` and `qh`, which are contiguous.
    const CODE_BYTES: usize = tq1_0::QS_BYTES + tq1_0::QH_BYTES;
    const SCALE: Scale = Scale::Block(tq1_0::SCALE_AT);
}

/// TQ1_0 code bytes per block (`qs` and `qh`, which are contiguous).
pub(crate) const TQ1_CODE_BYTES: usize = tq1_0::QS_BYTES + tq1_0::QH_BYTES;

/// Slot of TQ1_0 element `e` of a block when the 52 code bytes are loaded `w` at a time and
/// each load is split into its five base-3 digits.
pub(crate) fn tq1_slot(e: usize, w: usize) -> usize {
    let (byte, digit) = tq1_0::position(e);
    prep::unpack_slot(byte, digit, w, 5)
}

/// Prepared activation bytes per block in [`tq1_slot`]'s order for loads of `w` bytes.
pub(crate) const fn tq1_act_block(w: usize) -> usize {
    TQ1_CODE_BYTES.div_ceil(w) * w * 5
}

/// Prepared activation bytes per block in [`tq1_slot_qh_vector`]'s order: one per element.
#[cfg(any(target_arch = "aarch64", all(target_arch = "wasm32", target_feature = "simd128")))]
pub(crate) const TQ1_QH_VECTOR_ACT_BLOCK: usize = 256;

/// The first slot of the `qh` digits' vector in [`tq1_slot_qh_vector`]'s order: after the
/// five digits of each `qs` byte.
#[cfg(any(target_arch = "aarch64", all(target_arch = "wasm32", target_feature = "simd128")))]
pub(crate) const TQ1_QH_VECTOR_SLOT: usize = 5 * tq1_0::QS_BYTES;

/// [`tq1_slot`] for 16-byte loads whose `qh` digits come as one vector: the 48 `qs` bytes
/// in three loads of five digits each, then digit `n` of `qh` byte `j` (element `240 + 4n +
/// j`) in slot `240 + 4n + j`, so a block's activations take 256 slots (NEON and wasm,
/// whose `Simd::tq1_block` computes the four `qh` digits in one vector).
#[cfg(any(target_arch = "aarch64", all(target_arch = "wasm32", target_feature = "simd128")))]
pub(crate) fn tq1_slot_qh_vector(e: usize) -> usize {
    match tq1_0::position(e) {
        (byte, digit) if byte < tq1_0::QS_BYTES => prep::unpack_slot(byte, digit, 16, 5),
        (byte, digit) => TQ1_QH_VECTOR_SLOT + 4 * digit + (byte - tq1_0::QS_BYTES),
    }
}

impl<S: Simd> Tq<S> for Tq1 {
    const OVERREAD: usize = S::TQ1_OVERREAD;

    fn act_block() -> usize {
        S::TQ1_ACT_BLOCK
    }

    fn slot(e: usize) -> usize {
        S::tq1_slot(e)
    }

    #[inline(always)]
    unsafe fn block<const R: usize, const T: usize>(
        w: [*const u8; R],
        _n: usize,
        a: [*const i8; T],
        acc: &mut [[S::V; T]; R],
    ) {
        // SAFETY: the same contract as `Simd::tq1_block`.
        unsafe { S::tq1_block::<R, T>(w, a, acc) }
    }

    #[inline(always)]
    unsafe fn row_block<const R: usize, const T: usize>(
        w: [*const u8; R],
        _n: usize,
        a: [*const i8; T],
        lo: &mut [[S::V; T]; R],
        hi: &mut [[S::V; T]; R],
    ) {
        // SAFETY: the same contract as `Simd::tq1_block`.
        unsafe { S::tq1_row_block::<R, T>(w, a, lo, hi) }
    }

    #[inline(always)]
    unsafe fn row_dot<const T: usize>(lo: S::V, hi: S::V) -> i32 {
        // SAFETY: the caller's contract.
        unsafe { S::tq1_row_dot::<T>(lo, hi) }
    }
}

gemv_format!(Tq1: Simd, prepare_tq, tq);

impl Layout for Tq1 {
    /// Byte `b` of a region holds elements `first + b + n * bytes` as base-3 digit `n`
    /// (see `tq1_0::position`; [`GemmSimd::trits`]). The `qh` dword holds four digits.
    #[inline(always)]
    unsafe fn expand<S: GemmSimd, O: QuadSink<S>>(i: usize, v: S::V, out: &mut O) {
        // (first quad, quads per digit, digits) of the region holding dword i.
        let (q0, step, digits) = match i {
            0..8 => (i, 8, 5),
            8..12 => (40 + i - 8, 4, 5),
            _ => (60, 1, 4),
        };
        // SAFETY: the caller's contract; the regions' last quads (`q0 + (digits - 1) step`)
        // are at most 39, 59 and 63.
        unsafe { S::trits(v, digits, |n, d| out.put(q0 + n * step, d)) }
    }
}
