//! The C boundary's own machinery, below the exports: the guard that turns errors and panics
//! into statuses and the thread's last error, the pointer checks every export makes, and
//! the mapping of every error to its documented status.

use std::ffi::CStr;
use tern::ffi::guard::*;
use tern::ffi::*;
use tern::{Error, Format};

fn last() -> String {
    // SAFETY: last_error points to the thread's NUL-terminated buffer.
    unsafe { CStr::from_ptr(last_error()) }.to_str().unwrap().to_owned()
}

#[test]
#[cfg_attr(not(panic = "unwind"), ignore = "panics abort on this target (wasm32): nothing can catch them")]
fn guard_maps_ok_errors_and_panics_and_sets_the_last_error() {
    assert_eq!(guard(|| Err(Error::StaleTensor.into())), TERN_ERR_STALE_TENSOR);
    assert_eq!(last(), Error::StaleTensor.to_string());
    assert_eq!(guard(|| Ok(())), TERN_OK);
    assert_eq!(last(), "", "a success clears the message");
    assert_eq!(guard(|| Err(Status::null("out"))), TERN_ERR_NULL_POINTER);
    assert_eq!(last(), "argument `out` is NULL");
    assert_eq!(guard(|| panic!("bug {}", 42)), TERN_ERR_PANIC);
    assert_eq!(last(), "tern panicked (a bug in tern): bug 42");
    assert_eq!(guard(|| Err(Status::new(TERN_ERR_INVALID_ARGUMENT, "a\0b"))), TERN_ERR_INVALID_ARGUMENT);
    assert_eq!(last(), "ab", "an interior NUL would cut the C string");
    assert_eq!(guard_value(7u32, || panic!("bug")), 7);
    assert_eq!(guard_value(7u32, || 3), 3);
    assert_eq!(last(), "ab", "value exports leave the message alone");
}

#[test]
fn slices_refuse_null_misaligned_and_oversized() {
    let xs = [1.0f32, 2.0];
    let code = |r: FfiResult<&[f32]>| r.err().map(|s| s.code);
    // SAFETY: (all calls): each pointer is NULL, misaligned or oversized (refused before
    // any read), or points into `xs` with a length inside it.
    unsafe {
        assert_eq!(slice::<f32>(std::ptr::null(), 0, "src"), Err(Status::null("src")));
        assert_eq!(slice(xs.as_ptr(), 2, "src").unwrap(), &xs);
        assert_eq!(slice(xs.as_ptr(), 0, "src").unwrap(), &[] as &[f32]);
        let huge = slice(xs.as_ptr(), usize::MAX / 2, "src").unwrap_err();
        assert_eq!(huge.code, TERN_ERR_INVALID_ARGUMENT);
        assert!(huge.message.starts_with("argument `src`: "), "{}", huge.message);
        let raw = [0u32; 2];
        let odd = (raw.as_ptr() as *const u8).add(1) as *const f32;
        assert_eq!(code(slice(odd, 1, "src")), Some(TERN_ERR_INVALID_ARGUMENT));
        assert_eq!(try_ref::<u32>(std::ptr::null(), "d"), Err(Status::null("d")));
        assert!(Out::<u32>::new(std::ptr::null_mut(), "out").is_err());
    }
}

#[test]
fn disjointness() {
    let buf = [0u32; 4];
    let p = buf.as_ptr();
    let bytes = p.cast::<u8>();
    let overlap = |a: (*const u32, usize), b: (*const u8, usize)| {
        check_disjoint((a.0, a.1, "src"), (b.0, b.1, "dst")).map_err(|s| s.message)
    };
    assert_eq!(check_disjoint((p, 2, "src"), (p.wrapping_add(2), 2, "dst")), Ok(()));
    assert_eq!(overlap((p, 2), (bytes.wrapping_add(7), 1)), Err("argument `dst`: overlaps `src`".into()));
    assert_eq!(overlap((p, 2), (bytes.wrapping_add(8), 8)), Ok(()));
    assert!(overlap((p.wrapping_add(1), 1), (bytes, 16)).is_err());
    assert_eq!(overlap((p, 0), (bytes, 16)), Ok(()));
    assert_eq!(overlap((p, 4), (std::ptr::null(), usize::MAX)), Ok(()));
}

#[test]
fn every_error_maps_to_its_own_documented_status() {
    let errors = [
        (Error::UnknownFormat(9), TERN_ERR_UNKNOWN_FORMAT),
        (Error::InvalidShape { format: Format::F32, rows: 0, cols: 1, why: "" }, TERN_ERR_INVALID_SHAPE),
        (Error::SizeOverflow { rows: 1, cols: 1 }, TERN_ERR_SIZE_OVERFLOW),
        (Error::LengthMismatch { what: "dst", want: 1, got: 0 }, TERN_ERR_LENGTH_MISMATCH),
        (Error::NonFinite { index: 0 }, TERN_ERR_NON_FINITE),
        (Error::ScaleOverflow { block: 0, amax: 1e9 }, TERN_ERR_SCALE_OVERFLOW),
        (Error::CorruptCode { index: 0 }, TERN_ERR_CORRUPT_CODE),
        (Error::OutOfBounds { row: 1, col: 1, rows: 1, cols: 1 }, TERN_ERR_OUT_OF_BOUNDS),
        (Error::InvalidRowRange { begin: 2, end: 1, rows: 4 }, TERN_ERR_OUT_OF_BOUNDS),
        (Error::StaleTensor, TERN_ERR_STALE_TENSOR),
        (Error::ShapeMismatch("k"), TERN_ERR_SHAPE_MISMATCH),
        (Error::UnknownKernel { name: "x".into(), from: "test" }, TERN_ERR_UNKNOWN_KERNEL),
        (Error::KernelUnavailable("avx"), TERN_ERR_KERNEL_UNAVAILABLE),
        (Error::Unsupported { weight: Format::F32, act: Format::I8Absmax }, TERN_ERR_UNSUPPORTED),
        (Error::ScopeRequired, TERN_ERR_SCOPE_REQUIRED),
        (Error::AllocationFailed(1), TERN_ERR_ALLOCATION_FAILED),
        (Error::InvalidArgument("x"), TERN_ERR_INVALID_ARGUMENT),
        (Error::NotFound { what: "tensor", name: "x".into() }, TERN_ERR_NOT_FOUND),
        (Error::StrictFallback { weight: Format::Tq2_0, act: Format::Tq2_0 }, TERN_ERR_UNSUPPORTED),
        (Error::ExecutorContract { tasks: 8, missed: 1 }, TERN_ERR_INVALID_ARGUMENT),
        (Error::Gguf(tern::GgufError::BadMagic(*b"GGUG")), TERN_ERR_INVALID_FILE),
        (Error::Io("open".into()), TERN_ERR_IO),
        (Error::KernelMismatch { name: "x".into(), weight: Format::Tq2_0 }, TERN_ERR_UNKNOWN_KERNEL),
        (Error::TooManyThreads { requested: 5000, max: 1024 }, TERN_ERR_INVALID_ARGUMENT),
        (Error::ThreadSpawn { index: 1, reason: "x".into() }, TERN_ERR_ALLOCATION_FAILED),
    ];
    for (error, status) in &errors {
        assert_eq!(status_of(error), *status, "{error:?}");
    }
    // Shared statuses, by design: the two index errors; a kernel name that does not
    // serve the weight and an unknown one; a refused thread count and any invalid
    // argument; a thread the OS refused and memory it refused; a strict refusal and an
    // unsupported pair; a broken executor contract and any invalid argument. Every
    // other error has its own.
    let mut seen: Vec<_> = errors.iter().map(|(e, _)| status_of(e)).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), errors.len() - 6, "unexpected errors share a status");
}

#[test]
fn status_strings_name_their_status() {
    // (constant, its name, the stable value the C ABI promises)
    let statuses = [
        (TERN_OK, "TERN_OK", 0),
        (TERN_ERR_NULL_POINTER, "TERN_ERR_NULL_POINTER", 1),
        (TERN_ERR_UNKNOWN_FORMAT, "TERN_ERR_UNKNOWN_FORMAT", 2),
        (TERN_ERR_INVALID_SHAPE, "TERN_ERR_INVALID_SHAPE", 3),
        (TERN_ERR_SIZE_OVERFLOW, "TERN_ERR_SIZE_OVERFLOW", 4),
        (TERN_ERR_LENGTH_MISMATCH, "TERN_ERR_LENGTH_MISMATCH", 5),
        (TERN_ERR_NON_FINITE, "TERN_ERR_NON_FINITE", 6),
        (TERN_ERR_SCALE_OVERFLOW, "TERN_ERR_SCALE_OVERFLOW", 7),
        (TERN_ERR_CORRUPT_CODE, "TERN_ERR_CORRUPT_CODE", 8),
        (TERN_ERR_OUT_OF_BOUNDS, "TERN_ERR_OUT_OF_BOUNDS", 9),
        (TERN_ERR_STALE_TENSOR, "TERN_ERR_STALE_TENSOR", 10),
        (TERN_ERR_SHAPE_MISMATCH, "TERN_ERR_SHAPE_MISMATCH", 11),
        (TERN_ERR_UNKNOWN_KERNEL, "TERN_ERR_UNKNOWN_KERNEL", 12),
        (TERN_ERR_KERNEL_UNAVAILABLE, "TERN_ERR_KERNEL_UNAVAILABLE", 13),
        (TERN_ERR_UNSUPPORTED, "TERN_ERR_UNSUPPORTED", 14),
        (TERN_ERR_SCOPE_REQUIRED, "TERN_ERR_SCOPE_REQUIRED", 15),
        (TERN_ERR_ALLOCATION_FAILED, "TERN_ERR_ALLOCATION_FAILED", 16),
        (TERN_ERR_INVALID_ARGUMENT, "TERN_ERR_INVALID_ARGUMENT", 17),
        (TERN_ERR_PANIC, "TERN_ERR_PANIC", 18),
        (TERN_ERR_NOT_FOUND, "TERN_ERR_NOT_FOUND", 19),
        (TERN_ERR_INVALID_FILE, "TERN_ERR_INVALID_FILE", 20),
        (TERN_ERR_IO, "TERN_ERR_IO", 21),
    ];
    for (status, name, value) in statuses {
        assert_eq!(status, value, "{name} changed its stable value");
        // SAFETY: tern_status_str returns a static NUL-terminated string.
        let s = unsafe { CStr::from_ptr(tern_status_str(status)) }.to_str().unwrap();
        assert!(s.starts_with(&format!("{name}: ")), "{status}: {s}");
    }
    for unknown in [22, 1000, u32::MAX] {
        // SAFETY: as above.
        let s = unsafe { CStr::from_ptr(tern_status_str(unknown)) };
        assert_eq!(s, c"unknown tern_status value");
    }
}
