//! The register-blocked micro-kernel and the loop nest over panels and token blocks.

// Tiles index several per-row and per-token arrays in lockstep.
#![allow(clippy::needless_range_loop)]

use super::layout::Layout;
use super::pack::{aligned, pack_panel, sized, Packed, Scratch, GROUP};
use super::simd::GemmSimd;
use crate::kernel::mac::QuadMac;
use crate::kernel::{MatRef, OutTile};
use std::ops::Range;

/// A partial accumulator of `S`'s [`QuadMac`].
type Q<S> = <<S as GemmSimd>::Quad as QuadMac<<S as crate::kernel::tile::Simd>::V, <S as GemmSimd>::A>>::Q;

/// Adds quad `L` of every group in `groups` of the panel at `w` (`RV` vectors per quad, the
/// quads one after another) times the token block at `a` (`16 T` bytes per group) to
/// `acc[v][t]`: the inner loop. Both operands are read front to back.
///
/// # Safety
/// `w` must be valid for `4 * groups.end * RV` vectors, `a` for `groups.end * 16 * T`
/// bytes; the CPU must have `S`'s features.
#[inline(always)]
pub(crate) unsafe fn micro<S: GemmSimd, const RV: usize, const T: usize>(
    w: *const u8,
    a: *const u8,
    groups: Range<usize>,
    acc: &mut [[S::V; T]; RV],
) {
    /// Quad `L` of a group: the `RV` weight vectors at `*wq` (moved past them), `RV x T`
    /// dot products.
    ///
    /// # Safety
    /// As for [`micro`].
    #[inline(always)]
    unsafe fn quad<S: GemmSimd, const RV: usize, const T: usize, const L: i32>(
        p: &mut [[Q<S>; T]; RV],
        wq: &mut *const u8,
        av: &[S::A; T],
    ) {
        // SAFETY: `RV` vectors at `wq` lie in the panel, as the caller guarantees.
        unsafe {
            let wv = S::load_next::<RV>(wq);
            for t in 0..T {
                for v in 0..RV {
                    p[v][t] = S::Quad::q_dot::<L>(p[v][t], wv[v], av[t]);
                }
            }
        }
    }
    let quad_bytes = RV * 4 * S::LANES;
    // SAFETY: every address is inside the spans the caller guarantees (group `g <
    // groups.end`, quad `4 g + L`, vector `v < RV`, token `t < T`); `S`'s features.
    unsafe {
        let mut g0 = groups.start;
        while g0 < groups.end {
            let end = g0 + S::Quad::Q_GROUPS.min(groups.end - g0);
            let mut p = [[S::Quad::q_start(S::zero()); T]; RV];
            for v in 0..RV {
                for t in 0..T {
                    p[v][t] = S::Quad::q_start(acc[v][t]);
                }
            }
            let (mut wq, mut ag) = (w.add(4 * g0 * quad_bytes), a.add(g0 * GROUP * T));
            for _ in g0..end {
                let av = S::a_load_next::<T>(&mut ag);
                quad::<S, RV, T, 0>(&mut p, &mut wq, &av);
                quad::<S, RV, T, 1>(&mut p, &mut wq, &av);
                quad::<S, RV, T, 2>(&mut p, &mut wq, &av);
                quad::<S, RV, T, 3>(&mut p, &mut wq, &av);
            }
            for v in 0..RV {
                for t in 0..T {
                    acc[v][t] = S::Quad::q_end(p[v][t], acc[v][t]);
                }
            }
            g0 = end;
        }
    }
}

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
    /// Runs the packed token block that starts at token `t0` (of `T` tokens) against the
    /// panel, writing the tokens that lie in `out`'s block.
    ///
    /// # Safety
    /// The CPU must have `S`'s features.
    #[inline(always)]
    unsafe fn tile<S: GemmSimd, const RV: usize, const T: usize>(&self, out: &mut OutTile, t0: usize) {
        let Packed { k, kg, m, .. } = *self.act;
        let groups = kg / GROUP;
        let w_step = 4 * self.p;
        // Bounds are checked here, once per tile; the inner loop uses raw pointers.
        assert!(RV * S::LANES == self.p && self.panel.len() >= 4 * groups * w_step, "tile outside the panel");
        assert!(t0 + T <= m && t0.is_multiple_of(self.act.t) && (T == self.act.t || t0 + T == m), "not a packed block");
        let act = &self.act.codes()[t0 * kg..(t0 + T) * kg];
        let w = self.panel.as_ptr();
        let mut lanes = [0f32; 16];
        match self.scale {
            Some(d) => {
                let seeds = &self.act.row_seeds[t0..t0 + T];
                // SAFETY: `S`'s features (the caller's promise); the panel holds `4 groups`
                // quads of `w_step` bytes and `act` `groups * 16 * T` bytes (checked above).
                let acc = unsafe {
                    let mut acc = [[S::zero(); T]; RV];
                    for v in 0..RV {
                        for t in 0..T {
                            acc[v][t] = S::splat32(seeds[t]);
                        }
                    }
                    micro::<S, RV, T>(w, act.as_ptr(), 0..groups, &mut acc);
                    acc
                };
                let mut dots = [0i32; 16];
                for t in 0..T {
                    let a_scale = self.act.scales[t0 + t];
                    for v in 0..RV {
                        // SAFETY: `dots` has room for 16 >= LANES int32; `S`'s features.
                        unsafe { S::store(dots.as_mut_ptr() as *mut u8, acc[v][t]) };
                        // The reference's order: one block, `a_scale * (d * dot)`.
                        for (l, dot) in dots[..S::LANES].iter().enumerate() {
                            lanes[l] = a_scale * (d * *dot as f32);
                        }
                        self.write::<S>(out, v, t0 + t, &lanes);
                    }
                }
            }
            None => {
                // Blocks of the accumulators: the weight's, or the activation's finer scale
                // blocks (I8_BLOCK32 with Q2_0: `sub` of them per weight block).
                let block = self.act.block;
                let blocks = k / block;
                let sub = self.w_block / block;
                assert!(self.w_block == sub * block, "activation blocks split the weight's blocks");
                assert!(self.scales.len() >= blocks / sub * self.p, "panel scales too short");
                assert!(k.is_multiple_of(self.w_block) && kg == k, "rows are whole blocks");
                let seeds = &self.act.block_seeds[t0 * blocks..(t0 + T) * blocks];
                let block_groups = block / GROUP;
                // Per-block activation scales: each block's weight scales times the token's
                // block scale (`d * a_scale[block]`, the reference's order); otherwise the
                // token's scale multiplies at the end.
                let per_block = self.act.per_block;
                let a_scales = &self.act.scales[if per_block { t0 * blocks..(t0 + T) * blocks } else { 0..0 }];
                // SAFETY: as above; block `b < blocks` spans groups `b * block_groups..(b + 1)
                // * block_groups` of the panel and of `act`, and its weight block's `p` scales
                // lie at `b / sub * p` (asserted).
                let f = unsafe {
                    // The float sums stay in memory: the accumulators fill the registers, and
                    // LLVM's own spilling of the sums takes more instructions per block (NEON
                    // 4 x 5: about 112 against 83; the x86 full tiles' block loops shrink too).
                    let mut sums = [[S::fzero(); T]; RV];
                    let f = std::hint::black_box(&mut sums);
                    for b in 0..blocks {
                        let mut acc = [[S::zero(); T]; RV];
                        for v in 0..RV {
                            for t in 0..T {
                                acc[v][t] = S::splat32(seeds[t * blocks + b]);
                            }
                        }
                        let groups = b * block_groups..(b + 1) * block_groups;
                        micro::<S, RV, T>(w, act.as_ptr(), groups, &mut acc);
                        for v in 0..RV {
                            let s = S::fload(self.scales.as_ptr().add(b / sub * self.p + v * S::LANES));
                            for t in 0..T {
                                let s = if per_block { S::fmul(s, S::fsplat(a_scales[t * blocks + b])) } else { s };
                                f[v][t] = S::fmadd_lanes(acc[v][t], s, f[v][t]);
                            }
                        }
                    }
                    *f
                };
                for v in 0..RV {
                    for t in 0..T {
                        // SAFETY: `lanes` has room for 16 >= LANES floats; `S`'s features.
                        unsafe { S::fstore(lanes.as_mut_ptr(), f[v][t]) };
                        if !per_block {
                            let a_scale = self.act.scales[t0 + t];
                            for x in &mut lanes[..S::LANES] {
                                *x *= a_scale;
                            }
                        }
                        self.write::<S>(out, v, t0 + t, &lanes);
                    }
                }
            }
        }
    }

    /// Writes the lanes of panel vector `v` that are rows of this panel, if `token` is in
    /// `out`'s block (a block not aligned to the packing computes tokens it does not own).
    #[inline(always)]
    fn write<S: GemmSimd>(&self, out: &mut OutTile, v: usize, token: usize, lanes: &[f32; 16]) {
        let first = self.rows.start + v * S::LANES;
        // The panel's last vectors may lie past its rows: padding, nothing to write.
        let n = S::LANES.min(self.rows.end.saturating_sub(first));
        if n > 0 && out.tokens().contains(&token) {
            if n == S::LANES {
                // A run of constant length: one vector copy, not a `memcpy` call.
                out.set_run(token, first, &lanes[..S::LANES]);
            } else {
                out.set_run(token, first, &lanes[..n]);
            }
        }
    }
}

/// The GEMM of one weight format over the block of `out`: panels of `RV * LANES` rows,
/// the packed token blocks of `T` (at most 8) that cover `out`'s tokens.
///
/// # Safety
/// The CPU must have `S`'s features; operands checked by `Kernel::run_prepared`, and `a`
/// packed with token blocks of `T`.
#[inline(always)]
pub(crate) unsafe fn gemm<S: GemmSimd, L: Layout, const RV: usize, const T: usize>(
    w: &MatRef,
    a: &Packed,
    out: &mut OutTile,
) {
    const { assert!(T >= 1 && T <= 8) };
    assert!(w.format == L::FORMAT && a.k == w.cols && a.t == T && a.m == out.m(), "operands of another kernel");
    assert!(a.group == GROUP && !a.padded, "activations packed for another kernel");
    let p = RV * S::LANES;
    // One scale for the tensor: int32 along the whole row (exact for BitNet and I2_S; for
    // a tensor of equal block scales the per-block path's result up to float rounding, see
    // `Tensor::uniform_block_scale`).
    // Not with per-block activation scales: every block is then scaled on its own.
    let uniform = if a.per_block { None } else { w.uniform_scale };
    let scale = L::tensor_scale(w.bytes).or(uniform);
    let tokens = out.tokens();
    let mut s = Scratch::take();
    let panel = aligned(&mut s.panel, a.kg * p);
    let scales = sized(&mut s.scales, a.k / L::BLOCK * p);
    let rows = out.rows();
    let blocks = 0..w.cols.div_ceil(L::BLOCK);
    for r0 in rows.clone().step_by(p) {
        let prows = r0..(r0 + p).min(rows.end);
        // SAFETY: `S`'s features, as the caller guarantees.
        unsafe {
            pack_panel::<S, L>(w, prows.clone(), blocks.clone(), p, panel, scale.is_none().then_some(&mut *scales))
        };
        let ctx = Ctx { act: a, panel, scales, p, w_block: L::BLOCK, rows: prows, scale };
        // The packed blocks that hold `tokens`.
        let mut t0 = tokens.start / T * T;
        while t0 < tokens.end {
            let tn = T.min(a.m - t0);
            // SAFETY: `S`'s features, as the caller guarantees. Const token counts for the
            // last, shorter block.
            unsafe {
                match tn {
                    1 => ctx.tile::<S, RV, 1>(out, t0),
                    2 => ctx.tile::<S, RV, 2>(out, t0),
                    3 => ctx.tile::<S, RV, 3>(out, t0),
                    4 => ctx.tile::<S, RV, 4>(out, t0),
                    5 => ctx.tile::<S, RV, 5>(out, t0),
                    6 => ctx.tile::<S, RV, 6>(out, t0),
                    7 => ctx.tile::<S, RV, 7>(out, t0),
                    _ => ctx.tile::<S, RV, 8>(out, t0),
                }
            }
            t0 += tn;
        }
    }
    s.put();
}
