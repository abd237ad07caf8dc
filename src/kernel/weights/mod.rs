//! The ternary weight formats as the SIMD kernels see them: one marker type per format and
//! [`Codes`], the facts about its bytes that every loop nest reads (where a block's codes
//! and scale are). Each loop nest adds its own unpack on top (`tile::Tq`, `tile::OneScale`,
//! `gemm::Layout`, the aarch64 i8mm unpack).
//!
//! One file per format (a marker type, its [`Codes`], and the GEMV's and GEMM's unpack of
//! it); adding a format is its file here, its line in `tile::kernels` and `gemm::kernels`,
//! and the ISAs that register it.

mod i2s_r4;
mod one_scale;
mod q2;
mod tq1;
mod tq2;

pub(crate) use i2s_r4::I2sR4;
pub(crate) use one_scale::{Bitnet, I2s128, I2s64};
pub(crate) use q2::Q2;
pub(crate) use tq1::{tq1_act_block, tq1_slot, Tq1};
#[cfg(any(target_arch = "aarch64", all(target_arch = "wasm32", target_feature = "simd128")))]
pub(crate) use tq1::{tq1_slot_qh_vector, TQ1_QH_VECTOR_ACT_BLOCK, TQ1_QH_VECTOR_SLOT};
pub(crate) use tq2::Tq2;

use crate::format::Format;

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

    /// Where row `r`'s codes start and how many bytes they run (of a matrix with `k`
    /// columns): each row its own `row_bytes`, except where rows share a stream (I2_S_R4's
    /// groups of four rows, `k` bytes each).
    fn row_stream(r: usize, k: usize) -> (usize, usize) {
        (r * Self::row_bytes(k), Self::row_bytes(k))
    }

    /// The tensor's one scale, or `None` for block scales.
    fn tensor_scale(bytes: &[u8]) -> Option<f32> {
        match Self::SCALE {
            Scale::Block(_) => None,
            Scale::Tensor(scale) => Some(scale(bytes)),
        }
    }
}
