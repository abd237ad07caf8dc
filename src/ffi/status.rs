//! Status codes: the stable numeric values of `tern_status` and the one mapping from
//! [`Error`] to them.

use super::guard::guard_value;
use crate::error::Error;
use std::ffi::{c_char, CStr};

/// The result of every fallible tern function: `TERN_OK` (0) or one of the `TERN_ERR_*`
/// codes. The numeric values are stable: a retired value is never reused.
pub type tern_status = u32;

/// Success. Every status constant is unsigned (`0u`, `1u`, ...), like `tern_status`, so
/// Swift imports them as `UInt32` and Kotlin/Native as `UInt`.
pub const TERN_OK: tern_status = 0u32;
/// A required pointer argument was NULL.
pub const TERN_ERR_NULL_POINTER: tern_status = 1u32;
/// A format id (or ggml type id) is not known to this version of tern.
pub const TERN_ERR_UNKNOWN_FORMAT: tern_status = 2u32;
/// The shape does not fit the format (zero rows or cols, cols not a multiple of the block).
pub const TERN_ERR_INVALID_SHAPE: tern_status = 3u32;
/// rows x cols, or the byte size of the matrix, overflows size_t.
pub const TERN_ERR_SIZE_OVERFLOW: tern_status = 4u32;
/// A buffer length does not match what the shape requires.
pub const TERN_ERR_LENGTH_MISMATCH: tern_status = 5u32;
/// The input holds a NaN or an infinity.
pub const TERN_ERR_NON_FINITE: tern_status = 6u32;
/// A block's (TQ1_0/TQ2_0: f16) or row's (I8_ABSMAX) max |x| does not fit the format's scale.
pub const TERN_ERR_SCALE_OVERFLOW: tern_status = 7u32;
/// Encoded bytes hold a code (or scale) outside the format's alphabet.
pub const TERN_ERR_CORRUPT_CODE: tern_status = 8u32;
/// An index lies outside what it indexes: a (row, col) outside the matrix, a row range
/// outside it (or reversed), a GGUF tensor, metadata entry, array element or slice past the
/// end. The message names the argument and the count.
pub const TERN_ERR_OUT_OF_BOUNDS: tern_status = 9u32;
/// The tensor's scope was reset or freed; the tensor can no longer be read.
pub const TERN_ERR_STALE_TENSOR: tern_status = 10u32;
/// The operands of an operation do not fit each other.
pub const TERN_ERR_SHAPE_MISMATCH: tern_status = 11u32;
/// No kernel has the requested name.
pub const TERN_ERR_UNKNOWN_KERNEL: tern_status = 12u32;
/// The kernel needs CPU features this machine does not have.
pub const TERN_ERR_KERNEL_UNAVAILABLE: tern_status = 13u32;
/// What was asked is not supported: no kernel exists for this combination of formats (or a
/// strict dispatcher refuses the fallback that would serve it), or a GGUF tensor's ggml
/// type has no tern format (`tern_gguf_tensor_wrap`; its bytes are still readable with
/// `tern_gguf_tensor_data`). The message says which.
pub const TERN_ERR_UNSUPPORTED: tern_status = 14u32;
/// The operation needs a scope and none was given.
pub const TERN_ERR_SCOPE_REQUIRED: tern_status = 15u32;
/// A memory allocation failed.
pub const TERN_ERR_ALLOCATION_FAILED: tern_status = 16u32;
/// An argument is invalid in a way no other status describes (misaligned or overlapping
/// buffers, a buffer larger than the address space allows).
pub const TERN_ERR_INVALID_ARGUMENT: tern_status = 17u32;
/// tern panicked (a bug in tern). The operation did not complete; output buffers may be
/// partly written (a kernel can panic mid-write), so treat their contents as garbage.
pub const TERN_ERR_PANIC: tern_status = 18u32;
/// No item (e.g. no GGUF tensor) has the requested name.
pub const TERN_ERR_NOT_FOUND: tern_status = 19u32;
/// The bytes are not a GGUF file tern can read (truncated, corrupt or absurd header); the
/// message (`tern_last_error`) says what and at which offset (and does not repeat this
/// status's own words, so printing both reads once).
pub const TERN_ERR_INVALID_FILE: tern_status = 20u32;
/// The operating system refused an operation (open, stat or mmap of a file); the message
/// names the path and the system's reason.
pub const TERN_ERR_IO: tern_status = 21u32;

/// The status of an error. Exhaustive, so a new `Error` variant must be given a status.
pub fn status_of(error: &Error) -> tern_status {
    match error {
        Error::UnknownFormat(_) => TERN_ERR_UNKNOWN_FORMAT,
        Error::InvalidShape { .. } => TERN_ERR_INVALID_SHAPE,
        Error::SizeOverflow { .. } => TERN_ERR_SIZE_OVERFLOW,
        Error::LengthMismatch { .. } => TERN_ERR_LENGTH_MISMATCH,
        Error::NonFinite { .. } => TERN_ERR_NON_FINITE,
        Error::ScaleOverflow { .. } => TERN_ERR_SCALE_OVERFLOW,
        Error::CorruptCode { .. } => TERN_ERR_CORRUPT_CODE,
        Error::OutOfBounds { .. } => TERN_ERR_OUT_OF_BOUNDS,
        Error::InvalidRowRange { .. } => TERN_ERR_OUT_OF_BOUNDS,
        Error::StaleTensor => TERN_ERR_STALE_TENSOR,
        Error::ShapeMismatch(_) => TERN_ERR_SHAPE_MISMATCH,
        Error::UnknownKernel { .. } => TERN_ERR_UNKNOWN_KERNEL,
        Error::KernelUnavailable(_) => TERN_ERR_KERNEL_UNAVAILABLE,
        Error::Unsupported { .. } => TERN_ERR_UNSUPPORTED,
        Error::ScopeRequired => TERN_ERR_SCOPE_REQUIRED,
        Error::AllocationFailed(_) => TERN_ERR_ALLOCATION_FAILED,
        Error::InvalidArgument(_) => TERN_ERR_INVALID_ARGUMENT,
        Error::NotFound { .. } => TERN_ERR_NOT_FOUND,
        Error::StrictFallback { .. } => TERN_ERR_UNSUPPORTED,
        Error::ExecutorContract { .. } => TERN_ERR_INVALID_ARGUMENT,
        Error::Gguf(_) => TERN_ERR_INVALID_FILE,
        Error::Io(_) => TERN_ERR_IO,
        Error::KernelMismatch { .. } => TERN_ERR_UNKNOWN_KERNEL,
        Error::TooManyThreads { .. } => TERN_ERR_INVALID_ARGUMENT,
        Error::ThreadSpawn { .. } => TERN_ERR_ALLOCATION_FAILED,
    }
}

/// The name and description of every status, indexed by its value.
const STATUS_STRINGS: [&CStr; 22] = [
    c"TERN_OK: success",
    c"TERN_ERR_NULL_POINTER: a required pointer argument was NULL",
    c"TERN_ERR_UNKNOWN_FORMAT: unknown format id or ggml type id",
    c"TERN_ERR_INVALID_SHAPE: the shape does not fit the format",
    c"TERN_ERR_SIZE_OVERFLOW: the matrix size overflows size_t",
    c"TERN_ERR_LENGTH_MISMATCH: a buffer length does not match the shape",
    c"TERN_ERR_NON_FINITE: the input holds a NaN or an infinity",
    c"TERN_ERR_SCALE_OVERFLOW: a scale does not fit the format (a TQ block's max overflows f16, or an I8_ABSMAX row's scale would decode code 127 to infinity)",
    c"TERN_ERR_CORRUPT_CODE: encoded bytes hold an invalid code or scale",
    c"TERN_ERR_OUT_OF_BOUNDS: an index or row range is out of range (matrix element, rows, tensor, metadata entry, array element, slice)",
    c"TERN_ERR_STALE_TENSOR: the tensor's scope was reset or freed",
    c"TERN_ERR_SHAPE_MISMATCH: the operands' shapes do not fit",
    c"TERN_ERR_UNKNOWN_KERNEL: no kernel has that name",
    c"TERN_ERR_KERNEL_UNAVAILABLE: the kernel needs CPU features this machine lacks",
    c"TERN_ERR_UNSUPPORTED: tern does not support this (no kernel for the pair of formats, a fallback a strict dispatcher refuses, or a type tern has no format for)",
    c"TERN_ERR_SCOPE_REQUIRED: the operation needs a scope",
    c"TERN_ERR_ALLOCATION_FAILED: a memory allocation failed",
    c"TERN_ERR_INVALID_ARGUMENT: invalid argument",
    c"TERN_ERR_PANIC: tern panicked (a bug in tern); nothing was written",
    c"TERN_ERR_NOT_FOUND: nothing has that name",
    c"TERN_ERR_INVALID_FILE: not a GGUF file tern can read",
    c"TERN_ERR_IO: the operating system refused a file operation",
];

const UNKNOWN_STATUS: &CStr = c"unknown tern_status value";

/// A static, NUL-terminated description of `status`, starting with its macro name.
/// Never returns NULL: an unknown value gets a generic string. The string must not be
/// freed. Thread-safe.
#[no_mangle]
pub extern "C" fn tern_status_str(status: tern_status) -> *const c_char {
    guard_value(UNKNOWN_STATUS.as_ptr(), || {
        let s = usize::try_from(status).ok().and_then(|i| STATUS_STRINGS.get(i)).copied();
        s.unwrap_or(UNKNOWN_STATUS).as_ptr()
    })
}

/// The message of the last call on this thread that returned an error status: which
/// argument, the expected and the given value, the name that was not found and where it
/// came from. An empty string after a call that returned `TERN_OK`; functions that return
/// no `tern_status` (`tern_tensor_rows`, `tern_version`, ...) leave it as it is. Never
/// NULL; valid until the next tern call on the same thread; must not be freed. Each thread
/// has its own message.
#[no_mangle]
pub extern "C" fn tern_last_error() -> *const c_char {
    guard_value(c"".as_ptr(), super::guard::last_error)
}
