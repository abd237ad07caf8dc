//! TQ2_0 (ggml): per 256-element block `qs[64]` then an f16 `d`. Element e sits in byte
//! `32 * (e / 128) + e % 32` at bit shift `2 * ((e % 128) / 32)`.

use super::ternary::{block_scale, code_of_scaled, read_f16, BlockLayout, QK};

pub const QS_BYTES: usize = 64;
pub const BLOCK_BYTES: usize = QS_BYTES + 2;
/// Offset of the f16 scale in a block.
pub const SCALE_AT: usize = QS_BYTES;
/// The block's parts, for the walks every block-scaled format shares.
pub const LAYOUT: BlockLayout = BlockLayout { bytes: BLOCK_BYTES, scale_at: SCALE_AT, read_codes, write_codes };

/// Byte offset in `qs` and bit shift of element `e` of a block.
#[inline(always)]
pub fn position(e: usize) -> (usize, u32) {
    (32 * (e / 128) + e % 32, 2 * ((e % 128) / 32) as u32)
}

pub fn encode(src: &[f32], dst: &mut [u8]) {
    for (x, block) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(BLOCK_BYTES)) {
        let (d, id) = block_scale(x);
        write_codes(&std::array::from_fn(|e| code_of_scaled(x[e] * id)), block);
        block[SCALE_AT..].copy_from_slice(&d.to_le_bytes());
    }
}

/// Writes a block's `qs` for its 256 codes (trit + 1) in element order; the scale bytes are
/// the caller's.
pub fn write_codes(codes: &[u8; QK], block: &mut [u8]) {
    // 32 bytes carry 128 elements: four 32-element runs at shifts 0, 2, 4, 6. Running over
    // whole runs (not element by element) keeps the loop free of scattered writes.
    for (qs, codes) in block[..QS_BYTES].chunks_exact_mut(32).zip(codes.chunks_exact(128)) {
        let mut packed = [0u8; 32];
        for (l, run) in codes.chunks_exact(32).enumerate() {
            for (q, &c) in packed.iter_mut().zip(run) {
                *q |= c << (2 * l);
            }
        }
        qs.copy_from_slice(&packed);
    }
}

/// A block's 256 codes (trit + 1; 3 where corrupt) in element order.
pub fn read_codes(block: &[u8], codes: &mut [u8; QK]) {
    // 32 bytes carry 128 elements: four 32-element runs at shifts 0, 2, 4, 6.
    for (qs, codes) in block[..QS_BYTES].chunks_exact(32).zip(codes.chunks_exact_mut(128)) {
        for (l, run) in codes.chunks_exact_mut(32).enumerate() {
            for (c, &q) in run.iter_mut().zip(qs) {
                *c = (q >> (2 * l)) & 3;
            }
        }
    }
}

pub fn get(src: &[u8], index: usize) -> f32 {
    let block = &src[(index / QK) * BLOCK_BYTES..][..BLOCK_BYTES];
    let (byte, shift) = position(index % QK);
    let code = (block[byte] >> shift) & 3;
    (code as f32 - 1.0) * read_f16(&block[SCALE_AT..]).to_f32()
}

/// Code 3 is outside the alphabet (ggml decodes it as +2); a non-finite scale is corrupt.
pub fn first_corrupt(src: &[u8]) -> Option<usize> {
    src.chunks_exact(BLOCK_BYTES).enumerate().find_map(|(b, block)| {
        if !super::ternary::scale_is_valid(read_f16(&block[SCALE_AT..]).to_f32()) {
            return Some(b * QK);
        }
        let mut codes = [0u8; QK];
        read_codes(block, &mut codes);
        codes.iter().position(|&c| c == 3).map(|e| b * QK + e)
    })
}
