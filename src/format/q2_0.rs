//! Q2_0 (ggml type 42): per 64-element block an f16 `d` FIRST, then `qs[16]`. Element j
//! sits in byte `j / 4` at bit shift `2 * (j % 4)`; code c means `(c - 1) * d`, so the
//! codes 0..=3 are -1, 0, +1 and +2 (+2 is valid; ggml's quantizer never writes it).

use super::ternary::{block_scale, code_of_scaled, read_f16};

/// Elements per block (ggml's QK2_0).
pub const QK: usize = 64;
pub const D_BYTES: usize = 2;
pub const BLOCK_BYTES: usize = D_BYTES + QK / 4;

/// ggml's `quantize_row_q2_0_ref`: d = max |x| of the block as f16, `id = 1 / max` from the
/// unrounded max, code `round_half_away(x * id) + 1`. |x * id| <= 1, so the clamp to 0..=3
/// never acts and the rounding is `code_of_scaled`'s. A block whose max is below about
/// 2.9e-39 has an infinite `id`: ggml then converts +-inf and NaN to int (undefined in C;
/// x86 gives INT_MIN, clamped to code 0), so every code is 0, as tern writes too. Such a
/// block's d is 0 either way.
pub fn encode(src: &[f32], dst: &mut [u8]) {
    for (x, block) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(BLOCK_BYTES)) {
        let (d, id) = block_scale(x);
        let (scale, qs) = block.split_at_mut(D_BYTES);
        scale.copy_from_slice(&d.to_le_bytes());
        if id.is_infinite() {
            qs.fill(0);
            continue;
        }
        for (q, x) in qs.iter_mut().zip(x.chunks_exact(4)) {
            *q = x.iter().enumerate().fold(0, |q, (j, &v)| q | code_of_scaled(v * id) << (2 * j));
        }
    }
}

fn block_codes(block: &[u8]) -> impl Iterator<Item = u8> + '_ {
    block[D_BYTES..].iter().flat_map(|&q| (0..4).map(move |j| (q >> (2 * j)) & 3))
}

pub fn decode(src: &[u8], dst: &mut [f32]) {
    for (block, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = read_f16(block).to_f32();
        for (y, c) in y.iter_mut().zip(block_codes(block)) {
            *y = (c as f32 - 1.0) * d;
        }
    }
}

pub fn get(src: &[u8], index: usize) -> f32 {
    let block = &src[(index / QK) * BLOCK_BYTES..][..BLOCK_BYTES];
    let e = index % QK;
    let code = (block[D_BYTES + e / 4] >> (2 * (e % 4))) & 3;
    (code as f32 - 1.0) * read_f16(block).to_f32()
}

/// Every code is valid; only a scale no encoder writes (see `ternary::scale_is_valid`)
/// marks its block corrupt, at the block's first element.
pub fn first_corrupt(src: &[u8]) -> Option<usize> {
    src.chunks_exact(BLOCK_BYTES)
        .position(|block| !super::ternary::scale_is_valid(read_f16(block).to_f32()))
        .map(|b| b * QK)
}

pub fn row_trits(src: &[u8], cols: usize, row: usize, trits: &mut [i8], scales: &mut [f32]) {
    let blocks = cols / QK;
    let row_bytes = &src[row * blocks * BLOCK_BYTES..][..blocks * BLOCK_BYTES];
    for ((block, t), s) in row_bytes.chunks_exact(BLOCK_BYTES).zip(trits.chunks_exact_mut(QK)).zip(scales) {
        *s = read_f16(block).to_f32();
        for (t, c) in t.iter_mut().zip(block_codes(block)) {
            *t = c as i8 - 1;
        }
    }
}
