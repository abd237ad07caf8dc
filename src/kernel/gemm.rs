//! The batched path (`bitnet_gemm/<isa>`): a register-blocked int8 GEMM over weights
//! unpacked once per row panel. An ISA supplies its vector operations through
//! [`GemmSimd`]; the panel packing, the activation packing and the loops are shared by
//! every ISA that has a 4-byte dot product with one operand broadcast (x86 `vpdpbusd` and
//! `vpmaddubsw`; aarch64 `sdot` by element, and plain NEON's `smlal` of a broadcast quad;
//! wasm's relaxed int16 dot or widening `dot_i16x8` of a `load32_splat` quad).
//! AMX packs its panels here too ([`pack_panel`], [`Packed`], [`Scratch`]) with its own loop
//! nest.
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
//! Cost (one thread, m = 128, 2560x2560, AVX-512 VNNI): on AMD EPYC Zen 4 (one 512-bit
//! `vpdpbusd` per cycle) 87-90% of the same-run `vpdpbusd zmm` peak for every format, the
//! panel unpack about 0.1 cycle per weight, which sets the `min_tokens` thresholds. On an
//! Intel Xeon (Emerald Rapids, two per cycle) a weight's dot products take half the
//! cycles, and the unpack about 0.2 cycle per weight, half of it store misses (the panel
//! lives in L2): 13-16 points of the peak; the tiles alone reach 78-87%.
//!
//! The panel buffers are per thread and reused ([`SCRATCH`]): no allocation per call once
//! a thread has seen its largest shape.

// Tiles index several per-row and per-token arrays in lockstep.
#![allow(clippy::needless_range_loop)]

use crate::format::Format;
use crate::kernel::isa::{check, Isa, Product};
use crate::kernel::tile::Simd;
use crate::kernel::weights::{Bitnet, Codes, I2s128, I2s64, Scale, Tq1, Tq2, Q2};
use crate::kernel::{Compute, Geometry, Kernel, MatRef, OutTile};
use std::cell::Cell;
use std::marker::PhantomData;
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
    /// The top base-3 digit `q * 3 >> 8` of every byte (TQ1_0's digits, see [`Tq1`]).
    unsafe fn top_trit(q: Self::V) -> Self::V;
    /// `3 q mod 256` in every byte.
    unsafe fn times3(q: Self::V) -> Self::V;
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
    /// `q` plus, per int32 lane, the dot product of the lane's four u8 of `w` with quad
    /// `L` (0..4) of `a` (the same for every lane).
    unsafe fn q_dot<const L: i32>(q: Self::Q, w: Self::V, a: Self::A) -> Self::Q;
    /// Folds `q` into the `acc` it was started on.
    unsafe fn q_end(q: Self::Q, acc: Self::V) -> Self::V;
    /// Reads `LANES` floats.
    unsafe fn fload(p: *const f32) -> Self::F;
    /// Writes `LANES` floats.
    unsafe fn fstore(p: *mut f32, f: Self::F);
}

/// Reads `len <= W` bytes and zeroes the other lanes, reading nothing past `p + len`.
///
/// # Safety
/// The CPU must have `S`'s features; `p` must have `len` readable bytes.
#[inline(always)]
unsafe fn load_first<S: GemmSimd>(p: *const u8, len: usize) -> S::V {
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

/// Elements per packing step of the formats with one scale per tensor, and per block of
/// TQ1_0 and TQ2_0 (AMX packs its activations in these).
pub(crate) const QK: usize = 256;

/// A ternary weight format as the panel packer sees it: its bytes ([`Codes`]), and which
/// quads each raw dword of a block's codes expands to.
pub(crate) trait Layout: Codes {
    /// Expands the transposed raw dword `i` of a block (dword `i` of every row in the
    /// group, one per lane) into the codes of the quads it holds, each given to `out`.
    ///
    /// # Safety
    /// The CPU must have `S`'s features; `out` must be valid for the block's quads.
    unsafe fn expand<S: GemmSimd>(i: usize, v: S::V, out: &mut Quads);
}

/// Where [`Layout::expand`] stores the codes of a block's quads for one group of `LANES`
/// rows of a panel. (A struct, not a callback: closures are compiled without the caller's
/// target features.)
pub(crate) struct Quads {
    /// Quad 0 of the block, rows of the group.
    dst: *mut u8,
    /// Bytes from one quad to the next (`4 p`).
    step: usize,
    /// Quads the block has: fewer than `BLOCK / 4` only in the last step of a format with
    /// one scale per tensor.
    quads: usize,
}

impl Quads {
    /// Stores the codes of quad `q` (dropped past the block's quads).
    ///
    /// # Safety
    /// The CPU must have `S`'s features; `dst` must be valid for `quads` quads of `step`
    /// bytes, `4 * S::LANES` of them written each.
    #[inline(always)]
    unsafe fn put<S: GemmSimd>(&mut self, q: usize, codes: S::V) {
        if q < self.quads {
            // SAFETY: quad `q < quads`, as the caller guarantees.
            unsafe { S::store(self.dst.add(q * self.step), codes) }
        }
    }
}

/// Expands dword `v` of 2-bit codes whose bit shift `2 s` holds quad `quads[s]`.
///
/// # Safety
/// As for [`Layout::expand`].
#[inline(always)]
unsafe fn expand_planes<S: GemmSimd>(v: S::V, quads: [usize; 4], out: &mut Quads) {
    // SAFETY: register operations and `put`, under the caller's contract.
    unsafe {
        let m = S::splat8(3);
        out.put::<S>(quads[0], S::and(v, m));
        out.put::<S>(quads[1], S::and(S::srli32::<2>(v), m));
        out.put::<S>(quads[2], S::and(S::srli32::<4>(v), m));
        out.put::<S>(quads[3], S::and(S::srli32::<6>(v), m));
    }
}

/// Expands dword `i` of 2-bit codes whose byte `j` holds elements `4 j .. 4 j + 4` at
/// shifts 0, 2, 4, 6: byte `c` of the dword is quad `4 i + c`, spread to one code per byte
/// by `x | x << 6`, then `| << 12`.
///
/// # Safety
/// As for [`Layout::expand`].
#[inline(always)]
unsafe fn expand_bytes<S: GemmSimd>(i: usize, v: S::V, out: &mut Quads) {
    // SAFETY: register operations and `put`, under the caller's contract.
    unsafe {
        let ff = S::splat32(0xFF);
        out.put::<S>(4 * i, spread::<S>(S::and(v, ff)));
        out.put::<S>(4 * i + 1, spread::<S>(S::and(S::srli32::<8>(v), ff)));
        out.put::<S>(4 * i + 2, spread::<S>(S::and(S::srli32::<16>(v), ff)));
        out.put::<S>(4 * i + 3, spread::<S>(S::srli32::<24>(v)));
    }
}

impl Layout for Tq2 {
    /// Byte `32 h + j` holds elements `128 h + 32 l + j` at shift `2 l`: the dword at
    /// `32 h + 4 (i % 8)` gives quad `32 h + 8 l + i % 8` for each shift.
    #[inline(always)]
    unsafe fn expand<S: GemmSimd>(i: usize, v: S::V, out: &mut Quads) {
        let q = 32 * (i / 8) + i % 8;
        // SAFETY: the caller's contract.
        unsafe { expand_planes::<S>(v, [q, q + 8, q + 16, q + 24], out) }
    }
}

impl Layout for I2s128 {
    /// As TQ2_0's, with the planes in the other order: element `128 h + 32 l + j` is at
    /// shift `6 - 2 l` of byte `32 h + j`.
    #[inline(always)]
    unsafe fn expand<S: GemmSimd>(i: usize, v: S::V, out: &mut Quads) {
        let q = 32 * (i / 8) + i % 8;
        // SAFETY: the caller's contract.
        unsafe { expand_planes::<S>(v, [q + 24, q + 16, q + 8, q], out) }
    }
}

impl Layout for I2s64 {
    /// Element `64 h + 16 l + j` is at shift `6 - 2 l` of byte `16 h + j`: the dword at
    /// `16 h + 4 (i % 4)` gives quad `16 h + 4 l + i % 4`.
    #[inline(always)]
    unsafe fn expand<S: GemmSimd>(i: usize, v: S::V, out: &mut Quads) {
        let q = 16 * (i / 4) + i % 4;
        // SAFETY: the caller's contract.
        unsafe { expand_planes::<S>(v, [q + 12, q + 8, q + 4, q], out) }
    }
}

impl Layout for Tq1 {
    /// Byte `b` of a region holds elements `first + b + n * bytes` as base-3 digit `n`
    /// (see `tq1_0::position`); digit `n` is `((b * 3^n) mod 256) * 3 >> 8`
    /// ([`GemmSimd::top_trit`]). The `qh` dword holds four digits.
    #[inline(always)]
    unsafe fn expand<S: GemmSimd>(i: usize, v: S::V, out: &mut Quads) {
        // (first quad, quads per digit, digits) of the region holding dword i.
        let (q0, step, digits) = match i {
            0..8 => (i, 8, 5),
            8..12 => (40 + i - 8, 4, 5),
            _ => (60, 1, 4),
        };
        // SAFETY: the caller's contract; the regions' last quads (`q0 + (digits - 1) step`)
        // are at most 39, 59 and 63.
        unsafe {
            let mut q = v;
            for n in 0..digits {
                out.put::<S>(q0 + n * step, S::top_trit(q));
                q = S::times3(q);
            }
        }
    }
}

impl Layout for Bitnet {
    #[inline(always)]
    unsafe fn expand<S: GemmSimd>(i: usize, v: S::V, out: &mut Quads) {
        // SAFETY: the caller's contract.
        unsafe { expand_bytes::<S>(i, v, out) }
    }
}

impl Layout for Q2 {
    /// Byte `j` of a block's codes holds elements `4 j .. 4 j + 4`, as in BITNET_B1_58.
    #[inline(always)]
    unsafe fn expand<S: GemmSimd>(i: usize, v: S::V, out: &mut Quads) {
        // SAFETY: the caller's contract.
        unsafe { expand_bytes::<S>(i, v, out) }
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

/// One cache line: the unit of the GEMMs' buffers, so that every 64-byte vector or tile
/// row they load starts a line (a load that splits two lines costs about twice as much,
/// and AMX tile loads several times).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct Line([u8; 64]);

// SAFETY: 64 bytes, no padding (size = alignment = 64); every bit pattern is valid,
// all-zero included.
unsafe impl bytemuck::Zeroable for Line {}
// SAFETY: as above; `Line` is `Copy` and `'static`.
unsafe impl bytemuck::Pod for Line {}

/// The first `len` elements of `v`'s lines, as `T`, growing `v` if needed (the contents are
/// whatever the last call left, or zeros).
pub(crate) fn aligned<T: bytemuck::Pod>(v: &mut Vec<Line>, len: usize) -> &mut [T] {
    let lines = (len * size_of::<T>()).div_ceil(size_of::<Line>());
    if v.len() < lines {
        v.resize(lines, bytemuck::Zeroable::zeroed());
    }
    &mut bytemuck::cast_slice_mut(&mut v[..lines])[..len]
}

/// Per-thread buffers of the panel GEMMs, grown to the largest shape seen and reused.
#[derive(Default)]
pub(crate) struct Scratch {
    /// Unpacked panel `[kg/4][P][4]` (`kg`: k rounded up to the activations' group).
    pub(crate) panel: Vec<Line>,
    /// Block scales of the panel `[blocks][P]` (TQ only).
    pub(crate) scales: Vec<f32>,
}

thread_local! {
    static SCRATCH: Cell<Scratch> = Cell::new(Scratch::default());
}

impl Scratch {
    /// This thread's buffers, taken out for a call and given back with [`Scratch::put`] (a
    /// panic in between only loses them). Not a closure over the buffers: closures are
    /// compiled without the caller's target features.
    pub(crate) fn take() -> Scratch {
        SCRATCH.with(Cell::take)
    }

    pub(crate) fn put(self) {
        SCRATCH.with(|c| c.set(self))
    }
}

/// Resizes `v` to `len` (growing only: the contents are rewritten by every call).
pub(crate) fn sized<T: Copy + Default>(v: &mut Vec<T>, len: usize) -> &mut [T] {
    if v.len() < len {
        v.resize(len, T::default());
    }
    &mut v[..len]
}

/// Bytes of activations one `a_load` reads: four quads of one token.
const GROUP: usize = 16;

/// Int8 activations (I8_ABSMAX, or I8_BLOCK256 for the TQ formats) packed for a GEMM, once
/// per call: token blocks of `t` (the last
/// one shorter, or zero-padded to `t` tokens), the block of token `t0` at `t0 * kg` laid
/// out `[kg/G][t][G]` (`G`-byte groups, `kg`: k rounded up to `G`, zeros past `k`), and
/// the accumulator seeds.
pub(crate) struct Packed {
    pub(in crate::kernel) codes: Vec<Line>,
    /// Columns, and columns rounded up to the group.
    pub(in crate::kernel) k: usize,
    pub(in crate::kernel) kg: usize,
    /// Bytes of one token per group.
    pub(in crate::kernel) group: usize,
    /// Tokens, and tokens per block (the kernel's register block).
    pub(in crate::kernel) m: usize,
    pub(in crate::kernel) t: usize,
    /// Whether the last block is padded to `t` tokens.
    pub(in crate::kernel) padded: bool,
    /// Elements per block of `block_seeds`: the weight format's block.
    pub(in crate::kernel) block: usize,
    /// `-sum a` per (token, block): the seeds of per-block scaling.
    pub(in crate::kernel) block_seeds: Vec<i32>,
    /// `-sum a` per token over the whole row: the seeds of one scale per row.
    pub(in crate::kernel) row_seeds: Vec<i32>,
    /// Activation scale per token, or with `per_block` per (token, 256-element block).
    pub(in crate::kernel) scales: Vec<f32>,
    /// Whether the activations are I8_BLOCK256 (one scale per token and block).
    pub(in crate::kernel) per_block: bool,
}

impl Packed {
    /// Packs `a` (I8_ABSMAX, or I8_BLOCK256 for blocks of 256, checked by `Kernel::prepare`)
    /// in token blocks of `t` and groups of four quads, with seeds per `block` elements: the
    /// layout of [`gemm`].
    pub(crate) fn new(a: &MatRef, t: usize, block: usize) -> Packed {
        Packed::with::<GROUP>(a, t, block, false)
    }

    /// Packs `a` in token blocks of exactly `t` (tokens past `m` repeat the last one; no
    /// output reads them) and groups of `G` bytes: each group of a block is a `t x G`
    /// row-major matrix (AMX's A tiles), with seeds per [`QK`] elements.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) fn padded<const G: usize>(a: &MatRef, t: usize) -> Packed {
        Packed::with::<G>(a, t, QK, true)
    }

    fn with<const G: usize>(a: &MatRef, t: usize, block: usize, padded: bool) -> Packed {
        assert!(block.is_multiple_of(G) && block <= QK, "blocks of whole groups, at most 256 elements");
        assert!((1..=16).contains(&t), "token blocks of 1 to 16");
        let act = crate::kernel::ActI8::parse(a);
        let (m, k) = (act.m, act.k);
        let per_block = a.format != Format::I8Absmax;
        assert!(!per_block || act.block == block, "per-block activation scales are per weight block");
        let kg = k.next_multiple_of(G);
        let blocks = k.div_ceil(block);
        let tokens = if padded { m.next_multiple_of(t) } else { m };
        // Zeros past k: fresh lines are zeroed.
        let mut lines = Vec::new();
        let codes: &mut [u8] = aligned(&mut lines, tokens * kg);
        let (mut block_seeds, mut row_seeds) = (vec![0i32; m * blocks], vec![0i32; m]);
        for t0 in (0..m).step_by(t) {
            let real = t.min(m - t0);
            let tn = if padded { t } else { real };
            let dst = &mut codes[t0 * kg..(t0 + tn) * kg];
            for i in 0..tn {
                let token = t0 + i.min(real - 1);
                let row: &[u8] = bytemuck::cast_slice(act.row(token));
                let seeds = &mut block_seeds[token * blocks..(token + 1) * blocks];
                // Row by row, group `g` to group `g * tn + i` of the block: whole groups as
                // fixed G-byte copies (a `memcpy` call each otherwise), one load and store,
                // summed per block while in registers (int16 lanes: at most 256 / G terms).
                let mut o = dst[i * G..].as_mut_ptr();
                for (seed, block) in seeds.iter_mut().zip(row.chunks(block)) {
                    let mut lanes = [0i16; G];
                    let mut parts = block.chunks_exact(G);
                    for part in parts.by_ref() {
                        // One load: the store below could alias `part` for all LLVM knows.
                        let Ok(part) = <[u8; G]>::try_from(part) else { unreachable!("chunks of G") };
                        // SAFETY: whole group `g < k / G` of token `i < tn` ends at `(g tn + i +
                        // 1) G <= (k / G) tn G <= tn kg = dst.len()`; `o` is that group's start.
                        unsafe {
                            (o as *mut [u8; G]).write_unaligned(part);
                            o = o.wrapping_add(tn * G);
                        }
                        for (l, &c) in lanes.iter_mut().zip(&part) {
                            *l += c as i8 as i16;
                        }
                    }
                    // The last group of a row whose length is not a multiple of G.
                    let tail = parts.remainder();
                    if !tail.is_empty() {
                        dst[(k / G * tn + i) * G..][..tail.len()].copy_from_slice(tail);
                    }
                    let tail_sum: i32 = tail.iter().map(|&c| c as i8 as i32).sum();
                    *seed = -(lanes.iter().map(|&l| l as i32).sum::<i32>() + tail_sum);
                }
                row_seeds[token] = seeds.iter().sum();
            }
        }
        Packed {
            codes: lines,
            k,
            kg,
            group: G,
            m,
            t,
            padded,
            block,
            block_seeds,
            row_seeds,
            scales: act.scales,
            per_block,
        }
    }

    /// The packed codes (whole blocks of `t` tokens when padded), from a cache-line boundary.
    pub(in crate::kernel) fn codes(&self) -> &[u8] {
        let tokens = if self.padded { self.m.next_multiple_of(self.t) } else { self.m };
        &bytemuck::cast_slice(&self.codes)[..tokens * self.kg]
    }
}

/// Unpacks the `code_bytes` code bytes at offset `at` of the rows `src` (one per lane, each
/// `row_bytes` long) into the block's quads `out`: [`pack_panel`]'s step.
///
/// # Safety
/// The CPU must have `S`'s features; `at + code_bytes` bytes lie in each row at `src`, and
/// `out` is valid for the block's quads.
#[inline(always)]
unsafe fn block<S: GemmSimd, L: Layout>(
    src: &[*const u8; 16],
    at: usize,
    code_bytes: usize,
    row_bytes: usize,
    out: &mut Quads,
) {
    let chunk = 4 * S::LANES;
    for c in (0..code_bytes).step_by(chunk) {
        let len = chunk.min(code_bytes - c);
        // SAFETY: `S`'s features, as the caller guarantees (so for every block below).
        let mut v = [unsafe { S::zero() }; 16];
        let v = &mut v[..S::LANES];
        for (x, s) in v.iter_mut().zip(src) {
            // SAFETY: bytes `at + c..at + c + len` lie in the row at `s` (`c + len <= code_bytes`).
            *x = unsafe { load_first::<S>(s.add(at + c), len) };
            // The same bytes of the row `LANES` below, for the next group: a group reads
            // its rows as short streams that the hardware prefetcher barely follows
            // from L3 (Intel Xeon, m = 128: 2-4% faster at 6912x2560 and 2560x2560).
            // SAFETY: a prefetch never faults, whatever the address.
            unsafe { S::prefetch_l2(s.wrapping_add(S::LANES * row_bytes + at + c)) };
        }
        // SAFETY: see above; `v` holds `LANES` vectors, `out` the block's quads.
        unsafe {
            S::transpose(v);
            for (i, &x) in v.iter().enumerate().take(len.div_ceil(4)) {
                L::expand::<S>(c / 4 + i, x, out);
            }
        }
    }
}

/// Unpacks weight rows `rows` (at most `p` of them, at least one) into `panel`
/// (`[k/4][p][4]`; lanes past the range repeat the last row, which no output reads) and, if
/// asked (TQ), their block scales into `scales` (`[blocks][p]`, 0 past the range).
///
/// # Safety
/// The CPU must have `S`'s features.
#[inline(always)]
pub(crate) unsafe fn pack_panel<S: GemmSimd, L: Layout>(
    w: &MatRef,
    rows: Range<usize>,
    p: usize,
    panel: &mut [u8],
    scales: Option<&mut [f32]>,
) {
    let k = w.cols;
    let quads = k / 4;
    let row_bytes = L::row_bytes(k);
    let block_quads = L::BLOCK / 4;
    let blocks = quads.div_ceil(block_quads);
    assert!(
        !rows.is_empty() && rows.end <= w.rows && rows.len() <= p && p.is_multiple_of(S::LANES),
        "panel rows out of range"
    );
    assert!(panel.len() >= quads * p * 4 && w.bytes.len() >= w.rows * row_bytes, "panel buffer too small");
    // Rows of a format with block scales are whole blocks; only a format with one scale per
    // tensor has a short last step.
    let blocked = matches!(L::SCALE, Scale::Block(_));
    assert!(!blocked || k.is_multiple_of(L::BLOCK), "rows are whole blocks");
    let base = w.bytes.as_ptr();
    for g in (0..p).step_by(S::LANES) {
        // Padding lanes load the last row again: every load below is unconditional.
        let mut src = [base; 16];
        for (lane, s) in src[..S::LANES].iter_mut().enumerate() {
            // SAFETY: the row is below `w.rows`, whose `row_bytes` each lie in `w.bytes`
            // (asserted).
            *s = unsafe { base.add((rows.start + g + lane).min(rows.end - 1) * row_bytes) };
        }
        for b in 0..blocks {
            // Code bytes of this block (the last step of one scale per tensor may be short).
            let code_bytes = L::CODE_BYTES.min(row_bytes - b * L::BLOCK_BYTES - L::CODE_AT);
            // SAFETY: quad `b * block_quads < k / 4` of rows `g..g + LANES` (`g + LANES <= p`)
            // lies in the panel (`k / 4 * p * 4` bytes, asserted), and so do the block's
            // quads after it.
            let dst = unsafe { panel.as_mut_ptr().add((b * block_quads * p + g) * 4) };
            let quads = block_quads.min(quads - b * block_quads);
            let at = b * L::BLOCK_BYTES + L::CODE_AT;
            // SAFETY: the block's code bytes lie in every row at `src` (`at + code_bytes <=
            // row_bytes`), its quads in the panel (above); `S`'s features.
            unsafe {
                if code_bytes == L::CODE_BYTES && quads == block_quads {
                    // Every block but a short last step: constant sizes, so that the chunk
                    // loop unrolls and the stores lose their checks.
                    let mut out = Quads { dst, step: 4 * p, quads: L::BLOCK / 4 };
                    block::<S, L>(&src, at, L::CODE_BYTES, row_bytes, &mut out);
                } else {
                    let mut out = Quads { dst, step: 4 * p, quads };
                    block::<S, L>(&src, at, code_bytes, row_bytes, &mut out);
                }
            }
        }
    }
    if let Some(scales) = scales {
        let Scale::Block(scale_at) = L::SCALE else { panic!("{} has no block scales", L::FORMAT) };
        let scales = &mut scales[..blocks * p];
        scales.fill(0.0);
        for (i, r) in rows.enumerate() {
            let row = &w.bytes[r * row_bytes..(r + 1) * row_bytes];
            for (b, block) in row.chunks_exact(L::BLOCK_BYTES).enumerate() {
                assert!(scale_at + 2 <= L::BLOCK_BYTES);
                // SAFETY: the scale's 2 bytes lie in the block (asserted); `S`'s features
                // (F16C on x86).
                scales[b * p + i] = unsafe { S::f16(block.as_ptr().add(scale_at)) };
            }
        }
    }
}

/// Adds quad `L` of every group in `groups` of the panel at `w` (`RV` vectors per quad, the
/// quads one after another) times the token block at `a` (`16 T` bytes per group) to
/// `acc[v][t]`: the inner loop. Both operands are read front to back.
///
/// # Safety
/// `w` must be valid for `4 * groups.end * RV` vectors, `a` for `groups.end * 16 * T`
/// bytes; the CPU must have `S`'s features.
#[inline(always)]
unsafe fn micro<S: GemmSimd, const RV: usize, const T: usize>(
    w: *const u8,
    a: *const u8,
    groups: Range<usize>,
    acc: &mut [[S::V; T]; RV],
) {
    /// Quad `L` of a group: the `RV` weight vectors at `*wq` (moved past them), `RV x T`
    /// dot products.
    ///
    /// # Safety
    /// As for [`micro`].
    #[inline(always)]
    unsafe fn quad<S: GemmSimd, const RV: usize, const T: usize, const L: i32>(
        p: &mut [[S::Q; T]; RV],
        wq: &mut *const u8,
        av: &[S::A; T],
    ) {
        // SAFETY: `RV` vectors at `wq` lie in the panel, as the caller guarantees.
        unsafe {
            let wv = S::load_next::<RV>(wq);
            for t in 0..T {
                for v in 0..RV {
                    p[v][t] = S::q_dot::<L>(p[v][t], wv[v], av[t]);
                }
            }
        }
    }
    let quad_bytes = RV * 4 * S::LANES;
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
            let (mut wq, mut ag) = (w.add(4 * g0 * quad_bytes), a.add(g0 * GROUP * T));
            for _ in g0..end {
                let av = S::a_load_next::<T>(&mut ag);
                quad::<S, RV, T, 0>(&mut p, &mut wq, &av);
                quad::<S, RV, T, 1>(&mut p, &mut wq, &av);
                quad::<S, RV, T, 2>(&mut p, &mut wq, &av);
                quad::<S, RV, T, 3>(&mut p, &mut wq, &av);
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
        let Packed { k, kg, m, .. } = *self.act;
        let groups = kg / GROUP;
        let w_step = 4 * self.p;
        // Bounds are checked here, once per tile; the inner loop uses raw pointers.
        assert!(RV * S::LANES == self.p && self.panel.len() >= 4 * groups * w_step, "tile outside the panel");
        assert!(t0 + T <= m && t0.is_multiple_of(self.act.t) && (T == self.act.t || t0 + T == m), "not a packed block");
        let act = &self.act.codes()[t0 * kg..(t0 + T) * kg];
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
                    micro::<S, RV, T>(w, act.as_ptr(), 0..groups, &mut acc);
                    acc
                };
                let mut dots = [0i32; 16];
                for t in 0..T {
                    let a_scale = self.act.scales[t0 + t];
                    for v in 0..RV {
                        // SAFETY: `dots` has room for 16 >= LANES int32; `S`'s features.
                        unsafe { S::store(dots.as_mut_ptr() as *mut u8, acc[v][t]) };
                        // The reference's order: one block, `a_scale * (d * dot)`.
                        for (l, dot) in dots[..S::LANES].iter().enumerate() {
                            lanes[l] = a_scale * (d * *dot as f32);
                        }
                        self.write::<S>(out, v, t0 + t, &lanes);
                    }
                }
            }
            None => {
                let block = self.act.block;
                let blocks = k / block;
                assert!(self.scales.len() >= blocks * self.p, "panel scales too short");
                assert!(k.is_multiple_of(block) && kg == k, "rows are whole blocks");
                let seeds = &self.act.block_seeds[t0 * blocks..(t0 + T) * blocks];
                let block_groups = block / GROUP;
                // Per-block activation scales: each block's weight scales times the token's
                // block scale (`d * a_scale[block]`, the reference's order), built per
                // vector in `combined`; otherwise the token's scale multiplies at the end.
                let per_block = self.act.per_block;
                let a_scales = &self.act.scales[if per_block { t0 * blocks..(t0 + T) * blocks } else { 0..0 }];
                let mut combined = [0f32; 16];
                // SAFETY: as above; block `b < blocks` spans groups `b * block_groups..(b + 1)
                // * block_groups` of the panel and of `act`, and `p` scales at `b * p`
                // (asserted).
                let f = unsafe {
                    // The float sums stay in memory: the accumulators fill the registers, and
                    // LLVM's own spilling of the sums takes more instructions per block (NEON
                    // 4 x 5: about 112 against 83; the x86 full tiles' block loops shrink too).
                    let mut sums = [[S::fzero(); T]; RV];
                    let f = std::hint::black_box(&mut sums);
                    for b in 0..blocks {
                        let mut acc = [[S::zero(); T]; RV];
                        for v in 0..RV {
                            for t in 0..T {
                                acc[v][t] = S::splat32(seeds[t * blocks + b]);
                            }
                        }
                        let groups = b * block_groups..(b + 1) * block_groups;
                        micro::<S, RV, T>(w, act.as_ptr(), groups, &mut acc);
                        for v in 0..RV {
                            let at = self.scales.as_ptr().add(b * self.p + v * S::LANES);
                            let s = S::fload(at);
                            for t in 0..T {
                                let s = if per_block {
                                    let a = a_scales[t * blocks + b];
                                    for (l, c) in combined[..S::LANES].iter_mut().enumerate() {
                                        *c = *at.add(l) * a;
                                    }
                                    S::fload(combined.as_ptr())
                                } else {
                                    s
                                };
                                f[v][t] = S::fmadd_lanes(acc[v][t], s, f[v][t]);
                            }
                        }
                    }
                    *f
                };
                for v in 0..RV {
                    for t in 0..T {
                        // SAFETY: `lanes` has room for 16 >= LANES floats; `S`'s features.
                        unsafe { S::fstore(lanes.as_mut_ptr(), f[v][t]) };
                        if !per_block {
                            let a_scale = self.act.scales[t0 + t];
                            for x in &mut lanes[..S::LANES] {
                                *x *= a_scale;
                            }
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
            if n == S::LANES {
                // A run of constant length: one vector copy, not a `memcpy` call.
                out.set_run(token, first, &lanes[..S::LANES]);
            } else {
                out.set_run(token, first, &lanes[..n]);
            }
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
    assert!(a.group == GROUP && !a.padded, "activations packed for another kernel");
    let p = RV * S::LANES;
    // One scale for the tensor: int32 along the whole row (exact for BitNet and I2_S; for
    // a tensor of equal block scales the per-block path's result up to float rounding, see
    // `Tensor::uniform_block_scale`).
    // Not with per-block activation scales: every block is then scaled on its own.
    let uniform = if a.per_block { None } else { w.uniform_scale };
    let scale = L::tensor_scale(w.bytes).or(uniform);
    let tokens = out.tokens();
    let mut s = Scratch::take();
    let panel = aligned(&mut s.panel, a.kg * p);
    let scales = sized(&mut s.scales, a.k / L::BLOCK * p);
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
    s.put();
}

/// The panel GEMM of format `L` on ISA `S`: panels of `RV` vectors, token blocks of `T`.
pub(crate) struct Gemm<S, L, const RV: usize, const T: usize>(PhantomData<fn() -> (S, L)>);

impl<S, L, const RV: usize, const T: usize> Gemm<S, L, RV, T> {
    pub(crate) const NEW: Self = Gemm(PhantomData);
}

impl<S: GemmSimd, L: Layout, const RV: usize, const T: usize> Product for Gemm<S, L, RV, T> {
    type Act = Packed;

    #[inline(always)]
    unsafe fn product(w: &MatRef, act: &Packed, out: &mut OutTile) {
        // SAFETY: the caller has `S`'s features and checked the operands; the activations
        // are this kernel's own packing (token blocks of `T`).
        unsafe { gemm::<S, L, RV, T>(w, act, out) }
    }
}

impl<S: GemmSimd + Isa, L: Layout, const RV: usize, const T: usize> Compute for Gemm<S, L, RV, T> {
    type Act = Packed;
    const REQUIRES: &'static str = S::FEATURES;
    // Row blocks of whole panels, token blocks of whole register blocks (which are the
    // packed blocks).
    const GEOMETRY: Geometry = Geometry { rows: RV * S::LANES, tokens: T };

    fn available() -> bool {
        S::available()
    }

    fn prepare(&self, a: &MatRef) -> Packed {
        Packed::new(a, T, L::BLOCK)
    }

    fn run(&self, w: &MatRef, _a: &MatRef, act: &Packed, out: &mut OutTile) {
        check::<S>();
        // SAFETY: the CPU has the features (checked above).
        unsafe { S::run::<Self>(w, act, out) }
    }
}

/// The registry entries `name` (`bitnet_gemm/<isa>`) of ISA `S` for each (weight format,
/// `min_tokens`) of `formats`, by I8_ABSMAX and by the format's accurate activation format
/// (`Format::accurate_activation`: I8_BLOCK256 for TQ1_0 and TQ2_0, with the same
/// threshold): panels of `RV` vectors, token blocks of `T`; preferred from `min_tokens`
/// tokens on (measured against the same ISA's GEMV, by I8_ABSMAX).
pub(crate) fn kernels<S: GemmSimd + Isa, const RV: usize, const T: usize>(
    name: &'static std::ffi::CStr,
    formats: &[(Format, usize)],
) -> Vec<Kernel> {
    let mut all = Vec::new();
    for &(format, min) in formats {
        for act in [Some(Format::I8Absmax), format.accurate_activation()].into_iter().flatten() {
            all.push(match format {
                Format::Tq1_0 => Kernel::new(name, format, act, min, &Gemm::<S, Tq1, RV, T>::NEW),
                Format::Tq2_0 => Kernel::new(name, format, act, min, &Gemm::<S, Tq2, RV, T>::NEW),
                Format::BitnetB158 => Kernel::new(name, format, act, min, &Gemm::<S, Bitnet, RV, T>::NEW),
                Format::Q2_0 => Kernel::new(name, format, act, min, &Gemm::<S, Q2, RV, T>::NEW),
                Format::I2S => Kernel::new(name, format, act, min, &Gemm::<S, I2s128, RV, T>::NEW),
                Format::I2S64 => Kernel::new(name, format, act, min, &Gemm::<S, I2s64, RV, T>::NEW),
                _ => panic!("no panel GEMM for {format}"),
            });
        }
    }
    all
}
