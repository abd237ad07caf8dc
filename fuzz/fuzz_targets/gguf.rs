//! The GGUF reader on arbitrary bytes, through the C entry points and the Rust API.
//!
//! Properties: `tern_gguf_open_bytes` accepts exactly what `Gguf::parse` accepts, never
//! panics (a panic would come back as TERN_ERR_PANIC, which fails here) and writes its
//! out-parameter only on success; its table agrees with the Rust reader's; every name is
//! found at its own index; every tensor either wraps (over the input's own bytes, rows =
//! ne[1], cols = ne[0]) and validates and decodes, or is refused with a status. Through the
//! Rust API: every metadata value can be walked (arrays included, their printing too) and
//! every tensor of a known type hands out bytes inside the data section.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::ptr::{null, null_mut};
use tern::ffi::*;
use tern::gguf::{Gguf, Value};
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
        let mut index = 0;
        assert!(tern_gguf_tensor_info_get(g, file.tensors.len(), null_mut()) != TERN_OK);
        let _ = tern_gguf_find(g, c"".as_ptr(), &mut index);
        tern_gguf_free(g);
    }
}
