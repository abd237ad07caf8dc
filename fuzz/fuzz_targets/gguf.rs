//! The GGUF reader on arbitrary bytes, through the C entry points and the Rust API.
//!
//! Properties: `tern_gguf_open_bytes` accepts exactly what `Gguf::parse` accepts, never
//! panics (a panic would come back as TERN_ERR_PANIC, which fails here) and writes its
//! out-parameter only on success; its table agrees with the Rust reader's; every name is
//! found at its own index; every tensor either wraps (over the input's own bytes, rows =
//! ne[1], cols = ne[0]) and validates and decodes, or is refused with a status. Through the
//! Rust API: every metadata value can be walked (arrays included, their printing too) and
//! every tensor of a known type hands out bytes inside the data section. The metadata
//! through C: every key at its index and found by name, its type, exactly one getter
//! accepting it (with the Rust reader's value) and every other refusing it, array elements
//! by index (the first few and the last) through each element getter, and
//! `tern_gguf_tensor_data` agreeing with the Rust reader's bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::ptr::{null, null_mut};
use tern::ffi::*;
use tern::gguf::{Gguf, Value, ValueType};
use tern::Tensor;

fuzz_target!(|data: &[u8]| {
    let parsed = Gguf::parse(data);
    through_c(data, parsed.as_ref().ok());
    let Ok(file) = parsed else { return };
    assert!(file.alignment.is_power_of_two());
    assert!(file.data_start % file.alignment == 0);
    for kv in &file.metadata {
        walk(&kv.value);
        let _ = format!("{}: {} {:?}", kv.key, kv.value, kv.value);
        assert!(std::ptr::eq(file.get(kv.key).expect("a parsed key is found"), &kv.value), "keys are unique");
    }
    for info in &file.tensors {
        let _ = (info.shape(), info.elements(), info.matrix(), info.ggml_type.name(), info.ggml_type.block());
        let Ok(bytes) = file.tensor_data(info) else {
            assert!(info.size.is_none(), "a tensor of a known type has no data");
            continue;
        };
        let start = bytes.as_ptr() as usize - data.as_ptr() as usize;
        assert!(start as u64 >= file.data_start && start + bytes.len() <= data.len());
        assert_eq!(Some(bytes.len() as u64), info.size);
        let (rows, cols) = info.matrix();
        let (Some(format), Ok(rows), Ok(cols)) =
            (info.ggml_type.format(), usize::try_from(rows), usize::try_from(cols))
        else {
            continue;
        };
        if let Ok(tensor) = Tensor::wrap(format, bytes, rows, cols) {
            let _ = tensor.validate();
            if rows * cols <= tern_fuzz::MAX_ELEMS {
                tensor.decode().expect("a wrapped tensor decodes");
            }
        }
    }
});

/// Reads every element of every (nested) array.
fn walk(value: &Value) {
    if let Value::Array(array) = value {
        let mut count = 0u64;
        for item in array.iter() {
            assert_eq!(item.value_type(), array.elem_type);
            walk(&item);
            count += 1;
        }
        assert_eq!(count, array.len);
    }
}

/// The same bytes through the C API; `file` is the Rust reader's verdict.
fn through_c(data: &[u8], file: Option<&Gguf>) {
    let sentinel = std::ptr::NonNull::<tern_gguf>::dangling().as_ptr();
    let mut g = sentinel;
    // SAFETY: `data` outlives the handle and its tensors (all freed below); out-parameters
    // are writable locals.
    unsafe {
        let status = tern_gguf_open_bytes(data.as_ptr().cast(), data.len(), &mut g);
        let Some(file) = file else {
            assert!(status == TERN_ERR_INVALID_FILE, "status {status} for a file the reader refuses");
            assert!(g == sentinel, "a refused open wrote its out-parameter");
            return;
        };
        if status == TERN_ERR_INVALID_FILE {
            // The one refusal the Rust reader does not make: a NUL inside a tensor name.
            assert!(file.tensors.iter().any(|t| t.name.contains('\0')));
            return;
        }
        assert!(status == TERN_OK, "status {status}");
        assert_eq!(tern_gguf_tensor_count(g), file.tensors.len());
        for (i, t) in file.tensors.iter().enumerate() {
            let mut info = tern_gguf_tensor_info { name: null(), ggml_type: 0, format: 0, n_dims: 0, ne: [0; 4], offset: 0, bytes: 0 };
            assert!(tern_gguf_tensor_info_get(g, i, &mut info) == TERN_OK);
            assert_eq!((info.ggml_type, info.n_dims, info.ne), (t.ggml_type.0, t.n_dims, t.dims));
            let mut index = usize::MAX;
            assert!(tern_gguf_find(g, info.name, &mut index) == TERN_OK);
            assert_eq!(index, i, "names are unique");
            let mut w = null_mut();
            if tern_gguf_tensor_wrap(g, i, &mut w) != TERN_OK {
                assert!(w.is_null(), "a refused wrap wrote its out-parameter");
                continue;
            }
            let (rows, cols) = (tern_tensor_rows(w), tern_tensor_cols(w));
            assert_eq!((rows as u64, cols as u64), (t.dims[1], t.dims[0]));
            let (mut bytes, mut len) = (null(), 0);
            assert!(tern_tensor_data(w, &mut bytes, &mut len) == TERN_OK);
            assert_eq!(bytes.cast::<u8>(), data.as_ptr().add(info.offset as usize), "wrapped, not copied");
            let _ = tern_tensor_validate(w);
            if rows * cols <= tern_fuzz::MAX_ELEMS {
                let mut out = vec![0f32; rows * cols];
                assert!(tern_tensor_decode(w, out.as_mut_ptr(), out.len()) == TERN_OK);
            }
            tern_tensor_free(w);
        }
        for (i, t) in file.tensors.iter().enumerate() {
            let (mut ptr, mut len, mut ty) = (null(), 0, 0);
            let status = tern_gguf_tensor_data(g, i, &mut ptr, &mut len, &mut ty);
            match file.tensor_data(t) {
                Ok(bytes) => {
                    assert!(status == TERN_OK, "status {status}");
                    assert_eq!((ptr.cast::<u8>(), len, ty), (bytes.as_ptr(), bytes.len(), t.ggml_type.0));
                }
                Err(_) => assert!(status == TERN_ERR_UNKNOWN_FORMAT && ptr.is_null(), "status {status}"),
            }
        }
        metadata_through_c(g, file);
        let mut index = 0;
        assert!(tern_gguf_tensor_info_get(g, file.tensors.len(), null_mut()) != TERN_OK);
        let _ = tern_gguf_find(g, c"".as_ptr(), &mut index);
        tern_gguf_free(g);
    }
}

/// What one getter made of an entry (or an array element): its status and value as bits.
type Got = (tern_status, u64);

/// Every scalar getter on entry `i`, in GGUF type order (u8, i8, u16, i16, u32, i32, f32,
/// bool, then u64, i64, f64 at their ids 10-12).
///
/// # Safety
/// `g` is a live handle.
unsafe fn scalars(g: *const tern_gguf, i: usize) -> [(u32, Got); 11] {
    macro_rules! get {
        ($f:ident, $t:ty, $bits:expr) => {{
            let mut v: $t = Default::default();
            // SAFETY: a live handle and a writable local.
            let s = unsafe { $f(g, i, &mut v) };
            (s, $bits(v))
        }};
    }
    [
        (0, get!(tern_gguf_kv_get_u8, u8, u64::from)),
        (1, get!(tern_gguf_kv_get_i8, i8, |v: i8| v as u64)),
        (2, get!(tern_gguf_kv_get_u16, u16, u64::from)),
        (3, get!(tern_gguf_kv_get_i16, i16, |v: i16| v as u64)),
        (4, get!(tern_gguf_kv_get_u32, u32, u64::from)),
        (5, get!(tern_gguf_kv_get_i32, i32, |v: i32| v as u64)),
        (6, get!(tern_gguf_kv_get_f32, f32, |v: f32| u64::from(v.to_bits()))),
        (7, get!(tern_gguf_kv_get_bool, u8, u64::from)),
        (10, get!(tern_gguf_kv_get_u64, u64, |v| v)),
        (11, get!(tern_gguf_kv_get_i64, i64, |v: i64| v as u64)),
        (12, get!(tern_gguf_kv_get_f64, f64, f64::to_bits)),
    ]
}

/// Every element getter on element `e` of entry `i`, in the order of [`scalars`].
///
/// # Safety
/// `g` is a live handle.
unsafe fn elements(g: *const tern_gguf, i: usize, e: usize) -> [(u32, Got); 11] {
    macro_rules! get {
        ($f:ident, $t:ty, $bits:expr) => {{
            let mut v: $t = Default::default();
            // SAFETY: a live handle and a writable local.
            let s = unsafe { $f(g, i, e, &mut v) };
            (s, $bits(v))
        }};
    }
    [
        (0, get!(tern_gguf_kv_array_get_u8, u8, u64::from)),
        (1, get!(tern_gguf_kv_array_get_i8, i8, |v: i8| v as u64)),
        (2, get!(tern_gguf_kv_array_get_u16, u16, u64::from)),
        (3, get!(tern_gguf_kv_array_get_i16, i16, |v: i16| v as u64)),
        (4, get!(tern_gguf_kv_array_get_u32, u32, u64::from)),
        (5, get!(tern_gguf_kv_array_get_i32, i32, |v: i32| v as u64)),
        (6, get!(tern_gguf_kv_array_get_f32, f32, |v: f32| u64::from(v.to_bits()))),
        (7, get!(tern_gguf_kv_array_get_bool, u8, u64::from)),
        (10, get!(tern_gguf_kv_array_get_u64, u64, |v| v)),
        (11, get!(tern_gguf_kv_array_get_i64, i64, |v: i64| v as u64)),
        (12, get!(tern_gguf_kv_array_get_f64, f64, f64::to_bits)),
    ]
}

/// A scalar value's type id and bits, as the getters report them; `None` for strings and
/// arrays.
fn bits(value: &Value) -> Option<(u32, u64)> {
    let ty = value.value_type() as u32;
    Some((ty, match *value {
        Value::U8(v) => u64::from(v),
        Value::I8(v) => v as u64,
        Value::U16(v) => u64::from(v),
        Value::I16(v) => v as u64,
        Value::U32(v) => u64::from(v),
        Value::I32(v) => v as u64,
        Value::F32(v) => u64::from(v.to_bits()),
        Value::Bool(v) => u64::from(v),
        Value::U64(v) => v,
        Value::I64(v) => v as u64,
        Value::F64(v) => v.to_bits(),
        Value::String(_) | Value::Array(_) => return None,
    }))
}

/// Checks the getters' verdicts against the Rust value: the getter of its type returns it,
/// every other refuses with TERN_ERR_INVALID_ARGUMENT.
fn check_getters(got: [(u32, Got); 11], want: Option<(u32, u64)>) {
    for (ty, (status, v)) in got {
        match want {
            Some((t, w)) if t == ty => assert!(status == TERN_OK && v == w, "type {ty}: status {status}"),
            _ => assert!(status == TERN_ERR_INVALID_ARGUMENT, "type {ty}: status {status}"),
        }
    }
}

/// The metadata through C, checked against the Rust reader.
///
/// # Safety
/// `g` is a live handle over the bytes `file` parsed.
unsafe fn metadata_through_c(g: *const tern_gguf, file: &Gguf) {
    // SAFETY (the block): a live handle and writable locals.
    unsafe {
        assert_eq!(tern_gguf_kv_count(g), file.metadata.len());
        for (i, kv) in file.metadata.iter().enumerate() {
            let (mut key, mut len, mut ty) = (null(), 0, u32::MAX);
            assert!(tern_gguf_kv_key(g, i, &mut key, &mut len) == TERN_OK);
            assert_eq!(std::slice::from_raw_parts(key.cast::<u8>(), len), kv.key.as_bytes());
            if let Ok(c_key) = std::ffi::CString::new(kv.key) {
                let mut index = usize::MAX;
                assert!(tern_gguf_kv_find(g, c_key.as_ptr(), &mut index) == TERN_OK);
                assert_eq!(index, i, "keys are unique");
            }
            assert!(tern_gguf_kv_type(g, i, &mut ty) == TERN_OK);
            assert_eq!(ty, kv.value.value_type() as u32);
            check_getters(scalars(g, i), bits(&kv.value));
            let (mut s, mut n) = (null(), 0);
            let status = tern_gguf_kv_get_str(g, i, &mut s, &mut n);
            match kv.value {
                Value::String(want) => {
                    assert!(status == TERN_OK);
                    assert_eq!(std::slice::from_raw_parts(s.cast::<u8>(), n), want);
                }
                _ => assert!(status == TERN_ERR_INVALID_ARGUMENT),
            }
            let mut elem_type = u32::MAX;
            let status = tern_gguf_kv_array_len(g, i, &mut elem_type, &mut n);
            let Value::Array(array) = kv.value else {
                assert!(status == TERN_ERR_INVALID_ARGUMENT);
                continue;
            };
            assert!(status == TERN_OK);
            assert_eq!((elem_type, n as u64), (array.elem_type as u32, array.len));
            let last = array.len.saturating_sub(1);
            for e in (0..array.len.min(4)).chain([last, array.len]) {
                let want = array.get(e);
                for (ty, (status, v)) in elements(g, i, e as usize) {
                    if ty != array.elem_type as u32 {
                        assert!(status == TERN_ERR_INVALID_ARGUMENT, "type {ty}: status {status}");
                        continue;
                    }
                    match want.as_ref().and_then(bits) {
                        Some((_, w)) => assert!(status == TERN_OK && v == w, "type {ty}: status {status}"),
                        None => assert!(status == TERN_ERR_OUT_OF_BOUNDS, "past the end: status {status}"),
                    }
                }
                let status = tern_gguf_kv_array_get_str(g, i, e as usize, &mut s, &mut n);
                match want {
                    _ if array.elem_type != ValueType::String => assert!(status == TERN_ERR_INVALID_ARGUMENT),
                    Some(Value::String(w)) => {
                        assert!(status == TERN_OK);
                        assert_eq!(std::slice::from_raw_parts(s.cast::<u8>(), n), w);
                    }
                    _ => assert!(status == TERN_ERR_OUT_OF_BOUNDS, "past the end: status {status}"),
                }
            }
        }
        let mut ty = 0;
        assert!(tern_gguf_kv_type(g, file.metadata.len(), &mut ty) == TERN_ERR_OUT_OF_BOUNDS);
    }
}
