//! `bitnet_gemm/neon-i8mm`, for batches (m >= 2) on CPUs with FEAT_I8MM: `smmla`, a 2x8 by
//! 8x2 int8 block product (32 MACs per instruction, twice `sdot`). Rust's i8mm intrinsics
//! are unstable, so `smmla` is written with `asm!`.
//!
//! Each panel of weight rows is unpacked once, into signed trits in the `smmla` operand
//! layout, and reused by every token pair; activations are placed as for the NEON tile
//! kernels ([`tile::Prepared`], the same element order as the unpacked weights) and
//! interleaved in token pairs once per call. Signed trits need no activation-sum
//! correction, and every int32 lane is the exact dot product of one (row, token).

use super::neon::Smlal;
use super::simd::{tq1_digit, tq1_qh, Neon};
use crate::format::{bitnet, tq1_0, tq2_0, Format};
use crate::kernel::tile::{self, Prepared, Simd, Tq1, Tq2};
use crate::kernel::{Geometry, Kernel, MatRef, OutTile, Prep};
use core::arch::aarch64::*;
use core::arch::asm;

pub(super) const FEATURES: &str = "neon, i8mm";

pub(super) fn available() -> bool {
    std::arch::is_aarch64_feature_detected!("i8mm")
}

/// The NEON layout the activations are placed in (16-byte vectors); only the layout is used.
type Layout = Neon<Smlal>;

/// Weight rows unpacked at a time: 16 rows of k = 4096 are 64 KiB, which stay in L2 while
/// every token pair passes over them.
const PANEL: usize = 16;
/// Row pairs x token pairs per register tile: 8 accumulators and 8 float sums.
const RP: usize = 2;
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
    fn new(p: &Prepared) -> Pairs {
        let (stride, m) = (p.stride(), p.scales().len());
        let pairs = m.div_ceil(2);
        let mut codes = vec![0i8; pairs * 2 * stride];
        let zeros = vec![0i8; stride];
        for q in 0..pairs {
            let second = if 2 * q + 1 < m { p.token(2 * q + 1) } else { &zeros };
            zip_rows(p.token(2 * q), second, &mut codes, 32 * q, 32 * pairs);
        }
        Pairs { codes, stride, pairs, scales: p.scales().to_vec() }
    }
}

/// Interleaves two rows of slot vectors into `smmla` operands: vector `i` of both to the 32
/// bytes at `first + i * step`, `[r0 0..8, r1 0..8, r0 8..16, r1 8..16]`.
fn zip_rows(r0: &[i8], r1: &[i8], out: &mut [i8], first: usize, step: usize) {
    let vectors = r0.len() / 16;
    assert!(r1.len() == r0.len() && vectors > 0 && first + (vectors - 1) * step + 32 <= out.len() && step >= 32);
    for i in 0..vectors {
        // SAFETY: reads 16 bytes at `16 i` of each row and writes 32 at `first + i step`
        // (asserted); NEON is part of every aarch64 target Rust builds for.
        unsafe {
            let (a, b) = (
                vreinterpretq_u64_s8(vld1q_s8(r0.as_ptr().add(16 * i))),
                vreinterpretq_u64_s8(vld1q_s8(r1.as_ptr().add(16 * i))),
            );
            let o = out.as_mut_ptr().add(first + i * step);
            vst1q_s8(o, vreinterpretq_s8_u64(vzip1q_u64(a, b)));
            vst1q_s8(o.add(16), vreinterpretq_s8_u64(vzip2q_u64(a, b)));
        }
    }
}

/// A weight format unpacked into signed trits in the prepared activations' order.
trait Unpack {
    /// Blocks per row of `k` (one for BITNET_B1_58: one scale per tensor).
    fn blocks(k: usize) -> usize;
    /// Prepares activations in the order [`Unpack::row`] writes.
    fn prepare(a: &MatRef) -> Prepared;
    /// Writes row `row` of `w` as trits (`stride` slots, in the prepared order) to `out`
    /// and its block scales to `scales`.
    ///
    /// # Safety
    /// The CPU must have NEON.
    unsafe fn row(w: &MatRef, row: usize, out: &mut [i8], scales: &mut [f32]);
}

/// Codes {0, 1, 2, 3} to trits {-1, 0, 1, 2} (a corrupt 3 counts as +2, as everywhere).
///
/// # Safety
/// The CPU must have NEON; `out` must have 16 writable bytes.
#[inline(always)]
unsafe fn store_trits(out: *mut i8, codes: uint8x16_t) {
    // SAFETY: as the caller guarantees.
    unsafe { vst1q_s8(out, vreinterpretq_s8_u8(vsubq_u8(codes, vdupq_n_u8(1)))) }
}

impl Unpack for Tq2 {
    fn blocks(k: usize) -> usize {
        k / 256
    }

    fn prepare(a: &MatRef) -> Prepared {
        tile::place_tq::<Layout, Tq2>(a)
    }

    #[inline(always)]
    unsafe fn row(w: &MatRef, row: usize, out: &mut [i8], scales: &mut [f32]) {
        let blocks = Self::blocks(w.cols);
        let bytes = &w.bytes[row * blocks * tq2_0::BLOCK_BYTES..][..blocks * tq2_0::BLOCK_BYTES];
        assert!(out.len() >= blocks * 256 && scales.len() >= blocks);
        // SAFETY: register-only NEON, which the caller has.
        let mask3 = unsafe { vdupq_n_u8(3) };
        for (b, block) in bytes.chunks_exact(tq2_0::BLOCK_BYTES).enumerate() {
            // SAFETY: four 16-byte loads in the block's 64 code bytes, 16 stores in the
            // block's 256 slots of `out` (asserted), the scale's 2 bytes in the block; NEON.
            unsafe {
                for c in 0..4 {
                    let x = vld1q_u8(block.as_ptr().add(16 * c));
                    for plane in 0..4 {
                        store_trits(
                            out.as_mut_ptr().add(b * 256 + 64 * c + 16 * plane),
                            Layout::plane2(x, plane, mask3),
                        );
                    }
                }
                scales[b] = Layout::f16(block.as_ptr().add(tq2_0::QS_BYTES));
            }
        }
    }
}

impl Unpack for Tq1 {
    fn blocks(k: usize) -> usize {
        k / 256
    }

    fn prepare(a: &MatRef) -> Prepared {
        tile::place_tq::<Layout, Tq1>(a)
    }

    #[inline(always)]
    unsafe fn row(w: &MatRef, row: usize, out: &mut [i8], scales: &mut [f32]) {
        let blocks = Self::blocks(w.cols);
        let bytes = &w.bytes[row * blocks * tq1_0::BLOCK_BYTES..][..blocks * tq1_0::BLOCK_BYTES];
        assert!(out.len() >= blocks * 256 && scales.len() >= blocks);
        for (b, block) in bytes.chunks_exact(tq1_0::BLOCK_BYTES).enumerate() {
            // SAFETY: three 16-byte loads in the block's 48 `qs` bytes and `qh`, 16 stores in
            // the block's 256 slots of `out` (asserted; the order of `Neon::tq1_slot`); NEON.
            unsafe {
                let o = out.as_mut_ptr().add(b * 256);
                for c in 0..3 {
                    let x = vld1q_u8(block.as_ptr().add(16 * c));
                    for digit in 0..5 {
                        store_trits(o.add(80 * c + 16 * digit), tq1_digit(x, digit));
                    }
                }
                store_trits(o.add(240), tq1_qh(block.as_ptr()));
                scales[b] = Layout::f16(block.as_ptr().add(tile::TQ1_CODE_BYTES));
            }
        }
    }
}

/// BITNET_B1_58 in this kernel.
struct BitNet;

impl Unpack for BitNet {
    fn blocks(_k: usize) -> usize {
        1
    }

    fn prepare(a: &MatRef) -> Prepared {
        tile::place_bitnet::<Layout>(a)
    }

    #[inline(always)]
    /// The block scale is 1: the dot stays exact, and the tensor's scale comes after it in
    /// the reference's order (see [`store`]).
    unsafe fn row(w: &MatRef, row: usize, out: &mut [i8], scales: &mut [f32]) {
        scales[0] = 1.0;
        let n = w.cols / 4;
        let bytes = &w.bytes[row * n..(row + 1) * n];
        let chunks = n.div_ceil(16);
        assert!(out.len() >= chunks * 64);
        // SAFETY: register-only NEON, which the caller has.
        let mask3 = unsafe { vdupq_n_u8(3) };
        for c in 0..chunks {
            // SAFETY: loads in `bytes` (the tail through `load_partial`), stores in `out`
            // (asserted); NEON. Slots past the row's end hold -1 and meet zero activations.
            unsafe {
                let p = bytes.as_ptr().add(16 * c);
                let x = if 16 * c + 16 <= n { Layout::load(p) } else { Layout::load_partial(p, n - 16 * c) };
                for plane in 0..4 {
                    store_trits(out.as_mut_ptr().add(64 * c + 16 * plane), Layout::plane2(x, plane, mask3));
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

/// Row pairs in a panel.
const PAIRS: usize = PANEL / 2;

/// One unpacked panel: row pairs interleaved like [`Pairs`] (vector `i` of pair `p` at
/// `(i * PAIRS + p) * 32`), and per (block, pair) at `(b * PAIRS + p) * 4` the scales
/// `[d0, d0, d1, d1]` of the `smmla` lanes `(r0, t0), (r0, t1), (r1, t0), (r1, t1)`.
struct Panel {
    codes: Vec<i8>,
    scales: Vec<f32>,
    /// Slots per row, and slot vectors per block.
    stride: usize,
    block_vecs: usize,
    blocks: usize,
}

impl Panel {
    /// Unpacks rows `rows` (at most [`PANEL`]) of `w`; an odd last row pairs with zeros.
    ///
    /// # Safety
    /// The CPU must have NEON.
    #[inline(always)]
    unsafe fn fill<U: Unpack>(&mut self, w: &MatRef, rows: std::ops::Range<usize>, scratch: &mut [i8], d: &mut [f32]) {
        let (stride, blocks) = (self.stride, self.blocks);
        let (s0, s1) = scratch.split_at_mut(stride);
        let (d0, d1) = d.split_at_mut(blocks);
        for p in 0..rows.len().div_ceil(2) {
            let row = rows.start + 2 * p;
            // SAFETY: the caller vouches for NEON.
            unsafe { U::row(w, row, s0, d0) };
            if row + 1 < rows.end {
                // SAFETY: as above.
                unsafe { U::row(w, row + 1, s1, d1) };
            } else {
                s1.fill(0);
                d1.fill(0.0);
            }
            zip_rows(s0, &s1[..stride], &mut self.codes, 32 * p, 32 * PAIRS);
            for b in 0..blocks {
                let at = (b * PAIRS + p) * 4;
                self.scales[at..at + 4].copy_from_slice(&[d0[b], d0[b], d1[b], d1[b]]);
            }
        }
    }
}

/// Row pairs `p0..p0 + R` of the panel by token pairs `q0..q0 + T`; the sums per lane (a
/// TQ row's scaled block sums, or BitNet's dot as f32) to `f`.
///
/// # Safety
/// The CPU must have NEON and FEAT_I8MM.
#[inline(always)]
unsafe fn smmla_tile<const R: usize, const T: usize>(
    panel: &Panel,
    p0: usize,
    act: &Pairs,
    q0: usize,
) -> [[[f32; 4]; T]; R] {
    let vectors = panel.blocks * panel.block_vecs;
    let (w_step, a_step) = (32 * PAIRS, 32 * act.pairs);
    // Bounds are checked here, once per tile; the loops use raw pointers.
    assert!(act.stride == panel.stride && p0 + R <= PAIRS && q0 + T <= act.pairs && vectors * 16 == panel.stride);
    assert!((vectors - 1) * w_step + (p0 + R) * 32 <= panel.codes.len());
    assert!((vectors - 1) * a_step + (q0 + T) * 32 <= act.codes.len());
    assert!(((panel.blocks - 1) * PAIRS + p0 + R) * 4 <= panel.scales.len());
    let mut out = [[[0f32; 4]; T]; R];
    // SAFETY: every load stays in the ranges asserted above; the caller vouches for the
    // features.
    unsafe {
        let mut w = panel.codes.as_ptr().add(32 * p0);
        let mut a = act.codes.as_ptr().add(32 * q0);
        let mut f = [[vdupq_n_f32(0.0); T]; R];
        for b in 0..panel.blocks {
            let mut acc = [[vdupq_n_s32(0); T]; R];
            for _ in 0..panel.block_vecs {
                for h in 0..2 {
                    let mut wv = [vdupq_n_s8(0); R];
                    for r in 0..R {
                        wv[r] = vld1q_s8(w.add(32 * r + 16 * h));
                    }
                    for t in 0..T {
                        let av = vld1q_s8(a.add(32 * t + 16 * h));
                        for r in 0..R {
                            acc[r][t] = smmla(acc[r][t], wv[r], av);
                        }
                    }
                }
                w = w.wrapping_add(w_step);
                a = a.wrapping_add(a_step);
            }
            for r in 0..R {
                let d = vld1q_f32(panel.scales.as_ptr().add((b * PAIRS + p0 + r) * 4));
                for t in 0..T {
                    f[r][t] = vfmaq_f32(f[r][t], vcvtq_f32_s32(acc[r][t]), d);
                }
            }
        }
        for r in 0..R {
            for t in 0..T {
                vst1q_f32(out[r][t].as_mut_ptr(), f[r][t]);
            }
        }
    }
    out
}

/// Writes the tile's lanes that fall in `out`'s block: lane `2i + j` is (row `2 (p0 + r) + i`
/// of the panel, token `2 (q0 + t) + j`).
fn store<const R: usize, const T: usize>(
    sums: &[[[f32; 4]; T]; R],
    row0: usize,
    p0: usize,
    q0: usize,
    act: &Pairs,
    w_scale: Option<f32>,
    out: &mut OutTile,
) {
    let (rows, tokens) = (out.rows(), out.tokens());
    for r in 0..R {
        for t in 0..T {
            for lane in 0..4 {
                let (row, token) = (row0 + 2 * (p0 + r) + lane / 2, 2 * (q0 + t) + lane % 2);
                if rows.contains(&row) && tokens.contains(&token) {
                    let s = sums[r][t][lane];
                    // BitNet in the reference's order: `a_scale * (d * dot)`.
                    let v = match w_scale {
                        Some(d) => act.scales[token] * (d * s),
                        None => act.scales[token] * s,
                    };
                    out.set(token, row, v);
                }
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
            store(&smmla_tile::<RP, T>(panel, p, act, q0), row0, p, q0, act, w_scale, out);
            p += RP;
        }
        while p < npairs {
            store(&smmla_tile::<1, T>(panel, p, act, q0), row0, p, q0, act, w_scale, out);
            p += 1;
        }
    }
}

/// `w` by the token pairs of `act`, into `out`'s block, panel by panel.
///
/// # Safety
/// The CPU must have NEON and FEAT_I8MM; `act` was prepared by `U::prepare` from an
/// activation with `w.cols` columns and `out.m()` rows (what `Kernel::run` checks).
#[inline(always)]
unsafe fn gemm<U: Unpack>(w: &MatRef, act: &Pairs, out: &mut OutTile) {
    let (rows, tokens) = (out.rows(), out.tokens());
    if rows.is_empty() || tokens.is_empty() {
        return;
    }
    let blocks = U::blocks(w.cols);
    let stride = act.stride;
    let w_scale = (w.format == Format::BitnetB158).then(|| bitnet::scale(w.bytes));
    let mut panel = Panel {
        codes: vec![0; PANEL * stride],
        scales: vec![0.0; PAIRS * blocks * 4],
        stride,
        block_vecs: stride / blocks / 16,
        blocks,
    };
    let (mut scratch, mut d) = (vec![0i8; 2 * stride], vec![0f32; 2 * blocks]);
    // Token pairs covering the block (pairs are aligned to even tokens of the whole output).
    let (q_start, q_end) = (tokens.start / 2, tokens.end.div_ceil(2));
    let mut row0 = rows.start;
    while row0 < rows.end {
        let end = (row0 + PANEL).min(rows.end);
        // SAFETY: the caller vouches for the features; every pair index below is in range.
        unsafe {
            panel.fill::<U>(w, row0..end, &mut scratch, &mut d);
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
}

impl Prep<'_> {
    fn pairs(&self) -> &Pairs {
        match self {
            Prep::Pairs(p) => p,
            _ => unreachable!("Kernel::run_prepared checks that a kernel gets its own preparation"),
        }
    }
}

#[target_feature(enable = "neon,i8mm")]
fn run_tq1(w: &MatRef, a: &Pairs, out: &mut OutTile) {
    // SAFETY: features enabled here; `Kernel::run_prepared` checked the shapes and that `a`
    // is this entry's own preparation.
    unsafe { gemm::<Tq1>(w, a, out) }
}

#[target_feature(enable = "neon,i8mm")]
fn run_tq2(w: &MatRef, a: &Pairs, out: &mut OutTile) {
    // SAFETY: as in `run_tq1`.
    unsafe { gemm::<Tq2>(w, a, out) }
}

#[target_feature(enable = "neon,i8mm")]
fn run_bitnet(w: &MatRef, a: &Pairs, out: &mut OutTile) {
    // SAFETY: as in `run_tq1`.
    unsafe { gemm::<BitNet>(w, a, out) }
}

fn cpu() {
    assert!(available(), "bitnet_gemm/neon-i8mm needs {FEATURES}");
}

/// The registry entries, preferred from two tokens on (one token has no pair to share a
/// weight load with, and runs the dotprod GEMV).
pub(super) fn kernels() -> [Kernel; 3] {
    fn entry(weight: Format, prepare: crate::kernel::PrepareFn, run: crate::kernel::KernelFn) -> Kernel {
        Kernel {
            name: c"bitnet_gemm/neon-i8mm",
            weight,
            act: Format::I8Absmax,
            requires: FEATURES,
            available,
            min_tokens: 2,
            geometry: Geometry { rows: PANEL, tokens: 2 * TP },
            prepare,
            run,
        }
    }
    [
        entry(
            Format::Tq1_0,
            |a| Prep::Pairs(Pairs::new(&Tq1::prepare(a))),
            |w, a, out| {
                cpu();
                // SAFETY: the CPU has the features (checked above).
                unsafe { run_tq1(w, a.pairs(), out) }
            },
        ),
        entry(
            Format::Tq2_0,
            |a| Prep::Pairs(Pairs::new(&Tq2::prepare(a))),
            |w, a, out| {
                cpu();
                // SAFETY: as above.
                unsafe { run_tq2(w, a.pairs(), out) }
            },
        ),
        entry(
            Format::BitnetB158,
            |a| Prep::Pairs(Pairs::new(&BitNet::prepare(a))),
            |w, a, out| {
                cpu();
                // SAFETY: as above.
                unsafe { run_bitnet(w, a.pairs(), out) }
            },
        ),
    ]
}
