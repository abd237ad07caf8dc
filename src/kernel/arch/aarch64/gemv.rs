//! Row loops shared by the NEON and NEON+dotprod paths, generic over the multiply-
//! accumulate. Codes stay biased (unsigned {0, 1, 2}); the activation sum comes off once
//! per block (TQ: the block's first accumulator starts at minus the sum) or once per row
//! (BitNet, whose row is one block).
//!
//! Every loop accumulates in f32 exactly as `kernel::reference` does (block by block, from
//! 0.0, `acc += d * dot`), so results match it bit for bit whenever the integer dots do.

use super::act::{block_bias, BitnetAct};
use super::unpack::{bitnet_chunk, TqBlock};
use crate::format::{bitnet, ternary::QK};
use crate::kernel::{ActI8, MatRef, OutTile};
use core::arch::aarch64::*;

/// Multiply-accumulate of 16 unsigned codes (at most 3) by 16 signed activation codes.
pub(super) trait Mac {
    type Acc: Copy;
    /// # Safety
    /// The CPU must support the path's features (as for every method here).
    unsafe fn zero() -> Self::Acc;
    /// An accumulator holding `bias` (its lanes join the sum).
    ///
    /// # Safety
    /// As for [`Mac::zero`].
    unsafe fn start(bias: int32x4_t) -> Self::Acc;
    /// # Safety
    /// As for [`Mac::zero`].
    unsafe fn mac(acc: Self::Acc, codes: uint8x16_t, act: int8x16_t) -> Self::Acc;
    /// The sum of all lanes of two accumulators that took at most 16 `mac`s each since
    /// `zero`/`start` (the NEON path's i16 lanes hold that much: 2 * 16 * 2 * 3 * 128 < 2^15).
    ///
    /// # Safety
    /// As for [`Mac::zero`].
    unsafe fn sum2(a: Self::Acc, b: Self::Acc) -> i32;
}

/// `sum_i codes[i] * act[i]` over 16 vectors (256 elements) plus the lanes of `bias`, in
/// two accumulator chains.
#[inline(always)]
unsafe fn dot256<M: Mac>(codes: &[uint8x16_t; 16], act: *const i8, bias: int32x4_t) -> i32 {
    let (mut s0, mut s1) = (M::start(bias), M::zero());
    for j in (0..16).step_by(2) {
        s0 = M::mac(s0, codes[j], vld1q_s8(act.add(16 * j)));
        s1 = M::mac(s1, codes[j + 1], vld1q_s8(act.add(16 * j + 16)));
    }
    M::sum2(s0, s1)
}

/// One TQ row against one token: `sum_b d_b * (sum a*code - sum a)` over the row's blocks.
///
/// # Safety
/// The CPU must support `M`'s features.
#[inline(always)]
pub(super) unsafe fn tq_row<M: Mac, U: TqBlock>(row: &[u8], act: &[i8], bias: &[[i32; 4]]) -> f32 {
    let blocks = bias.len();
    assert!(row.len() >= blocks * U::BYTES && act.len() >= blocks * QK);
    // In bounds: block b reads row[b * BYTES ..][..BYTES] and act[b * QK ..][..QK].
    let (row, act) = (row.as_ptr(), act.as_ptr());
    let mut acc = 0f32;
    for (b, bias) in bias.iter().enumerate() {
        let block = row.add(b * U::BYTES);
        let a = act.add(b * QK);
        let (mut s0, mut s1) = (M::start(vld1q_s32(bias.as_ptr())), M::zero());
        U::codes(block, |j, c| {
            let x = vld1q_s8(a.add(16 * j));
            if j % 2 == 0 {
                s0 = M::mac(s0, c, x);
            } else {
                s1 = M::mac(s1, c, x);
            }
        });
        acc += U::scale(block) * M::sum2(s0, s1) as f32;
    }
    acc
}

/// One TQ row against all `acc.len()` tokens: each block is unpacked once into registers
/// and reused for every token; `acc[t] += d_b * dot` as in [`tq_row`].
///
/// # Safety
/// The CPU must support `M`'s features.
#[inline(always)]
pub(super) unsafe fn tq_rows<M: Mac, U: TqBlock>(row: &[u8], act: &[i8], bias: &[[i32; 4]], acc: &mut [f32]) {
    let m = acc.len();
    let blocks = bias.len() / m;
    let k = blocks * QK;
    assert!(row.len() >= blocks * U::BYTES && act.len() >= m * k && bias.len() == m * blocks);
    for b in 0..blocks {
        // In bounds: see the assert above.
        let block = row.as_ptr().add(b * U::BYTES);
        let mut codes = [vdupq_n_u8(0); 16];
        U::codes(block, |j, c| codes[j] = c);
        let d = U::scale(block);
        for (t, acc) in acc.iter_mut().enumerate() {
            let bias = vld1q_s32(bias[t * blocks + b].as_ptr());
            *acc += d * dot256::<M>(&codes, act.as_ptr().add(t * k + b * QK), bias) as f32;
        }
    }
}

/// The codes of 16-byte chunk `c` of a BitNet row, zero past the row's end (code 0 times
/// the zero activation padding adds nothing).
#[inline(always)]
unsafe fn bitnet_bytes(row: &[u8], c: usize) -> uint8x16_t {
    if 16 * c + 16 <= row.len() {
        // In bounds: checked just above.
        vld1q_u8(row.as_ptr().add(16 * c))
    } else {
        let mut tail = [0u8; 16];
        tail[..row.len() - 16 * c].copy_from_slice(&row[16 * c..]);
        vld1q_u8(tail.as_ptr())
    }
}

/// `sum a*code` of one BitNet row (`row.len()` packed bytes) against one permuted token
/// row (`act.len() >= 64 * ceil(row.len() / 16)`).
///
/// # Safety
/// The CPU must support `M`'s features.
#[inline(always)]
pub(super) unsafe fn bitnet_row<M: Mac>(row: &[u8], act: &[i8]) -> i32 {
    let chunks = row.len().div_ceil(16);
    assert!(act.len() >= 64 * chunks);
    let act = act.as_ptr();
    let mut total = 0i32;
    // Groups of 4 full chunks (256 elements, 16 macs): the i16 bound of `Mac::sum2`.
    let groups = row.len() / 64;
    for g in 0..groups {
        let (mut s0, mut s1) = (M::zero(), M::zero());
        for c in 4 * g..4 * g + 4 {
            // In bounds: 4 * groups chunks are full.
            let q = vld1q_u8(row.as_ptr().add(16 * c));
            let a = act.add(64 * c);
            bitnet_chunk(q, |s, codes| {
                let x = vld1q_s8(a.add(16 * s));
                if s % 2 == 0 {
                    s0 = M::mac(s0, codes, x);
                } else {
                    s1 = M::mac(s1, codes, x);
                }
            });
        }
        total += M::sum2(s0, s1);
    }
    // The rest: at most 3 full chunks and a partial one.
    if 4 * groups < chunks {
        let (mut s0, mut s1) = (M::zero(), M::zero());
        for c in 4 * groups..chunks {
            let a = act.add(64 * c);
            bitnet_chunk(bitnet_bytes(row, c), |s, codes| {
                let x = vld1q_s8(a.add(16 * s));
                if s % 2 == 0 {
                    s0 = M::mac(s0, codes, x);
                } else {
                    s1 = M::mac(s1, codes, x);
                }
            });
        }
        total += M::sum2(s0, s1);
    }
    total
}

/// `sum a*code` of one BitNet row against every token of `act` (into `dots`): each group
/// of 256 weights is unpacked once into registers and reused for every token.
///
/// # Safety
/// The CPU must support `M`'s features.
#[inline(always)]
pub(super) unsafe fn bitnet_rows<M: Mac>(row: &[u8], act: &BitnetAct, dots: &mut [i32]) {
    let chunks = row.len().div_ceil(16);
    assert!(act.stride >= 64 * chunks && act.codes.len() >= dots.len() * act.stride);
    dots.fill(0);
    let groups = row.len() / 64;
    for g in 0..groups {
        let mut codes = [vdupq_n_u8(0); 16];
        for i in 0..4 {
            // In bounds: 4 * groups chunks are full.
            let q = vld1q_u8(row.as_ptr().add(64 * g + 16 * i));
            bitnet_chunk(q, |s, v| codes[4 * i + s] = v);
        }
        for (t, dot) in dots.iter_mut().enumerate() {
            // In bounds: token t's row has `stride >= 256 * groups` codes.
            *dot += dot256::<M>(&codes, act.row(t).as_ptr().add(256 * g), vdupq_n_s32(0));
        }
    }
    // The rest: at most 3 full chunks and a partial one, at most 16 vectors.
    if 4 * groups < chunks {
        let mut codes = [vdupq_n_u8(0); 16];
        let vectors = 4 * (chunks - 4 * groups);
        for c in 4 * groups..chunks {
            bitnet_chunk(bitnet_bytes(row, c), |s, v| codes[4 * (c - 4 * groups) + s] = v);
        }
        for (t, dot) in dots.iter_mut().enumerate() {
            let a = act.row(t)[256 * groups..].as_ptr();
            let (mut s0, mut s1) = (M::zero(), M::zero());
            for j in (0..vectors).step_by(2) {
                // In bounds: the row's padded length covers `chunks` chunks of 64.
                s0 = M::mac(s0, codes[j], vld1q_s8(a.add(16 * j)));
                s1 = M::mac(s1, codes[j + 1], vld1q_s8(a.add(16 * j + 16)));
            }
            *dot += M::sum2(s0, s1);
        }
    }
}

/// A TQ row against one token: (row bytes, token codes, block biases) -> sum.
pub(super) type TqRowFn = unsafe fn(&[u8], &[i8], &[[i32; 4]]) -> f32;
/// A TQ row against all tokens: (row bytes, all codes, all biases, per-token sums).
pub(super) type TqRowsFn = unsafe fn(&[u8], &[i8], &[[i32; 4]], &mut [f32]);

/// A path's TQ row kernels: one row against one token, and against many.
pub(super) struct RowFns {
    pub tq_row: TqRowFn,
    pub tq_rows: TqRowsFn,
}

/// The TQ1_0/TQ2_0 kernel driver. The caller checked that this CPU runs `fns`.
pub(super) fn tq_gemv(w: &MatRef, a: &MatRef, out: &mut OutTile, bytes_per_block: usize, fns: RowFns) {
    let act = ActI8::parse(a);
    let blocks = w.cols / QK;
    let row_bytes = blocks * bytes_per_block;
    let bias = block_bias(&act, QK);
    let mut acc = vec![0f32; act.m];
    for r in out.rows() {
        let row = &w.bytes[r * row_bytes..][..row_bytes];
        if act.m == 1 {
            // SAFETY: the caller checked the CPU features; lengths are asserted inside.
            acc[0] = unsafe { (fns.tq_row)(row, act.codes, &bias) };
        } else {
            acc.fill(0.0);
            // SAFETY: as above.
            unsafe { (fns.tq_rows)(row, act.codes, &bias, &mut acc) };
        }
        // Every token is computed (this path has no token tiles yet); the view's are kept.
        for t in out.tokens() {
            out.set(t, r, act.scales[t] * acc[t]);
        }
    }
}

/// The BITNET_B1_58 kernel driver: one scale, one i32 dot per (token, row).
/// The caller checked that this CPU runs `row_fn` and `rows_fn`.
pub(super) fn bitnet_gemv(
    w: &MatRef,
    a: &MatRef,
    out: &mut OutTile,
    row_fn: unsafe fn(&[u8], &[i8]) -> i32,
    rows_fn: unsafe fn(&[u8], &BitnetAct, &mut [i32]),
) {
    let act = ActI8::parse(a);
    let perm = BitnetAct::new(&act);
    let scale = bitnet::scale(w.bytes);
    let row_bytes = w.cols / 4;
    let mut dots = vec![0i32; act.m];
    for r in out.rows() {
        let row = &w.bytes[r * row_bytes..][..row_bytes];
        if act.m == 1 {
            // SAFETY: the caller checked the CPU features; lengths are asserted inside.
            dots[0] = unsafe { row_fn(row, perm.row(0)) };
        } else {
            // SAFETY: as above.
            unsafe { rows_fn(row, &perm, &mut dots) };
        }
        // Every token is computed (this path has no token tiles yet); the view's are kept.
        for t in out.tokens() {
            out.set(t, r, act.scales[t] * (scale * (dots[t] - perm.sums[t]) as f32));
        }
    }
}

/// Instantiates the row kernels of one path under their own `#[inline(never)]` symbols
/// (`<path>::tq1_0_row`, ...; `scripts/count-arm-insns.sh` disassembles them) and the
/// path's three `KernelFn`s, which check the CPU once per call.
macro_rules! path_kernels {
    ($mac:ty, $features:literal, $available:path) => {
        use super::gemv::{self, RowFns};
        use super::unpack::{Tq1, Tq2, TqBlock};
        use crate::kernel::{MatRef, OutTile, Prep};

        #[inline(never)]
        #[target_feature(enable = $features)]
        unsafe fn tq1_0_row(row: &[u8], act: &[i8], bias: &[[i32; 4]]) -> f32 {
            gemv::tq_row::<$mac, Tq1>(row, act, bias)
        }

        #[inline(never)]
        #[target_feature(enable = $features)]
        unsafe fn tq1_0_rows(row: &[u8], act: &[i8], bias: &[[i32; 4]], acc: &mut [f32]) {
            gemv::tq_rows::<$mac, Tq1>(row, act, bias, acc)
        }

        #[inline(never)]
        #[target_feature(enable = $features)]
        unsafe fn tq2_0_row(row: &[u8], act: &[i8], bias: &[[i32; 4]]) -> f32 {
            gemv::tq_row::<$mac, Tq2>(row, act, bias)
        }

        #[inline(never)]
        #[target_feature(enable = $features)]
        unsafe fn tq2_0_rows(row: &[u8], act: &[i8], bias: &[[i32; 4]], acc: &mut [f32]) {
            gemv::tq_rows::<$mac, Tq2>(row, act, bias, acc)
        }

        #[inline(never)]
        #[target_feature(enable = $features)]
        unsafe fn bitnet_row(row: &[u8], act: &[i8]) -> i32 {
            gemv::bitnet_row::<$mac>(row, act)
        }

        #[inline(never)]
        #[target_feature(enable = $features)]
        unsafe fn bitnet_rows(row: &[u8], act: &super::act::BitnetAct, dots: &mut [i32]) {
            gemv::bitnet_rows::<$mac>(row, act, dots)
        }

        fn check_cpu() {
            assert!($available(), concat!("this CPU lacks ", $features));
        }

        pub fn tq1_0(w: &MatRef, a: &Prep, out: &mut OutTile) {
            check_cpu();
            let a = a.raw();
            gemv::tq_gemv(w, a, out, Tq1::BYTES, RowFns { tq_row: tq1_0_row, tq_rows: tq1_0_rows });
        }

        pub fn tq2_0(w: &MatRef, a: &Prep, out: &mut OutTile) {
            check_cpu();
            let a = a.raw();
            gemv::tq_gemv(w, a, out, Tq2::BYTES, RowFns { tq_row: tq2_0_row, tq_rows: tq2_0_rows });
        }

        pub fn bitnet(w: &MatRef, a: &Prep, out: &mut OutTile) {
            check_cpu();
            let a = a.raw();
            gemv::bitnet_gemv(w, a, out, bitnet_row, bitnet_rows);
        }
    };
}
pub(super) use path_kernels;
