//! Tensors: a format, a shape and bytes that are borrowed, owned, or allocated in a scope.
//! Every accessor checks the bytes are still valid (a scope tensor goes stale on reset).

use crate::error::Result;
use crate::format::Format;
use crate::scope::{Scope, ScopedBytes};
use std::sync::OnceLock;

enum Bytes<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
    Scoped(ScopedBytes),
}

/// A `rows x cols` matrix in some format. Cheap to read from many threads at once.
pub struct Tensor<'a> {
    format: Format,
    rows: usize,
    cols: usize,
    bytes: Bytes<'a>,
    /// [`Format::uniform_block_scale`] of the bytes, found on first use and remembered
    /// (the bytes of a live tensor never change).
    uniform: OnceLock<Option<f32>>,
}

impl std::fmt::Debug for Tensor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("format", &self.format)
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .finish()
    }
}

impl<'a> Tensor<'a> {
    /// Wraps bytes that hold a `rows x cols` matrix, e.g. a GGUF tensor's data as it is.
    /// `bytes.len()` must be exactly `format.bytes_for(rows, cols)`.
    pub fn wrap(format: Format, bytes: &'a [u8], rows: usize, cols: usize) -> Result<Tensor<'a>> {
        format.check_bytes(bytes, rows, cols)?;
        Ok(Tensor { format, rows, cols, bytes: Bytes::Borrowed(bytes), uniform: OnceLock::new() })
    }

    /// An F32 tensor over `values` (`rows x cols`, row-major), without a copy: the usual way
    /// to hand activations or an F32 weight to the dispatcher.
    pub fn from_f32(values: &'a [f32], rows: usize, cols: usize) -> Result<Tensor<'a>> {
        // SAFETY: an f32 has no padding and every byte of it is initialized; the byte view
        // covers exactly the same memory and borrows it for the same lifetime.
        let bytes = unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values)) };
        Tensor::wrap(Format::F32, bytes, rows, cols)
    }

    /// Takes ownership of encoded bytes.
    pub fn from_vec(format: Format, bytes: Vec<u8>, rows: usize, cols: usize) -> Result<Tensor<'static>> {
        format.check_bytes(&bytes, rows, cols)?;
        Ok(Tensor { format, rows, cols, bytes: Bytes::Owned(bytes), uniform: OnceLock::new() })
    }

    /// Encodes `src` (`rows x cols` f32) into a tensor that owns its bytes.
    pub fn encode(format: Format, src: &[f32], rows: usize, cols: usize) -> Result<Tensor<'static>> {
        let mut bytes = vec![0u8; format.bytes_for(rows, cols)?];
        format.encode(src, rows, cols, &mut bytes)?;
        Ok(Tensor { format, rows, cols, bytes: Bytes::Owned(bytes), uniform: OnceLock::new() })
    }

    /// The same trits and scales in `to`, a format of the same family, as a tensor that owns
    /// its bytes ([`Format::transcode`]: BITNET_B1_58 and the I2_S packings, or TQ1_0 and
    /// TQ2_0); refused as that is.
    pub fn transcode(&self, to: Format) -> Result<Tensor<'static>> {
        let mut bytes = vec![0u8; to.bytes_for(self.rows, self.cols)?];
        self.format.transcode(self.bytes()?, self.rows, self.cols, to, &mut bytes)?;
        Tensor::from_vec(to, bytes, self.rows, self.cols)
    }

    /// Allocates the bytes of a `rows x cols` tensor in `scope` and lets `fill` write them.
    /// On error nothing stays allocated.
    pub(crate) fn in_scope(
        scope: &mut Scope,
        format: Format,
        rows: usize,
        cols: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<Tensor<'static>> {
        let len = format.bytes_for(rows, cols)?;
        let bytes = scope.alloc_with(len, fill)?;
        Ok(Tensor { format, rows, cols, bytes: Bytes::Scoped(bytes), uniform: OnceLock::new() })
    }

    /// The tensor's format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Rows (a weight's output features; an activation's tokens).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns (elements per row).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The encoded bytes, or [`crate::Error::StaleTensor`] if the tensor's scope was reset.
    pub fn bytes(&self) -> Result<&[u8]> {
        match &self.bytes {
            Bytes::Borrowed(b) => Ok(b),
            Bytes::Owned(b) => Ok(b),
            Bytes::Scoped(b) => b.get(),
        }
    }

    /// One element, decoded (a packed tensor never hands out a raw code).
    pub fn get(&self, row: usize, col: usize) -> Result<f32> {
        self.format.get(self.bytes()?, self.rows, self.cols, row, col)
    }

    /// Decodes the whole tensor into `dst` (at least `rows * cols` floats).
    pub fn decode_into(&self, dst: &mut [f32]) -> Result<()> {
        self.format.decode(self.bytes()?, self.rows, self.cols, dst)
    }

    /// Decodes the whole tensor into a new `rows * cols` vector.
    pub fn decode(&self) -> Result<Vec<f32>> {
        let mut out = vec![0.0; self.rows * self.cols];
        self.decode_into(&mut out)?;
        Ok(out)
    }

    /// Reports the first corrupt code or scale ([`crate::Error::CorruptCode`]).
    pub fn validate(&self) -> Result<()> {
        self.format.validate(self.bytes()?, self.rows, self.cols)?;
        self.uniform_block_scale().map(|_| ())
    }

    /// The one block scale of a TQ1_0/TQ2_0 tensor whose block scales are all equal (what
    /// converting a BitNet checkpoint gives), `None` for any other tensor. Found once, on
    /// the first call (a matmul or [`Tensor::validate`]), and remembered; the GEMM then
    /// keeps int32 along the whole row and scales once, which equals the per-block result
    /// up to float rounding: at most `2 * blocks * eps` of `sum_blocks |d * dot|` times the
    /// activation scale.
    pub fn uniform_block_scale(&self) -> Result<Option<f32>> {
        let bytes = self.bytes()?;
        Ok(*self.uniform.get_or_init(|| self.format.uniform_block_scale(bytes)))
    }
}
