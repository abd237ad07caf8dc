//! The one SIMD kernel skeleton: activation preparation, the tiling over (weight rows x
//! tokens), the per-block loop with its scale handling, and the 2-bit unpack. An ISA
//! (`kernel/arch/<arch>/<isa>.rs`) supplies only its vector operations through [`Simd`].
//!
//! Everything here is `#[inline(always)]` and generic, so that it is compiled inside the
//! ISA's `#[target_feature]` entry point, with that ISA's instructions.
//!
//! Arithmetic: weight codes stay biased in {0, 1, 2} (a corrupt 3 counts as +2), so
//! `sum a*t = sum a*code - sum a`. Each block accumulator starts from `-sum a` per lane
//! (the activations that meet that lane), so every lane holds the exact trit dot product
//! of its own elements and the float scaling below rounds nothing but real terms. Per TQ
//! block, the int32 accumulator is converted and multiplied by the block scale into a
//! float accumulator; one horizontal reduction per (row, token) ends the tile, times the
//! token's scale (I8_ABSMAX). I8_BLOCK256 activations have a scale per TQ block: the
//! block's weight scale is multiplied by it first (`d * a_scale[block]`, the reference's
//! order) and the tile ends with the reduction alone. BitNet has
//! one scale per tensor, so its accumulator stays int32 over the whole row, which also
//! lets its odd 2-bit planes skip their shift (see [`dot_2bit_x4`]).
//!
//! Batches (m > 1) run tiles of several tokens, so each unpacked weight vector feeds
//! several `vpdpbusd`/`vpmaddubsw`, over panels of rows that keep the working set in cache.
//!
//! Files: [`simd`] (the vector operations an ISA supplies and the 2-bit dot products built
//! on them), [`prepare`] (activation preparation), [`layout`] (what the GEMV needs of a
//! weight format; each format implements it in `kernel/weights/`), [`loops`] (the tiling),
//! and here the kernel type and its registration.

mod layout;
mod loops;
pub(crate) mod prepare;
mod simd;

pub(crate) use layout::{OneScale, Tq};
pub(crate) use loops::{one_scale, rows4, tq, LINE, PANEL};
pub(crate) use prepare::{prepare_natural, prepare_one_scale, prepare_tq, Prepared};
pub(crate) use simd::{dot_2bit, dot_2bit_into, dot_2bit_x4, p_end, p_start, Pieces, Simd};

use crate::format::Format;
use crate::kernel::isa::{check, Isa, Job, Product};
use crate::kernel::weights::{Bitnet, I2s128, I2s64, I2sR4, Tq1, Tq2, Q2};
use crate::kernel::{Compute, Geometry, MatRef, OutTile};
use std::marker::PhantomData;

/// A weight format as the GEMV runs it on `S`: its activation preparation and its tiles.
pub(crate) trait GemvFormat<S: Simd>: 'static {
    /// Prepares I8_ABSMAX activations for this format on `S`.
    fn prepare(a: &MatRef) -> Prepared;

    /// The GEMV of weights `w` by activations prepared with [`GemvFormat::prepare`].
    ///
    /// # Safety
    /// The CPU must have the features `S` is built on; `act` was prepared by
    /// `Self::prepare` from an activation with `w.cols` columns and `out.m()` rows, and
    /// `out` is `out.m() x w.rows` (what [`crate::kernel::Kernel::run`] checks).
    unsafe fn run<const R1: usize, const RB: usize, const TB: usize>(w: &MatRef, act: &Prepared, out: &mut OutTile);
}

/// Implements [`GemvFormat`] for weight marker `$marker` on every ISA with `$isa`, through
/// its activation preparation `$prepare` and its tile loops `$run` (`tq` or `one_scale`).
macro_rules! gemv_format {
    ($marker:ty: $isa:path, $prepare:ident, $run:ident) => {
        impl<S: $isa> $crate::kernel::tile::GemvFormat<S> for $marker {
            fn prepare(a: &$crate::kernel::MatRef) -> $crate::kernel::tile::Prepared {
                $crate::kernel::tile::$prepare::<S, $marker>(a)
            }

            #[inline(always)]
            unsafe fn run<const R1: usize, const RB: usize, const TB: usize>(
                w: &$crate::kernel::MatRef,
                act: &$crate::kernel::tile::Prepared,
                out: &mut $crate::kernel::OutTile,
            ) {
                // SAFETY: the caller's contract is that of the tile loops.
                unsafe { $crate::kernel::tile::$run::<S, $marker, R1, RB, TB>(w, act, out) }
            }
        }
    };
}
pub(crate) use gemv_format;

/// The GEMV kernel of format `L` on ISA `S`: `R1` rows per single-token tile, `RB x TB`
/// per batch tile.
pub(crate) struct Gemv<S, L, const R1: usize, const RB: usize, const TB: usize>(PhantomData<fn() -> (S, L)>);

impl<S, L, const R1: usize, const RB: usize, const TB: usize> Gemv<S, L, R1, RB, TB> {
    pub(crate) const NEW: Self = Gemv(PhantomData);
}

/// [`GemvFormat::prepare`] as a [`Job`].
struct PrepareJob<'a, S, L>(&'a MatRef<'a>, PhantomData<(S, L)>);

impl<S: Simd, L: GemvFormat<S>> Job for PrepareJob<'_, S, L> {
    type Out = Prepared;

    #[inline(always)]
    unsafe fn run(self) -> Prepared {
        L::prepare(self.0)
    }
}

impl<S: Simd, L: GemvFormat<S>, const R1: usize, const RB: usize, const TB: usize> Product for Gemv<S, L, R1, RB, TB> {
    type Act = Prepared;

    #[inline(always)]
    unsafe fn product(w: &MatRef, act: &Prepared, out: &mut OutTile) {
        // SAFETY: the caller has `S`'s features and checked the operands.
        unsafe { L::run::<R1, RB, TB>(w, act, out) }
    }
}

impl<S: Simd + Isa, L: GemvFormat<S>, const R1: usize, const RB: usize, const TB: usize> Compute
    for Gemv<S, L, R1, RB, TB>
{
    type Act = Prepared;
    const REQUIRES: &'static str = S::FEATURES;
    // Row blocks of whole panels keep each thread's panel walk intact; token blocks of
    // whole batch tiles keep the batch tiles full.
    const GEOMETRY: Geometry = Geometry { rows: PANEL, tokens: TB };

    fn available() -> bool {
        S::available()
    }

    fn prepare(&self, a: &MatRef) -> Prepared {
        check::<S>();
        // SAFETY: the CPU has the features (checked above).
        unsafe { S::enter(PrepareJob::<S, L>(a, PhantomData)) }
    }

    fn run(&self, w: &MatRef, _a: &MatRef, act: &Prepared, out: &mut OutTile) {
        check::<S>();
        // SAFETY: the CPU has the features (checked above); `Kernel::run_prepared` checked
        // the shapes and that `act` is this kernel's own preparation.
        unsafe { S::run::<Self>(w, act, out) }
    }
}

/// The GEMV entries `name` of ISA `S` for `formats` by I8_ABSMAX, and by their accurate
/// activation format (`Format::accurate_activation`: I8_BLOCK256 for TQ1_0 and TQ2_0): `R1`
/// rows per single-token tile, `RB x TB` per batch tile (TQ1_0, whose digits are longer
/// chains of operations per load, `TQ1_R1` and `TQ1_RB x TB`; `BR1` and `BRB x BTB` for
/// the formats with one scale per tensor, whose planes need other registers: twice the
/// partial sums where they stay in place, fewer where they are shifted, see
/// [`Simd::PLANES_IN_PLACE`]).
pub(crate) fn kernels<
    S: Simd + Isa,
    const R1: usize,
    const TQ1_R1: usize,
    const TQ1_RB: usize,
    const RB: usize,
    const TB: usize,
    const BR1: usize,
    const BRB: usize,
    const BTB: usize,
>(
    name: &'static std::ffi::CStr,
    formats: &[Format],
) -> Vec<crate::kernel::Kernel> {
    use crate::kernel::Kernel;
    let mut all = Vec::new();
    for &format in formats {
        let acts = [Some(Format::I8Absmax), format.accurate_activation()];
        for act in acts.into_iter().flatten() {
            all.push(match format {
                Format::Tq1_0 => Kernel::new(name, format, act, 1, &Gemv::<S, Tq1, TQ1_R1, TQ1_RB, TB>::NEW),
                Format::Tq2_0 => Kernel::new(name, format, act, 1, &Gemv::<S, Tq2, R1, RB, TB>::NEW),
                Format::BitnetB158 => Kernel::new(name, format, act, 1, &Gemv::<S, Bitnet, BR1, BRB, BTB>::NEW),
                Format::I2S => Kernel::new(name, format, act, 1, &Gemv::<S, I2s128, BR1, BRB, BTB>::NEW),
                Format::I2S64 => Kernel::new(name, format, act, 1, &Gemv::<S, I2s64, BR1, BRB, BTB>::NEW),
                Format::I2SR4 => Kernel::new(name, format, act, 1, &Gemv::<S, I2sR4, BR1, BRB, BTB>::NEW),
                _ => panic!("no GEMV for {format}"),
            });
        }
    }
    all
}

/// The GEMV entries `name` of ISA `S` for every format: [`kernels`] of those that need no
/// more than [`Simd`], and Q2_0 (which needs [`Pieces`]) with the block-scaled formats'
/// batch tiles and the one-scale formats' single-token rows `BR1`, by I8_ABSMAX and, where
/// `S`'s multiply-accumulate keeps each 32-element half of a Q2_0 block in lanes of its own
/// (every ISA but NEON's `smlal`, whose int16 lanes add bytes `j` and `j + 8`), by
/// I8_BLOCK32.
pub(crate) fn every_format<
    S: Pieces + Isa,
    const R1: usize,
    const TQ1_R1: usize,
    const TQ1_RB: usize,
    const RB: usize,
    const TB: usize,
    const BR1: usize,
    const BRB: usize,
    const BTB: usize,
>(
    name: &'static std::ffi::CStr,
) -> Vec<crate::kernel::Kernel> {
    let simd = [Format::Tq1_0, Format::Tq2_0, Format::BitnetB158, Format::I2S, Format::I2S64, Format::I2SR4];
    let mut all = kernels::<S, R1, TQ1_R1, TQ1_RB, RB, TB, BR1, BRB, BTB>(name, &simd);
    // Q2_0's steps are one load per row, as the one-scale formats' chunks: their row count.
    let q2 = &Gemv::<S, Q2, BR1, RB, TB>::NEW;
    all.push(crate::kernel::Kernel::new(name, Format::Q2_0, Format::I8Absmax, 1, q2));
    if q2_halves_apart::<S>() {
        all.push(crate::kernel::Kernel::new(name, Format::Q2_0, Format::I8Block32, 1, q2));
    }
    all
}

/// Whether `S`'s dot products add each 32-element half of a Q2_0 block (code bytes `0..8`
/// and `8..16` of its 16-byte piece) to lanes of its own, two per half: what the
/// I8_BLOCK32 GEMV's lane-wise scales need (see [`crate::kernel::weights::Q2`]).
fn q2_halves_apart<S: Simd>() -> bool {
    use crate::kernel::mac::Mac;
    (0..16).all(|byte| S::M::lane(byte) / 2 == byte / 8)
}
