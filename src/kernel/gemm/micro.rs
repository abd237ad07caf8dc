//! The register tile of the panel GEMM ([`MicroTile`]): the one part of the GEMM an ISA
//! may replace. The panel packer, the packed activations, the per-thread buffers, the loop
//! nest and the scaling are shared; a micro-tile says how it wants the activations packed
//! and the panel arranged, and adds a panel's products into `RV x T` accumulators. Their
//! lanes are in the tile's own order while the blocks are summed (the block scales come in
//! that order, [`MicroTile::block_scales`]), and in the shared loops' order (vector `v` of
//! token `t`: rows `v LANES..(v + 1) LANES`) once a tile's sums are done.
//!
//! Every ISA's broadcast dot product ([`QuadMac`]: x86 `vpdpbusd`/`vpmaddubsw`, NEON
//! `sdot`/`smlal` by element, wasm's dots) is the micro-tile of its own vector type, in the
//! shared order; a matrix instruction brings its own (aarch64 `usmmla`, 2 x 2 blocks of rows
//! by tokens: `arch::aarch64::i8mm`).

// Tiles index several per-row and per-token arrays in lockstep.
#![allow(clippy::needless_range_loop)]

use super::layout::{QuadSink, Quads};
use super::pack::{Packed, GROUP};
use super::simd::GemmSimd;
use crate::kernel::isa::Isa;
use crate::kernel::mac::QuadMac;
use crate::kernel::MatRef;

/// The register tile of a panel GEMM over `S`'s vectors, and the CPU features it runs with
/// (its [`Isa`]).
pub(crate) trait MicroTile<S: GemmSimd>: Isa {
    /// Packs `a` for [`MicroTile::micro`] in token blocks of `t`, with seeds per `block`
    /// elements: [`Packed`] with this tile's group and padding.
    fn pack(a: &MatRef, t: usize, block: usize) -> Packed;

    /// Where the panel packer puts a block's quads: this tile's panel layout.
    type Sink: QuadSink<S>;

    /// The sink for the quads of rows `g..g + LANES` of the block whose `quads` quads of a
    /// `p`-row panel start at `block` (`quads * p * 4` bytes).
    fn sink(block: *mut u8, p: usize, g: usize, quads: usize) -> Self::Sink;

    /// The seed (minus the activations' sum, see `gemm`'s arithmetic) of accumulators
    /// `acc[..][t]` in this tile's lane order, from the seeds of the tile's `T` tokens. The
    /// shared order, the broadcast tiles': token `t`'s in every lane.
    ///
    /// # Safety
    /// The CPU must have this tile's features.
    #[inline(always)]
    unsafe fn seed<const T: usize>(seeds: &[i32; T], t: usize) -> S::V {
        // SAFETY: a register operation; the caller guarantees the features.
        unsafe { S::splat32(seeds[t]) }
    }

    /// The scale of a block's accumulator `acc[v][t]` in this tile's lane order, from the
    /// block scales `s` of rows `v LANES..(v + 1) LANES` and, with per-block activation
    /// scales, the tokens' `a`. The shared order: `s`, times `a[t]`.
    ///
    /// # Safety
    /// The CPU must have this tile's features.
    #[inline(always)]
    unsafe fn block_scale<const T: usize>(s: S::F, a: Option<&[f32; T]>, t: usize) -> S::F {
        // SAFETY: register operations; the caller guarantees the features.
        unsafe {
            match a {
                Some(a) => S::fmul(s, S::fsplat(a[t])),
                None => s,
            }
        }
    }

    /// Puts float sums in this tile's lane order into the shared order: nothing to do for
    /// the broadcast tiles. Once per tile, after its last block.
    ///
    /// # Safety
    /// The CPU must have this tile's features.
    #[inline(always)]
    unsafe fn shared_order<const RV: usize, const T: usize>(_f: &mut [[S::F; T]; RV]) {}

    /// Adds `groups` groups of the panel at `w` (`RV * LANES` rows, groups of 16 elements, in
    /// [`MicroTile::Sink`]'s layout) times those of the token block at `a` (`16 T` bytes per
    /// group; `T` a multiple of the tile's token padding, [`Packed`]'s `pad`) to the
    /// accumulators `acc`, in this tile's lane order: the inner loop.
    ///
    /// # Safety
    /// `w` must be valid for `groups * 16 * RV * LANES` bytes, `a` for `groups * 16 * T +
    /// SLACK` (the codes' [`SLACK`](super::pack::SLACK)); the CPU must have this tile's features.
    unsafe fn micro<const RV: usize, const T: usize>(
        w: *const u8,
        a: *const u8,
        groups: usize,
        acc: &mut [[S::V; T]; RV],
    );
}

/// A partial accumulator of `S`'s [`QuadMac`].
type Q<S> = <<S as GemmSimd>::Quad as QuadMac<<S as crate::kernel::tile::Simd>::V, <S as GemmSimd>::A>>::Q;

/// The broadcast tile: each weight vector (`LANES` rows by one quad) times one activation
/// quad of each token, broadcast to every lane. Activations `[k/16][t][16]` (four quads of
/// a token per load), the last block not padded.
impl<S: GemmSimd + Isa> MicroTile<S> for S {
    type Sink = Quads;

    fn pack(a: &MatRef, t: usize, block: usize) -> Packed {
        Packed::new::<GROUP>(a, t, block, 1)
    }

    /// The panel as packed, `[quads][p][4]`.
    fn sink(block: *mut u8, p: usize, g: usize, quads: usize) -> Quads {
        Quads { dst: block.wrapping_add(4 * g), step: 4 * p, quads }
    }

    /// Both operands are read front to back: per group, the token block's four quads, then
    /// each quad's `RV` weight vectors times every token.
    #[inline(always)]
    unsafe fn micro<const RV: usize, const T: usize>(
        w: *const u8,
        a: *const u8,
        groups: usize,
        acc: &mut [[S::V; T]; RV],
    ) {
        /// Quad `L` of a group: the `RV` weight vectors at `*wq` (moved past them), `RV x T`
        /// dot products.
        ///
        /// # Safety
        /// As for [`MicroTile::micro`].
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
        // groups`, quad `4 g + L`, vector `v < RV`, token `t < T`; a rolled quad's loads at
        // most 12 bytes past its group, in `a`'s slack at the last); `S`'s features.
        unsafe {
            let mut g0 = 0;
            while g0 < groups {
                let end = g0 + S::Quad::Q_GROUPS.min(groups - g0);
                let mut p = [[S::Quad::q_start(S::zero()); T]; RV];
                for v in 0..RV {
                    for t in 0..T {
                        p[v][t] = S::Quad::q_start(acc[v][t]);
                    }
                }
                let (mut wq, mut ag) = (w.add(4 * g0 * quad_bytes), a.add(g0 * GROUP * T));
                if S::ROLLED_QUADS {
                    // An opaque count is what keeps LLVM from unrolling the quads' loop (one
                    // address add per quad; a single loop over the quads of all groups took
                    // two masks and two adds to find each one's activations). A quad's
                    // 16-byte loads reach at most 12 bytes past the group, into the next
                    // token's or the codes' slack.
                    let quads = std::hint::black_box(4);
                    for _ in g0..end {
                        let mut aq = ag;
                        for _ in 0..quads {
                            let mut av = [S::a_load(aq); T];
                            for t in 1..T {
                                av[t] = S::a_load(aq.add(GROUP * t));
                            }
                            quad::<S, RV, T, 0>(&mut p, &mut wq, &av);
                            aq = aq.add(4);
                        }
                        ag = ag.add(GROUP * T);
                    }
                } else {
                    for _ in g0..end {
                        let av = S::a_load_next::<T>(&mut ag);
                        quad::<S, RV, T, 0>(&mut p, &mut wq, &av);
                        quad::<S, RV, T, 1>(&mut p, &mut wq, &av);
                        quad::<S, RV, T, 2>(&mut p, &mut wq, &av);
                        quad::<S, RV, T, 3>(&mut p, &mut wq, &av);
                    }
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
}
