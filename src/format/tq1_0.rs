//! TQ1_0 (ggml): per 256-element block `qs[48]`, `qh[4]`, then an f16 `d`. Bytes hold five
//! base-3 digits (four in `qh`, times 3), stored as `ceil(v * 256 / 243)` so that digit n
//! comes out of `((b * 3^n) mod 256) * 3 >> 8`.

use super::ternary::{block_scale, code_of_scaled, read_f16, BlockLayout, QK};

pub const QS_BYTES: usize = 48;
pub const QH_BYTES: usize = 4;
pub const BLOCK_BYTES: usize = QS_BYTES + QH_BYTES + 2;
/// Offset of the f16 scale in a block.
pub const SCALE_AT: usize = QS_BYTES + QH_BYTES;
/// The block's parts, for the walks every block-scaled format shares.
pub const LAYOUT: BlockLayout = BlockLayout { bytes: BLOCK_BYTES, scale_at: SCALE_AT, read_codes, write_codes };

const POW3: [u8; 5] = [1, 3, 9, 27, 81];

/// The three regions of a block: (first element, bytes, first byte). Each byte of a
/// region holds the elements `first + byte_in_region + n * bytes` for digits n.
const REGIONS: [(usize, usize, usize); 3] = [(0, 32, 0), (160, 16, 32), (240, 4, 48)];

/// Byte offset and digit of element `e` of a block.
#[inline(always)]
pub fn position(e: usize) -> (usize, usize) {
    let &(first, bytes, byte0) = REGIONS.iter().rev().find(|r| e >= r.0).expect("e < 256");
    let e = e - first;
    (byte0 + e % bytes, e / bytes)
}

/// Digit n (0 = most significant) of a stored byte, as a code in {0, 1, 2}.
#[inline(always)]
pub const fn digit(b: u8, n: usize) -> u8 {
    ((b.wrapping_mul(POW3[n]) as u16 * 3) >> 8) as u8
}

/// The stored byte for five digits (most significant first).
#[inline(always)]
const fn pack(codes: [u8; 5]) -> u8 {
    let (mut v, mut n) = (0u16, 0);
    while n < 5 {
        v = v * 3 + codes[n] as u16;
        n += 1;
    }
    (v * 256).div_ceil(243) as u8
}

/// [`BYTE_CHECKS`]: the byte is the canonical encoding of its own digits.
const CANONICAL: u8 = 1;
/// [`BYTE_CHECKS`]: the byte's fifth digit is 0 (as a `qh` byte's must be).
const FIFTH_ZERO: u8 = 2;

/// What [`first_corrupt`] checks of each byte value, computed once.
const BYTE_CHECKS: [u8; 256] = {
    let mut checks = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let mut codes = [0u8; 5];
        let mut n = 0;
        while n < 5 {
            codes[n] = digit(b as u8, n);
            n += 1;
        }
        checks[b] = if pack(codes) == b as u8 { CANONICAL } else { 0 } | if codes[4] == 0 { FIFTH_ZERO } else { 0 };
        b += 1;
    }
    checks
};

pub fn encode(src: &[f32], dst: &mut [u8]) {
    for (x, block) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(BLOCK_BYTES)) {
        let (d, id) = block_scale(x);
        write_codes(&std::array::from_fn(|e| code_of_scaled(x[e] * id)), block);
        block[SCALE_AT..].copy_from_slice(&d.to_le_bytes());
    }
}

/// Writes a block's `qs` and `qh` for its 256 codes (trit + 1) in element order; the scale
/// bytes are the caller's.
pub fn write_codes(codes: &[u8; QK], block: &mut [u8]) {
    for &(first, bytes, byte0) in &REGIONS {
        let digits = if first == 240 { 4 } else { 5 };
        for m in 0..bytes {
            let mut digit_codes = [0u8; 5]; // qh's fifth digit stays 0: its value is times 3
            for (n, c) in digit_codes.iter_mut().enumerate().take(digits) {
                *c = codes[first + m + n * bytes];
            }
            block[byte0 + m] = pack(digit_codes);
        }
    }
}

/// A block's 256 codes (trit + 1) in element order.
pub fn read_codes(block: &[u8], codes: &mut [u8; QK]) {
    for &(first, bytes, byte0) in &REGIONS {
        let digits = if first == 240 { 4 } else { 5 };
        for n in 0..digits {
            for (c, &b) in codes[first + n * bytes..][..bytes].iter_mut().zip(&block[byte0..byte0 + bytes]) {
                *c = digit(b, n);
            }
        }
    }
}

pub fn get(src: &[u8], index: usize) -> f32 {
    let block = &src[(index / QK) * BLOCK_BYTES..][..BLOCK_BYTES];
    let (byte, n) = position(index % QK);
    (digit(block[byte], n) as f32 - 1.0) * read_f16(&block[SCALE_AT..]).to_f32()
}

/// Every byte decodes to some digits, so corruption shows as a byte that is not the
/// canonical encoding of its own digits (or a qh byte with a non-zero fifth digit), or
/// as a non-finite scale. Reports the first element of the offending byte.
pub fn first_corrupt(src: &[u8]) -> Option<usize> {
    src.chunks_exact(BLOCK_BYTES).enumerate().find_map(|(b, block)| {
        if !super::ternary::scale_is_valid(read_f16(&block[SCALE_AT..]).to_f32()) {
            return Some(b * QK);
        }
        REGIONS.iter().find_map(|&(first, bytes, byte0)| {
            let need = if first == 240 { CANONICAL | FIFTH_ZERO } else { CANONICAL };
            (0..bytes).find(|&m| BYTE_CHECKS[block[byte0 + m] as usize] & need != need).map(|m| b * QK + first + m)
        })
    })
}
