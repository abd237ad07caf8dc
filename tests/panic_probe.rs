//! A panic inside a real export becomes TERN_ERR_PANIC (or the export's documented fallback
//! value), writes no output, and leaves the process and the library working.
//!
//! Needs the test-only feature: `cargo test --features panic-probe --test panic_probe`.
#![cfg(feature = "panic-probe")]

use std::ffi::CStr;
use std::ptr;
use tern::ffi::guard::panic_probe;
use tern::ffi::*;

const CANARY: f32 = -12345.5;

fn encoding(format: u32) -> *const tern_encoding {
    let mut enc = ptr::null();
    // SAFETY: `enc` is a writable out-parameter.
    assert_eq!(unsafe { tern_encoding_get(format, &mut enc) }, TERN_OK);
    enc
}

/// Runs `call` with the probe armed, then unarmed: the first must report a panic and
/// write nothing (checked by `untouched`), the second must succeed.
fn probe(what: &str, mut call: impl FnMut() -> tern_status, mut untouched: impl FnMut() -> bool) {
    panic_probe::arm();
    assert_eq!(call(), TERN_ERR_PANIC, "{what}: the injected panic is not reported");
    assert!(untouched(), "{what}: a panicked call wrote its output");
    assert_eq!(call(), TERN_OK, "{what}: the next call fails");
}

/// The guard itself, without an export around it: the probe fires in `guard` and
/// `guard_value` alike, once per arming.
#[test]
fn the_probe_fires_once_inside_the_guard() {
    panic_probe::arm();
    assert_eq!(guard(|| Ok(())), TERN_ERR_PANIC);
    assert_eq!(guard(|| Ok(())), TERN_OK, "the probe is one shot");
    panic_probe::arm();
    assert_eq!(guard_value(7u32, || 3), 7);
    assert_eq!(guard_value(7u32, || 3), 3);
}

#[test]
fn panicking_exports_report_panic_and_write_nothing() {
    let tq2 = encoding(TERN_FORMAT_TQ2_0);
    let src: Vec<f32> = (0..512).map(|i| (i % 7) as f32 - 3.0).collect();

    let mut dst = vec![0xA5u8; 132];
    let dst_ptr = dst.as_mut_ptr();
    // SAFETY (all calls in this test): buffers are live and as long as the lengths passed,
    // handles live until freed, out-parameters writable.
    probe(
        "tern_encode",
        || unsafe { tern_encode(tq2, src.as_ptr(), 2, 256, dst_ptr.cast(), 132) },
        || unsafe { std::slice::from_raw_parts(dst_ptr, 132) }.iter().all(|&b| b == 0xA5),
    );

    let mut tensor = ptr::null_mut();
    let tensor_out = ptr::from_mut(&mut tensor);
    probe(
        "tern_tensor_wrap",
        || unsafe { tern_tensor_wrap(tq2, dst_ptr.cast_const().cast(), 132, 2, 256, tensor_out) },
        || unsafe { tensor_out.read() }.is_null(),
    );

    let mut x = CANARY;
    let x_ptr = ptr::from_mut(&mut x);
    probe("tern_tensor_get", || unsafe { tern_tensor_get(tensor, 1, 5, x_ptr) }, || unsafe { x_ptr.read() } == CANARY);
    assert_ne!(x, CANARY);

    let mut out = vec![CANARY; 512];
    let out_ptr = out.as_mut_ptr();
    probe(
        "tern_tensor_decode",
        || unsafe { tern_tensor_decode(tensor, out_ptr, 512) },
        || unsafe { std::slice::from_raw_parts(out_ptr, 512) }.iter().all(|&v| v == CANARY),
    );
    assert!(out.iter().any(|&v| v != CANARY));

    // The matmul, after probing the creation of its dispatcher and scope.
    let mut dispatcher = ptr::null_mut();
    let dispatcher_out = ptr::from_mut(&mut dispatcher);
    probe(
        "tern_dispatcher_new",
        || unsafe { tern_dispatcher_new(ptr::null(), dispatcher_out) },
        || unsafe { dispatcher_out.read() }.is_null(),
    );
    let mut scope = ptr::null_mut();
    let scope_out = ptr::from_mut(&mut scope);
    probe("tern_scope_new", || unsafe { tern_scope_new(0, scope_out) }, || unsafe { scope_out.read() }.is_null());
    let act_values = vec![0.5f32; 256];
    let mut act = ptr::null_mut();
    let f32_enc = encoding(TERN_FORMAT_F32);
    assert_eq!(unsafe { tern_tensor_wrap(f32_enc, act_values.as_ptr().cast(), 1024, 1, 256, &mut act) }, TERN_OK);
    let mut y = [CANARY; 2];
    panic_probe::arm();
    assert_eq!(unsafe { tern_matmul(dispatcher, act, tensor, scope, y.as_mut_ptr(), 2) }, TERN_ERR_PANIC);
    assert_eq!(y, [CANARY; 2], "tern_matmul wrote after panicking");
    let mut stats = tern_scope_stats { bytes_in_use: 0, high_water: 0, allocations: 0, capacity: 0, generation: 0 };
    assert_eq!(unsafe { tern_scope_get_stats(scope, &mut stats) }, TERN_OK);
    assert_eq!(stats.allocations, 0, "the panicked matmul ran its adapter");
    assert_eq!(unsafe { tern_matmul(dispatcher, act, tensor, scope, y.as_mut_ptr(), 2) }, TERN_OK);
    assert_ne!(y, [CANARY; 2]);

    // Exports that return a value fall back to their documented value.
    panic_probe::arm();
    assert_eq!(unsafe { tern_tensor_rows(tensor) }, 0);
    assert_eq!(unsafe { tern_tensor_rows(tensor) }, 2);
    panic_probe::arm();
    assert_eq!(unsafe { tern_encoding_format(tq2) }, 0);
    panic_probe::arm();
    // SAFETY: tern_status_str never returns NULL and its strings are static.
    let text = unsafe { CStr::from_ptr(tern_status_str(TERN_OK)) }.to_str().unwrap();
    assert!(!text.is_empty(), "tern_status_str returned an empty string after panicking");
    assert!(unsafe { CStr::from_ptr(tern_status_str(TERN_ERR_PANIC)) }.to_str().unwrap().starts_with("TERN_ERR_PANIC"));

    // SAFETY: each handle is live and freed once.
    unsafe {
        tern_tensor_free(act);
        tern_tensor_free(tensor);
        tern_scope_free(scope);
        tern_dispatcher_free(dispatcher);
    }
}

#[test]
fn the_probe_is_per_thread() {
    panic_probe::arm();
    let other = std::thread::spawn(|| {
        let mut format = 0;
        // SAFETY: a writable out-parameter.
        unsafe { tern_format_from_ggml_type(34, &mut format) }
    });
    assert_eq!(other.join().unwrap(), TERN_OK, "another thread's call fired this thread's probe");
    let mut format = 0;
    // SAFETY: a writable out-parameter.
    assert_eq!(unsafe { tern_format_from_ggml_type(34, &mut format) }, TERN_ERR_PANIC);
    assert_eq!(format, 0);
}
