//! x86_64 kernels, chosen at run time: AVX-512 VNNI, then AVX2.

mod avx2;
mod avx512vnni;
mod gemm;
mod gemv;
mod requant;

use crate::format::Format;
use crate::kernel::{Kernel, KernelFn};
use std::ffi::CStr;

/// One ISA's kernel for each ternary weight format.
fn family(
    name: &'static CStr,
    requires: &'static str,
    available: fn() -> bool,
    runs: [(Format, KernelFn); 3],
) -> impl Iterator<Item = Kernel> {
    runs.into_iter().map(move |(weight, run)| Kernel { name, weight, act: Format::I8Absmax, requires, available, run })
}

/// Best first: AVX-512 VNNI, then AVX2.
pub fn kernels() -> Vec<Kernel> {
    let avx512: [(Format, KernelFn); 3] = [
        (Format::Tq1_0, avx512vnni::tq1_0),
        (Format::Tq2_0, avx512vnni::tq2_0),
        (Format::BitnetB158, avx512vnni::bitnet),
    ];
    let avx2: [(Format, KernelFn); 3] =
        [(Format::Tq1_0, avx2::tq1_0), (Format::Tq2_0, avx2::tq2_0), (Format::BitnetB158, avx2::bitnet)];
    let avx512_gemm: [(Format, KernelFn); 3] = [
        (Format::Tq1_0, avx512vnni::gemm_tq1_0),
        (Format::Tq2_0, avx512vnni::gemm_tq2_0),
        (Format::BitnetB158, avx512vnni::gemm_bitnet),
    ];
    family(c"bitnet_gemv/avx512vnni", avx512vnni::FEATURES, avx512vnni::available, avx512)
        .chain(family(c"bitnet_gemv/avx2", avx2::FEATURES, avx2::available, avx2))
        .chain(family(c"bitnet_gemm/avx512vnni", avx512vnni::FEATURES, avx512vnni::available, avx512_gemm))
        .collect()
}

/// The AVX2 requantizer when this CPU has AVX2 (the division, not the width, bounds it).
pub fn requant_row() -> Option<crate::kernel::RequantRowFn> {
    requant::available().then_some(requant::requant_row as crate::kernel::RequantRowFn)
}
