//! AMX-INT8 (Intel Xeon, Sapphire Rapids and later): `bitnet_gemm/amx`, the panel GEMM on
//! tile registers. One `tdpbsud` multiplies a 16 x 64 tile of signed activations by a
//! 64 x 16 tile of unsigned weight codes into 16 x 16 int32: 16,384 multiply-adds.
//!
//! The weights are unpacked per 128-row panel by the shared panel packer ([`pack_panel`],
//! with the AVX-512 vectors), [`CHUNK_K`] elements of the row at a time: its
//! `[k/4][128][4]` layout is AMX's VNNI-packed B operand as it is, so a B tile is 16 rows of
//! 64 bytes at a stride of 512.
//! The activations are packed once per call ([`Packed::new`], padded) in blocks of 16 tokens by
//! 64-byte groups: each A tile is 1 KiB of contiguous memory (tokens past `m` repeat the
//! last one; no output reads them). A block of 2 x 2 C tiles (32 tokens x 32 rows) takes
//! 2 A and 2 B loads per four `tdpbsud`; TQ1_0/TQ2_0 store their C tiles every
//! 256-element block and apply the block scales with AVX-512 (convert + FMA, as
//! `bitnet_gemm/avx512vnni` does), while BITNET_B1_58 and uniform-scale TQ keep int32 along
//! the whole row (in the tiles, and in memory between chunks of 512 columns). By I8_BLOCK256
//! activations (TQ1_0/TQ2_0) each block's row scales are multiplied by the token's block
//! scale before that FMA, as the AVX-512 GEMM does. Codes
//! stay biased (`sum a*t = sum a*code - sum a`, the same seeds as the other GEMMs), so a
//! corrupt code 3 counts +2 here too, and every result is bit-identical to
//! `bitnet_gemm/avx512vnni`'s.
//!
//! Tile state: Linux hands tile data to a process only after
//! `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`, requested once, on first use
//! ([`status`]); without it the kernel is unavailable, never a SIGILL. Each kernel run loads
//! the tile configuration on its thread and releases the tiles when it returns ([`Tiles`]),
//! so no thread keeps tile state it does not use, and a thread that configured its tiles
//! for something else is configured again. Tile registers hold nothing between `asm!`
//! blocks: each block starts from zeroed or reloaded C tiles and ends by storing them; only the
//! configuration persists, and no code between the blocks touches it.
//!
//! Rust's AMX intrinsics are unstable, so the tile instructions are `asm!`.

use super::avx512vnni::Avx512;
use crate::format::Format;
use crate::kernel::gemm::layout::Layout;
use crate::kernel::gemm::pack::{aligned, pack_panel, sized, Line, Packed, Scratch};
use crate::kernel::weights::{Bitnet, I2s128, I2s64, I2sR4, Tq1, Tq2};
use crate::kernel::{Compute, Geometry, Kernel, MatRef, OutTile};
use std::arch::x86_64::*;
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::OnceLock;

/// What `available` needs, for humans.
const FEATURES: &str = "amx-tile, amx-int8, avx512f, avx512bw, avx512vnni, f16c, fma, and the OS's tile permission";

/// Rows (weights) and columns (bytes) of every tile this kernel configures.
const TILE_ROWS: usize = 16;
const TILE_BYTES: usize = 64;
/// Pairs of B tiles (32 weight rows) per panel: a taller panel writes longer runs of each
/// token's outputs.
const ROW_PAIRS: usize = 4;
/// Weight rows per panel.
const PANEL: usize = ROW_PAIRS * 2 * TILE_ROWS;
/// Bytes of one A tile: 16 tokens x 64 activation bytes.
const A_TILE: usize = TILE_ROWS * TILE_BYTES;
/// Bytes of the panel per 64-element step: 16 quads of `PANEL` rows x 4 codes.
const B_STEP: usize = TILE_BYTES / 4 * PANEL * 4;
/// int32 of one stored C tile.
const C_TILE: usize = TILE_ROWS * TILE_ROWS;
/// int32 of the C tiles of one token block: 2 x 2 per row pair.
const BLOCK_INTS: usize = ROW_PAIRS * 4 * C_TILE;

/// Whether this kernel can run here: the CPU has AMX-INT8 and AVX-512, the OS manages tile
/// state, and it granted this process tile data. `None` when the CPU has no AMX-INT8;
/// `Some(Err(why))` when it has but tern cannot use it. The permission is requested on the
/// first call.
pub(crate) fn status() -> Option<Result<(), &'static str>> {
    static STATUS: OnceLock<Option<Result<(), &'static str>>> = OnceLock::new();
    *STATUS.get_or_init(|| {
        if !cpu_has_amx_int8() {
            return None;
        }
        Some(if !<super::avx512vnni::Avx512 as crate::kernel::isa::Isa>::available() {
            Err("AMX-INT8 without AVX-512 VNNI, which the kernel's panel unpack and scaling use")
        } else if !os_manages_tiles() {
            Err("the OS does not manage AMX tile state (XCR0 bits 17-18 clear: Linux 5.16 or later is needed)")
        } else {
            request_tile_data()
        })
    })
}

fn available() -> bool {
    matches!(status(), Some(Ok(())))
}

/// CPUID leaf 7: EDX bit 24 is AMX-TILE, bit 25 AMX-INT8.
fn cpu_has_amx_int8() -> bool {
    // Leaf 7 is read only if leaf 0 lists it.
    let edx = (__cpuid(0).eax >= 7).then(|| __cpuid_count(7, 0).edx);
    edx.is_some_and(|edx| edx & (3 << 24) == 3 << 24)
}

/// Whether the OS saves and restores tile state: OSXSAVE, then XCR0's XTILECFG and
/// XTILEDATA bits.
fn os_manages_tiles() -> bool {
    /// # Safety
    /// The CPU must have XSAVE with OSXSAVE set (XGETBV is enabled).
    #[target_feature(enable = "xsave")]
    unsafe fn xcr0() -> u64 {
        // SAFETY: XGETBV is enabled, as the caller guarantees.
        unsafe { _xgetbv(0) }
    }
    let osxsave = __cpuid(1).ecx & (1 << 27) != 0;
    // SAFETY: OSXSAVE set means XGETBV is enabled (checked first).
    osxsave && unsafe { xcr0() } & (3 << 17) == 3 << 17
}

#[cfg(target_os = "linux")]
fn request_tile_data() -> Result<(), &'static str> {
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: this arch_prctl request only adds tile data to the state the kernel lets this
    // process use; it reads and writes no memory of ours.
    let r = unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) };
    if r == 0 {
        Ok(())
    } else {
        Err("the OS refused AMX tile data to this process (arch_prctl ARCH_REQ_XCOMP_PERM failed)")
    }
}

#[cfg(not(target_os = "linux"))]
fn request_tile_data() -> Result<(), &'static str> {
    Err("tern requests AMX tile data from Linux only (arch_prctl); this OS is not supported yet")
}

/// The `ldtilecfg` operand: palette 1, tiles 0-7 all 16 rows x 64 bytes.
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

static CONFIG: TileConfig = {
    let (mut colsb, mut rows) = ([0u16; 16], [0u8; 16]);
    let mut i = 0;
    while i < 8 {
        colsb[i] = TILE_BYTES as u16;
        rows[i] = TILE_ROWS as u8;
        i += 1;
    }
    TileConfig { palette: 1, start_row: 0, reserved: [0; 14], colsb, rows }
};

/// The tile configuration, loaded on this thread for as long as the value lives; dropping
/// it releases the tiles. Not `Send`: the configuration belongs to the thread.
struct Tiles(PhantomData<*const ()>);

impl Tiles {
    /// # Safety
    /// [`status`] must have returned `Some(Ok(()))` (the CPU has AMX and the OS granted
    /// tile data).
    unsafe fn configure() -> Tiles {
        // SAFETY: AMX is usable (the caller's promise); LDTILECFG reads the 64 bytes of
        // `CONFIG`, a valid palette-1 configuration.
        unsafe { std::arch::asm!("ldtilecfg [{}]", in(reg) &CONFIG, options(nostack, readonly)) };
        Tiles(PhantomData)
    }
}

impl Drop for Tiles {
    fn drop(&mut self) {
        // SAFETY: a `Tiles` exists only where AMX is usable (see `configure`); TILERELEASE
        // returns the tiles to their initial state and touches no memory.
        unsafe { std::arch::asm!("tilerelease", options(nostack, nomem)) };
    }
}

/// `c[i][j] += A_i . B_j` (or `=`, when `!accumulate`) over `steps` 64-element steps, for
/// `TT` A tiles (16-token blocks at `a[i]`, 1 KiB per step) and two B tiles of the panel
/// at `b` (`B_STEP` bytes per step, 16 rows of 64 bytes at a stride of `4 * PANEL`, then
/// the next 16 weight rows 64 bytes on); `c` holds `TT x 2` C tiles of 16 x 16 int32,
/// tile `2 i + j` at `c + 256 (2 i + j)`.
///
/// # Safety
/// `tiles` proves the configuration is loaded on this thread. `steps >= 1`; `a[i]` must be
/// readable for `steps * 1024` bytes, `b` for `steps * B_STEP`, `c` readable and writable
/// for `TT * 2 * 256` int32.
#[inline(always)]
unsafe fn dot_tiles<const TT: usize>(
    _tiles: &Tiles,
    a: [*const u8; 2],
    b: *const u8,
    steps: usize,
    c: *mut i32,
    accumulate: bool,
) {
    assert!(steps >= 1 && (TT == 1 || TT == 2));
    // The loop's operands, shared by both tile counts: the instructions name the tiles.
    macro_rules! tile_loop {
        ($($insn:literal,)* ; $($tiles:tt)*) => {
            std::arch::asm!(
                $($insn,)*
                a0 = inout(reg) a[0] => _,
                a1 = inout(reg) a[1] => _,
                b = inout(reg) b => _,
                n = inout(reg) steps => _,
                c = in(reg) c,
                acc = in(reg) accumulate as usize,
                row = in(reg) TILE_BYTES,
                brow = in(reg) 4 * PANEL,
                astep = const A_TILE,
                bstep = const B_STEP,
                $($tiles)*
                options(nostack),
            )
        };
    }
    if TT == 2 {
        // SAFETY: the caller's promises: every tile load reads 16 rows of 64 bytes inside
        // the spans named above (A rows 64 bytes apart, B rows `4 * PANEL`, C rows 64), the
        // stores write the four C tiles at `c`; the configuration is loaded.
        unsafe {
            tile_loop!(
                "test {acc}, {acc}",
                "jz 3f",
                "tileloadd tmm0, [{c} + {row}*1]",
                "tileloadd tmm1, [{c} + {row}*1 + 1024]",
                "tileloadd tmm2, [{c} + {row}*1 + 2048]",
                "tileloadd tmm3, [{c} + {row}*1 + 3072]",
                "jmp 2f",
                "3:",
                "tilezero tmm0",
                "tilezero tmm1",
                "tilezero tmm2",
                "tilezero tmm3",
                "2:",
                "tileloadd tmm4, [{a0} + {row}*1]",
                "tileloadd tmm5, [{a1} + {row}*1]",
                "tileloadd tmm6, [{b} + {brow}*1]",
                "tileloadd tmm7, [{b} + {brow}*1 + 64]",
                "tdpbsud tmm0, tmm4, tmm6",
                "tdpbsud tmm1, tmm4, tmm7",
                "tdpbsud tmm2, tmm5, tmm6",
                "tdpbsud tmm3, tmm5, tmm7",
                "add {a0}, {astep}",
                "add {a1}, {astep}",
                "add {b}, {bstep}",
                "dec {n}",
                "jnz 2b",
                "tilestored [{c} + {row}*1], tmm0",
                "tilestored [{c} + {row}*1 + 1024], tmm1",
                "tilestored [{c} + {row}*1 + 2048], tmm2",
                "tilestored [{c} + {row}*1 + 3072], tmm3",
                ;
                out("tmm0") _, out("tmm1") _, out("tmm2") _, out("tmm3") _,
                out("tmm4") _, out("tmm5") _, out("tmm6") _, out("tmm7") _,
            )
        }
    } else {
        // SAFETY: as above, for one A tile (`a[1]` is advanced but never read) and two C
        // tiles.
        unsafe {
            tile_loop!(
                "test {acc}, {acc}",
                "jz 3f",
                "tileloadd tmm0, [{c} + {row}*1]",
                "tileloadd tmm1, [{c} + {row}*1 + 1024]",
                "jmp 2f",
                "3:",
                "tilezero tmm0",
                "tilezero tmm1",
                "2:",
                "tileloadd tmm4, [{a0} + {row}*1]",
                "tileloadd tmm6, [{b} + {brow}*1]",
                "tileloadd tmm7, [{b} + {brow}*1 + 64]",
                "tdpbsud tmm0, tmm4, tmm6",
                "tdpbsud tmm1, tmm4, tmm7",
                "add {a0}, {astep}",
                "add {a1}, {astep}",
                "add {b}, {bstep}",
                "dec {n}",
                "jnz 2b",
                "tilestored [{c} + {row}*1], tmm0",
                "tilestored [{c} + {row}*1 + 1024], tmm1",
                ;
                out("tmm0") _, out("tmm1") _, out("tmm4") _, out("tmm6") _, out("tmm7") _,
            )
        }
    }
}

/// One or two packed 16-token blocks from `t0`: the A tiles of one C block.
#[derive(Clone, Copy)]
struct TokenTiles {
    t0: usize,
    pair: bool,
}

/// One call's view of a panel: the activations, the unpacked rows and their scales, over
/// one chunk of the row ([`CHUNK_K`]).
struct Panel<'a> {
    act: &'a Packed,
    /// The chunk's codes: its steps' `B_STEP` bytes each, from `steps.start`.
    codes: &'a [u8],
    /// The chunk's block scales, `PANEL` per block from `blocks.start`.
    scales: &'a [f32],
    /// The weight rows of this panel (at most [`PANEL`]; the rest is zero padding).
    rows: std::ops::Range<usize>,
    /// The 64-element steps of the row this chunk holds.
    steps: std::ops::Range<usize>,
    /// The format's blocks of the row this chunk holds.
    blocks: std::ops::Range<usize>,
}

impl Panel<'_> {
    /// The C tiles of `tt` (2 x 2, or 1 x 2) and row pair `rp` of the panel over `steps`
    /// steps from `step`, into `c` (added to what `c` holds if `accumulate`).
    ///
    /// # Safety
    /// As for [`dot_tiles`], which this checks the spans for.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn dot(
        &self,
        tiles: &Tiles,
        tt: TokenTiles,
        rp: usize,
        step: usize,
        steps: usize,
        c: &mut [i32],
        accumulate: bool,
    ) {
        let kg = self.act.kg;
        let second = if tt.pair { tt.t0 + TILE_ROWS } else { tt.t0 };
        assert!(
            (second + TILE_ROWS) * kg <= self.act.codes().len() && (step + steps) * TILE_BYTES <= kg,
            "A tiles out of range"
        );
        assert!(
            rp < ROW_PAIRS && step >= self.steps.start && step + steps <= self.steps.end,
            "B tiles out of the chunk"
        );
        let step_in = step - self.steps.start;
        assert!((step_in + steps) * B_STEP <= self.codes.len(), "B tiles out of range");
        assert!(c.len() >= 4 * C_TILE, "C tiles out of range");
        let codes = self.act.codes();
        let a = |t: usize| codes[t * kg + step * A_TILE..].as_ptr();
        let (a, b, c) =
            ([a(tt.t0), a(second)], self.codes[step_in * B_STEP + rp * 2 * TILE_BYTES..].as_ptr(), c.as_mut_ptr());
        // SAFETY: the spans asserted above; `tiles` is this thread's configuration.
        unsafe {
            if tt.pair {
                dot_tiles::<2>(tiles, a, b, steps, c, accumulate)
            } else {
                dot_tiles::<1>(tiles, a, b, steps, c, accumulate)
            }
        }
    }

    /// Each token of `tt` that is a token of the call (not padding), with its C tile row:
    /// `(token, index of row 0 of its C tiles)`; C tile `2 i + j` row `r` for token
    /// `t0 + 16 i + r` and weight rows `16 j..16 j + 16` is at `at + 256 j`.
    fn tokens(&self, tt: TokenTiles) -> impl Iterator<Item = (usize, usize)> {
        let end = (tt.t0 + if tt.pair { 2 } else { 1 } * TILE_ROWS).min(self.act.m);
        (tt.t0..end).map(move |t| {
            let (i, r) = ((t - tt.t0) / TILE_ROWS, (t - tt.t0) % TILE_ROWS);
            (t, 2 * i * C_TILE + r * TILE_ROWS)
        })
    }

    /// Writes `lanes` (rows `16 j ..16 j + 16` of the panel) for `token` if `out` owns it.
    #[inline(always)]
    fn write(&self, out: &mut OutTile, token: usize, j: usize, lanes: &[f32; 16]) {
        let first = self.rows.start + j * TILE_ROWS;
        let n = TILE_ROWS.min(self.rows.end.saturating_sub(first));
        if n > 0 && out.tokens().contains(&token) {
            // A whole run as a fixed-size copy (a `memcpy` call otherwise).
            if n == TILE_ROWS {
                out.set_run(token, first, lanes);
            } else {
                out.set_run(token, first, &lanes[..n]);
            }
        }
    }

    /// One scale for the tensor: int32 along the whole row (in the tiles, and in `c`
    /// between chunks of the row), then `a_scale * (d * dot)` per output, the order of the
    /// reference. Each token block's outputs are made while the tiles work on the next
    /// block (the out-of-order core overlaps the two). This panel chunk's steps; the
    /// outputs once the chunk ends the row.
    ///
    /// # Safety
    /// As for [`dot_tiles`]; the CPU must have AVX-512F.
    #[inline(always)]
    unsafe fn uniform(&self, tiles: &Tiles, out: &mut OutTile, blocks: &[TokenTiles], d: f32, c: &mut [i32]) {
        let steps = self.act.kg / TILE_BYTES;
        for chunk in self.steps.clone().step_by(CHUNK_STEPS) {
            let (n, last) = (CHUNK_STEPS.min(self.steps.end - chunk), chunk + CHUNK_STEPS >= steps);
            for (bi, &tt) in blocks.iter().enumerate() {
                for rp in 0..ROW_PAIRS {
                    let c = &mut c[(bi * ROW_PAIRS + rp) * 4 * C_TILE..][..4 * C_TILE];
                    // SAFETY: the caller's promises.
                    unsafe { self.dot(tiles, tt, rp, chunk, n, c, chunk > 0) };
                }
                if last && bi > 0 {
                    // SAFETY: AVX-512F (the caller's promise).
                    unsafe { self.finish_uniform(out, blocks[bi - 1], &c[(bi - 1) * BLOCK_INTS..][..BLOCK_INTS], d) };
                }
            }
        }
        if self.steps.end == steps {
            let bi = blocks.len() - 1;
            // SAFETY: AVX-512F (the caller's promise).
            unsafe { self.finish_uniform(out, blocks[bi], &c[bi * BLOCK_INTS..][..BLOCK_INTS], d) };
        }
    }

    /// The outputs of token block `tt` from its C tiles `c` (all row pairs), one scale `d`.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[inline(always)]
    unsafe fn finish_uniform(&self, out: &mut OutTile, tt: TokenTiles, c: &[i32], d: f32) {
        let mut lanes = [0f32; 16];
        for (token, at) in self.tokens(tt) {
            let (seed, a_scale) = (self.act.row_seeds[token], self.act.scales[token]);
            for (rp, c) in c.chunks_exact(4 * C_TILE).enumerate() {
                for j in 0..2 {
                    let row = &c[at + j * C_TILE..][..TILE_ROWS];
                    // SAFETY: 16 int32 at `row` and 16 floats at `lanes`; AVX-512F (the
                    // caller's).
                    unsafe {
                        let dot = _mm512_add_epi32(_mm512_loadu_si512(row.as_ptr().cast()), _mm512_set1_epi32(seed));
                        let x = _mm512_mul_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(dot));
                        _mm512_storeu_ps(lanes.as_mut_ptr(), _mm512_mul_ps(_mm512_set1_ps(a_scale), x));
                    }
                    self.write(out, token, 2 * rp + j, &lanes);
                }
            }
        }
    }

    /// Block scales: the C tiles stored every block of the format, each converted and
    /// multiplied by the rows' block scales into float sums (`sums`, while the tiles work
    /// on the next token block), which end scaled by the token's activation scale; with
    /// per-block activation scales (I8_BLOCK256) the rows' block scales are multiplied by
    /// the token's scale of the block first (`d * a_scale`, the reference's order) and the
    /// sums are the outputs. This panel chunk's blocks; the outputs once the chunk ends the
    /// row.
    ///
    /// # Safety
    /// As for [`dot_tiles`]; the CPU must have AVX-512F and FMA.
    #[inline(always)]
    unsafe fn per_block(
        &self,
        tiles: &Tiles,
        out: &mut OutTile,
        blocks: &[TokenTiles],
        c: &mut [i32],
        sums: &mut [f32],
    ) {
        // The activations were packed with seeds per block of the format (`gemm` checks).
        let (n_blocks, block_steps) = (self.act.k / self.act.block, self.act.block / TILE_BYTES);
        assert!(
            self.act.k == self.act.kg && self.blocks.end <= n_blocks && self.scales.len() >= self.blocks.len() * PANEL,
            "rows of whole blocks"
        );
        if self.blocks.start == 0 {
            sums.fill(0.0);
        }
        for b in self.blocks.clone() {
            for (bi, &tt) in blocks.iter().enumerate() {
                for rp in 0..ROW_PAIRS {
                    let c = &mut c[(bi * ROW_PAIRS + rp) * 4 * C_TILE..][..4 * C_TILE];
                    // SAFETY: the caller's promises.
                    unsafe { self.dot(tiles, tt, rp, b * block_steps, block_steps, c, false) };
                }
                if bi > 0 {
                    let at = (bi - 1) * BLOCK_INTS;
                    // SAFETY: AVX-512F and FMA (the caller's promise).
                    unsafe { self.add_block(blocks[bi - 1], b, &c[at..][..BLOCK_INTS], &mut sums[at..][..BLOCK_INTS]) };
                }
            }
            let at = (blocks.len() - 1) * BLOCK_INTS;
            // SAFETY: AVX-512F and FMA (the caller's promise).
            unsafe {
                self.add_block(blocks[blocks.len() - 1], b, &c[at..][..BLOCK_INTS], &mut sums[at..][..BLOCK_INTS])
            };
        }
        if self.blocks.end < n_blocks {
            return;
        }
        let mut lanes = [0f32; 16];
        for (tt, sums) in blocks.iter().zip(sums.chunks_exact(BLOCK_INTS)) {
            for (token, at) in self.tokens(*tt) {
                let a_scale = if self.act.per_block { 1.0 } else { self.act.scales[token] };
                for (rp, sums) in sums.chunks_exact(4 * C_TILE).enumerate() {
                    for j in 0..2 {
                        for (x, s) in lanes.iter_mut().zip(&sums[at + j * C_TILE..][..TILE_ROWS]) {
                            // Exact when `a_scale` is 1.
                            *x = s * a_scale;
                        }
                        self.write(out, token, 2 * rp + j, &lanes);
                    }
                }
            }
        }
    }

    /// `sums += float(c + seed) * scale` for block `b` of token block `tt`,
    /// every row pair: the block's results `c` scaled by the rows' block scales (times the
    /// token's scale of the block, with per-block activation scales).
    ///
    /// # Safety
    /// The CPU must have AVX-512F and FMA.
    #[inline(always)]
    unsafe fn add_block(&self, tt: TokenTiles, b: usize, c: &[i32], sums: &mut [f32]) {
        let n_blocks = self.act.k / self.act.block;
        for (token, at) in self.tokens(tt) {
            let (t0, tn) = (token / self.act.t * self.act.t, self.act.t);
            let seed = self.act.tile_seeds(t0, tn)[b * tn + token - t0];
            let a_scale = self.act.per_block.then(|| self.act.scales[token * n_blocks + b]);
            for (rp, (c, sums)) in c.chunks_exact(4 * C_TILE).zip(sums.chunks_exact_mut(4 * C_TILE)).enumerate() {
                for j in 0..2 {
                    let at = at + j * C_TILE;
                    let (row, sum) = (&c[at..][..TILE_ROWS], &mut sums[at..][..TILE_ROWS]);
                    let scales =
                        &self.scales[(b - self.blocks.start) * PANEL + (2 * rp + j) * TILE_ROWS..][..TILE_ROWS];
                    // SAFETY: 16 elements at each pointer; AVX-512F and FMA (the caller's).
                    unsafe {
                        let dot = _mm512_add_epi32(_mm512_loadu_si512(row.as_ptr().cast()), _mm512_set1_epi32(seed));
                        let s = _mm512_loadu_ps(scales.as_ptr());
                        let s = a_scale.map_or(s, |a| _mm512_mul_ps(s, _mm512_set1_ps(a)));
                        let f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, _mm512_loadu_ps(sum.as_ptr()));
                        _mm512_storeu_ps(sum.as_mut_ptr(), f);
                    }
                }
            }
        }
    }
}

/// Elements of a row per panel chunk: a whole panel's unpacked rows (`k x 128` bytes) and
/// the activations did not fit L2 from k ~ 12,000 on, and from there the kernel fell behind
/// the AVX-512 GEMM (Intel Xeon, 2560 x k TQ2_0, 32 tokens: k = 10,240 3.46 ms against 3.77,
/// 12,288 5.83 against 4.47); each chunk is unpacked and run by every token block before
/// the next, 512 KiB of codes. A multiple of every format's block and of `CHUNK_STEPS`.
const CHUNK_K: usize = 4096;

/// 64-element steps per chunk of a row on the one-scale path: each chunk of the panel
/// (128 rows x 512 codes, 64 KiB: a row pair's 16 KiB fits L1) stays in cache while every
/// token block of the call runs on it; the C tiles go to memory and back between chunks.
const CHUNK_STEPS: usize = 8;

/// The AMX GEMM of one weight format over the block of `out`.
///
/// # Safety
/// [`status`] must be `Some(Ok(()))`; operands checked by `Kernel::run_prepared`, `a`
/// this kernel's preparation.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,f16c,fma")]
unsafe fn gemm<L: Layout>(w: &MatRef, a: &Packed, out: &mut OutTile) {
    assert!(w.format == L::FORMAT && a.k == w.cols && a.m == out.m(), "operands of another kernel");
    assert!(
        a.kg.is_multiple_of(TILE_BYTES) && a.t == TILE_ROWS && a.pad == TILE_ROWS && a.block == L::BLOCK,
        "activations packed for another kernel"
    );
    // Not the uniform-scale path with per-block activation scales: every block is then
    // scaled on its own.
    let uniform = if a.per_block { None } else { w.uniform_scale };
    let scale = L::tensor_scale(w.bytes).or(uniform);
    assert!(scale.is_none() || !a.per_block, "per-block activations with one weight scale");
    let (rows, tokens) = (out.rows(), out.tokens());
    // The packed 16-token blocks that hold `tokens`, in pairs, then a last single one.
    let first = tokens.start / TILE_ROWS * TILE_ROWS;
    let blocks: Vec<TokenTiles> = (first..tokens.end)
        .step_by(2 * TILE_ROWS)
        .map(|t0| TokenTiles { t0, pair: t0 + TILE_ROWS < tokens.end })
        .collect();
    if blocks.is_empty() {
        return; // No tokens in the block of `out`: nothing to write.
    }
    const { assert!(CHUNK_K.is_multiple_of(L::BLOCK) && CHUNK_K >= L::BLOCK, "chunks of whole blocks") };
    let mut s = Scratch::take();
    let chunk_blocks = CHUNK_K / L::BLOCK;
    let codes = aligned(&mut s.panel, a.kg.min(CHUNK_K) * PANEL);
    let scales = sized(&mut s.scales, chunk_blocks * PANEL);
    let (n_blocks, n_steps) = (w.cols.div_ceil(L::BLOCK), a.kg / TILE_BYTES);
    let mut results = RESULTS.with(Cell::take);
    let c = aligned(&mut results.ints, blocks.len() * BLOCK_INTS);
    let sums = aligned(&mut results.sums, blocks.len() * BLOCK_INTS);
    // SAFETY: AMX is usable (the caller's promise).
    let tiles = unsafe { Tiles::configure() };
    for r0 in rows.clone().step_by(PANEL) {
        let prows = r0..(r0 + PANEL).min(rows.end);
        for b0 in (0..n_blocks).step_by(chunk_blocks) {
            let chunk = b0..n_blocks.min(b0 + chunk_blocks);
            let steps = b0 * L::BLOCK / TILE_BYTES..n_steps.min(chunk.end * L::BLOCK / TILE_BYTES);
            // SAFETY: AVX-512 (this function's features). Quads past k/4 keep whatever the
            // buffer held: they meet only the zero activations past k.
            unsafe {
                pack_panel::<Avx512, Avx512, L>(
                    w,
                    prows.clone(),
                    chunk.clone(),
                    PANEL,
                    codes,
                    scale.is_none().then_some(&mut *scales),
                )
            };
            let panel = Panel { act: a, codes, scales, rows: prows.clone(), steps, blocks: chunk };
            // SAFETY: AMX (the caller's promise) with this thread's configuration; the
            // features of this function; `Panel::dot` checks every span.
            unsafe {
                match scale {
                    Some(d) => panel.uniform(&tiles, out, &blocks, d, c),
                    None => panel.per_block(&tiles, out, &blocks, c, sums),
                }
            }
        }
    }
    drop(tiles);
    RESULTS.with(|r| r.set(results));
    s.put();
}

/// AMX's per-thread buffers besides the shared panel ([`Scratch`]), grown to the largest
/// shape seen and reused: taken out for a call like `Scratch`.
#[derive(Default)]
struct Results {
    /// Integer results stored from tile registers.
    ints: Vec<Line>,
    /// Float sums of those results over the blocks of a row.
    sums: Vec<Line>,
}

thread_local! {
    static RESULTS: Cell<Results> = Cell::new(Results::default());
}

/// `bitnet_gemm/amx` for format `L`.
struct Amx<L>(PhantomData<fn() -> L>);

impl<L: Layout> Compute for Amx<L> {
    type Act = Packed;
    const REQUIRES: &'static str = FEATURES;
    // Whole panels and whole pairs of A tiles.
    const GEOMETRY: Geometry = Geometry { rows: PANEL, tokens: 2 * TILE_ROWS };

    fn available() -> bool {
        available()
    }

    fn prepare(&self, a: &MatRef) -> Packed {
        Packed::new::<TILE_BYTES>(a, TILE_ROWS, L::BLOCK, TILE_ROWS)
    }

    fn run(&self, w: &MatRef, _a: &MatRef, act: &Packed, out: &mut OutTile) {
        assert!(available(), "bitnet_gemm/amx needs {FEATURES}");
        // SAFETY: AMX is usable (asserted above); `Kernel::run_prepared` checked the
        // operands and that `act` is this kernel's own preparation.
        unsafe { gemm::<L>(w, act, out) }
    }
}

/// `bitnet_gemm/amx` for TQ1_0, TQ2_0 and BITNET_B1_58, preferred from 16, 28 and 10
/// tokens (TQ1_0 and TQ2_0 by I8_BLOCK256 too, with the same thresholds): from there on it
/// beat both the AVX-512 VNNI GEMV and GEMM at every m measured (Intel Xeon, Sapphire
/// Rapids class, one thread, thread CPU time, 2560x2560, 6912x2560, 2560x6912, 4096x14336
/// and 14336x4096). Below, the AVX-512 GEMM is as fast or faster: TQ1_0 ties at 12 (394
/// against 394 µs at 2560x2560; 3.61 against 3.59 ms at 4096x14336) and wins at 8; TQ2_0's
/// panel unpack costs AMX more, it loses at 20 and 24 (4096x14336: 5.30 against 5.12 ms)
/// and wins from 28 (5.60 against 5.86); BITNET_B1_58 wins from 10 (2.80 against 2.89 ms,
/// 289 against 308 µs). I2_S in both packings runs BITNET_B1_58's path (one scale, the same
/// panel) and measured the same (m = 16: 342 and 336 µs against BITNET's 345 and the AVX-512
/// GEMM's 474), so it has BITNET's threshold; so does I2_S_R4 (its rows' planes taken by
/// the packer: m = 10 281 µs against the GEMV's 307, m = 16 286 against BITNET's 304).
/// Not Q2_0: its C tiles would be stored and scaled every 64 elements, and that float
/// work costs more than the four `tdpbsud` between stores; it measured slower than the
/// AVX-512 VNNI GEMM from m = 64 on (6912 columns: 5.63 against 4.80 ms at 64, 19.5
/// against 18.5 ms at 256).
pub(super) fn kernels() -> [Kernel; 8] {
    let (name, i8, block) = (c"bitnet_gemm/amx", Format::I8Absmax, Format::I8Block256);
    [
        Kernel::new(name, Format::Tq1_0, i8, 16, &Amx::<Tq1>(PhantomData)),
        Kernel::new(name, Format::Tq1_0, block, 16, &Amx::<Tq1>(PhantomData)),
        Kernel::new(name, Format::Tq2_0, i8, 28, &Amx::<Tq2>(PhantomData)),
        Kernel::new(name, Format::Tq2_0, block, 28, &Amx::<Tq2>(PhantomData)),
        Kernel::new(name, Format::BitnetB158, i8, 10, &Amx::<Bitnet>(PhantomData)),
        Kernel::new(name, Format::I2S, i8, 10, &Amx::<I2s128>(PhantomData)),
        Kernel::new(name, Format::I2S64, i8, 10, &Amx::<I2s64>(PhantomData)),
        Kernel::new(name, Format::I2SR4, i8, 10, &Amx::<I2sR4>(PhantomData)),
    ]
}
