//! BITNET_B1_58: the whole tensor is one block. Element i (row-major) is in byte `i / 4` at
//! bit shift `2 * (i % 4)`; then one f32 scale after all codes.

use super::ternary::{code_of_scaled, ZERO_CODE};
use crate::error::{Error, Result};

pub const SCALE_BYTES: usize = 4;

fn codes_len(n: usize) -> usize {
    n.div_ceil(4)
}

/// Encodes real weights as the BitNet b1.58 paper does: scale = mean |w| (summed in f64,
/// stored as f32), `t = clamp(round_half_away(w / scale), -1, 1)`. An all-zero tensor gets
/// scale 0 and all codes 1.
pub fn encode(src: &[f32], dst: &mut [u8]) {
    let sum: f64 = src.iter().map(|w| w.abs() as f64).sum();
    let scale = (sum / src.len() as f64) as f32;
    if scale == 0.0 {
        write(src, |_| ZERO_CODE, 0.0, dst);
    } else {
        write(src, |w| code_of_scaled(w / scale), scale, dst);
    }
}

/// Writes the bytes of an already-ternary tensor (trits in {-1, 0, 1}) with its scale, as
/// exported by HF BitNet or bitnet.cpp, without re-deriving the scale. `dst` must be
/// exactly the format's size for `trits.len()` elements.
pub fn import_trits(trits: &[i8], scale: f32, dst: &mut [u8]) -> Result<()> {
    if !scale.is_finite() {
        return Err(Error::NonFinite { index: 0 });
    }
    if let Some(index) = trits.iter().position(|t| !(-1..=1).contains(t)) {
        return Err(Error::CorruptCode { index });
    }
    if dst.len() != codes_len(trits.len()) + SCALE_BYTES {
        return Err(Error::LengthMismatch {
            what: "dst (bytes)",
            want: codes_len(trits.len()) + SCALE_BYTES,
            got: dst.len(),
        });
    }
    write(trits, |t| (t + 1) as u8, scale, dst);
    Ok(())
}

/// Writes codes (each in 0..=3, row-major) and the scale; `dst` must be
/// exactly the format's size for `codes.len()` elements.
pub fn write_codes(codes: &[u8], scale: f32, dst: &mut [u8]) {
    write(codes, |c| c, scale, dst);
}

/// The codes of all elements, row-major.
pub fn read_codes(src: &[u8], out: &mut [u8]) {
    for (i, c) in out.iter_mut().enumerate() {
        *c = code(src, i);
    }
}

/// Packs the code of each item four to a byte (the first in the low bits), then the
/// scale. A short last group leaves its high bits 0.
fn write<T: Copy>(items: &[T], code: impl Fn(T) -> u8, scale: f32, dst: &mut [u8]) {
    // Codes for a run of items first, then the packing: two simple loops vectorize, one
    // loop doing both does not.
    const RUN: usize = 64;
    let (packed, tail) = dst.split_at_mut(dst.len() - SCALE_BYTES);
    let mut codes = [0u8; RUN];
    for (bytes, items) in packed.chunks_mut(RUN / 4).zip(items.chunks(RUN)) {
        let codes = &mut codes[..items.len()];
        for (c, &t) in codes.iter_mut().zip(items) {
            *c = code(t);
        }
        for (b, q) in bytes.iter_mut().zip(codes.chunks(4)) {
            *b = q.iter().enumerate().fold(0, |b, (j, &c)| b | c << (2 * j));
        }
    }
    tail.copy_from_slice(&scale.to_le_bytes());
}

pub fn scale(src: &[u8]) -> f32 {
    let s = &src[src.len() - SCALE_BYTES..];
    f32::from_le_bytes([s[0], s[1], s[2], s[3]])
}

#[inline(always)]
pub fn code(src: &[u8], i: usize) -> u8 {
    (src[i / 4] >> (2 * (i % 4))) & 3
}

pub fn decode(src: &[u8], dst: &mut [f32]) {
    let s = scale(src);
    // Shapes keep cols % 4 == 0, so every byte fills exactly four outputs.
    for (y, &b) in dst.chunks_exact_mut(4).zip(src) {
        for (j, y) in y.iter_mut().enumerate() {
            *y = (((b >> (2 * j)) & 3) as f32 - 1.0) * s;
        }
    }
}

pub fn get(src: &[u8], index: usize) -> f32 {
    (code(src, index) as f32 - 1.0) * scale(src)
}

pub fn first_corrupt(src: &[u8]) -> Option<usize> {
    let n = (src.len() - SCALE_BYTES) * 4;
    if !super::ternary::scale_is_valid(scale(src)) {
        return Some(0);
    }
    (0..n).find(|&i| code(src, i) == 3)
}

pub fn row_trits(src: &[u8], cols: usize, row: usize, trits: &mut [i8], scales: &mut [f32]) {
    scales[0] = scale(src);
    let first = row * cols;
    for (j, t) in trits[..cols].iter_mut().enumerate() {
        *t = code(src, first + j) as i8 - 1;
    }
}
