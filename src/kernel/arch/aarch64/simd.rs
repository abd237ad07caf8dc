//! NEON's vector operations for the tile skeleton ([`Simd`]): 16-byte vectors, the
//! multiply-accumulate supplied by a [`Mac`] (`sdot`, or `smlal` for CPUs without dotprod).

use crate::format::tq1_0;
use crate::kernel::gemm::GemmSimd;
use crate::kernel::mac::{Mac, QuadMac};
use crate::kernel::tile::{Pieces, Simd};
use crate::kernel::weights::{tq1_slot_qh_vector, TQ1_QH_VECTOR_ACT_BLOCK, TQ1_QH_VECTOR_SLOT};
use core::arch::aarch64::*;
use core::arch::asm;
use std::marker::PhantomData;

/// NEON with the multiply-accumulate `M`.
pub(super) struct Neon<M>(PhantomData<M>);

/// `3^n` for the TQ1_0 digits.
const POW3: [u8; 5] = [1, 3, 9, 27, 81];

/// Lane `4n + i` multiplies qh byte i by 3^n: digit n of qh[i] is element `240 + 4n + i`.
const QH_POW3: [u8; 16] = [1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27];

/// Digit n of a TQ1_0 byte b is `(q * 3) >> 8` with `q = (b * 3^n) mod 256`; computed as
/// `((q + (q >> 1)) >> 1) >> 6` in 8-bit lanes: flooring `q / 2` before the halving add
/// loses a half that can never carry `q + q/2` across a multiple of 128.
///
/// # Safety
/// The CPU must have NEON.
#[inline(always)]
pub(super) unsafe fn top_trit(q: uint8x16_t) -> uint8x16_t {
    // SAFETY: register-only NEON, which the caller has.
    unsafe { vshrq_n_u8::<6>(vhaddq_u8(q, vshrq_n_u8::<1>(q))) }
}

/// Digit `digit` (< 5) of every TQ1_0 `qs` byte of `x`.
///
/// # Safety
/// The CPU must have NEON.
#[inline(always)]
pub(super) unsafe fn tq1_digit(x: uint8x16_t, digit: usize) -> uint8x16_t {
    // SAFETY: register-only NEON, which the caller has.
    unsafe { top_trit(if digit == 0 { x } else { vmulq_u8(x, vdupq_n_u8(POW3[digit])) }) }
}

/// The four digits of the 4 `qh` bytes of the TQ1_0 block at `block`: digit n of byte i in
/// lane `4n + i` (elements `240 + 4n + i`).
///
/// # Safety
/// The CPU must have NEON; `block` must have a whole TQ1_0 block's bytes.
#[inline(always)]
pub(super) unsafe fn tq1_qh(block: *const u8) -> uint8x16_t {
    // SAFETY: the 4 `qh` bytes lie in the block; NEON, which the caller has.
    unsafe {
        let qh = std::ptr::read_unaligned(block.add(tq1_0::QS_BYTES) as *const u32);
        top_trit(vmulq_u8(vreinterpretq_u8_u32(vdupq_n_u32(qh)), vld1q_u8(QH_POW3.as_ptr())))
    }
}

impl<M: Mac<uint8x16_t>> Simd for Neon<M> {
    const W: usize = 16;
    type V = uint8x16_t;
    type F = float32x4_t;
    type M = M;

    #[inline(always)]
    unsafe fn zero() -> uint8x16_t {
        // SAFETY: register-only NEON, which the caller has (the trait's contract).
        unsafe { vdupq_n_u8(0) }
    }

    #[inline(always)]
    unsafe fn load(p: *const u8) -> uint8x16_t {
        // SAFETY: reads 16 bytes at `p`, readable by the trait's contract; NEON.
        unsafe { vld1q_u8(p) }
    }

    #[inline(always)]
    unsafe fn load_partial(p: *const u8, len: usize) -> uint8x16_t {
        // SAFETY: copies the `len < 16` bytes at `p` (readable by the trait's contract) into a
        // local buffer and loads all 16 of its bytes; NEON.
        unsafe {
            assert!(len < 16);
            let mut buf = [0u8; 16];
            std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), len);
            vld1q_u8(buf.as_ptr())
        }
    }

    #[inline(always)]
    unsafe fn splat8(x: u8) -> uint8x16_t {
        // SAFETY: register-only NEON, which the caller has (the trait's contract).
        unsafe { vdupq_n_u8(x) }
    }

    #[inline(always)]
    unsafe fn plane2(x: uint8x16_t, plane: usize, mask3: uint8x16_t) -> uint8x16_t {
        // SAFETY: register-only NEON, which the caller has (the trait's contract).
        unsafe {
            match plane {
                0 => vandq_u8(x, mask3),
                1 => vandq_u8(vshrq_n_u8::<2>(x), mask3),
                2 => vandq_u8(vshrq_n_u8::<4>(x), mask3),
                // The top plane needs no mask.
                _ => vshrq_n_u8::<6>(x),
            }
        }
    }

    #[inline(always)]
    unsafe fn and(a: uint8x16_t, b: uint8x16_t) -> uint8x16_t {
        // SAFETY: register-only NEON, which the caller has (the trait's contract).
        unsafe { vandq_u8(a, b) }
    }

    #[inline(always)]
    unsafe fn srl4(x: uint8x16_t) -> uint8x16_t {
        // SAFETY: register-only NEON, which the caller has (the trait's contract).
        unsafe { vshrq_n_u8::<4>(x) }
    }

    /// The 48 `qs` bytes in three loads of five digits each (activations as by default),
    /// then the 4 `qh` bytes' four digits in one vector ([`QH_POW3`]).
    #[inline(always)]
    unsafe fn tq1_block<const R: usize, const T: usize>(
        w: [*const u8; R],
        a: [*const i8; T],
        acc: &mut [[uint8x16_t; T]; R],
    ) {
        // SAFETY: the trait's contract: 52 code bytes at every `w[r]` (the `qh` read is 4
        // bytes), `TQ1_ACT_BLOCK` = 256 prepared bytes at every `a[t]`; NEON.
        unsafe {
            let mut p = [[M::start(vdupq_n_u8(0)); T]; R];
            for r in 0..R {
                for t in 0..T {
                    p[r][t] = M::start(acc[r][t]);
                }
            }
            let mut codes = [vdupq_n_u8(0); R];
            for chunk in 0..3 {
                let mut x = [vdupq_n_u8(0); R];
                for r in 0..R {
                    x[r] = vld1q_u8(w[r].add(16 * chunk));
                }
                for digit in 0..5 {
                    for r in 0..R {
                        codes[r] = tq1_digit(x[r], digit);
                    }
                    for t in 0..T {
                        let av = vld1q_u8(a[t].add(80 * chunk + 16 * digit) as *const u8);
                        for r in 0..R {
                            p[r][t] = M::dot(p[r][t], codes[r], av);
                        }
                    }
                }
            }
            for r in 0..R {
                codes[r] = tq1_qh(w[r]);
            }
            for t in 0..T {
                let av = vld1q_u8(a[t].add(TQ1_QH_VECTOR_SLOT) as *const u8);
                for r in 0..R {
                    p[r][t] = M::dot(p[r][t], codes[r], av);
                }
            }
            for r in 0..R {
                for t in 0..T {
                    acc[r][t] = M::end(p[r][t], acc[r][t]);
                }
            }
        }
    }

    const TQ1_ACT_BLOCK: usize = TQ1_QH_VECTOR_ACT_BLOCK;

    fn tq1_slot(e: usize) -> usize {
        tq1_slot_qh_vector(e)
    }

    #[inline(always)]
    unsafe fn fzero() -> float32x4_t {
        // SAFETY: register-only NEON, which the caller has (the trait's contract).
        unsafe { vdupq_n_f32(0.0) }
    }

    #[inline(always)]
    unsafe fn fsplat(x: f32) -> float32x4_t {
        // SAFETY: register-only NEON, which the caller has (the trait's contract).
        unsafe { vdupq_n_f32(x) }
    }

    #[inline(always)]
    unsafe fn fmul(a: float32x4_t, b: float32x4_t) -> float32x4_t {
        // SAFETY: register-only NEON, which the caller has (the trait's contract).
        unsafe { vmulq_f32(a, b) }
    }

    #[inline(always)]
    unsafe fn fmadd_lanes(acc: uint8x16_t, s: float32x4_t, f: float32x4_t) -> float32x4_t {
        // SAFETY: the trait's contract (this ISA's features); register operations only.
        unsafe { vfmaq_f32(f, vcvtq_f32_s32(vreinterpretq_s32_u8(acc)), s) }
    }

    #[inline(always)]
    unsafe fn fsum(f: float32x4_t) -> f32 {
        // SAFETY: register-only NEON, which the caller has (the trait's contract).
        unsafe { vaddvq_f32(f) }
    }

    #[inline(always)]
    unsafe fn hsum_planes(lo: uint8x16_t, hi: uint8x16_t) -> i32 {
        // SAFETY: register-only NEON, which the caller has (the trait's contract).
        unsafe { vaddvq_s32(vsraq_n_s32::<2>(vreinterpretq_s32_u8(lo), vreinterpretq_s32_u8(hi))) }
    }

    /// `fcvt` from half is base ARMv8 FP: no FEAT_FP16 needed.
    #[inline(always)]
    unsafe fn f16(p: *const u8) -> f32 {
        let out: f32;
        // SAFETY: reads the 2 bytes at `p` the trait's contract promises; no stack, no flags.
        unsafe {
            asm!(
                "ldr {h:h}, [{p}]",
                "fcvt {o:s}, {h:h}",
                p = in(reg) p,
                h = out(vreg) _,
                o = lateout(vreg) out,
                options(pure, readonly, nostack, preserves_flags),
            )
        };
        out
    }

    #[inline(always)]
    unsafe fn prefetch_l2(p: *const u8) {
        // SAFETY: a prefetch never faults, whatever the address, and writes nothing.
        unsafe { asm!("prfm pldl2keep, [{p}]", p = in(reg) p, options(readonly, nostack, preserves_flags)) }
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
                // Not `pure`: in program order. Moved above the previous quad's dot products,
                // a load of the same fixed registers made LLVM copy them (2 `mov`s a group).
                options(readonly, nostack, preserves_flags),
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

impl<M: Mac<uint8x16_t> + QuadMac<uint8x16_t, int8x16_t>> GemmSimd for Neon<M> {
    const LANES: usize = 4;

    #[inline(always)]
    unsafe fn splat32(x: i32) -> uint8x16_t {
        // SAFETY: register-only NEON, which the caller has (the trait's contract).
        unsafe { vreinterpretq_u8_s32(vdupq_n_s32(x)) }
    }

    #[inline(always)]
    unsafe fn store(p: *mut u8, v: uint8x16_t) {
        // SAFETY: writes 16 bytes at `p`, writable by the trait's contract; NEON.
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

    /// One table lookup copies byte `C` of each lane to its four bytes, one `ushl` by 0,
    /// -2, -4, -6 moves code `j` down in byte `j`, one `and` keeps it: three instructions,
    /// where the shifts and ors take six.
    #[inline(always)]
    unsafe fn spread_byte<const C: u32>(x: uint8x16_t) -> uint8x16_t {
        let c = C as u8;
        let bytes: [u8; 16] = std::array::from_fn(|i| (i / 4 * 4) as u8 + c);
        let shifts: [i8; 16] = std::array::from_fn(|i| -2 * (i % 4) as i8);
        // SAFETY: loads of the two 16-byte local arrays, then register operations; NEON,
        // which the caller has (the trait's contract).
        unsafe {
            let copied = vqtbl1q_u8(x, vld1q_u8(bytes.as_ptr()));
            vandq_u8(vshlq_u8(copied, vld1q_s8(shifts.as_ptr())), vdupq_n_u8(3))
        }
    }

    /// Digit by digit: three instructions with byte shifts ([`super::simd::top_trit`]; x86
    /// needs five), then one `mul` by 3 for the next.
    #[inline(always)]
    unsafe fn trits(mut q: uint8x16_t, n: usize, mut put: impl FnMut(usize, uint8x16_t)) {
        for d in 0..n {
            // SAFETY: the trait's contract (this ISA's features); register operations only.
            unsafe {
                put(d, super::simd::top_trit(q));
                q = vmulq_u8(q, vdupq_n_u8(3));
            }
        }
    }

    /// A register: the multiply-accumulate takes the quad from one of its four 32-bit lanes.
    type A = int8x16_t;

    #[inline(always)]
    unsafe fn a_load(p: *const u8) -> int8x16_t {
        // SAFETY: the trait's contract (this ISA's features; 16 readable bytes at `p`).
        unsafe { vld1q_s8(p as *const i8) }
    }

    type Quad = M;

    /// TQ1_0's 4-byte `qh` as one lane load, not `load_partial`'s stack copy (not in
    /// `load_partial` itself: the branch there cost the plain GEMV's BitNet tiles 47
    /// instructions per 1,000 MACs).
    #[inline(always)]
    unsafe fn load_short(p: *const u8, len: usize) -> uint8x16_t {
        // SAFETY: the trait's contract (`len` readable bytes at `p`, this ISA's features).
        unsafe {
            if len == 4 {
                vreinterpretq_u8_u32(vsetq_lane_u32::<0>(std::ptr::read_unaligned(p as *const u32), vdupq_n_u32(0)))
            } else {
                Self::load_partial(p, len)
            }
        }
    }

    /// Weights in v24-v27 (activations in v28-v31: a group's activations stay live while its
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

    #[inline(always)]
    unsafe fn fload(p: *const f32) -> float32x4_t {
        // SAFETY: reads 4 floats at `p`, readable by the trait's contract; NEON.
        unsafe { vld1q_f32(p) }
    }

    #[inline(always)]
    unsafe fn fstore(p: *mut f32, f: float32x4_t) {
        // SAFETY: writes 4 floats at `p`, writable by the trait's contract; NEON.
        unsafe { vst1q_f32(p, f) }
    }

    /// One lane load per row and one `fcvtl` (Rust's f16 vector types are unstable): 6
    /// instructions for the 16 of four `f16` calls.
    #[inline(always)]
    unsafe fn f16_lanes(src: &[*const u8; 16], at: usize, dst: *mut f32) {
        let f: float32x4_t;
        // SAFETY: reads the 2 bytes at each `src[l] + at` the trait's contract promises; no
        // stack, no flags.
        unsafe {
            asm!(
                "ld1 {{{v:v}.h}}[0], [{p0}]",
                "ld1 {{{v:v}.h}}[1], [{p1}]",
                "ld1 {{{v:v}.h}}[2], [{p2}]",
                "ld1 {{{v:v}.h}}[3], [{p3}]",
                "fcvtl {v:v}.4s, {v:v}.4h",
                p0 = in(reg) src[0].wrapping_add(at),
                p1 = in(reg) src[1].wrapping_add(at),
                p2 = in(reg) src[2].wrapping_add(at),
                p3 = in(reg) src[3].wrapping_add(at),
                v = out(vreg) f,
                options(pure, readonly, nostack, preserves_flags),
            );
            // The trait's contract: 4 writable floats at `dst`.
            vst1q_f32(dst, f)
        }
    }
}

/// Q2_0's blocks one to a vector.
impl<M: Mac<uint8x16_t>> Pieces for Neon<M> {
    #[inline(always)]
    unsafe fn load_pieces(p: *const u8, _stride: usize, n: usize) -> uint8x16_t {
        debug_assert_eq!(n, 1);
        // SAFETY: reads the one piece's 16 bytes, readable by the trait's contract; NEON.
        unsafe { vld1q_u8(p) }
    }

    #[inline(always)]
    unsafe fn f16_pieces(p: *const u8, _stride: usize, n: usize) -> float32x4_t {
        debug_assert_eq!(n, 1);
        // SAFETY: reads the one f16, readable by the trait's contract; NEON.
        unsafe { vdupq_n_f32(Self::f16(p)) }
    }

    #[inline(always)]
    unsafe fn f32_halves(p: *const f32, n: usize) -> float32x4_t {
        debug_assert_eq!(n, 1);
        // SAFETY: reads the one block's 2 floats, readable by the trait's contract; NEON.
        unsafe {
            let x = vld1_f32(p);
            vcombine_f32(vdup_lane_f32::<0>(x), vdup_lane_f32::<1>(x))
        }
    }
}
