//! AVX-512 VNNI: 64-byte vectors, `vpdpbusd` (u8 x i8, four products into each int32
//! lane) and masked loads for tails.

use super::avxvnni::Dpbusd;
use super::vector::{Tq1Block, Vector, X86};
use crate::format::tq1_0;
use crate::format::Format;
use crate::kernel::isa::{self, Isa};
use crate::kernel::mac::Mac;
use crate::kernel::tile::Pieces;
use crate::kernel::{gemm, tile, Kernel};
use std::arch::x86_64::*;

/// 64-byte vectors with `vpdpbusd zmm`.
pub(super) type Avx512 = X86<__m512i, Dpbusd>;

/// `vpdpbusd zmm` straight into the int32 accumulator, as AVX-VNNI's on ymm.
impl Mac<__m512i> for Dpbusd {
    type P = __m512i;
    const GROUPS: usize = usize::MAX;

    #[inline(always)]
    unsafe fn start(acc: __m512i) -> __m512i {
        acc
    }

    #[inline(always)]
    unsafe fn dot(p: __m512i, u: __m512i, s: __m512i) -> __m512i {
        // SAFETY: register-only AVX-512 VNNI, which the caller has (the trait's contract).
        unsafe { _mm512_dpbusd_epi32(p, u, s) }
    }

    #[inline(always)]
    unsafe fn end(p: __m512i, _acc: __m512i) -> __m512i {
        p
    }
}

impl Isa for Avx512 {
    const FEATURES: &'static str = "avx512f, avx512bw, avx512vnni, f16c, fma";

    fn available() -> bool {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vnni")
            && is_x86_feature_detected!("f16c")
            && is_x86_feature_detected!("fma")
    }

    isa::enter!("avx512f,avx512bw,avx512vnni,f16c,fma");
}

impl Vector for __m512i {
    const W: usize = 64;
    type F = __m512;

    #[inline(always)]
    unsafe fn zero() -> __m512i {
        // SAFETY: register-only AVX-512F, which the caller has (the trait's contract).
        unsafe { _mm512_setzero_si512() }
    }

    #[inline(always)]
    unsafe fn load(p: *const u8) -> __m512i {
        // SAFETY: reads 64 bytes at `p`, readable by the trait's contract; AVX-512F.
        unsafe { _mm512_loadu_si512(p as *const _) }
    }

    #[inline(always)]
    unsafe fn load_partial(p: *const u8, len: usize) -> __m512i {
        // SAFETY: a masked load of the `len < 64` bytes at `p`, readable by the trait's
        // contract; AVX-512BW.
        unsafe {
            assert!(len < 64);
            // Masked-off bytes are neither read nor able to fault.
            _mm512_maskz_loadu_epi8((1u64 << len) - 1, p as *const i8)
        }
    }

    #[inline(always)]
    unsafe fn store(p: *mut u8, v: __m512i) {
        // SAFETY: writes 64 bytes at `p`, writable by the trait's contract; AVX-512F.
        unsafe { _mm512_storeu_si512(p as *mut _, v) }
    }

    #[inline(always)]
    unsafe fn splat8(x: u8) -> __m512i {
        // SAFETY: register-only AVX-512F, which the caller has (the trait's contract).
        unsafe { _mm512_set1_epi8(x as i8) }
    }

    #[inline(always)]
    unsafe fn splat32(x: i32) -> __m512i {
        // SAFETY: register-only AVX-512F, which the caller has (the trait's contract).
        unsafe { _mm512_set1_epi32(x) }
    }

    #[inline(always)]
    unsafe fn and(a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: register-only AVX-512F, which the caller has (the trait's contract).
        unsafe { _mm512_and_si512(a, b) }
    }

    #[inline(always)]
    unsafe fn or(a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: register-only AVX-512F, which the caller has (the trait's contract).
        unsafe { _mm512_or_si512(a, b) }
    }

    /// Digit by digit: `[q >= 86] + [q >= 171]` from saturating subtractions (x86 has no
    /// unsigned byte compare, byte shift or byte multiply), then `3 q` in two byte additions.
    #[inline(always)]
    unsafe fn trits(mut q: __m512i, n: usize, mut put: impl FnMut(usize, __m512i)) {
        // SAFETY: register-only AVX-512BW, which the caller has (the trait's contract).
        unsafe {
            let (one, c85, c170) = (_mm512_set1_epi8(1), _mm512_set1_epi8(85), _mm512_set1_epi8(170u8 as i8));
            for d in 0..n {
                put(
                    d,
                    _mm512_add_epi8(
                        _mm512_min_epu8(_mm512_subs_epu8(q, c85), one),
                        _mm512_min_epu8(_mm512_subs_epu8(q, c170), one),
                    ),
                );
                q = _mm512_add_epi8(q, _mm512_add_epi8(q, q));
            }
        }
    }

    #[inline(always)]
    unsafe fn srli16<const N: u32>(x: __m512i) -> __m512i {
        // SAFETY: register-only AVX-512BW, which the caller has (the trait's contract).
        unsafe { _mm512_srli_epi16::<N>(x) }
    }

    #[inline(always)]
    unsafe fn srli32<const N: u32>(x: __m512i) -> __m512i {
        // SAFETY: register-only AVX-512F, which the caller has (the trait's contract).
        unsafe { _mm512_srli_epi32::<N>(x) }
    }

    #[inline(always)]
    unsafe fn slli32<const N: u32>(x: __m512i) -> __m512i {
        // SAFETY: register-only AVX-512F, which the caller has (the trait's contract).
        unsafe { _mm512_slli_epi32::<N>(x) }
    }

    /// Three stages: 32-bit and 64-bit interleaves make 4 x 4 blocks within 128-bit lanes,
    /// two rounds of 128-bit shuffles move the blocks into place.
    #[inline(always)]
    unsafe fn transpose(v: &mut [__m512i]) {
        // SAFETY: register-only; this ISA's features, which the caller has (the trait's contract).
        unsafe {
            assert_eq!(v.len(), 16);
            let mut t = [_mm512_setzero_si512(); 16];
            for i in 0..8 {
                t[2 * i] = _mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
                t[2 * i + 1] = _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
            }
            // u[4i + j], 128-bit lane l: column 4l + j of rows 4i..4i + 4.
            let mut u = [_mm512_setzero_si512(); 16];
            for i in 0..4 {
                u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
                u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
                u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
                u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
            }
            for j in 0..4 {
                let (a, b, c, d) = (u[j], u[4 + j], u[8 + j], u[12 + j]);
                let ab01 = _mm512_shuffle_i32x4::<0x44>(a, b);
                let ab23 = _mm512_shuffle_i32x4::<0xEE>(a, b);
                let cd01 = _mm512_shuffle_i32x4::<0x44>(c, d);
                let cd23 = _mm512_shuffle_i32x4::<0xEE>(c, d);
                v[j] = _mm512_shuffle_i32x4::<0x88>(ab01, cd01);
                v[4 + j] = _mm512_shuffle_i32x4::<0xDD>(ab01, cd01);
                v[8 + j] = _mm512_shuffle_i32x4::<0x88>(ab23, cd23);
                v[12 + j] = _mm512_shuffle_i32x4::<0xDD>(ab23, cd23);
            }
        }
    }

    #[inline(always)]
    unsafe fn hsum_planes(lo: __m512i, hi: __m512i) -> i32 {
        // SAFETY: register-only AVX-512F, which the caller has (the trait's contract).
        unsafe { _mm512_reduce_add_epi32(_mm512_add_epi32(lo, _mm512_srai_epi32::<2>(hi))) }
    }

    #[inline(always)]
    unsafe fn fzero() -> __m512 {
        // SAFETY: register-only AVX-512F, which the caller has (the trait's contract).
        unsafe { _mm512_setzero_ps() }
    }

    #[inline(always)]
    unsafe fn fsplat(x: f32) -> __m512 {
        // SAFETY: register-only AVX-512F, which the caller has (the trait's contract).
        unsafe { _mm512_set1_ps(x) }
    }

    #[inline(always)]
    unsafe fn fmul(a: __m512, b: __m512) -> __m512 {
        // SAFETY: register-only AVX-512F, which the caller has (the trait's contract).
        unsafe { _mm512_mul_ps(a, b) }
    }

    #[inline(always)]
    unsafe fn fmadd(acc: __m512i, s: __m512, f: __m512) -> __m512 {
        // SAFETY: register-only AVX-512F, which the caller has (the trait's contract).
        unsafe { _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), s, f) }
    }

    #[inline(always)]
    unsafe fn fsum(f: __m512) -> f32 {
        // SAFETY: register-only AVX-512F, which the caller has (the trait's contract).
        unsafe { _mm512_reduce_add_ps(f) }
    }

    #[inline(always)]
    unsafe fn fload(p: *const f32) -> __m512 {
        // SAFETY: reads 16 floats at `p`, readable by the trait's contract; AVX-512F.
        unsafe { _mm512_loadu_ps(p) }
    }

    #[inline(always)]
    unsafe fn fstore(p: *mut f32, f: __m512) {
        // SAFETY: writes 16 floats at `p`, writable by the trait's contract; AVX-512F.
        unsafe { _mm512_storeu_ps(p, f) }
    }
}

/// Bytes a whole-vector load of a TQ1_0 block reads past it (`Tq::OVERREAD`). One load of
/// 64 bytes instead of a masked load of the 52 code bytes: on an AMD Zen 4 the masked
/// `vmovdqu8` cost about 3 cycles more per load (the GEMV's loop copied into a test
/// program, from L1: 13.8 against 10.5 cycles per block and row), and the GEMV ran 1.27x
/// as fast with the plain load (2560x2560, one scale per tensor: 103.5 -> 81.3 µs; with a
/// scale per block 126.6 -> 119.5). The lanes past the code bytes meet zero activations.
/// (The GEMM's panel packer keeps its masked loads: plain ones changed nothing there.)
pub(super) const TQ1_OVERREAD: usize = 64 - tq1_0::BLOCK_BYTES;

/// Only with `vpdpbusd`: its identity below needs exact int32 dot products.
impl Tq1Block<Dpbusd> for __m512i {
    const OVERREAD: usize = TQ1_OVERREAD;

    /// One load covers a block's 52 code bytes. Without extracting digits: with
    /// `q_n = (b * 3^n) mod 256`, digit n is `(3 q_n - q_(n+1)) / 256`, so
    /// `sum code_n * a = (3 sum q_n a - sum q_(n+1) a) / 256` — two `vpdpbusd` per digit
    /// and `q_(n+1) = 3 q_n` in wrapping 8-bit adds, instead of 16-bit multiplies.
    #[inline(always)]
    unsafe fn tq1_block<const R: usize, const T: usize>(
        w: [*const u8; R],
        a: [*const i8; T],
        acc: &mut [[__m512i; T]; R],
    ) {
        // SAFETY: `tq1_sums` needs what the trait's contract gives (the features, readable
        // code bytes and activations); the rest is register-only AVX-512.
        unsafe {
            let zero = _mm512_setzero_si512();
            let mut lo = [[zero; T]; R];
            // The seed `-sum a` joins as `+256 sum a` in the subtracted sum.
            let mut hi = [[zero; T]; R];
            for r in 0..R {
                for t in 0..T {
                    hi[r][t] = _mm512_slli_epi32::<8>(_mm512_sub_epi32(zero, acc[r][t]));
                }
            }
            tq1_sums(w, a, &mut lo, &mut hi);
            for r in 0..R {
                for t in 0..T {
                    acc[r][t] = tq1_lanes(lo[r][t], hi[r][t]);
                }
            }
        }
    }

    /// The identity's two sums along the whole row, combined once at its end
    /// ([`Tq1Block::tq1_row_dot`]): per block only the digits' adds and `vpdpbusd` (20
    /// operations per row and token where [`Tq1Block::tq1_block`] adds six more).
    #[inline(always)]
    unsafe fn tq1_row_block<const R: usize, const T: usize>(
        w: [*const u8; R],
        a: [*const i8; T],
        lo: &mut [[__m512i; T]; R],
        hi: &mut [[__m512i; T]; R],
    ) {
        // SAFETY: the same contract.
        unsafe { tq1_sums(w, a, lo, hi) }
    }

    #[inline(always)]
    unsafe fn tq1_row_dot<const T: usize>(lo: __m512i, hi: __m512i) -> i32 {
        // SAFETY: register-only AVX-512F, which the caller has (the trait's contract).
        unsafe { _mm512_reduce_add_epi32(tq1_lanes(lo, hi)) }
    }
}

/// Adds the digit identity's two sums of one TQ1_0 block per row `w[r]` (52 code bytes) and
/// token `a[t]` (320 prepared bytes): `sum q_n a_n` to `lo`, `sum q_(n+1) a_n` to `hi`.
///
/// # Safety
/// AVX-512F, BW and VNNI; 64 bytes at each `w[r]` (a block and [`TQ1_OVERREAD`] bytes) and
/// the prepared activations are readable.
#[inline(always)]
unsafe fn tq1_sums<const R: usize, const T: usize>(
    w: [*const u8; R],
    a: [*const i8; T],
    lo: &mut [[__m512i; T]; R],
    hi: &mut [[__m512i; T]; R],
) {
    // SAFETY: 64 bytes at each `w[r]` and 320 prepared bytes at each `a[t]`, readable as the
    // caller guarantees; the rest is register-only AVX-512.
    unsafe {
        let zero = _mm512_setzero_si512();
        let mut q = [zero; R];
        for r in 0..R {
            q[r] = <__m512i as Vector>::load(w[r]);
        }
        for digit in 0..5 {
            let mut next = [zero; R];
            for r in 0..R {
                next[r] = _mm512_add_epi8(q[r], opaque(_mm512_add_epi8(q[r], q[r])));
            }
            for t in 0..T {
                let av = _mm512_loadu_si512(a[t].add(digit * 64) as *const _);
                for r in 0..R {
                    lo[r][t] = _mm512_dpbusd_epi32(lo[r][t], q[r], av);
                    hi[r][t] = _mm512_dpbusd_epi32(hi[r][t], next[r], av);
                }
            }
            q = next;
        }
    }
}

/// `(3 lo - hi) / 256` per lane: the dot products of the digits, from [`tq1_sums`]. Exact
/// in wrapping int32 as long as each lane's `3 lo - hi`, 256 times its dot product, is in
/// range: a lane meets 20 digits (at most 2, times activations of at most 128) of each
/// block, so up to about 1,600 blocks (`UNIFORM_MAX_BLOCKS` in tile/loops.rs stops at 1,024).
///
/// # Safety
/// AVX-512F.
#[inline(always)]
unsafe fn tq1_lanes(lo: __m512i, hi: __m512i) -> __m512i {
    // SAFETY: register-only AVX-512F, which the caller has.
    unsafe {
        let lo3 = _mm512_add_epi32(lo, _mm512_add_epi32(lo, lo));
        _mm512_srai_epi32::<8>(_mm512_sub_epi32(lo3, hi))
    }
}

/// Q2_0's blocks four to a vector, one per 128-bit lane.
impl Pieces for Avx512 {
    #[inline(always)]
    unsafe fn load_pieces(p: *const u8, stride: usize, n: usize) -> __m512i {
        // SAFETY: reads the 16 bytes of each of the `n <= 4` pieces, readable by the trait's
        // contract; AVX-512F.
        unsafe {
            let piece = |i: usize| _mm_loadu_si128(p.add(i * stride) as *const __m128i);
            let mut v = _mm512_zextsi128_si512(piece(0));
            if n > 1 {
                v = _mm512_inserti32x4::<1>(v, piece(1));
            }
            if n > 2 {
                v = _mm512_inserti32x4::<2>(v, piece(2));
            }
            if n > 3 {
                v = _mm512_inserti32x4::<3>(v, piece(3));
            }
            v
        }
    }

    /// The `n` f16 gathered into one `vcvtph2ps`, each then spread to its lane's four floats.
    #[inline(always)]
    unsafe fn f16_pieces(p: *const u8, stride: usize, n: usize) -> __m512 {
        // SAFETY: reads the 2 bytes of each of the `n <= 4` f16, readable by the trait's
        // contract; the rest is register-only F16C and AVX-512F.
        unsafe {
            let f16 = |i: usize| u16::from_le_bytes([*p.add(i * stride), *p.add(i * stride + 1)]) as i32;
            let mut h = _mm_cvtsi32_si128(f16(0));
            if n > 1 {
                h = _mm_insert_epi16::<1>(h, f16(1));
            }
            if n > 2 {
                h = _mm_insert_epi16::<2>(h, f16(2));
            }
            if n > 3 {
                h = _mm_insert_epi16::<3>(h, f16(3));
            }
            let spread = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
            _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_cvtph_ps(h)))
        }
    }

    #[inline(always)]
    unsafe fn f32_halves(p: *const f32, n: usize) -> __m512 {
        // SAFETY: the masked load reads only the `2 n <= 8` floats the trait's contract makes
        // readable (masked-off lanes do not fault); the rest is register-only AVX-512F.
        unsafe {
            let x = _mm512_maskz_loadu_ps(((1u32 << (2 * n)) - 1) as u16, p);
            let spread = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
            _mm512_permutexvar_ps(spread, x)
        }
    }
}

/// Returns `v`, hidden from the optimizer: LLVM would otherwise fold `q + q + q` on bytes
/// into a multiply by 3, which AVX-512 lacks for bytes and emulates with `vpmullw` and
/// masks, several times the cost of two `vpaddb`. The empty asm emits no instruction.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn opaque(mut v: __m512i) -> __m512i {
    // SAFETY: an empty template with one register operand reads and writes nothing else.
    unsafe { std::arch::asm!("/* {0} */", inout(zmm_reg) v, options(pure, nomem, nostack, preserves_flags)) };
    v
}

// Register block 3 vectors (48 rows) x 8 tokens: 24 accumulators, 3 weight vectors and a
// broadcast of the 32 zmm. Against 4 x 6 it reads 8 panel bytes per `vpdpbusd` instead of
// 10.7 (the panel streams from L2, whose bandwidth an Intel core with two 512-bit
// `vpdpbusd` ports nearly uses up) for one more load per 24 (Zen 4, one `vpdpbusd` per
// cycle, leaves loads idle either way), and m = 128 splits into whole blocks: on an Intel
// Xeon (Emerald Rapids, KVM, one thread, m = 128, 2560x2560 and 6912x2560) 1-6 points of
// the `vpdpbusd zmm` peak more for every format, measured in one process.
// Thresholds, one thread, thread CPU time: they depend on the CPU more than on the shape.
// - AMD EPYC Zen 4 (2560x2560, 6912x2560, 2560x6912; GEMV time / GEMM time at m = 6-20):
//   the GEMM overtakes the GEMV at 3 tokens for TQ1_0 (whose GEMV extracts digits per token
//   tile; against the VBMI GEMV 1.06-1.10x at 3, 0.90-0.98x at 4, 1.26x at 6), for TQ2_0 at 10-14 on weights in cache (1.06-1.11 at 16) and on the
//   2B4T layer stack from DRAM (`tern bench --model bitnet-b1.58-2b --layers 4 --tokens M
//   --kernel K`, two rounds: a tie at 10-12, the GEMM 1.05-1.10x faster at 14-16 and
//   1.09-1.13x at 20), and after 20 for BITNET_B1_58 (0.94-0.97 at 20; Zen 4 runs 512-bit
//   `vpdpbusd` in two halves, so the GEMM's advantage comes late). Every other vendor keeps
//   these.
// - Intel Xeon (Sapphire Rapids class, KVM; 2560x2560, 6912x2560, 2560x6912, 4096x14336 and
//   14336x4096, 7-21 runs per point): the GEMM wins from 3 tokens for TQ1_0 at every shape,
//   from 8 for TQ2_0 (2560x2560 303 against 367 µs; 4096x14336 2.94 against 3.08 ms; at 6 a
//   tie or the GEMV) and from 10 for BITNET_B1_58 (at 8 the GEMV still wins at k >= 4096:
//   2.28 against 2.52 ms at 4096x14336; at 10 the GEMM wins everywhere: 2.89 against 3.41).
//   At the old thresholds m = 12 ran the GEMV 1.36x (TQ2_0) and 1.2-1.4x (BITNET) slower.
// The formats added later, on the same Xeon (2560x2560, one run per m), for every vendor:
// Q2_0's GEMM wins from 6 tokens (407 against 447 µs; 534 against 616 at 12), I2_S's from
// 12 (a tie, 384 against 381 µs; 443 against 584 at 16); I2_S_R4's too (15 runs per m: 352
// against 349 µs at 12, 369 against 419 at 14).
/// `bitnet_gemm/avx512vnni`, then TQ1_0's `bitnet_gemv/avx512vbmi` (after the next on Intel
/// CPUs), then `bitnet_gemv/avx512vnni` (4 rows per single-token tile, 2 x 4 per batch tile).
pub(super) fn kernels() -> Vec<Kernel> {
    let (tq1, tq2, bitnet) = if super::is_intel() { (3, 8, 10) } else { (3, 12, 24) };
    let gemm = gemm::kernels::<Avx512, Avx512, 3, 8>(
        c"bitnet_gemm/avx512vnni",
        &[
            (Format::Tq1_0, tq1),
            (Format::Tq2_0, tq2),
            (Format::BitnetB158, bitnet),
            (Format::I2S, 12),
            (Format::I2S64, 12),
            (Format::I2SR4, 12),
            (Format::Q2_0, 6),
        ],
    );
    let gemv = tile::every_format::<Avx512, 4, 4, 2, 2, 4, 4, 2, 4>(c"bitnet_gemv/avx512vnni");
    // TQ1_0's table-lookup GEMV (CPUs with VBMI) is preferred where it was measured faster
    // (AMD Zen 4), and registered after this ISA's GEMV on Intel CPUs, where it measured
    // slower (see avx512vbmi.rs).
    let vbmi = super::avx512vbmi::kernels();
    let (first, second) = if super::is_intel() { (gemv, vbmi) } else { (vbmi, gemv) };
    gemm.into_iter().chain(first).chain(second).collect()
}
