//! aarch64 kernels, chosen at run time: NEON with dotprod (`sdot`), then plain NEON.

use crate::kernel::Kernel;

pub fn kernels() -> Vec<Kernel> {
    Vec::new()
}

pub fn requant_row() -> Option<crate::kernel::RequantRowFn> {
    None
}
