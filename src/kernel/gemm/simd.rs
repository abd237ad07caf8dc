//! What an ISA supplies to the GEMM on top of its [`Simd`].

// Default methods index several arrays in lockstep.
#![allow(clippy::needless_range_loop)]

use super::pack::GROUP;
use crate::kernel::mac::QuadMac;
use crate::kernel::tile::Simd;

/// Vector operations of one ISA for the GEMM, on top of its [`Simd`] (whose `V` holds
/// `LANES` int32 lanes or `4 * LANES` bytes, and `F` as many f32 lanes).
///
/// # Safety
/// Every method needs the CPU features of its ISA; pointer arguments must be valid for
/// the bytes the method names.
pub(crate) trait GemmSimd: Simd {
    /// int32 lanes per vector: the weight rows one vector holds.
    const LANES: usize;

    unsafe fn splat32(x: i32) -> Self::V;
    /// Writes `4 * LANES` bytes.
    unsafe fn store(p: *mut u8, v: Self::V);
    /// Transposes `v` (`LANES` vectors) as a `LANES x LANES` matrix of int32.
    unsafe fn transpose(v: &mut [Self::V]);
    unsafe fn srli32<const N: u32>(x: Self::V) -> Self::V;
    unsafe fn slli32<const N: u32>(x: Self::V) -> Self::V;
    unsafe fn or(a: Self::V, b: Self::V) -> Self::V;
    /// The four 2-bit codes of byte `C` (0..4) of each int32 lane, one per byte (bits
    /// `2 j..2 j + 2` to byte `j`): a quad of the formats whose bytes hold four consecutive
    /// elements.
    #[inline(always)]
    unsafe fn spread_byte<const C: u32>(x: Self::V) -> Self::V {
        // SAFETY: register operations; the caller guarantees this ISA's features.
        unsafe {
            let ff = Self::splat32(0xFF);
            let byte = match C {
                0 => Self::and(x, ff),
                1 => Self::and(Self::srli32::<8>(x), ff),
                2 => Self::and(Self::srli32::<16>(x), ff),
                _ => Self::srli32::<24>(x),
            };
            let y = Self::or(byte, Self::slli32::<6>(byte));
            Self::and(Self::or(y, Self::slli32::<12>(y)), Self::splat8(3))
        }
    }
    /// The first `n` (4 or 5) base-3 digits of every byte, digit `d` to `put(d, ..)`:
    /// TQ1_0's, digit `d` of a byte `b` being `((b * 3^d) mod 256) * 3 >> 8` (see [`Tq1`]).
    unsafe fn trits(q: Self::V, n: usize, put: impl FnMut(usize, Self::V));
    /// Four quads of one token's activations (16 bytes of [`Packed`]), as [`QuadMac::q_dot`]
    /// takes them: the address itself where the dot product broadcasts from memory, or a
    /// register.
    type A: Copy;
    /// Reads 16 bytes.
    unsafe fn a_load(p: *const u8) -> Self::A;
    /// Whether the broadcast tile's inner loop takes one quad per iteration (each token's
    /// [`GemmSimd::a_load`] from the quad on, its quad 0 taken), a loop the compiler is kept
    /// from unrolling, rather than a group of four quads unrolled: for an engine that loads
    /// all of an unrolled group's weights and quads first and spills them (V8, wasm).
    const ROLLED_QUADS: bool = false;
    /// The multiply-accumulate of a weight vector by a broadcast activation quad.
    type Quad: QuadMac<Self::V, Self::A>;
    /// [`Simd::load_partial`] for the panel unpack's short chunks, where an ISA has a cheaper
    /// load of some length (NEON: TQ1_0's 4-byte `qh`).
    #[inline(always)]
    unsafe fn load_short(p: *const u8, len: usize) -> Self::V {
        // SAFETY: the caller's contract (`len < W` readable bytes at `p`, this ISA's features).
        unsafe { Self::load_partial(p, len) }
    }
    /// [`Simd::load`] of the `N` consecutive vectors at `*p`, moving `*p` past them: the
    /// inner loop's loads are such runs (an ISA with a post-incrementing load of several
    /// registers, NEON's `ld1` of four, makes a run of four one instruction).
    #[inline(always)]
    unsafe fn load_next<const N: usize>(p: &mut *const u8) -> [Self::V; N] {
        // SAFETY: the caller's contract (`N` vectors at `*p`, this ISA's features).
        unsafe {
            let mut v = [Self::zero(); N];
            for i in 0..N {
                v[i] = Self::load(p.add(i * 4 * Self::LANES));
            }
            *p = p.add(N * 4 * Self::LANES);
            v
        }
    }
    /// [`Self::a_load`] of the `N` consecutive groups at `*p` (`16 N` bytes), moving `*p`
    /// past them, as [`Self::load_next`].
    #[inline(always)]
    unsafe fn a_load_next<const N: usize>(p: &mut *const u8) -> [Self::A; N] {
        // SAFETY: the caller's contract (`16 N` bytes at `*p`, this ISA's features).
        unsafe {
            let mut a = [Self::a_load(*p); N];
            for i in 1..N {
                a[i] = Self::a_load(p.add(GROUP * i));
            }
            *p = p.add(GROUP * N);
            a
        }
    }
    /// Reads `LANES` floats.
    unsafe fn fload(p: *const f32) -> Self::F;
    /// Writes `LANES` floats.
    unsafe fn fstore(p: *mut f32, f: Self::F);
    /// Writes to `dst[l]` the f16 at `src[l] + at`, for each lane `l < LANES`: a block's
    /// scales of the rows of a panel's group.
    #[inline(always)]
    unsafe fn f16_lanes(src: &[*const u8; 16], at: usize, dst: *mut f32) {
        for (l, s) in src[..Self::LANES].iter().enumerate() {
            // SAFETY: the caller's contract (2 readable bytes at each `src[l] + at`, `LANES`
            // writable floats at `dst`, this ISA's features).
            unsafe { *dst.add(l) = Self::f16(s.add(at)) };
        }
    }
}

/// Reads `len <= W` bytes and zeroes the other lanes, reading nothing past `p + len`.
///
/// # Safety
/// The CPU must have `S`'s features; `p` must have `len` readable bytes.
#[inline(always)]
pub(crate) unsafe fn load_first<S: GemmSimd>(p: *const u8, len: usize) -> S::V {
    assert!(len <= S::W);
    // SAFETY: `len` readable bytes at `p`, as the caller guarantees, and its features.
    unsafe {
        if len == S::W {
            S::load(p)
        } else {
            S::load_short(p, len)
        }
    }
}
