//! Panels of weight rows unpacked once ([`pack_panel`]), activations packed once per call
//! ([`Packed`]), and the per-thread buffers they live in ([`Scratch`]).

use super::layout::{Layout, QuadSink, QK};
use super::micro::MicroTile;
use super::simd::{load_first, GemmSimd};
use crate::format::Format;
use crate::kernel::tile::LINE;
use crate::kernel::weights::Scale;
use crate::kernel::MatRef;
use std::cell::Cell;
use std::ops::Range;

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
    /// Unpacked panel of `kg/4` quads of `P` rows (`kg`: k rounded up to the activations'
    /// group), in the micro-tile's layout (`[kg/4][P][4]` for the broadcast tiles).
    pub(crate) panel: Vec<Line>,
    /// Block scales of the panel `[blocks][P]` (TQ only).
    pub(crate) scales: Vec<f32>,
}

thread_local! {
    pub(crate) static SCRATCH: Cell<Scratch> = Cell::new(Scratch::default());
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

/// Bytes of activations one `a_load` reads: four quads of one token. The GEMM's loops count
/// the row in groups of this many elements, whatever group a micro-tile packs.
pub(crate) const GROUP: usize = 16;

/// Zero bytes after a [`Packed`]'s codes: the rolled inner loop
/// ([`GemmSimd::ROLLED_QUADS`](super::GemmSimd::ROLLED_QUADS)) loads 16 bytes from each quad
/// of a group, up to 12 past the group's end.
pub(crate) const SLACK: usize = GROUP;

/// Int8 activations (I8_ABSMAX, I8_BLOCK256 or I8_BLOCK32) packed for a GEMM, once
/// per call: token blocks of `t`, the last one shorter but padded to a multiple of `pad`
/// tokens (which repeat its last token; no output reads them); the block of token `t0` at
/// `t0 * kg` laid out `[kg/G][tokens][G]` (`G`-byte groups; `kg`: k rounded up to the group
/// and to [`GROUP`], zeros past `k`), and the accumulator seeds.
pub(crate) struct Packed {
    pub(in crate::kernel) codes: Vec<Line>,
    /// Columns, and columns rounded up to the group.
    pub(in crate::kernel) k: usize,
    pub(in crate::kernel) kg: usize,
    /// Tokens, and tokens per block (the kernel's register block).
    pub(in crate::kernel) m: usize,
    pub(in crate::kernel) t: usize,
    /// The last block's tokens are padded to a multiple of this (1: not padded).
    pub(in crate::kernel) pad: usize,
    /// Elements per block of `block_seeds`: the weight format's block, or the activation's
    /// finer scale block (I8_BLOCK32 with Q2_0).
    pub(in crate::kernel) block: usize,
    /// `-sum a` per (token block, block, token of the block), the seeds of per-block
    /// scaling: a register tile's seeds of one block are consecutive, and its next block's
    /// follow ([`Packed::tile_seeds`]). Padding tokens included, as for `row_seeds` and
    /// `scales`.
    block_seeds: Vec<i32>,
    /// `-sum a` per token over the whole row: the seeds of one scale per row.
    pub(in crate::kernel) row_seeds: Vec<i32>,
    /// Activation scale per token, or with `per_block` per (token, `block`), padding tokens
    /// included.
    pub(in crate::kernel) scales: Vec<f32>,
    /// Whether the activations have one scale per (token, block) (I8_BLOCK256, I8_BLOCK32).
    pub(in crate::kernel) per_block: bool,
}

impl Packed {
    /// Packs `a` (I8_ABSMAX, or per-block activations whose scale block is `block`) in token
    /// blocks of `t`, the last one padded to a multiple of `pad` tokens, and groups of `G`
    /// bytes (each group of a block is a `tokens x G` row-major matrix: AMX's A tiles when
    /// `G` is 64), with seeds per `block` elements.
    pub(crate) fn new<const G: usize>(a: &MatRef, t: usize, block: usize, pad: usize) -> Packed {
        assert!(block.is_multiple_of(G) && block <= QK, "blocks of whole groups, at most 256 elements");
        assert!((1..=16).contains(&t) && pad >= 1 && t.is_multiple_of(pad), "token blocks of 1 to 16, whole pads");
        let act = crate::kernel::ActI8::parse(a);
        let (m, k) = (act.m, act.k);
        let per_block = a.format != Format::I8Absmax;
        assert!(!per_block || act.block == block, "per-block activation scales are per weight block");
        let kg = k.next_multiple_of(G.max(GROUP));
        let blocks = k.div_ceil(block);
        // Zeros past k: fresh lines are zeroed.
        let mut lines = Vec::new();
        // Tokens with the padding, which repeats the last token's codes, seeds and scales.
        let mp = m.next_multiple_of(pad);
        let codes: &mut [u8] = aligned(&mut lines, mp * kg + SLACK);
        let (mut block_seeds, mut row_seeds) = (vec![0i32; blocks * mp], vec![0i32; mp]);
        for t0 in (0..m).step_by(t) {
            let real = t.min(m - t0);
            let tn = real.next_multiple_of(pad);
            let dst = &mut codes[t0 * kg..(t0 + tn) * kg];
            for i in 0..tn {
                let row: &[u8] = bytemuck::cast_slice(act.row(t0 + i.min(real - 1)));
                let slot = t0 + i;
                // Row by row, group `g` to group `g * tn + i` of the block: whole groups as
                // fixed G-byte copies (a `memcpy` call each otherwise), one load and store,
                // summed per block while in registers (int16 lanes: at most 256 / G terms).
                let mut o = dst[i * G..].as_mut_ptr();
                let mut row_seed = 0;
                for (b, block) in row.chunks(block).enumerate() {
                    let mut lanes = [0i16; G];
                    let mut parts = block.chunks_exact(G);
                    for part in parts.by_ref() {
                        // Summed before the store, which could alias `part` for all LLVM
                        // knows: one load serves both (after the store, LLVM made NEON's
                        // 8-byte groups cost 27 instructions each, 6 before it).
                        for (l, &c) in lanes.iter_mut().zip(part) {
                            *l += c as i8 as i16;
                        }
                        let Ok(part) = <[u8; G]>::try_from(part) else { unreachable!("chunks of G") };
                        // SAFETY: whole group `g < k / G` of token `i < tn` ends at `(g tn + i +
                        // 1) G <= (k / G) tn G <= tn kg = dst.len()`; `o` is that group's start.
                        unsafe {
                            (o as *mut [u8; G]).write_unaligned(part);
                            o = o.wrapping_add(tn * G);
                        }
                    }
                    // The last group of a row whose length is not a multiple of G.
                    let tail = parts.remainder();
                    if !tail.is_empty() {
                        dst[(k / G * tn + i) * G..][..tail.len()].copy_from_slice(tail);
                    }
                    let tail_sum: i32 = tail.iter().map(|&c| c as i8 as i32).sum();
                    let seed = -(lanes.iter().map(|&l| l as i32).sum::<i32>() + tail_sum);
                    block_seeds[t0 * blocks + b * tn + i] = seed;
                    row_seed += seed;
                }
                row_seeds[slot] = row_seed;
            }
        }
        let mut scales = act.scales;
        if mp > m {
            let last = scales[(m - 1) * (scales.len() / m)..].to_vec();
            for _ in m..mp {
                scales.extend_from_slice(&last);
            }
        }
        Packed { codes: lines, k, kg, m, t, pad, block, block_seeds, row_seeds, scales, per_block }
    }

    /// The seeds of the token block from `t0` (`tn` tokens, its padding included), each
    /// block's `tn` in turn.
    pub(in crate::kernel) fn tile_seeds(&self, t0: usize, tn: usize) -> &[i32] {
        let blocks = self.k.div_ceil(self.block);
        &self.block_seeds[t0 * blocks..(t0 + tn) * blocks]
    }

    /// The packed codes (the last block padded), from a cache-line boundary: AMX's tiles.
    #[cfg(target_arch = "x86_64")]
    pub(in crate::kernel) fn codes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.codes)[..self.m.next_multiple_of(self.pad) * self.kg]
    }

    /// The codes of the token block from `t0` (`tn` tokens, its padding included) and the
    /// [`SLACK`] bytes after them (the next block's codes, or zeros after the last).
    pub(in crate::kernel) fn block_codes(&self, t0: usize, tn: usize) -> &[u8] {
        &bytemuck::cast_slice(&self.codes)[t0 * self.kg..(t0 + tn) * self.kg + SLACK]
    }
}

/// Unpacks the `code_bytes` code bytes (at most 64) at offset `at` of the code streams
/// `src` of the rows `rows` (one per lane; `row_bytes` apart on average) into the block's
/// quads `out`: [`pack_panel`]'s step, in chunks of one vector per row ([`chunk`]).
///
/// # Safety
/// The CPU must have `S`'s features; `at + code_bytes` bytes lie in each row at `src`, and
/// `out` is valid for the block's quads.
#[inline(always)]
pub(crate) unsafe fn block<S: GemmSimd, L: Layout, O: QuadSink<S>, const BY_LANE: bool>(
    src: &[*const u8; 16],
    rows: &[usize; 16],
    at: usize,
    code_bytes: usize,
    row_bytes: usize,
    out: &mut O,
) {
    let bytes = 4 * S::LANES;
    assert!(code_bytes <= 4 * bytes, "at most four chunks per block");
    // Chunks by constant index: every dword index `expand` sees is a constant, so its
    // quads and digits are straight-line code (a loop over the chunks stayed a loop on NEON,
    // four chunks of a TQ1_0 block, with a branch per digit).
    // SAFETY: chunk `C` holds bytes `C bytes..` below `code_bytes`; the caller's contract.
    unsafe {
        chunk::<S, L, O, 0, BY_LANE>(src, rows, at, code_bytes, row_bytes, out);
        if code_bytes > bytes {
            chunk::<S, L, O, 1, BY_LANE>(src, rows, at, code_bytes, row_bytes, out);
        }
        if code_bytes > 2 * bytes {
            chunk::<S, L, O, 2, BY_LANE>(src, rows, at, code_bytes, row_bytes, out);
        }
        if code_bytes > 3 * bytes {
            chunk::<S, L, O, 3, BY_LANE>(src, rows, at, code_bytes, row_bytes, out);
        }
    }
}

/// Chunk `C` of [`block`]: `4 LANES` bytes (fewer at the end) of each row, transposed so that
/// vector `i` holds dword `C LANES + i` of every row, each expanded into its quads. With
/// `BY_LANE`, [`Layout::row_codes`] is told each lane's index for its row (congruent to it
/// modulo [`Layout::SHARED_ROWS`]: a constant in the unrolled lanes) rather than the row.
///
/// # Safety
/// As for [`block`]; `C * 4 LANES < code_bytes`; with `BY_LANE`, the rows of real lanes are
/// congruent to their lanes modulo `L::SHARED_ROWS` (padding lanes, which no output reads,
/// may be any row).
#[inline(always)]
unsafe fn chunk<S: GemmSimd, L: Layout, O: QuadSink<S>, const C: usize, const BY_LANE: bool>(
    src: &[*const u8; 16],
    rows: &[usize; 16],
    at: usize,
    code_bytes: usize,
    row_bytes: usize,
    out: &mut O,
) {
    let c = C * 4 * S::LANES;
    let len = (4 * S::LANES).min(code_bytes - c);
    // Prefetching each chunk's first byte reaches every line of a row if consecutive chunks
    // start at most a line apart: across blocks a chunk's start is the last chunk's length
    // plus the bytes between code runs (a scale) after the one before. Not so only for
    // 64-byte chunks of TQ2_0's 66-byte blocks, where a line in 32 went unfetched (the 2B4T
    // stack's prefill at 24 tokens from DRAM 1.07-1.08x faster with it, AMD Zen 4).
    let last_line_too = const {
        let chunk = 4 * S::LANES;
        let last = (L::CODE_BYTES - 1) % chunk + 1;
        let spacing =
            if last + L::BLOCK_BYTES - L::CODE_BYTES > chunk { last + L::BLOCK_BYTES - L::CODE_BYTES } else { chunk };
        spacing > LINE
    };
    // SAFETY: `S`'s features, as the caller guarantees (so for every block below).
    let mut all = [unsafe { S::zero() }; 16];
    let v = &mut all[..S::LANES];
    for (lane, ((x, s), &row)) in v.iter_mut().zip(src).zip(rows).enumerate() {
        let row = if BY_LANE { lane } else { row };
        // SAFETY: bytes `at + c..at + c + len` lie in the row at `s` (`c + len <= code_bytes`).
        *x = unsafe { L::row_codes::<S>(load_first::<S>(s.add(at + c), len), row) };
        // The same bytes of the row `LANES` below, for the next group: a group reads
        // its rows as short streams that the hardware prefetcher barely follows
        // from L3 (Intel Xeon, m = 128: 2-4% faster at 6912x2560 and 2560x2560).
        let ahead = s.wrapping_add(S::LANES * row_bytes + at + c);
        // SAFETY: a prefetch never faults, whatever the address.
        unsafe { S::prefetch_l2(ahead) };
        if last_line_too {
            // SAFETY: as above.
            unsafe { S::prefetch_l2(ahead.wrapping_add(len - 1)) };
        }
    }
    let dwords = len.div_ceil(4);
    // SAFETY: see above; `v` holds `LANES` vectors, `out` the block's quads.
    unsafe {
        S::transpose(v);
        // Each dword by a literal index (a loop stayed a loop where the chunk's length is not
        // a constant, and LLVM merged the constant path into it): `expand`'s quads are
        // constants, its stores at immediate offsets.
        macro_rules! expand {
            ($($i:literal)*) => {$(
                if $i < S::LANES && $i < dwords {
                    L::expand::<S, O>(c / 4 + $i, all[$i], out);
                }
            )*};
        }
        expand!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
    }
}

/// Unpacks weight rows `rows` (at most `p` of them, at least one), over the format's
/// blocks `blocks` (of `L::BLOCK` elements; `k.div_ceil(L::BLOCK)` of them in a row), into
/// `panel` (`[quads of those blocks][p][4]`; lanes past the range repeat the last row, which
/// no output reads) and, if asked (TQ), their block scales into `scales` (`[blocks][p]`, the
/// same way).
///
/// # Safety
/// The CPU must have `S`'s features.
#[inline(always)]
pub(crate) unsafe fn pack_panel<S: GemmSimd, K: MicroTile<S>, L: Layout>(
    w: &MatRef,
    rows: Range<usize>,
    blocks: Range<usize>,
    p: usize,
    panel: &mut [u8],
    scales: Option<&mut [f32]>,
) {
    let k = w.cols;
    let quads = k / 4;
    // Rows' bytes on average (the prefetch's stride), and the length of a row's code stream.
    let row_bytes = L::row_bytes(k);
    let stream = L::row_stream(0, k).1;
    let block_quads = L::BLOCK / 4;
    assert!(
        !rows.is_empty() && rows.end <= w.rows && rows.len() <= p && p.is_multiple_of(S::LANES),
        "panel rows out of range"
    );
    assert!(blocks.start < blocks.end && blocks.end <= quads.div_ceil(block_quads), "panel blocks out of range");
    // The quads of `blocks` (the last block of one scale per tensor may be short).
    let range_quads = quads.min(blocks.end * block_quads) - blocks.start * block_quads;
    // Streams start in row order: the last row's ends last.
    let (last, _) = L::row_stream(w.rows - 1, k);
    assert!(panel.len() >= range_quads * p * 4 && w.bytes.len() >= last + stream, "panel buffer too small");
    // Rows of a format with block scales are whole blocks; only a format with one scale per
    // tensor has a short last step.
    let blocked = matches!(L::SCALE, Scale::Block(_));
    assert!(!blocked || k.is_multiple_of(L::BLOCK), "rows are whole blocks");
    // The block scales, `[blocks][p]`: read with each block's codes, while its row bytes are
    // in L1 (a separate pass over the rows afterwards took a fifth of a TQ2_0 GEMM at m = 1).
    let mut scales = scales.map(|scales| {
        let Scale::Block(scale_at) = L::SCALE else { panic!("{} has no block scales", L::FORMAT) };
        assert!(scale_at + 2 <= L::BLOCK_BYTES && scales.len() >= blocks.len() * p, "block scales out of range");
        (scales, scale_at)
    });
    // Rows that share their bytes take their plane by lane when the panel starts a group of
    // them (every panel, unless a caller's row range starts inside a group): a plane chosen
    // at run time cost a branch per lane and chunk, 1.4-1.6x the instructions of I2_S_R4's
    // NEON GEMMs at m = 2-8 (qemu counts). Formats of one row per stream need no choice.
    const { assert!(S::LANES.is_multiple_of(L::SHARED_ROWS), "lanes hold whole groups of rows") };
    let by_lane = L::SHARED_ROWS == 1 || rows.start.is_multiple_of(L::SHARED_ROWS);
    let base = w.bytes.as_ptr();
    for g in (0..p).step_by(S::LANES) {
        // Padding lanes load the last row again: every load below is unconditional.
        let (mut src, mut lane_rows) = ([base; 16], [0; 16]);
        for (lane, (s, row)) in src.iter_mut().zip(&mut lane_rows).take(S::LANES).enumerate() {
            *row = (rows.start + g + lane).min(rows.end - 1);
            // SAFETY: the row is below `w.rows`, whose streams each lie in `w.bytes`
            // (asserted).
            *s = unsafe { base.add(L::row_stream(*row, k).0) };
        }
        for b in blocks.clone() {
            // Code bytes of this block (the last step of one scale per tensor may be short).
            let code_bytes = L::CODE_BYTES.min(stream - b * L::BLOCK_BYTES - L::CODE_AT);
            // SAFETY: quad `(b - blocks.start) * block_quads < range_quads` of the panel's
            // rows starts the block's `block_quads * p * 4` bytes in the panel (`range_quads
            // * p * 4` bytes, asserted).
            let at_block = unsafe { panel.as_mut_ptr().add((b - blocks.start) * block_quads * p * 4) };
            let quads = block_quads.min(quads - b * block_quads);
            let at = b * L::BLOCK_BYTES + L::CODE_AT;
            // SAFETY: the block's code bytes lie in every row at `src` (`at + code_bytes <=
            // row_bytes`), its quads of rows `g..g + LANES` (`g + LANES <= p`) in the block's
            // bytes of the panel (above); `K`'s features, which include `S`'s.
            unsafe {
                if code_bytes == L::CODE_BYTES && quads == block_quads && by_lane {
                    // Every block but a short last step: constant sizes, so that the chunk
                    // loop unrolls and the stores lose their checks.
                    let mut out = K::sink(at_block, p, g, L::BLOCK / 4);
                    block::<S, L, K::Sink, true>(&src, &lane_rows, at, L::CODE_BYTES, row_bytes, &mut out);
                } else {
                    let mut out = K::sink(at_block, p, g, quads);
                    block::<S, L, K::Sink, false>(&src, &lane_rows, at, code_bytes, row_bytes, &mut out);
                }
            }
            if let Some((scales, scale_at)) = scales.as_mut().map(|(s, at)| (s, *at)) {
                let group = &mut scales[(b - blocks.start) * p + g..][..S::LANES];
                // SAFETY: rows are whole blocks (asserted), so the scale's 2 bytes at `scale_at <
                // BLOCK_BYTES - 1` (asserted) of block `b` lie in the row at each `src`; `LANES`
                // floats in `group`; `S`'s features.
                unsafe { S::f16_lanes(&src, b * L::BLOCK_BYTES + scale_at, group.as_mut_ptr()) };
            }
        }
    }
}
