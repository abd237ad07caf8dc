//! `bitnet_gemm/neon-i8mm`, for batches (m >= 2) on CPUs with FEAT_I8MM: `smmla`, a 2x8 by
//! 8x2 int8 block product (32 MACs per instruction, twice `sdot`). Rust's i8mm intrinsics
//! are unstable, so `smmla` is written with `asm!`.
//!
//! Each panel of weight rows is unpacked once, into signed trits in the `smmla` operand
//! layout, and reused by every token pair; activations take the NEON tile kernels' order
//! (their placement, the same element order as the unpacked weights) and are interleaved
//! in token pairs once per call, gathered straight from the rows where every slot vector
//! is 16 consecutive elements (TQ). Signed trits need no activation-sum
//! correction, and every int32 lane is the exact dot product of one (row, token).

// Tiles index several per-row and per-token arrays in lockstep.
#![allow(clippy::needless_range_loop)]

use super::neon::Smlal;
use super::simd::{tq1_digit, tq1_qh, Neon};
use crate::format::{q2_0, tq1_0, Format};
use crate::kernel::prep::Placement;
use crate::kernel::tile::{self, OneScale, Prepared, Simd};
use crate::kernel::weights::{Codes, Scale, Tq1, Tq2, Q2};
use crate::kernel::{ActI8, Compute, Geometry, Kernel, MatRef, OutTile};
use core::arch::aarch64::*;
use core::arch::asm;
use std::cell::Cell;
use std::marker::PhantomData;

pub(super) const FEATURES: &str = "neon, i8mm";

pub(super) fn available() -> bool {
    std::arch::is_aarch64_feature_detected!("i8mm")
}

/// The NEON layout the activations are placed in (16-byte vectors); only the layout is used.
type Layout = Neon<Smlal>;

/// Weight rows unpacked at a time: 16 rows of k = 4096 are 64 KiB, which stay in L2 while
/// every token pair passes over them.
const PANEL: usize = 16;
/// Row pairs x token pairs per register tile: 16 accumulators, 8 weight and 2 activation
/// operands of NEON's 32 registers (the float sums of TQ blocks wait in memory meanwhile).
const RP: usize = 4;
const TP: usize = 4;

/// Activations interleaved in token pairs: slot vector `i` (16 slots of the prepared
/// order) of pair `q` is the 32 bytes at `(i * pairs + q) * 32`, `[t0 0..8, t1 0..8,
/// t0 8..16, t1 8..16]`: the two `smmla` operands, and a tile's pairs side by side. An odd
/// last token pairs with zeros.
pub(crate) struct Pairs {
    codes: Vec<i8>,
    /// Bytes per token (prepared slots).
    stride: usize,
    pairs: usize,
    scales: Vec<f32>,
}

impl Pairs {
    /// Interleaves the rows `token(t)` of `m` tokens (`stride` bytes each) in periods of
    /// `period.len()` 16-byte vectors: vector `j` of a period is slot vector `period[j]` of
    /// that period.
    fn zip<'a>(
        m: usize,
        stride: usize,
        scales: Vec<f32>,
        token: impl Fn(usize) -> &'a [i8],
        period: &[usize],
    ) -> Pairs {
        let (pairs, n) = (m.div_ceil(2), period.len());
        let vectors = stride / 16;
        assert!(n > 0 && vectors.is_multiple_of(n) && period.iter().all(|&j| j < n), "a period's slots are its own");
        let mut codes = vec![0i8; pairs * vectors * 32];
        let zeros = vec![0i8; if m % 2 == 1 { stride } else { 0 }];
        // Where vector `j` of a period goes, from the period's first slot vector.
        let offsets: Vec<usize> = period.iter().map(|&j| j * pairs * 32).collect();
        for q in 0..pairs {
            let (r0, r1) = (token(2 * q), if 2 * q + 1 < m { token(2 * q + 1) } else { &zeros });
            assert!(r0.len() == stride && r1.len() == stride);
            for p in 0..vectors / n {
                let first = (p * n * pairs + q) * 32;
                for (j, &offset) in offsets.iter().enumerate() {
                    // SAFETY: vector `p n + j` of both rows (`stride` bytes, asserted), and
                    // slot vector `p n + period[j] < vectors` of pair `q`, 32 bytes at
                    // `((p n + period[j]) pairs + q) * 32 <= (vectors pairs - 1) * 32` in
                    // `codes`; NEON is part of every aarch64 target Rust builds for.
                    unsafe {
                        let c = 16 * (p * n + j);
                        let a = vreinterpretq_u64_s8(vld1q_s8(r0.as_ptr().add(c)));
                        let b = vreinterpretq_u64_s8(vld1q_s8(r1.as_ptr().add(c)));
                        let o = codes.as_mut_ptr().add(first + offset);
                        vst1q_s8(o, vreinterpretq_s8_u64(vzip1q_u64(a, b)));
                        vst1q_s8(o.add(16), vreinterpretq_s8_u64(vzip2q_u64(a, b)));
                    }
                }
            }
        }
        Pairs { codes, stride, pairs, scales }
    }

    /// TQ activations, gathered straight from the rows: in NEON's TQ layouts every slot
    /// vector is 16 consecutive elements ([`Placement::Vectors`]).
    fn tq(a: &MatRef, placement: &Placement) -> Pairs {
        let Placement::Vectors { moves, .. } = placement else {
            unreachable!("NEON's TQ layouts move whole 16-byte vectors")
        };
        // The slot vector of each 16 elements of a block.
        let mut slot = [0usize; 16];
        assert!(moves.len() == 16, "a TQ block is 16 slot vectors");
        for &(e, s) in moves {
            slot[e / 16] = s / 16;
        }
        let act = ActI8::parse(a);
        Pairs::zip(act.m, act.k, act.scales.clone(), |t| act.row(t), &slot)
    }

    /// Activations placed in the unpack order first (BITNET_B1_58's plane de-interleave).
    fn placed(p: &Prepared) -> Pairs {
        Pairs::zip(p.scales().len(), p.stride(), p.scales().to_vec(), |t| p.tokens(t..t + 1), &[0])
    }
}

/// Row pairs in a panel.
const PAIRS: usize = PANEL / 2;
/// Bytes from one slot vector of a panel to the next: one `smmla` operand pair per row pair.
/// A constant, so that the unpack's stores take immediate offsets.
const PANEL_STEP: usize = 32 * PAIRS;

/// Where [`Unpack::rows`] writes one row pair of a panel: slot vector `i` of both rows as
/// trits, interleaved in 8-byte halves (the pair's `smmla` operands, see [`Panel`]) at
/// `codes + i * PANEL_STEP`, and the scales of block `b` to the pair's four lanes at
/// `scales + b * 4 * PAIRS`.
struct PairSink {
    codes: *mut i8,
    /// Slot vectors per row, and blocks per row: the bounds [`Panel::sink`] checked.
    vectors: usize,
    scales: *mut f32,
    blocks: usize,
}

impl PairSink {
    /// Writes slot vector `i` of both rows: codes {0, 1, 2, 3} as trits {-1, 0, 1, 2} (a
    /// corrupt 3 counts as +2, as everywhere).
    ///
    /// # Safety
    /// The CPU must have NEON; `i < self.vectors`.
    #[inline(always)]
    unsafe fn put(&self, i: usize, codes: [uint8x16_t; 2]) {
        // SAFETY: `Panel::sink` checked that the 32 bytes of every vector below `vectors` lie
        // in the panel, and the caller keeps `i` below it; NEON, which the caller has.
        unsafe {
            let one = vdupq_n_u8(1);
            let (t0, t1) =
                (vreinterpretq_u64_u8(vsubq_u8(codes[0], one)), vreinterpretq_u64_u8(vsubq_u8(codes[1], one)));
            let o = self.codes.add(i * PANEL_STEP);
            vst1q_s8(o, vreinterpretq_s8_u64(vzip1q_u64(t0, t1)));
            vst1q_s8(o.add(16), vreinterpretq_s8_u64(vzip2q_u64(t0, t1)));
        }
    }

    /// Writes the scales of block `b < self.blocks` to the pair's lanes.
    fn scale(&self, b: usize, d: [f32; 2]) {
        assert!(b < self.blocks);
        // SAFETY: `Panel::sink` checked that the four lanes of every block below `blocks`
        // lie in the panel's scales (asserted `b` above).
        unsafe { self.scales.add(b * 4 * PAIRS).cast::<[f32; 4]>().write_unaligned([d[0], d[0], d[1], d[1]]) }
    }
}

/// A weight format unpacked into signed trits in the prepared activations' order.
trait Unpack: Codes {
    /// Blocks per row of `k` (one for BITNET_B1_58: one scale per tensor).
    fn blocks(k: usize) -> usize;
    /// Activations in the order [`Unpack::rows`] writes, interleaved in token pairs.
    fn pairs(a: &MatRef) -> Pairs;
    /// Writes rows `rows` of `w` as trits (slot vectors in the prepared order) and their
    /// block scales to `sink`.
    ///
    /// # Safety
    /// The CPU must have NEON.
    unsafe fn rows(w: &MatRef, rows: [usize; 2], sink: &PairSink);
}

impl Unpack for Tq2 {
    fn blocks(k: usize) -> usize {
        k / 256
    }

    fn pairs(a: &MatRef) -> Pairs {
        Pairs::tq(a, tile::prepare::tq_runs::<Layout, Tq2>())
    }

    #[inline(always)]
    unsafe fn rows(w: &MatRef, rows: [usize; 2], sink: &PairSink) {
        // SAFETY: the caller's contract.
        unsafe { plane_rows::<Self>(w, rows, sink) }
    }
}

/// [`Unpack::rows`] of a format of 2-bit codes in planes with an f16 scale per block (TQ2_0,
/// Q2_0): each 16-byte load of a block's codes is four slot vectors, its bit planes, in the
/// GEMV's slot order.
///
/// # Safety
/// The CPU must have NEON.
#[inline(always)]
unsafe fn plane_rows<L: Codes>(w: &MatRef, rows: [usize; 2], sink: &PairSink) {
    let (bytes_per_block, loads) = (L::BLOCK_BYTES, L::CODE_BYTES / 16);
    let Scale::Block(scale_at) = L::SCALE else { unreachable!("a format with block scales") };
    let blocks = w.cols / L::BLOCK;
    let bytes = rows.map(|row| &w.bytes[row * blocks * bytes_per_block..][..blocks * bytes_per_block]);
    assert!(sink.vectors == blocks * 4 * loads && L::CODE_BYTES == 16 * loads);
    // SAFETY: register-only NEON, which the caller has.
    let mask3 = unsafe { vdupq_n_u8(3) };
    for b in 0..blocks {
        let block = [bytes[0][b * bytes_per_block..].as_ptr(), bytes[1][b * bytes_per_block..].as_ptr()];
        // SAFETY: `loads` 16-byte loads in each block's code bytes and the scale's 2 bytes,
        // in whole blocks (the rows were sliced); vectors `4 loads b..4 loads (b + 1)` of the
        // rows (asserted); NEON.
        unsafe {
            for c in 0..loads {
                let at = L::CODE_AT + 16 * c;
                let x = [vld1q_u8(block[0].add(at)), vld1q_u8(block[1].add(at))];
                for plane in 0..4 {
                    let codes = [Layout::plane2(x[0], plane, mask3), Layout::plane2(x[1], plane, mask3)];
                    sink.put(4 * loads * b + 4 * c + plane, codes);
                }
            }
            sink.scale(b, [Layout::f16(block[0].add(scale_at)), Layout::f16(block[1].add(scale_at))]);
        }
    }
}

impl Unpack for Tq1 {
    fn blocks(k: usize) -> usize {
        k / 256
    }

    fn pairs(a: &MatRef) -> Pairs {
        Pairs::tq(a, tile::prepare::tq_runs::<Layout, Tq1>())
    }

    #[inline(always)]
    unsafe fn rows(w: &MatRef, rows: [usize; 2], sink: &PairSink) {
        const BYTES: usize = tq1_0::BLOCK_BYTES;
        let blocks = Self::blocks(w.cols);
        let bytes = rows.map(|row| &w.bytes[row * blocks * BYTES..][..blocks * BYTES]);
        assert!(sink.vectors == blocks * 16);
        for b in 0..blocks {
            let block = [bytes[0][b * BYTES..].as_ptr(), bytes[1][b * BYTES..].as_ptr()];
            // SAFETY: three 16-byte loads in each block's 48 `qs` bytes and its `qh`, whole
            // blocks (the rows were sliced); vectors `16 b..16 b + 16` of the rows (asserted;
            // the order of `Neon::tq1_slot`); NEON.
            unsafe {
                for c in 0..3 {
                    let x = [vld1q_u8(block[0].add(16 * c)), vld1q_u8(block[1].add(16 * c))];
                    for digit in 0..5 {
                        sink.put(16 * b + 5 * c + digit, [tq1_digit(x[0], digit), tq1_digit(x[1], digit)]);
                    }
                }
                sink.put(16 * b + 15, [tq1_qh(block[0]), tq1_qh(block[1])]);
                let at = crate::kernel::weights::TQ1_CODE_BYTES;
                sink.scale(b, [Layout::f16(block[0].add(at)), Layout::f16(block[1].add(at))]);
            }
        }
    }
}

/// Q2_0: one 16-byte load per block and row, its four planes the block's four slot
/// vectors (the GEMV's order: [`Q2`]'s placement), one f16 scale per 64 elements.
impl Unpack for Q2 {
    fn blocks(k: usize) -> usize {
        k / q2_0::QK
    }

    fn pairs(a: &MatRef) -> Pairs {
        Pairs::placed(&tile::prepare::prepare_tq_with::<Layout, Q2>(a, None))
    }

    #[inline(always)]
    unsafe fn rows(w: &MatRef, rows: [usize; 2], sink: &PairSink) {
        // SAFETY: the caller's contract.
        unsafe { plane_rows::<Self>(w, rows, sink) }
    }
}

/// The formats with one scale per tensor (BITNET_B1_58 and the I2_S packings): rows of
/// `k / 4` code bytes unpacked the same way, whatever their order, which the activations'
/// placement absorbs.
impl<L: OneScale> Unpack for L {
    fn blocks(_k: usize) -> usize {
        1
    }

    fn pairs(a: &MatRef) -> Pairs {
        Pairs::placed(&tile::prepare::prepare_one_scale_with::<Layout, L>(a, None))
    }

    /// The block scale is 1: the dot stays exact, and the tensor's scale comes after it in
    /// the reference's order (see [`store`]).
    #[inline(always)]
    unsafe fn rows(w: &MatRef, rows: [usize; 2], sink: &PairSink) {
        sink.scale(0, [1.0; 2]);
        let n = w.cols / 4;
        let bytes = rows.map(|row| &w.bytes[row * n..(row + 1) * n]);
        let chunks = n.div_ceil(16);
        assert!(sink.vectors == chunks * 4);
        // SAFETY: register-only NEON, which the caller has.
        let mask3 = unsafe { vdupq_n_u8(3) };
        for c in 0..chunks {
            // SAFETY: loads in the rows' `n` bytes (the tail through `load_partial`), vectors
            // `4 c..4 c + 4` of the rows (asserted); NEON. Slots past the row's end hold -1
            // and meet zero activations.
            unsafe {
                let mut x = [vdupq_n_u8(0); 2];
                for (x, row) in x.iter_mut().zip(bytes) {
                    let p = row.as_ptr().add(16 * c);
                    *x = if 16 * c + 16 <= n { Layout::load(p) } else { Layout::load_partial(p, n - 16 * c) };
                }
                for plane in 0..4 {
                    sink.put(4 * c + plane, [Layout::plane2(x[0], plane, mask3), Layout::plane2(x[1], plane, mask3)]);
                }
            }
        }
    }
}

/// `acc += a . b^T` for the 2x8 int8 matrices `a` (weights, rows) and `b` (tokens).
///
/// # Safety
/// The CPU must have FEAT_I8MM.
#[inline(always)]
unsafe fn smmla(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: a register-only instruction of FEAT_I8MM, which the caller has.
    unsafe {
        asm!(
            ".arch_extension i8mm",
            "smmla {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags),
        )
    };
    acc
}

/// Per-thread panel buffers, grown to the largest shape seen and reused.
#[derive(Default)]
struct Scratch {
    codes: Vec<i8>,
    scales: Vec<f32>,
}

thread_local! {
    static SCRATCH: Cell<Scratch> = Cell::new(Scratch::default());
}

/// `v`'s first `len` elements, growing it if shorter (the contents are rewritten by every
/// call).
fn sized<T: Copy + Default>(v: &mut Vec<T>, len: usize) -> &mut [T] {
    if v.len() < len {
        v.resize(len, T::default());
    }
    &mut v[..len]
}

/// One unpacked panel: row pairs interleaved like [`Pairs`] (vector `i` of pair `p` at
/// `(i * PAIRS + p) * 32`), and per (block, pair) at `(b * PAIRS + p) * 4` the scales
/// `[d0, d0, d1, d1]` of the `smmla` lanes `(r0, t0), (r0, t1), (r1, t0), (r1, t1)`. The
/// lanes of rows past the weight's end hold whatever an earlier panel left: every lane is
/// one (row, token), and those are never written out.
struct Panel<'a> {
    codes: &'a mut [i8],
    scales: &'a mut [f32],
    /// Slots per row, and slot vectors per block.
    stride: usize,
    block_vecs: usize,
    blocks: usize,
}

impl Panel<'_> {
    /// Where row pair `p` of the panel goes, its bounds checked once.
    fn sink(&mut self, p: usize) -> PairSink {
        let vectors = self.stride / 16;
        assert!(p < PAIRS && vectors > 0 && self.blocks > 0);
        assert!((vectors - 1) * PANEL_STEP + 32 * p + 32 <= self.codes.len());
        assert!(((self.blocks - 1) * PAIRS + p) * 4 + 4 <= self.scales.len());
        PairSink {
            codes: self.codes[32 * p..].as_mut_ptr(),
            vectors,
            scales: self.scales[4 * p..].as_mut_ptr(),
            blocks: self.blocks,
        }
    }

    /// Unpacks rows `rows` (at most [`PANEL`]) of `w`, in pairs: an odd last row is
    /// unpacked twice, its copy's lanes never written out.
    ///
    /// # Safety
    /// The CPU must have NEON.
    #[inline(always)]
    unsafe fn fill<U: Unpack>(&mut self, w: &MatRef, rows: std::ops::Range<usize>) {
        for p in 0..rows.len().div_ceil(2) {
            let r0 = rows.start + 2 * p;
            let sink = self.sink(p);
            // SAFETY: the caller vouches for NEON.
            unsafe { U::rows(w, [r0, (r0 + 1).min(rows.end - 1)], &sink) };
        }
    }
}

/// Row pairs `p0..p0 + R` of the panel by token pairs `q0..q0 + T`: the sums per lane (a
/// TQ row's scaled block sums, or BitNet's dot as f32).
///
/// # Safety
/// The CPU must have NEON and FEAT_I8MM.
#[inline(always)]
unsafe fn smmla_tile<const R: usize, const T: usize>(
    panel: &Panel,
    p0: usize,
    act: &Pairs,
    q0: usize,
) -> [[float32x4_t; T]; R] {
    let vectors = panel.blocks * panel.block_vecs;
    let (w_step, a_step) = (PANEL_STEP, 32 * act.pairs);
    // Bounds are checked here, once per tile; the loops use raw pointers.
    assert!(act.stride == panel.stride && p0 + R <= PAIRS && q0 + T <= act.pairs && vectors * 16 == panel.stride);
    // Even (16 per TQ block, 4 per 16 BitNet bytes): the loop takes two at a time.
    assert!(panel.block_vecs.is_multiple_of(2));
    assert!((vectors - 1) * w_step + (p0 + R) * 32 <= panel.codes.len());
    assert!((vectors - 1) * a_step + (q0 + T) * 32 <= act.codes.len());
    assert!(((panel.blocks - 1) * PAIRS + p0 + R) * 4 <= panel.scales.len());
    // SAFETY: every load stays in the ranges asserted above; the caller vouches for the
    // features.
    unsafe {
        let mut w = panel.codes.as_ptr().add(32 * p0);
        let mut a = act.codes.as_ptr().add(32 * q0);
        let mut f = [[vdupq_n_f32(0.0); T]; R];
        for b in 0..panel.blocks {
            let mut acc = [[vdupq_n_s32(0); T]; R];
            // Two slot vectors per step: half the loop's counting and branching.
            for _ in 0..panel.block_vecs / 2 {
                for u in 0..2 {
                    let (w, a) = (w.add(u * w_step), a.add(u * a_step));
                    let mut wv = [[vdupq_n_s8(0); 2]; R];
                    for r in 0..R {
                        wv[r] = [vld1q_s8(w.add(32 * r)), vld1q_s8(w.add(32 * r + 16))];
                    }
                    for h in 0..2 {
                        for t in 0..T {
                            let av = vld1q_s8(a.add(32 * t + 16 * h));
                            for r in 0..R {
                                acc[r][t] = smmla(acc[r][t], wv[r][h], av);
                            }
                        }
                    }
                }
                w = w.wrapping_add(2 * w_step);
                a = a.wrapping_add(2 * a_step);
            }
            for r in 0..R {
                let d = vld1q_f32(panel.scales.as_ptr().add((b * PAIRS + p0 + r) * 4));
                for t in 0..T {
                    f[r][t] = vfmaq_f32(f[r][t], vcvtq_f32_s32(acc[r][t]), d);
                }
            }
        }
        f
    }
}

/// Writes the tile's lanes that fall in `out`'s block: lane `2i + j` of `sums[r][t]` is
/// (row `row0 + 2 r + i`, token `2 (q0 + t) + j`). A token's rows are contiguous in the
/// output, so lanes `j` and `2 + j` of consecutive row pairs (`uzp1`/`uzp2`) make one run.
///
/// # Safety
/// The CPU must have NEON.
#[inline(always)]
unsafe fn store<const R: usize, const T: usize>(
    sums: &[[float32x4_t; T]; R],
    row0: usize,
    q0: usize,
    act: &Pairs,
    w_scale: Option<f32>,
    out: &mut OutTile,
) {
    const { assert!(R <= 4) };
    let (rows, tokens) = (out.rows(), out.tokens());
    // Rows of the tile in `out` (the panel's last pairs may lie past its rows).
    let n = (2 * R).min(rows.end.saturating_sub(row0));
    for t in 0..T {
        for j in 0..2 {
            let token = 2 * (q0 + t) + j;
            if n == 0 || !tokens.contains(&token) {
                continue;
            }
            let a_scale = act.scales[token];
            let mut run = [0f32; 8];
            for r in (0..R).step_by(2) {
                // SAFETY: register-only NEON (the caller has it) and a 16-byte store at
                // `2 r <= 2 (R - 1) <= 4` in the 8 floats of `run`.
                unsafe {
                    let (x, y) = (sums[r][t], sums[(r + 1).min(R - 1)][t]);
                    let v = if j == 0 { vuzp1q_f32(x, y) } else { vuzp2q_f32(x, y) };
                    // One scale per tensor, in the reference's order: `a_scale * (d * dot)`.
                    let v = match w_scale {
                        Some(d) => vmulq_n_f32(vmulq_n_f32(v, d), a_scale),
                        None => vmulq_n_f32(v, a_scale),
                    };
                    vst1q_f32(run.as_mut_ptr().add(2 * r), v);
                }
            }
            // A constant length for whole tiles: two 16-byte stores, not a `memcpy` call.
            if n == 2 * R {
                out.set_run(token, row0, &run[..2 * R]);
            } else {
                out.set_run(token, row0, &run[..n]);
            }
        }
    }
}

/// Every row pair of the panel (rows from `row0`) by token pairs `q0..q0 + T`.
///
/// # Safety
/// As for [`smmla_tile`].
#[inline(always)]
unsafe fn pairs_by<const T: usize>(
    panel: &Panel,
    row0: usize,
    npairs: usize,
    act: &Pairs,
    q0: usize,
    w_scale: Option<f32>,
    out: &mut OutTile,
) {
    let mut p = 0;
    // SAFETY: the tiles' pairs lie in the panel and `act`; the caller vouches for the rest.
    unsafe {
        while p + RP <= npairs {
            store(&smmla_tile::<RP, T>(panel, p, act, q0), row0 + 2 * p, q0, act, w_scale, out);
            p += RP;
        }
        while p < npairs {
            store(&smmla_tile::<1, T>(panel, p, act, q0), row0 + 2 * p, q0, act, w_scale, out);
            p += 1;
        }
    }
}

/// `w` by the token pairs of `act`, into `out`'s block, panel by panel.
///
/// # Safety
/// The CPU must have NEON and FEAT_I8MM; `act` was prepared by `U::pairs` from an
/// activation with `w.cols` columns and `out.m()` rows (what `Kernel::run` checks).
#[inline(always)]
unsafe fn gemm<U: Unpack>(w: &MatRef, act: &Pairs, out: &mut OutTile) {
    let (rows, tokens) = (out.rows(), out.tokens());
    if rows.is_empty() || tokens.is_empty() {
        return;
    }
    let blocks = U::blocks(w.cols);
    let stride = act.stride;
    let w_scale = U::tensor_scale(w.bytes);
    // Taken out for the call and put back after it (a panic in between only loses the
    // buffers). The work stays outside the closure: closures are compiled without the
    // caller's target features.
    let mut s = SCRATCH.with(Cell::take);
    let mut panel = Panel {
        codes: sized(&mut s.codes, PANEL * stride),
        scales: sized(&mut s.scales, PAIRS * blocks * 4),
        stride,
        block_vecs: stride / blocks / 16,
        blocks,
    };
    // Token pairs covering the block (pairs are aligned to even tokens of the whole output).
    let (q_start, q_end) = (tokens.start / 2, tokens.end.div_ceil(2));
    let mut row0 = rows.start;
    while row0 < rows.end {
        let end = (row0 + PANEL).min(rows.end);
        // SAFETY: the caller vouches for the features; every pair index below is in range.
        unsafe {
            panel.fill::<U>(w, row0..end);
            let npairs = (end - row0).div_ceil(2);
            let mut q = q_start;
            while q + TP <= q_end {
                pairs_by::<TP>(&panel, row0, npairs, act, q, w_scale, out);
                q += TP;
            }
            while q < q_end {
                pairs_by::<1>(&panel, row0, npairs, act, q, w_scale, out);
                q += 1;
            }
        }
        row0 = end;
    }
    SCRATCH.with(|c| c.set(s));
}

/// The features `run` enables.
#[target_feature(enable = "neon,i8mm")]
fn run<U: Unpack>(w: &MatRef, a: &Pairs, out: &mut OutTile) {
    // SAFETY: features enabled here; `Kernel::run_prepared` checked the shapes and that `a`
    // is this kernel's own preparation.
    unsafe { gemm::<U>(w, a, out) }
}

/// `bitnet_gemm/neon-i8mm` for format `U`.
struct I8mm<U>(PhantomData<fn() -> U>);

impl<U: Unpack + 'static> Compute for I8mm<U> {
    type Act = Pairs;
    const REQUIRES: &'static str = FEATURES;
    const GEOMETRY: Geometry = Geometry { rows: PANEL, tokens: 2 * TP };

    fn available() -> bool {
        available()
    }

    fn prepare(&self, a: &MatRef) -> Pairs {
        U::pairs(a)
    }

    fn run(&self, w: &MatRef, _a: &MatRef, act: &Pairs, out: &mut OutTile) {
        assert!(available(), "bitnet_gemm/neon-i8mm needs {FEATURES}");
        // SAFETY: the CPU has the features (asserted above).
        unsafe { run::<U>(w, act, out) }
    }
}

/// The registry entries. Preferred from the token count from which the kernel executes
/// fewer instructions than the dotprod kernel the dispatcher would pick otherwise (its GEMV,
/// or its GEMM past that one's threshold) at every m counted (qemu, 256 x 2048: counts,
/// not timings, as there is no ARM hardware here; docs/arm-instruction-counts.md): TQ1_0
/// and TQ2_0 from 6, BITNET_B1_58 and I2_S from 7, I2_S_64 from 8, Q2_0 from 3. Below that,
/// the dotprod kernels execute fewer (the dotprod GEMM's shared panel packer unpacks more
/// cheaply than this kernel's per-row-pair unpack pays back at a few tokens).
pub(super) fn kernels() -> [Kernel; 6] {
    use crate::kernel::weights::{Bitnet, I2s128, I2s64};
    let (name, i8) = (c"bitnet_gemm/neon-i8mm", Format::I8Absmax);
    [
        Kernel::new(name, Format::Tq1_0, i8, 6, &I8mm::<Tq1>(PhantomData)),
        Kernel::new(name, Format::Tq2_0, i8, 6, &I8mm::<Tq2>(PhantomData)),
        Kernel::new(name, Format::BitnetB158, i8, 7, &I8mm::<Bitnet>(PhantomData)),
        Kernel::new(name, Format::I2S, i8, 7, &I8mm::<I2s128>(PhantomData)),
        Kernel::new(name, Format::I2S64, i8, 8, &I8mm::<I2s64>(PhantomData)),
        Kernel::new(name, Format::Q2_0, i8, 3, &I8mm::<Q2>(PhantomData)),
    ]
}
