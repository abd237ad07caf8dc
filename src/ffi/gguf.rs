//! GGUF files from C: the checked reader of `crate::gguf` over a memory-mapped file or the
//! caller's bytes, and tensors wrapped over the mapped bytes without a copy.

use super::guard::*;
use super::status::*;
use super::tensor::tern_tensor;
use crate::error::Error;
use crate::format::Format;
use crate::gguf::{GgufFile, Value, ValueType, MAX_DIMS};
use crate::tensor::Tensor;
use std::ffi::{c_char, c_void, CStr, CString};

/// One tensor's header entry, owned (the names are copied once, NUL-terminated for C).
struct Entry {
    name: CString,
    ggml_type: u32,
    format: Option<Format>,
    n_dims: u32,
    ne: [u64; MAX_DIMS],
    /// Absolute, in the file.
    offset: u64,
    /// `None` for a type the reader does not know.
    bytes: Option<usize>,
}

/// A parsed GGUF file: its metadata and tensor table over a mapping of the file (or the
/// caller's bytes).
///
/// Ownership: created by `tern_gguf_open` or `tern_gguf_open_bytes`, released with
/// `tern_gguf_free`. Lifetime: the mapping (or the borrow of the caller's bytes) lasts until
/// the handle and every tensor wrapped from it by `tern_gguf_tensor_wrap` or
/// `tern_gguf_tensor_wrap_slice` are freed, in any order; pointers into the file
/// (`tern_gguf_tensor_data`, metadata keys and strings) are valid while the handle lives.
/// Thread-safety: no function mutates a handle, so one handle may be read from many threads
/// at once; `tern_gguf_free` must not race with any other use of the same handle.
pub struct tern_gguf {
    pub(super) file: GgufFile,
    tensors: Vec<Entry>,
    /// Per metadata entry: for an array of strings, each element's (start, length) in the
    /// file, so that `tern_gguf_kv_array_get_str` is constant time; empty otherwise.
    pub(super) string_elements: Vec<Vec<(usize, usize)>>,
}

/// A GGUF tensor's header entry, as `tern_gguf_tensor_info_get` reports it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tern_gguf_tensor_info {
    /// The tensor's name, NUL-terminated; valid while the handle lives.
    pub name: *const c_char,
    /// The ggml type id (e.g. 34 for TQ1_0, 35 for TQ2_0).
    pub ggml_type: u32,
    /// The tern format id (`TERN_FORMAT_*`) of that type, or 0 if tern has none.
    pub format: u32,
    /// The number of dimensions (1 to 4); `ne[n_dims..]` are 1.
    pub n_dims: u32,
    /// ggml's dimensions, `ne[0]` the contiguous one: a weight `n x k` has `ne[0] = k`,
    /// `ne[1] = n`.
    pub ne: [u64; 4],
    /// Offset of the tensor's data in the file (absolute, as Rust's `Gguf::file_offset`;
    /// Rust's `TensorInfo::data_offset` is the one relative to the data section).
    pub offset: u64,
    /// Bytes of data; 0 for a ggml type tern does not know the size of (for which
    /// `tern_gguf_tensor_data` returns TERN_ERR_UNKNOWN_FORMAT), or for an empty tensor.
    pub bytes: usize,
}

const _: () = assert!(MAX_DIMS == 4, "tern_gguf_tensor_info.ne has 4 entries");

impl tern_gguf {
    /// Copies out the tensor table and indexes the string arrays of a parsed file.
    fn new(file: GgufFile) -> FfiResult<tern_gguf> {
        let parsed = file.gguf();
        let mut tensors = Vec::new();
        // Bounded by the file: `parse` checked the count against the bytes.
        tensors.try_reserve_exact(parsed.tensors.len()).map_err(|_| Error::AllocationFailed(parsed.tensors.len()))?;
        for t in &parsed.tensors {
            let name = CString::new(t.name).map_err(|_| {
                Status::new(TERN_ERR_INVALID_FILE, format!("tensor name {:?} holds a NUL byte", t.name))
            })?;
            tensors.push(Entry {
                name,
                ggml_type: t.ggml_type.0,
                format: t.ggml_type.format(),
                n_dims: t.n_dims,
                ne: t.dims,
                offset: parsed.file_offset(t),
                bytes: t.size.and_then(|s| usize::try_from(s).ok()),
            });
        }
        let base = parsed.bytes().as_ptr() as usize;
        let mut string_elements = Vec::with_capacity(parsed.metadata.len());
        for kv in &parsed.metadata {
            let mut index = Vec::new();
            if let Value::Array(array) = kv.value {
                if array.elem_type == ValueType::String {
                    // Bounded by the file: `parse` checked the length against the bytes.
                    let len = array.len as usize;
                    index.try_reserve_exact(len).map_err(|_| Error::AllocationFailed(len.saturating_mul(16)))?;
                    index.extend(array.iter().map(|v| match v {
                        Value::String(s) => (s.as_ptr() as usize - base, s.len()),
                        _ => unreachable!("an array of strings holds strings"),
                    }));
                }
            }
            string_elements.push(index);
        }
        Ok(tern_gguf { file, tensors, string_elements })
    }

    fn entry(&self, index: usize) -> FfiResult<&Entry> {
        self.tensors.get(index).ok_or_else(|| {
            Status::new(
                TERN_ERR_OUT_OF_BOUNDS,
                format!("argument `index`: {index} given, the file has {} tensors", self.tensors.len()),
            )
        })
    }

    /// The bytes of a tensor of a type the reader knows (TERN_ERR_UNKNOWN_FORMAT otherwise).
    fn known_bytes(&self, e: &Entry) -> FfiResult<&[u8]> {
        let Some(len) = e.bytes else {
            return Err(Status::new(
                TERN_ERR_UNKNOWN_FORMAT,
                format!(
                    "tensor {:?} has ggml type {}, which this version of tern does not know: its size cannot be computed",
                    e.name,
                    e.ggml_type
                ),
            ));
        };
        // In range: `parse` checked every known tensor against the file's length.
        let start = e.offset as usize;
        Ok(&self.file.gguf().bytes()[start..start + len])
    }

    fn into_raw(self) -> *mut tern_gguf {
        Box::into_raw(Box::new(self))
    }
}

/// # Safety
/// `g` must be NULL or a live handle from this module, not freed during `'a`.
pub(super) unsafe fn gguf_ref<'a>(g: *const tern_gguf) -> FfiResult<&'a tern_gguf> {
    // SAFETY: forwarded to the caller.
    unsafe { try_ref(g, "g") }
}

/// A NUL-terminated argument as a `CStr`.
///
/// # Safety
/// A non-NULL `s` must point to a NUL-terminated string valid for `'a`.
pub(super) unsafe fn c_str<'a>(s: *const c_char, arg: &'static str) -> FfiResult<&'a CStr> {
    if s.is_null() {
        return Err(Status::null(arg));
    }
    // SAFETY: non-NULL and NUL-terminated (the caller's promise).
    Ok(unsafe { CStr::from_ptr(s) })
}

#[cfg(unix)]
fn path_of(path: &CStr) -> FfiResult<&std::path::Path> {
    use std::os::unix::ffi::OsStrExt;
    Ok(std::path::Path::new(std::ffi::OsStr::from_bytes(path.to_bytes())))
}

#[cfg(not(unix))]
fn path_of(path: &CStr) -> FfiResult<&std::path::Path> {
    path.to_str().map(std::path::Path::new).map_err(|_| Status::invalid("path", "not UTF-8"))
}

/// Opens the GGUF file at `path` (NUL-terminated; bytes on Unix, UTF-8 elsewhere) by
/// memory-mapping it read-only, parses and checks its header and tensor table, and writes a
/// new handle to `*out`. Tensor data is not read until used. The file must not be modified
/// or truncated while the handle or a tensor wrapped from it lives. Errors:
/// TERN_ERR_NULL_POINTER, TERN_ERR_IO (the file cannot be opened or mapped; the message has
/// the path and the system's reason), TERN_ERR_INVALID_FILE (truncated, corrupt or absurd;
/// the message says what and at which offset), TERN_ERR_ALLOCATION_FAILED. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_open(path: *const c_char, out: *mut *mut tern_gguf) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a NUL-terminated path and a writable out-parameter.
        let (path, out) = unsafe { (c_str(path, "path")?, Out::new(out, "out")?) };
        // SAFETY: the header makes it the caller's contract that the file is not modified
        // or truncated while the handle or a tensor wrapped from it lives.
        let file = unsafe { GgufFile::map(path_of(path)?) }?;
        let gguf = tern_gguf::new(file)?;
        out.write(gguf.into_raw());
        Ok(())
    })
}

/// Parses `len` bytes of a GGUF file at `data` (e.g. a mapping the engine made itself) and
/// writes a new handle to `*out`. The bytes are borrowed, not copied: they must stay alive
/// and unmodified until the handle and every tensor wrapped from it are freed. Errors as for
/// `tern_gguf_open`, without TERN_ERR_IO. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_open_bytes(
    data: *const c_void,
    len: usize,
    out: *mut *mut tern_gguf,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes `len` bytes at `data` that outlive the handle and its
        // tensors (the documented contract behind 'static), and a writable out-parameter.
        let (bytes, out) = unsafe { (slice::<'static, u8>(data.cast(), len, "data")?, Out::new(out, "out")?) };
        out.write(tern_gguf::new(GgufFile::from_static(bytes)?)?.into_raw());
        Ok(())
    })
}

/// The number of tensors in the file, or 0 if `g` is NULL. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_tensor_count(g: *const tern_gguf) -> usize {
    // SAFETY: the caller passes NULL or a live handle.
    guard_value(0, || unsafe { gguf_ref(g) }.map_or(0, |g| g.tensors.len()))
}

/// Describes tensor `index` (< `tern_gguf_tensor_count(g)`, in file order) in `*out`.
/// Errors: TERN_ERR_NULL_POINTER, TERN_ERR_OUT_OF_BOUNDS. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_tensor_info_get(
    g: *const tern_gguf,
    index: usize,
    out: *mut tern_gguf_tensor_info,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live handle and a writable out-parameter.
        let (g, out) = unsafe { (gguf_ref(g)?, Out::new(out, "out")?) };
        let e = g.entry(index)?;
        out.write(tern_gguf_tensor_info {
            name: e.name.as_ptr(),
            ggml_type: e.ggml_type,
            format: e.format.map_or(0, Format::id),
            n_dims: e.n_dims,
            ne: e.ne,
            offset: e.offset,
            bytes: e.bytes.unwrap_or(0),
        });
        Ok(())
    })
}

/// Writes the index of the tensor named `name` (NUL-terminated) to `*index`. Errors:
/// TERN_ERR_NULL_POINTER, TERN_ERR_NOT_FOUND (no tensor has that name). Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_find(g: *const tern_gguf, name: *const c_char, index: *mut usize) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live handle, a NUL-terminated name and a writable
        // out-parameter.
        let (g, name, out) = unsafe { (gguf_ref(g)?, c_str(name, "name")?, Out::new(index, "index")?) };
        let found = g.tensors.iter().position(|e| e.name.as_c_str() == name);
        let found =
            found.ok_or_else(|| Error::NotFound { what: "tensor", name: name.to_string_lossy().into_owned() })?;
        out.write(found);
        Ok(())
    })
}

/// Wraps 2-D slice `slice` of tensor `e` (`ne[2]` slices of `ne[1] x ne[0]`; a 1-D or 2-D
/// tensor is one slice) as a new C handle over the file's bytes. `what` is the export's rule
/// for the message when `ne[3] > 1` or (for `tern_gguf_tensor_wrap`) `ne[2] > 1`.
fn wrap_slice(g: &tern_gguf, e: &Entry, slice: usize, max_slices: u64, what: &str) -> FfiResult<*mut tern_tensor> {
    let name = &e.name;
    let Some(format) = e.format else {
        let ty = match crate::gguf::GgmlType(e.ggml_type).name() {
            Some(known) => format!("{known} ({})", e.ggml_type),
            None => format!("{}, which this version of tern does not know", e.ggml_type),
        };
        return Err(Status::new(
            TERN_ERR_UNSUPPORTED,
            format!(
                "tensor {name:?} has ggml type {ty}; tern has no format for it to wrap (tern_gguf_tensor_data gives \
                 the bytes of a type it knows)"
            ),
        ));
    };
    if e.ne[3] != 1 || e.ne[2] == 0 || e.ne[2] > max_slices {
        return Err(Status::new(TERN_ERR_INVALID_SHAPE, format!("tensor {name:?} has ne = {:?}: {what}", e.ne)));
    }
    if slice as u64 >= e.ne[2] {
        return Err(Status::new(
            TERN_ERR_OUT_OF_BOUNDS,
            format!("argument `slice`: {slice} given, tensor {name:?} has {} (ne[2])", e.ne[2]),
        ));
    }
    let bytes = g.known_bytes(e)?;
    let overflow = || Error::SizeOverflow { rows: e.ne[1] as usize, cols: e.ne[0] as usize };
    let (rows, cols) =
        (usize::try_from(e.ne[1]).map_err(|_| overflow())?, usize::try_from(e.ne[0]).map_err(|_| overflow())?);
    // ne[2] >= 1 here (slice < ne[2]) and divides the size: every slice is a whole matrix.
    let per_slice = bytes.len() / e.ne[2] as usize;
    let bytes = &bytes[slice * per_slice..(slice + 1) * per_slice];
    // SAFETY: the bytes belong to the file handle's mapping (or the caller's lent bytes),
    // which the new tensor handle keeps alive through `keep_alive` until it is freed; a
    // mapping does not move.
    let bytes: &'static [u8] = unsafe { &*std::ptr::from_ref::<[u8]>(bytes) };
    let tensor =
        Tensor::wrap(format, bytes, rows, cols).map_err(|err| Status::from(err).context(format!("tensor {name:?}")))?;
    Ok(tern_tensor::into_raw_owned(tensor, g.file.keep_alive()))
}

/// Wraps tensor `index` as a `tern_tensor` over the file's bytes, without a copy: rows =
/// `ne[1]`, cols = `ne[0]` (so a weight `n x k` comes out `n x k`, never transposed), and
/// the format from the ggml type. The tensor keeps the mapping alive: it may outlive the
/// handle; free it with `tern_tensor_free`. Errors: TERN_ERR_NULL_POINTER,
/// TERN_ERR_OUT_OF_BOUNDS (index), TERN_ERR_UNSUPPORTED (a ggml type tern has no format
/// for, e.g. F16 or Q8_0: `tern_gguf_tensor_data` gives its bytes), TERN_ERR_INVALID_SHAPE
/// (3-D or 4-D with `ne[2]` or `ne[3]` above 1: see `tern_gguf_tensor_wrap_slice`; or a
/// shape the format refuses). Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_tensor_wrap(
    g: *const tern_gguf,
    index: usize,
    out: *mut *mut tern_tensor,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live handle and a writable out-parameter.
        let (g, out) = unsafe { (gguf_ref(g)?, Out::new(out, "out")?) };
        let rule = "only 1-D and 2-D tensors (ne[2] = ne[3] = 1) wrap; tern_gguf_tensor_wrap_slice wraps one \
                    matrix of a 3-D tensor";
        out.write(wrap_slice(g, g.entry(index)?, 0, 1, rule)?);
        Ok(())
    })
}

/// Wraps matrix `slice` (< `ne[2]`) of a 3-D tensor (`ne[3]` = 1; e.g. one expert of a
/// mixture-of-experts weight) as a `tern_tensor` over the file's bytes, without a copy:
/// rows = `ne[1]`, cols = `ne[0]`, the bytes from `slice * bytes / ne[2]`. A 1-D or 2-D
/// tensor has one slice (0). The tensor keeps the mapping alive like those of
/// `tern_gguf_tensor_wrap`. Errors: TERN_ERR_NULL_POINTER, TERN_ERR_OUT_OF_BOUNDS (`index`,
/// or `slice` >= `ne[2]`), TERN_ERR_UNSUPPORTED (a ggml type tern has no format for),
/// TERN_ERR_INVALID_SHAPE (`ne[3]` above 1, or a shape the format refuses). Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_tensor_wrap_slice(
    g: *const tern_gguf,
    index: usize,
    slice: usize,
    out: *mut *mut tern_tensor,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live handle and a writable out-parameter.
        let (g, out) = unsafe { (gguf_ref(g)?, Out::new(out, "out")?) };
        out.write(wrap_slice(
            g,
            g.entry(index)?,
            slice,
            u64::MAX,
            "only tensors with ne[2] >= 1 and ne[3] = 1 have 2-D slices",
        )?);
        Ok(())
    })
}

/// The bytes of tensor `index`, whatever its ggml type (tern's formats or not: F16, BF16,
/// Q8_0, Q4_K, Q6_K, ...; an engine's embeddings and output head): `*data` points into
/// the file (or the bytes lent to `tern_gguf_open_bytes`) and stays valid while the handle
/// lives; `*len` is the tensor's size from ggml's block sizes, `*ggml_type` its type id.
/// Read-only; alignment is the file's (`general.alignment`, 32 by default). Errors:
/// TERN_ERR_NULL_POINTER, TERN_ERR_OUT_OF_BOUNDS (index), TERN_ERR_UNKNOWN_FORMAT (a ggml
/// type this version of tern does not know, so its size is unknown; the message has the
/// id). Nothing is written on error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_tensor_data(
    g: *const tern_gguf,
    index: usize,
    data: *mut *const c_void,
    len: *mut usize,
    ggml_type: *mut u32,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live handle and writable out-parameters.
        let (g, data, len, ty) = unsafe {
            (gguf_ref(g)?, Out::new(data, "data")?, Out::new(len, "len")?, Out::new(ggml_type, "ggml_type")?)
        };
        let e = g.entry(index)?;
        let bytes = g.known_bytes(e)?;
        data.write(bytes.as_ptr().cast());
        len.write(bytes.len());
        ty.write(e.ggml_type);
        Ok(())
    })
}

/// Frees a handle. Tensors wrapped from it stay valid (they keep the mapping) until they are
/// freed. `tern_gguf_free(NULL)` is a no-op. The handle must not be used afterwards, nor
/// freed twice, nor freed while another thread uses it.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_free(g: *mut tern_gguf) {
    guard_value((), || {
        if !g.is_null() {
            // SAFETY: a non-NULL g came from `tern_gguf::into_raw` (Box::into_raw) and, per
            // the contract, is freed once.
            drop(unsafe { Box::from_raw(g) });
        }
    })
}
