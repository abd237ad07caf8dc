//! AVX2's 32-byte vectors ([`Vector`] for `__m256i`) for both skeletons, and the ISAs built
//! on them: [`Ymm`] with the u8 x i8 multiply-accumulate supplied by a [`Mac`], AVX2's
//! `vpmaddubsw` (int16 pair sums, widened by `vpmaddwd`) or AVX-VNNI's `vpdpbusd ymm` (four
//! products into each int32 lane).

use super::vector::{Tq1Block, Vector, X86};
use crate::format::tq1_0;
use crate::kernel::mac::Mac;
use crate::kernel::tile::Pieces;
use std::arch::x86_64::*;

/// 32-byte vectors with the multiply-accumulate `M`.
pub(super) type Ymm<M> = X86<__m256i, M>;

impl Vector for __m256i {
    const W: usize = 32;
    type F = __m256;

    #[inline(always)]
    unsafe fn zero() -> __m256i {
        // SAFETY: register-only AVX, which the caller has (the trait's contract).
        unsafe { _mm256_setzero_si256() }
    }

    #[inline(always)]
    unsafe fn load(p: *const u8) -> __m256i {
        // SAFETY: reads 32 bytes at `p`, readable by the trait's contract; AVX.
        unsafe { _mm256_loadu_si256(p as *const __m256i) }
    }

    #[inline(always)]
    unsafe fn load_partial(p: *const u8, len: usize) -> __m256i {
        // SAFETY: copies the `len < 32` bytes at `p` (readable by the trait's contract) into a
        // local buffer and loads all 32 of its bytes; AVX2.
        unsafe {
            assert!(len < 32);
            let mut buf = [0u8; 32];
            std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), len);
            _mm256_loadu_si256(buf.as_ptr() as *const __m256i)
        }
    }

    #[inline(always)]
    unsafe fn store(p: *mut u8, v: __m256i) {
        // SAFETY: writes 32 bytes at `p`, writable by the trait's contract; AVX.
        unsafe { _mm256_storeu_si256(p as *mut __m256i, v) }
    }

    #[inline(always)]
    unsafe fn splat8(x: u8) -> __m256i {
        // SAFETY: register-only AVX, which the caller has (the trait's contract).
        unsafe { _mm256_set1_epi8(x as i8) }
    }

    #[inline(always)]
    unsafe fn splat32(x: i32) -> __m256i {
        // SAFETY: register-only AVX, which the caller has (the trait's contract).
        unsafe { _mm256_set1_epi32(x) }
    }

    #[inline(always)]
    unsafe fn and(a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: register-only AVX2, which the caller has (the trait's contract).
        unsafe { _mm256_and_si256(a, b) }
    }

    #[inline(always)]
    unsafe fn or(a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: register-only AVX2, which the caller has (the trait's contract).
        unsafe { _mm256_or_si256(a, b) }
    }

    /// Two at a time ([`DigitPairs`]).
    #[inline(always)]
    unsafe fn trits(q: __m256i, n: usize, mut put: impl FnMut(usize, __m256i)) {
        // SAFETY: register-only AVX2, which the caller has (the trait's contract).
        unsafe {
            let k = PairConsts::new();
            let mut digits = DigitPairs::new(q);
            for d in (0..n - n % 2).step_by(2) {
                let (first, second) = digits.pair(&k);
                put(d, first);
                put(d + 1, second);
            }
            if n % 2 == 1 {
                put(n - 1, digits.last(&k));
            }
        }
    }

    #[inline(always)]
    unsafe fn srli16<const N: u32>(x: __m256i) -> __m256i {
        // SAFETY: register-only AVX2, which the caller has (the trait's contract).
        unsafe {
            // The immediate form takes an `i32` const, which `N` cannot be cast to; the
            // match folds away.
            match N {
                2 => _mm256_srli_epi16::<2>(x),
                4 => _mm256_srli_epi16::<4>(x),
                6 => _mm256_srli_epi16::<6>(x),
                _ => unreachable!("the skeletons shift 16-bit lanes by 2, 4 or 6"),
            }
        }
    }

    #[inline(always)]
    unsafe fn srli32<const N: u32>(x: __m256i) -> __m256i {
        // SAFETY: register-only AVX2, which the caller has (the trait's contract). The count
        // goes in a register: the immediate form takes an `i32` const this generic cannot
        // name.
        unsafe { _mm256_srl_epi32(x, _mm_cvtsi32_si128(N as i32)) }
    }

    #[inline(always)]
    unsafe fn slli32<const N: u32>(x: __m256i) -> __m256i {
        // SAFETY: as in `srli32`.
        unsafe { _mm256_sll_epi32(x, _mm_cvtsi32_si128(N as i32)) }
    }

    /// 32-bit and 64-bit interleaves make 4 x 4 blocks within 128-bit lanes; one 128-bit
    /// permute per output joins the halves.
    #[inline(always)]
    unsafe fn transpose(v: &mut [__m256i]) {
        assert_eq!(v.len(), 8);
        // SAFETY: register-only; this ISA's features, which the caller has (the trait's contract).
        unsafe {
            let mut t = [_mm256_setzero_si256(); 8];
            for i in 0..4 {
                t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
                t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
            }
            // u[4h + j], 128-bit lane l: column 4l + j of rows 4h..4h + 4.
            let mut u = [_mm256_setzero_si256(); 8];
            for h in 0..2 {
                u[4 * h] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
                u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
                u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
                u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
            }
            for j in 0..4 {
                v[j] = _mm256_permute2x128_si256::<0x20>(u[j], u[4 + j]);
                v[4 + j] = _mm256_permute2x128_si256::<0x31>(u[j], u[4 + j]);
            }
        }
    }

    #[inline(always)]
    unsafe fn hsum_planes(lo: __m256i, hi: __m256i) -> i32 {
        // SAFETY: register-only AVX2, which the caller has (the trait's contract).
        unsafe {
            let v = _mm256_add_epi32(lo, _mm256_srai_epi32::<2>(hi));
            let x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
            let x = _mm_add_epi32(x, _mm_unpackhi_epi64(x, x));
            _mm_cvtsi128_si32(_mm_add_epi32(x, _mm_shuffle_epi32::<1>(x)))
        }
    }

    #[inline(always)]
    unsafe fn fzero() -> __m256 {
        // SAFETY: register-only AVX, which the caller has (the trait's contract).
        unsafe { _mm256_setzero_ps() }
    }

    #[inline(always)]
    unsafe fn fsplat(x: f32) -> __m256 {
        // SAFETY: register-only AVX, which the caller has (the trait's contract).
        unsafe { _mm256_set1_ps(x) }
    }

    #[inline(always)]
    unsafe fn fmul(a: __m256, b: __m256) -> __m256 {
        // SAFETY: register-only AVX, which the caller has (the trait's contract).
        unsafe { _mm256_mul_ps(a, b) }
    }

    #[inline(always)]
    unsafe fn fmadd(acc: __m256i, s: __m256, f: __m256) -> __m256 {
        // SAFETY: register-only AVX and FMA, which the caller has (the trait's contract).
        unsafe { _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), s, f) }
    }

    #[inline(always)]
    unsafe fn fsum(f: __m256) -> f32 {
        // SAFETY: register-only; this ISA's features, which the caller has (the trait's contract).
        unsafe {
            let x = _mm_add_ps(_mm256_castps256_ps128(f), _mm256_extractf128_ps::<1>(f));
            let x = _mm_add_ps(x, _mm_movehl_ps(x, x));
            _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)))
        }
    }

    #[inline(always)]
    unsafe fn fload(p: *const f32) -> __m256 {
        // SAFETY: reads 8 floats at `p`, readable by the trait's contract; AVX.
        unsafe { _mm256_loadu_ps(p) }
    }

    #[inline(always)]
    unsafe fn fstore(p: *mut f32, f: __m256) {
        // SAFETY: writes 8 floats at `p`, writable by the trait's contract; AVX.
        unsafe { _mm256_storeu_ps(p, f) }
    }
}

/// TQ1_0 bytes being split into their base-3 digits, two at a time. Digit n of a byte `b`
/// is `d_n = ((b * 3^n) mod 256) * 3 >> 8`, so with `t_n = (b * 3^n) mod 256`, `9 t_n = 256
/// (3 d_n + d_(n+1)) + t_(n+2)`: one 16-bit multiply by 9 gives two digits as a pair value
/// (0..8), which one `vpshufb` each splits, and the byte two digits on. Even bytes sit in
/// the high half of their 16-bit lane (`vpmulhuw` reads the pair, `vpmullw` keeps the next
/// byte), odd bytes in the low half (`vpmullw` leaves the pair in the high byte, in place,
/// and the next byte below it); one byte blend joins the pairs. Eight multiplies and 19
/// operations per 32 bytes' five digits (twenty and 30 digit by digit, or about 35
/// operations with byte adds and saturating compares).
#[derive(Clone, Copy)]
struct DigitPairs {
    even: __m256i,
    odd: __m256i,
}

/// The constants of [`DigitPairs`], made once per vector of bytes.
#[derive(Clone, Copy)]
struct PairConsts {
    high: __m256i,
    low: __m256i,
    nine: __m256i,
    three: __m256i,
    /// A pair value `3 d_n + d_(n+1)` to `d_n`, and to `d_(n+1)`.
    first: __m256i,
    second: __m256i,
}

impl PairConsts {
    /// # Safety
    /// AVX2.
    #[inline(always)]
    unsafe fn new() -> Self {
        // SAFETY: register-only AVX2, which the caller has.
        unsafe {
            PairConsts {
                high: _mm256_set1_epi16(0xFF00u16 as i16),
                low: _mm256_set1_epi16(0x00FF),
                nine: _mm256_set1_epi16(9),
                three: _mm256_set1_epi16(3),
                first: _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 0, 0, 1, 1, 1, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0)),
                second: _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0)),
            }
        }
    }
}

impl DigitPairs {
    /// # Safety
    /// AVX2.
    #[inline(always)]
    unsafe fn new(x: __m256i) -> Self {
        // SAFETY: register-only AVX2, which the caller has.
        unsafe { DigitPairs { even: _mm256_slli_epi16::<8>(x), odd: _mm256_srli_epi16::<8>(x) } }
    }

    /// The next two digits of every byte, one per byte each.
    ///
    /// # Safety
    /// AVX2.
    #[inline(always)]
    unsafe fn pair(&mut self, k: &PairConsts) -> (__m256i, __m256i) {
        // SAFETY: register-only AVX2, which the caller has.
        unsafe {
            let odd9 = mullo_epi16(self.odd, k.nine);
            let pairs = _mm256_blendv_epi8(mulhi_epu16(self.even, k.nine), odd9, k.high);
            self.even = mullo_epi16(self.even, k.nine);
            self.odd = _mm256_and_si256(odd9, k.low);
            (_mm256_shuffle_epi8(k.first, pairs), _mm256_shuffle_epi8(k.second, pairs))
        }
    }

    /// The next digit of every byte, the last one taken.
    ///
    /// # Safety
    /// AVX2.
    #[inline(always)]
    unsafe fn last(self, k: &PairConsts) -> __m256i {
        // SAFETY: register-only AVX2, which the caller has.
        unsafe { _mm256_blendv_epi8(mulhi_epu16(self.even, k.three), mullo_epi16(self.odd, k.three), k.high) }
    }
}

impl<M: Mac<__m256i>> Tq1Block<M> for __m256i {
    /// The second load's 32 bytes end 10 past the 54-byte block.
    const OVERREAD: usize = 2 * 32 - tq1_0::BLOCK_BYTES;

    /// Two loads per block and row: `qs[0..32]`, then `qs[32..48]` with `qh` in lanes
    /// 16..20 (and bytes past the block, whose lanes meet zero activations); each split
    /// into its five digits by [`Vector::trits`], which meet the tokens' activations as
    /// they come, in one partial sum per row and token for the block (ten
    /// dots of codes <= 2, within the sixteen of codes <= 3 a partial takes; one per load
    /// cost AVX2 a `vpmaddwd` and a `vpaddd` more per block, row and token: AMD Zen 3,
    /// 2560x2560, m = 1 201.6-202.1 to 198.7-199.5 µs).
    #[inline(always)]
    unsafe fn tq1_block<const R: usize, const T: usize>(
        w: [*const u8; R],
        a: [*const i8; T],
        acc: &mut [[__m256i; T]; R],
    ) {
        // SAFETY: loads 64 bytes at each `w[r]` (the block and `OVERREAD` bytes) and 320
        // prepared bytes at each `a[t]`, readable by the trait's contract; AVX2.
        unsafe {
            for r in 0..R {
                let mut p = acc[r].map(|acc| M::start(acc));
                for chunk in 0..2 {
                    let x = <Self as Vector>::load(w[r].add(32 * chunk));
                    <Self as Vector>::trits(x, 5, |digit, codes| {
                        for t in 0..T {
                            let av = <Self as Vector>::load(a[t].add(chunk * 160 + digit * 32) as *const u8);
                            p[t] = M::dot(p[t], codes, av);
                        }
                    });
                }
                for t in 0..T {
                    acc[r][t] = M::end(p[t], acc[r][t]);
                }
            }
        }
    }
}

/// A two-operand, register-only AVX2 instruction as a function, written out in asm where
/// LLVM would emit something else for its intrinsic.
macro_rules! ymm_asm {
    ($(#[$doc:meta])* $name:ident = $insn:literal) => {
        $(#[$doc])*
        #[inline]
        #[target_feature(enable = "avx2")]
        unsafe fn $name(a: __m256i, b: __m256i) -> __m256i {
            let out: __m256i;
            // SAFETY: a register-only AVX2 instruction (the caller has AVX2), no memory or
            // flags.
            unsafe {
                std::arch::asm!(concat!($insn, " {o}, {a}, {b}"), o = lateout(ymm_reg) out, a = in(ymm_reg) a,
                    b = in(ymm_reg) b, options(pure, nomem, nostack, preserves_flags))
            };
            out
        }
    };
}

ymm_asm!(
    /// `vpmullw`: LLVM turns a multiply by a splat constant into shifts and adds, two
    /// instructions for one.
    mullo_epi16 = "vpmullw"
);

ymm_asm!(
    /// `vpmulhuw`: `_mm256_mulhi_epu16` is generic widening arithmetic in this Rust's
    /// `std::arch`, which LLVM lowers here as zero-extension to 32 bits, `vpmulld`, shifts
    /// and packs — five times the cost of the one instruction.
    mulhi_epu16 = "vpmulhuw"
);

/// Q2_0's blocks two to a vector, one per 128-bit half.
impl<M: Mac<__m256i>> Pieces for Ymm<M>
where
    __m256i: Tq1Block<M>,
{
    #[inline(always)]
    unsafe fn load_pieces(p: *const u8, stride: usize, n: usize) -> __m256i {
        // SAFETY: reads the 16 bytes of each of the `n <= 2` pieces, readable by the trait's
        // contract; AVX2.
        unsafe {
            let lo = _mm_loadu_si128(p as *const __m128i);
            let hi = if n > 1 { _mm_loadu_si128(p.add(stride) as *const __m128i) } else { _mm_setzero_si128() };
            _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(lo), hi)
        }
    }

    #[inline(always)]
    unsafe fn f16_pieces(p: *const u8, stride: usize, n: usize) -> __m256 {
        // SAFETY: reads the 2 bytes of each of the `n <= 2` f16, readable by the trait's
        // contract; F16C and AVX.
        unsafe {
            let hi = if n > 1 { super::f16c(p.add(stride)) } else { 0.0 };
            _mm256_set_m128(_mm_set1_ps(hi), _mm_set1_ps(super::f16c(p)))
        }
    }

    #[inline(always)]
    unsafe fn f32_halves(p: *const f32, n: usize) -> __m256 {
        // SAFETY: reads the `2 n <= 4` floats at `p`, readable by the trait's contract; AVX2.
        unsafe {
            let x = if n > 1 { _mm_loadu_ps(p) } else { _mm_castpd_ps(_mm_load_sd(p as *const f64)) };
            // Lanes 4-7 of the cast are undefined; the spread reads lanes 0-3 only.
            _mm256_permutevar8x32_ps(_mm256_castps128_ps256(x), _mm256_set_epi32(3, 3, 2, 2, 1, 1, 0, 0))
        }
    }
}
