//! Encodings (one static handle per format) and the buffer-to-buffer operations: encode,
//! decode, validate and the BitNet ternary import.

use super::guard::*;
use super::status::tern_status;
use crate::error::Error;
use crate::format::{bitnet_import_trits, Blocking, Format, ScalePlacement};
use std::ffi::{c_char, c_void, CStr};

/// Format id of F32: plain little-endian f32, row-major.
pub const TERN_FORMAT_F32: u32 = 1u32;
/// Format id of TQ1_0 (ggml type 34): 256-element blocks of 54 bytes, f16 scale at the end.
pub const TERN_FORMAT_TQ1_0: u32 = 2u32;
/// Format id of TQ2_0 (ggml type 35): 256-element blocks of 66 bytes, f16 scale at the end.
pub const TERN_FORMAT_TQ2_0: u32 = 3u32;
/// Format id of BITNET_B1_58: 2-bit codes for the whole tensor, then one f32 scale.
pub const TERN_FORMAT_BITNET_B1_58: u32 = 4u32;
/// Format id of I8_ABSMAX: int8 codes row-major, then one f32 scale per row.
pub const TERN_FORMAT_I8_ABSMAX: u32 = 5u32;
/// Format id of Q2_0 (ggml type 42): 64-element blocks of 18 bytes, f16 scale FIRST; codes
/// 0..3 mean -1, 0, +1, +2.
pub const TERN_FORMAT_Q2_0: u32 = 6u32;
/// Format id of I2_S (GGUF type 36) as bitnet.cpp's x86 build packs it, the packing of the
/// official BitNet b1.58 2B4T file: 128-element blocks of 32 bytes, then one f32 scale and
/// 28 bytes of padding (`rows * cols / 4 + 32` bytes).
pub const TERN_FORMAT_I2_S: u32 = 7u32;
/// Format id of I2_S as bitnet.cpp's ARM build packs it: 64-element blocks of 16 bytes.
pub const TERN_FORMAT_I2_S_64: u32 = 8u32;
/// Format id of I2_S as bitnet.cpp's x86 build packs it without ACT_PARALLEL: four rows
/// interleaved in each byte (rows a multiple of 4).
pub const TERN_FORMAT_I2_S_R4: u32 = 9u32;
/// Format id of I8_BLOCK256 (since 0.3): int8 codes row-major, then one f32 absmax scale per
/// 256-element block of each row, in (row, block) order; the accurate activations of
/// TQ1_0/TQ2_0 (`TERN_DISPATCH_ACCURATE_ACTIVATIONS`).
pub const TERN_FORMAT_I8_BLOCK256: u32 = 10u32;
/// Format id of I8_BLOCK32 (since 0.3): int8 codes row-major, then one f32 absmax scale per
/// 32-element block of each row, in (row, block) order (ggml's Q8_0 granularity with an f32
/// scale); the accurate activations of Q2_0 (`TERN_DISPATCH_ACCURATE_ACTIVATIONS`).
pub const TERN_FORMAT_I8_BLOCK32: u32 = 11u32;

// The ids above are the core's stable ids (cbindgen needs literals to copy them).
const _: () = assert!(TERN_FORMAT_F32 == Format::F32 as u32);
const _: () = assert!(TERN_FORMAT_TQ1_0 == Format::Tq1_0 as u32);
const _: () = assert!(TERN_FORMAT_TQ2_0 == Format::Tq2_0 as u32);
const _: () = assert!(TERN_FORMAT_BITNET_B1_58 == Format::BitnetB158 as u32);
const _: () = assert!(TERN_FORMAT_I8_ABSMAX == Format::I8Absmax as u32);
const _: () = assert!(TERN_FORMAT_Q2_0 == Format::Q2_0 as u32);
const _: () = assert!(TERN_FORMAT_I2_S == Format::I2S as u32);
const _: () = assert!(TERN_FORMAT_I2_S_64 == Format::I2S64 as u32);
const _: () = assert!(TERN_FORMAT_I2_S_R4 == Format::I2SR4 as u32);
const _: () = assert!(TERN_FORMAT_I8_BLOCK256 == Format::I8Block256 as u32);
const _: () = assert!(TERN_FORMAT_I8_BLOCK32 == Format::I8Block32 as u32);

/// `tern_block_spec.blocking`: fixed-size blocks laid end to end along each row.
pub const TERN_BLOCKING_FIXED: u32 = 1u32;
/// `tern_block_spec.blocking`: each row is one block; its scale follows all the codes.
pub const TERN_BLOCKING_PER_ROW: u32 = 2u32;
/// `tern_block_spec.blocking`: the whole tensor is one block with one scale at the end.
pub const TERN_BLOCKING_WHOLE_TENSOR: u32 = 3u32;
/// `tern_block_spec.blocking` (since 0.3): one-byte codes for the whole tensor, then one
/// scale per `block_elems` elements of each row (I8_BLOCK256, I8_BLOCK32).
pub const TERN_BLOCKING_CODES_THEN_BLOCK_SCALES: u32 = 4u32;

/// `tern_block_spec.scale_placement`: the format has no scale.
pub const TERN_SCALE_NONE: u32 = 0u32;
/// `tern_block_spec.scale_placement`: an f16 at the end of every block.
pub const TERN_SCALE_BLOCK_END: u32 = 1u32;
/// `tern_block_spec.scale_placement`: one f32 per row, after all the codes.
pub const TERN_SCALE_ROWS_END: u32 = 2u32;
/// `tern_block_spec.scale_placement`: one f32 for the whole tensor, after all the codes.
pub const TERN_SCALE_TENSOR_END: u32 = 3u32;
/// `tern_block_spec.scale_placement`: an f16 at the start of every block (Q2_0).
pub const TERN_SCALE_BLOCK_START: u32 = 4u32;
/// `tern_block_spec.scale_placement` (since 0.3): one f32 per (row, block), after all the
/// codes (I8_BLOCK256, I8_BLOCK32).
pub const TERN_SCALE_BLOCKS_END: u32 = 5u32;

const _: () = assert!(TERN_SCALE_NONE == ScalePlacement::None as u32);
const _: () = assert!(TERN_SCALE_BLOCK_END == ScalePlacement::BlockEnd as u32);
const _: () = assert!(TERN_SCALE_ROWS_END == ScalePlacement::RowsEnd as u32);
const _: () = assert!(TERN_SCALE_TENSOR_END == ScalePlacement::TensorEnd as u32);
const _: () = assert!(TERN_SCALE_BLOCK_START == ScalePlacement::BlockStart as u32);
const _: () = assert!(TERN_SCALE_BLOCKS_END == ScalePlacement::BlocksEnd as u32);

/// An encoding: the behaviour of one storage format.
///
/// Ownership: static, owned by the library; never freed. Lifetime: the whole program.
/// Thread-safety: immutable, use from any thread.
pub struct tern_encoding {
    format: Format,
    name: &'static CStr,
}

static ENCODINGS: [tern_encoding; 11] = [
    tern_encoding { format: Format::F32, name: c"F32" },
    tern_encoding { format: Format::Tq1_0, name: c"TQ1_0" },
    tern_encoding { format: Format::Tq2_0, name: c"TQ2_0" },
    tern_encoding { format: Format::BitnetB158, name: c"BITNET_B1_58" },
    tern_encoding { format: Format::I8Absmax, name: c"I8_ABSMAX" },
    tern_encoding { format: Format::Q2_0, name: c"Q2_0" },
    tern_encoding { format: Format::I2S, name: c"I2_S" },
    tern_encoding { format: Format::I2S64, name: c"I2_S_64" },
    tern_encoding { format: Format::I2SR4, name: c"I2_S_R4" },
    tern_encoding { format: Format::I8Block256, name: c"I8_BLOCK256" },
    tern_encoding { format: Format::I8Block32, name: c"I8_BLOCK32" },
];

impl tern_encoding {
    /// The static handle of a format (what `tern_encoding_get` hands out).
    pub fn of(format: Format) -> &'static tern_encoding {
        let encoding = &ENCODINGS[format as usize - 1];
        debug_assert_eq!(encoding.format, format);
        encoding
    }

    pub fn format(&self) -> Format {
        self.format
    }
}

/// Static facts about a format's layout (see docs/design.md §1).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct tern_block_spec {
    /// `TERN_BLOCKING_FIXED`, `_PER_ROW`, `_WHOLE_TENSOR` or `_CODES_THEN_BLOCK_SCALES`.
    pub blocking: u32,
    /// `TERN_SCALE_NONE`, `_BLOCK_END`, `_ROWS_END`, `_TENSOR_END`, `_BLOCK_START` or
    /// `_BLOCKS_END`.
    pub scale_placement: u32,
    /// Elements per block for `TERN_BLOCKING_FIXED` and `_CODES_THEN_BLOCK_SCALES` (elements
    /// per scale); 0 when a block is a row or the whole tensor (its size then depends on the
    /// shape).
    pub block_elems: usize,
    /// Bytes per block (codes and scale) for `TERN_BLOCKING_FIXED`; 0 otherwise.
    pub block_bytes: usize,
    /// Bits of each element's code for the row, tensor and block-scale blockings (8 for
    /// I8_ABSMAX and I8_BLOCK256, 2 for BITNET_B1_58, packed little-end first, and for the
    /// I2_S formats, packed as docs/design.md §1 says); 0 for `TERN_BLOCKING_FIXED`, whose codes are laid out per
    /// format. I2_S has 28 bytes of padding after its scale: `tern_encoding_bytes_for`
    /// gives every format's exact size.
    pub code_bits: usize,
    /// Bytes of each scale (2 for an f16, 4 for an f32, 0 for none).
    pub scale_bytes: usize,
    /// `cols` must be a multiple of this.
    pub cols_multiple: usize,
    /// Storage bits per element, with block scales but without row or tensor scales.
    pub bits_per_element: f64,
    /// The format id of the activations this format's kernels consume, or 0 if none.
    pub activation_hint: u32,
}

impl tern_block_spec {
    pub fn of(format: Format) -> tern_block_spec {
        let spec = format.spec();
        let (blocking, block_elems, block_bytes, code_bits, scale_bytes) = match spec.blocking {
            Blocking::Fixed { elems, bytes } => {
                let scale = if spec.scale == ScalePlacement::None { 0 } else { 2 };
                (TERN_BLOCKING_FIXED, elems, bytes, 0, scale)
            }
            Blocking::PerRow { code_bytes_per_elem, scale_bytes } => {
                (TERN_BLOCKING_PER_ROW, 0, 0, 8 * code_bytes_per_elem, scale_bytes)
            }
            Blocking::WholeTensor { elems_per_byte, scale_bytes, .. } => {
                (TERN_BLOCKING_WHOLE_TENSOR, 0, 0, 8 / elems_per_byte, scale_bytes)
            }
            Blocking::CodesThenBlockScales { elems, scale_bytes } => {
                (TERN_BLOCKING_CODES_THEN_BLOCK_SCALES, elems, 0, 8, scale_bytes)
            }
        };
        tern_block_spec {
            blocking,
            scale_placement: spec.scale as u32,
            block_elems,
            block_bytes,
            code_bits,
            scale_bytes,
            cols_multiple: spec.cols_multiple,
            bits_per_element: spec.bits_per_element,
            activation_hint: spec.activation_hint.map_or(0, Format::id),
        }
    }
}

/// The encoding handle of a caller-supplied pointer.
///
/// # Safety
/// `enc` must be NULL or a pointer obtained from `tern_encoding_get`.
pub(crate) unsafe fn encoding_format(enc: *const tern_encoding) -> FfiResult<Format> {
    // SAFETY: forwarded to the caller.
    Ok(unsafe { try_ref(enc, "enc") }?.format)
}

/// Looks up the encoding of a format id (`TERN_FORMAT_*`).
///
/// On success writes a static handle to `*out` (never freed). Errors: `out` NULL
/// (`TERN_ERR_NULL_POINTER`), unknown id (`TERN_ERR_UNKNOWN_FORMAT`). Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_encoding_get(format: u32, out: *mut *const tern_encoding) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a writable pointer.
        let out = unsafe { Out::new(out, "out") }?;
        out.write(tern_encoding::of(Format::from_id(format)?));
        Ok(())
    })
}

/// Maps a ggml type id (F32 = 0, TQ1_0 = 34, TQ2_0 = 35, I2_S = 36, Q2_0 = 42) to a tern
/// format id. Type 36 gives `TERN_FORMAT_I2_S`, the packing of bitnet.cpp's x86 build and
/// of the official BitNet b1.58 2B4T file: a GGUF file does not record the packing, so a
/// caller holding a file made by bitnet.cpp on ARM names `TERN_FORMAT_I2_S_64` itself.
///
/// Errors: `out_format` NULL, or a ggml type tern has no format for
/// (`TERN_ERR_UNKNOWN_FORMAT`). Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_format_from_ggml_type(ggml_type: u32, out_format: *mut u32) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a writable pointer.
        let out = unsafe { Out::new(out_format, "out_format") }?;
        let format = Format::from_ggml_type(ggml_type).ok_or(Error::UnknownFormat(ggml_type))?;
        out.write(format.id());
        Ok(())
    })
}

/// The format id (`TERN_FORMAT_*`) of an encoding, or 0 if `enc` is NULL (no format has
/// id 0). Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_encoding_format(enc: *const tern_encoding) -> u32 {
    // SAFETY: the caller passes NULL or a handle from tern_encoding_get.
    guard_value(0, || unsafe { encoding_format(enc) }.map_or(0, Format::id))
}

/// The name of an encoding ("F32", "TQ1_0", "TQ2_0", "BITNET_B1_58", "I8_ABSMAX", "Q2_0",
/// "I2_S", "I2_S_64", "I2_S_R4") as a
/// static NUL-terminated string, or "" if `enc` is NULL. Never NULL; must not be freed.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_encoding_name(enc: *const tern_encoding) -> *const c_char {
    let empty = c"".as_ptr();
    // SAFETY: the caller passes NULL or a handle from tern_encoding_get.
    guard_value(empty, || unsafe { try_ref(enc, "enc") }.map_or(empty, |e| e.name.as_ptr()))
}

/// Describes the layout of an encoding's format.
///
/// Errors: `enc` or `out` NULL. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_encoding_block_spec(enc: *const tern_encoding, out: *mut tern_block_spec) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a handle from tern_encoding_get, and NULL or
        // a writable tern_block_spec.
        let (format, out) = unsafe { (encoding_format(enc)?, Out::new(out, "out")?) };
        out.write(tern_block_spec::of(format));
        Ok(())
    })
}

/// The exact number of bytes a `rows x cols` matrix takes in this encoding.
///
/// Errors: `enc` or `out` NULL, a shape the format cannot hold (`TERN_ERR_INVALID_SHAPE`:
/// zero rows or cols, cols not a multiple of the block), `TERN_ERR_SIZE_OVERFLOW`.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_encoding_bytes_for(
    enc: *const tern_encoding,
    rows: usize,
    cols: usize,
    out: *mut usize,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a handle from tern_encoding_get, and NULL or
        // a writable size_t.
        let (format, out) = unsafe { (encoding_format(enc)?, Out::new(out, "out")?) };
        out.write(format.bytes_for(rows, cols)?);
        Ok(())
    })
}

/// Encodes `src` (`rows x cols` floats, row-major) into `dst_len` bytes at `dst`.
///
/// # Safety
/// `dst` must be NULL or valid for writing `dst_len` bytes.
unsafe fn encode(format: Format, src: &[f32], rows: usize, cols: usize, dst: *mut c_void, dst_len: usize) -> FfiResult {
    check_disjoint((src.as_ptr(), src.len(), "src"), (dst, dst_len, "dst"))?;
    // SAFETY: forwarded to the caller; dst does not overlap src.
    let dst = unsafe { slice_mut(dst.cast::<u8>(), dst_len, "dst") }?;
    format.encode(src, rows, cols, dst)?;
    Ok(())
}

/// Encodes a `rows x cols` matrix of floats (row-major) into `dst`.
///
/// `src` must point to `rows * cols` floats: the stable signature has no `src_len`
/// (`tern_encode_checked` takes one). `dst_len` (bytes) must be at least
/// `tern_encoding_bytes_for(rows, cols)`; exactly that many bytes are written. The
/// buffers must not overlap. On any error nothing is written: a NaN or infinity in `src`
/// (`TERN_ERR_NON_FINITE`), a TQ block whose max overflows f16
/// (`TERN_ERR_SCALE_OVERFLOW`), a bad shape, a short `dst` (`TERN_ERR_LENGTH_MISMATCH`),
/// NULL pointers. Thread-safe for distinct `dst` buffers.
#[no_mangle]
pub unsafe extern "C" fn tern_encode(
    enc: *const tern_encoding,
    src: *const f32,
    rows: usize,
    cols: usize,
    dst: *mut c_void,
    dst_len: usize,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a handle from tern_encoding_get.
        let format = unsafe { encoding_format(enc) }?;
        let n = format.bytes_for(rows, cols).map(|_| rows * cols)?;
        // SAFETY: the caller guarantees src holds rows * cols floats and dst dst_len bytes.
        unsafe { encode(format, slice(src, n, "src")?, rows, cols, dst, dst_len) }
    })
}

/// `tern_encode` with the length of `src` (in floats), which must equal `rows * cols`
/// (`TERN_ERR_LENGTH_MISMATCH` otherwise). Prefer it when the length is at hand.
#[no_mangle]
pub unsafe extern "C" fn tern_encode_checked(
    enc: *const tern_encoding,
    src: *const f32,
    src_len: usize,
    rows: usize,
    cols: usize,
    dst: *mut c_void,
    dst_len: usize,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a handle from tern_encoding_get, src_len
        // floats at src and dst_len bytes at dst.
        unsafe { encode(encoding_format(enc)?, slice(src, src_len, "src")?, rows, cols, dst, dst_len) }
    })
}

/// Decodes a `rows x cols` matrix into floats (row-major).
///
/// `src_len` (bytes) must be exactly `tern_encoding_bytes_for(rows, cols)`; `dst_len`
/// (floats) at least `rows * cols`, of which exactly `rows * cols` are written. The
/// buffers must not overlap. Decoding does not validate: a corrupt code 3 (TQ2_0,
/// BITNET_B1_58, I2_S) decodes as +2 (as ggml's decoder and bitnet.cpp's kernels do); call `tern_validate` to find corrupt bytes. On error nothing is
/// written. Thread-safe for distinct `dst` buffers.
#[no_mangle]
pub unsafe extern "C" fn tern_decode(
    enc: *const tern_encoding,
    src: *const c_void,
    src_len: usize,
    rows: usize,
    cols: usize,
    dst: *mut f32,
    dst_len: usize,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a handle from tern_encoding_get, src_len
        // bytes at src and dst_len floats at dst.
        let (format, src) = unsafe { (encoding_format(enc)?, slice(src.cast::<u8>(), src_len, "src")?) };
        check_disjoint((src.as_ptr(), src.len(), "src"), (dst, dst_len, "dst"))?;
        // SAFETY: the caller passes dst_len floats at dst, which do not overlap src.
        let dst = unsafe { slice_mut(dst, dst_len, "dst") }?;
        format.decode(src, rows, cols, dst)?;
        Ok(())
    })
}

/// Checks encoded bytes: `src_len` must be exactly the size of a `rows x cols` matrix,
/// and every code and scale must be valid. Returns `TERN_OK`, `TERN_ERR_CORRUPT_CODE` for
/// an invalid code or scale (a code 3 of TQ2_0, BITNET_B1_58 or I2_S, where Q2_0's code 3
/// is +2 and valid; a non-canonical TQ1_0 byte, a scale that is
/// not finite or has its sign bit set: negative or -0.0, which no encoder writes), `TERN_ERR_NON_FINITE` for an F32 NaN or infinity, or a shape, length
/// or NULL error. Reads only. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_validate(
    enc: *const tern_encoding,
    src: *const c_void,
    src_len: usize,
    rows: usize,
    cols: usize,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a handle from tern_encoding_get and src_len
        // bytes at src.
        let (format, src) = unsafe { (encoding_format(enc)?, slice(src.cast::<u8>(), src_len, "src")?) };
        format.validate(src, rows, cols)?;
        Ok(())
    })
}

/// Writes BITNET_B1_58 bytes for a matrix that is already ternary (HF BitNet packed
/// weights, bitnet.cpp I2_S) without re-deriving the scale.
///
/// `trits` holds `rows * cols` values in {-1, 0, +1}, row-major (`trits_len` must equal
/// `rows * cols`); `scale` is the tensor's scale (finite). `dst_len` (bytes) must be at
/// least the format's size, `ceil(rows * cols / 4) + 4`, and exactly that many bytes are
/// written. `cols` must be a multiple of 4. Errors, with nothing written: a trit outside
/// {-1, 0, 1} (`TERN_ERR_CORRUPT_CODE`), a non-finite scale (`TERN_ERR_NON_FINITE`), bad
/// shape or lengths, NULL pointers. Thread-safe for distinct `dst` buffers.
#[no_mangle]
pub unsafe extern "C" fn tern_bitnet_import(
    trits: *const i8,
    trits_len: usize,
    scale: f32,
    rows: usize,
    cols: usize,
    dst: *mut c_void,
    dst_len: usize,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes trits_len trits at trits.
        let trits = unsafe { slice(trits, trits_len, "trits") }?;
        check_disjoint((trits.as_ptr(), trits.len(), "trits"), (dst, dst_len, "dst"))?;
        // SAFETY: the caller passes dst_len bytes at dst, which do not overlap trits.
        let dst = unsafe { slice_mut(dst.cast::<u8>(), dst_len, "dst") }?;
        let need = Format::BitnetB158.bytes_for(rows, cols)?;
        if trits.len() != rows * cols {
            Err(Error::LengthMismatch { what: "trits_len", want: rows * cols, got: trits.len() })?;
        }
        if dst.len() < need {
            Err(Error::LengthMismatch { what: "dst_len", want: need, got: dst.len() })?;
        }
        bitnet_import_trits(trits, scale, &mut dst[..need])?;
        Ok(())
    })
}

/// Rewrites a `rows x cols` ternary tensor in another encoding of its family without loss:
/// the same trits and the same scales, so both decode to the same floats. The families are
/// the single-scale encodings (BITNET_B1_58, I2_S, I2_S_64, I2_S_R4) and the block-scaled
/// TQ1_0 and TQ2_0. This is how a BitNet tensor becomes an I2_S tensor bitnet.cpp reads,
/// how an I2_S tensor of one packing becomes another, and how a TQ1_0 weight becomes TQ2_0
/// (22 % more bytes, unpacked faster by the kernels: see docs/performance.md).
///
/// `src_len` must be exactly the size of the tensor in `from`; `dst_len` at least its size
/// in `to`, and exactly that many bytes are written (I2_S padding as zeros). Errors, with
/// nothing written: encodings not of one family (`TERN_ERR_INVALID_ARGUMENT`), a shape
/// `to` cannot hold (`TERN_ERR_INVALID_SHAPE`: I2_S needs cols a multiple of 128, I2_S_64
/// of 64, I2_S_R4 also rows a multiple of 4), `src` that does not validate
/// (`TERN_ERR_CORRUPT_CODE`: a code 3, a non-canonical TQ1_0 byte, a negative or
/// non-finite scale), lengths
/// (`TERN_ERR_LENGTH_MISMATCH`), overlapping buffers, NULL pointers. Thread-safe for
/// distinct `dst` buffers.
///
/// # Safety
/// `from` and `to` must be NULL or handles from `tern_encoding_get`; `src` must be NULL or
/// valid for reading `src_len` bytes, and `dst` NULL or valid for writing `dst_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tern_transcode(
    from: *const tern_encoding,
    src: *const c_void,
    src_len: usize,
    rows: usize,
    cols: usize,
    to: *const tern_encoding,
    dst: *mut c_void,
    dst_len: usize,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes NULL or handles from tern_encoding_get and src_len
        // bytes at src.
        let (from, to, src) = unsafe {
            (try_ref(from, "from")?.format, try_ref(to, "to")?.format, slice(src.cast::<u8>(), src_len, "src")?)
        };
        check_disjoint((src.as_ptr(), src.len(), "src"), (dst, dst_len, "dst"))?;
        // SAFETY: the caller passes dst_len bytes at dst, which do not overlap src.
        let dst = unsafe { slice_mut(dst.cast::<u8>(), dst_len, "dst") }?;
        from.transcode(src, rows, cols, to, dst)?;
        Ok(())
    })
}
