//! TQ2_0 (ggml): 2-bit codes in four planes of 64 bytes, 256-element blocks with an f16
//! scale after them.

use super::{Codes, Scale};
use crate::format::{tq2_0, Format};
use crate::kernel::gemm::{expand_planes, GemmSimd, Layout, QuadSink};
use crate::kernel::prep;
use crate::kernel::tile::{dot_2bit, dot_2bit_x4, gemv_format, p_end, p_start, Simd, Tq};

/// TQ2_0: 2-bit codes, 256-element blocks with an f16 scale.
pub(crate) struct Tq2;

impl Codes for Tq2 {
    const FORMAT: Format = Format::Tq2_0;
    const BLOCK: usize = 256;
    const BLOCK_BYTES: usize = tq2_0::BLOCK_BYTES;
    const CODE_AT: usize = 0;
    const CODE_BYTES: usize = tq2_0::QS_BYTES;
    const SCALE: Scale = Scale::Block(tq2_0::SCALE_AT);
}

impl<S: Simd> Tq<S> for Tq2 {
    fn act_block() -> usize {
        256
    }

    fn slot(e: usize) -> usize {
        let (byte, plane) = prep::tq2_0_position(e);
        prep::unpack_slot(byte, plane, S::W, 4)
    }

    #[inline(always)]
    unsafe fn block<const R: usize, const T: usize>(
        w: [*const u8; R],
        _n: usize,
        a: [*const i8; T],
        acc: &mut [[S::V; T]; R],
    ) {
        // One set of partial accumulators for the block's loads (see `Mac`).
        // SAFETY: the caller vouches for the features.
        let mut p = unsafe { p_start::<S, R, T>(acc) };
        let loads = Self::CODE_BYTES / S::W;
        // An opaque count is what keeps LLVM from unrolling the loop.
        let loads = if S::ROLLED_BLOCK { std::hint::black_box(loads) } else { loads };
        for c in 0..loads {
            // SAFETY: the caller's contract, which `load` and `dot_2bit` need.
            unsafe {
                let (x, ac) = load::<S, R, T>(w, a, c);
                dot_2bit::<S, R, T>(x, ac, &mut p);
            }
        }
        // SAFETY: as above.
        unsafe { p_end::<S, R, T>(&p, acc) };
    }

    /// The planes as [`dot_2bit_x4`] takes them: masked in place (one shift per load instead
    /// of three) where the ISA keeps the second set of partial sums in registers.
    #[inline(always)]
    unsafe fn row_block<const R: usize, const T: usize>(
        w: [*const u8; R],
        _n: usize,
        a: [*const i8; T],
        lo: &mut [[S::V; T]; R],
        hi: &mut [[S::V; T]; R],
    ) {
        // SAFETY: the caller vouches for the features.
        let (mut pl, mut ph) = unsafe { (p_start::<S, R, T>(lo), p_start::<S, R, T>(hi)) };
        for c in 0..Self::CODE_BYTES / S::W {
            // SAFETY: the caller's contract, which `load` and `dot_2bit_x4` need.
            unsafe {
                let (x, ac) = load::<S, R, T>(w, a, c);
                dot_2bit_x4::<S, R, T>(x, ac, &mut pl, &mut ph);
            }
        }
        // SAFETY: as above.
        unsafe {
            p_end::<S, R, T>(&pl, lo);
            p_end::<S, R, T>(&ph, hi);
        }
    }
}

/// Load `c` of a block's `QS_BYTES / W` of every row `w[r]`, and the activations of its
/// four planes (`4 W` bytes at `c * 4 W` of each token's `a[t]`). A function, not a
/// closure: a closure is compiled without the ISA's target features unless it is inlined.
///
/// # Safety
/// The CPU must have `S`'s features; every `w[r]` points at a whole block and every `a[t]` at
/// its 256 prepared bytes; `c < QS_BYTES / W`.
#[inline(always)]
unsafe fn load<S: Simd, const R: usize, const T: usize>(
    w: [*const u8; R],
    a: [*const i8; T],
    c: usize,
) -> ([S::V; R], [*const i8; T]) {
    let mut ac = a;
    // SAFETY: load `c` lies in the block's codes, and its planes' activations in the block's
    // prepared bytes; the caller vouches for the features.
    unsafe {
        let mut x = [S::zero(); R];
        for r in 0..R {
            x[r] = S::load(w[r].add(c * S::W));
        }
        for t in 0..T {
            ac[t] = a[t].add(c * 4 * S::W);
        }
        (x, ac)
    }
}

gemv_format!(Tq2: Simd, prepare_tq, tq);

impl Layout for Tq2 {
    /// Byte `32 h + j` holds elements `128 h + 32 l + j` at shift `2 l`: the dword at
    /// `32 h + 4 (i % 8)` gives quad `32 h + 8 l + i % 8` for each shift.
    #[inline(always)]
    unsafe fn expand<S: GemmSimd, O: QuadSink<S>>(i: usize, v: S::V, out: &mut O) {
        let q = 32 * (i / 8) + i % 8;
        // SAFETY: the caller's contract.
        unsafe { expand_planes::<S, O>(v, [q, q + 8, q + 16, q + 24], out) }
    }
}
