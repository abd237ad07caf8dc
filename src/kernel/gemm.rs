//! The batched path (`bitnet_gemm/<isa>`): a register-blocked int8 GEMM over weights
//! unpacked once per row panel. An ISA supplies its vector operations through
//! [`GemmSimd`]; the panel packing, the activation packing and the loops are shared by
//! every ISA that has a 4-byte dot product with one operand broadcast (x86 `vpdpbusd` and
//! `vpmaddubsw`).
//!
//! Layouts. A panel of `P = RV * LANES` weight rows is unpacked into biased codes
//! `[k/4][P][4]` (u8 in {0, 1, 2}; a corrupt 3 stays 3 and counts as +2): one vector holds
//! four consecutive codes of `LANES` rows, so one dot-product instruction with a broadcast
//! 4-byte activation operand feeds `LANES` rows. The activations are packed once per call
//! ([`Packed`], in `Kernel::prepare`, so every task of a split call shares them) in blocks
//! of `T` tokens, `[k/16][T][16]`: one 16-byte load gives four quads of one token, which
//! an ISA can broadcast from memory (x86) or from a register lane (ARM `sdot` by element).
//!
//! Arithmetic. `sum a*t = sum a*code - sum a`: every accumulator starts from `-sum a` of
//! its token (per 256-element block for TQ1_0/TQ2_0, per row otherwise), broadcast to every
//! lane, so each int32 lane holds the exact trit dot product of one row. TQ blocks end with
//! one convert + FMA by the rows' block scales; BITNET_B1_58 (one scale per tensor) keeps
//! int32 along the whole row and scales once, exactly as the reference does; so does a TQ
//! tensor whose block scales are all equal (`MatRef::uniform_scale`). int32 along a row
//! holds `|sum| <= 3 * 128 * k` for k up to about 5.5 million.
//!
//! Cost (AMD EPYC Zen 4, one thread, m = 128, 2560x2560): 87-90% of the same-run
//! `vpdpbusd zmm` peak for every format with AVX-512 VNNI; the panel unpack is about 0.1
//! cycle per weight, which sets the `min_tokens` thresholds.
//!
//! The panel buffers are per thread and reused ([`SCRATCH`]): no allocation per call once
//! a thread has seen its largest shape.

// Tiles index several per-row and per-token arrays in lockstep.
#![allow(clippy::needless_range_loop)]

use crate::format::{bitnet, tq1_0, tq2_0, Format};
use crate::kernel::tile::Simd;
use crate::kernel::{MatRef, OutTile};
use std::cell::Cell;
use std::ops::Range;

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
    unsafe fn add8(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn subs_u8(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn min_u8(a: Self::V, b: Self::V) -> Self::V;
    /// A partial accumulator of broadcast products: what the dot-product instruction adds
    /// into (int32 lanes for `vpdpbusd`; int16 pair sums for `vpmaddubsw`, widened every
    /// [`Self::Q_GROUPS`] groups of four quads).
    type Q: Copy;
    /// Groups of four quads a partial accumulator takes before it must be folded into int32.
    const Q_GROUPS: usize;
    /// Starts a partial accumulator on top of `acc`.
    unsafe fn q_start(acc: Self::V) -> Self::Q;
    /// Four quads of one token's activations (16 bytes of [`Packed`]), as [`Self::q_dot`]
    /// takes them: the address itself where the dot product broadcasts from memory, or a
    /// register.
    type A: Copy;
    /// Reads 16 bytes.
    unsafe fn a_load(p: *const u8) -> Self::A;
    /// `q` plus, per int32 lane, the dot product of the lane's four u8 of `w` with quad
    /// `L` (0..4) of `a` (the same for every lane).
    unsafe fn q_dot<const L: i32>(q: Self::Q, w: Self::V, a: Self::A) -> Self::Q;
    /// Folds `q` into the `acc` it was started on.
    unsafe fn q_end(q: Self::Q, acc: Self::V) -> Self::V;
    /// Reads `LANES` floats.
    unsafe fn fload(p: *const f32) -> Self::F;
    /// `f + float(acc) * s`, lane by lane.
    unsafe fn fmadd_lanes(acc: Self::V, s: Self::F, f: Self::F) -> Self::F;
    /// Writes `LANES` floats.
    unsafe fn fstore(p: *mut f32, f: Self::F);
}

/// Reads `len <= W` bytes and zeroes the other lanes, reading nothing past `p + len`.
///
/// # Safety
/// The CPU must have `S`'s features; `p` must have `len` readable bytes.
#[inline(always)]
unsafe fn load_first<S: Simd>(p: *const u8, len: usize) -> S::V {
    assert!(len <= S::W);
    // SAFETY: `len` readable bytes at `p`, as the caller guarantees, and its features.
    unsafe {
        if len == S::W {
            S::load(p)
        } else {
            S::load_partial(p, len)
        }
    }
}

/// Elements per TQ block, and per packing step of every format.
const QK: usize = 256;
/// Four-element groups ("quads") per block.
const BLOCK_QUADS: usize = QK / 4;

/// A ternary weight format as the panel packer sees it: its code bytes per 256 elements,
/// and which quads each raw dword of those bytes expands to.
pub(crate) trait Layout {
    const FORMAT: Format;
    /// Bytes of one block (codes and scale); BitNet has no blocks and packs 64-byte steps.
    const BLOCK_BYTES: usize;
    /// Code bytes per block.
    const CODE_BYTES: usize;
    /// Expands the transposed raw dword `i` of a block (dword `i` of every row in the
    /// group, one per lane) into the codes of the quads it holds: the first `n` entries of
    /// the returned (quad, codes) array. (An array, not a callback: closures are compiled
    /// without the caller's target features.)
    ///
    /// # Safety
    /// The CPU must have `S`'s features.
    unsafe fn expand<S: GemmSimd>(i: usize, v: S::V) -> ([(usize, S::V); 5], usize);
}

pub(crate) struct Tq2;

impl Layout for Tq2 {
    const FORMAT: Format = Format::Tq2_0;
    const BLOCK_BYTES: usize = tq2_0::BLOCK_BYTES;
    const CODE_BYTES: usize = tq2_0::QS_BYTES;

    /// Byte `32 h + j` holds elements `128 h + 32 l + j` at shift `2 l`: the dword at
    /// `32 h + 4 (i % 8)` gives quad `32 h + 8 l + i % 8` for each shift.
    #[inline(always)]
    unsafe fn expand<S: GemmSimd>(i: usize, v: S::V) -> ([(usize, S::V); 5], usize) {
        let q = 32 * (i / 8) + i % 8;
        // SAFETY: register operations; the caller guarantees `S`'s features.
        unsafe {
            let m = S::splat8(3);
            let out = [
                (q, S::and(v, m)),
                (q + 8, S::and(S::srli32::<2>(v), m)),
                (q + 16, S::and(S::srli32::<4>(v), m)),
                (q + 24, S::and(S::srli32::<6>(v), m)),
                (0, v),
            ];
            (out, 4)
        }
    }
}

pub(crate) struct Tq1;

impl Layout for Tq1 {
    const FORMAT: Format = Format::Tq1_0;
    const BLOCK_BYTES: usize = tq1_0::BLOCK_BYTES;
    const CODE_BYTES: usize = tq1_0::QS_BYTES + tq1_0::QH_BYTES;

    /// Byte `b` of a region holds elements `first + b + n * bytes` as base-3 digit `n`
    /// (see `tq1_0::position`); digit `n` is `((b * 3^n) mod 256) * 3 >> 8`, which is
    /// `[q >= 86] + [q >= 171]` for `q = (b * 3^n) mod 256`.
    #[inline(always)]
    unsafe fn expand<S: GemmSimd>(i: usize, v: S::V) -> ([(usize, S::V); 5], usize) {
        // (first quad, quads per digit) of the region holding dword i.
        let (q0, step) = match i {
            0..8 => (i, 8),
            8..12 => (40 + i - 8, 4),
            _ => (60, 1),
        };
        // SAFETY: register operations; the caller guarantees `S`'s features.
        unsafe {
            let (c85, c170, one) = (S::splat8(85), S::splat8(170), S::splat8(1));
            let mut out = [(0, v); 5];
            let mut q = v;
            for n in 0..5 {
                let d = S::add8(S::min_u8(S::subs_u8(q, c85), one), S::min_u8(S::subs_u8(q, c170), one));
                out[n] = (q0 + n * step, d);
                q = S::add8(q, S::add8(q, q));
            }
            (out, 5)
        }
    }
}

pub(crate) struct Bitnet;

impl Layout for Bitnet {
    const FORMAT: Format = Format::BitnetB158;
    const BLOCK_BYTES: usize = QK / 4;
    const CODE_BYTES: usize = QK / 4;

    /// Byte `j` holds elements `4 j .. 4 j + 4` at shifts 0, 2, 4, 6: byte `c` of dword `i`
    /// is quad `4 i + c`, spread to one code per byte by `x | x << 6`, then `| << 12`.
    #[inline(always)]
    unsafe fn expand<S: GemmSimd>(i: usize, v: S::V) -> ([(usize, S::V); 5], usize) {
        // SAFETY: register operations; the caller guarantees `S`'s features.
        unsafe {
            let ff = S::splat32(0xFF);
            let out = [
                (4 * i, spread::<S>(S::and(v, ff))),
                (4 * i + 1, spread::<S>(S::and(S::srli32::<8>(v), ff))),
                (4 * i + 2, spread::<S>(S::and(S::srli32::<16>(v), ff))),
                (4 * i + 3, spread::<S>(S::srli32::<24>(v))),
                (0, v),
            ];
            (out, 4)
        }
    }
}

/// The four 2-bit codes of the low byte of each int32 lane, one per byte.
///
/// # Safety
/// The CPU must have `S`'s features.
#[inline(always)]
unsafe fn spread<S: GemmSimd>(x: S::V) -> S::V {
    // SAFETY: register operations; the caller guarantees `S`'s features.
    unsafe {
        let y = S::or(x, S::slli32::<6>(x));
        S::and(S::or(y, S::slli32::<12>(y)), S::splat8(3))
    }
}

/// Per-thread buffers, grown to the largest shape seen and reused.
#[derive(Default)]
struct Scratch {
    /// Unpacked panel `[k16/4][P][4]` (`k16`: k rounded up to 16).
    panel: Vec<u8>,
    /// Block scales of the panel `[blocks][P]` (TQ only).
    scales: Vec<f32>,
}

thread_local! {
    static SCRATCH: Cell<Scratch> = Cell::new(Scratch::default());
}

/// Resizes `v` to `len` (growing only: the contents are rewritten by every call).
fn sized<T: Copy + Default>(v: &mut Vec<T>, len: usize) -> &mut [T] {
    if v.len() < len {
        v.resize(len, T::default());
    }
    &mut v[..len]
}

/// Bytes of activations one `a_load` reads: four quads of one token.
const GROUP: usize = 16;

/// I8_ABSMAX activations packed for the GEMM of one kernel, once per call: token blocks
/// of `t` (the last one shorter), the block of token `t0` at `t0 * k16` laid out
/// `[k16/16][tn][16]` with zeros past `k`, and the accumulator seeds.
pub(crate) struct Packed {
    codes: Vec<u8>,
    /// Columns, and columns rounded up to [`GROUP`].
    k: usize,
    k16: usize,
    /// Tokens, and tokens per block (the kernel's register block).
    m: usize,
    t: usize,
    /// `-sum a` per (token, 256-element block): the seeds of per-block scaling.
    block_seeds: Vec<i32>,
    /// `-sum a` per token over the whole row: the seeds of one scale per row.
    row_seeds: Vec<i32>,
    /// Activation scale per token.
    scales: Vec<f32>,
}

impl Packed {
    /// Packs `a` (I8_ABSMAX, checked by `Kernel::prepare`) in token blocks of `t`.
    pub(crate) fn new(a: &MatRef, t: usize) -> Packed {
        let act = crate::kernel::ActI8::parse(a);
        let (m, k) = (act.m, act.k);
        let k16 = k.next_multiple_of(GROUP);
        let blocks = k.div_ceil(QK);
        let mut codes = vec![0u8; m * k16];
        let (mut block_seeds, mut row_seeds) = (vec![0i32; m * blocks], vec![0i32; m]);
        for t0 in (0..m).step_by(t) {
            let tn = t.min(m - t0);
            let dst = &mut codes[t0 * k16..(t0 + tn) * k16];
            for i in 0..tn {
                let row: &[u8] = bytemuck::cast_slice(act.row(t0 + i));
                // Whole groups as fixed 16-byte copies (a `memcpy` call each otherwise).
                let mut groups = row.chunks_exact(GROUP);
                for (g, part) in groups.by_ref().enumerate() {
                    dst[(g * tn + i) * GROUP..][..GROUP].copy_from_slice(part);
                }
                let tail = groups.remainder();
                if !tail.is_empty() {
                    dst[(k / GROUP * tn + i) * GROUP..][..tail.len()].copy_from_slice(tail);
                }
            }
        }
        for token in 0..m {
            let seeds = &mut block_seeds[token * blocks..(token + 1) * blocks];
            for (seed, part) in seeds.iter_mut().zip(act.row(token).chunks(QK)) {
                *seed = -part.iter().map(|&c| c as i32).sum::<i32>();
            }
            row_seeds[token] = seeds.iter().sum();
        }
        Packed { codes, k, k16, m, t, block_seeds, row_seeds, scales: act.scales }
    }
}

/// Unpacks weight rows `rows` (at most `p` of them) into `panel` (`[k/4][p][4]`, rows past
/// the range padded with code 0, which no output reads) and, if asked (TQ), their block
/// scales into `scales` (`[blocks][p]`).
///
/// # Safety
/// The CPU must have `S`'s features.
#[inline(always)]
unsafe fn pack_panel<S: GemmSimd, L: Layout>(
    w: &MatRef,
    rows: Range<usize>,
    p: usize,
    panel: &mut [u8],
    scales: Option<&mut [f32]>,
) {
    let k = w.cols;
    let quads = k / 4;
    let (row_bytes, blocks) = match L::FORMAT {
        Format::BitnetB158 => (quads, quads.div_ceil(BLOCK_QUADS)),
        _ => (k / QK * L::BLOCK_BYTES, k / QK),
    };
    assert!(rows.end <= w.rows && rows.len() <= p && p.is_multiple_of(S::LANES), "panel rows out of range");
    assert!(panel.len() >= quads * p * 4 && w.bytes.len() >= w.rows * row_bytes, "panel buffer too small");
    /// Block `b` of the `live` rows of the group from row `r0` (the rest padded with 0),
    /// `code_bytes` of it, `block_quads` quads.
    ///
    /// # Safety
    /// As for [`pack_panel`]; rows `r0..r0 + live` lie in `w`, the block's code bytes in
    /// each row, its quads' `LANES` rows from `g` in the panel.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block<S: GemmSimd, L: Layout>(
        w: &MatRef,
        r0: usize,
        live: usize,
        row_bytes: usize,
        b: usize,
        (code_bytes, block_quads): (usize, usize),
        panel: *mut u8,
        (p, g): (usize, usize),
    ) {
        let chunk = 4 * S::LANES;
        // SAFETY: `S`'s features, as the caller guarantees (so for every block below).
        let mut v = [unsafe { S::zero() }; 16];
        let v = &mut v[..S::LANES];
        for c in (0..code_bytes).step_by(chunk) {
            let len = chunk.min(code_bytes - c);
            for (lane, x) in v.iter_mut().enumerate() {
                *x = if lane < live {
                    // SAFETY: row `r0 + lane < w.rows` and the block's code bytes lie in it
                    // (`c + len <= code_bytes`), as the caller guarantees.
                    unsafe {
                        load_first::<S>(w.bytes.as_ptr().add((r0 + lane) * row_bytes + b * L::BLOCK_BYTES + c), len)
                    }
                } else {
                    // SAFETY: see above.
                    unsafe { S::zero() }
                };
            }
            // SAFETY: see above; `v` holds `LANES` vectors.
            unsafe { S::transpose(v) };
            for (i, &x) in v.iter().enumerate().take(len.div_ceil(4)) {
                // SAFETY: see above.
                let (quads, n) = unsafe { L::expand::<S>(c / 4 + i, x) };
                for &(q, codes) in &quads[..n] {
                    if q < block_quads {
                        // SAFETY: quad `b * 64 + q < k / 4` of rows `g..g + LANES` lies in
                        // the panel, as the caller guarantees.
                        unsafe { S::store(panel.add(((b * BLOCK_QUADS + q) * p + g) * 4), codes) }
                    }
                }
            }
        }
    }
    for g in (0..p).step_by(S::LANES) {
        let (r0, live) = (rows.start + g, rows.len().saturating_sub(g).min(S::LANES));
        for b in 0..blocks {
            // Code bytes of this block (BitNet's last step may be short).
            let code_bytes = L::CODE_BYTES.min(row_bytes - b * L::BLOCK_BYTES);
            let block_quads = BLOCK_QUADS.min(quads - b * BLOCK_QUADS);
            let at = (panel.as_mut_ptr(), (p, g));
            // SAFETY: rows `r0..r0 + live` are rows of the range (`rows.end <= w.rows`); the
            // block's bytes lie in each row (`b < blocks`); quads below `k / 4` of rows
            // `g..g + LANES <= p` lie in the panel (`k / 4 * p * 4` bytes, asserted).
            unsafe {
                // Whole blocks of whole row groups (every TQ block, all but BitNet's last) as
                // constants, so that the loops unroll and the stores lose their checks.
                if live == S::LANES && code_bytes == L::CODE_BYTES && block_quads == BLOCK_QUADS {
                    block::<S, L>(w, r0, S::LANES, row_bytes, b, (L::CODE_BYTES, BLOCK_QUADS), at.0, at.1);
                } else {
                    block::<S, L>(w, r0, live, row_bytes, b, (code_bytes, block_quads), at.0, at.1);
                }
            }
        }
    }
    if let Some(scales) = scales {
        assert!(L::FORMAT != Format::BitnetB158, "BitNet has no block scales");
        let scales = &mut scales[..blocks * p];
        scales.fill(0.0);
        for (i, r) in rows.enumerate() {
            let row = &w.bytes[r * row_bytes..(r + 1) * row_bytes];
            for (b, block) in row.chunks_exact(L::BLOCK_BYTES).enumerate() {
                let at = L::BLOCK_BYTES - 2;
                scales[b * p + i] = half::f16::from_le_bytes([block[at], block[at + 1]]).to_f32();
            }
        }
    }
}

/// Adds quad `L` of every group in `groups` of the panel at `w` (`w_step` bytes per quad)
/// times the token block at `a` (`16 T` bytes per group) to `acc[v][t]`: the inner loop.
///
/// # Safety
/// `w` must be valid for `4 * groups.end * w_step` bytes with `w_step >= 4 * LANES * RV`,
/// `a` for `groups.end * 16 * T` bytes; the CPU must have `S`'s features.
#[inline(always)]
unsafe fn micro<S: GemmSimd, const RV: usize, const T: usize>(
    w: *const u8,
    w_step: usize,
    a: *const u8,
    groups: Range<usize>,
    acc: &mut [[S::V; T]; RV],
) {
    /// Quad `L` of group `g`: `RV` weight loads, `RV x T` dot products.
    ///
    /// # Safety
    /// As for [`micro`].
    #[inline(always)]
    unsafe fn quad<S: GemmSimd, const RV: usize, const T: usize, const L: i32>(
        p: &mut [[S::Q; T]; RV],
        wq: *const u8,
        av: &[S::A; T],
    ) {
        // SAFETY: `RV` vectors at `wq` lie in the panel, as the caller guarantees.
        unsafe {
            let mut wv = [S::zero(); RV];
            for v in 0..RV {
                wv[v] = S::load(wq.add(v * 4 * S::LANES));
            }
            for t in 0..T {
                for v in 0..RV {
                    p[v][t] = S::q_dot::<L>(p[v][t], wv[v], av[t]);
                }
            }
        }
    }
    // SAFETY: every address is inside the spans the caller guarantees (group `g <
    // groups.end`, quad `4 g + L`, vector `v < RV`, token `t < T`); `S`'s features.
    unsafe {
        let mut g0 = groups.start;
        while g0 < groups.end {
            let end = g0 + S::Q_GROUPS.min(groups.end - g0);
            let mut p = [[S::q_start(S::zero()); T]; RV];
            for v in 0..RV {
                for t in 0..T {
                    p[v][t] = S::q_start(acc[v][t]);
                }
            }
            for g in g0..end {
                let ag = a.add(g * GROUP * T);
                let mut av = [S::a_load(ag); T];
                for t in 1..T {
                    av[t] = S::a_load(ag.add(GROUP * t));
                }
                let wg = w.add(4 * g * w_step);
                quad::<S, RV, T, 0>(&mut p, wg, &av);
                quad::<S, RV, T, 1>(&mut p, wg.add(w_step), &av);
                quad::<S, RV, T, 2>(&mut p, wg.add(2 * w_step), &av);
                quad::<S, RV, T, 3>(&mut p, wg.add(3 * w_step), &av);
            }
            for v in 0..RV {
                for t in 0..T {
                    acc[v][t] = S::q_end(p[v][t], acc[v][t]);
                }
            }
            g0 = end;
        }
    }
}

/// One call's shared state for the tiles of a panel.
struct Ctx<'a> {
    act: &'a Packed,
    panel: &'a [u8],
    scales: &'a [f32],
    /// Rows per panel.
    p: usize,
    /// Rows of this panel (lane 0 of its first vector is `rows.start`).
    rows: Range<usize>,
    /// `Some(d)`: one scale for the whole tensor, int32 along the row.
    scale: Option<f32>,
}

impl Ctx<'_> {
    /// Runs the packed token block that starts at token `t0` (of `T` tokens) against the
    /// panel, writing the tokens that lie in `out`'s block.
    ///
    /// # Safety
    /// The CPU must have `S`'s features.
    #[inline(always)]
    unsafe fn tile<S: GemmSimd, const RV: usize, const T: usize>(&self, out: &mut OutTile, t0: usize) {
        let Packed { k, k16, m, .. } = *self.act;
        let groups = k16 / GROUP;
        let w_step = 4 * self.p;
        // Bounds are checked here, once per tile; the inner loop uses raw pointers.
        assert!(RV * S::LANES == self.p && self.panel.len() >= 4 * groups * w_step, "tile outside the panel");
        assert!(t0 + T <= m && t0.is_multiple_of(self.act.t) && (T == self.act.t || t0 + T == m), "not a packed block");
        let act = &self.act.codes[t0 * k16..(t0 + T) * k16];
        let w = self.panel.as_ptr();
        let mut lanes = [0f32; 16];
        match self.scale {
            Some(d) => {
                let seeds = &self.act.row_seeds[t0..t0 + T];
                // SAFETY: `S`'s features (the caller's promise); the panel holds `4 groups`
                // quads of `w_step` bytes and `act` `groups * 16 * T` bytes (checked above).
                let acc = unsafe {
                    let mut acc = [[S::zero(); T]; RV];
                    for v in 0..RV {
                        for t in 0..T {
                            acc[v][t] = S::splat32(seeds[t]);
                        }
                    }
                    micro::<S, RV, T>(w, w_step, act.as_ptr(), 0..groups, &mut acc);
                    acc
                };
                let mut dots = [0i32; 16];
                for v in 0..RV {
                    for t in 0..T {
                        // SAFETY: `dots` has room for 16 >= LANES int32; `S`'s features.
                        unsafe { S::store(dots.as_mut_ptr() as *mut u8, acc[v][t]) };
                        // The reference's order: one block, `a_scale * (d * dot)`.
                        let a_scale = self.act.scales[t0 + t];
                        for (l, dot) in dots[..S::LANES].iter().enumerate() {
                            lanes[l] = a_scale * (d * *dot as f32);
                        }
                        self.write::<S>(out, v, t0 + t, &lanes);
                    }
                }
            }
            None => {
                let blocks = k / QK;
                assert!(self.scales.len() >= blocks * self.p, "panel scales too short");
                assert!(k.is_multiple_of(QK) && k16 == k, "TQ rows are whole blocks");
                let seeds = &self.act.block_seeds[t0 * blocks..(t0 + T) * blocks];
                let block_groups = QK / GROUP;
                // SAFETY: as above; block `b < blocks` spans groups `16 b..16 (b + 1)` of the
                // panel and of `act`, and `p` scales at `b * p` (asserted).
                let f = unsafe {
                    let mut f = [[S::fzero(); T]; RV];
                    for b in 0..blocks {
                        let mut acc = [[S::zero(); T]; RV];
                        for v in 0..RV {
                            for t in 0..T {
                                acc[v][t] = S::splat32(seeds[t * blocks + b]);
                            }
                        }
                        let groups = b * block_groups..(b + 1) * block_groups;
                        micro::<S, RV, T>(w, w_step, act.as_ptr(), groups, &mut acc);
                        for v in 0..RV {
                            let s = S::fload(self.scales.as_ptr().add(b * self.p + v * S::LANES));
                            for t in 0..T {
                                f[v][t] = S::fmadd_lanes(acc[v][t], s, f[v][t]);
                            }
                        }
                    }
                    f
                };
                for v in 0..RV {
                    for t in 0..T {
                        // SAFETY: `lanes` has room for 16 >= LANES floats; `S`'s features.
                        unsafe { S::fstore(lanes.as_mut_ptr(), f[v][t]) };
                        let a_scale = self.act.scales[t0 + t];
                        for x in &mut lanes[..S::LANES] {
                            *x *= a_scale;
                        }
                        self.write::<S>(out, v, t0 + t, &lanes);
                    }
                }
            }
        }
    }

    /// Writes the lanes of panel vector `v` that are rows of this panel, if `token` is in
    /// `out`'s block (a block not aligned to the packing computes tokens it does not own).
    #[inline(always)]
    fn write<S: GemmSimd>(&self, out: &mut OutTile, v: usize, token: usize, lanes: &[f32; 16]) {
        let first = self.rows.start + v * S::LANES;
        // The panel's last vectors may lie past its rows: padding, nothing to write.
        let n = S::LANES.min(self.rows.end.saturating_sub(first));
        if n > 0 && out.tokens().contains(&token) {
            out.set_run(token, first, &lanes[..n]);
        }
    }
}

/// The GEMM of one weight format over the block of `out`: panels of `RV * LANES` rows,
/// the packed token blocks of `T` (at most 8) that cover `out`'s tokens.
///
/// # Safety
/// The CPU must have `S`'s features; operands checked by `Kernel::run_prepared`, and `a`
/// packed with token blocks of `T`.
#[inline(always)]
pub(crate) unsafe fn gemm<S: GemmSimd, L: Layout, const RV: usize, const T: usize>(
    w: &MatRef,
    a: &Packed,
    out: &mut OutTile,
) {
    const { assert!(T >= 1 && T <= 8) };
    assert!(w.format == L::FORMAT && a.k == w.cols && a.t == T && a.m == out.m(), "operands of another kernel");
    let p = RV * S::LANES;
    // One scale for the tensor: int32 along the whole row (exact for BitNet; for a uniform
    // TQ tensor the per-block path's result up to float rounding, see
    // `Tensor::uniform_block_scale`).
    let scale = match L::FORMAT {
        Format::BitnetB158 => Some(bitnet::scale(w.bytes)),
        _ => w.uniform_scale,
    };
    let tokens = out.tokens();
    // Taken out for the call and put back after it (a panic in between only loses the
    // buffers). The work stays outside the closure: closures are compiled without the
    // caller's target features.
    let mut s = SCRATCH.with(Cell::take);
    let panel = sized(&mut s.panel, a.k16 * p);
    let scales = sized(&mut s.scales, a.k / QK * p);
    let rows = out.rows();
    for r0 in rows.clone().step_by(p) {
        let prows = r0..(r0 + p).min(rows.end);
        // SAFETY: `S`'s features, as the caller guarantees.
        unsafe { pack_panel::<S, L>(w, prows.clone(), p, panel, scale.is_none().then_some(&mut *scales)) };
        let ctx = Ctx { act: a, panel, scales, p, rows: prows, scale };
        // The packed blocks that hold `tokens`.
        let mut t0 = tokens.start / T * T;
        while t0 < tokens.end {
            let tn = T.min(a.m - t0);
            // SAFETY: `S`'s features, as the caller guarantees. Const token counts for the
            // last, shorter block.
            unsafe {
                match tn {
                    1 => ctx.tile::<S, RV, 1>(out, t0),
                    2 => ctx.tile::<S, RV, 2>(out, t0),
                    3 => ctx.tile::<S, RV, 3>(out, t0),
                    4 => ctx.tile::<S, RV, 4>(out, t0),
                    5 => ctx.tile::<S, RV, 5>(out, t0),
                    6 => ctx.tile::<S, RV, 6>(out, t0),
                    7 => ctx.tile::<S, RV, 7>(out, t0),
                    _ => ctx.tile::<S, RV, 8>(out, t0),
                }
            }
            t0 += tn;
        }
    }
    SCRATCH.with(|c| c.set(s));
}

/// The registry entries `bitnet_gemm/<isa>` for TQ1_0, TQ2_0 and BITNET_B1_58: entry points
/// that check the CPU once per call, then run [`gemm`] inside `#[target_feature]` functions.
/// Panels of `RV` vectors, token blocks of `T`; preferred from `min_tokens` tokens on (for
/// TQ1_0, TQ2_0, BITNET_B1_58: measured against the same ISA's GEMV).
macro_rules! gemm_kernels {
    (
        $isa:ty,
        $name:literal,
        $features:literal,
        rv = $rv:literal,
        t = $t:literal,
        min_tokens = [$tq1:literal, $tq2:literal, $bitnet:literal]
    ) => {
        pub(super) fn gemm_kernels() -> [crate::kernel::Kernel; 3] {
            use crate::kernel::gemm::{gemm, Bitnet, GemmSimd, Layout, Packed, Tq1, Tq2};
            use crate::kernel::{Geometry, Kernel, KernelFn, MatRef, OutTile, Prep};

            #[target_feature(enable = $features)]
            fn run<L: Layout>(w: &MatRef, a: &Packed, out: &mut OutTile) {
                // SAFETY: features enabled here; `Kernel::run_prepared` checked the shapes and
                // that `a` is this entry's own preparation (token blocks of `$t`).
                unsafe { gemm::<$isa, L, $rv, $t>(w, a, out) }
            }

            fn entry(weight: crate::format::Format, min_tokens: usize, run: KernelFn) -> Kernel {
                Kernel {
                    name: $name,
                    weight,
                    act: crate::format::Format::I8Absmax,
                    requires: FEATURES,
                    available,
                    min_tokens,
                    // Row blocks of whole panels, token blocks of whole register blocks
                    // (which are the packed blocks).
                    geometry: Geometry { rows: $rv * <$isa as GemmSimd>::LANES, tokens: $t },
                    prepare: |a| Prep::Gemm(Packed::new(a, $t)),
                    run,
                }
            }

            fn checked<L: Layout>(w: &MatRef, a: &Prep, out: &mut OutTile) {
                assert!(available(), "{:?} needs {FEATURES}", $name);
                // SAFETY: the CPU has the features (asserted above).
                unsafe { run::<L>(w, a.packed(), out) }
            }

            [
                entry(crate::format::Format::Tq1_0, $tq1, checked::<Tq1>),
                entry(crate::format::Format::Tq2_0, $tq2, checked::<Tq2>),
                entry(crate::format::Format::BitnetB158, $bitnet, checked::<Bitnet>),
            ]
        }
    };
}
pub(crate) use gemm_kernels;
