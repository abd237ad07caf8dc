//! wasm32 kernels. WebAssembly has no run-time feature detection: the build decides. With
//! `-C target-feature=+simd128` this registers `bitnet_gemm/wasm-simd128` and
//! `bitnet_gemv/wasm-simd128`; with `+simd128,+relaxed-simd` also
//! `bitnet_gemm/wasm-relaxed-simd128` and `bitnet_gemv/wasm-relaxed-simd128`, first. Without
//! simd128 only the reference kernels exist. An engine without a feature refuses to compile a
//! module that uses it, so a running module has what its kernels need (`available` is
//! always true), and a JS loader picks the best build the engine validates (js/src).
//!
//! The GEMVs are the shared tile skeleton ([`crate::kernel::tile`]), the GEMMs the shared
//! panel GEMM ([`crate::kernel::gemm`]), both over [`simd128::Wasm`]; the two builds differ
//! only in the multiply-accumulate ([`crate::kernel::mac::Mac`] for the GEMV,
//! [`crate::kernel::mac::QuadMac`] for the GEMM) and in what it decides about the code
//! around it ([`simd128::Build`], [`simd128::GemmMac`]).

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

// GEMV tiles: 2 rows for one token, 2 x 2 for batches, as AVX2 (engines map v128 onto the 16
// xmm registers, and the plain build keeps two partial sums per (row, token)), but 4 rows for
// one token in the plain build except for TQ1_0, and in both builds for the formats with one
// scale per tensor (relaxed BITNET_B1_58, AMD Zen 3, fastest of 3 interleaved rounds, with
// its planes shifted: 4 rows 174-177 µs, 2 rows 235-250 µs) and Q2_0, which takes their row
// count (relaxed, 2560x2560: 4 rows 317-323 µs, 2 rows 337; 6912x2560 840-844 against
// 897-899; relaxed TQ2_0 keeps 2: 220 against 223 µs with 4). Medians under node 22 had
// measured 4 rows no better (TQ2_0 2560x2560, within the noise); its optimized code alone
// (`--no-liftoff`, AMD Zen 3, 2560x2560, fastest of 3-5 interleaved rounds, 2 rows against
// 4): TQ2_0 426 -> 404 µs, BITNET_B1_58 397 -> 381, I2_S 399 -> 379, I2_S_64 397 -> 378,
// I2_S_R4 697 against 704 (a tie), Q2_0 526 -> 542 (3 % slower; it shared the parameter);
// 6912x2560 TQ2_0 1,143 -> 1,090, BITNET_B1_58 1,073 -> 1,029, Q2_0 1,412 -> 1,460. The
// relaxed build kept 2 then (4: BITNET_B1_58 1.06x, TQ2_0 0.88x, before the shifted planes
// and the rolled TQ2_0 block). TQ1_0: the relaxed build's took one row while its digits
// came one at a time (with two, V8 spilled most of the two rows' digit chains: Intel Xeon,
// 800-813 against 1,076-1,243 µs), and two again once they came in pairs with one partial
// sum per block (AMD Zen 3, node 22 --no-liftoff, fastest of 7 interleaved rounds: 2560x2560
// 410 against 478 µs, 6912x2560 of 3 rounds 1,103 against 1,287 µs).
//
// GEMM register blocks (`gemm::kernels::<S, S, RV, T>`: RV vectors of 4 rows x T tokens): plain
// 2 x 2 (two int32 partial sums per (vector, token), 8 of the 16 xmm registers, as the GEMV's
// batch tiles), relaxed 2 x 4 (one int16 partial sum each, 8 registers; with one quad per
// iteration, AMD Zen 3, BITNET_B1_58 2560x2560 m = 64: 8.2 ms against 8.5 for 2 x 5, 9.5 for
// 2 x 6, 12.5 for 1 x 8). Each GEMM serves
// from the token count from which it beat the same build's GEMV, both forced (Intel Xeon,
// Sapphire Rapids class, node 22, 2560x2560, medians of 2 rounds, GEMV time / GEMM time, after
// the GEMVs' int16 relaxed products and constant planes made them 1.3-2x faster; `bash
// scripts/bench-wasm-gemm.sh --shapes 2560x2560 --tokens 2,3,4,5,6,7,8,10,12,16`):
// - simd128: TQ1_0 from 2 (1.15x at 2), TQ2_0 from 4 (0.98x at 3, 1.00-1.02x at 4, 1.05x at
//   5-6, 1.09-1.11x at 8-16), BITNET_B1_58 from 7 (0.96-0.98x at 5-6, 1.01x at 7, 1.03-1.10x
//   at 8-16), I2_S from 3 (0.96x at 2, 1.02x at 3, 1.05x at 4), I2_S_64 as I2_S (the same
//   loops, not measured), Q2_0 from 7 (0.94x at 5, 1.01-1.06x at 7-10; two runs at 12-16 read
//   0.84-0.86x with the GEMM's time out of line with its neighbours), I2_S_R4 from 4 (0.96x
//   at 3, 1.03x at 4, 1.10x at 6);
// - relaxed: TQ1_0 from 3 (0.99x at 2, 1.46x at 3), TQ2_0 from 3 (0.91x at 2, 1.02x at 3,
//   1.13-1.25x at 4), BITNET_B1_58 from 6 (0.98x at 5, 1.02-1.03x at 6-7, 1.11-1.27x at 8-16),
//   I2_S and I2_S_64 from 3 (0.96x at 2, 1.18x at 3), Q2_0 from 5 (0.94-0.95x at 4, 1.04x at
//   5, 1.13x at 6), I2_S_R4 from 2 (1.07x at 2).
// The simd128 GEMM's activations then came widened (`GemmMac`, 1.33-1.43x faster at m = 64),
// and its TQ2_0, BITNET_B1_58 and I2_S thresholds were measured again (AMD EPYC Zen 3, node
// 22, 2560x2560; `--tokens 2,3,4,5,6 --rounds 2`, then `--tokens 2,3,4 --rounds 4`): TQ2_0
// from 2 (1.89-2.53x at 2: this CPU's plain GEMV runs two tokens at 2.8x one), BITNET_B1_58
// from 3 (0.92-0.93x at 2, 1.07-1.08x at 3, 1.07-1.85x at 4), I2_S from 2 (1.15-1.32x at 2,
// 1.15-1.24x at 3; I2_S_64 with it); Q2_0 (0.91-1.21x at 2-6) and I2_S_R4 (0.62-1.38x)
// were too noisy to move. After the plain single-token tile took 4 rows (same machine,
// `--tokens 2,3 --rounds 2`, medians): TQ2_0 1.15x at 2, I2_S 1.05x at 2, BITNET_B1_58 0.97x
// at 3 (a tie, not moved). The one-scale GEMVs then shifted their odd planes instead of
// keeping them in place (`Simd::PLANES_IN_PLACE`) and took 4 rows per single-token tile in
// both builds, 1.5x faster in the relaxed one; their thresholds again (same machine,
// `--formats BITNET_B1_58,I2_S --tokens 2,3,4,5,6,7,8,10 --rounds 4`, medians): simd128
// BITNET_B1_58 from 5 (0.96x at 3-4, 1.05x at 5, 1.06-1.13x at 6-10), I2_S from 3 (0.97x at
// 2, 1.07-1.16x at 3-10); relaxed BITNET_B1_58 from 8 (0.90x at 6, 1.00x at 7, 1.02x at 8,
// 1.07x at 10), I2_S from 4 (0.98x at 3, 1.11-1.25x at 4-10). After the relaxed TQ2_0
// block became a loop (`Build::ROLLED_BLOCK`), relaxed TQ2_0 from 4 (`--formats TQ2_0 --tokens
// 2,3,4 --rounds 3`: 0.83x at 2, 0.86x at 3, 1.09x at 4). After the GEMMs took one quad per
// iteration (`GemmSimd::ROLLED_QUADS`, 1.07-1.25x at m = 64) and the simd128 I2_S_R4 GEMV
// took 4 rows (2x at m = 1), two runs on a loud host (`--tokens 2,3,4,5,6,8 --rounds 2` and
// `--tokens 2,3,4,6,8 --rounds 2`, medians), ratios of the first / second: simd128
// BITNET_B1_58 from 4 (0.97x / 0.90x at 3, 1.15x / 1.39x at 4, 1.22x / 0.96x at 6), Q2_0
// from 4 (1.30x / 0.87x at 3, 1.16x / 1.26x at 4, 1.24-1.55x / 1.30-1.40x beyond), I2_S
// from 2 (1.68x / 1.12x at 2), I2_S_R4 from 6 (0.85x / 0.91x at 3, 1.06x / 0.98x at 4,
// 1.03x / 1.09x at 6); the others held (simd128 TQ1_0 and TQ2_0 from 2, relaxed TQ1_0 from
// 3, TQ2_0 and I2_S from 4, Q2_0 from 5, BITNET_B1_58 from 8). Relaxed I2_S_R4 had stayed
// on the GEMM from 2 while its GEMV's batch tile computed wrong sums under node 20 with
// `--experimental-wasm-relaxed-simd` (LLVM had fused its one-dot int16 partials into the
// relaxed dot-add that V8 11 computes wrongly, see `RelaxedDot::dot_once`). Folded without
// it, that tile runs 1.13x faster, and relaxed I2_S_R4 serves from 6 (`--formats I2_S_R4
// --tokens 3,4,5,6,7,8 --rounds 3`, then `--tokens 4,5,6,7`, medians on a loud host: 0.88x
// at 3, 0.74x / 1.17x at 4, 0.84x / 0.92x at 5, 1.01x / 1.18x at 6, 1.14x / 1.24x at 7);
// simd128 I2_S_R4 from 4 (1.00x / 0.84x at 3, 1.16x / 1.30x / 1.08x at 4, 1.19x / 1.37x /
// 1.21x at 5; a run before them: 1.04x at 3, 1.15-1.17x at 4-6).

#[cfg(target_feature = "simd128")]
mod plain {
    use super::simd128::{Wasm, Widening};
    use crate::format::Format;
    use crate::kernel::isa::{self, Isa};
    use crate::kernel::{gemm, tile, Kernel};

    impl Isa for Wasm<Widening> {
        const FEATURES: &'static str = "simd128";

        /// The build decides: an engine without simd128 refuses to compile the module.
        fn available() -> bool {
            true
        }

        isa::enter!("simd128");
    }

    /// `bitnet_gemm/wasm-simd128`, then `bitnet_gemv/wasm-simd128`.
    pub(super) fn kernels() -> impl Iterator<Item = Kernel> {
        let every = [
            (Format::Tq1_0, 2),
            (Format::Tq2_0, 2),
            (Format::BitnetB158, 4),
            (Format::I2S, 2),
            (Format::I2S64, 2),
            (Format::I2SR4, 4),
            (Format::Q2_0, 4),
        ];
        let gemm = gemm::kernels::<Wasm<Widening>, Wasm<Widening>, 2, 2>(c"bitnet_gemm/wasm-simd128", &every);
        gemm.into_iter()
            .chain(tile::every_format::<Wasm<Widening>, 4, 2, 2, 2, 2, 4, 2, 2>(c"bitnet_gemv/wasm-simd128"))
    }
}

#[cfg(target_feature = "relaxed-simd")]
mod relaxed {
    use super::simd128::{RelaxedDot, Wasm};
    use crate::format::Format;
    use crate::kernel::isa::{self, Isa};
    use crate::kernel::{gemm, tile, Kernel};

    impl Isa for Wasm<RelaxedDot> {
        const FEATURES: &'static str = "simd128, relaxed-simd";

        /// The build decides: an engine without relaxed SIMD refuses to compile the module.
        fn available() -> bool {
            true
        }

        isa::enter!("simd128,relaxed-simd");
    }

    /// `bitnet_gemm/wasm-relaxed-simd128`, then `bitnet_gemv/wasm-relaxed-simd128`.
    pub(super) fn kernels() -> impl Iterator<Item = Kernel> {
        let every = [
            (Format::Tq1_0, 3),
            (Format::Tq2_0, 4),
            (Format::BitnetB158, 8),
            (Format::I2S, 4),
            (Format::I2S64, 4),
            (Format::I2SR4, 6),
            (Format::Q2_0, 5),
        ];
        let gemm =
            gemm::kernels::<Wasm<RelaxedDot>, Wasm<RelaxedDot>, 2, 4>(c"bitnet_gemm/wasm-relaxed-simd128", &every);
        gemm.into_iter()
            .chain(tile::every_format::<Wasm<RelaxedDot>, 2, 2, 2, 2, 2, 4, 2, 2>(c"bitnet_gemv/wasm-relaxed-simd128"))
    }
}

/// The SIMD128 quantizer when the build has simd128 (whose max |x| bits then vectorize as
/// written).
pub(crate) fn requant() -> Option<crate::kernel::Requant> {
    #[cfg(target_feature = "simd128")]
    return Some(crate::kernel::Requant { abs_max_bits: crate::format::abs_max_bits, quantize: requant::quantize });
    #[cfg(not(target_feature = "simd128"))]
    None
}
