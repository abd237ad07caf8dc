//! x86_64 kernels, chosen at run time: AMX (batches), AVX-512 VNNI, then AVX-VNNI, then
//! AVX2. The last three supply vector operations ([`crate::kernel::tile::Simd`],
//! [`GemmSimd`]) and register the shared GEMV and panel GEMM over them; AMX has a loop nest
//! of its own (`amx`).

mod amx;
mod avx2;
mod avx512vnni;
mod avxvnni;
mod requant;
mod ymm;

use crate::kernel::gemm::GemmSimd;
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
        let bits = u16::from_le_bytes([*p, *p.add(1)]);
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
    }
}

/// Byte arithmetic of the x86 vector widths, from which TQ1_0's digit steps of
/// [`GemmSimd`] are built: x86 has no byte shifts or byte multiplies.
///
/// # Safety
/// Every method needs the CPU features of its ISA.
trait ByteOps: GemmSimd {
    unsafe fn add8(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn subs_u8(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn min_u8(a: Self::V, b: Self::V) -> Self::V;
}

/// [`GemmSimd::top_trit`] as `[q >= 86] + [q >= 171]`, from saturating subtractions.
///
/// # Safety
/// The CPU must have `S`'s features.
#[inline(always)]
unsafe fn top_trit<S: ByteOps>(q: S::V) -> S::V {
    // SAFETY: register operations; the caller guarantees this ISA's features.
    unsafe {
        let one = S::splat8(1);
        S::add8(S::min_u8(S::subs_u8(q, S::splat8(85)), one), S::min_u8(S::subs_u8(q, S::splat8(170)), one))
    }
}

/// [`GemmSimd::times3`] as two additions.
///
/// # Safety
/// The CPU must have `S`'s features.
#[inline(always)]
unsafe fn times3<S: ByteOps>(q: S::V) -> S::V {
    // SAFETY: register operations; the caller guarantees this ISA's features.
    unsafe { S::add8(q, S::add8(q, q)) }
}

/// Best first: AMX (for batches), AVX-512 VNNI, then AVX-VNNI, then AVX2; within an ISA
/// the GEMM first, each GEMM preferred from its `min_tokens` on.
pub(crate) fn kernels() -> Vec<Kernel> {
    let avx = avx512vnni::kernels().chain(avxvnni::kernels()).chain(avx2::kernels());
    amx::kernels().into_iter().chain(avx).collect()
}

/// See [`crate::kernel::amx_status`].
pub(crate) fn amx_status() -> Option<Result<(), &'static str>> {
    amx::status()
}

/// The AVX2 requantizer when this CPU has AVX2 (the division, not the width, bounds it).
pub(crate) fn requant_row() -> Option<crate::kernel::RequantRowFn> {
    requant::available().then_some(requant::requant_row as crate::kernel::RequantRowFn)
}
