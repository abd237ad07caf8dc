//! The formats: their stable ids, block specs and byte layouts (docs/design.md §1).
//!
//! This module is the one place that validates a (format, shape, buffer) triple; the
//! per-format files only know their bytes and may assume their inputs were checked here.

pub(crate) mod bitnet;
mod f32;
pub(crate) mod i2_s;
pub(crate) mod i8_absmax;
pub(crate) mod q2_0;
pub(crate) mod ternary;
pub(crate) mod tq1_0;
pub(crate) mod tq2_0;

pub use bitnet::import_trits as bitnet_import_trits;

use crate::error::{Error, Result};

/// A storage format. The discriminants are the stable format ids of the C ABI: never
/// reuse a retired value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Format {
    /// Plain f32 (ggml type 0).
    F32 = 1,
    /// ggml's TQ1_0: 256-element blocks of base-3 packed trits and an f16 scale (type 34).
    Tq1_0 = 2,
    /// ggml's TQ2_0: 256-element blocks of 2-bit trits and an f16 scale (type 35).
    Tq2_0 = 3,
    /// BitNet b1.58: 2-bit trits for the whole tensor, then one f32 scale.
    BitnetB158 = 4,
    /// Activations: int8 codes per row, then one f32 absmax scale per row.
    I8Absmax = 5,
    /// ggml's Q2_0: 64-element blocks of an f16 scale then 2-bit codes for -1, 0, +1, +2
    /// (type 42).
    Q2_0 = 6,
    /// bitnet.cpp's I2_S as its x86 build writes it (the official BitNet b1.58 2B4T GGUF):
    /// 2-bit codes in 128-element blocks, then one f32 scale and padding (type 36).
    I2S = 7,
    /// I2_S as bitnet.cpp's ARM build writes it: 64-element blocks (type 36 too).
    I2S64 = 8,
    /// I2_S as bitnet.cpp's x86 build writes it without ACT_PARALLEL: four rows
    /// interleaved in every byte (type 36 too).
    I2SR4 = 9,
    /// Activations: int8 codes row-major, then one f32 absmax scale per 256-element block of
    /// each row (ggml's Q8_K granularity), for TQ1_0/TQ2_0 weights.
    I8Block256 = 10,
    /// Activations: int8 codes row-major, then one f32 absmax scale per 32-element block of
    /// each row (ggml's Q8_0 granularity), for Q2_0 weights.
    I8Block32 = 11,
}

/// How a format groups elements and where its scales live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocking {
    /// Fixed-size blocks of `elems` elements in `bytes` bytes, laid end to end along rows.
    #[allow(missing_docs)] // the field names say it
    Fixed { elems: usize, bytes: usize },
    /// Codes for the whole row, then one scale per row after all codes (I8_ABSMAX).
    #[allow(missing_docs)]
    PerRow { code_bytes_per_elem: usize, scale_bytes: usize },
    /// Codes for the whole tensor, then one scale, then `pad_bytes` bytes nothing reads
    /// (BITNET_B1_58 has none, I2_S 28).
    #[allow(missing_docs)]
    WholeTensor { elems_per_byte: usize, scale_bytes: usize, pad_bytes: usize },
    /// One-byte codes for the whole tensor, then one scale per `elems`-element block of each
    /// row, in (row, block) order (I8_BLOCK256, I8_BLOCK32).
    #[allow(missing_docs)]
    CodesThenBlockScales { elems: usize, scale_bytes: usize },
}

/// Where a format keeps its scale(s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum ScalePlacement {
    /// No scale (F32).
    None = 0,
    /// An f16 at the end of every block.
    BlockEnd = 1,
    /// One f32 per row, after all the codes.
    RowsEnd = 2,
    /// One f32 for the whole tensor, after all the codes.
    TensorEnd = 3,
    /// An f16 at the start of every block (Q2_0).
    BlockStart = 4,
    /// One f32 per (row, block), after all the codes (I8_BLOCK256, I8_BLOCK32).
    BlocksEnd = 5,
}

/// Static facts about a format.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockSpec {
    /// How elements are grouped.
    pub blocking: Blocking,
    /// Storage bits per element, not counting per-row or per-tensor scales.
    pub bits_per_element: f64,
    /// Where the scales are.
    pub scale: ScalePlacement,
    /// The activation format the format's kernels consume, if it has kernels.
    pub activation_hint: Option<Format>,
    /// `cols` must be a multiple of this.
    pub cols_multiple: usize,
    /// `rows` must be a multiple of this (4 for I2_S_R4, 1 otherwise).
    pub rows_multiple: usize,
}

/// ggml's type ids for the formats that ggml knows.
/// Type 36 (I2_S) maps to `I2S`, the packing of bitnet.cpp's x86 build and of the official
/// BitNet b1.58 2B4T file; the file does not say which packing it holds.
const GGML_TYPES: [(u32, Format); 5] =
    [(0, Format::F32), (34, Format::Tq1_0), (35, Format::Tq2_0), (36, Format::I2S), (42, Format::Q2_0)];

impl std::fmt::Display for Format {
    /// The API's name ([`Format::name`]), as the C header spells it: `TQ2_0`, not `Tq2_0`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Format {
    /// Every format, in id order.
    pub const ALL: [Format; 11] = [
        Format::F32,
        Format::Tq1_0,
        Format::Tq2_0,
        Format::BitnetB158,
        Format::I8Absmax,
        Format::Q2_0,
        Format::I2S,
        Format::I2S64,
        Format::I2SR4,
        Format::I8Block256,
        Format::I8Block32,
    ];

    /// The format with this stable id.
    pub fn from_id(id: u32) -> Result<Format> {
        Format::ALL.into_iter().find(|f| f.id() == id).ok_or(Error::UnknownFormat(id))
    }

    /// The stable id (the C ABI's `TERN_FORMAT_*`).
    pub fn id(self) -> u32 {
        self as u32
    }

    /// The format for a ggml type id (F32 = 0, TQ1_0 = 34, TQ2_0 = 35, I2_S = 36 as `I2S`,
    /// Q2_0 = 42).
    pub fn from_ggml_type(ggml_type: u32) -> Option<Format> {
        GGML_TYPES.iter().find(|(t, _)| *t == ggml_type).map(|(_, f)| *f)
    }

    /// The ggml type id, for formats ggml (or bitnet.cpp's ggml) knows: every I2_S packing
    /// is type 36.
    pub fn ggml_type(self) -> Option<u32> {
        match self {
            Format::I2S64 | Format::I2SR4 => Some(36),
            _ => GGML_TYPES.iter().find(|(_, f)| *f == self).map(|(t, _)| *t),
        }
    }

    /// The format's name as tern prints it, e.g. `TQ2_0`.
    pub fn name(self) -> &'static str {
        match self {
            Format::F32 => "F32",
            Format::Tq1_0 => "TQ1_0",
            Format::Tq2_0 => "TQ2_0",
            Format::BitnetB158 => "BITNET_B1_58",
            Format::I8Absmax => "I8_ABSMAX",
            Format::Q2_0 => "Q2_0",
            Format::I2S => "I2_S",
            Format::I2S64 => "I2_S_64",
            Format::I2SR4 => "I2_S_R4",
            Format::I8Block256 => "I8_BLOCK256",
            Format::I8Block32 => "I8_BLOCK32",
        }
    }

    /// A weight format of 2-bit trits and scales (every format but F32 and the int8
    /// activation formats; Q2_0's code 3, +2, is computed like the others).
    pub fn is_ternary(self) -> bool {
        self != Format::F32 && !self.is_i8_activation()
    }

    /// An int8 activation format: I8_ABSMAX, I8_BLOCK256 or I8_BLOCK32.
    pub fn is_i8_activation(self) -> bool {
        matches!(self, Format::I8Absmax | Format::I8Block256 | Format::I8Block32)
    }

    /// For the int8 activation formats, the elements per scale when rows have `cols`
    /// elements: `cols` for I8_ABSMAX, 256 for I8_BLOCK256, 32 for I8_BLOCK32; `None` for
    /// the others.
    pub fn i8_scale_block(self, cols: usize) -> Option<usize> {
        match self {
            Format::I8Absmax => Some(cols),
            Format::I8Block256 => Some(i8_absmax::BLOCK256),
            Format::I8Block32 => Some(i8_absmax::BLOCK32),
            _ => None,
        }
    }

    /// The accurate activation format for this weight format: the granularity ggml's own
    /// kernels quantize activations at for it, with an f32 scale (I8_BLOCK256 = Q8_K for
    /// TQ1_0/TQ2_0, I8_BLOCK32 = Q8_0 for Q2_0); `None` where per-token I8_ABSMAX is the
    /// only choice (the single-scale BITNET_B1_58 and I2_S formats, trained with per-token
    /// absmax).
    pub fn accurate_activation(self) -> Option<Format> {
        match self {
            Format::Tq1_0 | Format::Tq2_0 => Some(Format::I8Block256),
            Format::Q2_0 => Some(Format::I8Block32),
            _ => None,
        }
    }

    /// The packing of an I2_S format (called only in the I2_S arms of a match).
    fn i2s_packing_of(self) -> i2_s::Packing {
        match self {
            Format::I2S => i2_s::Packing::Blocks128,
            Format::I2S64 => i2_s::Packing::Blocks64,
            Format::I2SR4 => i2_s::Packing::Rows4,
            _ => unreachable!("{self:?} is not I2_S"),
        }
    }

    /// Static facts about the layout.
    pub fn spec(self) -> BlockSpec {
        let i8_hint = Some(Format::I8Absmax);
        // A ternary weight format of fixed blocks with an f16 scale each.
        let blocks = |elems: usize, bytes: usize, scale| BlockSpec {
            blocking: Blocking::Fixed { elems, bytes },
            bits_per_element: (bytes * 8) as f64 / elems as f64,
            scale,
            activation_hint: i8_hint,
            cols_multiple: elems,
            rows_multiple: 1,
        };
        match self {
            Format::F32 => BlockSpec {
                blocking: Blocking::Fixed { elems: 1, bytes: 4 },
                bits_per_element: 32.0,
                scale: ScalePlacement::None,
                activation_hint: Some(Format::F32),
                cols_multiple: 1,
                rows_multiple: 1,
            },
            Format::Tq1_0 => blocks(ternary::QK, tq1_0::BLOCK_BYTES, ScalePlacement::BlockEnd),
            Format::Tq2_0 => blocks(ternary::QK, tq2_0::BLOCK_BYTES, ScalePlacement::BlockEnd),
            Format::BitnetB158 => BlockSpec {
                blocking: Blocking::WholeTensor { elems_per_byte: 4, scale_bytes: bitnet::SCALE_BYTES, pad_bytes: 0 },
                bits_per_element: 2.0,
                scale: ScalePlacement::TensorEnd,
                activation_hint: i8_hint,
                cols_multiple: 4,
                rows_multiple: 1,
            },
            Format::I8Absmax => BlockSpec {
                blocking: Blocking::PerRow { code_bytes_per_elem: 1, scale_bytes: 4 },
                bits_per_element: 8.0,
                scale: ScalePlacement::RowsEnd,
                activation_hint: None,
                cols_multiple: 1,
                rows_multiple: 1,
            },
            Format::Q2_0 => blocks(q2_0::QK, q2_0::BLOCK_BYTES, ScalePlacement::BlockStart),
            Format::I8Block256 | Format::I8Block32 => {
                let elems = self.i8_scale_block(0).expect("an int8 activation format");
                BlockSpec {
                    blocking: Blocking::CodesThenBlockScales { elems, scale_bytes: 4 },
                    bits_per_element: 8.0 + 32.0 / elems as f64,
                    scale: ScalePlacement::BlocksEnd,
                    activation_hint: None,
                    cols_multiple: elems,
                    rows_multiple: 1,
                }
            }
            Format::I2S | Format::I2S64 | Format::I2SR4 => BlockSpec {
                blocking: Blocking::WholeTensor {
                    elems_per_byte: 4,
                    scale_bytes: i2_s::SCALE_BYTES,
                    pad_bytes: i2_s::TAIL_BYTES - i2_s::SCALE_BYTES,
                },
                bits_per_element: 2.0,
                scale: ScalePlacement::TensorEnd,
                activation_hint: i8_hint,
                cols_multiple: if self == Format::I2S64 { 64 } else { 128 },
                rows_multiple: if self == Format::I2SR4 { 4 } else { 1 },
            },
        }
    }

    /// The format a kernel wants activations in, when this format is the weight.
    pub fn activation_hint(self) -> Option<Format> {
        self.spec().activation_hint
    }

    /// Checks that a `rows x cols` matrix fits this format.
    pub fn check_shape(self, rows: usize, cols: usize) -> Result<()> {
        let invalid = |why| Err(Error::InvalidShape { format: self, rows, cols, why });
        if rows == 0 || cols == 0 {
            return invalid("rows and cols must be non-zero");
        }
        let spec = self.spec();
        if !cols.is_multiple_of(spec.cols_multiple) {
            return invalid(match spec.cols_multiple {
                4 => "cols must be a multiple of 4 so that rows start on a byte",
                32 => "cols must be a multiple of the 32-element block",
                64 => "cols must be a multiple of the 64-element block",
                128 => "cols must be a multiple of the 128-element block",
                _ => "cols must be a multiple of the 256-element block",
            });
        }
        if !rows.is_multiple_of(spec.rows_multiple) {
            return invalid("rows must be a multiple of 4: I2_S_R4 interleaves rows in fours");
        }
        rows.checked_mul(cols).ok_or(Error::SizeOverflow { rows, cols })?;
        Ok(())
    }

    /// Bytes of a `rows x cols` matrix in this format, with shape and overflow checks.
    pub fn bytes_for(self, rows: usize, cols: usize) -> Result<usize> {
        self.check_shape(rows, cols)?;
        let overflow = Error::SizeOverflow { rows, cols };
        let n = rows * cols;
        let bytes = match self.spec().blocking {
            Blocking::Fixed { elems, bytes } => (n / elems).checked_mul(bytes),
            Blocking::PerRow { code_bytes_per_elem, scale_bytes } => n
                .checked_mul(code_bytes_per_elem)
                .and_then(|c| rows.checked_mul(scale_bytes).and_then(|s| c.checked_add(s))),
            Blocking::WholeTensor { elems_per_byte, scale_bytes, pad_bytes } => {
                n.div_ceil(elems_per_byte).checked_add(scale_bytes + pad_bytes)
            }
            Blocking::CodesThenBlockScales { elems, scale_bytes } => {
                (n / elems).checked_mul(scale_bytes).and_then(|s| n.checked_add(s))
            }
        };
        bytes.ok_or(overflow)
    }

    /// Encodes `src` (`rows x cols` f32, row-major) into `dst`, which must hold at least
    /// `bytes_for(rows, cols)` bytes. Returns the bytes written. Non-finite input, a shape
    /// that does not fit, or a short buffer are refused before anything is written.
    pub fn encode(self, src: &[f32], rows: usize, cols: usize, dst: &mut [u8]) -> Result<usize> {
        let need = self.bytes_for(rows, cols)?;
        check_len("src (floats)", src.len(), rows * cols)?;
        check_len_at_least("dst (bytes)", dst.len(), need)?;
        check_finite(src)?;
        let dst = &mut dst[..need];
        match self {
            Format::F32 => f32::encode(src, dst),
            Format::Tq1_0 => {
                ternary::check_block_scales(src, ternary::QK)?;
                tq1_0::encode(src, dst)
            }
            Format::Tq2_0 => {
                ternary::check_block_scales(src, ternary::QK)?;
                tq2_0::encode(src, dst)
            }
            Format::BitnetB158 => bitnet::encode(src, dst),
            Format::I8Absmax | Format::I8Block256 | Format::I8Block32 => {
                let block = self.i8_scale_block(cols).expect("an int8 activation format");
                i8_absmax::check_scales(src, block)?;
                i8_absmax::encode(src, block, dst)
            }
            Format::Q2_0 => {
                ternary::check_block_scales(src, q2_0::QK)?;
                q2_0::encode(src, dst)
            }
            Format::I2S | Format::I2S64 | Format::I2SR4 => i2_s::encode(self.i2s_packing_of(), src, cols, dst),
        }
        Ok(need)
    }

    /// Decodes `src`, which must be exactly `bytes_for(rows, cols)` bytes, into `dst`
    /// (at least `rows * cols` floats).
    pub fn decode(self, src: &[u8], rows: usize, cols: usize, dst: &mut [f32]) -> Result<()> {
        self.check_bytes(src, rows, cols)?;
        check_len_at_least("dst (floats)", dst.len(), rows * cols)?;
        let dst = &mut dst[..rows * cols];
        match self {
            Format::F32 => f32::decode(src, dst),
            Format::Tq1_0 => tq1_0::LAYOUT.decode(src, dst),
            Format::Tq2_0 => tq2_0::LAYOUT.decode(src, dst),
            Format::BitnetB158 => bitnet::decode(src, dst),
            Format::I8Absmax | Format::I8Block256 | Format::I8Block32 => {
                i8_absmax::decode(src, self.i8_scale_block(cols).expect("an int8 activation format"), dst)
            }
            Format::Q2_0 => q2_0::decode(src, dst),
            Format::I2S | Format::I2S64 | Format::I2SR4 => i2_s::decode(self.i2s_packing_of(), src, cols, dst),
        }
        Ok(())
    }

    /// Decodes one element.
    pub fn get(self, src: &[u8], rows: usize, cols: usize, row: usize, col: usize) -> Result<f32> {
        self.check_bytes(src, rows, cols)?;
        if row >= rows || col >= cols {
            return Err(Error::OutOfBounds { row, col, rows, cols });
        }
        let index = row * cols + col;
        Ok(match self {
            Format::F32 => f32::get(src, index),
            Format::Tq1_0 => tq1_0::get(src, index),
            Format::Tq2_0 => tq2_0::get(src, index),
            Format::BitnetB158 => bitnet::get(src, index),
            Format::I8Absmax | Format::I8Block256 | Format::I8Block32 => {
                i8_absmax::get(src, rows * cols, self.i8_scale_block(cols).expect("an int8 activation format"), index)
            }
            Format::Q2_0 => q2_0::get(src, index),
            Format::I2S | Format::I2S64 | Format::I2SR4 => i2_s::get(self.i2s_packing_of(), src, cols, index),
        })
    }

    /// Reports the first corrupt element: a code outside the format's alphabet (code 3 of
    /// TQ2_0, BITNET_B1_58 and I2_S; every Q2_0 code is valid), a non-canonical TQ1_0 byte,
    /// or a scale no encoder writes: not finite, or with the sign
    /// bit set (negative or -0.0). Kernels compute with
    /// any bytes; validation says whether they are what an encoder makes.
    pub fn validate(self, src: &[u8], rows: usize, cols: usize) -> Result<()> {
        self.check_bytes(src, rows, cols)?;
        let corrupt = match self {
            Format::F32 => {
                return match f32::first_non_finite(src) {
                    Some(index) => Err(Error::NonFinite { index }),
                    None => Ok(()),
                }
            }
            Format::Tq1_0 => tq1_0::first_corrupt(src),
            Format::Tq2_0 => tq2_0::first_corrupt(src),
            Format::BitnetB158 => bitnet::first_corrupt(src),
            Format::I8Absmax | Format::I8Block256 | Format::I8Block32 => i8_absmax::first_corrupt(
                src,
                rows * cols,
                self.i8_scale_block(cols).expect("an int8 activation format"),
            ),
            Format::Q2_0 => q2_0::first_corrupt(src),
            Format::I2S | Format::I2S64 | Format::I2SR4 => i2_s::first_corrupt(self.i2s_packing_of(), src, cols),
        };
        match corrupt {
            Some(index) => Err(Error::CorruptCode { index }),
            None => Ok(()),
        }
    }

    /// Rewrites a `rows x cols` ternary tensor in another format of its family, losslessly:
    /// the same trits and the same scales, so both decode to the same floats bit for bit.
    /// The families: the single-scale formats BITNET_B1_58, I2_S, I2_S_64 and I2_S_R4 (one
    /// f32 scale), and TQ1_0 and TQ2_0 (an f16 scale per 256-element block; TQ1_0 to TQ2_0
    /// trades 22 % more bytes for the kernels' faster unpack). Every valid tensor converts;
    /// refused, with nothing written: formats not of one family (`InvalidArgument`), a shape
    /// the target cannot hold (`InvalidShape`: I2_S needs cols a multiple of 128, I2_S_64 of
    /// 64, I2_S_R4 also rows a multiple of 4), `src` of the wrong length, `src` that does not
    /// validate (a code 3, a non-canonical TQ1_0 byte or a scale no encoder writes:
    /// `CorruptCode`), a short `dst`. Returns the bytes written (I2_S padding is zeros).
    pub fn transcode(self, src: &[u8], rows: usize, cols: usize, to: Format, dst: &mut [u8]) -> Result<usize> {
        let single_scale = |f| matches!(f, Format::BitnetB158 | Format::I2S | Format::I2S64 | Format::I2SR4);
        let block_scaled = |f| matches!(f, Format::Tq1_0 | Format::Tq2_0);
        if !(single_scale(self) && single_scale(to) || block_scaled(self) && block_scaled(to)) {
            return Err(Error::InvalidArgument(
                "transcode converts between BITNET_B1_58, I2_S, I2_S_64 and I2_S_R4, or between TQ1_0 and TQ2_0",
            ));
        }
        let need = to.bytes_for(rows, cols)?;
        self.validate(src, rows, cols)?;
        check_len_at_least("dst (bytes)", dst.len(), need)?;
        let dst = &mut dst[..need];
        let block_layout = |f| if f == Format::Tq1_0 { &tq1_0::LAYOUT } else { &tq2_0::LAYOUT };
        if block_scaled(self) {
            block_layout(self).transcode(src, block_layout(to), dst);
            return Ok(need);
        }
        let mut codes = vec![0u8; rows * cols];
        let scale = if self == Format::BitnetB158 {
            bitnet::read_codes(src, &mut codes);
            bitnet::scale(src)
        } else {
            i2_s::read_codes(self.i2s_packing_of(), src, cols, &mut codes);
            i2_s::scale(src)
        };
        if to == Format::BitnetB158 {
            bitnet::write_codes(&codes, scale, dst);
        } else {
            i2_s::write_codes(to.i2s_packing_of(), codes, cols, scale, dst);
        }
        Ok(need)
    }

    /// Checks that `src` is exactly the bytes of a `rows x cols` matrix.
    pub fn check_bytes(self, src: &[u8], rows: usize, cols: usize) -> Result<()> {
        check_len("encoded data (bytes)", src.len(), self.bytes_for(rows, cols)?)
    }
}

fn check_len(what: &'static str, got: usize, want: usize) -> Result<()> {
    if got == want {
        Ok(())
    } else {
        Err(Error::LengthMismatch { what, want, got })
    }
}

fn check_len_at_least(what: &'static str, got: usize, want: usize) -> Result<()> {
    if got >= want {
        Ok(())
    } else {
        Err(Error::LengthMismatch { what, want, got })
    }
}

/// Ternary weights as kernels see them: signed trits (code - 1; code 3 comes out as +2: valid
/// in Q2_0, corrupt elsewhere, where ggml decodes it so too) and one scale per kernel block.
impl Format {
    /// The block scale of a TQ1_0/TQ2_0/Q2_0 matrix whose blocks all carry the same scale (bit
    /// for bit), as a BitNet checkpoint converted to GGUF has; `None` otherwise and for the
    /// other formats. `src` must have been checked. Reads two bytes per block.
    pub fn uniform_block_scale(self, src: &[u8]) -> Option<f32> {
        // (block bytes, offset of the f16 scale in the block)
        let (block, at) = match self {
            Format::Tq1_0 => (tq1_0::BLOCK_BYTES, tq1_0::SCALE_AT),
            Format::Tq2_0 => (tq2_0::BLOCK_BYTES, tq2_0::SCALE_AT),
            Format::Q2_0 => (q2_0::BLOCK_BYTES, 0),
            _ => return None,
        };
        let mut scales = src.chunks_exact(block).map(|b| [b[at], b[at + 1]]);
        let first = scales.next()?;
        scales.all(|s| s == first).then(|| half::f16::from_le_bytes(first).to_f32())
    }

    /// Elements per scale block when `cols` is the row length: 256 for TQ1_0/TQ2_0, 64 for
    /// Q2_0, the whole row for BITNET_B1_58 and I2_S (their one scale is per tensor).
    pub fn kernel_block(self, cols: usize) -> usize {
        match self {
            Format::Tq1_0 | Format::Tq2_0 => ternary::QK,
            Format::Q2_0 => q2_0::QK,
            _ => cols,
        }
    }

    /// Decodes row `row` of a ternary `? x cols` matrix into trits and per-block scales
    /// (`cols / kernel_block(cols)` of them). `bytes` must have been checked.
    pub fn ternary_row(self, bytes: &[u8], cols: usize, row: usize, trits: &mut [i8], scales: &mut [f32]) {
        match self {
            Format::Tq1_0 => tq1_0::LAYOUT.row_trits(bytes, cols, row, trits, scales),
            Format::Tq2_0 => tq2_0::LAYOUT.row_trits(bytes, cols, row, trits, scales),
            Format::BitnetB158 => bitnet::row_trits(bytes, cols, row, trits, scales),
            Format::Q2_0 => q2_0::row_trits(bytes, cols, row, trits, scales),
            Format::I2S | Format::I2S64 | Format::I2SR4 => {
                i2_s::row_trits(self.i2s_packing_of(), bytes, cols, row, trits, scales)
            }
            _ => unreachable!("{self:?} is not ternary"),
        }
    }
}

/// The largest |x| of `xs` as bits (0 for an empty slice). For finite values the bits of
/// |x| order like |x|; inf and NaN come out at or above the bits of +inf. An integer max
/// with no early exit vectorizes, without the NaN handling a float max needs (inlined into
/// the activation requantizer's target-feature wrapper, which widens it).
#[inline(always)]
pub fn abs_max_bits(xs: &[f32]) -> u32 {
    xs.iter().fold(0u32, |m, x| m.max(x.to_bits() & 0x7FFF_FFFF))
}

/// Refuses a non-finite value (`Error::NonFinite` with the first one's index).
pub fn check_finite(src: &[f32]) -> Result<()> {
    // The search for the index runs only on refusal.
    if abs_max_bits(src) < f32::INFINITY.to_bits() {
        return Ok(());
    }
    let index = src.iter().position(|x| !x.is_finite()).expect("a non-finite value is there");
    Err(Error::NonFinite { index })
}
