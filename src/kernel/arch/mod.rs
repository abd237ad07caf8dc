//! SIMD kernels, one folder per architecture, each registering its kernels best first.

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "wasm32")]
pub(crate) mod wasm32;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_64;

use super::Kernel;

pub(crate) fn kernels() -> Vec<Kernel> {
    #[cfg(target_arch = "x86_64")]
    return x86_64::kernels();
    #[cfg(target_arch = "aarch64")]
    return aarch64::kernels();
    #[cfg(target_arch = "wasm32")]
    return wasm32::kernels();
    #[allow(unreachable_code)]
    Vec::new()
}

/// See [`super::amx_status`].
pub(crate) fn amx_status() -> Option<Result<(), &'static str>> {
    #[cfg(target_arch = "x86_64")]
    return x86_64::amx_status();
    #[cfg(not(target_arch = "x86_64"))]
    None
}

pub(crate) fn requant() -> Option<super::Requant> {
    #[cfg(target_arch = "x86_64")]
    return x86_64::requant();
    #[cfg(target_arch = "aarch64")]
    return aarch64::requant();
    #[cfg(target_arch = "wasm32")]
    return wasm32::requant();
    #[allow(unreachable_code)]
    None
}
