//! Q2_0 (ggml): an f16 scale, then 16 bytes of 2-bit codes (c - 1: {-1, 0, +1, +2}), per
//! 64 elements.

use super::{Codes, Scale};
use crate::format::{q2_0, Format};
use crate::kernel::gemm::{expand_bytes, GemmSimd, Layout, QuadSink};
use crate::kernel::prep;
use crate::kernel::tile::{dot_2bit_into, gemv_format, Pieces, Tq};
use std::borrow::Cow;

/// Q2_0: 2-bit codes, 64-element blocks with an f16 scale before them.
pub(crate) struct Q2;

impl Codes for Q2 {
    const FORMAT: Format = Format::Q2_0;
    const BLOCK: usize = q2_0::QK;
    const BLOCK_BYTES: usize = q2_0::BLOCK_BYTES;
    const CODE_AT: usize = q2_0::D_BYTES;
    const CODE_BYTES: usize = q2_0::QK / 4;
    const SCALE: Scale = Scale::Block(0);
}

/// Q2_0: one vector load holds `W / 16` blocks (16 code bytes each), whose int32 lanes
/// `4 i .. 4 i + 4` are block `i`'s (the dot products add bytes `4 l .. 4 l + 4` to lane
/// `l`, and byte `j` of a block holds elements `4 j .. 4 j + 4`: lane `4 i + q` holds the
/// block's elements `16 q .. 16 q + 16`), so one lane-wise FMA by the blocks' scales ends
/// the step. By I8_BLOCK32, lanes `4 i, 4 i + 1` and `4 i + 2, 4 i + 3` hold the block's two
/// halves, each with its own activation scale: the same FMA, its scales multiplied first.
/// (Kernels whose multiply-accumulate mixes the halves in a lane, NEON's `smlal`, have no
/// I8_BLOCK32 GEMV: see `tile::every_format`.)
impl<S: Pieces> Tq<S> for Q2 {
    const PER_STEP: usize = S::W / 16;
    const ACT_SCALES: usize = 2;
    /// A step's scaling is one lane-wise FMA for `W / 16` blocks: int32 rows measured no
    /// faster (AMD Zen 4, 2560x2560, one token: 95-96 µs either way on AVX-512, 131-132 on
    /// AVX2).
    const UNIFORM_ROWS: bool = false;

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

    #[inline(always)]
    unsafe fn act_scales(a: *const f32, n: usize) -> S::F {
        // SAFETY: the caller's contract: `2 n` f32 at `a`.
        unsafe { S::f32_halves(a, n) }
    }

    #[inline(always)]
    unsafe fn scale_add<const T: usize>(
        w: *const u8,
        n: usize,
        acc: &[S::V; T],
        a: Option<&[S::F; T]>,
        f: &mut [S::F; T],
    ) {
        // SAFETY: the `n` blocks' scales lie at `w + SCALE_AT`, `BLOCK_BYTES` apart, as the
        // caller guarantees; its features.
        unsafe {
            let d = S::f16_pieces(w.add(<Self as Tq<S>>::SCALE_AT), Self::BLOCK_BYTES, n);
            for t in 0..T {
                let s = a.map_or(d, |a| S::fmul(d, a[t]));
                f[t] = S::fmadd_lanes(acc[t], s, f[t]);
            }
        }
    }
}

gemv_format!(Q2: Pieces, prepare_tq, tq);

impl Layout for Q2 {
    /// Byte `j` of a block's codes holds elements `4 j .. 4 j + 4`, as in BITNET_B1_58.
    #[inline(always)]
    unsafe fn expand<S: GemmSimd, O: QuadSink<S>>(i: usize, v: S::V, out: &mut O) {
        // SAFETY: the caller's contract.
        unsafe { expand_bytes::<S, O>(i, v, out) }
    }
}
