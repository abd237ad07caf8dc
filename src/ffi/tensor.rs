//! Tensor handles: a format, a shape and bytes that are borrowed from the caller, owned by
//! the handle, or allocated in a scope (by the adapter).

use super::encoding::{encoding_format, tern_encoding};
use super::guard::*;
use super::status::tern_status;
use crate::error::Error;
use crate::format::Format;
use crate::tensor::Tensor;
use std::ffi::c_void;
use std::sync::Arc;

/// A `rows x cols` matrix in some format.
///
/// Ownership: created by `tern_tensor_wrap`, `tern_tensor_encode` (and the scope and
/// requantize functions); released with `tern_tensor_free`, exactly once. Lifetime: a
/// wrapped tensor borrows the caller's bytes, which must stay alive and unmodified until
/// the tensor is freed; an encoded tensor owns its bytes. Thread-safety: no function
/// mutates a tensor, so one tensor may be read from many threads at once; `tern_tensor_free`
/// must not race with any other use of the same tensor.
pub struct tern_tensor {
    tensor: Tensor<'static>,
    /// What keeps borrowed bytes alive when C does not (a GGUF file's mapping). Declared
    /// after `tensor`, so it is dropped after it.
    _bytes_owner: Option<Arc<dyn Send + Sync>>,
}

// The header promises that handles may be shared between threads.
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<tern_tensor>();
    shareable::<super::encoding::tern_encoding>();
};

impl tern_tensor {
    /// Moves a tensor into a new handle for C.
    pub fn into_raw(tensor: Tensor<'static>) -> *mut tern_tensor {
        Box::into_raw(Box::new(tern_tensor { tensor, _bytes_owner: None }))
    }

    /// Moves a tensor whose bytes `owner` keeps alive into a new handle for C: the handle
    /// holds `owner` until it is freed.
    pub fn into_raw_owned(tensor: Tensor<'static>, owner: Arc<dyn Send + Sync>) -> *mut tern_tensor {
        Box::into_raw(Box::new(tern_tensor { tensor, _bytes_owner: Some(owner) }))
    }

    pub fn tensor(&self) -> &Tensor<'static> {
        &self.tensor
    }
}

/// The tensor behind a caller's handle.
///
/// # Safety
/// `t` must be NULL or a live handle from this module, not freed during `'a`.
pub unsafe fn tensor_ref<'a>(t: *const tern_tensor, arg: &'static str) -> FfiResult<&'a Tensor<'static>> {
    // SAFETY: forwarded to the caller.
    Ok(&unsafe { try_ref(t, arg) }?.tensor)
}

/// Wraps encoded bytes (e.g. a GGUF tensor's data, as it is) without copying them.
///
/// `len` (bytes) must be exactly `tern_encoding_bytes_for(rows, cols)`. The bytes are
/// borrowed: they must stay alive and unmodified until the tensor is freed. The bytes are
/// not validated (see `tern_tensor_validate`). On success writes a new tensor to `*out`,
/// which the caller frees with `tern_tensor_free`. Thread-safe.
///
/// What cannot be checked: the orientation. A `rows x cols` and a `cols x rows` matrix have
/// the same byte size whenever both shapes fit the format (TQ2_0 6912x2560 and 2560x6912),
/// and nothing in the bytes tells them apart, so a transposed shape is accepted here. It
/// is refused at `tern_matmul` (TERN_ERR_SHAPE_MISMATCH, `tern_last_error` naming both
/// shapes) unless the weight is square. GGUF tensors: `tern_gguf_tensor_wrap` takes the
/// shape from the file (rows = `ne[1]`, cols = `ne[0]`) and cannot get it wrong.
#[no_mangle]
pub unsafe extern "C" fn tern_tensor_wrap(
    enc: *const tern_encoding,
    data: *const c_void,
    len: usize,
    rows: usize,
    cols: usize,
    out: *mut *mut tern_tensor,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a handle from tern_encoding_get, `len` bytes at
        // `data` that outlive the tensor (the documented contract behind 'static), and a
        // writable `out`.
        let (format, bytes, out) =
            unsafe { (encoding_format(enc)?, slice::<'static, u8>(data.cast(), len, "data")?, Out::new(out, "out")?) };
        let tensor = Tensor::wrap(format, bytes, rows, cols)?;
        out.write(tern_tensor::into_raw(tensor));
        Ok(())
    })
}

/// Encodes `src_len` floats (`rows * cols`, row-major) into a new tensor that owns its
/// bytes; `src` is not referenced after the call. Errors as for `tern_encode`, plus
/// `TERN_ERR_ALLOCATION_FAILED`. On success writes the tensor to `*out`; the caller frees
/// it with `tern_tensor_free`. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_tensor_encode(
    enc: *const tern_encoding,
    src: *const f32,
    src_len: usize,
    rows: usize,
    cols: usize,
    out: *mut *mut tern_tensor,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a handle from tern_encoding_get, src_len floats at
        // src and a writable `out`.
        let (format, src, out) = unsafe { (encoding_format(enc)?, slice(src, src_len, "src")?, Out::new(out, "out")?) };
        out.write(tern_tensor::into_raw(encode_owned(format, src, rows, cols)?));
        Ok(())
    })
}

/// Encodes into a fresh buffer, reporting a failed allocation instead of aborting (a C
/// caller can ask for any size).
fn encode_owned(format: Format, src: &[f32], rows: usize, cols: usize) -> FfiResult<Tensor<'static>> {
    let need = format.bytes_for(rows, cols)?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(need).map_err(|_| Error::AllocationFailed(need))?;
    bytes.resize(need, 0);
    format.encode(src, rows, cols, &mut bytes)?;
    Ok(Tensor::from_vec(format, bytes, rows, cols)?)
}

/// Decodes element (`row`, `col`) into `*out`. Errors: NULL pointers,
/// `TERN_ERR_OUT_OF_BOUNDS`, `TERN_ERR_STALE_TENSOR`. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_tensor_get(t: *const tern_tensor, row: usize, col: usize, out: *mut f32) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live tensor and a writable float.
        let (tensor, out) = unsafe { (tensor_ref(t, "t")?, Out::new(out, "out")?) };
        out.write(tensor.get(row, col)?);
        Ok(())
    })
}

/// Decodes the whole tensor into `dst` (row-major); `dst_len` (floats) must be at least
/// `rows * cols`, and exactly `rows * cols` floats are written. `dst` must not overlap the
/// tensor's bytes. On error nothing is written. Thread-safe for distinct `dst` buffers.
#[no_mangle]
pub unsafe extern "C" fn tern_tensor_decode(t: *const tern_tensor, dst: *mut f32, dst_len: usize) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live tensor.
        let tensor = unsafe { tensor_ref(t, "t") }?;
        let bytes = tensor.bytes()?;
        check_disjoint((bytes.as_ptr(), bytes.len(), "t"), (dst, dst_len, "dst"))?;
        // SAFETY: the caller passes dst_len writable floats, which do not overlap the
        // tensor's bytes.
        let dst = unsafe { slice_mut(dst, dst_len, "dst") }?;
        tensor.decode_into(dst)?;
        Ok(())
    })
}

/// Checks every code and scale of the tensor (see `tern_validate`). Reads only.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_tensor_validate(t: *const tern_tensor) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live tensor.
        unsafe { tensor_ref(t, "t") }?.validate()?;
        Ok(())
    })
}

/// The tensor's encoded bytes: writes a pointer to them to `*out_data` and their length
/// to `*out_len`. The bytes belong to the tensor (or to the caller, for a wrapped tensor,
/// or to the scope): they stay valid until the tensor is freed (or its scope reset) and
/// must not be modified. Errors: NULL pointers, `TERN_ERR_STALE_TENSOR`. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_tensor_data(
    t: *const tern_tensor,
    out_data: *mut *const c_void,
    out_len: *mut usize,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live tensor and two writable out-parameters.
        let (tensor, out_data, out_len) =
            unsafe { (tensor_ref(t, "t")?, Out::new(out_data, "out_data")?, Out::new(out_len, "out_len")?) };
        let bytes = tensor.bytes()?;
        out_data.write(bytes.as_ptr().cast());
        out_len.write(bytes.len());
        Ok(())
    })
}

/// The tensor's format id (`TERN_FORMAT_*`), or 0 if `t` is NULL. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_tensor_format(t: *const tern_tensor) -> u32 {
    // SAFETY: the caller passes NULL or a live tensor.
    guard_value(0, || unsafe { tensor_ref(t, "t") }.map_or(0, |t| t.format().id()))
}

/// The tensor's number of rows, or 0 if `t` is NULL (a tensor never has 0 rows).
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_tensor_rows(t: *const tern_tensor) -> usize {
    // SAFETY: the caller passes NULL or a live tensor.
    guard_value(0, || unsafe { tensor_ref(t, "t") }.map_or(0, |t| t.rows()))
}

/// The tensor's number of columns, or 0 if `t` is NULL (a tensor never has 0 columns).
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_tensor_cols(t: *const tern_tensor) -> usize {
    // SAFETY: the caller passes NULL or a live tensor.
    guard_value(0, || unsafe { tensor_ref(t, "t") }.map_or(0, |t| t.cols()))
}

/// Frees a tensor handle (and the bytes it owns; a wrapped tensor's bytes stay the
/// caller's, a scope tensor's bytes stay the scope's). NULL is a no-op. The handle must
/// not be used afterwards, nor freed twice, nor freed while another thread uses it.
#[no_mangle]
pub unsafe extern "C" fn tern_tensor_free(t: *mut tern_tensor) {
    guard_value((), || {
        if !t.is_null() {
            // SAFETY: a non-NULL t came from `tern_tensor::into_raw` (Box::into_raw) and,
            // per the contract, is freed once.
            drop(unsafe { Box::from_raw(t) });
        }
    })
}
