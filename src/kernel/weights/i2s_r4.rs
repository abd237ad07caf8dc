//! I2_S_R4 (bitnet.cpp's x86 packing without `ACT_PARALLEL`): rows in groups of four share
//! one stream of `k` bytes, byte `c` holding column `c` of the four rows, row `4 g + j` at
//! bit shift `6 - 2 j`; one f32 scale per tensor after the codes.

use super::{Codes, Scale};
use crate::format::{i2_s, Format};
use crate::kernel::gemm::{GemmSimd, Layout, QuadSink};
use crate::kernel::tile::{prepare_natural, rows4, GemvFormat, Prepared, Simd};
use crate::kernel::{MatRef, OutTile};

/// I2_S_R4: 2-bit codes of four rows per byte, one f32 scale per tensor.
pub(crate) struct I2sR4;

/// Rows per group, which share one stream (a byte holds one column of each).
const GROUP: usize = 4;

impl Codes for I2sR4 {
    const FORMAT: Format = Format::I2SR4;
    /// Steps of 64 columns: 64 bytes of a group's stream, which every ISA's panel packer
    /// takes in at most four chunks of one vector per row.
    const BLOCK: usize = 64;
    const BLOCK_BYTES: usize = 64;
    const CODE_AT: usize = 0;
    const CODE_BYTES: usize = 64;
    const SCALE: Scale = Scale::Tensor(i2_s::scale);

    /// A row's codes are its group's stream: `k` bytes, shared with the group's other rows.
    fn row_stream(r: usize, k: usize) -> (usize, usize) {
        (r / GROUP * k, k)
    }
}

/// The GEMV reads a group's stream with the activations in their own order: one load,
/// four rows ([`rows4`]).
impl<S: Simd> GemvFormat<S> for I2sR4 {
    fn prepare(a: &MatRef) -> Prepared {
        prepare_natural::<S, I2sR4>(a)
    }

    #[inline(always)]
    unsafe fn run<const R1: usize, const RB: usize, const TB: usize>(w: &MatRef, act: &Prepared, out: &mut OutTile) {
        // SAFETY: the caller's contract is that of the tile loops.
        unsafe { rows4::<S, TB>(w, act, out) }
    }
}

impl Layout for I2sR4 {
    /// Each lane already holds one code per byte ([`Layout::row_codes`]): dword `i` of a
    /// block is quad `i`.
    #[inline(always)]
    unsafe fn expand<S: GemmSimd, O: QuadSink<S>>(i: usize, v: S::V, out: &mut O) {
        // SAFETY: the caller's contract.
        unsafe { out.put(i, v) }
    }

    const SHARED_ROWS: usize = GROUP;

    /// Row `row`'s plane of its group's bytes: one code per byte, columns in order.
    #[inline(always)]
    unsafe fn row_codes<S: GemmSimd>(x: S::V, row: usize) -> S::V {
        // SAFETY: register operations; the caller's features.
        unsafe { S::plane2(x, GROUP - 1 - row % GROUP, S::splat8(3)) }
    }
}
