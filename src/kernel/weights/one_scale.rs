//! The formats with one scale per tensor: BITNET_B1_58 (tern's) and bitnet.cpp's I2_S in
//! its 128- and 64-element packings. Their rows are 2-bit codes `t + 1`; only the order of
//! the codes differs.

use super::{Codes, Scale};
use crate::format::{bitnet, i2_s, Format};
use crate::kernel::gemm::{expand_bytes, expand_planes, GemmSimd, Layout, QuadSink};
use crate::kernel::prep;
use crate::kernel::tile::{gemv_format, OneScale, Simd};
use std::borrow::Cow;

/// BITNET_B1_58: 2-bit codes, one f32 scale per tensor.
pub(crate) struct Bitnet;

/// I2_S in 128-element blocks (bitnet.cpp's x86 packing): 2-bit codes, one f32 scale per
/// tensor.
pub(crate) struct I2s128;

/// I2_S in 64-element blocks (bitnet.cpp's ARM packing).
pub(crate) struct I2s64;

/// Formats with one scale per tensor step through their rows 256 elements (64 bytes) at a
/// time.
macro_rules! one_scale {
    ($marker:ty, $format:expr, $scale:path) => {
        impl Codes for $marker {
            const FORMAT: Format = $format;
            const BLOCK: usize = 256;
            const BLOCK_BYTES: usize = 64;
            const CODE_AT: usize = 0;
            const CODE_BYTES: usize = 64;
            const SCALE: Scale = Scale::Tensor($scale);
        }
    };
}
one_scale!(Bitnet, Format::BitnetB158, bitnet::scale);
one_scale!(I2s128, Format::I2S, i2_s::scale);
one_scale!(I2s64, Format::I2S64, i2_s::scale);

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

gemv_format!(Bitnet: Simd, prepare_one_scale, one_scale);
gemv_format!(I2s128: Simd, prepare_one_scale, one_scale);
gemv_format!(I2s64: Simd, prepare_one_scale, one_scale);

impl Layout for I2s128 {
    /// As TQ2_0's, with the planes in the other order: element `128 h + 32 l + j` is at
    /// shift `6 - 2 l` of byte `32 h + j`.
    #[inline(always)]
    unsafe fn expand<S: GemmSimd, O: QuadSink<S>>(i: usize, v: S::V, out: &mut O) {
        let q = 32 * (i / 8) + i % 8;
        // SAFETY: the caller's contract.
        unsafe { expand_planes::<S, O>(v, [q + 24, q + 16, q + 8, q], out) }
    }
}

impl Layout for I2s64 {
    /// Element `64 h + 16 l + j` is at shift `6 - 2 l` of byte `16 h + j`: the dword at
    /// `16 h + 4 (i % 4)` gives quad `16 h + 4 l + i % 4`.
    #[inline(always)]
    unsafe fn expand<S: GemmSimd, O: QuadSink<S>>(i: usize, v: S::V, out: &mut O) {
        let q = 16 * (i / 4) + i % 4;
        // SAFETY: the caller's contract.
        unsafe { expand_planes::<S, O>(v, [q + 12, q + 8, q + 4, q], out) }
    }
}

impl Layout for Bitnet {
    #[inline(always)]
    unsafe fn expand<S: GemmSimd, O: QuadSink<S>>(i: usize, v: S::V, out: &mut O) {
        // SAFETY: the caller's contract.
        unsafe { expand_bytes::<S, O>(i, v, out) }
    }
}
