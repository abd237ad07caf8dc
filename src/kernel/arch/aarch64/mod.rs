//! aarch64 kernels, chosen at run time: for batches FEAT_I8MM (`usmmla`, [`i8mm`]), then
//! NEON with dotprod (`sdot`), then plain NEON. The last two each register the shared GEMV
//! ([`crate::kernel::tile`]) and the shared panel GEMM ([`crate::kernel::gemm`]) over NEON's
//! vector operations ([`simd`]), each with its own multiply-accumulate; `i8mm` is a register
//! tile of that GEMM over the same vectors.
//!
//! - [`requant`]: the NEON I8_ABSMAX quantizer for the activation adapter.

mod dotprod;
mod i8mm;
mod neon;
mod requant;
mod simd;

use crate::kernel::{Kernel, Requant};

/// Best first: i8mm (from two tokens on), the dotprod GEMM (past its `min_tokens`), the
/// dotprod GEMV, then plain NEON's GEMM (past its `min_tokens`) and GEMV.
pub(crate) fn kernels() -> Vec<Kernel> {
    i8mm::kernels().into_iter().chain(dotprod::kernels()).chain(neon::kernels()).collect()
}

/// NEON's quantizer; the max |x| bits vectorize as written (NEON is the baseline).
pub(crate) fn requant() -> Option<Requant> {
    Some(Requant { abs_max_bits: crate::format::abs_max_bits, quantize: requant::quantize })
}
