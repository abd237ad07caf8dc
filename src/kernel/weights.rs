//! The ternary weight formats as the SIMD kernels see them: one marker type per format and
//! [`Codes`], the facts about its bytes that every loop nest reads (where a block's codes
//! and scale are). Each loop nest adds its own unpack on top (`tile::Tq`, `tile::OneScale`,
//! `gemm::Layout`, the aarch64 i8mm unpack).

use crate::format::{bitnet, i2_s, q2_0, tq1_0, tq2_0, Format};

/// TQ1_0: base-3 digits, five per byte, 256-element blocks with an f16 scale.
pub(crate) struct Tq1;

/// TQ2_0: 2-bit codes, 256-element blocks with an f16 scale.
pub(crate) struct Tq2;

/// BITNET_B1_58: 2-bit codes, one f32 scale per tensor.
pub(crate) struct Bitnet;

/// Q2_0: 2-bit codes, 64-element blocks with an f16 scale before them.
pub(crate) struct Q2;

/// I2_S in 128-element blocks (bitnet.cpp's x86 packing): 2-bit codes, one f32 scale per
/// tensor.
pub(crate) struct I2s128;

/// I2_S in 64-element blocks (bitnet.cpp's ARM packing).
pub(crate) struct I2s64;

/// Where a format keeps its scales, as kernels read them.
pub(crate) enum Scale {
    /// An f16 at this offset of every block.
    Block(usize),
    /// One f32 for the whole tensor, read from the tensor's bytes by this function.
    Tensor(fn(&[u8]) -> f32),
}

/// The bytes of a ternary weight format: rows are `k / BLOCK` blocks of `BLOCK_BYTES`
/// (formats with one scale per tensor have no blocks: their rows are `k / 4` code bytes,
/// which the loop nests step through `BLOCK` elements at a time, the last step possibly
/// short).
pub(crate) trait Codes: Sized + 'static {
    const FORMAT: Format;
    /// Elements per block (per step, for one scale per tensor).
    const BLOCK: usize;
    /// Bytes per block (per step).
    const BLOCK_BYTES: usize;
    /// Offset of the codes in a block.
    const CODE_AT: usize;
    /// Code bytes per block.
    const CODE_BYTES: usize;
    const SCALE: Scale;

    /// Bytes of one row of `k` elements.
    fn row_bytes(k: usize) -> usize {
        match Self::SCALE {
            Scale::Block(_) => k / Self::BLOCK * Self::BLOCK_BYTES,
            Scale::Tensor(_) => k / 4,
        }
    }

    /// The tensor's one scale, or `None` for block scales.
    fn tensor_scale(bytes: &[u8]) -> Option<f32> {
        match Self::SCALE {
            Scale::Block(_) => None,
            Scale::Tensor(scale) => Some(scale(bytes)),
        }
    }
}

impl Codes for Tq1 {
    const FORMAT: Format = Format::Tq1_0;
    const BLOCK: usize = 256;
    const BLOCK_BYTES: usize = tq1_0::BLOCK_BYTES;
    const CODE_AT: usize = 0;
    /// `qs` and `qh`, which are contiguous.
    const CODE_BYTES: usize = tq1_0::QS_BYTES + tq1_0::QH_BYTES;
    const SCALE: Scale = Scale::Block(tq1_0::QS_BYTES + tq1_0::QH_BYTES);
}

impl Codes for Tq2 {
    const FORMAT: Format = Format::Tq2_0;
    const BLOCK: usize = 256;
    const BLOCK_BYTES: usize = tq2_0::BLOCK_BYTES;
    const CODE_AT: usize = 0;
    const CODE_BYTES: usize = tq2_0::QS_BYTES;
    const SCALE: Scale = Scale::Block(tq2_0::QS_BYTES);
}

impl Codes for Q2 {
    const FORMAT: Format = Format::Q2_0;
    const BLOCK: usize = q2_0::QK;
    const BLOCK_BYTES: usize = q2_0::BLOCK_BYTES;
    const CODE_AT: usize = q2_0::D_BYTES;
    const CODE_BYTES: usize = q2_0::QK / 4;
    const SCALE: Scale = Scale::Block(0);
}

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
