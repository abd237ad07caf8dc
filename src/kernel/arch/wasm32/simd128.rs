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
//! 16-bit shifts and saturating byte arithmetic instead (measured: 2.7x on TQ2_0 for the
//! shift alone). TQ1_0's base-3 digits need no multiply: digit `n` of a byte `b` is
//! `q * 3 >> 8` with `q = b * 3^n mod 256`, i.e. `(q >= 86) + (q >= 171)`, and `q` for the
//! next digit is `3 q mod 256` (see [`top_trit`] and [`times3`] for how LLVM is kept from
//! rewriting them into operations SIMD128 lacks).

use crate::kernel::gemm::GemmSimd;
use crate::kernel::mac::{Mac, QuadMac};
use crate::kernel::tile::{Pieces, Simd};
use core::arch::wasm32::*;
use std::marker::PhantomData;

/// The constants of [`top_trit`] (85, 170 and 1 in every byte), out of LLVM's sight. Seeing
/// them, LLVM rewrites `min(q -sat c, 1)` as the compare `q > c`, which SIMD128 has only as
/// `i8x16.gt_u`: four x64 instructions in V8 (`pmaxub`, `pcmpeqb`, and a `pcmpeqb` and `pxor`
/// to invert), ten per digit for the five written here. The cost is a 48-byte stack round
/// trip where they are made: once per block in the GEMV and once per packed vector's digits
/// in the GEMM's packer (`GemmSimd::trits`; with [`times3`], made once per digit vector
/// before, the simd128 TQ1_0 GEMM at m = 64 still went from 30.9 to 18.9 ms).
#[inline(always)]
fn trit_consts() -> [v128; 3] {
    std::hint::black_box([u8x16_splat(85), u8x16_splat(170), u8x16_splat(1)])
}

/// The top base-3 digit `q * 3 >> 8` of every byte, `(q >= 86) + (q >= 171)`, with native
/// byte operations (x64 has no unsigned byte compare): `min(q -sat 85, 1) + min(q -sat 170,
/// 1)`, the constants from [`trit_consts`]. TQ1_0's digits, in both skeletons.
#[inline(always)]
fn top_trit(q: v128, [c85, c170, one]: [v128; 3]) -> v128 {
    i8x16_add(u8x16_min(u8x16_sub_sat(q, c85), one), u8x16_min(u8x16_sub_sat(q, c170), one))
}

/// `3 q mod 256` in every byte: `q + 2 q`, with `2 q` a 16-bit shift that drops the bits
/// crossing bytes. Written as byte additions, LLVM folds `q + q + q` into a byte multiply,
/// which SIMD128 lacks and LLVM then emits as two widening multiplies and a shuffle.
#[inline(always)]
fn times3(q: v128) -> v128 {
    i8x16_add(q, v128_and(i16x8_shl(q, 1), u8x16_splat(0xFE)))
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
/// folded by `i32x4.extadd_pairwise_i16x8_s` when the partial ends, as AVX2's `vpmaddubsw`.
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
}

/// How a build's GEMM takes a group of four activation quads ([`GemmSimd::A`]): widened
/// into registers ([`Widening`]) or as the address its broadcasts load from ([`RelaxedDot`]).
pub(super) trait GemmMac: Mac<v128> + QuadMac<v128, Self::A> {
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

impl<D: Mac<v128>> Simd for Wasm<D> {
    const W: usize = 16;
    type V = v128;
    type F = v128;
    type M = D;

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

    /// Four loads per block: `qs[0..16]`, `qs[16..32]`, `qs[32..48]`, then `qh` in lanes
    /// 0..4, whose bytes hold four digits each.
    #[inline(always)]
    unsafe fn tq1_block<const R: usize, const T: usize>(
        w: [*const u8; R],
        a: [*const i8; T],
        acc: &mut [[v128; T]; R],
    ) {
        let k = trit_consts();
        for chunk in 0..4 {
            let mut q = [i8x16_splat(0); R];
            for r in 0..R {
                // SAFETY: the trait's contract: 52 code bytes at `w[r]`.
                q[r] = unsafe {
                    match chunk {
                        3 => v128_load32_zero(w[r].add(48) as *const u32),
                        _ => Self::load(w[r].add(16 * chunk)),
                    }
                };
            }
            // SAFETY: register-only SIMD128, which the build has (the trait's contract).
            let mut p = unsafe { [[D::start(i8x16_splat(0)); T]; R] };
            for r in 0..R {
                for t in 0..T {
                    // SAFETY: as above.
                    p[r][t] = unsafe { D::start(acc[r][t]) };
                }
            }
            // qh's bytes hold four digits each: the fifth would only meet zero activations.
            for digit in 0..if chunk == 3 { 4 } else { 5 } {
                let mut codes = [i8x16_splat(0); R];
                for r in 0..R {
                    if digit > 0 {
                        q[r] = times3(q[r]);
                    }
                    codes[r] = top_trit(q[r], k);
                }
                for t in 0..T {
                    // SAFETY: the trait's contract: 320 prepared bytes at `a[t]`.
                    let av = unsafe { Self::load(a[t].add(chunk * 80 + digit * 16) as *const u8) };
                    for r in 0..R {
                        // SAFETY: register-only SIMD128, which the build has.
                        p[r][t] = unsafe { D::dot(p[r][t], codes[r], av) };
                    }
                }
            }
            for r in 0..R {
                for t in 0..T {
                    // SAFETY: register-only SIMD128, which the build has.
                    acc[r][t] = unsafe { D::end(p[r][t], acc[r][t]) };
                }
            }
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
impl<D: Mac<v128>> Pieces for Wasm<D> {
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
    unsafe fn trits(mut q: v128, n: usize, mut put: impl FnMut(usize, v128)) {
        let k = trit_consts();
        for d in 0..n {
            put(d, top_trit(q, k));
            q = times3(q);
        }
    }

    type A = D::A;

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
