//! AVX-512 VBMI: TQ1_0's base-3 digits by table lookup (`vpermi2b`), for the GEMV. The
//! vectors, the multiply-accumulate (`vpdpbusd zmm`) and every other format are AVX-512
//! VNNI's (`avx512vnni.rs`); only [`Tq1Block`] differs.
//!
//! A TQ1_0 byte holds five digits. Two 256-entry tables give, per byte, digits 0-3 packed
//! two bits each (the layout of a TQ2_0 or BITNET_B1_58 byte) and digit 4; each lookup is
//! two `vpermi2b` of 128 entries and a blend on the byte's top bit. The packed digits then
//! take BITNET_B1_58's planes (masked in place, one shift), so a block costs five
//! `vpdpbusd` per token where the digit identity of `avx512vnni.rs` needs ten: faster on an
//! AMD Zen 4 (one 512-bit `vpdpbusd` per cycle), slower on an Intel Xeon (two), see
//! [`kernels`].

use super::avx512vnni::TQ1_OVERREAD;
use super::avxvnni::Dpbusd;
use super::vector::{Tq1Block, Vector, X86};
use crate::format::Format;
use crate::kernel::isa::{self, Isa};
use crate::kernel::mac::Mac;
use crate::kernel::{tile, Kernel};
use std::arch::x86_64::*;

/// `vpdpbusd zmm` (AVX-512 VNNI's, unchanged) with TQ1_0's digits from VBMI's byte permutes.
pub(super) struct DigitTables;

/// 64-byte vectors with `vpdpbusd zmm`, TQ1_0's digits looked up.
type Avx512Vbmi = X86<__m512i, DigitTables>;

impl Mac<__m512i> for DigitTables {
    type P = __m512i;
    const GROUPS: usize = <Dpbusd as Mac<__m512i>>::GROUPS;

    #[inline(always)]
    unsafe fn start(acc: __m512i) -> __m512i {
        // SAFETY: the same contract.
        unsafe { <Dpbusd as Mac<__m512i>>::start(acc) }
    }

    #[inline(always)]
    unsafe fn dot(p: __m512i, u: __m512i, s: __m512i) -> __m512i {
        // SAFETY: the same contract.
        unsafe { <Dpbusd as Mac<__m512i>>::dot(p, u, s) }
    }

    #[inline(always)]
    unsafe fn end(p: __m512i, acc: __m512i) -> __m512i {
        // SAFETY: the same contract.
        unsafe { <Dpbusd as Mac<__m512i>>::end(p, acc) }
    }
}

impl Isa for Avx512Vbmi {
    const FEATURES: &'static str = "avx512f, avx512bw, avx512vbmi, avx512vnni, f16c, fma";

    fn available() -> bool {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vbmi")
            && is_x86_feature_detected!("avx512vnni")
            && is_x86_feature_detected!("f16c")
            && is_x86_feature_detected!("fma")
    }

    isa::enter!("avx512f,avx512bw,avx512vbmi,avx512vnni,f16c,fma");
}

/// Digit `n` of a TQ1_0 byte `b`: `((b * 3^n) mod 256) * 3 >> 8` (docs/design.md §1).
const fn digit(b: usize, n: u32) -> u8 {
    (((b * 3usize.pow(n)) % 256 * 3) >> 8) as u8
}

/// Per byte value: digits 0-3, digit `n` at bit shift `2 n`.
const PACKED: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = digit(b, 0) | digit(b, 1) << 2 | digit(b, 2) << 4 | digit(b, 3) << 6;
        b += 1;
    }
    t
};

/// Per byte value: digit 4 (0 for every `qh` byte, which holds four digits).
const FIFTH: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = digit(b, 4);
        b += 1;
    }
    t
};

/// `table[v]` for every byte `v` of `v`: the low 128 entries by one `vpermi2b`, the high by
/// another, chosen by the bytes' top bits `top`.
///
/// # Safety
/// AVX-512 VBMI and BW.
#[inline(always)]
unsafe fn lookup(table: &[__m512i; 4], v: __m512i, top: __mmask64) -> __m512i {
    // SAFETY: register-only AVX-512 VBMI and BW, which the caller has.
    unsafe {
        let low = _mm512_permutex2var_epi8(table[0], v, table[1]);
        let high = _mm512_permutex2var_epi8(table[2], v, table[3]);
        _mm512_mask_blend_epi8(top, low, high)
    }
}

/// The four 64-byte quarters of a 256-entry table. (No closures in these functions: one
/// that is not inlined is compiled without the ISA's target features.)
///
/// # Safety
/// AVX-512F.
#[inline(always)]
unsafe fn quarters(table: &[u8; 256]) -> [__m512i; 4] {
    let p = table.as_ptr();
    // SAFETY: the loads read the table's 256 bytes; AVX-512F, which the caller has.
    unsafe {
        [
            _mm512_loadu_si512(p as *const _),
            _mm512_loadu_si512(p.add(64) as *const _),
            _mm512_loadu_si512(p.add(128) as *const _),
            _mm512_loadu_si512(p.add(192) as *const _),
        ]
    }
}

/// Digits by table lookup; the activations in the slots of [`Simd::tq1_slot`]'s default
/// (digit `n` of byte `j` at `64 n + j`), as for the identity of `avx512vnni.rs`.
///
/// [`Simd::tq1_slot`]: crate::kernel::tile::Simd::tq1_slot
impl Tq1Block<DigitTables> for __m512i {
    const OVERREAD: usize = TQ1_OVERREAD;

    #[inline(always)]
    unsafe fn tq1_block<const R: usize, const T: usize>(
        w: [*const u8; R],
        a: [*const i8; T],
        acc: &mut [[__m512i; T]; R],
    ) {
        // SAFETY: 64 bytes at each `w[r]` (the block and `TQ1_OVERREAD` bytes, whose lanes
        // meet zero activations) and 320 prepared bytes at each `a[t]`, readable by the
        // trait's contract; the rest is register-only AVX-512 with VBMI and VNNI, which the
        // caller has.
        unsafe {
            let (packed, fifth) = (quarters(&PACKED), quarters(&FIFTH));
            let (m03, m0c) = (_mm512_set1_epi8(0x03), _mm512_set1_epi8(0x0C));
            for r in 0..R {
                let v = <Self as Vector>::load(w[r]);
                let top = _mm512_movepi8_mask(v);
                let digits = lookup(&packed, v, top);
                let d4 = lookup(&fifth, v, top);
                let high = _mm512_srli_epi16::<4>(digits);
                // Digits 1 and 3 masked in place: 4 times their dot products, in `hi`.
                let (d0, d1) = (_mm512_and_si512(digits, m03), _mm512_and_si512(digits, m0c));
                let (d2, d3) = (_mm512_and_si512(high, m03), _mm512_and_si512(high, m0c));
                for t in 0..T {
                    let plane = [0, 1, 2, 3, 4].map(|n| a[t].add(64 * n) as *const __m512i);
                    let lo = _mm512_dpbusd_epi32(acc[r][t], d0, _mm512_loadu_si512(plane[0]));
                    let lo = _mm512_dpbusd_epi32(lo, d2, _mm512_loadu_si512(plane[2]));
                    let lo = _mm512_dpbusd_epi32(lo, d4, _mm512_loadu_si512(plane[4]));
                    let hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), d1, _mm512_loadu_si512(plane[1]));
                    let hi = _mm512_dpbusd_epi32(hi, d3, _mm512_loadu_si512(plane[3]));
                    // Exact: every lane of `hi` is a multiple of 4.
                    acc[r][t] = _mm512_add_epi32(lo, _mm512_srai_epi32::<2>(hi));
                }
            }
        }
    }

    /// Along a row of one scale, AVX-512 VNNI's digit identity for one token: with no sums
    /// to combine per block it takes 20 operations per block and row and no lookups, 1.24x
    /// as fast as the lookups on an AMD Zen 4 (2560x2560: 81 against 100 µs). Batch tiles
    /// share each lookup between their tokens and keep them (m = 2: 137 against 155 µs).
    #[inline(always)]
    unsafe fn tq1_row_block<const R: usize, const T: usize>(
        w: [*const u8; R],
        a: [*const i8; T],
        lo: &mut [[__m512i; T]; R],
        hi: &mut [[__m512i; T]; R],
    ) {
        // SAFETY: the same contract (the same features but VBMI, the same activation slots
        // and `OVERREAD`).
        unsafe {
            if T == 1 {
                <__m512i as Tq1Block<Dpbusd>>::tq1_row_block::<R, T>(w, a, lo, hi)
            } else {
                <__m512i as Tq1Block<DigitTables>>::tq1_block::<R, T>(w, a, lo)
            }
        }
    }

    #[inline(always)]
    unsafe fn tq1_row_dot<const T: usize>(lo: __m512i, hi: __m512i) -> i32 {
        // SAFETY: the same contract.
        unsafe {
            if T == 1 {
                <__m512i as Tq1Block<Dpbusd>>::tq1_row_dot::<T>(lo, hi)
            } else {
                <__m512i as Vector>::hsum_planes(lo, hi)
            }
        }
    }
}

/// `bitnet_gemv/avx512vbmi`: TQ1_0's GEMV (by I8_ABSMAX and I8_BLOCK256), with AVX-512
/// VNNI's tiles (4 rows for one token, 2 x 4 for batches; 2 or 8 rows, 1 x 4 and 2 x 2 measured
/// no better). Against `bitnet_gemv/avx512vnni` on an AMD EPYC Zen 4 (one thread, `tern bench
/// --format TQ1_0 --shape S --tokens M --kernel ...`, two rounds; 2560x2560, 6912x2560 and
/// 2560x6912): 1.08x as fast at one token (116 against 126 µs at 2560x2560; 112 against 120
/// since both load whole vectors, and a tie with one scale per tensor, where one token takes
/// the identity here too), 1.20-1.26x at two,
/// 1.15-1.18x at three, 1.39-1.42x at four; the decode of the 2B4T layer stack 1.07x. Three
/// tokens are the GEMM's (1.06-1.10x faster), four a near tie (the GEMV 1.02-1.10x faster).
/// On an Intel Xeon (Emerald Rapids, two 512-bit `vpdpbusd` ports; same command, three
/// interleaved rounds) it is 1.10x slower than `bitnet_gemv/avx512vnni` at one token (161
/// against 146.5 µs at 2560x2560, 432 against 393 at 6912x2560): the digit identity's extra
/// `vpdpbusd` have a second port there, and the permutes issue on one (port 5 in LLVM's Ice
/// Lake server model). So `kernels` in `avx512vnni.rs` lists it after that ISA's GEMV on
/// Intel CPUs.
pub(super) fn kernels() -> Vec<Kernel> {
    tile::kernels::<Avx512Vbmi, 4, 4, 2, 2, 4, 4, 2, 4>(c"bitnet_gemv/avx512vbmi", &[Format::Tq1_0])
}
