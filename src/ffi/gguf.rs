//! GGUF files from C: the checked reader of `crate::gguf` over a memory-mapped file or the
//! caller's bytes, and tensors wrapped over the mapped bytes without a copy.

use super::guard::*;
use super::status::*;
use super::tensor::tern_tensor;
use crate::error::Error;
use crate::format::Format;
use crate::gguf::{Gguf, MAX_DIMS};
use crate::tensor::Tensor;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::Arc;

/// The bytes a handle reads: a read-only mapping of a file, or bytes the caller lends.
enum Backing {
    Mapped(memmap2::Mmap),
    /// Valid until the handle and every tensor wrapped from it are freed (the caller's
    /// promise in `tern_gguf_open_bytes`).
    Borrowed(&'static [u8]),
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        match self {
            Backing::Mapped(map) => map,
            Backing::Borrowed(bytes) => bytes,
        }
    }
}

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

/// A parsed GGUF file: its tensor table over a mapping of the file (or the caller's bytes).
///
/// Ownership: created by `tern_gguf_open` or `tern_gguf_open_bytes`, released with
/// `tern_gguf_free`. Lifetime: the mapping (or the borrow of the caller's bytes) lasts until
/// the handle and every tensor wrapped from it by `tern_gguf_tensor_wrap` are freed, in any
/// order. Thread-safety: no function mutates a handle, so one handle may be read from many
/// threads at once; `tern_gguf_free` must not race with any other use of the same handle.
pub struct tern_gguf {
    backing: Arc<Backing>,
    tensors: Vec<Entry>,
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
    /// Offset of the tensor's data in the file (absolute, not relative to the data section).
    pub offset: u64,
    /// Bytes of data, or 0 for a ggml type tern does not know the size of.
    pub bytes: usize,
}

const _: () = assert!(MAX_DIMS == 4, "tern_gguf_tensor_info.ne has 4 entries");

impl tern_gguf {
    /// Parses `backing` and copies out its tensor table.
    fn new(backing: Backing) -> FfiResult<tern_gguf> {
        let file = Gguf::parse(backing.bytes()).map_err(Error::from)?;
        let mut tensors = Vec::new();
        // Bounded by the file: `parse` checked the count against the bytes.
        tensors.try_reserve_exact(file.tensors.len()).map_err(|_| Error::AllocationFailed(file.tensors.len()))?;
        for t in &file.tensors {
            let name = CString::new(t.name).map_err(|_| {
                Status::new(TERN_ERR_INVALID_FILE, format!("tensor name {:?} holds a NUL byte", t.name))
            })?;
            tensors.push(Entry {
                name,
                ggml_type: t.ggml_type.0,
                format: t.ggml_type.format(),
                n_dims: t.n_dims,
                ne: t.dims,
                // Cannot overflow: `parse` checked that every known tensor lies in the file,
                // and an unknown type's offset was checked the same way with size 0.
                offset: file.data_start + t.offset,
                bytes: t.size.and_then(|s| usize::try_from(s).ok()),
            });
        }
        Ok(tern_gguf { backing: Arc::new(backing), tensors })
    }

    fn entry(&self, index: usize) -> FfiResult<&Entry> {
        self.tensors.get(index).ok_or_else(|| {
            Status::new(
                TERN_ERR_OUT_OF_BOUNDS,
                format!("argument `index`: {index} given, the file has {} tensors", self.tensors.len()),
            )
        })
    }

    fn into_raw(self) -> *mut tern_gguf {
        Box::into_raw(Box::new(self))
    }
}

/// # Safety
/// `g` must be NULL or a live handle from this module, not freed during `'a`.
unsafe fn gguf_ref<'a>(g: *const tern_gguf) -> FfiResult<&'a tern_gguf> {
    // SAFETY: forwarded to the caller.
    unsafe { try_ref(g, "g") }
}

/// A NUL-terminated argument as a `CStr`.
///
/// # Safety
/// A non-NULL `s` must point to a NUL-terminated string valid for `'a`.
unsafe fn c_str<'a>(s: *const c_char, arg: &'static str) -> FfiResult<&'a CStr> {
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

fn map_file(path: &std::path::Path) -> FfiResult<Backing> {
    let io = |what: &str, e: std::io::Error| Error::Io(format!("{what} {}: {e}", path.display()));
    // Before opening: opening a FIFO would block, and a device has no size to map.
    if !std::fs::metadata(path).map_err(|e| io("stat", e))?.is_file() {
        return Err(Error::Io(format!("open {}: not a regular file", path.display())).into());
    }
    let file = std::fs::File::open(path).map_err(|e| io("open", e))?;
    // An empty file cannot be mapped; it is refused by the parser like any short file.
    if file.metadata().map_err(|e| io("stat", e))?.len() == 0 {
        return Ok(Backing::Borrowed(&[]));
    }
    // SAFETY: the mapping is read-only and private to this handle. The header makes it the
    // caller's contract that the file is not modified or truncated while the handle or a
    // tensor wrapped from it lives (as for any memory-mapped model file).
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| io("mmap", e))?;
    Ok(Backing::Mapped(map))
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
        let gguf = tern_gguf::new(map_file(path_of(path)?)?)?;
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
        out.write(tern_gguf::new(Backing::Borrowed(bytes))?.into_raw());
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

/// The matrix shape of a GGUF tensor, the ggml way: rows = `ne[1]`, cols = `ne[0]`.
fn matrix_shape(e: &Entry) -> FfiResult<(usize, usize)> {
    let name = e.name.to_string_lossy();
    if e.ne[2..].iter().any(|&d| d != 1) {
        return Err(Status::new(
            TERN_ERR_INVALID_SHAPE,
            format!("tensor {name:?} has ne = {:?}: only 1-D and 2-D tensors (ne[2] = ne[3] = 1) wrap", e.ne),
        ));
    }
    let dim =
        |d: u64| usize::try_from(d).map_err(|_| Error::SizeOverflow { rows: e.ne[1] as usize, cols: e.ne[0] as usize });
    Ok((dim(e.ne[1])?, dim(e.ne[0])?))
}

/// Wraps tensor `index` as a `tern_tensor` over the file's bytes, without a copy: rows =
/// `ne[1]`, cols = `ne[0]` (so a weight `n x k` comes out `n x k`, never transposed), and
/// the format from the ggml type. The tensor keeps the mapping alive: it may outlive the
/// handle; free it with `tern_tensor_free`. Errors: TERN_ERR_NULL_POINTER,
/// TERN_ERR_OUT_OF_BOUNDS (index), TERN_ERR_UNSUPPORTED (a ggml type tern has no format
/// for), TERN_ERR_INVALID_SHAPE (3-D or 4-D with `ne[2]` or `ne[3]` above 1, or a shape the
/// format refuses). Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_tensor_wrap(
    g: *const tern_gguf,
    index: usize,
    out: *mut *mut tern_tensor,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live handle and a writable out-parameter.
        let (g, out) = unsafe { (gguf_ref(g)?, Out::new(out, "out")?) };
        let e = g.entry(index)?;
        let name = e.name.to_string_lossy();
        let (Some(format), Some(len)) = (e.format, e.bytes) else {
            return Err(Status::new(
                TERN_ERR_UNSUPPORTED,
                format!("tensor {name:?} has ggml type {}, which tern has no format for", e.ggml_type),
            ));
        };
        let (rows, cols) = matrix_shape(e)?;
        // In range: `parse` checked every known tensor against the file's length.
        let start = e.offset as usize;
        let bytes = &g.backing.bytes()[start..start + len];
        // SAFETY: the bytes belong to the mapping (or the caller's lent bytes), which the
        // new handle keeps alive through its `Arc` until the tensor is freed; a mapping does
        // not move when the `Arc` does.
        let bytes: &'static [u8] = unsafe { &*(bytes as *const [u8]) };
        let tensor =
            Tensor::wrap(format, bytes, rows, cols).map_err(|e| Status::from(e).context(format!("tensor {name:?}")))?;
        out.write(tern_tensor::into_raw_owned(tensor, g.backing.clone()));
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
