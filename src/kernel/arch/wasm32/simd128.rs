//! WebAssembly SIMD128: 16-byte vectors, for the wasm GEMVs ([`Simd`]) and GEMMs
//! ([`GemmSimd`]) of both builds. They differ only in how the u8 x i8 products of one weight
//! load reach the int32 lanes ([`Mac`] for the GEMV, [`QuadMac`] for the GEMM):
//! - [`Widening`] (plain SIMD128, `bitnet_gemv/wasm-simd128`): SIMD128 has no u8 x i8
//!   multiply-add, so codes and activations are widened to int16 and multiplied pairwise
//!   into int32 (`i32x4.dot_i16x8_s`), in two partial sums regrouped once per weight load;
//! - [`RelaxedDot`] (`bitnet_gemv/wasm-relaxed-simd128`): `i16x8.relaxed_dot_i8x16_i7x16_s`,
//!   u8 x i8 pair sums in int16 lanes, like `vpmaddubsw`, folded into int32 when a partial
//!   ends, in the GEMV and the GEMM alike. Its 7-bit operand is the weight code (at most
//!   12: BitNet's unshifted odd planes), whose result every engine must give exactly
//!   (relaxed SIMD leaves only operands >= 128 implementation-defined).
//!
//! Either way int32 lane `j` receives the products of bytes `4j..4j + 4` of each vector,
//! the grouping the skeleton's per-lane seeds assume (`prep::lane_sums`).
//!
//! Engines lower SIMD128 to the host's vectors; on x64 some operations have no instruction
//! of their own and cost several (byte shifts, unsigned byte compares), so the code uses
//! 16-bit shifts instead (measured: 2.7x on TQ2_0 for the shift alone), and takes TQ1_0's
//! base-3 digits two at a time from 16-bit multiplies ([`DigitPairs`]).

use crate::format::tq1_0;
use crate::kernel::gemm::GemmSimd;
use crate::kernel::mac::{Mac, QuadMac};
use crate::kernel::tile::{p_end, p_start, Pieces, Simd};
use crate::kernel::weights::{
    tq1_act_block, tq1_slot, tq1_slot_qh_vector, TQ1_QH_VECTOR_ACT_BLOCK, TQ1_QH_VECTOR_SLOT,
};
use core::arch::wasm32::*;
use std::marker::PhantomData;

/// TQ1_0 bytes being split into their base-3 digits two at a time, `R` vectors in step, by
/// AVX2's identity (`arch/x86_64/ymm.rs`): with `t_n = (b * 3^n) mod 256`, digit `d_n = t_n *
/// 3 >> 8` and `9 t_n = 256 (3 d_n + d_(n+1)) + t_(n+2)`. SIMD128 has no 16-bit high
/// multiply, so every byte sits in the low half of a 16-bit lane of its own (even bytes
/// masked, odd bytes shifted down): `i16x8.mul` by 9 leaves the pair value (0..8) in the
/// lane's high byte and the byte two digits on in its low byte. Two digits cost 7
/// operations and a table lookup each, 9 x64 instructions in V8 (13 in the plain build,
/// whose `i8x16.swizzle` adds a saturating add from memory to each `pshufb`), where digit
/// by digit took 16: per digit two saturating subtractions, two `min` and an add (x64 has no
/// unsigned byte compare), and a shift, a mask and an add for `3 t` (SIMD128 has no byte
/// multiply). AMD Zen 3, node 22, TQ1_0 GEMV at 2560x2560, one token: relaxed 889 to 624 µs,
/// plain 810 to 780 µs; the plain GEMM at m = 64 21.6 to 18.6 ms.
struct DigitPairs<'k, const R: usize> {
    even: [v128; R],
    odd: [v128; R],
    k: &'k PairConsts,
}

/// The constants of [`DigitPairs`].
struct PairConsts {
    low: v128,
    nine: v128,
    three: v128,
    /// A pair value `3 d_n + d_(n+1)` to `d_n`, and to `d_(n+1)`.
    first: v128,
    second: v128,
}

impl PairConsts {
    #[inline(always)]
    fn new() -> Self {
        PairConsts {
            low: u16x8_splat(0x00FF),
            nine: u16x8_splat(9),
            three: u16x8_splat(3),
            first: u8x16(0, 0, 0, 1, 1, 1, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0),
            second: u8x16(0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0),
        }
    }
}

impl<'k, const R: usize> DigitPairs<'k, R> {
    #[inline(always)]
    fn new(x: [v128; R], k: &'k PairConsts) -> Self {
        DigitPairs { even: x.map(|x| v128_and(x, k.low)), odd: x.map(|x| u16x8_shr(x, 8)), k }
    }

    /// The next two digits of every byte of each vector as pair values `3 d_n + d_(n+1)`,
    /// which [`PairConsts::first`] and [`PairConsts::second`] split.
    #[inline(always)]
    fn pair(&mut self) -> [v128; R] {
        let k = self.k;
        let mut pairs = [k.low; R];
        for ((pairs, even), odd) in pairs.iter_mut().zip(&mut self.even).zip(&mut self.odd) {
            let (even9, odd9) = (i16x8_mul(*even, k.nine), i16x8_mul(*odd, k.nine));
            *pairs = high_bytes(even9, odd9, k);
            *even = v128_and(even9, k.low);
            *odd = v128_and(odd9, k.low);
        }
        pairs
    }

    /// The next digit of every byte of each vector, the last one taken.
    #[inline(always)]
    fn last(self) -> [v128; R] {
        let k = self.k;
        let mut digit = [k.low; R];
        for ((digit, even), odd) in digit.iter_mut().zip(self.even).zip(self.odd) {
            *digit = high_bytes(i16x8_mul(even, k.three), i16x8_mul(odd, k.three), k);
        }
        digit
    }
}

/// `t * m >> 8` of every byte `t` as a byte, for 16-bit lanes holding `t * m` of the even
/// bytes (`even`) and of the odd ones (`odd`), as [`DigitPairs`] keeps them.
#[inline(always)]
fn high_bytes(even: v128, odd: v128, k: &PairConsts) -> v128 {
    v128_or(u16x8_shr(even, 8), v128_andnot(odd, k.low))
}

/// The first `n` (4 or 5) base-3 digits of every byte of each vector `q[r]`, digit `d` of
/// all of them to `put(d, ..)` (see [`DigitPairs`]). The pairs are written out: as a loop
/// (over `n / 2`, or over `[0, 2]`) LLVM left them rolled in wasm, and V8 reloaded the
/// constants from the stack and checked for interrupts at every pair.
#[inline(always)]
fn trits<const R: usize>(q: [v128; R], n: usize, k: &PairConsts, mut put: impl FnMut(usize, [v128; R])) {
    assert!(n == 4 || n == 5, "TQ1_0's bytes hold 4 or 5 digits");
    let mut digits = DigitPairs::new(q, k);
    let pairs = digits.pair();
    put(0, pairs.map(|p| lookup(k.first, p)));
    put(1, pairs.map(|p| lookup(k.second, p)));
    let pairs = digits.pair();
    put(2, pairs.map(|p| lookup(k.first, p)));
    put(3, pairs.map(|p| lookup(k.second, p)));
    if n == 5 {
        put(4, digits.last());
    }
}

/// The four base-3 digits of each of the 4 `qh` bytes at `p` in one vector, digit `n` of byte
/// `j` in byte `4n + j` (element `240 + 4n + j` of the block, [`tq1_slot_qh_vector`]): the
/// dword in every int32 lane, lane `n`'s bytes multiplied by `3^n` in 16-bit lanes (even
/// and odd bytes apart, as [`DigitPairs`]), then `t * 3 >> 8` of each `t` modulo 256. 12
/// operations and one dot product per token, where the four digits of a vector holding the
/// dword in its first lane took [`trits`]' 20 and four dot products.
///
/// # Safety
/// 4 readable bytes at `p`.
#[inline(always)]
unsafe fn qh_digits(p: *const u8, k: &PairConsts) -> v128 {
    // SAFETY: the caller's 4 bytes.
    let x = unsafe { v128_load32_splat(p as *const u32) };
    // `3^n` in the 16-bit lanes of int32 lane `n`.
    let pow3 = u16x8(1, 1, 3, 3, 9, 9, 27, 27);
    let even = v128_and(i16x8_mul(v128_and(x, k.low), pow3), k.low);
    let odd = v128_and(i16x8_mul(u16x8_shr(x, 8), pow3), k.low);
    high_bytes(i16x8_mul(even, k.three), i16x8_mul(odd, k.three), k)
}

/// `table[i]` for every byte index `i < 16`: `i8x16.relaxed_swizzle` where the build has it
/// (`pshufb`), else `i8x16.swizzle` (`pshufb` after a saturating add that sends indices past
/// 15 to zero, which these never are).
#[inline(always)]
fn lookup(table: v128, i: v128) -> v128 {
    #[cfg(target_feature = "relaxed-simd")]
    return i8x16_relaxed_swizzle(table, i);
    #[cfg(not(target_feature = "relaxed-simd"))]
    i8x16_swizzle(table, i)
}

/// `f + float(acc) * s`, lane by lane: multiply, then add (no fused multiply-add in SIMD128;
/// relaxed SIMD's may or may not fuse, which would make the two builds round differently).
#[inline(always)]
fn fmadd(acc: v128, s: v128, f: v128) -> v128 {
    f32x4_add(f, f32x4_mul(f32x4_convert_i32x4(acc), s))
}

/// Plain SIMD128: codes and activations widened to int16, `i32x4.dot_i16x8_s` (pmaddwd)
/// into two int32 partial sums, of bytes 0..8 and 8..16 (lane j: bytes 2j, 2j + 1).
pub(super) struct Widening;

impl Mac<v128> for Widening {
    type P = (v128, v128);
    /// int32 partial sums need no folding.
    const GROUPS: usize = usize::MAX;

    #[inline(always)]
    unsafe fn start(_acc: v128) -> (v128, v128) {
        (i32x4_splat(0), i32x4_splat(0))
    }

    #[inline(always)]
    unsafe fn dot(p: (v128, v128), u: v128, s: v128) -> (v128, v128) {
        Widening::dot_wide(p, u, i16x8_extend_low_i8x16(s), i16x8_extend_high_i8x16(s))
    }

    #[inline(always)]
    unsafe fn end((lo, hi): (v128, v128), acc: v128) -> v128 {
        // Lanes (0+1, 2+3, 4+5, 6+7) of the low half and the same of the high half,
        // regrouped so that lane j sums bytes 4j..4j + 4.
        let even = i32x4_shuffle::<0, 2, 4, 6>(lo, hi);
        let odd = i32x4_shuffle::<1, 3, 5, 7>(lo, hi);
        i32x4_add(acc, i32x4_add(even, odd))
    }
}

impl Widening {
    /// [`Mac::dot`] with the activations already widened: `s_lo` and `s_hi` are bytes
    /// `0..8` and `8..16` of `s` as int16.
    #[inline(always)]
    fn dot_wide((lo, hi): (v128, v128), u: v128, s_lo: v128, s_hi: v128) -> (v128, v128) {
        let lo = i32x4_add(lo, i32x4_dot_i16x8(u16x8_extend_low_u8x16(u), s_lo));
        let hi = i32x4_add(hi, i32x4_dot_i16x8(u16x8_extend_high_u8x16(u), s_hi));
        (lo, hi)
    }
}

/// The plain GEMM's products. A broadcast quad's two 8-byte halves are the same, so one
/// widened quad serves both halves of a weight load; and a group's four quads are widened
/// by two loads (`i16x8.load8x8_s`, quads 0-1 and 2-3), from which each quad is one 64-bit
/// broadcast (`i64x2` shuffle). Broadcast from memory, each quad cost a load and two
/// widenings: the 2 x 2 block's group took 112 operations, now 100 (LLVM's output, read
/// with `--emit asm`), and the GEMM runs 1.33-1.43x as fast (AMD Zen 3, node 22, m = 64).
impl QuadMac<v128, [v128; 2]> for Widening {
    type Q = (v128, v128);
    const Q_GROUPS: usize = <Widening as Mac<v128>>::GROUPS;

    #[inline(always)]
    unsafe fn q_start(acc: v128) -> (v128, v128) {
        // SAFETY: register-only SIMD128, which the build has.
        unsafe { <Widening as Mac<v128>>::start(acc) }
    }

    #[inline(always)]
    unsafe fn q_dot<const L: i32>(q: (v128, v128), w: v128, [a01, a23]: [v128; 2]) -> (v128, v128) {
        let s = match L {
            0 => i64x2_shuffle::<0, 0>(a01, a01),
            1 => i64x2_shuffle::<1, 1>(a01, a01),
            2 => i64x2_shuffle::<0, 0>(a23, a23),
            _ => i64x2_shuffle::<1, 1>(a23, a23),
        };
        Widening::dot_wide(q, w, s, s)
    }

    #[inline(always)]
    unsafe fn q_end(q: (v128, v128), acc: v128) -> v128 {
        // SAFETY: register-only SIMD128, which the build has.
        unsafe { <Widening as Mac<v128>>::end(q, acc) }
    }
}

/// Quad `L` of the 16 activation bytes at `a` in every int32 lane (`v128.load32_splat`).
///
/// # Safety
/// 16 readable bytes at `a` (any alignment in wasm).
#[cfg(target_feature = "relaxed-simd")]
#[inline(always)]
unsafe fn quad_splat<const L: i32>(a: *const u8) -> v128 {
    // SAFETY: the 4 bytes at `a + 4 L` lie in the 16 the caller vouches for.
    unsafe { v128_load32_splat(a.add(4 * L as usize) as *const u32) }
}

/// The relaxed GEMM's products are its GEMV's multiply-accumulate, with the activation quad
/// broadcast to every lane from memory.
#[cfg(target_feature = "relaxed-simd")]
impl QuadMac<v128, *const u8> for RelaxedDot {
    type Q = v128;
    const Q_GROUPS: usize = <RelaxedDot as Mac<v128>>::GROUPS;

    #[inline(always)]
    unsafe fn q_start(acc: v128) -> v128 {
        // SAFETY: register-only SIMD128 and relaxed SIMD, which the build has.
        unsafe { <RelaxedDot as Mac<v128>>::start(acc) }
    }

    #[inline(always)]
    unsafe fn q_dot<const L: i32>(q: v128, w: v128, a: *const u8) -> v128 {
        // SAFETY: 16 readable bytes at `a` (the trait's contract); the build's features.
        unsafe { <RelaxedDot as Mac<v128>>::dot(q, w, quad_splat::<L>(a)) }
    }

    #[inline(always)]
    unsafe fn q_end(q: v128, acc: v128) -> v128 {
        // SAFETY: register-only, with the build's features.
        unsafe { <RelaxedDot as Mac<v128>>::end(q, acc) }
    }
}

/// Relaxed SIMD's dot product: `i16x8.relaxed_dot_i8x16_i7x16_s` into int16 pair sums,
/// folded into int32 when the partial ends, as AVX2's `vpmaddubsw`.
/// On x64 without AVX-VNNI, V8 (node 22) lowers the int16 form to `pmaddubsw` alone (then
/// `paddw`), but `i32x4.relaxed_dot_i8x16_i7x16_add` to `pmaddubsw`, a `pmaddwd` by a ones
/// vector it rebuilds each time (`pcmpeqd`, `psrlw`) and `paddd`: five instructions for two
/// (disassembled with `--print-wasm-code`). Measured on the GEMM (node 22, AMD EPYC,
/// 2560x2560, m = 64, fastest of two interleaved processes): TQ1_0 19.1 to 13.1 ms, TQ2_0
/// 17.3 to 11.1 ms, BITNET_B1_58 16.2 to 10.6 ms; on the GEMV (node 22, Intel Xeon, m = 1,
/// 2560x2560, medians of two interleaved rounds): TQ2_0 305 to 186 µs, BITNET_B1_58 271-386
/// to 190 µs.
#[cfg(target_feature = "relaxed-simd")]
pub(super) struct RelaxedDot;

#[cfg(target_feature = "relaxed-simd")]
impl Mac<v128> for RelaxedDot {
    type P = v128;
    /// A pair sum is at most `2 * 3 * 128 = 768` in magnitude (codes <= 3, activations
    /// >= -128), four per group: 8 groups are 24,576 < 2^15.
    const GROUPS: usize = 8;

    #[inline(always)]
    unsafe fn start(_acc: v128) -> v128 {
        i16x8_splat(0)
    }

    /// The codes (at most 12) are the 7-bit operand, for which relaxed SIMD specifies one
    /// exact result; the pair sums cannot overflow int16 within a partial (see [`Mac`]).
    #[inline(always)]
    unsafe fn dot(p: v128, u: v128, s: v128) -> v128 {
        i16x8_add(p, i16x8_relaxed_dot_i8x16_i7x16(s, u))
    }

    #[inline(always)]
    unsafe fn end(p: v128, acc: v128) -> v128 {
        i32x4_add(acc, i32x4_extadd_pairwise_i16x8(p))
    }

    /// Folded by `i32x4.dot_i16x8_s` with ones (`pmaddwd`, as V8 lowers `extadd_pairwise`),
    /// which LLVM leaves as it is: the `extadd_pairwise` of one dot it turns into
    /// `i32x4.relaxed_dot_i8x16_i7x16_add_s`, which V8 11 (node 20 with
    /// `--experimental-wasm-relaxed-simd`) computes as twice the dot product without the
    /// accumulator, and V8 12 in five instructions. AMD Zen 3, node 22, I2_S_R4 2560x2560
    /// (its batch tiles): m = 2 399 to 354 µs, m = 4 794 to 717 µs. Not in `end` too: every
    /// tile then held the ones in a register, which made these tiles faster still (313 and
    /// 631 µs) but V8 spilled more elsewhere (Q2_0, m = 1: 315 to 337 µs).
    #[inline(always)]
    unsafe fn dot_once(acc: v128, u: v128, s: v128) -> v128 {
        i32x4_add(acc, i32x4_dot_i16x8(i16x8_relaxed_dot_i8x16_i7x16(s, u), i16x8_splat(1)))
    }
}

/// What else a build's multiply-accumulate decides in the GEMV.
pub(super) trait Build: Mac<v128> {
    /// [`Simd::ROLLED_BLOCK`] for the build.
    const ROLLED_BLOCK: bool;
    /// Whether TQ1_0's `qh` digits come as one vector ([`qh_digits`], activations by
    /// [`tq1_slot_qh_vector`]) rather than four from a load of `qh` alone.
    const QH_VECTOR: bool;
}

/// LLVM keeps the plain build's TQ2_0 block a loop by itself (its body is larger); an
/// opaque count cost 4 % (AMD Zen 3, 2560x2560: 406 against 421 µs).
/// TQ1_0's `qh` as one vector: AMD Zen 3, node 22, 2560x2560, m = 1, fastest of 2-3
/// interleaved rounds: 746-753 -> 636-646 µs.
impl Build for Widening {
    const ROLLED_BLOCK: bool = false;
    const QH_VECTOR: bool = true;
}

/// LLVM unrolled the relaxed build's TQ2_0 block (four loads), and V8 then loaded all of
/// them and their 16 activation vectors first and kept most on the stack; as a loop,
/// one load at a time: 232 against 220 µs at 2560x2560 (AMD Zen 3, m = 1).
#[cfg(target_feature = "relaxed-simd")]
impl Build for RelaxedDot {
    const ROLLED_BLOCK: bool = true;
    /// With it, V8 spilled more vectors in the TQ1_0 tiles, though LLVM's code had 625
    /// operations per two rows' block instead of 700 (AMD Zen 3, node 22, 2560x2560, m = 1,
    /// fastest of 4 interleaved rounds: 410 -> 496 µs; twice the spill moves in a first
    /// form, `--print-wasm-code`).
    const QH_VECTOR: bool = false;
}

/// How a build's GEMM takes a group of four activation quads ([`GemmSimd::A`]): widened
/// into registers ([`Widening`]) or as the address its broadcasts load from ([`RelaxedDot`]).
pub(super) trait GemmMac: Build + QuadMac<v128, Self::A> {
    type A: Copy;
    /// See [`GemmSimd::a_load`].
    ///
    /// # Safety
    /// 16 readable bytes at `p`.
    unsafe fn a_load(p: *const u8) -> Self::A;
}

impl GemmMac for Widening {
    /// Quads 0-1 and 2-3, widened to int16.
    type A = [v128; 2];

    #[inline(always)]
    unsafe fn a_load(p: *const u8) -> [v128; 2] {
        // SAFETY: the 16 bytes at `p` the caller vouches for, 8 per load.
        unsafe { [i16x8_load_extend_i8x8(p as *const i8), i16x8_load_extend_i8x8(p.add(8) as *const i8)] }
    }
}

#[cfg(target_feature = "relaxed-simd")]
impl GemmMac for RelaxedDot {
    /// The address: [`QuadMac::q_dot`] broadcasts from memory.
    type A = *const u8;

    #[inline(always)]
    unsafe fn a_load(p: *const u8) -> *const u8 {
        p
    }
}

/// The SIMD128 vector operations, with the multiply-accumulate `D`.
pub(super) struct Wasm<D>(PhantomData<D>);

impl<D: Build> Simd for Wasm<D> {
    const W: usize = 16;
    type V = v128;
    type F = v128;
    type M = D;
    /// V8 spilled the second set of partial sums (and the activations) of a 2-row tile out
    /// of the 16 xmm registers, and with it the relaxed BITNET_B1_58 GEMV ran at 37 % of
    /// AVX2; the shifts cost less (see docs/wasm.md).
    const PLANES_IN_PLACE: bool = false;
    const ROLLED_BLOCK: bool = D::ROLLED_BLOCK;

    #[inline(always)]
    unsafe fn zero() -> v128 {
        i8x16_splat(0)
    }

    #[inline(always)]
    unsafe fn load(p: *const u8) -> v128 {
        // SAFETY: the trait's contract: 16 readable bytes at `p` (any alignment in wasm).
        unsafe { v128_load(p as *const v128) }
    }

    #[inline(always)]
    unsafe fn load_partial(p: *const u8, len: usize) -> v128 {
        assert!(len < 16);
        let mut buf = [0u8; 16];
        // SAFETY: the trait's contract: `len` readable bytes at `p`; `buf` holds 16.
        unsafe {
            std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), len);
            Self::load(buf.as_ptr())
        }
    }

    #[inline(always)]
    unsafe fn splat8(x: u8) -> v128 {
        u8x16_splat(x)
    }

    #[inline(always)]
    unsafe fn plane2(x: v128, plane: usize, mask3: v128) -> v128 {
        // 16-bit shifts are native (x64 has no byte shift); the mask drops the bits that
        // cross from the neighbouring byte.
        v128_and(u16x8_shr(x, 2 * plane as u32), mask3)
    }

    #[inline(always)]
    unsafe fn and(a: v128, b: v128) -> v128 {
        v128_and(a, b)
    }

    #[inline(always)]
    unsafe fn srl4(x: v128) -> v128 {
        u16x8_shr(x, 4)
    }

    /// Four loads per block: `qs[0..16]`, `qs[16..32]`, `qs[32..48]`, five digit vectors
    /// each, then `qh`: its four digits as one vector ([`qh_digits`]) with
    /// [`Build::QH_VECTOR`], else four digit vectors of its dword alone.
    #[inline(always)]
    unsafe fn tq1_block<const R: usize, const T: usize>(
        w: [*const u8; R],
        a: [*const i8; T],
        acc: &mut [[v128; T]; R],
    ) {
        let k = PairConsts::new();
        // One partial sum for the block's 16 digit vectors (19 without `QH_VECTOR`), not one
        // per load: with codes <= 2 an int16 lane stays within 19 * 2 * 2 * 128 = 9,728, under
        // the 16 dots of codes <= 3 (12,288) of a TQ block that every multiply-accumulate
        // takes (`p_start`). AMD Zen 3, node 22, 2560x2560: relaxed m = 1 618 to 478 µs, m =
        // 2 643 to 597 µs; plain m = 1 776 to 752 µs, m = 2 2.14 to 1.19-1.23 ms (with one
        // partial per load, V8 spilled the 2-token tile's digit pairs: 38 stack moves per
        // load's five digits).
        // SAFETY: register-only SIMD128, which the build has (the trait's contract).
        let mut p = unsafe { p_start::<Self, R, T>(acc) };
        /// Every row's `codes` times every token's activations at `at`.
        ///
        /// # Safety
        /// 16 readable bytes at `a[t] + at` for every token `t`.
        #[inline(always)]
        unsafe fn dots<D: Build, const R: usize, const T: usize>(
            p: &mut [[D::P; T]; R],
            codes: [v128; R],
            a: [*const i8; T],
            at: usize,
        ) {
            for t in 0..T {
                // SAFETY: the caller's 16 bytes.
                let av = unsafe { v128_load(a[t].add(at) as *const v128) };
                for r in 0..R {
                    // SAFETY: register-only SIMD128, which the build has.
                    p[r][t] = unsafe { D::dot(p[r][t], codes[r], av) };
                }
            }
        }
        for chunk in 0..4 {
            let mut q = [i8x16_splat(0); R];
            if chunk == 3 && D::QH_VECTOR {
                for r in 0..R {
                    // SAFETY: the trait's contract: 52 code bytes at `w[r]`.
                    q[r] = unsafe { qh_digits(w[r].add(tq1_0::QS_BYTES), &k) };
                }
                // SAFETY: the trait's contract: `TQ1_ACT_BLOCK` = 256 prepared bytes at `a[t]`.
                unsafe { dots::<D, R, T>(&mut p, q, a, TQ1_QH_VECTOR_SLOT) };
                continue;
            }
            for r in 0..R {
                // SAFETY: the trait's contract: 52 code bytes at `w[r]`.
                q[r] = unsafe {
                    match chunk {
                        3 => v128_load32_zero(w[r].add(tq1_0::QS_BYTES) as *const u32),
                        _ => Self::load(w[r].add(16 * chunk)),
                    }
                };
            }
            // Without `QH_VECTOR`, qh's bytes hold four digits each: the fifth would only
            // meet zero activations.
            trits(q, if chunk == 3 { 4 } else { 5 }, &k, |digit, codes| {
                // SAFETY: the trait's contract: `TQ1_ACT_BLOCK` prepared bytes at `a[t]`, 256
                // with `QH_VECTOR` (digit vectors of chunks 0-2 only), 320 without.
                unsafe { dots::<D, R, T>(&mut p, codes, a, chunk * 80 + digit * 16) }
            });
        }
        // SAFETY: as above.
        unsafe { p_end::<Self, R, T>(&p, acc) };
    }

    const TQ1_ACT_BLOCK: usize = if D::QH_VECTOR { TQ1_QH_VECTOR_ACT_BLOCK } else { tq1_act_block(16) };

    fn tq1_slot(e: usize) -> usize {
        if D::QH_VECTOR {
            tq1_slot_qh_vector(e)
        } else {
            tq1_slot(e, 16)
        }
    }

    #[inline(always)]
    unsafe fn fzero() -> v128 {
        f32x4_splat(0.0)
    }

    #[inline(always)]
    unsafe fn fsplat(x: f32) -> v128 {
        f32x4_splat(x)
    }

    #[inline(always)]
    unsafe fn fmul(a: v128, b: v128) -> v128 {
        f32x4_mul(a, b)
    }

    #[inline(always)]
    unsafe fn fmadd_lanes(acc: v128, s: v128, f: v128) -> v128 {
        fmadd(acc, s, f)
    }

    #[inline(always)]
    unsafe fn fsum(f: v128) -> f32 {
        let pairs = f32x4_add(f, i32x4_shuffle::<2, 3, 0, 1>(f, f));
        f32x4_extract_lane::<0>(f32x4_add(pairs, i32x4_shuffle::<1, 0, 3, 2>(pairs, pairs)))
    }

    #[inline(always)]
    unsafe fn hsum_planes(lo: v128, hi: v128) -> i32 {
        let v = i32x4_add(lo, i32x4_shr(hi, 2));
        let pairs = i32x4_add(v, i32x4_shuffle::<2, 3, 0, 1>(v, v));
        i32x4_extract_lane::<0>(i32x4_add(pairs, i32x4_shuffle::<1, 0, 3, 2>(pairs, pairs)))
    }

    #[inline(always)]
    unsafe fn f16(p: *const u8) -> f32 {
        // SAFETY: the trait's contract: 2 readable bytes at `p`.
        let bits = unsafe { u16::from_le_bytes([*p, *p.add(1)]) };
        half::f16::from_bits(bits).to_f32()
    }

    /// wasm has no prefetch; the engine's loads are all there is.
    #[inline(always)]
    unsafe fn prefetch_l2(_p: *const u8) {}
}

/// Q2_0's blocks one to a vector.
impl<D: Build> Pieces for Wasm<D> {
    #[inline(always)]
    unsafe fn load_pieces(p: *const u8, _stride: usize, n: usize) -> v128 {
        debug_assert_eq!(n, 1);
        // SAFETY: the trait's contract: the one piece's 16 bytes are readable.
        unsafe { v128_load(p as *const v128) }
    }

    #[inline(always)]
    unsafe fn f16_pieces(p: *const u8, _stride: usize, n: usize) -> v128 {
        debug_assert_eq!(n, 1);
        // SAFETY: the trait's contract: the one f16 is readable.
        f32x4_splat(unsafe { Self::f16(p) })
    }

    #[inline(always)]
    unsafe fn f32_halves(p: *const f32, n: usize) -> v128 {
        debug_assert_eq!(n, 1);
        // SAFETY: the trait's contract: the one block's 2 floats (8 bytes) are readable.
        let x = unsafe { v128_load64_zero(p as *const u64) };
        i32x4_shuffle::<0, 0, 1, 1>(x, x)
    }
}

/// The GEMM's operations ([`crate::kernel::gemm`]): four rows per vector, and `D`'s
/// [`QuadMac`] on its form of the activations ([`GemmMac`]).
impl<D: GemmMac> GemmSimd for Wasm<D> {
    const LANES: usize = 4;

    #[inline(always)]
    unsafe fn splat32(x: i32) -> v128 {
        i32x4_splat(x)
    }

    #[inline(always)]
    unsafe fn store(p: *mut u8, v: v128) {
        // SAFETY: writes 16 bytes at `p`, writable by the trait's contract (any alignment
        // in wasm).
        unsafe { v128_store(p as *mut v128, v) }
    }

    /// 32-bit interleaves make 2 x 2 blocks, 64-bit ones move them.
    #[inline(always)]
    unsafe fn transpose(v: &mut [v128]) {
        assert_eq!(v.len(), 4);
        let (ab0, ab1) = (i32x4_shuffle::<0, 4, 1, 5>(v[0], v[1]), i32x4_shuffle::<2, 6, 3, 7>(v[0], v[1]));
        let (cd0, cd1) = (i32x4_shuffle::<0, 4, 1, 5>(v[2], v[3]), i32x4_shuffle::<2, 6, 3, 7>(v[2], v[3]));
        v[0] = i64x2_shuffle::<0, 2>(ab0, cd0);
        v[1] = i64x2_shuffle::<1, 3>(ab0, cd0);
        v[2] = i64x2_shuffle::<0, 2>(ab1, cd1);
        v[3] = i64x2_shuffle::<1, 3>(ab1, cd1);
    }

    #[inline(always)]
    unsafe fn srli32<const N: u32>(x: v128) -> v128 {
        u32x4_shr(x, N)
    }

    #[inline(always)]
    unsafe fn slli32<const N: u32>(x: v128) -> v128 {
        i32x4_shl(x, N)
    }

    #[inline(always)]
    unsafe fn or(a: v128, b: v128) -> v128 {
        v128_or(a, b)
    }

    #[inline(always)]
    unsafe fn trits(q: v128, n: usize, mut put: impl FnMut(usize, v128)) {
        trits([q], n, &PairConsts::new(), |d, [digit]| put(d, digit));
    }

    type A = D::A;
    /// V8 loaded a 2 x 4 block's eight weight vectors and sixteen quads first and kept
    /// most on the stack; one quad at a time it spills nothing (see docs/wasm.md).
    const ROLLED_QUADS: bool = true;

    #[inline(always)]
    unsafe fn a_load(p: *const u8) -> D::A {
        // SAFETY: the trait's contract (16 readable bytes at `p`), the build's features.
        unsafe { D::a_load(p) }
    }

    type Quad = D;

    #[inline(always)]
    unsafe fn fload(p: *const f32) -> v128 {
        // SAFETY: reads 4 floats at `p`, readable by the trait's contract.
        unsafe { v128_load(p as *const v128) }
    }

    #[inline(always)]
    unsafe fn fstore(p: *mut f32, f: v128) {
        // SAFETY: writes 4 floats at `p`, writable by the trait's contract.
        unsafe { v128_store(p as *mut v128, f) }
    }
}
