//! AVX-VNNI (Intel Alder Lake and later client cores, AMD Zen 5 client cores without
//! AVX-512): [`Ymm`] vectors with the VEX `vpdpbusd ymm`, which adds four u8 x i8 products
//! into each int32 lane: no int16 partial sums to widen.

use super::ymm::{Mac, Ymm};
use std::arch::x86_64::*;

pub(super) const FEATURES: &str = "avx2, fma, f16c, avxvnni";

pub(super) fn available() -> bool {
    super::avx2::available() && is_x86_feature_detected!("avxvnni")
}

/// `vpdpbusd ymm` straight into the int32 accumulator.
pub(super) struct Dpbusd;

impl Mac for Dpbusd {
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

// The GEMV on AVX2's tiles. Forced on an Intel Xeon (Emerald Rapids, one thread, 2560x2560,
// m = 1) it beats `bitnet_gemv/avx2`: TQ1_0 302 against 336 µs, TQ2_0 119 against 168,
// BITNET_B1_58 104 against 118 (fastest runs, one process).
crate::kernel::tile::isa_kernels!(Ymm<Dpbusd>, c"bitnet_gemv/avxvnni", "avx2,fma,f16c,avxvnni", 2, 2, 2);

// Register block 2 vectors (16 rows) x 6 tokens: 12 accumulators, 2 weight vectors and a
// broadcast of the 16 ymm registers (no int16 partials to widen, unlike AVX2's 2 x 4).
// Thresholds: the first token count from which the GEMM beats `bitnet_gemv/avxvnni`, both
// forced on the Intel Xeon above (2560x2560, one thread, one process): TQ1_0 at 6 (28 against
// 27 GMAC/s; 20 against 27 at 4), TQ2_0 at 14 (61 against 53; 49 against 53 at 12),
// BITNET_B1_58 at 24 (73 against 68; 64 against 70 at 20).
crate::kernel::gemm::gemm_kernels!(
    Ymm<Dpbusd>,
    c"bitnet_gemm/avxvnni",
    "avx2,fma,f16c,avxvnni",
    rv = 2,
    t = 6,
    min_tokens = [6, 14, 24]
);
