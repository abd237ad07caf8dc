//! The ternary weight formats as the SIMD kernels see them: one marker type per format,
//! for which each loop nest implements its own layout trait (`tile::Tq`, `gemm::Layout`,
//! the aarch64 i8mm unpack).

/// TQ1_0: base-3 digits, five per byte, 256-element blocks with an f16 scale.
pub(crate) struct Tq1;

/// TQ2_0: 2-bit codes, 256-element blocks with an f16 scale.
pub(crate) struct Tq2;

/// BITNET_B1_58: 2-bit codes, one f32 scale per tensor.
pub(crate) struct Bitnet;
