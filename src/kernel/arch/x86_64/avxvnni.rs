//! AVX-VNNI (Intel Alder Lake and later client cores, AMD Zen 5 client cores without
//! AVX-512): [`Ymm`] vectors with the VEX `vpdpbusd ymm`, which adds four u8 x i8 products
//! into each int32 lane: no int16 partial sums to widen.

use super::avx2::Maddubs;
use super::ymm::Ymm;
use crate::format::Format;
use crate::kernel::isa::{self, Isa};
use crate::kernel::mac::Mac;
use crate::kernel::{gemm, tile, Kernel};
use std::arch::x86_64::*;

impl Isa for Ymm<Dpbusd> {
    const FEATURES: &'static str = "avx2, fma, f16c, avxvnni";

    fn available() -> bool {
        Ymm::<Maddubs>::available() && is_x86_feature_detected!("avxvnni")
    }

    isa::enter!("avx2,fma,f16c,avxvnni");
}

/// `vpdpbusd ymm` straight into the int32 accumulator.
pub(super) struct Dpbusd;

impl Mac<__m256i> for Dpbusd {
    type P = __m256i;
    /// int32 lanes need no folding.
    const GROUPS: usize = usize::MAX;

    #[inline(always)]
    unsafe fn start(acc: __m256i) -> __m256i {
        acc
    }

    #[inline(always)]
    unsafe fn dot(p: __m256i, u: __m256i, s: __m256i) -> __m256i {
        // SAFETY: the trait's contract (AVX-VNNI).
        unsafe { _mm256_dpbusd_avx_epi32(p, u, s) }
    }

    #[inline(always)]
    unsafe fn end(p: __m256i, _acc: __m256i) -> __m256i {
        p
    }
}

// Register block 2 vectors (16 rows) x 6 tokens: 12 accumulators, 2 weight vectors and a
// broadcast of the 16 ymm registers (no int16 partials to widen, unlike AVX2's 2 x 4).
// Thresholds: the first token count from which the GEMM beats `bitnet_gemv/avxvnni`, both
// forced on the Intel Xeon above (2560x2560, one thread, one process): TQ1_0 at 6 (28 against
// 27 GMAC/s; 20 against 27 at 4), TQ2_0 at 14 (61 against 53; 49 against 53 at 12),
// BITNET_B1_58 at 24 (73 against 68; 64 against 70 at 20).
// Later, on an Intel Xeon (Sapphire Rapids class, KVM, same shape, one run per m): Q2_0 at 8
// (596 against 616 µs; 532 against 509 at 6), I2_S at 12 (529 against 593 µs; 469 against
// 426 at 8). After the panel packer took a block's chunks by constant index (TQ1_0's
// digits unrolled), on that Xeon, 3 rounds, GEMV time / GEMM time: TQ1_0 at 3 (1.27x;
// 0.75x at 2; before the change 0.83x at 3 and 1.21x at 5). I2_S_R4, whose GEMV is
// faster here than I2_S's (one load serves four rows) and whose GEMM is slower (its packer
// transposes a group's stream once per row), 11-15 runs per m: from 20 (805 against 801 µs,
// a tie as at 18; 849 against 972 at 24; 689 against 641 at 16).
//
// The GEMV on AVX2's tiles. Forced on an Intel Xeon (Emerald Rapids, one thread, 2560x2560,
// m = 1) it beats `bitnet_gemv/avx2`: TQ1_0 302 against 336 µs, TQ2_0 119 against 168,
// BITNET_B1_58 104 against 118 (fastest runs, one process).
/// `bitnet_gemm/avxvnni`, then `bitnet_gemv/avxvnni`.
pub(super) fn kernels() -> impl Iterator<Item = Kernel> {
    let gemm = gemm::kernels::<Ymm<Dpbusd>, Ymm<Dpbusd>, 2, 6>(
        c"bitnet_gemm/avxvnni",
        &[
            (Format::Tq1_0, 3),
            (Format::Tq2_0, 14),
            (Format::BitnetB158, 24),
            (Format::I2S, 12),
            (Format::I2S64, 12),
            (Format::I2SR4, 20),
            (Format::Q2_0, 8),
        ],
    );
    gemm.into_iter().chain(tile::every_format::<Ymm<Dpbusd>, 2, 2, 2, 2, 2, 2, 2, 2>(c"bitnet_gemv/avxvnni"))
}
