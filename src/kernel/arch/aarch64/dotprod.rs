//! `bitnet_gemv/neon-dotprod`: `sdot` of codes by activations into int32 lanes. `vdotq_s32`
//! is not stable Rust, so `sdot` is written with `asm!`, compiled with the `dotprod` target
//! feature, and the kernels run only where it is detected.

use super::simd::{Mac, Neon};
use core::arch::aarch64::*;
use core::arch::asm;

pub(super) const FEATURES: &str = "neon, dotprod";

pub(super) fn available() -> bool {
    std::arch::is_aarch64_feature_detected!("dotprod")
}

pub(super) struct Sdot;

impl Mac for Sdot {
    type P = int32x4_t;

    #[inline(always)]
    unsafe fn p_start(acc: uint8x16_t) -> int32x4_t {
        // SAFETY: register-only NEON (the trait's contract).
        unsafe { vreinterpretq_s32_u8(acc) }
    }

    /// Codes are at most 12, so reading them as signed bytes is exact.
    #[inline(always)]
    unsafe fn p_dot(p: int32x4_t, u: uint8x16_t, s: uint8x16_t) -> int32x4_t {
        let mut acc = p;
        // SAFETY: a register-only instruction of the dotprod extension, which the caller
        // has. `.arch_extension`: the assembler must accept `sdot` even where LLVM declines
        // to inline this into a function compiled with the feature.
        unsafe {
            asm!(
                ".arch_extension dotprod",
                "sdot {acc:v}.4s, {u:v}.16b, {s:v}.16b",
                acc = inout(vreg) acc,
                u = in(vreg) u,
                s = in(vreg) s,
                options(pure, nomem, nostack, preserves_flags),
            )
        };
        acc
    }

    #[inline(always)]
    unsafe fn p_end(p: int32x4_t, _acc: uint8x16_t) -> uint8x16_t {
        // SAFETY: register-only NEON (the trait's contract).
        unsafe { vreinterpretq_u8_s32(p) }
    }

    fn lane(byte: usize) -> usize {
        byte / 4
    }
}

/// The `$n` consecutive vectors at the pointer `$p` (a `&mut *const u8`, moved past them),
/// four at a time with one post-incrementing `ld1` of four registers (`$r0..$r3`, which must
/// be consecutive: hence explicit registers, and `asm!`, since LLVM splits `vld1q_u8_x4`
/// into `ldp`s), the rest one by one. The GEMM's runs are 4 weight vectors and 5 token
/// groups: 3 loads instead of 5 `ldp`/`ldr` and their address arithmetic.
macro_rules! ld1_next {
    ($p:expr, $n:expr, $r0:tt, $r1:tt, $r2:tt, $r3:tt) => {{
        let mut q: *const u8 = *$p;
        let mut v = [vdupq_n_u8(0); $n];
        let mut i = 0;
        while i + 4 <= $n {
            asm!(
                concat!("ld1 {{", $r0, ".16b, ", $r1, ".16b, ", $r2, ".16b, ", $r3, ".16b}}, [{q}], #64"),
                q = inout(reg) q,
                out($r0) v[i],
                out($r1) v[i + 1],
                out($r2) v[i + 2],
                out($r3) v[i + 3],
                options(pure, readonly, nostack, preserves_flags),
            );
            i += 4;
        }
        while i < $n {
            v[i] = vld1q_u8(q);
            q = q.add(16);
            i += 1;
        }
        *$p = q;
        v
    }};
}

impl crate::kernel::gemm::GemmSimd for Neon<Sdot> {
    const LANES: usize = 4;

    #[inline(always)]
    unsafe fn splat32(x: i32) -> uint8x16_t {
        // SAFETY: the trait's contract (this ISA's features; the bytes named are valid).
        unsafe { vreinterpretq_u8_s32(vdupq_n_s32(x)) }
    }

    #[inline(always)]
    unsafe fn store(p: *mut u8, v: uint8x16_t) {
        // SAFETY: the trait's contract (this ISA's features; the bytes named are valid).
        unsafe { vst1q_u8(p, v) }
    }

    /// `trn1`/`trn2` on 32-bit lanes make 2 x 2 blocks, on 64-bit lanes move them.
    #[inline(always)]
    unsafe fn transpose(v: &mut [uint8x16_t]) {
        assert_eq!(v.len(), 4);
        // SAFETY: the trait's contract (this ISA's features); register operations only.
        unsafe {
            let (a, b) = (vreinterpretq_u32_u8(v[0]), vreinterpretq_u32_u8(v[1]));
            let (c, d) = (vreinterpretq_u32_u8(v[2]), vreinterpretq_u32_u8(v[3]));
            let (ab0, ab1) = (vreinterpretq_u64_u32(vtrn1q_u32(a, b)), vreinterpretq_u64_u32(vtrn2q_u32(a, b)));
            let (cd0, cd1) = (vreinterpretq_u64_u32(vtrn1q_u32(c, d)), vreinterpretq_u64_u32(vtrn2q_u32(c, d)));
            v[0] = vreinterpretq_u8_u64(vtrn1q_u64(ab0, cd0));
            v[1] = vreinterpretq_u8_u64(vtrn1q_u64(ab1, cd1));
            v[2] = vreinterpretq_u8_u64(vtrn2q_u64(ab0, cd0));
            v[3] = vreinterpretq_u8_u64(vtrn2q_u64(ab1, cd1));
        }
    }

    /// The count goes in a vector (`ushl` by minus it, which LLVM turns into `ushr #N`):
    /// the immediate form takes an `i32` const this generic cannot name.
    #[inline(always)]
    unsafe fn srli32<const N: u32>(x: uint8x16_t) -> uint8x16_t {
        // SAFETY: the trait's contract (this ISA's features); register operations only.
        unsafe { vreinterpretq_u8_u32(vshlq_u32(vreinterpretq_u32_u8(x), vdupq_n_s32(-(N as i32)))) }
    }

    #[inline(always)]
    unsafe fn slli32<const N: u32>(x: uint8x16_t) -> uint8x16_t {
        // SAFETY: as for `srli32`.
        unsafe { vreinterpretq_u8_u32(vshlq_u32(vreinterpretq_u32_u8(x), vdupq_n_s32(N as i32))) }
    }

    #[inline(always)]
    unsafe fn or(a: uint8x16_t, b: uint8x16_t) -> uint8x16_t {
        // SAFETY: the trait's contract (this ISA's features); register operations only.
        unsafe { vorrq_u8(a, b) }
    }

    #[inline(always)]
    unsafe fn add8(a: uint8x16_t, b: uint8x16_t) -> uint8x16_t {
        // SAFETY: the trait's contract (this ISA's features); register operations only.
        unsafe { vaddq_u8(a, b) }
    }

    #[inline(always)]
    unsafe fn subs_u8(a: uint8x16_t, b: uint8x16_t) -> uint8x16_t {
        // SAFETY: the trait's contract (this ISA's features); register operations only.
        unsafe { vqsubq_u8(a, b) }
    }

    #[inline(always)]
    unsafe fn min_u8(a: uint8x16_t, b: uint8x16_t) -> uint8x16_t {
        // SAFETY: the trait's contract (this ISA's features); register operations only.
        unsafe { vminq_u8(a, b) }
    }

    /// Three instructions with byte shifts instead of five ([`super::simd::top_trit`]).
    #[inline(always)]
    unsafe fn top_trit(q: uint8x16_t) -> uint8x16_t {
        // SAFETY: the trait's contract (this ISA's features); register operations only.
        unsafe { super::simd::top_trit(q) }
    }

    /// One `mul` by 3 instead of two additions.
    #[inline(always)]
    unsafe fn times3(q: uint8x16_t) -> uint8x16_t {
        // SAFETY: the trait's contract (this ISA's features); register operations only.
        unsafe { vmulq_u8(q, vdupq_n_u8(3)) }
    }

    type Q = int32x4_t;
    /// `sdot` accumulates int32 directly: no folding.
    const Q_GROUPS: usize = usize::MAX;

    #[inline(always)]
    unsafe fn q_start(acc: uint8x16_t) -> int32x4_t {
        // SAFETY: the trait's contract (this ISA's features); register operations only.
        unsafe { vreinterpretq_s32_u8(acc) }
    }

    /// A register: `sdot` by element takes the quad from one of its four 32-bit lanes.
    type A = int8x16_t;

    #[inline(always)]
    unsafe fn a_load(p: *const u8) -> int8x16_t {
        // SAFETY: the trait's contract (this ISA's features; 16 readable bytes at `p`).
        unsafe { vld1q_s8(p as *const i8) }
    }

    /// Weights in v28-v31 (activations in v24-v27: a group's activations stay live while its
    /// four quads of weights are loaded).
    #[inline(always)]
    unsafe fn load_next<const N: usize>(p: &mut *const u8) -> [uint8x16_t; N] {
        // SAFETY: the trait's contract (`16 N` readable bytes at `*p`, this ISA's features).
        unsafe { ld1_next!(p, N, "v24", "v25", "v26", "v27") }
    }

    #[inline(always)]
    unsafe fn a_load_next<const N: usize>(p: &mut *const u8) -> [int8x16_t; N] {
        // SAFETY: as for `load_next`.
        let v: [uint8x16_t; N] = unsafe { ld1_next!(p, N, "v28", "v29", "v30", "v31") };
        // SAFETY: register-only NEON, which the caller has.
        v.map(|x| unsafe { vreinterpretq_s8_u8(x) })
    }

    /// One `sdot` by element: lane `L` of `a` (four activations) against each int32 lane's
    /// four codes of `w` (at most 3: exact as signed bytes).
    #[inline(always)]
    unsafe fn q_dot<const L: i32>(q: int32x4_t, w: uint8x16_t, a: int8x16_t) -> int32x4_t {
        let mut acc = q;
        // SAFETY: a register-only instruction of the dotprod extension, which the caller
        // has (`.arch_extension` as in `Sdot::p_dot`).
        unsafe {
            asm!(
                ".arch_extension dotprod",
                "sdot {acc:v}.4s, {w:v}.16b, {a:v}.4b[{l}]",
                acc = inout(vreg) acc,
                w = in(vreg) w,
                a = in(vreg) a,
                l = const L,
                options(pure, nomem, nostack, preserves_flags),
            )
        };
        acc
    }

    #[inline(always)]
    unsafe fn q_end(q: int32x4_t, _acc: uint8x16_t) -> uint8x16_t {
        // SAFETY: the trait's contract (this ISA's features); register operations only.
        unsafe { vreinterpretq_u8_s32(q) }
    }

    #[inline(always)]
    unsafe fn fload(p: *const f32) -> float32x4_t {
        // SAFETY: the trait's contract (this ISA's features; the bytes named are valid).
        unsafe { vld1q_f32(p) }
    }

    #[inline(always)]
    unsafe fn fmadd_lanes(acc: uint8x16_t, s: float32x4_t, f: float32x4_t) -> float32x4_t {
        // SAFETY: the trait's contract (this ISA's features); register operations only.
        unsafe { vfmaq_f32(f, vcvtq_f32_s32(vreinterpretq_s32_u8(acc)), s) }
    }

    #[inline(always)]
    unsafe fn fstore(p: *mut f32, f: float32x4_t) {
        // SAFETY: the trait's contract (this ISA's features; the bytes named are valid).
        unsafe { vst1q_f32(p, f) }
    }
}

// 4 x 4 batch tiles: 16 accumulators of NEON's 32 registers; BitNet's split planes need
// two per (row, token), so 4 x 2.
crate::kernel::tile::isa_kernels!(Neon<Sdot>, c"bitnet_gemv/neon-dotprod", "neon,dotprod", 4, 4, 4, bitnet: 4, 2);

// 4 x 5 register blocks: 20 accumulators, 4 weight and 5 activation registers of NEON's 32
// (4 x 4 executes 1-2 more instructions per 1,000 MACs at m = 128). Preferred from the
// token count from which it executes fewer instructions than the dotprod GEMV at every m
// counted (qemu, 256 x 2048; no ARM hardware here, so counts, not timings): 14 for every
// format (docs/arm-instruction-counts.md).
crate::kernel::gemm::gemm_kernels!(
    Neon<Sdot>,
    c"bitnet_gemm/neon-dotprod",
    "neon,dotprod",
    rv = 4,
    t = 5,
    min_tokens = [14, 14, 14]
);
