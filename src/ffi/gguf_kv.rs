//! GGUF metadata from C: the key/value entries `crate::gguf` parsed, by index (file order)
//! or by key, with one typed getter per GGUF value type. Keys and strings point into the
//! file (no copy, not NUL-terminated: use the length); array elements are read by index,
//! so a 150,000-entry tokenizer array is never copied.

use super::gguf::{c_str, gguf_ref, tern_gguf};
use super::guard::*;
use super::status::*;
use crate::error::Error;
use crate::gguf::{KeyValue, Value, ValueType};
use std::ffi::c_char;

/// GGUF metadata value types (`tern_gguf_kv_type`, `tern_gguf_kv_array_len`): GGUF's own
/// stable numbers.
pub const TERN_GGUF_TYPE_UINT8: u32 = 0u32;
/// `int8_t`.
pub const TERN_GGUF_TYPE_INT8: u32 = 1u32;
/// `uint16_t`.
pub const TERN_GGUF_TYPE_UINT16: u32 = 2u32;
/// `int16_t`.
pub const TERN_GGUF_TYPE_INT16: u32 = 3u32;
/// `uint32_t`.
pub const TERN_GGUF_TYPE_UINT32: u32 = 4u32;
/// `int32_t`.
pub const TERN_GGUF_TYPE_INT32: u32 = 5u32;
/// `float`.
pub const TERN_GGUF_TYPE_FLOAT32: u32 = 6u32;
/// A byte, 0 or 1 (`tern_gguf_kv_get_bool` writes 1 for any non-zero byte).
pub const TERN_GGUF_TYPE_BOOL: u32 = 7u32;
/// A length-prefixed string (UTF-8 by convention, not checked).
pub const TERN_GGUF_TYPE_STRING: u32 = 8u32;
/// An array: see `tern_gguf_kv_array_len`.
pub const TERN_GGUF_TYPE_ARRAY: u32 = 9u32;
/// `uint64_t`.
pub const TERN_GGUF_TYPE_UINT64: u32 = 10u32;
/// `int64_t`.
pub const TERN_GGUF_TYPE_INT64: u32 = 11u32;
/// `double`.
pub const TERN_GGUF_TYPE_FLOAT64: u32 = 12u32;

const _: () = assert!(ValueType::U8 as u32 == TERN_GGUF_TYPE_UINT8 && ValueType::F64 as u32 == TERN_GGUF_TYPE_FLOAT64);

impl tern_gguf {
    fn kv(&self, index: usize) -> FfiResult<&KeyValue<'_>> {
        let metadata = &self.file.gguf().metadata;
        metadata.get(index).ok_or_else(|| {
            Status::new(
                TERN_ERR_OUT_OF_BOUNDS,
                format!("argument `index`: {index} given, the file has {} metadata entries", metadata.len()),
            )
        })
    }
}

/// TERN_ERR_INVALID_ARGUMENT for a getter of type `want` on `kv`.
fn mismatch(kv: &KeyValue, want: &str) -> Status {
    let holds = match kv.value {
        Value::Array(array) => format!("array of {}", array.elem_type),
        ref value => value.value_type().to_string(),
    };
    Status::invalid("index", format_args!("entry {:?} has type {holds}, not {want}", kv.key))
}

/// Lends C `bytes` of the file as (pointer, length): keys and strings, not NUL-terminated.
fn lend(bytes: &[u8], ptr: Out<*const c_char>, len: Out<usize>) {
    ptr.write(bytes.as_ptr().cast());
    len.write(bytes.len());
}

/// A GGUF scalar type and the C type its getter writes.
trait Scalar: Sized {
    const TYPE: ValueType;
    fn of(value: &Value) -> Option<Self>;
}

macro_rules! scalars {
    ($($t:ty => $variant:ident),* $(,)?) => {$(
        impl Scalar for $t {
            const TYPE: ValueType = ValueType::$variant;
            fn of(value: &Value) -> Option<$t> {
                match *value {
                    Value::$variant(v) => Some(v.into()),
                    _ => None,
                }
            }
        }
    )*};
}

scalars!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, u64 => U64, i64 => I64, f32 => F32,
         f64 => F64);

/// GGUF's bool as C reads it: a byte, 1 for true.
#[repr(transparent)]
struct Bool(u8);

impl Scalar for Bool {
    const TYPE: ValueType = ValueType::Bool;
    fn of(value: &Value) -> Option<Bool> {
        match *value {
            Value::Bool(v) => Some(Bool(v.into())),
            _ => None,
        }
    }
}

/// The body of `tern_gguf_kv_get_<type>`.
///
/// # Safety
/// `g` is NULL or a live handle; `out` is NULL or writable.
unsafe fn get_scalar<T: Scalar>(g: *const tern_gguf, index: usize, out: *mut T) -> tern_status {
    guard(|| {
        // SAFETY: the caller's promise above.
        let (g, out) = unsafe { (gguf_ref(g)?, Out::new(out, "out")?) };
        let kv = g.kv(index)?;
        out.write(T::of(&kv.value).ok_or_else(|| mismatch(kv, T::TYPE.name()))?);
        Ok(())
    })
}

/// The body of `tern_gguf_kv_array_get_<type>`.
///
/// # Safety
/// `g` is NULL or a live handle; `out` is NULL or writable.
unsafe fn get_element<T: Scalar>(g: *const tern_gguf, index: usize, i: usize, out: *mut T) -> tern_status {
    guard(|| {
        // SAFETY: the caller's promise above.
        let (g, out) = unsafe { (gguf_ref(g)?, Out::new(out, "out")?) };
        let kv = g.kv(index)?;
        let array = match kv.value {
            Value::Array(array) if array.elem_type == T::TYPE => array,
            _ => return Err(mismatch(kv, &format!("array of {}", T::TYPE))),
        };
        let element = array.get(i as u64).and_then(|v| T::of(&v)).ok_or_else(|| {
            Status::new(
                TERN_ERR_OUT_OF_BOUNDS,
                format!("argument `i`: {i} given, {:?} has {} elements", kv.key, array.len),
            )
        })?;
        out.write(element);
        Ok(())
    })
}

/// The number of metadata entries (key/value pairs) in the file, or 0 if `g` is NULL.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_count(g: *const tern_gguf) -> usize {
    // SAFETY: the caller passes NULL or a live handle.
    guard_value(0, || unsafe { gguf_ref(g) }.map_or(0, |g| g.file.gguf().metadata.len()))
}

/// Writes the index (file order, < `tern_gguf_kv_count(g)`) of the entry whose key is `key`
/// (NUL-terminated, e.g. "llama.attention.head_count") to `*index`. Errors:
/// TERN_ERR_NULL_POINTER, TERN_ERR_NOT_FOUND (no entry has that key). Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_find(g: *const tern_gguf, key: *const c_char, index: *mut usize) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live handle, a NUL-terminated key and a writable
        // out-parameter.
        let (g, key, out) = unsafe { (gguf_ref(g)?, c_str(key, "key")?, Out::new(index, "index")?) };
        let found = g.file.gguf().metadata.iter().position(|kv| kv.key.as_bytes() == key.to_bytes());
        let found =
            found.ok_or_else(|| Error::NotFound { what: "metadata key", name: key.to_string_lossy().into_owned() })?;
        out.write(found);
        Ok(())
    })
}

/// The key of entry `index`: `*key` points to `*len` bytes of UTF-8 in the file, NOT
/// NUL-terminated (print it with `"%.*s", (int)len, key`), valid while the handle lives.
/// Errors: TERN_ERR_NULL_POINTER, TERN_ERR_OUT_OF_BOUNDS. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_key(
    g: *const tern_gguf,
    index: usize,
    key: *mut *const c_char,
    len: *mut usize,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live handle and writable out-parameters.
        let (g, key, len) = unsafe { (gguf_ref(g)?, Out::new(key, "key")?, Out::new(len, "len")?) };
        lend(g.kv(index)?.key.as_bytes(), key, len);
        Ok(())
    })
}

/// The GGUF value type of entry `index` (`TERN_GGUF_TYPE_*`, GGUF's own numbers: 4 for
/// UINT32, 8 for STRING, 9 for ARRAY, ...). Errors: TERN_ERR_NULL_POINTER,
/// TERN_ERR_OUT_OF_BOUNDS. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_type(g: *const tern_gguf, index: usize, gguf_type: *mut u32) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live handle and a writable out-parameter.
        let (g, out) = unsafe { (gguf_ref(g)?, Out::new(gguf_type, "gguf_type")?) };
        out.write(g.kv(index)?.value.value_type() as u32);
        Ok(())
    })
}

/// Reads entry `index` if it is a UINT8. Every `tern_gguf_kv_get_<type>` has the same
/// contract: `*out` receives the value; errors: TERN_ERR_NULL_POINTER,
/// TERN_ERR_OUT_OF_BOUNDS (index), TERN_ERR_INVALID_ARGUMENT (the entry has another type;
/// the message names the key and both types: no conversion is made, not even between
/// widths). Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_get_u8(g: *const tern_gguf, index: usize, out: *mut u8) -> tern_status {
    // SAFETY: forwarded: a live handle and a writable out-parameter, or NULL (refused).
    unsafe { get_scalar(g, index, out) }
}

/// Reads entry `index` if it is an INT8 (see `tern_gguf_kv_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_get_i8(g: *const tern_gguf, index: usize, out: *mut i8) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_get_u8`.
    unsafe { get_scalar(g, index, out) }
}

/// Reads entry `index` if it is a UINT16 (see `tern_gguf_kv_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_get_u16(g: *const tern_gguf, index: usize, out: *mut u16) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_get_u8`.
    unsafe { get_scalar(g, index, out) }
}

/// Reads entry `index` if it is an INT16 (see `tern_gguf_kv_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_get_i16(g: *const tern_gguf, index: usize, out: *mut i16) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_get_u8`.
    unsafe { get_scalar(g, index, out) }
}

/// Reads entry `index` if it is a UINT32 (see `tern_gguf_kv_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_get_u32(g: *const tern_gguf, index: usize, out: *mut u32) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_get_u8`.
    unsafe { get_scalar(g, index, out) }
}

/// Reads entry `index` if it is an INT32 (see `tern_gguf_kv_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_get_i32(g: *const tern_gguf, index: usize, out: *mut i32) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_get_u8`.
    unsafe { get_scalar(g, index, out) }
}

/// Reads entry `index` if it is a UINT64 (see `tern_gguf_kv_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_get_u64(g: *const tern_gguf, index: usize, out: *mut u64) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_get_u8`.
    unsafe { get_scalar(g, index, out) }
}

/// Reads entry `index` if it is an INT64 (see `tern_gguf_kv_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_get_i64(g: *const tern_gguf, index: usize, out: *mut i64) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_get_u8`.
    unsafe { get_scalar(g, index, out) }
}

/// Reads entry `index` if it is a FLOAT32 (see `tern_gguf_kv_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_get_f32(g: *const tern_gguf, index: usize, out: *mut f32) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_get_u8`.
    unsafe { get_scalar(g, index, out) }
}

/// Reads entry `index` if it is a FLOAT64 (see `tern_gguf_kv_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_get_f64(g: *const tern_gguf, index: usize, out: *mut f64) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_get_u8`.
    unsafe { get_scalar(g, index, out) }
}

/// Reads entry `index` if it is a BOOL: `*out` = 1 for true, 0 for false (see
/// `tern_gguf_kv_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_get_bool(g: *const tern_gguf, index: usize, out: *mut u8) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_get_u8`; `Bool` is a `u8` (repr(transparent)).
    unsafe { get_scalar(g, index, out.cast::<Bool>()) }
}

/// Reads entry `index` if it is a STRING: `*str` points to its `*len` bytes in the file,
/// NOT NUL-terminated, valid while the handle lives (GGUF strings are UTF-8 by convention;
/// tern does not check). Errors as for `tern_gguf_kv_get_u8`. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_get_str(
    g: *const tern_gguf,
    index: usize,
    str: *mut *const c_char,
    len: *mut usize,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live handle and writable out-parameters.
        let (g, str, len) = unsafe { (gguf_ref(g)?, Out::new(str, "str")?, Out::new(len, "len")?) };
        let kv = g.kv(index)?;
        let Value::String(s) = kv.value else { return Err(mismatch(kv, "string")) };
        lend(s, str, len);
        Ok(())
    })
}

/// Describes entry `index` if it is an ARRAY: `*elem_type` is the elements' GGUF type
/// (`TERN_GGUF_TYPE_*`) and `*len` their number. Read elements with
/// `tern_gguf_kv_array_get_<type>` (arrays of arrays: their length and type only). Errors
/// as for `tern_gguf_kv_get_u8`. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_array_len(
    g: *const tern_gguf,
    index: usize,
    elem_type: *mut u32,
    len: *mut usize,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live handle and writable out-parameters.
        let (g, ty, len) = unsafe { (gguf_ref(g)?, Out::new(elem_type, "elem_type")?, Out::new(len, "len")?) };
        let kv = g.kv(index)?;
        let Value::Array(array) = kv.value else { return Err(mismatch(kv, "array")) };
        ty.write(array.elem_type as u32);
        // Fits: the parser bounded the length by the file's size.
        len.write(array.len as usize);
        Ok(())
    })
}

/// Reads element `i` of entry `index` if it is an array of UINT8, in constant time and
/// without a copy of the array. Every `tern_gguf_kv_array_get_<type>` has the same
/// contract: `*out` receives the element; errors: TERN_ERR_NULL_POINTER,
/// TERN_ERR_OUT_OF_BOUNDS (`index`, or `i` >= the array's length),
/// TERN_ERR_INVALID_ARGUMENT (not an array, or an array of another type). Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_array_get_u8(
    g: *const tern_gguf,
    index: usize,
    i: usize,
    out: *mut u8,
) -> tern_status {
    // SAFETY: forwarded: a live handle and a writable out-parameter, or NULL (refused).
    unsafe { get_element(g, index, i, out) }
}

/// Element `i` of an array of INT8 (see `tern_gguf_kv_array_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_array_get_i8(
    g: *const tern_gguf,
    index: usize,
    i: usize,
    out: *mut i8,
) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_array_get_u8`.
    unsafe { get_element(g, index, i, out) }
}

/// Element `i` of an array of UINT16 (see `tern_gguf_kv_array_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_array_get_u16(
    g: *const tern_gguf,
    index: usize,
    i: usize,
    out: *mut u16,
) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_array_get_u8`.
    unsafe { get_element(g, index, i, out) }
}

/// Element `i` of an array of INT16 (see `tern_gguf_kv_array_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_array_get_i16(
    g: *const tern_gguf,
    index: usize,
    i: usize,
    out: *mut i16,
) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_array_get_u8`.
    unsafe { get_element(g, index, i, out) }
}

/// Element `i` of an array of UINT32 (see `tern_gguf_kv_array_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_array_get_u32(
    g: *const tern_gguf,
    index: usize,
    i: usize,
    out: *mut u32,
) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_array_get_u8`.
    unsafe { get_element(g, index, i, out) }
}

/// Element `i` of an array of INT32 (see `tern_gguf_kv_array_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_array_get_i32(
    g: *const tern_gguf,
    index: usize,
    i: usize,
    out: *mut i32,
) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_array_get_u8`.
    unsafe { get_element(g, index, i, out) }
}

/// Element `i` of an array of UINT64 (see `tern_gguf_kv_array_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_array_get_u64(
    g: *const tern_gguf,
    index: usize,
    i: usize,
    out: *mut u64,
) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_array_get_u8`.
    unsafe { get_element(g, index, i, out) }
}

/// Element `i` of an array of INT64 (see `tern_gguf_kv_array_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_array_get_i64(
    g: *const tern_gguf,
    index: usize,
    i: usize,
    out: *mut i64,
) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_array_get_u8`.
    unsafe { get_element(g, index, i, out) }
}

/// Element `i` of an array of FLOAT32 (see `tern_gguf_kv_array_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_array_get_f32(
    g: *const tern_gguf,
    index: usize,
    i: usize,
    out: *mut f32,
) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_array_get_u8`.
    unsafe { get_element(g, index, i, out) }
}

/// Element `i` of an array of FLOAT64 (see `tern_gguf_kv_array_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_array_get_f64(
    g: *const tern_gguf,
    index: usize,
    i: usize,
    out: *mut f64,
) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_array_get_u8`.
    unsafe { get_element(g, index, i, out) }
}

/// Element `i` of an array of BOOL: 1 for true, 0 for false (see
/// `tern_gguf_kv_array_get_u8`).
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_array_get_bool(
    g: *const tern_gguf,
    index: usize,
    i: usize,
    out: *mut u8,
) -> tern_status {
    // SAFETY: as in `tern_gguf_kv_array_get_u8`; `Bool` is a `u8` (repr(transparent)).
    unsafe { get_element(g, index, i, out.cast::<Bool>()) }
}

/// Element `i` of an array of STRING (e.g. a tokenizer's tokens): `*str` points to its
/// `*len` bytes in the file, NOT NUL-terminated, valid while the handle lives. Constant
/// time (the handle indexes string arrays when it opens the file). Errors as for
/// `tern_gguf_kv_array_get_u8`. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tern_gguf_kv_array_get_str(
    g: *const tern_gguf,
    index: usize,
    i: usize,
    str: *mut *const c_char,
    len: *mut usize,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live handle and writable out-parameters.
        let (g, str, len) = unsafe { (gguf_ref(g)?, Out::new(str, "str")?, Out::new(len, "len")?) };
        let kv = g.kv(index)?;
        let array = match kv.value {
            Value::Array(array) if array.elem_type == ValueType::String => array,
            _ => return Err(mismatch(kv, "array of string")),
        };
        let &(start, n) = g.string_elements[index].get(i).ok_or_else(|| {
            Status::new(
                TERN_ERR_OUT_OF_BOUNDS,
                format!("argument `i`: {i} given, {:?} has {} elements", kv.key, array.len),
            )
        })?;
        lend(&g.file.gguf().bytes()[start..start + n], str, len);
        Ok(())
    })
}
