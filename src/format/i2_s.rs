//! I2_S (bitnet.cpp, GGUF type 36): 2-bit codes for the whole tensor in one of three
//! packings, then one f32 scale at byte `n / 4`, then 28 bytes nothing reads (the tensor is
//! `n / 4 + 32` bytes). Codes are `t + 1` as in BITNET_B1_58; within a byte the first
//! element of a group sits in the HIGH bits (shift 6), unlike BITNET_B1_58 and ggml.
//!
//! - `Blocks128` (x86 bitnet.cpp, the official BitNet b1.58 2B4T file): per 128 elements 32
//!   bytes; element j of a block sits in byte `j % 32` at shift `6 - 2 * (j / 32)`.
//! - `Blocks64` (ARM bitnet.cpp): per 64 elements 16 bytes; byte `j % 16`, shift
//!   `6 - 2 * (j / 16)`.
//! - `Rows4` (x86 bitnet.cpp built without ACT_PARALLEL): rows in groups of four; the byte
//!   at `(r / 4) * cols + c` holds column c of rows `4 (r / 4) .. + 4`, row `r % 4` at shift
//!   `6 - 2 * (r % 4)`.

use super::ternary::ZERO_CODE;

pub const SCALE_BYTES: usize = 4;
/// Bytes after the codes: the scale, then padding (bitnet.cpp leaves it unwritten; tern
/// writes zeros and never reads it).
pub const TAIL_BYTES: usize = 32;

/// bitnet.cpp's dead zone: |x| below this is a zero trit.
const ZERO_BELOW: f64 = 1e-6;

/// How an I2_S tensor orders its codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packing {
    Blocks128,
    Blocks64,
    Rows4,
}

impl Packing {
    /// Byte offset and bit shift of element `i` (row-major) of a `? x cols` tensor.
    #[inline(always)]
    pub fn position(self, cols: usize, i: usize) -> (usize, u32) {
        let blocked = |block: usize| {
            let group = block / 4;
            let j = i % block;
            ((i / block) * group + j % group, 6 - 2 * (j / group) as u32)
        };
        match self {
            Packing::Blocks128 => blocked(128),
            Packing::Blocks64 => blocked(64),
            Packing::Rows4 => {
                let (r, c) = (i / cols, i % cols);
                ((r / 4) * cols + c, 6 - 2 * (r % 4) as u32)
            }
        }
    }
}

fn codes_len(src: &[u8]) -> usize {
    src.len() - TAIL_BYTES
}

pub fn scale(src: &[u8]) -> f32 {
    let s = &src[codes_len(src)..][..SCALE_BYTES];
    f32::from_le_bytes([s[0], s[1], s[2], s[3]])
}

#[inline(always)]
pub fn code(p: Packing, src: &[u8], cols: usize, i: usize) -> u8 {
    let (byte, shift) = p.position(cols, i);
    (src[byte] >> shift) & 3
}

/// bitnet.cpp's quantizer: scale = max |x| over the whole tensor (exact in f32); an element
/// with |x| < 1e-6 is 0, any other is its sign. (The quantizer expects weights that are
/// already ternary, `{-s, 0, +s}`; it does not round by the scale.)
pub fn encode(p: Packing, src: &[f32], cols: usize, dst: &mut [u8]) {
    let scale = super::ternary::absmax(src);
    let code = |x: f32| {
        if ((x.abs()) as f64) < ZERO_BELOW {
            ZERO_CODE
        } else {
            ZERO_CODE + 1 - 2 * (x < 0.0) as u8
        }
    };
    write_codes(p, src.iter().map(|&x| code(x)), cols, scale, dst);
}

/// Writes `codes` (row-major, each in 0..=3) in packing `p`, the scale, and a zero pad.
/// `dst` must be exactly the tensor's size.
pub fn write_codes(p: Packing, codes: impl IntoIterator<Item = u8>, cols: usize, scale: f32, dst: &mut [u8]) {
    let (packed, tail) = dst.split_at_mut(dst.len() - TAIL_BYTES);
    packed.fill(0);
    for (i, c) in codes.into_iter().enumerate() {
        let (byte, shift) = p.position(cols, i);
        packed[byte] |= c << shift;
    }
    tail.fill(0);
    tail[..SCALE_BYTES].copy_from_slice(&scale.to_le_bytes());
}

/// The codes of all `n` elements, row-major.
pub fn read_codes(p: Packing, src: &[u8], cols: usize, out: &mut [u8]) {
    for (i, c) in out.iter_mut().enumerate() {
        *c = code(p, src, cols, i);
    }
}

/// Code 3 decodes as +2, as bitnet.cpp's matmul kernels compute it (they multiply the raw
/// code and subtract the activation sum); validation reports it as corrupt.
pub fn decode(p: Packing, src: &[u8], cols: usize, dst: &mut [f32]) {
    let s = scale(src);
    for (i, y) in dst.iter_mut().enumerate() {
        *y = (code(p, src, cols, i) as f32 - 1.0) * s;
    }
}

pub fn get(p: Packing, src: &[u8], cols: usize, index: usize) -> f32 {
    (code(p, src, cols, index) as f32 - 1.0) * scale(src)
}

/// A scale no encoder writes (see `ternary::scale_is_valid`) marks element 0; otherwise the
/// first element whose code is 3. The padding after the scale is not checked.
pub fn first_corrupt(p: Packing, src: &[u8], cols: usize) -> Option<usize> {
    if !super::ternary::scale_is_valid(scale(src)) {
        return Some(0);
    }
    (0..codes_len(src) * 4).find(|&i| code(p, src, cols, i) == 3)
}

pub fn row_trits(p: Packing, src: &[u8], cols: usize, row: usize, trits: &mut [i8], scales: &mut [f32]) {
    scales[0] = scale(src);
    for (j, t) in trits[..cols].iter_mut().enumerate() {
        *t = code(p, src, cols, row * cols + j) as i8 - 1;
    }
}
