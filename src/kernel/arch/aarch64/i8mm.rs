//! `bitnet_gemm/neon-i8mm`, for batches on CPUs with FEAT_I8MM: the shared panel GEMM
//! ([`crate::kernel::gemm`]) over NEON's vectors with a register tile of `usmmla`, a 2 x 8
//! by 8 x 2 product of unsigned by signed bytes into 2 x 2 int32 (32 multiply-adds per
//! instruction, twice `sdot`): the panel's biased codes times the int8 activations, from
//! the shared seeds. Rust's i8mm intrinsics are unstable, so `usmmla` is written with
//! `asm!`.
//!
//! `usmmla` multiplies rows of 8 consecutive elements, so the tile's sink ([`PairSink`])
//! stores the shared packer's quads `2j` and `2j + 1` of a row side by side (one `st2` per
//! pair of quad vectors), and the activations are packed in 8-byte groups (a token pair's 8
//! elements are one 16-byte operand; the last block is padded to whole pairs).
//! Its sums stay 2 x 2 blocks (a row pair by a token pair) through a tile's weight blocks,
//! whose seeds and scales it lays out the same way (a token pair's seeds loaded to both row
//! lanes; `zip`s of the panel's row scales); they become the shared loops' order (4 rows of
//! one token per vector) by `uzp`s once per tile.

use super::neon::Smlal;
use super::simd::Neon;
use crate::format::Format;
use crate::kernel::gemm::{self, MicroTile, Packed, QuadSink};
use crate::kernel::isa::{self, Isa};
use crate::kernel::{Kernel, MatRef};
use core::arch::aarch64::*;
use core::arch::asm;

/// The `usmmla` register tile.
pub(super) struct I8mm;

impl Isa for I8mm {
    const FEATURES: &'static str = "neon, i8mm";

    fn available() -> bool {
        std::arch::is_aarch64_feature_detected!("i8mm")
    }

    isa::enter!("neon,i8mm");
}

/// `acc += w . a^T` for the 2 x 8 matrices `w` (two weight rows, u8) and `a` (two tokens,
/// i8), lanes `(w0, a0), (w0, a1), (w1, a0), (w1, a1)`.
///
/// # Safety
/// The CPU must have FEAT_I8MM.
#[inline(always)]
unsafe fn usmmla(acc: int32x4_t, w: uint8x16_t, a: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: a register-only instruction of FEAT_I8MM, which the caller has.
    // `.arch_extension`: the assembler must accept it wherever LLVM inlines this.
    unsafe {
        asm!(
            ".arch_extension i8mm",
            "usmmla {acc:v}.4s, {w:v}.16b, {a:v}.16b",
            acc = inout(vreg) acc,
            w = in(vreg) w,
            a = in(vreg) a,
            options(pure, nomem, nostack, preserves_flags),
        )
    };
    acc
}

/// One step of 8 elements: the `2 RV` row pairs at `w` (16 bytes each) by the `T / 2` token
/// pairs at `a` (16 bytes each), into the accumulators in the tile's order (see
/// [`MicroTile::micro`] below).
///
/// # Safety
/// `w` and `a` must be valid for those bytes; the CPU must have NEON and FEAT_I8MM.
#[inline(always)]
unsafe fn step<const RV: usize, const T: usize>(acc: &mut [[int32x4_t; T]; RV], w: *const u8, a: *const i8) {
    // SAFETY: the caller's contract.
    unsafe {
        let mut wv = [[vdupq_n_u8(0); 2]; RV];
        for (v, wv) in wv.iter_mut().enumerate() {
            *wv = [vld1q_u8(w.add(32 * v)), vld1q_u8(w.add(32 * v + 16))];
        }
        for i in 0..T / 2 {
            let av = vld1q_s8(a.add(16 * i));
            for v in 0..RV {
                for h in 0..2 {
                    acc[v][2 * i + h] = usmmla(acc[v][2 * i + h], wv[v][h], av);
                }
            }
        }
    }
}

/// Where the packer's quads go for `usmmla`: a row's quads `2j` and `2j + 1` side by side,
/// 4 rows' pair in one `st2`.
/// An even quad waits in `even` for its odd partner (the packer gives them in that order,
/// at constant indices once unrolled, so `even` stays in registers).
pub(super) struct PairSink {
    /// Quad pair 0 of the group's first row.
    at: *mut u8,
    /// Bytes from one quad pair to the next (`8 p`).
    step: usize,
    quads: usize,
    even: [uint8x16_t; 32],
}

impl QuadSink<Neon<Smlal>> for PairSink {
    /// `at` must be valid for `quads.div_ceil(2)` pairs of `step` bytes, 32 of them written
    /// each.
    #[inline(always)]
    unsafe fn put(&mut self, q: usize, codes: uint8x16_t) {
        if q >= self.quads {
            return;
        }
        // SAFETY: register operations, and a 32-byte store at pair `q / 2 < quads.div_ceil(2)`
        // (the caller's contract); NEON, which the caller has.
        unsafe {
            let codes = vreinterpretq_u32_u8(codes);
            let pair = self.at.add(q / 2 * self.step) as *mut u32;
            if q % 2 == 1 {
                let even = vreinterpretq_u32_u8(self.even[q / 2]);
                vst2q_u32(pair, uint32x4x2_t(even, codes));
            } else if q + 1 == self.quads {
                // The last quad of a short step: its partner meets zero activations.
                vst2q_u32(pair, uint32x4x2_t(codes, vdupq_n_u32(0)));
            } else {
                self.even[q / 2] = vreinterpretq_u8_u32(codes);
            }
        }
    }
}

/// Over NEON's vectors (plain NEON packs the panels; FEAT_I8MM implies it).
impl MicroTile<Neon<Smlal>> for I8mm {
    /// 8-byte groups: a block's group of 8 elements is `[tokens][8]`, token pair `i` the 16
    /// bytes at `16 i`; the last block padded to whole pairs.
    type Sink = PairSink;

    fn pack(a: &MatRef, t: usize, block: usize) -> Packed {
        Packed::new::<8>(a, t, block, 2)
    }

    /// Quad pair `j` of row `r` (8 codes) at `block + (j p + r) 8`.
    fn sink(block: *mut u8, p: usize, g: usize, quads: usize) -> PairSink {
        // SAFETY: register-only NEON, part of every aarch64 target Rust builds for.
        let zero = unsafe { vdupq_n_u8(0) };
        PairSink { at: block.wrapping_add(8 * g), step: 8 * p, quads, even: [zero; 32] }
    }

    /// Lanes `(r, t), (r, t + 1), (r + 1, t), (r + 1, t + 1)` of rows `r = 4 v + 2 h` by
    /// tokens `t = 2 i` are `acc[v][2 i + h]`: the seeds of tokens `2 i`, `2 i + 1`, twice.
    #[inline(always)]
    unsafe fn seed<const T: usize>(seeds: &[i32; T], t: usize) -> uint8x16_t {
        let pair = &seeds[t & !1..][..2];
        // SAFETY: reads the 8 bytes of `pair`; NEON, which the caller has.
        unsafe { vreinterpretq_u8_s64(vld1q_dup_s64(pair.as_ptr().cast())) }
    }

    /// In the order of [`MicroTile::seed`]: the scales of rows `r`, `r + 1` (`zip`s of the
    /// rows' `s`), times those of the token pair.
    #[inline(always)]
    unsafe fn block_scale<const T: usize>(s: float32x4_t, a: Option<&[f32; T]>, t: usize) -> float32x4_t {
        // SAFETY: register operations and an 8-byte load in `a` (`t & !1 + 2 <= T`: `T` is
        // even); NEON, which the caller has.
        unsafe {
            let rows = if t.is_multiple_of(2) { vzip1q_f32(s, s) } else { vzip2q_f32(s, s) };
            match a {
                Some(a) => {
                    let pair = vld1_f32(a[t & !1..][..2].as_ptr());
                    vmulq_f32(rows, vcombine_f32(pair, pair))
                }
                None => rows,
            }
        }
    }

    /// Tokens `2 i` and `2 i + 1` of rows `4 v..4 v + 4` are the even and odd lanes of
    /// `f[v][2 i]` (rows `4 v`, `+ 1`) and `f[v][2 i + 1]` (rows `4 v + 2`, `+ 3`).
    #[inline(always)]
    unsafe fn shared_order<const RV: usize, const T: usize>(f: &mut [[float32x4_t; T]; RV]) {
        // SAFETY: register operations of NEON, which the caller has.
        unsafe {
            for f in f.iter_mut() {
                for pair in f.chunks_exact_mut(2) {
                    let (x, y) = (pair[0], pair[1]);
                    pair[0] = vuzp1q_f32(x, y);
                    pair[1] = vuzp2q_f32(x, y);
                }
            }
        }
    }

    /// `2 RV` row pairs by `T / 2` token pairs of `usmmla` accumulators (16 at 2 x 8, with 4
    /// weight and 4 activation operands of NEON's 32 registers), in the tile's order:
    /// `acc[v][2 i + h]` holds rows `4 v + 2 h`, `+ 1` by tokens `2 i`, `2 i + 1`.
    #[inline(always)]
    unsafe fn micro<const RV: usize, const T: usize>(
        w: *const u8,
        a: *const u8,
        groups: usize,
        acc: &mut [[uint8x16_t; T]; RV],
    ) {
        // Not a const assert: the loops instantiate every `T`, but run only even ones here
        // (the packing pads the last block to whole pairs).
        assert!(T.is_multiple_of(2), "token pairs");
        let p = 4 * RV;
        // SAFETY: register operations, and loads inside the spans the caller guarantees:
        // step `s < 2 groups` of the arranged panel is `8 p` bytes at `8 p s` (row pair
        // `2 r` at `16 r`), and of the activations `8 T` bytes at `8 T s` (token pair `i` at
        // `16 i`); NEON and FEAT_I8MM, which the caller has.
        unsafe {
            let mut c = [[vdupq_n_s32(0); T]; RV];
            for v in 0..RV {
                for t in 0..T {
                    c[v][t] = vreinterpretq_s32_u8(acc[v][t]);
                }
            }
            let (mut ws, mut at) = (w, a as *const i8);
            // Four steps (two groups) per iteration: a quarter of the loop's counting.
            for _ in 0..groups / 2 {
                for u in 0..4 {
                    step::<RV, T>(&mut c, ws.add(8 * p * u), at.add(8 * T * u));
                }
                (ws, at) = (ws.wrapping_add(32 * p), at.wrapping_add(32 * T));
            }
            if groups % 2 == 1 {
                step::<RV, T>(&mut c, ws, at);
                step::<RV, T>(&mut c, ws.add(8 * p), at.add(8 * T));
            }
            for v in 0..RV {
                for t in 0..T {
                    acc[v][t] = vreinterpretq_u8_s32(c[v][t]);
                }
            }
        }
    }
}

/// The registry entries: panels of 2 vectors (8 rows) by token blocks of 8 (16
/// accumulators). Preferred from the token count from which the kernel executes fewer
/// instructions than the dotprod kernel the dispatcher would pick otherwise (its GEMV, or
/// its GEMM past that one's threshold) at every m counted (qemu, 256 x 2048: counts, not
/// timings, as there is no ARM hardware here; docs/arm-instruction-counts.md): from 3
/// tokens, BITNET_B1_58 from 4 (at 3 the dotprod GEMV executes 193 per 1,000 MACs, this
/// kernel 195), I2_S_R4 from 5 (at 4, 235 against the GEMV's 198: its packer extracts each
/// row's plane of the group's bytes, its GEMV loads them once for four rows). At 2,
/// unpacking a panel costs more than the GEMV's per-token-tile unpack saves.
pub(super) fn kernels() -> Vec<Kernel> {
    gemm::kernels::<Neon<Smlal>, I8mm, 2, 8>(
        c"bitnet_gemm/neon-i8mm",
        &[
            (Format::Tq1_0, 3),
            (Format::Tq2_0, 3),
            (Format::BitnetB158, 4),
            (Format::I2S, 3),
            (Format::I2S64, 3),
            (Format::I2SR4, 5),
            (Format::Q2_0, 3),
        ],
    )
}
