//! x86_64 kernels, chosen at run time: AMX (batches), AVX-512 VNNI, then AVX-VNNI, then
//! AVX2. The last three are one generic vector type (`vector::X86`, over `__m256i` in
//! `ymm.rs` and `__m512i` in `avx512vnni.rs`) with a multiply-accumulate, registering the
//! shared GEMV and panel GEMM over it; AMX has a loop nest of its own (`amx`).

mod amx;
mod avx2;
mod avx512vbmi;
mod avx512vnni;
mod avxvnni;
mod requant;
mod vector;
mod ymm;

use crate::kernel::Kernel;
use std::arch::x86_64::*;

/// A block scale stored as f16, converted by F16C (part of every x86 kernel's features).
///
/// # Safety
/// The CPU must have F16C; `p` must have 2 readable bytes.
#[inline(always)]
unsafe fn f16c(p: *const u8) -> f32 {
    // SAFETY: 2 readable bytes at `p` and F16C, as the caller guarantees.
    unsafe {
        // `vmovd` from a general register, written out: for any intrinsic spelling LLVM
        // emits `vpinsrw` into whichever register it last wrote (often the previous
        // conversion's result), which chains every conversion to the one before (the
        // Q2_0 GEMM's packer, four scales per 256 weights, ran 10 % slower at m = 1).
        let bits = u32::from(std::ptr::read_unaligned(p as *const u16));
        let f: __m128;
        std::arch::asm!(
            "vmovd {f}, {bits:e}",
            "vcvtph2ps {f}, {f}",
            bits = in(reg) bits,
            f = out(xmm_reg) f,
            options(pure, nomem, nostack, preserves_flags),
        );
        _mm_cvtss_f32(f)
    }
}

/// Best first: AMX (for batches), AVX-512 VNNI, then AVX-VNNI, then AVX2; within an ISA
/// the GEMM first, each GEMM preferred from its `min_tokens` on.
pub(crate) fn kernels() -> Vec<Kernel> {
    let avx = avx512vnni::kernels().into_iter().chain(avxvnni::kernels()).chain(avx2::kernels());
    amx::kernels().into_iter().chain(avx).collect()
}

/// Whether this is an Intel CPU (CPUID vendor "GenuineIntel"): the AVX-512 VNNI GEMM's
/// thresholds were measured on an Intel Xeon and an AMD Zen 4 and differ (avx512vnni.rs).
fn is_intel() -> bool {
    let id = __cpuid(0);
    let vendor: Vec<u8> = [id.ebx, id.edx, id.ecx].iter().flat_map(|r| r.to_le_bytes()).collect();
    vendor == b"GenuineIntel"
}

/// See [`crate::kernel::amx_status`].
pub(crate) fn amx_status() -> Option<Result<(), &'static str>> {
    amx::status()
}

/// The AVX2 requantizer when this CPU has AVX2 (the division, not the width, bounds it).
pub(crate) fn requant() -> Option<crate::kernel::Requant> {
    requant::available()
        .then_some(crate::kernel::Requant { abs_max_bits: requant::abs_max_bits, quantize: requant::quantize })
}
