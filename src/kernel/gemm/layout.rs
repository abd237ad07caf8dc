//! What the GEMM needs of a weight format ([`Layout`]: its codes expanded to one biased code
//! per byte, in quads), and the expansions the 2-bit formats share.

use super::simd::GemmSimd;
use crate::kernel::weights::Codes;

/// Elements per packing step of the formats with one scale per tensor, and per block of
/// TQ1_0 and TQ2_0 (AMX packs its activations in these).
pub(crate) const QK: usize = 256;

/// A ternary weight format as the panel packer sees it: its bytes ([`Codes`]), and which
/// quads each raw dword of a block's codes expands to.
pub(crate) trait Layout: Codes {
    /// Expands the transposed raw dword `i` of a block (dword `i` of every row in the
    /// group, one per lane) into the codes of the quads it holds, each given to `out`.
    ///
    /// # Safety
    /// The CPU must have `S`'s features; `out` must be valid for the block's quads.
    unsafe fn expand<S: GemmSimd, O: QuadSink<S>>(i: usize, v: S::V, out: &mut O);

    /// Rows in groups of this many share their code bytes, each in its own plane (I2_S_R4: 4);
    /// 1 where every row has bytes of its own.
    const SHARED_ROWS: usize = 1;

    /// Row `row`'s code bytes `x` as loaded (before the transpose), in the form `expand`
    /// reads: as they are, unless rows share their bytes (I2_S_R4). `row` may be any number
    /// congruent to the row's index modulo [`Layout::SHARED_ROWS`].
    ///
    /// # Safety
    /// The CPU must have `S`'s features.
    #[inline(always)]
    unsafe fn row_codes<S: GemmSimd>(x: S::V, _row: usize) -> S::V {
        x
    }
}

/// Where [`Layout::expand`] puts the codes of a block's quads for one group of `LANES` rows
/// of a panel: the layout a micro-tile reads (`MicroTile::Sink`). (A type, not a callback:
/// closures are compiled without the caller's target features.)
pub(crate) trait QuadSink<S: GemmSimd> {
    /// Takes the codes of quad `q` of the group's rows (dropped past the block's quads). A
    /// block's quads come in an order where each even quad precedes the odd one after it.
    ///
    /// # Safety
    /// The CPU must have `S`'s features; the sink's panel must be valid for the block's quads.
    unsafe fn put(&mut self, q: usize, codes: S::V);
}

/// The panel as packed, `[quads][p][4]`: a quad of the group's rows is one vector store.
pub(crate) struct Quads {
    /// Quad 0 of the block, rows of the group.
    pub(super) dst: *mut u8,
    /// Bytes from one quad to the next (`4 p`).
    pub(super) step: usize,
    /// Quads the block has: fewer than `BLOCK / 4` only in the last step of a format with
    /// one scale per tensor.
    pub(super) quads: usize,
}

impl<S: GemmSimd> QuadSink<S> for Quads {
    /// `dst` must be valid for `quads` quads of `step` bytes, `4 * S::LANES` of them written
    /// each.
    #[inline(always)]
    unsafe fn put(&mut self, q: usize, codes: S::V) {
        if q < self.quads {
            // SAFETY: quad `q < quads`, as the caller guarantees.
            unsafe { S::store(self.dst.add(q * self.step), codes) }
        }
    }
}

/// Expands dword `v` of 2-bit codes whose bit shift `2 s` holds quad `quads[s]`.
///
/// # Safety
/// As for [`Layout::expand`].
#[inline(always)]
pub(crate) unsafe fn expand_planes<S: GemmSimd, O: QuadSink<S>>(v: S::V, quads: [usize; 4], out: &mut O) {
    // SAFETY: register operations and `put`, under the caller's contract.
    unsafe {
        let m = S::splat8(3);
        out.put(quads[0], S::and(v, m));
        out.put(quads[1], S::and(S::srli32::<2>(v), m));
        out.put(quads[2], S::and(S::srli32::<4>(v), m));
        out.put(quads[3], S::and(S::srli32::<6>(v), m));
    }
}

/// Expands dword `i` of 2-bit codes whose byte `j` holds elements `4 j .. 4 j + 4` at
/// shifts 0, 2, 4, 6: byte `c` of the dword is quad `4 i + c` ([`GemmSimd::spread_byte`]).
///
/// # Safety
/// As for [`Layout::expand`].
#[inline(always)]
pub(crate) unsafe fn expand_bytes<S: GemmSimd, O: QuadSink<S>>(i: usize, v: S::V, out: &mut O) {
    // SAFETY: register operations and `put`, under the caller's contract.
    unsafe {
        out.put(4 * i, S::spread_byte::<0>(v));
        out.put(4 * i + 1, S::spread_byte::<1>(v));
        out.put(4 * i + 2, S::spread_byte::<2>(v));
        out.put(4 * i + 3, S::spread_byte::<3>(v));
    }
}
