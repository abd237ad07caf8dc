//! The tiling: weight rows x tokens in register tiles, panel by panel, with the block loop
//! of each kind of format (block scales: [`tq`]; one scale per tensor: [`one_scale`]).

// Tiles index several per-row and per-token arrays in lockstep.
#![allow(clippy::needless_range_loop)]

use super::layout::{OneScale, Tq};
use super::prepare::Prepared;
use super::simd::{dot_2bit_x4, p_end, p_start, Simd, P};
use crate::kernel::mac::Mac;
use crate::kernel::MatRef;
use crate::kernel::OutTile;
use std::marker::PhantomData;
use std::ops::Range;

/// A kernel's work for one tile of `R` weight rows x `T` tokens.
pub(crate) trait Tiles {
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

/// Runs every (token, row) of `out`'s block in tiles of `R x T`, then, when `T` is above 2,
/// the leftover tokens in pairs in tiles of `R1 x 2`, then the last one in the single-token
/// tiles of `R1` rows (leftover rows one at a time), panel by panel. The leftovers' tiles
/// are chosen by their count because each shape wins where it is used: with `R` rows,
/// single-token leftovers of a batch of 2 or 3 took 1.25x the time of as many single-token
/// calls (AVX-512, 2560x2560, m = 2: 126 against 101 µs), and `R1 x 2` tiles for every
/// batch lost 5-15 % at m = 4-8 to the `2 x 4` tiles they replaced.
///
/// # Safety
/// The CPU must have the ISA's features.
#[inline(always)]
pub(crate) unsafe fn sweep<C: Tiles, const R: usize, const T: usize, const R1: usize>(c: &C, out: &mut OutTile) {
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
        while T > 2 && t + 2 <= tokens.end {
            // SAFETY: as above.
            unsafe { panel::<C, R1, 2>(c, out, p..end, t) };
            t += 2;
        }
        while t < tokens.end {
            // SAFETY: as above.
            unsafe { panel::<C, R1, 1>(c, out, p..end, t) };
            t += 1;
        }
        p = end;
    }
}

/// # Safety
/// The CPU must have the ISA's features; `rows` and tokens `t..t + T` lie in `out`'s block.
#[inline(always)]
pub(crate) unsafe fn panel<C: Tiles, const R: usize, const T: usize>(
    c: &C,
    out: &mut OutTile,
    rows: Range<usize>,
    t: usize,
) {
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
pub(crate) unsafe fn run<C: Tiles, const R1: usize, const RB: usize, const TB: usize>(c: &C, out: &mut OutTile) {
    // SAFETY: the caller vouches for the features.
    unsafe {
        if out.tokens().len() == 1 {
            sweep::<C, R1, 1, R1>(c, out)
        } else {
            sweep::<C, RB, TB, R1>(c, out)
        }
    }
}

/// How far ahead a tile prefetches its weights, in bytes (rounded down to whole tiles).
/// Measured at 32768x8192 TQ2_0 (DRAM-resident, 8.4 KB tiles): one tile ahead reaches
/// ~85% of the read bandwidth, two to four tiles ~95%.
pub(crate) const PREFETCH_BYTES: usize = 32 << 10;

/// The prefetch distance for tiles of `tile_bytes`: a whole number of tiles, so that each
/// row stream fetches the same rows' bytes of a later tile, at least one.
///
/// Why prefetch: a tile reads its `R` rows as `R` interleaved streams that each end after
/// one row, too short for the hardware prefetcher to follow from DRAM; fetching a later
/// tile's rows while this tile computes keeps the weight read sequential and ahead of the
/// loads. Into L2, not L1: prefetches into L1 hold L1 miss buffers the loads need, and
/// measured slower (62% of the read bandwidth against 85%). Batch tiles prefetch too: the
/// first token tile of a panel reads its rows from memory like a single-token tile (the
/// later ones find them in L2, where a prefetch costs a load slot). AVX-512, 6912x2560,
/// BITNET_B1_58: m = 2 took 198 µs with it and 260 without (m = 1: 155).
#[inline(always)]
pub(crate) fn prefetch_ahead(tile_bytes: usize) -> usize {
    tile_bytes * (PREFETCH_BYTES / tile_bytes).max(1)
}

/// Bytes per cache line: a prefetch fetches one.
pub(crate) const LINE: usize = 64;

/// The block-scaled tiles; `PB`: the activations have one scale per block
/// ([`Prepared::per_block`]); `U`: every block of the weight has the scale `d`
/// ([`MatRef::uniform_scale`], as a BitNet checkpoint converted to TQ1_0/TQ2_0 has), so no
/// block's scale is read: by per-token activations the int32 accumulators run along the
/// whole row, as BITNET_B1_58's do ([`Tq::row_block`]), one multiply by `d` ending it; by
/// per-block ones each block is scaled by the activation's scale alone (Zen 4, TQ2_0 at
/// 2560x2560, one token: 66-69 -> 59 µs on AVX-512), and the sum by `d` at the end.
pub(crate) struct TqCtx<'a, S: Simd, L: Tq<S>, const PB: bool, const U: bool> {
    w: &'a [u8],
    /// Blocks per row.
    blocks: usize,
    /// The weight's one block scale, with `U`.
    d: f32,
    act: &'a Prepared,
    _isa: std::marker::PhantomData<(S, L)>,
}

/// The most blocks per row the uniform-scale tiles take with per-token activation scales,
/// whose int32 lanes then sum a whole row: TQ1_0's digit identity (AVX-512) ends a row with
/// 256 times each lane's dot product of raw digits (at most 20 * 2 * 128 per block), which
/// stays in range for about 1,600 blocks; 1,024 (rows of 262,144 elements) keeps a margin.
const UNIFORM_MAX_BLOCKS: usize = 1024;

impl<S: Simd, L: Tq<S>, const PB: bool, const U: bool> Tiles for TqCtx<'_, S, L, PB, U> {
    #[inline(always)]
    unsafe fn tile<const R: usize, const T: usize>(&self, out: &mut OutTile, r0: usize, t0: usize) {
        let row_bytes = L::row_bytes(self.blocks * L::BLOCK);
        let step_bytes = L::PER_STEP * L::BLOCK_BYTES;
        let steps = self.blocks.div_ceil(L::PER_STEP);
        let act_block = L::act_block();
        // Bounds are checked here, once per tile; the block loop uses raw pointers. `bytes`
        // runs to the tensor's end, as a step's loads may read `OVERREAD` bytes past it.
        let bytes = &self.w[r0 * row_bytes..];
        assert!(bytes.len() >= R * row_bytes);
        // Where the tensor ends before the last row's `OVERREAD` bytes, that row is read from
        // a zero-padded copy (once per matmul: only the tile of the tensor's last row); a
        // copy of one step in the block loop cost its branch and spills (AVX-512 VBMI
        // TQ1_0: 2-3 % at 2560x2560).
        let padded = (L::OVERREAD > 0 && R * row_bytes + L::OVERREAD > bytes.len()).then(|| {
            let mut row = vec![0u8; row_bytes + L::OVERREAD];
            row[..row_bytes].copy_from_slice(&bytes[(R - 1) * row_bytes..R * row_bytes]);
            row
        });
        let mut rows: [*const u8; R] = std::array::from_fn(|r| bytes[r * row_bytes..].as_ptr());
        if let Some(row) = &padded {
            rows[R - 1] = row.as_ptr();
        }
        let act = self.act.tokens(t0..t0 + T);
        assert_eq!(self.act.stride(), steps * act_block);
        assert_eq!(self.act.blocks, steps);
        let seeds = self.act.token_seeds::<S>(t0..t0 + T);
        // The tile's tokens' scales: one per token, or with `PB` `ACT_SCALES` per block.
        let per_token = if PB { self.blocks * L::ACT_SCALES } else { 1 };
        let step_scales = L::PER_STEP * L::ACT_SCALES;
        let scales = &self.act.scales()[t0 * per_token..(t0 + T) * per_token];
        // A later tile's rows, a line past the block's start; the block loop fetches the
        // rest of them, every line of each step: prefetches `LINE` apart from the step's
        // start reach every line of contiguous steps. A step of TQ2_0 (66 bytes) or Q2_0 (4 x
        // 18) spans more than a line, and one prefetch per step left a line in 32 (TQ2_0)
        // to a demand miss from DRAM: decode of the 2B4T layer stack at 13 GB/s where the read
        // probe gave 26 (AMD Zen 4, one thread; 22 GB/s with every line fetched).
        let ahead = prefetch_ahead(R * row_bytes);
        let mut ahead_rows = [bytes.as_ptr(); R];
        for r in 0..R {
            ahead_rows[r] = bytes.as_ptr().wrapping_add(r * row_bytes + ahead + 64);
        }
        // SAFETY: every pointer below stays in `bytes` (R rows of `blocks` whole blocks, step
        // `b` holding `n` of them), `act` (T tokens of `steps` prepared steps), `seeds` (T
        // tokens of `steps` vectors) and `scales` (T tokens of `per_token`, step `b`'s `n *
        // ACT_SCALES` at `b * step_scales`), sliced with checks above; prefetches never
        // fault; the caller vouches for the features.
        unsafe {
            let mut f = [[S::fzero(); T]; R];
            // With `U`: int32 along the row from zero (the seeds join as one sum at the end),
            // in two sets of accumulators (see `Tq::row_block`).
            let (mut row_lo, mut row_hi) = ([[S::zero(); T]; R], [[S::zero(); T]; R]);
            for r in 0..R {
                S::prefetch_l2(bytes.as_ptr().wrapping_add(ahead + r * row_bytes));
            }
            for b in 0..steps {
                let n = L::PER_STEP.min(self.blocks - b * L::PER_STEP);
                let mut w = [bytes.as_ptr(); R];
                for r in 0..R {
                    w[r] = rows[r].add(b * step_bytes);
                    for l in 0..step_bytes.div_ceil(LINE) {
                        S::prefetch_l2(ahead_rows[r].wrapping_add(b * step_bytes + l * LINE));
                    }
                }
                let mut a = [act.as_ptr(); T];
                for t in 0..T {
                    a[t] = act.as_ptr().add(t * self.act.stride + b * act_block);
                }
                if U && !PB {
                    L::row_block::<R, T>(w, n, a, &mut row_lo, &mut row_hi);
                    continue;
                }
                let mut block_seeds = [S::zero(); T];
                for t in 0..T {
                    block_seeds[t] = self.act.seed::<S>(seeds, t, b);
                }
                let mut acc = [block_seeds; R];
                L::block::<R, T>(w, n, a, &mut acc);
                // With `PB`, each token's scales of this step, in their lanes.
                let a_scales: Option<[S::F; T]> = PB.then(|| {
                    std::array::from_fn(|t| L::act_scales(scales.as_ptr().add(t * per_token + b * step_scales), n))
                });
                match a_scales {
                    // Uniform weight scales: the activations' alone, the weight's at the end.
                    Some(a_scales) if U => {
                        for r in 0..R {
                            for t in 0..T {
                                f[r][t] = S::fmadd_lanes(acc[r][t], a_scales[t], f[r][t]);
                            }
                        }
                    }
                    _ => {
                        for r in 0..R {
                            L::scale_add::<T>(w[r], n, &acc[r], a_scales.as_ref(), &mut f[r]);
                        }
                    }
                }
            }
            for r in 0..R {
                for t in 0..T {
                    let v = if U && PB {
                        self.d * S::fsum(f[r][t])
                    } else if U {
                        let dot = L::row_dot::<T>(row_lo[r][t], row_hi[r][t]) + self.act.token_seed_sum(t0 + t);
                        // The reference's order for one scale: `a_scale * (d * dot)`.
                        scales[t] * (self.d * dot as f32)
                    } else if PB {
                        S::fsum(f[r][t])
                    } else {
                        scales[t] * S::fsum(f[r][t])
                    };
                    out.set(t0 + t, r0 + r, v);
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
    let blocks = w.cols / L::BLOCK;
    assert!(
        act.scale_block() * L::ACT_SCALES == L::BLOCK || !act.per_block(),
        "per-block activation scales of another size"
    );
    let uniform = w.uniform_scale.filter(|_| L::UNIFORM_ROWS && (act.per_block() || blocks <= UNIFORM_MAX_BLOCKS));
    let w = w.bytes;
    // SAFETY: the caller vouches for the features; tiles stay in `out`'s block.
    unsafe {
        match (act.per_block(), uniform) {
            (true, Some(d)) => {
                run::<_, R1, RB, TB>(&TqCtx::<S, L, true, true> { w, blocks, d, act, _isa: PhantomData }, out)
            }
            (true, None) => {
                run::<_, R1, RB, TB>(&TqCtx::<S, L, true, false> { w, blocks, d: 0.0, act, _isa: PhantomData }, out)
            }
            (false, Some(d)) => {
                run::<_, R1, RB, TB>(&TqCtx::<S, L, false, true> { w, blocks, d, act, _isa: PhantomData }, out)
            }
            (false, None) => {
                run::<_, R1, RB, TB>(&TqCtx::<S, L, false, false> { w, blocks, d: 0.0, act, _isa: PhantomData }, out)
            }
        }
    }
}

pub(crate) struct OneScaleCtx<'a, S: Simd> {
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
            // One prefetch per line and row. Single-token tiles take chunks in groups of one
            // cache line per row: one set of partial sums per group (at most 4 chunks, see
            // `Mac`). Batch tiles take one chunk at a time: their accumulators fill
            // the registers, and partial sums kept across chunks spill (qemu count, 4 x 2
            // dotprod tiles: 175 per 1,000 MACs against 161).
            let group = if T == 1 { (LINE / S::W).max(1) } else { 1 };
            let mut c0 = 0;
            while c0 < chunks {
                let c1 = chunks.min(c0 + group);
                if (c0 * S::W) % LINE == 0 {
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
                    let dot = S::hsum_planes(lo[r][t], hi[r][t]) as f32;
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
    assert!(w.format == L::FORMAT && !act.per_block(), "operands of another kernel");
    let scale = L::tensor_scale(w.bytes).expect("a format with one scale per tensor");
    let c = OneScaleCtx::<S> { w: w.bytes, row_bytes: w.cols / 4, scale, act, _isa: std::marker::PhantomData };
    // SAFETY: the caller vouches for the features; tiles stay in `out`'s block.
    unsafe { run::<_, R1, RB, TB>(&c, out) }
}

/// I2_S_R4's tiles. Rows come in groups of four that share one stream of `k` bytes, one
/// column per byte, row `4 g + j` in bit plane `3 - j`: one load gives `W` consecutive
/// columns of four rows, each row a plane of it, and the activations stay in their own
/// order. Tiles of whole groups load each chunk once and take the planes in place as
/// [`dot_2bit_x4`] does (plane 3 of `x >> 4` and plane 1 of `x` masked with 0x0C, so their
/// rows' dots are 4x and start from zero, the seed joining them at the end); other tiles
/// (a row range that starts inside a group, the rows left at a panel's end) shift each
/// row's plane down.
pub(crate) struct Rows4Ctx<'a, S: Simd> {
    w: &'a [u8],
    /// Columns: the bytes of a group's stream.
    k: usize,
    scale: f32,
    act: &'a Prepared,
    _isa: std::marker::PhantomData<S>,
}

impl<S: Simd> Tiles for Rows4Ctx<'_, S> {
    #[inline(always)]
    unsafe fn tile<const R: usize, const T: usize>(&self, out: &mut OutTile, r0: usize, t0: usize) {
        // SAFETY: the caller's contract.
        unsafe {
            if R.is_multiple_of(4) && r0.is_multiple_of(4) {
                self.rows::<R, T, true>(out, r0, t0)
            } else {
                self.rows::<R, T, false>(out, r0, t0)
            }
        }
    }
}

impl<S: Simd> Rows4Ctx<'_, S> {
    /// The tile of rows `r0..r0 + R` by tokens `t0..t0 + T`; `GROUPS`: whole groups of four
    /// (`R` and `r0` multiples of 4).
    ///
    /// # Safety
    /// As for [`Tiles::tile`].
    #[inline(always)]
    unsafe fn rows<const R: usize, const T: usize, const GROUPS: bool>(&self, out: &mut OutTile, r0: usize, t0: usize) {
        let k = self.k;
        // Each row's stream, bounds-checked here once per tile: row `r` is group `r / 4`.
        let streams: [&[u8]; R] = std::array::from_fn(|r| &self.w[(r0 + r) / 4 * k..][..k]);
        let act = self.act.tokens(t0..t0 + T);
        let chunks = k / S::W;
        assert!(k.is_multiple_of(S::W) && k <= self.act.stride, "whole chunks of the prepared activations");
        // A row's plane: 3 for the first of its group.
        let plane = |r: usize| 3 - (r0 + r) % 4;
        // Whole groups mask planes 3 and 1 in place (4x): those rows start from zero.
        let in_place = |r: usize| GROUPS && plane(r) % 2 == 1;
        let ahead = prefetch_ahead(R.div_ceil(4) * k);
        // SAFETY: loads stay in `streams` (`chunks` whole chunks of `k` bytes each), `act`
        // (T tokens of `stride >= k` bytes, asserted) and `seeds` (T tokens of one block);
        // prefetches never fault; the caller vouches for the features.
        unsafe {
            let seeds = self.act.token_seeds::<S>(t0..t0 + T);
            let mut seed = [S::zero(); T];
            for t in 0..T {
                seed[t] = self.act.seed::<S>(seeds, t, 0);
            }
            let mut acc = [[S::zero(); T]; R];
            for r in 0..R {
                if !in_place(r) {
                    acc[r] = seed;
                }
            }
            let (m03, m0c) = (S::splat8(0x03), S::splat8(0x0C));
            // As in the one-scale tiles: single-token tiles take a cache line of chunks per
            // set of partial sums (one dot per row and chunk: at most 4), batch tiles one,
            // whose one dot per row and token goes straight to int32 (`Mac::dot_once`).
            let group = if T == 1 { (LINE / S::W).max(1) } else { 1 };
            let mut c0 = 0;
            while c0 < chunks {
                let c1 = chunks.min(c0 + group);
                if (c0 * S::W) % LINE == 0 {
                    for r in (0..R).step_by(if GROUPS { 4 } else { 1 }) {
                        S::prefetch_l2(streams[r].as_ptr().wrapping_add(c0 * S::W + ahead));
                    }
                }
                let mut p = p_start::<S, R, T>(&acc);
                for c in c0..c1 {
                    let mut a = [act.as_ptr(); T];
                    for t in 0..T {
                        a[t] = act.as_ptr().add(t * self.act.stride + c * S::W);
                    }
                    let mut w = [S::zero(); R];
                    if GROUPS {
                        for g in (0..R).step_by(4) {
                            let x = S::load(streams[g].as_ptr().add(c * S::W));
                            let y = S::srl4(x);
                            w[g] = S::and(y, m0c);
                            w[g + 1] = S::and(y, m03);
                            w[g + 2] = S::and(x, m0c);
                            w[g + 3] = S::and(x, m03);
                        }
                    } else {
                        for r in 0..R {
                            w[r] = S::plane2(S::load(streams[r].as_ptr().add(c * S::W)), plane(r), m03);
                        }
                    }
                    for t in 0..T {
                        let av = S::load(a[t] as *const u8);
                        for r in 0..R {
                            if group == 1 {
                                acc[r][t] = S::M::dot_once(acc[r][t], w[r], av);
                            } else {
                                p[r][t] = S::M::dot(p[r][t], w[r], av);
                            }
                        }
                    }
                }
                if group > 1 {
                    p_end::<S, R, T>(&p, &mut acc);
                }
                c0 = c1;
            }
            let zero = S::zero();
            for r in 0..R {
                for t in 0..T {
                    let (lo, hi) = if in_place(r) { (seed[t], acc[r][t]) } else { (acc[r][t], zero) };
                    let dot = S::hsum_planes(lo, hi) as f32;
                    // The reference's order: one block, `a_scale * (d * dot)`.
                    out.set(t0 + t, r0 + r, self.act.scales()[t0 + t] * (self.scale * dot));
                }
            }
        }
    }
}

/// I2_S_R4 weights `w` by activations prepared with [`prepare_natural`](super::prepare)
/// (their own order): single-token tiles of eight partial-sum vectors, 8 rows (two groups)
/// where a partial is one vector, 4 rows (one group) where it is two (SIMD128's widening
/// products: with 8 rows V8 spilled them, 700 against 370 µs at 2560x2560, AMD Zen 3);
/// batch tiles of 4 rows x `TB` tokens.
///
/// # Safety
/// As for [`tq`], with `prepare_natural::<S, I2sR4>`.
#[inline(always)]
pub(crate) unsafe fn rows4<S: Simd, const TB: usize>(w: &MatRef, act: &Prepared, out: &mut OutTile) {
    assert!(w.format == crate::format::Format::I2SR4 && !act.per_block(), "operands of another kernel");
    let scale = crate::format::i2_s::scale(w.bytes);
    let c = Rows4Ctx::<S> { w: w.bytes, k: w.cols, scale, act, _isa: std::marker::PhantomData };
    // SAFETY: the caller vouches for the features; tiles stay in `out`'s block.
    unsafe {
        if out.tokens().len() == 1 {
            if size_of::<P<S>>() > size_of::<S::V>() {
                sweep::<_, 4, 1, 4>(&c, out)
            } else {
                sweep::<_, 8, 1, 8>(&c, out)
            }
        } else {
            sweep::<_, 4, TB, 4>(&c, out)
        }
    }
}
