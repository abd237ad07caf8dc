//! TQ2_0 (ggml): per 256-element block `qs[64]` then an f16 `d`. Element e sits in byte
//! `32 * (e / 128) + e % 32` at bit shift `2 * ((e % 128) / 32)`.

use super::ternary::{block_scale, code_of_scaled, read_f16, QK};

pub const QS_BYTES: usize = 64;
pub const BLOCK_BYTES: usize = QS_BYTES + 2;

/// Byte offset in `qs` and bit shift of element `e` of a block.
#[inline(always)]
pub fn position(e: usize) -> (usize, u32) {
    (32 * (e / 128) + e % 32, 2 * ((e % 128) / 32) as u32)
}

pub fn encode(src: &[f32], dst: &mut [u8]) {
    for (x, block) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(BLOCK_BYTES)) {
        let (d, id) = block_scale(x);
        let (qs, scale) = block.split_at_mut(QS_BYTES);
        // 32 bytes carry 128 elements: four 32-element runs at shifts 0, 2, 4, 6. Running
        // over whole runs (not element by element) keeps the loop free of scattered writes.
        for (qs, x) in qs.chunks_exact_mut(32).zip(x.chunks_exact(128)) {
            let mut packed = [0u8; 32];
            for (l, run) in x.chunks_exact(32).enumerate() {
                for (q, &v) in packed.iter_mut().zip(run) {
                    *q |= code_of_scaled(v * id) << (2 * l);
                }
            }
            qs.copy_from_slice(&packed);
        }
        scale.copy_from_slice(&d.to_le_bytes());
    }
}

pub fn decode(src: &[u8], dst: &mut [f32]) {
    for (block, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = read_f16(&block[QS_BYTES..]).to_f32();
        // 32 bytes carry 128 elements: four 32-element runs at shifts 0, 2, 4, 6.
        for (qs, y) in block[..QS_BYTES].chunks_exact(32).zip(y.chunks_exact_mut(128)) {
            for (l, y) in y.chunks_exact_mut(32).enumerate() {
                for (y, &q) in y.iter_mut().zip(qs) {
                    *y = (((q >> (2 * l)) & 3) as f32 - 1.0) * d;
                }
            }
        }
    }
}

pub fn get(src: &[u8], index: usize) -> f32 {
    let block = &src[(index / QK) * BLOCK_BYTES..][..BLOCK_BYTES];
    let (byte, shift) = position(index % QK);
    let code = (block[byte] >> shift) & 3;
    (code as f32 - 1.0) * read_f16(&block[QS_BYTES..]).to_f32()
}

/// Code 3 is outside the alphabet (ggml decodes it as +2); a non-finite scale is corrupt.
pub fn first_corrupt(src: &[u8]) -> Option<usize> {
    src.chunks_exact(BLOCK_BYTES).enumerate().find_map(|(b, block)| {
        if !super::ternary::scale_is_valid(read_f16(&block[QS_BYTES..]).to_f32()) {
            return Some(b * QK);
        }
        (0..QK)
            .find(|&e| {
                let (byte, shift) = position(e);
                (block[byte] >> shift) & 3 == 3
            })
            .map(|e| b * QK + e)
    })
}

pub fn row_trits(src: &[u8], cols: usize, row: usize, trits: &mut [i8], scales: &mut [f32]) {
    let blocks = cols / QK;
    let row_bytes = &src[row * blocks * BLOCK_BYTES..][..blocks * BLOCK_BYTES];
    for ((block, t), s) in row_bytes.chunks_exact(BLOCK_BYTES).zip(trits.chunks_exact_mut(QK)).zip(scales) {
        *s = read_f16(&block[QS_BYTES..]).to_f32();
        for (e, t) in t.iter_mut().enumerate() {
            let (byte, shift) = position(e);
            *t = ((block[byte] >> shift) & 3) as i8 - 1;
        }
    }
}
