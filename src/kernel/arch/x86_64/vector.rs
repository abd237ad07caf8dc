//! The x86 kernels' vector operations, once for both register widths: [`Vector`] names the
//! intrinsics that differ between `__m256i` (`ymm.rs`) and `__m512i` (`avx512vnni.rs`)
//! only by name or by algorithm, and [`X86`] builds both skeletons' traits ([`Simd`],
//! [`GemmSimd`]) on it, generic over the multiply-accumulate ([`Mac`]).

use crate::kernel::gemm::GemmSimd;
use crate::kernel::mac::{Mac, QuadMac};
use crate::kernel::tile::Simd;
use std::arch::x86_64::*;
use std::marker::PhantomData;

/// One x86 integer register type and its f32 twin.
///
/// # Safety
/// Every method needs the CPU features of the register width (AVX2 and FMA for `__m256i`,
/// AVX-512F/BW for `__m512i`); pointer methods need the bytes they name.
pub(super) trait Vector: Copy + 'static {
    /// Bytes per vector.
    const W: usize;
    /// The f32 vector of the same width.
    type F: Copy;

    unsafe fn zero() -> Self;
    /// Reads `W` bytes at `p`.
    unsafe fn load(p: *const u8) -> Self;
    /// Reads the `len < W` bytes at `p`, nothing past them, and zeroes the other lanes.
    unsafe fn load_partial(p: *const u8, len: usize) -> Self;
    /// Writes `W` bytes at `p`.
    unsafe fn store(p: *mut u8, v: Self);
    unsafe fn splat8(x: u8) -> Self;
    unsafe fn splat32(x: i32) -> Self;
    unsafe fn and(a: Self, b: Self) -> Self;
    unsafe fn or(a: Self, b: Self) -> Self;
    /// See [`GemmSimd::trits`].
    unsafe fn trits(q: Self, n: usize, put: impl FnMut(usize, Self));
    /// Shifts 16-bit lanes right by `N` (2, 4 or 6).
    unsafe fn srli16<const N: u32>(x: Self) -> Self;
    unsafe fn srli32<const N: u32>(x: Self) -> Self;
    unsafe fn slli32<const N: u32>(x: Self) -> Self;
    /// Transposes `v` (`W / 4` vectors) as a square matrix of int32.
    unsafe fn transpose(v: &mut [Self]);
    /// See [`Simd::hsum_planes`].
    unsafe fn hsum_planes(lo: Self, hi: Self) -> i32;
    unsafe fn fzero() -> Self::F;
    unsafe fn fsplat(x: f32) -> Self::F;
    /// `a * b`, lane by lane.
    unsafe fn fmul(a: Self::F, b: Self::F) -> Self::F;
    /// `f + float(acc) * s`, lane by lane.
    unsafe fn fmadd(acc: Self, s: Self::F, f: Self::F) -> Self::F;
    unsafe fn fsum(f: Self::F) -> f32;
    /// Reads `W / 4` floats at `p`.
    unsafe fn fload(p: *const f32) -> Self::F;
    /// Writes `W / 4` floats at `p`.
    unsafe fn fstore(p: *mut f32, f: Self::F);
}

/// TQ1_0's block of [`Simd::tq1_block`] on one register width with the multiply-accumulate
/// `M`, whose best algorithm differs between the widths and needs the multiply-accumulate
/// (digit pairs from 16-bit multiplies on ymm, a digit-free identity on zmm, which needs
/// `vpdpbusd`).
pub(super) trait Tq1Block<M>: Vector {
    /// See [`Simd::TQ1_OVERREAD`].
    const OVERREAD: usize;

    /// See [`Simd::tq1_block`].
    ///
    /// # Safety
    /// As for [`Simd::tq1_block`].
    unsafe fn tq1_block<const R: usize, const T: usize>(w: [*const u8; R], a: [*const i8; T], acc: &mut [[Self; T]; R]);

    /// See [`Simd::tq1_row_block`].
    ///
    /// # Safety
    /// As for [`Simd::tq1_block`].
    #[inline(always)]
    unsafe fn tq1_row_block<const R: usize, const T: usize>(
        w: [*const u8; R],
        a: [*const i8; T],
        lo: &mut [[Self; T]; R],
        _hi: &mut [[Self; T]; R],
    ) {
        // SAFETY: the same contract.
        unsafe { Self::tq1_block::<R, T>(w, a, lo) }
    }

    /// See [`Simd::tq1_row_dot`].
    ///
    /// # Safety
    /// The ISA's features.
    #[inline(always)]
    unsafe fn tq1_row_dot<const T: usize>(lo: Self, hi: Self) -> i32 {
        // SAFETY: the same contract.
        unsafe { Self::hsum_planes(lo, hi) }
    }
}

/// The x86 vector operations of register type `V` with the multiply-accumulate `M`.
pub(super) struct X86<V, M>(PhantomData<fn() -> (V, M)>);

/// `Simd` for the GEMV skeleton.
impl<V: Tq1Block<M>, M: Mac<V>> Simd for X86<V, M> {
    const W: usize = V::W;
    const TQ1_OVERREAD: usize = <V as Tq1Block<M>>::OVERREAD;
    type V = V;
    type F = V::F;
    type M = M;

    #[inline(always)]
    unsafe fn zero() -> V {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe { V::zero() }
    }

    #[inline(always)]
    unsafe fn load(p: *const u8) -> V {
        // SAFETY: `W` readable bytes at `p` and this ISA's features (the trait's contract).
        unsafe { V::load(p) }
    }

    #[inline(always)]
    unsafe fn load_partial(p: *const u8, len: usize) -> V {
        // SAFETY: `len < W` readable bytes at `p` and this ISA's features (the trait's
        // contract).
        unsafe { V::load_partial(p, len) }
    }

    #[inline(always)]
    unsafe fn splat8(x: u8) -> V {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe { V::splat8(x) }
    }

    #[inline(always)]
    unsafe fn plane2(x: V, plane: usize, mask3: V) -> V {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe {
            let shifted = match plane {
                0 => x,
                1 => V::srli16::<2>(x),
                2 => V::srli16::<4>(x),
                _ => V::srli16::<6>(x),
            };
            V::and(shifted, mask3)
        }
    }

    #[inline(always)]
    unsafe fn and(a: V, b: V) -> V {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe { V::and(a, b) }
    }

    #[inline(always)]
    unsafe fn srl4(x: V) -> V {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe { V::srli16::<4>(x) }
    }

    #[inline(always)]
    unsafe fn tq1_block<const R: usize, const T: usize>(w: [*const u8; R], a: [*const i8; T], acc: &mut [[V; T]; R]) {
        // SAFETY: the same contract.
        unsafe { V::tq1_block::<R, T>(w, a, acc) }
    }

    #[inline(always)]
    unsafe fn tq1_row_block<const R: usize, const T: usize>(
        w: [*const u8; R],
        a: [*const i8; T],
        lo: &mut [[V; T]; R],
        hi: &mut [[V; T]; R],
    ) {
        // SAFETY: the same contract.
        unsafe { V::tq1_row_block::<R, T>(w, a, lo, hi) }
    }

    #[inline(always)]
    unsafe fn tq1_row_dot<const T: usize>(lo: V, hi: V) -> i32 {
        // SAFETY: the same contract.
        unsafe { V::tq1_row_dot::<T>(lo, hi) }
    }

    #[inline(always)]
    unsafe fn fzero() -> V::F {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe { V::fzero() }
    }

    #[inline(always)]
    unsafe fn fsplat(x: f32) -> V::F {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe { V::fsplat(x) }
    }

    #[inline(always)]
    unsafe fn fmul(a: V::F, b: V::F) -> V::F {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe { V::fmul(a, b) }
    }

    #[inline(always)]
    unsafe fn fmadd_lanes(acc: V, s: V::F, f: V::F) -> V::F {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe { V::fmadd(acc, s, f) }
    }

    #[inline(always)]
    unsafe fn fsum(f: V::F) -> f32 {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe { V::fsum(f) }
    }

    #[inline(always)]
    unsafe fn hsum_planes(lo: V, hi: V) -> i32 {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe { V::hsum_planes(lo, hi) }
    }

    #[inline(always)]
    unsafe fn f16(p: *const u8) -> f32 {
        // SAFETY: 2 readable bytes at `p` and F16C, among this ISA's features (the trait's
        // contract).
        unsafe { super::f16c(p) }
    }

    #[inline(always)]
    unsafe fn prefetch_l2(p: *const u8) {
        // SAFETY: a prefetch never faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T1>(p as *const i8) }
    }
}

/// The GEMM's operations: `W / 4` rows per vector, the partial accumulators of `M`.
impl<V: Tq1Block<M>, M: Mac<V>> GemmSimd for X86<V, M> {
    const LANES: usize = V::W / 4;

    #[inline(always)]
    unsafe fn splat32(x: i32) -> V {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe { V::splat32(x) }
    }

    #[inline(always)]
    unsafe fn store(p: *mut u8, v: V) {
        // SAFETY: `W` writable bytes at `p` and this ISA's features (the trait's contract).
        unsafe { V::store(p, v) }
    }

    #[inline(always)]
    unsafe fn transpose(v: &mut [V]) {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe { V::transpose(v) }
    }

    #[inline(always)]
    unsafe fn srli32<const N: u32>(x: V) -> V {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe { V::srli32::<N>(x) }
    }

    #[inline(always)]
    unsafe fn slli32<const N: u32>(x: V) -> V {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe { V::slli32::<N>(x) }
    }

    #[inline(always)]
    unsafe fn or(a: V, b: V) -> V {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe { V::or(a, b) }
    }

    #[inline(always)]
    unsafe fn trits(q: V, n: usize, put: impl FnMut(usize, V)) {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe { V::trits(q, n, put) }
    }

    /// The address: [`QuadMac::q_dot`] broadcasts from memory.
    type A = *const u8;

    #[inline(always)]
    unsafe fn a_load(p: *const u8) -> *const u8 {
        p
    }

    type Quad = M;

    #[inline(always)]
    unsafe fn fload(p: *const f32) -> V::F {
        // SAFETY: `LANES` readable floats at `p` and this ISA's features (the trait's
        // contract).
        unsafe { V::fload(p) }
    }

    #[inline(always)]
    unsafe fn fstore(p: *mut f32, f: V::F) {
        // SAFETY: `LANES` writable floats at `p` and this ISA's features (the trait's
        // contract).
        unsafe { V::fstore(p, f) }
    }
}

/// Every x86 multiply-accumulate takes a broadcast quad the same way: the four activation
/// bytes broadcast from memory to every int32 lane, then [`Mac::dot`].
impl<V: Vector, M: Mac<V>> QuadMac<V, *const u8> for M {
    type Q = M::P;
    const Q_GROUPS: usize = M::GROUPS;

    #[inline(always)]
    unsafe fn q_start(acc: V) -> M::P {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe { M::start(acc) }
    }

    #[inline(always)]
    unsafe fn q_dot<const L: i32>(p: M::P, w: V, a: *const u8) -> M::P {
        // SAFETY: reads 4 bytes at `a + 4 L`, inside the 16 readable bytes at `a` (the
        // trait's contract); this ISA's features.
        unsafe { M::dot(p, w, V::splat32(std::ptr::read_unaligned(a.add(4 * L as usize) as *const i32))) }
    }

    #[inline(always)]
    unsafe fn q_end(p: M::P, acc: V) -> V {
        // SAFETY: register-only; the trait's contract (this ISA's features).
        unsafe { M::end(p, acc) }
    }
}
