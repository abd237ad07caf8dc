//! aarch64 kernels, chosen at run time: for batches FEAT_I8MM (`smmla`, [`i8mm`]), then
//! NEON with dotprod (`sdot`), then plain NEON. The last two are the shared tile skeleton
//! ([`crate::kernel::tile`]) over NEON's vector operations ([`simd`]), each with its own
//! multiply-accumulate.
//!
//! - [`requant`]: the NEON I8_ABSMAX row requantizer for the activation adapter.

mod dotprod;
pub(crate) mod i8mm;
mod neon;
mod requant;
mod simd;

use crate::kernel::{Kernel, RequantRowFn};

/// Best first: i8mm (from two tokens on), the dotprod GEMM (past its `min_tokens`), the
/// dotprod GEMV, then plain NEON's GEMM (past its `min_tokens`) and GEMV.
pub(crate) fn kernels() -> Vec<Kernel> {
    let dotprod = dotprod::gemm_kernels().into_iter().chain(dotprod::kernels());
    let neon = neon::gemm_kernels().into_iter().chain(neon::kernels());
    i8mm::kernels().into_iter().chain(dotprod).chain(neon).collect()
}

pub(crate) fn requant_row() -> Option<RequantRowFn> {
    Some(requant::encode_row)
}
