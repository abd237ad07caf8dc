//! The loop nest over panels and token blocks, and the scaling of each register tile's sums.

// Tiles index several per-row and per-token arrays in lockstep.
#![allow(clippy::needless_range_loop)]

use super::layout::Layout;
use super::micro::MicroTile;
use super::pack::{aligned, pack_panel, sized, Packed, Scratch, GROUP};
use super::simd::GemmSimd;
use crate::kernel::isa::Job;
use crate::kernel::weights::Scale;
use crate::kernel::{MatRef, OutTile};
use std::marker::PhantomData;
use std::ops::Range;

/// One call's shared state for the tiles of a panel.
pub(crate) struct Ctx<'a> {
    act: &'a Packed,
    panel: &'a [u8],
    scales: &'a [f32],
    /// Rows per panel.
    p: usize,
    /// Elements per weight scale (`scales` has `p` per weight block).
    w_block: usize,
    /// Rows of this panel (lane 0 of its first vector is `rows.start`).
    rows: Range<usize>,
    /// `Some(d)`: one scale for the whole tensor, int32 along the row.
    scale: Option<f32>,
}

impl Ctx<'_> {
    /// Runs the packed token block that starts at token `t0` (of `T` tokens, the last block's
    /// padding included) against the panel with the micro-tile `K`, writing the tokens that
    /// lie in `out`'s block.
    ///
    /// # Safety
    /// The CPU must have `K`'s features.
    #[inline(always)]
    unsafe fn tile<S: GemmSimd, K: MicroTile<S>, L: Layout, const RV: usize, const T: usize>(
        &self,
        out: &mut OutTile,
        t0: usize,
    ) {
        let Packed { k, kg, m, pad, per_block, .. } = *self.act;
        let groups = kg / GROUP;
        let w_step = 4 * self.p;
        // Tokens with the padding of the last block (it repeats that block's last token).
        let mp = m.next_multiple_of(pad);
        // Bounds are checked here, once per tile; the inner loop uses raw pointers.
        assert!(RV * S::LANES == self.p && self.panel.len() >= 4 * groups * w_step, "tile outside the panel");
        assert!(
            t0 + T <= mp && t0.is_multiple_of(self.act.t) && (T == self.act.t || t0 + T == mp),
            "not a packed block"
        );
        let act = self.act.block_codes(t0, T);
        let w = self.panel.as_ptr();
        // The sums of the tile, in `K`'s lane order.
        let mut f = match self.scale {
            Some(d) => {
                assert!(!per_block, "one scale per tensor meets one scale per token");
                let seeds: &[i32; T] = self.act.row_seeds[t0..t0 + T].try_into().expect("a seed per token");
                // SAFETY: `K`'s features (the caller's promise); the panel holds `4 groups`
                // quads of `w_step` bytes and `act` `groups * 16` bytes per token and the
                // codes' slack (checked above, and by `block_codes`).
                unsafe {
                    let mut acc = [[S::zero(); T]; RV];
                    for t in 0..T {
                        let seed = K::seed(seeds, t);
                        for v in 0..RV {
                            acc[v][t] = seed;
                        }
                    }
                    K::micro::<RV, T>(w, act.as_ptr(), groups, &mut acc);
                    // The reference's `d * dot`, rounded once: a fused multiply-add onto -0
                    // adds nothing to any product, +0 included.
                    // (`d` from memory: splat before the loop, it took a register the
                    // accumulators need, AVX-VNNI's 2 x 6 spilled.)
                    let (d, z) = (S::fsplat(std::hint::black_box(d)), S::fsplat(-0.0));
                    let mut f = [[z; T]; RV];
                    for v in 0..RV {
                        for t in 0..T {
                            f[v][t] = S::fmadd_lanes(acc[v][t], d, z);
                        }
                    }
                    f
                }
            }
            // A format with one scale per tensor always has `Some` (not compiled for it).
            None if !matches!(L::SCALE, Scale::Block(_)) => unreachable!("{} has a tensor scale", L::FORMAT),
            None => {
                // Blocks of the accumulators: the weight's, or the activation's finer scale
                // blocks (I8_BLOCK32 with Q2_0: `sub` of them per weight block).
                let block = self.act.block;
                let blocks = k / block;
                let sub = self.w_block / block;
                // Weight block of activation block `b`: `b >> shift` (a division per block
                // otherwise).
                let shift = sub.trailing_zeros();
                assert!(
                    self.w_block == sub * block && sub.is_power_of_two(),
                    "activation blocks split the weight's blocks in a power of two"
                );
                assert!(self.scales.len() >= blocks / sub * self.p, "panel scales too short");
                assert!(k.is_multiple_of(self.w_block) && kg == k, "rows are whole blocks");
                let block_groups = block / GROUP;
                // Per-block activation scales: each block's weight scales times the token's
                // block scale (`d * a_scale[block]`, the reference's order); otherwise the
                // token's scale multiplies at the end.
                let a_scales = &self.act.scales[if per_block { t0 * blocks..(t0 + T) * blocks } else { 0..0 }];
                let seeds = self.act.tile_seeds(t0, T);
                assert!(seeds.len() == blocks * T, "seeds per activation block");
                let sums = BlockSums { w, a: act.as_ptr(), seeds, a_scales: per_block.then_some(a_scales), blocks };
                // SAFETY: as above; block `b < blocks` spans groups `b * block_groups..(b + 1)
                // * block_groups` of the panel and of `act`, and its weight block's `p` scales
                // lie at `(b >> shift) p = b / sub * p` (asserted).
                unsafe {
                    // The weight's own short blocks (Q2_0's 64 elements, by I8_ABSMAX): groups
                    // per block and shift are constants, which the micro-tile's loop unrolls
                    // by (NEON i8mm: 3 % fewer instructions; a copy for TQ's 256-element
                    // blocks gained under 1 % and cost 0.2 MB of code).
                    if L::BLOCK <= 4 * GROUP && block == L::BLOCK {
                        self.block_sums::<S, K, RV, T>(&sums, L::BLOCK / GROUP, 0)
                    } else {
                        self.block_sums::<S, K, RV, T>(&sums, block_groups, shift)
                    }
                }
            }
        };
        // SAFETY: `K`'s features.
        unsafe { K::shared_order(&mut f) };
        // Token by token, the panel's rows as one run (a block not aligned to the packing
        // computes tokens it does not own; the panel's last vectors may lie past its rows).
        const { assert!(RV * S::LANES <= 64, "a panel of at most 64 rows") };
        let mut run = [0f32; 64];
        for t in 0..T {
            let token = t0 + t;
            if !out.tokens().contains(&token) {
                continue;
            }
            // Without per-block activation scales, the token's scale last: `a_scale * sum`.
            let a_scale = (!per_block).then(|| self.act.scales[token]);
            for v in 0..RV {
                // SAFETY: `S`'s features; `LANES` floats at `v LANES < 64` in `run`.
                unsafe {
                    let x = match a_scale {
                        Some(a) => S::fmul(f[v][t], S::fsplat(a)),
                        None => f[v][t],
                    };
                    S::fstore(run[v * S::LANES..].as_mut_ptr(), x)
                };
            }
            let run = &run[..RV * S::LANES];
            if self.rows.len() == RV * S::LANES {
                // A run of constant length: vector copies, not a `memcpy` call.
                out.set_run(token, self.rows.start, run);
            } else {
                out.set_run(token, self.rows.start, &run[..self.rows.len()]);
            }
        }
    }
}

/// A register tile's operands for [`Ctx::block_sums`].
struct BlockSums<'a, const T: usize> {
    /// The panel, and the token block's activations.
    w: *const u8,
    a: *const u8,
    /// `T` seeds per activation block.
    seeds: &'a [i32],
    /// Per-block activation scales, `[T][blocks]`.
    a_scales: Option<&'a [f32]>,
    blocks: usize,
}

impl Ctx<'_> {
    /// The float sums of a register tile with per-block scales, in `K`'s lane order: block by
    /// block, `block_groups` groups each, the accumulators from the block's seeds, scaled by
    /// the weight scales of block `b >> shift` (times the block's activation scales).
    ///
    /// # Safety
    /// The CPU must have `K`'s features; `o.w` and `o.a` must hold `blocks * block_groups`
    /// groups of the panel and of the token block (`o.a` and the codes' slack after them);
    /// the panel's scales `blocks >> shift` blocks.
    #[inline(always)]
    unsafe fn block_sums<S: GemmSimd, K: MicroTile<S>, const RV: usize, const T: usize>(
        &self,
        o: &BlockSums<T>,
        block_groups: usize,
        shift: u32,
    ) -> [[S::F; T]; RV] {
        let w_step = 4 * self.p;
        // SAFETY: the caller's contract.
        unsafe {
            // The float sums stay in memory: the accumulators fill the registers, and LLVM's
            // own spilling of the sums takes more instructions per block (NEON 4 x 5: about
            // 112 against 83; the x86 full tiles' block loops shrink too).
            let mut sums = [[S::fzero(); T]; RV];
            let f = std::hint::black_box(&mut sums);
            // Block by block, through the panel's and the activations' groups.
            let (mut wb, mut ab) = (o.w, o.a);
            for (b, seeds) in o.seeds.chunks_exact(T).enumerate() {
                let seeds: &[i32; T] = seeds.try_into().expect("a seed per token");
                let mut acc = [[S::zero(); T]; RV];
                for t in 0..T {
                    let seed = K::seed(seeds, t);
                    for v in 0..RV {
                        acc[v][t] = seed;
                    }
                }
                K::micro::<RV, T>(wb, ab, block_groups, &mut acc);
                (wb, ab) = (wb.wrapping_add(block_groups * 4 * w_step), ab.wrapping_add(block_groups * GROUP * T));
                let a: Option<[f32; T]> = o.a_scales.map(|a| std::array::from_fn(|t| a[t * o.blocks + b]));
                for v in 0..RV {
                    let s = S::fload(self.scales.as_ptr().add((b >> shift) * self.p + v * S::LANES));
                    for t in 0..T {
                        let s = K::block_scale(s, a.as_ref(), t);
                        f[v][t] = S::fmadd_lanes(acc[v][t], s, f[v][t]);
                    }
                }
            }
            *f
        }
    }
}

/// A panel's register tiles, to run as their own function (an [`crate::kernel::isa::Isa::enter`] job): inlined
/// with the panel packer, the packer's constants held registers the accumulators need
/// (AVX-VNNI's 2 x 6 block spilled three of them: 1.7x the time).
struct TilesJob<'a, 'o, S, K, L, const RV: usize, const T: usize> {
    ctx: &'a Ctx<'a>,
    out: &'a mut OutTile<'o>,
    isa: PhantomData<super::Types<S, K, L>>,
}

impl<S: GemmSimd, K: MicroTile<S>, L: Layout, const RV: usize, const T: usize> Job
    for TilesJob<'_, '_, S, K, L, RV, T>
{
    type Out = ();

    /// The packed token blocks that hold `out`'s tokens.
    #[inline(always)]
    unsafe fn run(self) {
        let (ctx, out, a) = (self.ctx, self.out, self.ctx.act);
        let tokens = out.tokens();
        let mut t0 = tokens.start / T * T;
        while t0 < tokens.end {
            // The last block with its padding tokens.
            let tn = T.min(a.m.next_multiple_of(a.pad) - t0);
            // Const token counts for the last, shorter block; only those below `T` (`const`
            // conditions: the compiler leaves the others out of each kernel: the wasm modules
            // 3-4 % smaller).
            macro_rules! blocks {
                ($($n:literal)*) => {
                    if tn == T {
                        ctx.tile::<S, K, L, RV, T>(out, t0)
                    }
                    $(else if const { T > $n } && tn == $n {
                        ctx.tile::<S, K, L, RV, $n>(out, t0)
                    })*
                    else {
                        unreachable!("a token block of {tn} tokens, at most {T}")
                    }
                };
            }
            // SAFETY: `K`'s features (the trait's contract).
            unsafe { blocks!(1 2 3 4 5 6 7) }
            t0 += tn;
        }
    }
}

/// The GEMM of one weight format over the block of `out` with the micro-tile `K`: panels
/// of `RV * LANES` rows, the packed token blocks of `T` (at most 8) that cover `out`'s
/// tokens.
///
/// # Safety
/// The CPU must have `K`'s features; operands checked by `Kernel::run_prepared`, and `a`
/// packed by `K` with token blocks of `T`.
#[inline(always)]
pub(crate) unsafe fn gemm<S: GemmSimd, K: MicroTile<S>, L: Layout, const RV: usize, const T: usize>(
    w: &MatRef,
    a: &Packed,
    out: &mut OutTile,
) {
    const { assert!(T >= 1 && T <= 8) };
    assert!(w.format == L::FORMAT && a.k == w.cols && a.t == T && a.m == out.m(), "operands of another kernel");
    let p = RV * S::LANES;
    // One scale for the tensor: int32 along the whole row (exact for BitNet and I2_S; for
    // a tensor of equal block scales the per-block path's result up to float rounding, see
    // `Tensor::uniform_block_scale`).
    // Not with per-block activation scales: every block is then scaled on its own.
    let uniform = if a.per_block { None } else { w.uniform_scale };
    let scale = L::tensor_scale(w.bytes).or(uniform);
    let mut s = Scratch::take();
    let panel = aligned(&mut s.panel, a.kg * p);
    let scales = sized(&mut s.scales, a.k / L::BLOCK * p);
    let rows = out.rows();
    let blocks = 0..w.cols.div_ceil(L::BLOCK);
    for r0 in rows.clone().step_by(p) {
        let prows = r0..(r0 + p).min(rows.end);
        // SAFETY: `K`'s features, which include `S`'s, as the caller guarantees; the panel
        // holds `kg / 4` quads (a multiple of 4) of `p` rows.
        unsafe {
            pack_panel::<S, K, L>(w, prows.clone(), blocks.clone(), p, panel, scale.is_none().then_some(&mut *scales));
        };
        let ctx = Ctx { act: a, panel, scales, p, w_block: L::BLOCK, rows: prows, scale };
        // SAFETY: `K`'s features, as the caller guarantees.
        unsafe { K::enter(TilesJob::<S, K, L, RV, T> { ctx: &ctx, out: &mut *out, isa: PhantomData }) };
    }
    s.put();
}
