//! The vector operations an ISA supplies to the GEMV ([`Simd`], [`Pieces`]) and the 2-bit
//! dot products every format's block is built from.

use crate::kernel::mac::Mac;
use crate::kernel::weights::{tq1_act_block, tq1_slot};

/// Vector operations of one ISA. `V` holds bytes or int32 lanes, `F` the f32 lanes of the
/// same width, `M` its multiply-accumulate, whose partial accumulators take the planes of
/// one weight load.
///
/// # Safety
/// Every method needs the CPU features of its ISA (callers run inside the ISA's
/// `#[target_feature]` entry point, after checking the CPU); the pointer methods need `W`
/// readable bytes at the pointer (or `len` for `load_partial`, 2 for `f16`).
pub(crate) trait Simd: 'static {
    /// Bytes per vector.
    const W: usize;
    type V: Copy;
    type F: Copy;
    /// The multiply-accumulate (see [`Mac`] for how many dots a partial accumulator takes).
    type M: Mac<Self::V>;
    /// Whether [`dot_2bit_x4`] masks the odd 2-bit planes in place into a second set of
    /// partial sums (one shift per load) or shifts every plane into one set, as
    /// [`dot_2bit`] (three): in place needs twice the partial sums, which suits an ISA
    /// whose compiler keeps them in registers.
    const PLANES_IN_PLACE: bool = true;
    /// Whether a TQ2_0 block's loads stay a loop that the compiler is kept from unrolling:
    /// for an engine that, given the unrolled block, loads everything first and spills it
    /// (V8, the relaxed SIMD128 build).
    const ROLLED_BLOCK: bool = false;

    unsafe fn zero() -> Self::V;
    unsafe fn load(p: *const u8) -> Self::V;
    /// Loads `len < W` bytes and zeroes the other lanes, reading nothing past `p + len`.
    unsafe fn load_partial(p: *const u8, len: usize) -> Self::V;
    unsafe fn splat8(x: u8) -> Self::V;
    /// The 2-bit codes at bit shift `2 * plane` of every byte of `x`.
    unsafe fn plane2(x: Self::V, plane: usize, mask3: Self::V) -> Self::V;
    unsafe fn and(a: Self::V, b: Self::V) -> Self::V;
    /// Shifts right by 4 bits, in lanes of 8 or 16 bits: only the low 4 bits of each
    /// result byte are used (see [`dot_2bit_x4`]), and they are the same either way.
    unsafe fn srl4(x: Self::V) -> Self::V;
    /// Bytes past a TQ1_0 block that [`Simd::tq1_block`] and [`Simd::tq1_row_block`] may
    /// read ([`Tq::OVERREAD`](super::Tq::OVERREAD)): by default none.
    const TQ1_OVERREAD: usize = 0;
    /// Adds the dot products of the 52 code bytes of one TQ1_0 block per row `w[r]` (a whole
    /// block and `TQ1_OVERREAD` readable bytes after it) with the activations prepared by
    /// [`Simd::tq1_slot`] at `a[t]` (`TQ1_ACT_BLOCK` bytes) to `acc[r][t]`.
    unsafe fn tq1_block<const R: usize, const T: usize>(
        w: [*const u8; R],
        a: [*const i8; T],
        acc: &mut [[Self::V; T]; R],
    );
    /// As [`Simd::tq1_block`] for a weight of one scale, into accumulators that run along
    /// the whole row from zero ([`Tq::row_block`](super::Tq::row_block)), whose dot product
    /// [`Simd::tq1_row_dot`] gives at the row's end. By default the block's dot products go
    /// to `lo`.
    #[inline(always)]
    unsafe fn tq1_row_block<const R: usize, const T: usize>(
        w: [*const u8; R],
        a: [*const i8; T],
        lo: &mut [[Self::V; T]; R],
        _hi: &mut [[Self::V; T]; R],
    ) {
        // SAFETY: the same contract.
        unsafe { Self::tq1_block::<R, T>(w, a, lo) }
    }
    /// The dot product of a row's accumulators from [`Simd::tq1_row_block`] in a tile of
    /// `T` tokens (whose accumulators' form may depend on `T`); by default
    /// [`Simd::hsum_planes`].
    #[inline(always)]
    unsafe fn tq1_row_dot<const T: usize>(lo: Self::V, hi: Self::V) -> i32 {
        // SAFETY: the same contract.
        unsafe { Self::hsum_planes(lo, hi) }
    }
    unsafe fn fzero() -> Self::F;
    unsafe fn fsplat(x: f32) -> Self::F;
    /// `a * b`, lane by lane.
    unsafe fn fmul(a: Self::F, b: Self::F) -> Self::F;
    /// `f + float(acc) * s`, lane by lane.
    unsafe fn fmadd_lanes(acc: Self::V, s: Self::F, f: Self::F) -> Self::F;
    unsafe fn fsum(f: Self::F) -> f32;
    /// The sum of `lo`'s int32 lanes and a quarter of `hi`'s, whose lanes are multiples of
    /// 4 (the dots of the planes [`dot_2bit_x4`] masks in place), so the quarter is exact:
    /// one horizontal sum for both.
    unsafe fn hsum_planes(lo: Self::V, hi: Self::V) -> i32;
    /// The f16 (little-endian, at `p`) of a TQ block scale, as f32.
    unsafe fn f16(p: *const u8) -> f32;
    /// Asks for the cache line at `p` in L2 ahead of its use (see [`prefetch_ahead`]). Never
    /// faults, so `p` may point anywhere.
    unsafe fn prefetch_l2(p: *const u8);

    /// Prepared activation bytes per TQ1_0 block (see [`Simd::tq1_slot`]).
    const TQ1_ACT_BLOCK: usize = tq1_act_block(Self::W);
    /// Slot of TQ1_0 element `e` of a block in the activations [`Simd::tq1_block`] reads:
    /// by default the 52 code bytes are loaded `W` at a time and each load split into its
    /// five base-3 digits ([`tq1_slot`]).
    fn tq1_slot(e: usize) -> usize {
        tq1_slot(e, Self::W)
    }
}

/// A partial accumulator of `S`'s multiply-accumulate.
pub(crate) type P<S> = <<S as Simd>::M as Mac<<S as Simd>::V>>::P;

/// Vectors gathered from 16-byte pieces at a stride: Q2_0's blocks (16 code bytes after an
/// f16 scale, 18 bytes apart), `W / 16` of them per vector.
///
/// # Safety
/// Every method needs the CPU features of its ISA.
pub(crate) trait Pieces: Simd {
    /// The 16 bytes at `p + i * stride` in bytes `16 i .. 16 i + 16`, for `i < n <= W / 16`;
    /// zero past them.
    ///
    /// # Safety
    /// The CPU must have the ISA's features; each of the `n` pieces is readable.
    unsafe fn load_pieces(p: *const u8, stride: usize, n: usize) -> Self::V;
    /// f32 lanes `4 i .. 4 i + 4` the f16 at `p + i * stride`, for `i < n <= W / 16`; zero
    /// past them.
    ///
    /// # Safety
    /// The CPU must have the ISA's features; each of the `n` f16 is readable.
    unsafe fn f16_pieces(p: *const u8, stride: usize, n: usize) -> Self::F;
    /// f32 lanes `2 i` and `2 i + 1` the f32 `p[i]`, for `i < 2 n` (`n <= W / 16`): the
    /// activation scales of `n` blocks' 32-element halves (I8_BLOCK32), spread over the
    /// lanes whose dot products hold each half ([`crate::kernel::weights::Q2`]); zero past them.
    ///
    /// # Safety
    /// The CPU must have the ISA's features; `2 n` f32 are readable at `p`.
    unsafe fn f32_halves(p: *const f32, n: usize) -> Self::F;
}

/// Partial accumulators of `acc` for the weight loads that follow (see [`Mac`] for how many
/// one may take).
///
/// # Safety
/// The CPU must have `S`'s features.
#[inline(always)]
pub(crate) unsafe fn p_start<S: Simd, const R: usize, const T: usize>(acc: &[[S::V; T]; R]) -> [[P<S>; T]; R] {
    // A partial takes up to 16 dots of codes <= 3 (one TQ block), or 8 of codes <= 12.
    const { assert!(<S::M as Mac<S::V>>::GROUPS >= 4, "partial accumulators too narrow for a TQ block") };
    // SAFETY: register operations; the caller vouches for the features.
    unsafe {
        let mut p = [[S::M::start(S::zero()); T]; R];
        for r in 0..R {
            for t in 0..T {
                p[r][t] = S::M::start(acc[r][t]);
            }
        }
        p
    }
}

/// Folds the partial accumulators `p` back into the `acc` they were started on.
///
/// # Safety
/// The CPU must have `S`'s features.
#[inline(always)]
pub(crate) unsafe fn p_end<S: Simd, const R: usize, const T: usize>(p: &[[P<S>; T]; R], acc: &mut [[S::V; T]; R]) {
    for r in 0..R {
        for t in 0..T {
            // SAFETY: register operations; the caller vouches for the features.
            acc[r][t] = unsafe { S::M::end(p[r][t], acc[r][t]) };
        }
    }
}

/// Adds the dot products of 2-bit codes (one load `x[r]` per row, `W` bytes, four planes)
/// with the activations at `a[t]` (`4 W` bytes, one vector per plane) to `p[r][t]`.
///
/// # Safety
/// The CPU must have `S`'s features; every `a[t]` has `4 W` readable bytes.
#[inline(always)]
pub(crate) unsafe fn dot_2bit<S: Simd, const R: usize, const T: usize>(
    x: [S::V; R],
    a: [*const i8; T],
    p: &mut [[P<S>; T]; R],
) {
    // SAFETY: pointer reads stay in the ranges the caller vouches for, with its features.
    unsafe {
        let mask3 = S::splat8(3);
        plane_dot::<S, R, T, 0, false>(x, a, p, mask3);
        plane_dot::<S, R, T, 1, false>(x, a, p, mask3);
        plane_dot::<S, R, T, 2, false>(x, a, p, mask3);
        plane_dot::<S, R, T, 3, false>(x, a, p, mask3);
    }
}

/// Plane `PLANE` (a constant: for wasm LLVM left a loop over planes rolled, and V8 turns
/// each shift by a run-time count into three more instructions) of the codes `src` into
/// `p`: the codes are `src[r] & mask` for `MASKED` ([`dot_2bit_x4`]), else plane `PLANE` of
/// `src[r]` ([`dot_2bit`], `mask` being 3).
///
/// # Safety
/// As for [`dot_2bit`].
#[inline(always)]
unsafe fn plane_dot<S: Simd, const R: usize, const T: usize, const PLANE: usize, const MASKED: bool>(
    src: [S::V; R],
    a: [*const i8; T],
    p: &mut [[P<S>; T]; R],
    mask: S::V,
) {
    // SAFETY: pointer reads stay in the ranges the caller vouches for, with its features.
    unsafe {
        let mut w = [S::zero(); R];
        for r in 0..R {
            w[r] = if MASKED { S::and(src[r], mask) } else { S::plane2(src[r], PLANE, mask) };
        }
        for t in 0..T {
            let av = S::load(a[t].add(PLANE * S::W) as *const u8);
            for r in 0..R {
                p[r][t] = S::M::dot(p[r][t], w[r], av);
            }
        }
    }
}

/// As [`dot_2bit`], with the planes left in place: plane 0 and 2 (of `x` and `x >> 4`) add
/// to `lo`, planes 1 and 3 as `4 * code` (masked with 0x0C, no shift) to `hi`, so the dot
/// product is `lo + hi / 4`. One shift per load instead of three; only BitNet's one scale
/// per row lets the division wait until the row's end. Products stay small enough for
/// `vpmaddubsw`: at most 12 * 127 * 2 per pair. Without [`Simd::PLANES_IN_PLACE`] this is
/// [`dot_2bit`] into `lo`, and `hi` is left as it is.
///
/// # Safety
/// As for [`dot_2bit`].
#[inline(always)]
pub(crate) unsafe fn dot_2bit_x4<S: Simd, const R: usize, const T: usize>(
    x: [S::V; R],
    a: [*const i8; T],
    lo: &mut [[P<S>; T]; R],
    hi: &mut [[P<S>; T]; R],
) {
    if !S::PLANES_IN_PLACE {
        // SAFETY: the same contract.
        return unsafe { dot_2bit::<S, R, T>(x, a, lo) };
    }
    // SAFETY: pointer reads stay in the ranges the caller vouches for, with its features.
    unsafe {
        let (m03, m0c) = (S::splat8(0x03), S::splat8(0x0C));
        let mut y = [S::zero(); R];
        for r in 0..R {
            y[r] = S::srl4(x[r]);
        }
        plane_dot::<S, R, T, 0, true>(x, a, lo, m03);
        plane_dot::<S, R, T, 1, true>(x, a, hi, m0c);
        plane_dot::<S, R, T, 2, true>(y, a, lo, m03);
        plane_dot::<S, R, T, 3, true>(y, a, hi, m0c);
    }
}

/// Adds the dot products of the 2-bit codes `x[r]` (one load per row, four planes) with
/// the activations at `a[t]` to `acc[r][t]`, through one set of partial accumulators.
///
/// # Safety
/// The CPU must have `S`'s features; every `a[t]` has `4 W` readable bytes.
#[inline(always)]
pub(crate) unsafe fn dot_2bit_into<S: Simd, const R: usize, const T: usize>(
    x: [S::V; R],
    a: [*const i8; T],
    acc: &mut [[S::V; T]; R],
) {
    // SAFETY: the caller's contract.
    unsafe {
        let mut p = p_start::<S, R, T>(acc);
        dot_2bit::<S, R, T>(x, a, &mut p);
        p_end::<S, R, T>(&p, acc);
    }
}
