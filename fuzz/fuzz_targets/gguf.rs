//! The GGUF reader on arbitrary bytes.
//!
//! Properties: `Gguf::parse` never panics, never allocates more than the input can
//! describe, and returns either an error or a file whose every metadata value can be
//! walked (arrays included, their printing too) and whose every tensor of a known type
//! hands out bytes inside the data section, which wrap as a tensor of its format (when the
//! shape fits the format) and validate and decode without panicking.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tern::gguf::{Gguf, Value};
use tern::Tensor;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = Gguf::parse(data) else { return };
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
