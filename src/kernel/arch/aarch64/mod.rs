//! aarch64 kernels, chosen at run time: NEON with dotprod (`sdot`), then plain NEON. Both
//! are the shared tile skeleton ([`crate::kernel::tile`]) over NEON's vector operations
//! ([`simd`]), with their own multiply-accumulate.
//!
//! - [`requant`]: the NEON I8_ABSMAX row requantizer for the activation adapter.

mod dotprod;
mod neon;
mod requant;
mod simd;

use crate::kernel::{Kernel, RequantRowFn};

/// Best first: dotprod, then plain NEON.
pub(crate) fn kernels() -> Vec<Kernel> {
    dotprod::kernels().into_iter().chain(neon::kernels()).collect()
}

pub(crate) fn requant_row() -> Option<RequantRowFn> {
    Some(requant::encode_row)
}
