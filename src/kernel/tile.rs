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

// Tiles index several per-row and per-token arrays in lockstep.
#![allow(clippy::needless_range_loop)]

use crate::format::{i2_s, tq1_0, Format};
use crate::kernel::isa::{check, Isa, Job, Product};
use crate::kernel::mac::Mac;
use crate::kernel::weights::{Bitnet, Codes, I2s128, I2s64, Scale, Tq1, Tq2, Q2};
use crate::kernel::{prep, ActI8, Compute, Geometry, MatRef, OutTile};
use std::any::TypeId;
use std::borrow::Cow;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::{Mutex, PoisonError};

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
    /// Adds the dot products of the 52 code bytes of one TQ1_0 block per row `w[r]` with
    /// the activations prepared by [`Simd::tq1_slot`] at `a[t]` (`TQ1_ACT_BLOCK` bytes) to
    /// `acc[r][t]`.
    unsafe fn tq1_block<const R: usize, const T: usize>(
        w: [*const u8; R],
        a: [*const i8; T],
        acc: &mut [[Self::V; T]; R],
    );
    unsafe fn fzero() -> Self::F;
    /// `f + float(acc) * d`.
    unsafe fn fmadd(acc: Self::V, d: f32, f: Self::F) -> Self::F;
    /// `f + float(acc) * s`, lane by lane.
    unsafe fn fmadd_lanes(acc: Self::V, s: Self::F, f: Self::F) -> Self::F;
    unsafe fn fsum(f: Self::F) -> f32;
    unsafe fn hsum(v: Self::V) -> i32;
    /// The f16 (little-endian, at `p`) of a TQ block scale, as f32.
    unsafe fn f16(p: *const u8) -> f32;
    /// Asks for the cache line at `p` in L2 ahead of its use (see [`prefetch_ahead`]). Never
    /// faults, so `p` may point anywhere.
    unsafe fn prefetch_l2(p: *const u8);

    /// Prepared activation bytes per TQ1_0 block (see [`Simd::tq1_slot`]).
    const TQ1_ACT_BLOCK: usize = TQ1_CODE_BYTES.div_ceil(Self::W) * Self::W * 5;
    /// Slot of TQ1_0 element `e` of a block in the activations [`Simd::tq1_block`] reads:
    /// by default the 52 code bytes are loaded `W` at a time and each load split into its
    /// five base-3 digits ([`tq1_slot`]).
    fn tq1_slot(e: usize) -> usize {
        tq1_slot(e, Self::W)
    }
}

/// Activations of every token, permuted into a kernel's unpack order (`stride` bytes per
/// token, zero in padding lanes), with the negated lane sums of every block (the
/// accumulators' starting values) and the scales.
pub(crate) struct Prepared {
    codes: Vec<i8>,
    stride: usize,
    /// `W / 4` int32 lanes per (token, block), one vector's worth: see [`prep::lane_sums`].
    seeds: Vec<i32>,
    blocks: usize,
    lanes: usize,
    /// One per token (I8_ABSMAX), or one per (token, block) (I8_BLOCK256, `per_block`).
    scales: Vec<f32>,
    per_block: bool,
}

impl Prepared {
    /// Places every token's codes in the unpack order of `layout` (read `vector` bytes at a
    /// time) and, given the ISA's [`Mac::lane`], sums them per block and lane (kernels that
    /// unpack weights to signed trits need no sums).
    fn new(a: &MatRef, vector: usize, lane: Option<fn(usize) -> usize>, layout: &Layout) -> Prepared {
        let act = ActI8::parse(a);
        let Layout { block, stride, period, period_slots, ref placement } = *layout;
        let placement: &prep::Placement = placement;
        let blocks = act.k.div_ceil(block);
        let mut codes = vec![0i8; act.m * stride];
        let lanes = vector / 4;
        let mut seeds = vec![0i32; if lane.is_some() { act.m * blocks * lanes } else { 0 }];
        for (t, out) in codes.chunks_exact_mut(stride).enumerate() {
            for (p, src) in act.row(t).chunks(period).enumerate() {
                placement.scatter(src, &mut out[p * period_slots..]);
            }
            if let Some(lane) = lane {
                let token_seeds = &mut seeds[t * blocks * lanes..(t + 1) * blocks * lanes];
                for (region, sums) in out.chunks_exact(stride / blocks).zip(token_seeds.chunks_exact_mut(lanes)) {
                    prep::lane_sums(region, sums, lane);
                }
            }
        }
        seeds.iter_mut().for_each(|s| *s = -*s);
        let per_block = a.format != Format::I8Absmax;
        assert!(!per_block || act.block == block, "activation scale blocks are the layout's blocks");
        Prepared { codes, stride, seeds, blocks, lanes, scales: act.scales, per_block }
    }

    /// The codes of `tokens` in the unpack order (`stride` bytes per token, zero in padding
    /// slots).
    pub(crate) fn tokens(&self, tokens: Range<usize>) -> &[i8] {
        &self.codes[tokens.start * self.stride..tokens.end * self.stride]
    }

    /// Bytes per token in [`Prepared::tokens`].
    pub(crate) fn stride(&self) -> usize {
        self.stride
    }

    /// The activation rows' scales: one per token, or with [`Prepared::per_block`] one per
    /// (token, block), token-major.
    pub(crate) fn scales(&self) -> &[f32] {
        &self.scales
    }

    /// Whether the activations have one scale per (token, block) (I8_BLOCK256).
    pub(crate) fn per_block(&self) -> bool {
        self.per_block
    }

    /// The accumulator seeds of `tokens`, `blocks` vectors of `S::W` bytes per token: bounds
    /// checked once per tile, for [`Prepared::seed`].
    fn token_seeds<S: Simd>(&self, tokens: Range<usize>) -> &[i32] {
        assert!(S::W == 4 * self.lanes, "seeds of another vector width");
        &self.seeds[tokens.start * self.blocks * self.lanes..tokens.end * self.blocks * self.lanes]
    }

    /// The seed of `block` for token `t` of `seeds` (from [`Prepared::token_seeds`]).
    ///
    /// # Safety
    /// `t` is below the tokens of `seeds` and `block` below the blocks of a row; the CPU
    /// must have `S`'s features.
    #[inline(always)]
    unsafe fn seed<S: Simd>(&self, seeds: &[i32], t: usize, block: usize) -> S::V {
        // SAFETY: vector (t, block) lies in `seeds`, as the caller guarantees; its features.
        unsafe { S::load(seeds.as_ptr().add((t * self.blocks + block) * self.lanes) as *const u8) }
    }
}

/// A partial accumulator of `S`'s multiply-accumulate.
type P<S> = <<S as Simd>::M as Mac<<S as Simd>::V>>::P;

/// A kernel's work for one tile of `R` weight rows x `T` tokens.
trait Tiles {
    /// # Safety
    /// The CPU must have the ISA's features; rows `r0..r0 + R` and tokens `t0..t0 + T` lie
    /// in `out`'s block.
    unsafe fn tile<const R: usize, const T: usize>(&self, out: &mut OutTile, r0: usize, t0: usize);
}

/// Weight rows per panel: a panel's rows (about 64 KiB at k = 4096) stay in L2 while every
/// token tile passes over them, and a token tile's prepared activations stay in L1 while
/// it walks the panel. Rows in the outer loop alone would stream all tokens' activations
/// from L2 for every row tile; tokens outside, all weights from L3 for every token tile.
pub(crate) const PANEL: usize = 64;

/// Runs every (token, row) of `out`'s block in tiles of `R x T`, then the leftover rows and
/// tokens one at a time, panel by panel.
///
/// # Safety
/// The CPU must have the ISA's features.
#[inline(always)]
unsafe fn sweep<C: Tiles, const R: usize, const T: usize>(c: &C, out: &mut OutTile) {
    let (rows, tokens) = (out.rows(), out.tokens());
    let mut p = rows.start;
    while p < rows.end {
        let end = (p + PANEL).min(rows.end);
        let mut t = tokens.start;
        while t + T <= tokens.end {
            // SAFETY: the tile lies in the block; the caller vouches for the features.
            unsafe { panel::<C, R, T>(c, out, p..end, t) };
            t += T;
        }
        while t < tokens.end {
            // SAFETY: as above.
            unsafe { panel::<C, R, 1>(c, out, p..end, t) };
            t += 1;
        }
        p = end;
    }
}

/// # Safety
/// The CPU must have the ISA's features; `rows` and tokens `t..t + T` lie in `out`'s block.
#[inline(always)]
unsafe fn panel<C: Tiles, const R: usize, const T: usize>(c: &C, out: &mut OutTile, rows: Range<usize>, t: usize) {
    let mut r = rows.start;
    while r + R <= rows.end {
        // SAFETY: rows `r..r + R` lie in `rows`; the caller vouches for the rest.
        unsafe { c.tile::<R, T>(out, r, t) };
        r += R;
    }
    while r < rows.end {
        // SAFETY: as above, one row.
        unsafe { c.tile::<1, T>(out, r, t) };
        r += 1;
    }
}

/// One GEMV with `R1` rows per tile for a single token; a batch uses `RB x TB` tiles, so
/// each unpacked weight vector serves `TB` tokens.
///
/// # Safety
/// The CPU must have the ISA's features.
#[inline(always)]
unsafe fn run<C: Tiles, const R1: usize, const RB: usize, const TB: usize>(c: &C, out: &mut OutTile) {
    // SAFETY: the caller vouches for the features.
    unsafe {
        if out.tokens().len() == 1 {
            sweep::<C, R1, 1>(c, out)
        } else {
            sweep::<C, RB, TB>(c, out)
        }
    }
}

/// Partial accumulators of `acc` for the weight loads that follow (see [`Mac`] for how many
/// one may take).
///
/// # Safety
/// The CPU must have `S`'s features.
#[inline(always)]
unsafe fn p_start<S: Simd, const R: usize, const T: usize>(acc: &[[S::V; T]; R]) -> [[P<S>; T]; R] {
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
unsafe fn p_end<S: Simd, const R: usize, const T: usize>(p: &[[P<S>; T]; R], acc: &mut [[S::V; T]; R]) {
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
unsafe fn dot_2bit<S: Simd, const R: usize, const T: usize>(x: [S::V; R], a: [*const i8; T], p: &mut [[P<S>; T]; R]) {
    // SAFETY: pointer reads stay in the ranges the caller vouches for, with its features.
    unsafe {
        let mask3 = S::splat8(3);
        for plane in 0..4 {
            let mut w = [S::zero(); R];
            for r in 0..R {
                w[r] = S::plane2(x[r], plane, mask3);
            }
            for t in 0..T {
                let av = S::load(a[t].add(plane * S::W) as *const u8);
                for r in 0..R {
                    p[r][t] = S::M::dot(p[r][t], w[r], av);
                }
            }
        }
    }
}

/// As [`dot_2bit`], with the planes left in place: plane 0 and 2 (of `x` and `x >> 4`) add
/// to `lo`, planes 1 and 3 as `4 * code` (masked with 0x0C, no shift) to `hi`, so the dot
/// product is `lo + hi / 4`. One shift per load instead of three; only BitNet's one scale
/// per row lets the division wait until the row's end. Products stay small enough for
/// `vpmaddubsw`: at most 12 * 127 * 2 per pair.
///
/// # Safety
/// As for [`dot_2bit`].
#[inline(always)]
unsafe fn dot_2bit_x4<S: Simd, const R: usize, const T: usize>(
    x: [S::V; R],
    a: [*const i8; T],
    lo: &mut [[P<S>; T]; R],
    hi: &mut [[P<S>; T]; R],
) {
    // SAFETY: pointer reads stay in the ranges the caller vouches for, with its features.
    unsafe {
        let (m03, m0c) = (S::splat8(0x03), S::splat8(0x0C));
        let mut y = [S::zero(); R];
        for r in 0..R {
            y[r] = S::srl4(x[r]);
        }
        for plane in 0..4 {
            let mut w = [S::zero(); R];
            for r in 0..R {
                let src = if plane < 2 { x[r] } else { y[r] };
                w[r] = S::and(src, if plane % 2 == 0 { m03 } else { m0c });
            }
            for t in 0..T {
                let av = S::load(a[t].add(plane * S::W) as *const u8);
                for r in 0..R {
                    if plane % 2 == 0 {
                        lo[r][t] = S::M::dot(lo[r][t], w[r], av);
                    } else {
                        hi[r][t] = S::M::dot(hi[r][t], w[r], av);
                    }
                }
            }
        }
    }
}

/// How far ahead a tile prefetches its weights, in bytes (rounded down to whole tiles).
/// Measured at 32768x8192 TQ2_0 (DRAM-resident, 8.4 KB tiles): one tile ahead reaches
/// ~85% of the read bandwidth, two to four tiles ~95%.
const PREFETCH_BYTES: usize = 32 << 10;

/// The prefetch distance for tiles of `tile_bytes`: a whole number of tiles, so that each
/// row stream fetches the same rows' bytes of a later tile, at least one.
///
/// Why prefetch: a tile reads its `R` rows as `R` interleaved streams that each end after
/// one row, too short for the hardware prefetcher to follow from DRAM; fetching a later
/// tile's rows while this tile computes keeps the weight read sequential and ahead of the
/// loads. Into L2, not L1: prefetches into L1 hold L1 miss buffers the loads need, and
/// measured slower (62% of the read bandwidth against 85%). Only single-token tiles
/// prefetch: a batch's token tiles pass over each panel of rows several times from L2, and
/// spend several times the compute per weight byte.
#[inline(always)]
fn prefetch_ahead(tile_bytes: usize) -> usize {
    tile_bytes * (PREFETCH_BYTES / tile_bytes).max(1)
}

/// Bytes per cache line: a prefetch fetches one.
const LINE: usize = 64;

/// A format with block scales (TQ1_0, TQ2_0, Q2_0) as the GEMV reads it on `S`: the block
/// loop takes steps of `PER_STEP` blocks, and per step and row adds the int32 dot products
/// to float sums scaled by the blocks' scales.
pub(crate) trait Tq<S: Simd>: Codes {
    /// Blocks per step: 1, or (Q2_0) the blocks one vector load holds.
    const PER_STEP: usize = 1;
    /// Offset of the f16 scale in a block.
    const SCALE_AT: usize = match Self::SCALE {
        Scale::Block(at) => at,
        Scale::Tensor(_) => panic!("a format with block scales"),
    };
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
    /// The CPU must have `S`'s features; every `w[r]` points at `n` whole blocks and every
    /// `a[t]` at `act_block()` prepared bytes.
    unsafe fn block<const R: usize, const T: usize>(
        w: [*const u8; R],
        n: usize,
        a: [*const i8; T],
        acc: &mut [[S::V; T]; R],
    );
    /// `f[t] += float(acc[t]) * scale` for the scale(s) of the step at `w` (`n` blocks),
    /// times token `t`'s scale of the block `a[t]` when the activations have one per block
    /// (`d * a[t]` first: the reference's order).
    ///
    /// # Safety
    /// The CPU must have `S`'s features; `w` points at `n` whole blocks.
    #[inline(always)]
    unsafe fn scale_add<const T: usize>(
        w: *const u8,
        _n: usize,
        acc: &[S::V; T],
        a: Option<&[f32; T]>,
        f: &mut [S::F; T],
    ) {
        // SAFETY: the block's f16 scale lies at `SCALE_AT`, as the caller guarantees; its
        // features.
        unsafe {
            let d = S::f16(w.add(Self::SCALE_AT));
            for t in 0..T {
                let d = a.map_or(d, |a| d * a[t]);
                f[t] = S::fmadd(acc[t], d, f[t]);
            }
        }
    }
}

/// Adds the dot products of the 2-bit codes `x[r]` (one load per row, four planes) with
/// the activations at `a[t]` to `acc[r][t]`, through one set of partial accumulators.
///
/// # Safety
/// The CPU must have `S`'s features; every `a[t]` has `4 W` readable bytes.
#[inline(always)]
unsafe fn dot_2bit_into<S: Simd, const R: usize, const T: usize>(
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
        for c in 0..Self::CODE_BYTES / S::W {
            let mut ac = a;
            // SAFETY: load `c` of `QS_BYTES / W` lies in the block's codes, and its four
            // planes' activations (`4 W` bytes at `c * 4 W`) in the block's 256 prepared
            // bytes; the caller vouches for the features.
            unsafe {
                let mut x = [S::zero(); R];
                for r in 0..R {
                    x[r] = S::load(w[r].add(c * S::W));
                }
                for t in 0..T {
                    ac[t] = a[t].add(c * 4 * S::W);
                }
                dot_2bit::<S, R, T>(x, ac, &mut p);
            }
        }
        // SAFETY: as above.
        unsafe { p_end::<S, R, T>(&p, acc) };
    }
}

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
}

/// Q2_0: one vector load holds `W / 16` blocks (16 code bytes each), whose int32 lanes
/// `4 i .. 4 i + 4` are block `i`'s (the dot products add bytes `4 l .. 4 l + 4` to lane
/// `l`), so one lane-wise FMA by the blocks' scales ends the step.
impl<S: Pieces> Tq<S> for Q2 {
    const PER_STEP: usize = S::W / 16;

    fn act_block() -> usize {
        4 * S::W
    }

    /// Byte `j` of block `i` holds elements `64 i + 4 j .. + 4` (shifts 0, 2, 4, 6) and is
    /// byte `16 i + j` of the load.
    fn slot(e: usize) -> usize {
        prep::unpack_slot(e / 4, e % 4, S::W, 4)
    }

    /// [`Tq::slot`] is BITNET_B1_58's de-interleave.
    fn placement() -> Cow<'static, prep::Placement> {
        Cow::Owned(prep::Placement::Planes4 { lanes: S::W })
    }

    #[inline(always)]
    unsafe fn block<const R: usize, const T: usize>(
        w: [*const u8; R],
        n: usize,
        a: [*const i8; T],
        acc: &mut [[S::V; T]; R],
    ) {
        // SAFETY: the `n` blocks' codes lie at `w[r] + CODE_AT`, `BLOCK_BYTES` apart, and the
        // step's `4 W` prepared bytes at `a[t]`, as the caller guarantees; its features.
        unsafe {
            let mut x = [S::zero(); R];
            for r in 0..R {
                x[r] = S::load_pieces(w[r].add(Self::CODE_AT), Self::BLOCK_BYTES, n);
            }
            dot_2bit_into::<S, R, T>(x, a, acc);
        }
    }

    /// Only with one activation scale per token: Q2_0 has no kernels for per-block ones.
    #[inline(always)]
    unsafe fn scale_add<const T: usize>(
        w: *const u8,
        n: usize,
        acc: &[S::V; T],
        a: Option<&[f32; T]>,
        f: &mut [S::F; T],
    ) {
        assert!(a.is_none(), "Q2_0 by per-block activation scales");
        // SAFETY: the `n` blocks' scales lie at `w + SCALE_AT`, `BLOCK_BYTES` apart, as the
        // caller guarantees; its features.
        unsafe {
            let s = S::f16_pieces(w.add(<Self as Tq<S>>::SCALE_AT), Self::BLOCK_BYTES, n);
            for t in 0..T {
                f[t] = S::fmadd_lanes(acc[t], s, f[t]);
            }
        }
    }
}

/// TQ1_0 code bytes per block (`qs` and `qh`, which are contiguous).
pub(crate) const TQ1_CODE_BYTES: usize = tq1_0::QS_BYTES + tq1_0::QH_BYTES;

/// Slot of TQ1_0 element `e` of a block when the 52 code bytes are loaded `w` at a time and
/// each load is split into its five base-3 digits.
pub(crate) fn tq1_slot(e: usize, w: usize) -> usize {
    let (byte, digit) = tq1_0::position(e);
    prep::unpack_slot(byte, digit, w, 5)
}

impl<S: Simd> Tq<S> for Tq1 {
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
}

/// The shapes of a kernel's prepared activations: see [`Prepared::new`].
struct Layout {
    block: usize,
    stride: usize,
    period: usize,
    period_slots: usize,
    placement: Cow<'static, prep::Placement>,
}

/// The prepared-activation layout of block-scaled format `L` for `S` and rows of `k`.
fn tq_layout<S: Simd, L: Tq<S>>(k: usize) -> Layout {
    let step = L::BLOCK * L::PER_STEP;
    let act_block = L::act_block();
    Layout {
        block: step,
        stride: k.div_ceil(step) * act_block,
        period: step,
        period_slots: act_block,
        placement: L::placement(),
    }
}

/// The runs of one TQ block's layout on `S`, computed once per (ISA, format) and kept.
/// Evaluating the layout per element costs several microseconds per call (a tenth of a
/// small GEMV); computing the runs per call still cost about 6,500 instructions (a few
/// percent of a 256 x 2048 GEMV on aarch64).
///
/// The cache is a `Vec`, not a `HashMap`: a hash table points into the middle of its
/// allocation, so valgrind reported the tables reachable only through it as "possibly
/// lost"; a `Vec` points at the start of its buffer and every table stays "still
/// reachable" (not a leak kind valgrind reports by default).
pub(crate) fn tq_runs<S: Simd, L: Tq<S>>() -> &'static prep::Placement {
    cached_runs::<S, L>(L::BLOCK * L::PER_STEP, L::slot)
}

/// [`prep::Placement::runs`] of `slot` over `period` elements, computed once per (ISA `S`,
/// format `L`) and kept (see [`tq_runs`] for why, and why in a `Vec`).
fn cached_runs<S: 'static, L: 'static>(period: usize, slot: impl Fn(usize) -> usize) -> &'static prep::Placement {
    static RUNS: Mutex<Vec<(TypeId, &'static prep::Placement)>> = Mutex::new(Vec::new());
    let mut runs = RUNS.lock().unwrap_or_else(PoisonError::into_inner);
    let key = TypeId::of::<(S, L)>();
    if let Some(&(_, placement)) = runs.iter().find(|(k, _)| *k == key) {
        return placement;
    }
    // Leaked once per (ISA, format) pair: a few dozen small tables at most, for the process.
    let placement: &'static prep::Placement = Box::leak(Box::new(prep::Placement::runs(period, slot)));
    runs.push((key, placement));
    placement
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

impl OneScale for Bitnet {
    const PERIOD: usize = 4;

    fn position(e: usize) -> (usize, usize) {
        (0, e)
    }

    /// A de-interleave of every 4 elements, faster than runs of one.
    fn placement<S: Simd>() -> Cow<'static, prep::Placement> {
        Cow::Owned(prep::Placement::Planes4 { lanes: S::W })
    }
}

impl OneScale for I2s128 {
    const PERIOD: usize = 128;

    fn position(e: usize) -> (usize, usize) {
        let (byte, shift) = i2_s::Packing::Blocks128.position(Self::PERIOD, e);
        (byte, shift as usize / 2)
    }
}

impl OneScale for I2s64 {
    const PERIOD: usize = 64;

    fn position(e: usize) -> (usize, usize) {
        let (byte, shift) = i2_s::Packing::Blocks64.position(Self::PERIOD, e);
        (byte, shift as usize / 2)
    }
}

/// Elements per period of [`OneScale::placement`] on `S`: whole loads of `W` bytes and
/// whole periods of the format.
fn one_scale_period<S: Simd, L: OneScale>() -> usize {
    let load = 4 * S::W;
    // Both are powers of two: the larger is their least common multiple.
    assert!(load.is_power_of_two() && L::PERIOD.is_power_of_two());
    load.max(L::PERIOD)
}

/// The prepared-activation layout of format `L` for `S` and rows of `k`.
fn one_scale_layout<S: Simd, L: OneScale>(k: usize) -> Layout {
    let w = S::W;
    let stride = (k / 4).div_ceil(w) * w * 4;
    let period = one_scale_period::<S, L>();
    Layout { block: k, stride, period, period_slots: period, placement: L::placement::<S>() }
}

/// Prepares I8_ABSMAX activations for format `L` on `S`, with the lane sums of `lane`
/// (`Some(S::M::lane)`; `None` for kernels that unpack weights to signed trits and need none).
pub(crate) fn prepare_one_scale<S: Simd, L: OneScale>(a: &MatRef, lane: Option<fn(usize) -> usize>) -> Prepared {
    Prepared::new(a, S::W, lane, &one_scale_layout::<S, L>(a.cols))
}

/// Prepares I8_ABSMAX activations for block-scaled format `L` on `S`.
pub(crate) fn prepare_tq<S: Simd, L: Tq<S>>(a: &MatRef) -> Prepared {
    Prepared::new(a, S::W, Some(S::M::lane), &tq_layout::<S, L>(a.cols))
}

/// The block-scaled tiles; `PB`: the activations have one scale per block
/// ([`Prepared::per_block`]).
struct TqCtx<'a, S: Simd, L: Tq<S>, const PB: bool> {
    w: &'a [u8],
    /// Blocks per row.
    blocks: usize,
    act: &'a Prepared,
    _isa: std::marker::PhantomData<(S, L)>,
}

impl<S: Simd, L: Tq<S>, const PB: bool> Tiles for TqCtx<'_, S, L, PB> {
    #[inline(always)]
    unsafe fn tile<const R: usize, const T: usize>(&self, out: &mut OutTile, r0: usize, t0: usize) {
        let row_bytes = L::row_bytes(self.blocks * L::BLOCK);
        let step_bytes = L::PER_STEP * L::BLOCK_BYTES;
        let steps = self.blocks.div_ceil(L::PER_STEP);
        let act_block = L::act_block();
        // Bounds are checked here, once per tile; the block loop uses raw pointers.
        let bytes = &self.w[r0 * row_bytes..(r0 + R) * row_bytes];
        let act = self.act.tokens(t0..t0 + T);
        assert_eq!(self.act.stride(), steps * act_block);
        assert_eq!(self.act.blocks, steps);
        let seeds = self.act.token_seeds::<S>(t0..t0 + T);
        // The tile's tokens' scales: one per token, or `blocks` per token with `PB`.
        let per_token = if PB { self.blocks } else { 1 };
        let scales = &self.act.scales()[t0 * per_token..(t0 + T) * per_token];
        // A later tile's rows, a line past the block's start (one prefetch per block and
        // row); the block loop fetches the rest of them.
        let ahead = prefetch_ahead(R * row_bytes);
        let mut ahead_rows = [bytes.as_ptr(); R];
        for r in 0..R {
            ahead_rows[r] = bytes.as_ptr().wrapping_add(r * row_bytes + ahead + 64);
        }
        // SAFETY: every pointer below stays in `bytes` (R rows of `blocks` whole blocks, step
        // `b` holding `n` of them), `act` (T tokens of `steps` prepared steps), `seeds` (T
        // tokens of `steps` vectors) and `scales` (T tokens of `per_token`), sliced with
        // checks above; prefetches never fault; the caller vouches for the features.
        unsafe {
            let mut f = [[S::fzero(); T]; R];
            for r in 0..R {
                if T == 1 {
                    S::prefetch_l2(bytes.as_ptr().wrapping_add(ahead + r * row_bytes));
                }
            }
            for b in 0..steps {
                let n = L::PER_STEP.min(self.blocks - b * L::PER_STEP);
                let mut w = [bytes.as_ptr(); R];
                for r in 0..R {
                    w[r] = bytes.as_ptr().add(r * row_bytes + b * step_bytes);
                    if T == 1 {
                        S::prefetch_l2(ahead_rows[r].wrapping_add(b * step_bytes));
                    }
                }
                let mut a = [act.as_ptr(); T];
                let mut block_seeds = [S::zero(); T];
                for t in 0..T {
                    a[t] = act.as_ptr().add(t * self.act.stride + b * act_block);
                    block_seeds[t] = self.act.seed::<S>(seeds, t, b);
                }
                let mut acc = [block_seeds; R];
                L::block::<R, T>(w, n, a, &mut acc);
                // With `PB`, each token's scale of this block (`PB` formats step one block).
                let a_scales: Option<[f32; T]> =
                    PB.then(|| std::array::from_fn(|t| *scales.get_unchecked(t * per_token + b)));
                for r in 0..R {
                    L::scale_add::<T>(w[r], n, &acc[r], a_scales.as_ref(), &mut f[r]);
                }
            }
            for r in 0..R {
                for t in 0..T {
                    let dot = S::fsum(f[r][t]);
                    out.set(t0 + t, r0 + r, if PB { dot } else { scales[t] * dot });
                }
            }
        }
    }
}

/// Block-scaled weights `w` by activations prepared with [`prepare_tq`], into `out`'s block.
///
/// # Safety
/// The CPU must have the features `S` is built on; `act` was prepared by
/// `prepare_tq::<S, L>` from an activation with `w.cols` columns and `out.m()` rows, and
/// `out` is `out.m() x w.rows` (what [`crate::kernel::Kernel::run`] checks).
#[inline(always)]
pub(crate) unsafe fn tq<S: Simd, L: Tq<S>, const R1: usize, const RB: usize, const TB: usize>(
    w: &MatRef,
    act: &Prepared,
    out: &mut OutTile,
) {
    let (w, blocks) = (w.bytes, w.cols / L::BLOCK);
    // SAFETY: the caller vouches for the features; tiles stay in `out`'s block.
    unsafe {
        if act.per_block() {
            let c = TqCtx::<S, L, true> { w, blocks, act, _isa: PhantomData };
            run::<_, R1, RB, TB>(&c, out)
        } else {
            let c = TqCtx::<S, L, false> { w, blocks, act, _isa: PhantomData };
            run::<_, R1, RB, TB>(&c, out)
        }
    }
}

struct OneScaleCtx<'a, S: Simd> {
    w: &'a [u8],
    /// Code bytes per row (`k / 4`).
    row_bytes: usize,
    scale: f32,
    act: &'a Prepared,
    _isa: std::marker::PhantomData<S>,
}

impl<S: Simd> Tiles for OneScaleCtx<'_, S> {
    #[inline(always)]
    unsafe fn tile<const R: usize, const T: usize>(&self, out: &mut OutTile, r0: usize, t0: usize) {
        let n = self.row_bytes;
        // Bounds are checked here, once per tile; the chunk loop uses raw pointers.
        let bytes = &self.w[r0 * n..(r0 + R) * n];
        let act = self.act.tokens(t0..t0 + T);
        let full = n / S::W;
        let tail = n - full * S::W;
        assert!((full + (tail > 0) as usize) * 4 * S::W <= self.act.stride);
        let ahead = prefetch_ahead(R * n);
        // SAFETY: loads stay in `bytes` (the tail through `load_partial`), in `act`
        // (asserted: each token's prepared stride covers every chunk) and in `seeds` (T
        // tokens of one block); prefetches never fault; the caller vouches for the features.
        unsafe {
            let seeds = self.act.token_seeds::<S>(t0..t0 + T);
            let mut row_seeds = [S::zero(); T];
            for t in 0..T {
                row_seeds[t] = self.act.seed::<S>(seeds, t, 0);
            }
            let mut lo = [row_seeds; R];
            let mut hi = [[S::zero(); T]; R];
            let chunks = full + (tail > 0) as usize;
            // Single-token tiles take chunks in groups of one cache line per row: one
            // prefetch per line, one set of partial sums per group (at most 4 chunks, see
            // `Mac`). Batch tiles take one chunk at a time: their accumulators fill
            // the registers, and partial sums kept across chunks spill (qemu count, 4 x 2
            // dotprod tiles: 175 per 1,000 MACs against 161).
            let group = if T == 1 { (LINE / S::W).max(1) } else { 1 };
            let mut c0 = 0;
            while c0 < chunks {
                let c1 = chunks.min(c0 + group);
                if T == 1 {
                    for r in 0..R {
                        S::prefetch_l2(bytes.as_ptr().wrapping_add(r * n + c0 * S::W + ahead));
                    }
                }
                let (mut pl, mut ph) = (p_start::<S, R, T>(&lo), p_start::<S, R, T>(&hi));
                if c0 + group <= full {
                    // A whole line of whole chunks: a constant count, unrolled.
                    for i in 0..group {
                        self.chunk::<R, T>(bytes, act, c0 + i, (full, tail), (&mut pl, &mut ph));
                    }
                } else {
                    for c in c0..c1 {
                        self.chunk::<R, T>(bytes, act, c, (full, tail), (&mut pl, &mut ph));
                    }
                }
                p_end::<S, R, T>(&pl, &mut lo);
                p_end::<S, R, T>(&ph, &mut hi);
                c0 = c1;
            }
            for r in 0..R {
                for t in 0..T {
                    // Exact: every product in `hi` is a multiple of 4.
                    let dot = (S::hsum(lo[r][t]) + (S::hsum(hi[r][t]) >> 2)) as f32;
                    // The reference's order: one block, `a_scale * (d * dot)`.
                    out.set(t0 + t, r0 + r, self.act.scales()[t0 + t] * (self.scale * dot));
                }
            }
        }
    }
}

impl<S: Simd> OneScaleCtx<'_, S> {
    /// Adds chunk `c` (`W` bytes of each row; `full` whole chunks, then `tail` bytes) of
    /// the tile's rows `bytes` times its activations in `act` to the partial sums `lo`, `hi`.
    ///
    /// # Safety
    /// The CPU must have `S`'s features; `bytes` holds `R` rows and `act` `T` tokens' prepared
    /// codes covering chunk `c < full + (tail > 0)`.
    #[inline(always)]
    #[allow(clippy::type_complexity)]
    unsafe fn chunk<const R: usize, const T: usize>(
        &self,
        bytes: &[u8],
        act: &[i8],
        c: usize,
        (full, tail): (usize, usize),
        (lo, hi): (&mut [[P<S>; T]; R], &mut [[P<S>; T]; R]),
    ) {
        let n = self.row_bytes;
        // SAFETY: the chunk lies in every row (the tail through `load_partial`) and in every
        // token's prepared codes, as the caller guarantees; its features.
        unsafe {
            let mut x = [S::zero(); R];
            for r in 0..R {
                let p = bytes.as_ptr().add(r * n + c * S::W);
                // Lanes past the row's end load as code 0 and meet zero activations.
                x[r] = if c < full { S::load(p) } else { S::load_partial(p, tail) };
            }
            let mut a = [act.as_ptr(); T];
            for t in 0..T {
                a[t] = act.as_ptr().add(t * self.act.stride + c * 4 * S::W);
            }
            dot_2bit_x4::<S, R, T>(x, a, lo, hi);
        }
    }
}

/// Weights `w` of a format with one scale per tensor by activations prepared with
/// [`prepare_one_scale`] for that format.
///
/// # Safety
/// As for [`tq`], with `prepare_one_scale::<S, L>`.
#[inline(always)]
pub(crate) unsafe fn one_scale<S: Simd, L: OneScale, const R1: usize, const RB: usize, const TB: usize>(
    w: &MatRef,
    act: &Prepared,
    out: &mut OutTile,
) {
    assert_eq!(w.format, L::FORMAT);
    let scale = L::tensor_scale(w.bytes).expect("a format with one scale per tensor");
    let c = OneScaleCtx::<S> { w: w.bytes, row_bytes: w.cols / 4, scale, act, _isa: std::marker::PhantomData };
    // SAFETY: the caller vouches for the features; tiles stay in `out`'s block.
    unsafe { run::<_, R1, RB, TB>(&c, out) }
}

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

/// The block-scaled formats' GEMV (Q2_0 on ISAs with [`Pieces`]).
macro_rules! gemv_tq {
    ($($marker:ty: $isa:path),*) => {$(
        impl<S: $isa> GemvFormat<S> for $marker {
            fn prepare(a: &MatRef) -> Prepared {
                prepare_tq::<S, $marker>(a)
            }

            #[inline(always)]
            unsafe fn run<const R1: usize, const RB: usize, const TB: usize>(
                w: &MatRef,
                act: &Prepared,
                out: &mut OutTile,
            ) {
                // SAFETY: the caller's contract is `tq`'s.
                unsafe { tq::<S, $marker, R1, RB, TB>(w, act, out) }
            }
        }
    )*};
}
gemv_tq!(Tq1: Simd, Tq2: Simd, Q2: Pieces);

/// The GEMV of the formats with one scale per tensor.
macro_rules! gemv_one_scale {
    ($($marker:ty),*) => {$(
        impl<S: Simd> GemvFormat<S> for $marker {
            fn prepare(a: &MatRef) -> Prepared {
                prepare_one_scale::<S, $marker>(a, Some(S::M::lane))
            }

            #[inline(always)]
            unsafe fn run<const R1: usize, const RB: usize, const TB: usize>(
                w: &MatRef,
                act: &Prepared,
                out: &mut OutTile,
            ) {
                // SAFETY: the caller's contract is `one_scale`'s.
                unsafe { one_scale::<S, $marker, R1, RB, TB>(w, act, out) }
            }
        }
    )*};
}
gemv_one_scale!(Bitnet, I2s128, I2s64);

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
/// rows per single-token tile, `RB x TB` per batch tile (`BRB x BTB` for the formats with
/// one scale per tensor, whose split planes need twice the accumulators on some ISAs).
pub(crate) fn kernels<
    S: Simd + Isa,
    const R1: usize,
    const RB: usize,
    const TB: usize,
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
                Format::Tq1_0 => Kernel::new(name, format, act, 1, &Gemv::<S, Tq1, R1, RB, TB>::NEW),
                Format::Tq2_0 => Kernel::new(name, format, act, 1, &Gemv::<S, Tq2, R1, RB, TB>::NEW),
                Format::BitnetB158 => Kernel::new(name, format, act, 1, &Gemv::<S, Bitnet, R1, BRB, BTB>::NEW),
                Format::I2S => Kernel::new(name, format, act, 1, &Gemv::<S, I2s128, R1, BRB, BTB>::NEW),
                Format::I2S64 => Kernel::new(name, format, act, 1, &Gemv::<S, I2s64, R1, BRB, BTB>::NEW),
                _ => panic!("no GEMV for {format}"),
            });
        }
    }
    all
}

/// The Q2_0 GEMV entry `name` of ISA `S` (an ISA with [`Pieces`]), with the tiles of
/// [`kernels`]' block-scaled formats.
pub(crate) fn q2_0_kernel<S: Pieces + Isa, const R1: usize, const RB: usize, const TB: usize>(
    name: &'static std::ffi::CStr,
) -> crate::kernel::Kernel {
    crate::kernel::Kernel::new(name, Format::Q2_0, Format::I8Absmax, 1, &Gemv::<S, Q2, R1, RB, TB>::NEW)
}
