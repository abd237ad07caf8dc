//! Helpers shared by the fuzz targets: a reader that turns the fuzzer's bytes into formats,
//! shapes, lengths and floats (biased toward the edges that matter: block multiples, zero,
//! overflowing sizes, non-finite values), and thin wrappers over the C API.
//!
//! Input layout (what `fuzz/gen_corpus.py` writes): each target reads a few header bytes
//! through [`Input`] and takes the rest as its payload. A reader past the end yields zeros,
//! so every byte string is a valid input.

use std::ptr;
use tern::ffi::*;

/// Buffers larger than this are not allocated (the shape is still passed, to reach the
/// size checks), so that one input cannot take the machine's memory.
pub const MAX_ELEMS: usize = 1 << 19;

/// Written into output buffers before a call, to prove a refused call wrote nothing.
pub const CANARY_F32: u32 = 0x7FA5_A5A5;
pub const CANARY_BYTE: u8 = 0xA5;

pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Input<'a> {
        Input { data }
    }

    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// True for one byte value in `n`.
    pub fn one_in(&mut self, n: u8) -> bool {
        self.u8().is_multiple_of(n)
    }

    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    /// A format id, valid (1..=9) or not (0, 10).
    pub fn format_id(&mut self) -> u32 {
        u32::from(self.u8() % 11)
    }

    /// A dimension: zero, small, a multiple of 4 or of 256 (the formats' blocks), any byte,
    /// or one large enough to overflow a size computation.
    pub fn dim(&mut self) -> usize {
        let (tag, val) = (self.u8(), usize::from(self.u8()));
        match tag % 8 {
            0 => 0,
            1 => 1 + val % 16,
            2 => 4 * (1 + val % 64),
            3 => 256 * (1 + val % 8),
            4 => val,
            5 => usize::MAX >> (val % 64),
            6 => (1 << 32) + val,
            _ => 1,
        }
    }

    /// A length near `len`: mostly exact, sometimes one short, one or seven over.
    pub fn near(&mut self, len: usize) -> usize {
        match self.u8() % 8 {
            5 => len + 1,
            6 => len.saturating_sub(1),
            7 => len + 7,
            _ => len,
        }
    }

    /// The rest of the input.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }
}

/// `len` bytes cycled from `payload` (zeros if it is empty).
pub fn cycle(payload: &[u8], len: usize) -> Vec<u8> {
    if payload.is_empty() {
        return vec![0; len];
    }
    payload.iter().copied().cycle().take(len).collect()
}

/// Floats whose edges matter to the encoders.
const PALETTE: [f32; 16] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    -1.5,
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    65504.0,
    65520.0,
    f32::MAX,
    f32::MIN_POSITIVE,
    1e-45,
    6e-8,
    3.0e38,
];

/// `n` floats from `payload`: either its raw little-endian words (any bit pattern,
/// NaN payloads included) or palette entries picked by its bytes, scaled by a power of two.
pub fn floats(payload: &[u8], n: usize, palette: bool) -> Vec<f32> {
    if palette {
        cycle(payload, n)
            .into_iter()
            .map(|b| PALETTE[usize::from(b % 16)] * f32::powi(2.0, i32::from(b >> 4) - 8))
            .collect()
    } else {
        cycle(payload, n * 4).chunks_exact(4).map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect()
    }
}

/// `rows * cols` when it and both dimensions fit in [`MAX_ELEMS`] (a zero dimension does
/// not make the other one small: buffers are sized by rows too).
pub fn small(rows: usize, cols: usize) -> Option<usize> {
    rows.checked_mul(cols).filter(|&n| n <= MAX_ELEMS && rows <= MAX_ELEMS && cols <= MAX_ELEMS)
}

/// An encoding handle from [`encoding`]: static, or NULL for an unknown format id, so the
/// helpers below can pass it to the C API safely.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enc(*const tern_encoding);

impl Enc {
    pub fn ptr(self) -> *const tern_encoding {
        self.0
    }
}

/// The static encoding of a format id, or NULL for an unknown one (asserting the status).
pub fn encoding(format: u32) -> Enc {
    let mut enc = ptr::null();
    // SAFETY: `enc` is a valid out-parameter.
    let status = unsafe { tern_encoding_get(format, &mut enc) };
    if tern::Format::ALL.iter().any(|f| f.id() == format) {
        assert_eq!(status, TERN_OK);
        assert!(!enc.is_null());
    } else {
        assert_eq!(status, TERN_ERR_UNKNOWN_FORMAT);
        assert!(enc.is_null(), "a refused call wrote its out-parameter");
    }
    Enc(enc)
}

/// `tern_encoding_bytes_for`, with the out-parameter checked to be untouched on error.
pub fn bytes_for(enc: Enc, rows: usize, cols: usize) -> Result<usize, tern_status> {
    let mut len = usize::MAX - 1;
    // SAFETY: `enc` is NULL or static (an `Enc`), `len` a valid out-parameter.
    let status = unsafe { tern_encoding_bytes_for(enc.0, rows, cols, &mut len) };
    not_panic(status);
    if status == TERN_OK {
        Ok(len)
    } else {
        assert_eq!(len, usize::MAX - 1, "a refused bytes_for wrote its out-parameter");
        Err(status)
    }
}

/// A status is an answer; `TERN_ERR_PANIC` is a bug in tern and fails the run.
pub fn not_panic(status: tern_status) {
    assert_ne!(status, TERN_ERR_PANIC, "tern panicked behind the guard");
    assert!(status <= TERN_ERR_PANIC, "unknown status {status}");
}

pub fn canary_f32(n: usize) -> Vec<f32> {
    vec![f32::from_bits(CANARY_F32); n]
}

pub fn all_canary(xs: &[f32]) -> bool {
    xs.iter().all(|x| x.to_bits() == CANARY_F32)
}

/// A value an out-pointer is set to before a call, to see whether a refused call wrote it.
pub fn sentinel<T>() -> *mut T {
    ptr::NonNull::<T>::dangling().as_ptr()
}

/// `tern_decode` into a fresh buffer with one canary float past the end, checking that
/// exactly `rows * cols` floats were written on success and none on error.
pub fn decode(enc: Enc, bytes: &[u8], rows: usize, cols: usize) -> Result<Vec<f32>, tern_status> {
    let n = small(rows, cols).expect("the caller checked the size");
    let mut dst = canary_f32(n + 1);
    // SAFETY: `bytes` and `dst` are live buffers of the lengths passed.
    let status = unsafe { tern_decode(enc.0, bytes.as_ptr().cast(), bytes.len(), rows, cols, dst.as_mut_ptr(), n) };
    not_panic(status);
    assert!(all_canary(&dst[n..]), "decode wrote past rows * cols");
    if status != TERN_OK {
        assert!(all_canary(&dst), "a refused decode wrote its output");
        return Err(status);
    }
    dst.truncate(n);
    Ok(dst)
}

/// `tern_encode_checked` into a buffer of `dst_len` bytes (plus a canary tail), checking
/// that exactly `bytes_for` bytes are written on success and none on error.
pub fn encode(enc: Enc, src: &[f32], rows: usize, cols: usize, dst_len: usize) -> Result<Vec<u8>, tern_status> {
    let mut dst = vec![CANARY_BYTE; dst_len + 8];
    // SAFETY: `src` and `dst` are live buffers at least as long as the lengths passed.
    let status =
        unsafe { tern_encode_checked(enc.0, src.as_ptr(), src.len(), rows, cols, dst.as_mut_ptr().cast(), dst_len) };
    not_panic(status);
    if status != TERN_OK {
        assert!(dst.iter().all(|&b| b == CANARY_BYTE), "a refused encode ({status}) wrote its output");
        return Err(status);
    }
    let len = bytes_for(enc, rows, cols).expect("a successful encode has a size");
    assert!(len <= dst_len);
    assert!(dst[len..].iter().all(|&b| b == CANARY_BYTE), "encode wrote past bytes_for");
    dst.truncate(len);
    Ok(dst)
}

/// `tern_transcode` into a buffer of `dst_len` bytes: its status and the buffer, after
/// checking that nothing past `dst_len` was written (and nothing at all if refused).
pub fn transcode(from: Enc, src: &[u8], rows: usize, cols: usize, to: Enc, dst_len: usize) -> (tern_status, Vec<u8>) {
    let mut dst = vec![CANARY_BYTE; dst_len + 8];
    // SAFETY: `src` and `dst` are live buffers at least as long as the lengths passed.
    let status = unsafe {
        tern_transcode(from.0, src.as_ptr().cast(), src.len(), rows, cols, to.0, dst.as_mut_ptr().cast(), dst_len)
    };
    not_panic(status);
    let untouched = if status == TERN_OK { &dst[dst_len..] } else { &dst[..] };
    assert!(untouched.iter().all(|&b| b == CANARY_BYTE), "transcode ({status}) wrote what it must not");
    dst.truncate(dst_len);
    (status, dst)
}

/// `tern_validate`.
pub fn validate(enc: Enc, bytes: &[u8], rows: usize, cols: usize) -> tern_status {
    // SAFETY: `bytes` is a live buffer of the length passed.
    let status = unsafe { tern_validate(enc.0, bytes.as_ptr().cast(), bytes.len(), rows, cols) };
    not_panic(status);
    status
}

/// Wraps `bytes` in a tensor handle (NULL on error, with the out-parameter checked).
pub fn wrap(enc: Enc, bytes: &[u8], rows: usize, cols: usize) -> Result<*mut tern_tensor, tern_status> {
    let mut t = sentinel();
    // SAFETY: `bytes` outlives the handle (the caller frees it first); `t` is writable.
    let status = unsafe { tern_tensor_wrap(enc.0, bytes.as_ptr().cast(), bytes.len(), rows, cols, &mut t) };
    not_panic(status);
    if status == TERN_OK {
        Ok(t)
    } else {
        assert_eq!(t, sentinel(), "a refused wrap wrote its out-parameter");
        Err(status)
    }
}
