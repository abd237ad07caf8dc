//! wasm32 kernels. WebAssembly has no run-time feature detection: the build decides. With
//! `-C target-feature=+simd128` this registers `bitnet_gemv/wasm-simd128`; with
//! `+simd128,+relaxed-simd` also `bitnet_gemv/wasm-relaxed-simd128`, first. Without simd128
//! only the reference kernels exist. An engine without a feature refuses to compile a
//! module that uses it, so a running module has what its kernels need (`available` is
//! always true), and a JS loader picks the best build the engine validates (js/src).
//!
//! Both kernels are the shared skeleton ([`crate::kernel::tile`]) over [`simd128::Wasm`];
//! they differ only in the multiply-accumulate ([`crate::kernel::mac::Mac`]).

#[cfg(target_feature = "simd128")]
mod requant;
#[cfg(target_feature = "simd128")]
mod simd128;

use crate::kernel::Kernel;

pub(crate) fn kernels() -> Vec<Kernel> {
    #[allow(unused_mut)]
    let mut all = Vec::new();
    #[cfg(target_feature = "relaxed-simd")]
    all.extend(relaxed::kernels());
    #[cfg(target_feature = "simd128")]
    all.extend(plain::kernels());
    all
}

// Tiles: 2 rows for one token, 2 x 2 for batches, as AVX2 (engines map v128 onto the 16 xmm
// registers, and the plain build keeps two partial sums per (row, token)); 4 rows for one
// token measured no better (TQ2_0 2560x2560 under node 22, within the noise).

#[cfg(target_feature = "simd128")]
mod plain {
    use super::simd128::{Wasm, Widening};
    use crate::kernel::isa::{self, Isa};
    use crate::kernel::{tile, Kernel};

    impl Isa for Wasm<Widening> {
        const FEATURES: &'static str = "simd128";

        /// The build decides: an engine without simd128 refuses to compile the module.
        fn available() -> bool {
            true
        }

        isa::enter!("simd128");
    }

    pub(super) fn kernels() -> [Kernel; 5] {
        tile::kernels::<Wasm<Widening>, 2, 2, 2, 2, 2>(c"bitnet_gemv/wasm-simd128")
    }
}

#[cfg(target_feature = "relaxed-simd")]
mod relaxed {
    use super::simd128::{RelaxedDot, Wasm};
    use crate::kernel::isa::{self, Isa};
    use crate::kernel::{tile, Kernel};

    impl Isa for Wasm<RelaxedDot> {
        const FEATURES: &'static str = "simd128, relaxed-simd";

        /// The build decides: an engine without relaxed SIMD refuses to compile the module.
        fn available() -> bool {
            true
        }

        isa::enter!("simd128,relaxed-simd");
    }

    pub(super) fn kernels() -> [Kernel; 5] {
        tile::kernels::<Wasm<RelaxedDot>, 2, 2, 2, 2, 2>(c"bitnet_gemv/wasm-relaxed-simd128")
    }
}

/// The SIMD128 requantizer when the build has simd128.
pub(crate) fn requant_row() -> Option<crate::kernel::RequantRowFn> {
    #[cfg(target_feature = "simd128")]
    return Some(requant::requant_row);
    #[cfg(not(target_feature = "simd128"))]
    None
}
