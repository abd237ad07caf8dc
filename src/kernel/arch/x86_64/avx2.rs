//! AVX2: [`Ymm`] vectors with `vpmaddubsw` into int16 partial sums (in the GEMV as many
//! dots as `tile::Simd::p_dot`'s bound allows, below 2^15), widened by `vpmaddwd`.

use super::ymm::Ymm;
use crate::format::Format;
use crate::kernel::isa::{self, Isa};
use crate::kernel::mac::Mac;
use crate::kernel::{gemm, tile, Kernel};
use std::arch::x86_64::*;

impl Isa for Ymm<Maddubs> {
    const FEATURES: &'static str = "avx2, fma, f16c";

    fn available() -> bool {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c")
    }

    isa::enter!("avx2,fma,f16c");
}

/// `vpmaddubsw` pair sums in int16 lanes, folded into int32 by `vpmaddwd` by ones.
pub(super) struct Maddubs;

impl Mac<__m256i> for Maddubs {
    type P = __m256i;
    /// A pair sum is at most `2 * 3 * 128 = 768` in magnitude (codes <= 3, activations
    /// >= -128): 32 of them (8 groups of four quads) stay below 2^15.
    const GROUPS: usize = 8;

    #[inline(always)]
    unsafe fn start(_acc: __m256i) -> __m256i {
        // SAFETY: the trait's contract (AVX2).
        unsafe { _mm256_setzero_si256() }
    }

    /// u8 x i8 pair sums in int16, added.
    #[inline(always)]
    unsafe fn dot(p: __m256i, u: __m256i, s: __m256i) -> __m256i {
        // SAFETY: the trait's contract (AVX2).
        unsafe { _mm256_add_epi16(p, _mm256_maddubs_epi16(u, s)) }
    }

    /// `vpmaddwd` by ones: each int32 lane gets its two pair sums.
    #[inline(always)]
    unsafe fn end(p: __m256i, acc: __m256i) -> __m256i {
        // SAFETY: the trait's contract (AVX2).
        unsafe { _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1))) }
    }
}

// Register block 2 vectors (16 rows) x 4 tokens: 8 int16 partials, 2 weight vectors, a
// broadcast and a product fit the 16 ymm registers; 2 x 6, 3 x 4 and 4 x 3 spill and measured
// 10-50% slower (Zen 4, 2560x2560, m = 128). Thresholds measured against the AVX2 GEMV on
// the same core: about 8 tokens for every format; TQ1_0 from 3 since the panel packer took a
// block's chunks by constant index (Intel Xeon, Sapphire Rapids class, 2560x2560, 3
// rounds, GEMV time / GEMM time: 1.47x at 3, 0.96x at 2; before the change 0.97x at 3,
// 1.01x at 4, 1.21x at 5).
// I2_S_R4 on that Xeon (2560x2560, 11-15 runs per m): the GEMM from 6 (437 against 469
// µs; 393 against 402 at 5, a tie; 353 against 315 at 4).
// TQ1_0's tiles take 1 row: its digit pairs keep six constants in registers, and 2 rows
// spilled (one token: 94 instructions per block and row against 79; AMD Zen 3, 2560x2560,
// fastest of 3 runs: 206 against 204.5 µs; two tokens: 292 against 271 µs, 6912x2560 784
// against 727). The relaxed wasm build measured the other way at two tokens (wasm32/mod.rs).
/// `bitnet_gemm/avx2`, then `bitnet_gemv/avx2` (2 rows per single-token tile, 2 x 2 per
/// batch tile; TQ1_0 1 and 1 x 2).
pub(super) fn kernels() -> impl Iterator<Item = Kernel> {
    let gemm = gemm::kernels::<Ymm<Maddubs>, Ymm<Maddubs>, 2, 4>(
        c"bitnet_gemm/avx2",
        &[
            (Format::Tq1_0, 3),
            (Format::Tq2_0, 8),
            (Format::BitnetB158, 8),
            (Format::I2S, 8),
            (Format::I2S64, 8),
            (Format::I2SR4, 6),
            (Format::Q2_0, 8),
        ],
    );
    gemm.into_iter().chain(tile::every_format::<Ymm<Maddubs>, 2, 1, 1, 2, 2, 2, 2, 2>(c"bitnet_gemv/avx2"))
}
