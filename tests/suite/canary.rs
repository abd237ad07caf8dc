//! Every export of include/tern.h, refused: a table with one entry per declared function
//! (a new export without an entry fails `every_export_has_an_entry`), each making refused
//! calls (NULL pointers, bad lengths, bad shapes, bad ids) with canary-filled outputs and
//! out-parameters, and asserting the status and that nothing was written. Functions that
//! cannot fail say why and check their NULL (or out-of-range) behaviour instead.

use std::collections::BTreeSet;
use std::ffi::{c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use tern::ffi::*;

const CANARY: f32 = -31337.25;
const CANARY_BYTE: u8 = 0xA5;
const CANARY_USIZE: usize = 0xDEAD_BEEF;

enum Kind {
    /// The calls are refused with a status and must write nothing.
    Refused,
    /// The function has no failure status; the text says why.
    CannotFail(&'static str),
}

struct Entry {
    name: &'static str,
    kind: Kind,
    check: fn(),
}

fn sentinel<T>() -> *mut T {
    ptr::NonNull::dangling().as_ptr()
}

fn enc(format: u32) -> *const tern_encoding {
    let mut e = ptr::null();
    // SAFETY: a writable out-parameter.
    assert_eq!(unsafe { tern_encoding_get(format, &mut e) }, TERN_OK);
    e
}

/// A 2 x 256 TQ2_0 tensor of encoded ramp values, owned by the handle.
fn tq2_tensor() -> *mut tern_tensor {
    let src: Vec<f32> = (0..512).map(|i| (i % 5) as f32 - 2.0).collect();
    let mut t = ptr::null_mut();
    // SAFETY: `src` holds 512 floats, `t` is writable.
    assert_eq!(unsafe { tern_tensor_encode(enc(TERN_FORMAT_TQ2_0), src.as_ptr(), 512, 2, 256, &mut t) }, TERN_OK);
    t
}

/// A 1 x 256 F32 tensor owned by the handle.
fn f32_tensor() -> *mut tern_tensor {
    let src = vec![0.25f32; 256];
    let mut t = ptr::null_mut();
    // SAFETY: as above.
    assert_eq!(unsafe { tern_tensor_encode(enc(TERN_FORMAT_F32), src.as_ptr(), 256, 1, 256, &mut t) }, TERN_OK);
    t
}

static EVENTS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count_event(_: *mut c_void, _: *const tern_event) {
    EVENTS.fetch_add(1, Ordering::SeqCst);
}

fn canaries(n: usize) -> Vec<f32> {
    vec![CANARY; n]
}

fn untouched(xs: &[f32]) -> bool {
    xs.iter().all(|&x| x.to_bits() == CANARY.to_bits())
}

// SAFETY (every `unsafe` block below): pointers are NULL, dangling sentinels that a refused
// call must not touch, or live buffers at least as long as the lengths passed; handles
// are live until freed once.

fn requantize_i8_absmax() {
    let (f32_t, tq2) = (f32_tensor(), tq2_tensor());
    let mut scope = ptr::null_mut();
    unsafe {
        assert_eq!(tern_scope_new(0, &mut scope), TERN_OK);
        EVENTS.store(0, Ordering::SeqCst);
        let mut out = sentinel();
        let cb = Some(count_event as unsafe extern "C" fn(*mut c_void, *const tern_event));
        assert_eq!(tern_requantize_i8_absmax(ptr::null(), scope, cb, ptr::null_mut(), &mut out), TERN_ERR_NULL_POINTER);
        assert_eq!(
            tern_requantize_i8_absmax(f32_t, ptr::null_mut(), cb, ptr::null_mut(), &mut out),
            TERN_ERR_NULL_POINTER
        );
        assert_eq!(tern_requantize_i8_absmax(tq2, scope, cb, ptr::null_mut(), &mut out), TERN_ERR_UNSUPPORTED);
        assert_eq!(
            tern_requantize_i8_absmax(f32_t, scope, cb, ptr::null_mut(), ptr::null_mut()),
            TERN_ERR_NULL_POINTER
        );
        assert_eq!(out, sentinel());
        assert_eq!(EVENTS.load(Ordering::SeqCst), 0, "a refused adapter reported an event");
        let mut stats = tern_scope_stats { bytes_in_use: 1, high_water: 1, allocations: 1, capacity: 1, generation: 1 };
        assert_eq!(tern_scope_get_stats(scope, &mut stats), TERN_OK);
        assert_eq!(stats.allocations, 0, "a refused adapter allocated");
        tern_scope_free(scope);
        tern_tensor_free(f32_t);
        tern_tensor_free(tq2);
    }
}

fn requantize_i8_absmax_into() {
    let src = [1.0f32, f32::NAN, 3.0, 4.0];
    let (mut codes, mut scales) = ([CANARY_BYTE as i8; 4], canaries(1));
    let cb = Some(count_event as unsafe extern "C" fn(*mut c_void, *const tern_event));
    EVENTS.store(0, Ordering::SeqCst);
    unsafe {
        let mut call = |src: *const f32, codes_len, scales_len| {
            tern_requantize_i8_absmax_into(
                src,
                4,
                1,
                4,
                codes.as_mut_ptr(),
                codes_len,
                scales.as_mut_ptr(),
                scales_len,
                cb,
                ptr::null_mut(),
            )
        };
        assert_eq!(call(ptr::null(), 4, 1), TERN_ERR_NULL_POINTER);
        assert_eq!(call(src.as_ptr(), 3, 1), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(call(src.as_ptr(), 4, 0), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(call(src.as_ptr(), 4, 1), TERN_ERR_NON_FINITE);
        assert_eq!(
            tern_requantize_i8_absmax_into(
                src.as_ptr(),
                4,
                0,
                4,
                codes.as_mut_ptr(),
                4,
                scales.as_mut_ptr(),
                1,
                cb,
                ptr::null_mut()
            ),
            TERN_ERR_INVALID_SHAPE
        );
    }
    assert_eq!(codes, [CANARY_BYTE as i8; 4]);
    assert!(untouched(&scales));
    assert_eq!(EVENTS.load(Ordering::SeqCst), 0);
}

fn dispatcher_new() {
    let mut d = sentinel();
    let bogus = tern_dispatcher_options { n_threads: 2, kernel: c"no_such_kernel".as_ptr(), ..Default::default() };
    let not_utf8 = tern_dispatcher_options { n_threads: 1, kernel: c"\xff".as_ptr(), ..Default::default() };
    unsafe {
        assert_eq!(tern_dispatcher_new(ptr::null(), ptr::null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_dispatcher_new(&bogus, &mut d), TERN_ERR_UNKNOWN_KERNEL);
        assert_eq!(tern_dispatcher_new(&not_utf8, &mut d), TERN_ERR_INVALID_ARGUMENT);
    }
    assert_eq!(d, sentinel());
}

fn dispatcher_set_sink() {
    // Nothing is written; the refusal is the status.
    assert_eq!(unsafe { tern_dispatcher_set_sink(ptr::null_mut(), None, ptr::null_mut()) }, TERN_ERR_NULL_POINTER);
}

fn dispatcher_free() {
    unsafe { tern_dispatcher_free(ptr::null_mut()) };
}

fn matmul() {
    let (act, weight) = (f32_tensor(), tq2_tensor());
    let (mut d, mut scope) = (ptr::null_mut(), ptr::null_mut());
    let mut out = canaries(4);
    unsafe {
        assert_eq!(tern_dispatcher_new(ptr::null(), &mut d), TERN_OK);
        assert_eq!(tern_scope_new(0, &mut scope), TERN_OK);
        assert_eq!(tern_dispatcher_set_sink(d, Some(count_event), ptr::null_mut()), TERN_OK);
        EVENTS.store(0, Ordering::SeqCst);
        let o = out.as_mut_ptr();
        assert_eq!(tern_matmul(ptr::null(), act, weight, scope, o, 2), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_matmul(d, ptr::null(), weight, scope, o, 2), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_matmul(d, act, weight, scope, ptr::null_mut(), 2), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_matmul(d, act, weight, scope, o, 1), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(tern_matmul(d, act, weight, ptr::null_mut(), o, 2), TERN_ERR_SCOPE_REQUIRED);
        let (narrow_src, mut narrow) = ([1.0f32; 8], ptr::null_mut());
        assert_eq!(tern_tensor_encode(enc(TERN_FORMAT_F32), narrow_src.as_ptr(), 8, 1, 8, &mut narrow), TERN_OK);
        assert_eq!(tern_matmul(d, narrow, weight, scope, o, 2), TERN_ERR_SHAPE_MISMATCH, "k: 8 vs 256");
        tern_tensor_free(narrow);
        assert_eq!(EVENTS.load(Ordering::SeqCst), 0, "a refused matmul reported an event");
        tern_dispatcher_free(d);
        tern_scope_free(scope);
        tern_tensor_free(act);
        tern_tensor_free(weight);
    }
    assert!(untouched(&out));
}

fn bitnet_gemv() {
    let (weight, f32_act) = (tq2_tensor(), f32_tensor());
    let mut out = canaries(4);
    unsafe {
        let o = out.as_mut_ptr();
        assert_eq!(tern_bitnet_gemv(ptr::null(), ptr::null(), weight, 0, 2, o, 2), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_bitnet_gemv(ptr::null(), f32_act, weight, 0, 2, o, 2), TERN_ERR_UNSUPPORTED);
        assert_eq!(tern_bitnet_gemv(c"no_such_kernel".as_ptr(), f32_act, weight, 0, 2, o, 2), TERN_ERR_UNSUPPORTED);
        tern_tensor_free(weight);
        tern_tensor_free(f32_act);
    }
    assert!(untouched(&out));
    // With a valid I8_ABSMAX activation: a reversed or too long range, a short output.
    let weight = tq2_tensor();
    let mut bytes = vec![1u8; 256];
    bytes.extend_from_slice(&0.5f32.to_le_bytes());
    let mut act = ptr::null_mut();
    unsafe {
        assert_eq!(tern_tensor_wrap(enc(TERN_FORMAT_I8_ABSMAX), bytes.as_ptr().cast(), 260, 1, 256, &mut act), TERN_OK);
        let o = out.as_mut_ptr();
        assert_eq!(tern_bitnet_gemv(ptr::null(), act, weight, 2, 1, o, 2), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_bitnet_gemv(ptr::null(), act, weight, 0, 3, o, 2), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_bitnet_gemv(ptr::null(), act, weight, 0, 2, o, 1), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(tern_bitnet_gemv(c"no_such_kernel".as_ptr(), act, weight, 0, 2, o, 2), TERN_ERR_UNKNOWN_KERNEL);
        // An activation of another k (4, against the weight's 256): refused before the
        // kernel lays it out in 256-element blocks (found by the matmul fuzz target).
        let mut narrow = ptr::null_mut();
        assert_eq!(tern_tensor_wrap(enc(TERN_FORMAT_I8_ABSMAX), bytes.as_ptr().cast(), 8, 1, 4, &mut narrow), TERN_OK);
        assert_eq!(tern_bitnet_gemv(ptr::null(), narrow, weight, 0, 2, o, 2), TERN_ERR_SHAPE_MISMATCH);
        tern_tensor_free(narrow);
        tern_tensor_free(act);
        tern_tensor_free(weight);
    }
    assert!(untouched(&out));
}

fn bitnet_gemv_tile() {
    let weight = tq2_tensor();
    let mut bytes = vec![1u8; 2 * 256];
    bytes.extend_from_slice(&[0.5f32.to_le_bytes(), 0.25f32.to_le_bytes()].concat());
    let (mut act, mut out, mut ran) = (ptr::null_mut(), canaries(4), sentinel::<std::ffi::c_char>().cast_const());
    unsafe {
        assert_eq!(tern_tensor_wrap(enc(TERN_FORMAT_I8_ABSMAX), bytes.as_ptr().cast(), 520, 2, 256, &mut act), TERN_OK);
        let o = out.as_mut_ptr();
        let call = |a, rows: (usize, usize), tokens: (usize, usize), len, ran| {
            tern_bitnet_gemv_tile(ptr::null(), a, weight, rows.0, rows.1, tokens.0, tokens.1, o, len, ran)
        };
        assert_eq!(call(ptr::null(), (0, 2), (0, 2), 4, &mut ran), TERN_ERR_NULL_POINTER);
        assert_eq!(call(act, (0, 2), (2, 1), 4, &mut ran), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(call(act, (0, 2), (0, 3), 4, &mut ran), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(call(act, (1, 0), (0, 2), 4, &mut ran), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(call(act, (0, 2), (0, 2), 3, &mut ran), TERN_ERR_LENGTH_MISMATCH);
        let bad = c"no_such_kernel".as_ptr();
        assert_eq!(tern_bitnet_gemv_tile(bad, act, weight, 0, 2, 0, 2, o, 4, &mut ran), TERN_ERR_UNKNOWN_KERNEL);
        tern_tensor_free(act);
        tern_tensor_free(weight);
    }
    assert!(untouched(&out));
    assert_eq!(ran, sentinel::<std::ffi::c_char>().cast_const());
}

fn matmul_many() {
    let (act, w) = (f32_tensor(), tq2_tensor());
    let (mut d, mut scope) = (ptr::null_mut(), ptr::null_mut());
    let (mut a, mut b) = (canaries(2), canaries(2));
    unsafe {
        assert_eq!(tern_dispatcher_new(ptr::null(), &mut d), TERN_OK);
        assert_eq!(tern_scope_new(0, &mut scope), TERN_OK);
        assert_eq!(tern_dispatcher_set_sink(d, Some(count_event), ptr::null_mut()), TERN_OK);
        EVENTS.store(0, Ordering::SeqCst);
        let ws = [w.cast_const(), w.cast_const()];
        let outs = [a.as_mut_ptr(), b.as_mut_ptr()];
        let call = |d, ws: *const *const tern_tensor, n, scope, outs: *const *mut f32, lens: &[usize; 2]| {
            tern_matmul_many(d, act, ws, n, scope, outs, lens.as_ptr())
        };
        assert_eq!(call(ptr::null(), ws.as_ptr(), 2, scope, outs.as_ptr(), &[2, 2]), TERN_ERR_NULL_POINTER);
        assert_eq!(call(d, ptr::null(), 2, scope, outs.as_ptr(), &[2, 2]), TERN_ERR_NULL_POINTER);
        assert_eq!(call(d, ws.as_ptr(), 2, scope, ptr::null(), &[2, 2]), TERN_ERR_NULL_POINTER);
        assert_eq!(call(d, ws.as_ptr(), 0, scope, outs.as_ptr(), &[2, 2]), TERN_ERR_INVALID_ARGUMENT);
        assert_eq!(call(d, ws.as_ptr(), 2, scope, outs.as_ptr(), &[2, 1]), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(call(d, ws.as_ptr(), 2, ptr::null_mut(), outs.as_ptr(), &[2, 2]), TERN_ERR_SCOPE_REQUIRED);
        assert_eq!(
            call(d, ws.as_ptr(), 2, scope, [a.as_mut_ptr(), a.as_mut_ptr()].as_ptr(), &[2, 2]),
            TERN_ERR_INVALID_ARGUMENT
        );
        assert_eq!(EVENTS.load(Ordering::SeqCst), 0, "a refused matmul_many reported an event");
        tern_dispatcher_free(d);
        tern_scope_free(scope);
        tern_tensor_free(act);
        tern_tensor_free(w);
    }
    assert!(untouched(&a) && untouched(&b));
}

fn kernel_count() {
    assert!(tern_kernel_count() >= 4, "the reference kernels are always built in");
}

fn kernel_info_get() {
    let canary = tern_kernel_info { name: sentinel(), weight: 77, act: 77, available: 77 };
    let mut info = canary;
    unsafe {
        assert_eq!(tern_kernel_info_get(tern_kernel_count(), &mut info), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_kernel_info_get(0, ptr::null_mut()), TERN_ERR_NULL_POINTER);
    }
    assert_eq!((info.name, info.weight, info.act, info.available), (canary.name, 77, 77, 77));
}

fn encoding_get() {
    let mut e = sentinel::<tern_encoding>().cast_const();
    unsafe {
        assert_eq!(tern_encoding_get(0, &mut e), TERN_ERR_UNKNOWN_FORMAT);
        assert_eq!(tern_encoding_get(12, &mut e), TERN_ERR_UNKNOWN_FORMAT);
        assert_eq!(tern_encoding_get(1, ptr::null_mut()), TERN_ERR_NULL_POINTER);
    }
    assert_eq!(e, sentinel::<tern_encoding>().cast_const());
}

fn format_from_ggml_type() {
    let mut f = 77;
    unsafe {
        assert_eq!(tern_format_from_ggml_type(1, &mut f), TERN_ERR_UNKNOWN_FORMAT, "F16 has no tern format");
        assert_eq!(tern_format_from_ggml_type(34, ptr::null_mut()), TERN_ERR_NULL_POINTER);
    }
    assert_eq!(f, 77);
}

fn encoding_format() {
    assert_eq!(unsafe { tern_encoding_format(ptr::null()) }, 0);
}

fn encoding_name() {
    assert_eq!(unsafe { CStr::from_ptr(tern_encoding_name(ptr::null())) }.to_bytes(), b"");
}

fn encoding_block_spec() {
    let canary = tern_block_spec {
        blocking: 77,
        scale_placement: 77,
        block_elems: CANARY_USIZE,
        block_bytes: CANARY_USIZE,
        code_bits: CANARY_USIZE,
        scale_bytes: CANARY_USIZE,
        cols_multiple: CANARY_USIZE,
        bits_per_element: -1.0,
        activation_hint: 77,
    };
    let mut spec = canary;
    unsafe {
        assert_eq!(tern_encoding_block_spec(ptr::null(), &mut spec), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_encoding_block_spec(enc(TERN_FORMAT_TQ1_0), ptr::null_mut()), TERN_ERR_NULL_POINTER);
    }
    assert_eq!(format!("{spec:?}"), format!("{canary:?}"));
}

fn encoding_bytes_for() {
    let mut len = CANARY_USIZE;
    unsafe {
        let tq1 = enc(TERN_FORMAT_TQ1_0);
        assert_eq!(tern_encoding_bytes_for(tq1, 1, 255, &mut len), TERN_ERR_INVALID_SHAPE);
        assert_eq!(tern_encoding_bytes_for(tq1, 0, 256, &mut len), TERN_ERR_INVALID_SHAPE);
        assert_eq!(tern_encoding_bytes_for(enc(TERN_FORMAT_F32), usize::MAX, 2, &mut len), TERN_ERR_SIZE_OVERFLOW);
        assert_eq!(tern_encoding_bytes_for(ptr::null(), 1, 256, &mut len), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_encoding_bytes_for(tq1, 1, 256, ptr::null_mut()), TERN_ERR_NULL_POINTER);
    }
    assert_eq!(len, CANARY_USIZE);
}

/// 256 floats that encode in every format, and the same with a NaN.
fn sources() -> (Vec<f32>, Vec<f32>) {
    let good: Vec<f32> = (0..256).map(|i| (i % 3) as f32 - 1.0).collect();
    let mut bad = good.clone();
    bad[100] = f32::NAN;
    (good, bad)
}

fn encode() {
    let (good, bad) = sources();
    let mut dst = [CANARY_BYTE; 70];
    let tq2 = enc(TERN_FORMAT_TQ2_0);
    unsafe {
        let d = dst.as_mut_ptr().cast();
        assert_eq!(tern_encode(tq2, good.as_ptr(), 1, 256, d, 65), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(tern_encode(tq2, bad.as_ptr(), 1, 256, d, 66), TERN_ERR_NON_FINITE);
        assert_eq!(tern_encode(tq2, good.as_ptr(), 1, 128, d, 66), TERN_ERR_INVALID_SHAPE);
        let huge: Vec<f32> = good.iter().map(|x| x * 1e6).collect();
        assert_eq!(tern_encode(tq2, huge.as_ptr(), 1, 256, d, 66), TERN_ERR_SCALE_OVERFLOW);
        assert_eq!(tern_encode(tq2, ptr::null(), 1, 256, d, 66), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_encode(ptr::null(), good.as_ptr(), 1, 256, d, 66), TERN_ERR_NULL_POINTER);
    }
    assert!(dst.iter().all(|&b| b == CANARY_BYTE));
}

fn encode_checked() {
    let (good, bad) = sources();
    let mut dst = [CANARY_BYTE; 70];
    let tq1 = enc(TERN_FORMAT_TQ1_0);
    unsafe {
        let d = dst.as_mut_ptr().cast();
        assert_eq!(tern_encode_checked(tq1, good.as_ptr(), 255, 1, 256, d, 54), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(tern_encode_checked(tq1, bad.as_ptr(), 256, 1, 256, d, 54), TERN_ERR_NON_FINITE);
        assert_eq!(tern_encode_checked(tq1, good.as_ptr(), 256, 1, 256, d, 53), TERN_ERR_LENGTH_MISMATCH);
    }
    assert!(dst.iter().all(|&b| b == CANARY_BYTE));
}

fn decode() {
    let bytes = [0u8; 66];
    let mut dst = canaries(257);
    let tq2 = enc(TERN_FORMAT_TQ2_0);
    unsafe {
        let d = dst.as_mut_ptr();
        assert_eq!(tern_decode(tq2, bytes.as_ptr().cast(), 65, 1, 256, d, 256), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(tern_decode(tq2, bytes.as_ptr().cast(), 66, 1, 256, d, 255), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(tern_decode(tq2, bytes.as_ptr().cast(), 66, 1, 255, d, 256), TERN_ERR_INVALID_SHAPE);
        assert_eq!(tern_decode(tq2, ptr::null(), 66, 1, 256, d, 256), TERN_ERR_NULL_POINTER);
        // The output overlapping the input is refused too.
        assert_eq!(tern_decode(tq2, d.cast_const().cast(), 66, 1, 256, d, 256), TERN_ERR_INVALID_ARGUMENT);
    }
    assert!(untouched(&dst));
}

fn validate() {
    // Reads only: the refusal is the status, and the input stays as it was.
    let mut bytes = [0u8; 66];
    bytes[0] = 0b11; // a TQ2_0 code 3
    let copy = bytes;
    let tq2 = enc(TERN_FORMAT_TQ2_0);
    unsafe {
        assert_eq!(tern_validate(tq2, bytes.as_ptr().cast(), 66, 1, 256), TERN_ERR_CORRUPT_CODE);
        assert_eq!(tern_validate(tq2, bytes.as_ptr().cast(), 64, 1, 256), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(tern_validate(tq2, ptr::null(), 66, 1, 256), TERN_ERR_NULL_POINTER);
    }
    assert_eq!(bytes, copy);
}

fn bitnet_import() {
    let mut trits = [0i8; 8];
    let mut dst = [CANARY_BYTE; 12];
    unsafe {
        let d = dst.as_mut_ptr().cast();
        trits[3] = 2;
        assert_eq!(tern_bitnet_import(trits.as_ptr(), 8, 1.0, 2, 4, d, 6), TERN_ERR_CORRUPT_CODE);
        trits[3] = -1;
        assert_eq!(tern_bitnet_import(trits.as_ptr(), 8, f32::INFINITY, 2, 4, d, 6), TERN_ERR_NON_FINITE);
        assert_eq!(tern_bitnet_import(trits.as_ptr(), 7, 1.0, 2, 4, d, 6), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(tern_bitnet_import(trits.as_ptr(), 8, 1.0, 2, 4, d, 5), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(tern_bitnet_import(trits.as_ptr(), 8, 1.0, 4, 2, d, 6), TERN_ERR_INVALID_SHAPE);
    }
    assert!(dst.iter().all(|&b| b == CANARY_BYTE));
}

fn transcode() {
    // A valid 4 x 128 BITNET_B1_58 tensor (all zero trits, scale 1), and I2_S room for it.
    let mut src = vec![0x55u8; 4 * 128 / 4 + 4];
    src[128..].copy_from_slice(&1.0f32.to_le_bytes());
    let mut dst = [CANARY_BYTE; 4 * 128 / 4 + 32 + 8];
    let (bit, i2s, i2s_r4) = (enc(TERN_FORMAT_BITNET_B1_58), enc(TERN_FORMAT_I2_S), enc(TERN_FORMAT_I2_S_R4));
    let tq2 = enc(TERN_FORMAT_TQ2_0);
    unsafe {
        let (s, d) = (src.as_ptr().cast(), dst.as_mut_ptr().cast());
        assert_eq!(tern_transcode(tq2, s, 132, 4, 128, i2s, d, 160), TERN_ERR_INVALID_ARGUMENT);
        assert_eq!(tern_transcode(bit, s, 132, 4, 128, tq2, d, 160), TERN_ERR_INVALID_ARGUMENT);
        assert_eq!(tern_transcode(bit, s, 131, 4, 128, i2s, d, 160), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(tern_transcode(bit, s, 132, 4, 128, i2s, d, 159), TERN_ERR_LENGTH_MISMATCH);
        // 2 x 256 fits BITNET_B1_58 but not I2_S_R4 (rows in fours); 8 x 64 not I2_S.
        assert_eq!(tern_transcode(bit, s, 132, 2, 256, i2s_r4, d, 160), TERN_ERR_INVALID_SHAPE);
        assert_eq!(tern_transcode(bit, s, 132, 8, 64, i2s, d, 160), TERN_ERR_INVALID_SHAPE);
        assert_eq!(tern_transcode(ptr::null(), s, 132, 4, 128, i2s, d, 160), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_transcode(bit, s, 132, 4, 128, ptr::null(), d, 160), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_transcode(bit, ptr::null(), 132, 4, 128, i2s, d, 160), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_transcode(bit, s, 132, 4, 128, i2s, ptr::null_mut(), 160), TERN_ERR_NULL_POINTER);
        let mut corrupt = src.clone();
        corrupt[7] = 0xFF; // four code-3 trits
        let c = corrupt.as_ptr().cast();
        assert_eq!(tern_transcode(bit, c, 132, 4, 128, i2s, d, 160), TERN_ERR_CORRUPT_CODE);
        corrupt[7] = 0x55;
        corrupt[128..].copy_from_slice(&(-1.0f32).to_le_bytes());
        assert_eq!(tern_transcode(bit, c, 132, 4, 128, i2s, d, 160), TERN_ERR_CORRUPT_CODE);
        // The output overlapping the input is refused too.
        assert_eq!(
            tern_transcode(bit, s, 132, 4, 128, i2s, src.as_ptr() as *mut c_void, 160),
            TERN_ERR_INVALID_ARGUMENT
        );
    }
    assert!(dst.iter().all(|&b| b == CANARY_BYTE));
    assert_eq!(&src[..128], &[0x55; 128][..], "the input is only read");
}

fn scope_new() {
    let mut s = sentinel();
    unsafe {
        assert_eq!(tern_scope_new(0, ptr::null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_scope_new(usize::MAX, &mut s), TERN_ERR_ALLOCATION_FAILED);
    }
    assert_eq!(s, sentinel());
}

fn scope_reset() {
    assert_eq!(unsafe { tern_scope_reset(ptr::null_mut()) }, TERN_ERR_NULL_POINTER);
}

fn scope_get_stats() {
    let canary = tern_scope_stats { bytes_in_use: 7, high_water: 7, allocations: 7, capacity: 7, generation: 7 };
    let mut stats = canary;
    let mut scope = ptr::null_mut();
    unsafe {
        assert_eq!(tern_scope_get_stats(ptr::null(), &mut stats), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_scope_new(0, &mut scope), TERN_OK);
        assert_eq!(tern_scope_get_stats(scope, ptr::null_mut()), TERN_ERR_NULL_POINTER);
        tern_scope_free(scope);
    }
    assert_eq!(format!("{stats:?}"), format!("{canary:?}"));
}

fn scope_free() {
    unsafe { tern_scope_free(ptr::null_mut()) };
}

fn status_str() {
    for status in [TERN_OK, TERN_ERR_PANIC, TERN_ERR_PANIC + 1, u32::MAX] {
        let s = tern_status_str(status);
        assert!(!s.is_null());
        assert!(!unsafe { CStr::from_ptr(s) }.to_bytes().is_empty(), "status {status}");
    }
}

fn tensor_wrap() {
    let bytes = [0u8; 66];
    let mut t = sentinel();
    let tq2 = enc(TERN_FORMAT_TQ2_0);
    unsafe {
        assert_eq!(tern_tensor_wrap(tq2, bytes.as_ptr().cast(), 65, 1, 256, &mut t), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(tern_tensor_wrap(tq2, bytes.as_ptr().cast(), 66, 1, 255, &mut t), TERN_ERR_INVALID_SHAPE);
        assert_eq!(tern_tensor_wrap(tq2, ptr::null(), 66, 1, 256, &mut t), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_tensor_wrap(ptr::null(), bytes.as_ptr().cast(), 66, 1, 256, &mut t), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_tensor_wrap(tq2, bytes.as_ptr().cast(), 66, 1, 256, ptr::null_mut()), TERN_ERR_NULL_POINTER);
    }
    assert_eq!(t, sentinel());
}

fn tensor_encode() {
    let (good, bad) = sources();
    let mut t = sentinel();
    let bitnet = enc(TERN_FORMAT_BITNET_B1_58);
    unsafe {
        assert_eq!(tern_tensor_encode(bitnet, bad.as_ptr(), 256, 1, 256, &mut t), TERN_ERR_NON_FINITE);
        assert_eq!(tern_tensor_encode(bitnet, good.as_ptr(), 255, 1, 256, &mut t), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(tern_tensor_encode(bitnet, good.as_ptr(), 256, 128, 2, &mut t), TERN_ERR_INVALID_SHAPE);
    }
    assert_eq!(t, sentinel());
}

fn tensor_get() {
    let t = tq2_tensor();
    let mut x = CANARY;
    unsafe {
        assert_eq!(tern_tensor_get(t, 2, 0, &mut x), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_tensor_get(t, 0, 256, &mut x), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_tensor_get(ptr::null(), 0, 0, &mut x), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_tensor_get(t, 0, 0, ptr::null_mut()), TERN_ERR_NULL_POINTER);
        tern_tensor_free(t);
    }
    assert_eq!(x.to_bits(), CANARY.to_bits());
}

fn tensor_decode() {
    let t = tq2_tensor();
    let mut dst = canaries(512);
    unsafe {
        assert_eq!(tern_tensor_decode(t, dst.as_mut_ptr(), 511), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(tern_tensor_decode(ptr::null(), dst.as_mut_ptr(), 512), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_tensor_decode(t, ptr::null_mut(), 512), TERN_ERR_NULL_POINTER);
        tern_tensor_free(t);
    }
    assert!(untouched(&dst));
}

fn tensor_validate() {
    // Reads only: the refusal is the status. A stale scope tensor is refused too.
    let (act, mut scope, mut i8) = (f32_tensor(), ptr::null_mut(), ptr::null_mut());
    unsafe {
        assert_eq!(tern_tensor_validate(ptr::null()), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_scope_new(0, &mut scope), TERN_OK);
        assert_eq!(tern_requantize_i8_absmax(act, scope, None, ptr::null_mut(), &mut i8), TERN_OK);
        assert_eq!(tern_tensor_validate(i8), TERN_OK);
        assert_eq!(tern_scope_reset(scope), TERN_OK);
        assert_eq!(tern_tensor_validate(i8), TERN_ERR_STALE_TENSOR);
        tern_tensor_free(i8);
        tern_tensor_free(act);
        tern_scope_free(scope);
    }
}

fn tensor_data() {
    let (act, mut scope, mut i8) = (f32_tensor(), ptr::null_mut(), ptr::null_mut());
    let (mut data, mut len) = (sentinel::<c_void>().cast_const(), CANARY_USIZE);
    unsafe {
        assert_eq!(tern_tensor_data(ptr::null(), &mut data, &mut len), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_tensor_data(act, ptr::null_mut(), &mut len), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_tensor_data(act, &mut data, ptr::null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_scope_new(0, &mut scope), TERN_OK);
        assert_eq!(tern_requantize_i8_absmax(act, scope, None, ptr::null_mut(), &mut i8), TERN_OK);
        tern_scope_free(scope);
        assert_eq!(tern_tensor_data(i8, &mut data, &mut len), TERN_ERR_STALE_TENSOR);
        tern_tensor_free(i8);
        tern_tensor_free(act);
    }
    assert_eq!((data, len), (sentinel::<c_void>().cast_const(), CANARY_USIZE));
}

fn tensor_format() {
    assert_eq!(unsafe { tern_tensor_format(ptr::null()) }, 0);
}

fn tensor_rows() {
    assert_eq!(unsafe { tern_tensor_rows(ptr::null()) }, 0);
}

fn tensor_cols() {
    assert_eq!(unsafe { tern_tensor_cols(ptr::null()) }, 0);
}

fn tensor_free() {
    unsafe { tern_tensor_free(ptr::null_mut()) };
}

fn version() {
    assert_eq!(tern_version(), TERN_VERSION_MAJOR << 16 | TERN_VERSION_MINOR << 8 | TERN_VERSION_PATCH);
}

fn version_string() {
    let s = unsafe { CStr::from_ptr(tern_version_string()) }.to_str().unwrap();
    assert_eq!(s, env!("CARGO_PKG_VERSION"));
}

fn last_error() {
    // A success leaves an empty message; each failure its own, on this thread.
    unsafe {
        assert_eq!(tern_scope_reset(ptr::null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!(CStr::from_ptr(tern_last_error()).to_str().unwrap(), "argument `scope` is NULL");
        let mut scope = ptr::null_mut();
        assert_eq!(tern_scope_new(0, &mut scope), TERN_OK);
        assert_eq!(CStr::from_ptr(tern_last_error()).to_bytes(), b"");
        tern_scope_free(scope);
    }
}

const GGUF: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gguf/tiny_bitnet.gguf");

fn gguf_bytes() -> Vec<u8> {
    std::fs::read(GGUF).unwrap()
}

fn gguf_open() {
    let mut g = sentinel();
    unsafe {
        assert_eq!(tern_gguf_open(ptr::null(), &mut g), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_open(c"/nonexistent.gguf".as_ptr(), &mut g), TERN_ERR_IO);
        let path = std::ffi::CString::new(GGUF).unwrap();
        assert_eq!(tern_gguf_open(path.as_ptr(), ptr::null_mut()), TERN_ERR_NULL_POINTER);
    }
    assert_eq!(g, sentinel());
}

fn gguf_open_bytes() {
    let bytes = gguf_bytes();
    let mut g = sentinel();
    unsafe {
        assert_eq!(tern_gguf_open_bytes(ptr::null(), 4, &mut g), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_open_bytes(bytes.as_ptr().cast(), 100, &mut g), TERN_ERR_INVALID_FILE);
        assert_eq!(tern_gguf_open_bytes(bytes.as_ptr().cast(), bytes.len(), ptr::null_mut()), TERN_ERR_NULL_POINTER);
    }
    assert_eq!(g, sentinel());
}

/// Runs `f` on a handle over the GGUF file at `path`.
fn with_file(path: &str, f: impl FnOnce(*const tern_gguf)) {
    let bytes = std::fs::read(path).unwrap();
    let mut g = ptr::null_mut();
    unsafe {
        assert_eq!(tern_gguf_open_bytes(bytes.as_ptr().cast(), bytes.len(), &mut g), TERN_OK);
        f(g);
        tern_gguf_free(g);
    }
}

/// Runs `f` on a handle over the fixture.
fn with_gguf(f: impl FnOnce(*const tern_gguf)) {
    with_file(GGUF, f);
}

fn gguf_tensor_count() {
    assert_eq!(unsafe { tern_gguf_tensor_count(ptr::null()) }, 0);
    with_gguf(|g| assert_eq!(unsafe { tern_gguf_tensor_count(g) }, 5));
}

fn gguf_tensor_info_get() {
    // Canary bytes, padding included, in storage aligned for the struct.
    #[repr(C, align(8))]
    struct Raw([u8; std::mem::size_of::<tern_gguf_tensor_info>()]);
    const _: () = assert!(std::mem::align_of::<tern_gguf_tensor_info>() <= 8);
    with_gguf(|g| unsafe {
        let mut raw = Raw([CANARY_BYTE; std::mem::size_of::<tern_gguf_tensor_info>()]);
        let info = raw.0.as_mut_ptr().cast::<tern_gguf_tensor_info>();
        assert_eq!(tern_gguf_tensor_info_get(ptr::null(), 0, info), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_tensor_info_get(g, 5, info), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_gguf_tensor_info_get(g, 0, ptr::null_mut()), TERN_ERR_NULL_POINTER);
        assert!(raw.0.iter().all(|&b| b == CANARY_BYTE));
    });
}

fn gguf_find() {
    with_gguf(|g| unsafe {
        let mut index = CANARY_USIZE;
        assert_eq!(tern_gguf_find(ptr::null(), c"output_norm.weight".as_ptr(), &mut index), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_find(g, ptr::null(), &mut index), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_find(g, c"output_norm".as_ptr(), &mut index), TERN_ERR_NOT_FOUND);
        assert_eq!(tern_gguf_find(g, c"output_norm.weight".as_ptr(), ptr::null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!(index, CANARY_USIZE);
    });
}

fn gguf_tensor_wrap() {
    with_gguf(|g| unsafe {
        let mut t = sentinel();
        assert_eq!(tern_gguf_tensor_wrap(ptr::null(), 0, &mut t), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_tensor_wrap(g, 5, &mut t), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_gguf_tensor_wrap(g, usize::MAX, &mut t), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_gguf_tensor_wrap(g, 0, ptr::null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!(t, sentinel());
    });
}

const ALL_TYPES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gguf/all_types.gguf");

/// Runs `f` on a handle over `all_types.gguf` (an entry of every metadata type; a 3-D TQ2_0
/// tensor at index 6, an F16 one at 0).
fn with_all_types(f: impl FnOnce(*const tern_gguf)) {
    with_file(ALL_TYPES, f);
}

fn gguf_tensor_wrap_slice() {
    with_all_types(|g| unsafe {
        let mut t = sentinel();
        assert_eq!(tern_gguf_tensor_wrap_slice(ptr::null(), 6, 0, &mut t), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_tensor_wrap_slice(g, 99, 0, &mut t), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_gguf_tensor_wrap_slice(g, 6, 2, &mut t), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_gguf_tensor_wrap_slice(g, 0, 0, &mut t), TERN_ERR_UNSUPPORTED);
        assert_eq!(tern_gguf_tensor_wrap_slice(g, 6, 0, ptr::null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!(t, sentinel());
    });
}

fn gguf_tensor_data() {
    with_all_types(|g| unsafe {
        let (mut data, mut len, mut ty) = (sentinel::<c_void>() as *const c_void, CANARY_USIZE, 0xA5A5u32);
        assert_eq!(tern_gguf_tensor_data(ptr::null(), 0, &mut data, &mut len, &mut ty), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_tensor_data(g, 8, &mut data, &mut len, &mut ty), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_gguf_tensor_data(g, 0, ptr::null_mut(), &mut len, &mut ty), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_tensor_data(g, 0, &mut data, ptr::null_mut(), &mut ty), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_tensor_data(g, 0, &mut data, &mut len, ptr::null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!((data, len, ty), (sentinel::<c_void>() as *const c_void, CANARY_USIZE, 0xA5A5));
    });
}

fn gguf_kv_count() {
    assert_eq!(unsafe { tern_gguf_kv_count(ptr::null()) }, 0);
    with_all_types(|g| assert_eq!(unsafe { tern_gguf_kv_count(g) }, 26));
}

fn gguf_kv_find() {
    with_all_types(|g| unsafe {
        let mut index = CANARY_USIZE;
        assert_eq!(tern_gguf_kv_find(ptr::null(), c"test.u8".as_ptr(), &mut index), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_kv_find(g, ptr::null(), &mut index), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_kv_find(g, c"test.u".as_ptr(), &mut index), TERN_ERR_NOT_FOUND);
        assert_eq!(tern_gguf_kv_find(g, c"test.u8".as_ptr(), ptr::null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!(index, CANARY_USIZE);
    });
}

/// Index of `key` in all_types.gguf.
fn kv(g: *const tern_gguf, key: &CStr) -> usize {
    let mut index = 0;
    assert_eq!(unsafe { tern_gguf_kv_find(g, key.as_ptr(), &mut index) }, TERN_OK);
    index
}

/// A function with the shape (g, index, out, out2) refused on NULLs and a bad index.
fn refuse_pair<A: PartialEq + std::fmt::Debug + Copy, B: PartialEq + std::fmt::Debug + Copy>(
    index: usize,
    f: unsafe extern "C" fn(*const tern_gguf, usize, *mut A, *mut B) -> tern_status,
    (a0, b0): (A, B),
) {
    with_all_types(|g| unsafe {
        let (mut a, mut b) = (a0, b0);
        assert_eq!(f(ptr::null(), index, &mut a, &mut b), TERN_ERR_NULL_POINTER);
        assert_eq!(f(g, 26, &mut a, &mut b), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(f(g, index, ptr::null_mut(), &mut b), TERN_ERR_NULL_POINTER);
        assert_eq!(f(g, index, &mut a, ptr::null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!((a, b), (a0, b0));
    });
}

fn gguf_kv_key() {
    refuse_pair(0, tern_gguf_kv_key, (sentinel::<std::ffi::c_char>() as *const _, CANARY_USIZE));
}

fn gguf_kv_get_str() {
    with_all_types(|g| {
        let (s, a) = (kv(g, c"test.str"), kv(g, c"test.u8"));
        refuse_pair(s, tern_gguf_kv_get_str, (sentinel::<std::ffi::c_char>() as *const _, CANARY_USIZE));
        let (mut p, mut len) = (sentinel::<std::ffi::c_char>() as *const std::ffi::c_char, CANARY_USIZE);
        assert_eq!(unsafe { tern_gguf_kv_get_str(g, a, &mut p, &mut len) }, TERN_ERR_INVALID_ARGUMENT);
        assert_eq!((p, len), (sentinel::<std::ffi::c_char>() as *const _, CANARY_USIZE));
    });
}

fn gguf_kv_array_len() {
    with_all_types(|g| {
        let (arr, scalar) = (kv(g, c"test.array.u8"), kv(g, c"test.u8"));
        refuse_pair(arr, tern_gguf_kv_array_len, (0xA5A5u32, CANARY_USIZE));
        let (mut ty, mut len) = (0xA5A5u32, CANARY_USIZE);
        assert_eq!(unsafe { tern_gguf_kv_array_len(g, scalar, &mut ty, &mut len) }, TERN_ERR_INVALID_ARGUMENT);
        assert_eq!((ty, len), (0xA5A5, CANARY_USIZE));
    });
}

fn gguf_kv_type() {
    with_all_types(|g| unsafe {
        let mut ty = 0xA5A5u32;
        assert_eq!(tern_gguf_kv_type(ptr::null(), 0, &mut ty), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_kv_type(g, 26, &mut ty), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_gguf_kv_type(g, 0, ptr::null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!(ty, 0xA5A5);
    });
}

/// A scalar getter refused on NULLs, a bad index and every entry of another type; `canary`
/// must survive.
fn refuse_scalar<T: PartialEq + std::fmt::Debug + Copy>(
    key: &CStr,
    get: unsafe extern "C" fn(*const tern_gguf, usize, *mut T) -> tern_status,
    canary: T,
) {
    with_all_types(|g| unsafe {
        let (own, mut out) = (kv(g, key), canary);
        assert_eq!(get(ptr::null(), own, &mut out), TERN_ERR_NULL_POINTER);
        assert_eq!(get(g, 26, &mut out), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(get(g, own, ptr::null_mut()), TERN_ERR_NULL_POINTER);
        for other in (0..26).filter(|&i| i != own) {
            assert_eq!(get(g, other, &mut out), TERN_ERR_INVALID_ARGUMENT, "{key:?} getter on entry {other}");
        }
        assert_eq!(out, canary);
    });
}

/// An array element getter refused on NULLs, bad indexes and every other entry.
fn refuse_element<T: PartialEq + std::fmt::Debug + Copy>(
    key: &CStr,
    get: unsafe extern "C" fn(*const tern_gguf, usize, usize, *mut T) -> tern_status,
    canary: T,
) {
    with_all_types(|g| unsafe {
        let (own, mut out) = (kv(g, key), canary);
        assert_eq!(get(ptr::null(), own, 0, &mut out), TERN_ERR_NULL_POINTER);
        assert_eq!(get(g, 26, 0, &mut out), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(get(g, own, 3, &mut out), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(get(g, own, usize::MAX, &mut out), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(get(g, own, 0, ptr::null_mut()), TERN_ERR_NULL_POINTER);
        for other in (0..26).filter(|&i| i != own) {
            assert_eq!(get(g, other, 0, &mut out), TERN_ERR_INVALID_ARGUMENT, "{key:?} getter on entry {other}");
        }
        assert_eq!(out, canary);
    });
}

fn gguf_kv_array_get_str() {
    with_all_types(|g| unsafe {
        let (own, a) = (kv(g, c"test.array.str"), kv(g, c"test.array.u8"));
        let (mut p, mut len) = (sentinel::<std::ffi::c_char>() as *const std::ffi::c_char, CANARY_USIZE);
        assert_eq!(tern_gguf_kv_array_get_str(ptr::null(), own, 0, &mut p, &mut len), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_kv_array_get_str(g, 26, 0, &mut p, &mut len), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_gguf_kv_array_get_str(g, own, 3, &mut p, &mut len), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_gguf_kv_array_get_str(g, a, 0, &mut p, &mut len), TERN_ERR_INVALID_ARGUMENT);
        assert_eq!(tern_gguf_kv_array_get_str(g, own, 0, ptr::null_mut(), &mut len), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_kv_array_get_str(g, own, 0, &mut p, ptr::null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!((p, len), (sentinel::<std::ffi::c_char>() as *const _, CANARY_USIZE));
    });
}

fn gguf_free() {
    unsafe { tern_gguf_free(ptr::null_mut()) };
}

const NO_STATUS: &str = "returns a plain value, no status";
const FREE: &str = "a free function: NULL is a no-op, and a live handle cannot be refused";

const TABLE: &[Entry] = &[
    Entry { name: "tern_requantize_i8_absmax", kind: Kind::Refused, check: requantize_i8_absmax },
    Entry { name: "tern_requantize_i8_absmax_into", kind: Kind::Refused, check: requantize_i8_absmax_into },
    Entry { name: "tern_dispatcher_new", kind: Kind::Refused, check: dispatcher_new },
    Entry { name: "tern_dispatcher_set_sink", kind: Kind::Refused, check: dispatcher_set_sink },
    Entry { name: "tern_dispatcher_free", kind: Kind::CannotFail(FREE), check: dispatcher_free },
    Entry { name: "tern_matmul", kind: Kind::Refused, check: matmul },
    Entry { name: "tern_bitnet_gemv", kind: Kind::Refused, check: bitnet_gemv },
    Entry {
        name: "tern_kernel_count",
        kind: Kind::CannotFail("takes no argument; a constant of the build"),
        check: kernel_count,
    },
    Entry { name: "tern_kernel_info_get", kind: Kind::Refused, check: kernel_info_get },
    Entry { name: "tern_encoding_get", kind: Kind::Refused, check: encoding_get },
    Entry { name: "tern_format_from_ggml_type", kind: Kind::Refused, check: format_from_ggml_type },
    Entry { name: "tern_encoding_format", kind: Kind::CannotFail(NO_STATUS), check: encoding_format },
    Entry { name: "tern_encoding_name", kind: Kind::CannotFail(NO_STATUS), check: encoding_name },
    Entry { name: "tern_encoding_block_spec", kind: Kind::Refused, check: encoding_block_spec },
    Entry { name: "tern_encoding_bytes_for", kind: Kind::Refused, check: encoding_bytes_for },
    Entry { name: "tern_encode", kind: Kind::Refused, check: encode },
    Entry { name: "tern_encode_checked", kind: Kind::Refused, check: encode_checked },
    Entry { name: "tern_decode", kind: Kind::Refused, check: decode },
    Entry { name: "tern_validate", kind: Kind::Refused, check: validate },
    Entry { name: "tern_bitnet_import", kind: Kind::Refused, check: bitnet_import },
    Entry { name: "tern_transcode", kind: Kind::Refused, check: transcode },
    Entry {
        name: "tern_last_error",
        kind: Kind::CannotFail("takes no argument; returns the thread's message, never NULL"),
        check: last_error,
    },
    Entry { name: "tern_bitnet_gemv_tile", kind: Kind::Refused, check: bitnet_gemv_tile },
    Entry { name: "tern_matmul_many", kind: Kind::Refused, check: matmul_many },
    Entry { name: "tern_gguf_open", kind: Kind::Refused, check: gguf_open },
    Entry { name: "tern_gguf_open_bytes", kind: Kind::Refused, check: gguf_open_bytes },
    Entry { name: "tern_gguf_tensor_count", kind: Kind::CannotFail(NO_STATUS), check: gguf_tensor_count },
    Entry { name: "tern_gguf_tensor_info_get", kind: Kind::Refused, check: gguf_tensor_info_get },
    Entry { name: "tern_gguf_find", kind: Kind::Refused, check: gguf_find },
    Entry { name: "tern_gguf_tensor_wrap", kind: Kind::Refused, check: gguf_tensor_wrap },
    Entry { name: "tern_gguf_tensor_wrap_slice", kind: Kind::Refused, check: gguf_tensor_wrap_slice },
    Entry { name: "tern_gguf_tensor_data", kind: Kind::Refused, check: gguf_tensor_data },
    Entry { name: "tern_gguf_kv_count", kind: Kind::CannotFail(NO_STATUS), check: gguf_kv_count },
    Entry { name: "tern_gguf_kv_find", kind: Kind::Refused, check: gguf_kv_find },
    Entry { name: "tern_gguf_kv_key", kind: Kind::Refused, check: gguf_kv_key },
    Entry { name: "tern_gguf_kv_type", kind: Kind::Refused, check: gguf_kv_type },
    Entry { name: "tern_gguf_kv_get_str", kind: Kind::Refused, check: gguf_kv_get_str },
    Entry { name: "tern_gguf_kv_array_len", kind: Kind::Refused, check: gguf_kv_array_len },
    Entry { name: "tern_gguf_kv_array_get_str", kind: Kind::Refused, check: gguf_kv_array_get_str },
    Entry {
        name: "tern_gguf_kv_get_u8",
        kind: Kind::Refused,
        check: || refuse_scalar(c"test.u8", tern_gguf_kv_get_u8, CANARY_BYTE),
    },
    Entry {
        name: "tern_gguf_kv_array_get_u8",
        kind: Kind::Refused,
        check: || refuse_element(c"test.array.u8", tern_gguf_kv_array_get_u8, CANARY_BYTE),
    },
    Entry {
        name: "tern_gguf_kv_get_i8",
        kind: Kind::Refused,
        check: || refuse_scalar(c"test.i8", tern_gguf_kv_get_i8, 0x5A),
    },
    Entry {
        name: "tern_gguf_kv_array_get_i8",
        kind: Kind::Refused,
        check: || refuse_element(c"test.array.i8", tern_gguf_kv_array_get_i8, 0x5A),
    },
    Entry {
        name: "tern_gguf_kv_get_u16",
        kind: Kind::Refused,
        check: || refuse_scalar(c"test.u16", tern_gguf_kv_get_u16, 0xA5A5),
    },
    Entry {
        name: "tern_gguf_kv_array_get_u16",
        kind: Kind::Refused,
        check: || refuse_element(c"test.array.u16", tern_gguf_kv_array_get_u16, 0xA5A5),
    },
    Entry {
        name: "tern_gguf_kv_get_i16",
        kind: Kind::Refused,
        check: || refuse_scalar(c"test.i16", tern_gguf_kv_get_i16, 0x5A5A),
    },
    Entry {
        name: "tern_gguf_kv_array_get_i16",
        kind: Kind::Refused,
        check: || refuse_element(c"test.array.i16", tern_gguf_kv_array_get_i16, 0x5A5A),
    },
    Entry {
        name: "tern_gguf_kv_get_u32",
        kind: Kind::Refused,
        check: || refuse_scalar(c"test.u32", tern_gguf_kv_get_u32, 0xA5A5_A5A5),
    },
    Entry {
        name: "tern_gguf_kv_array_get_u32",
        kind: Kind::Refused,
        check: || refuse_element(c"test.array.u32", tern_gguf_kv_array_get_u32, 0xA5A5_A5A5),
    },
    Entry {
        name: "tern_gguf_kv_get_i32",
        kind: Kind::Refused,
        check: || refuse_scalar(c"test.i32", tern_gguf_kv_get_i32, 0x5A5A_5A5A),
    },
    Entry {
        name: "tern_gguf_kv_array_get_i32",
        kind: Kind::Refused,
        check: || refuse_element(c"test.array.i32", tern_gguf_kv_array_get_i32, 0x5A5A_5A5A),
    },
    Entry {
        name: "tern_gguf_kv_get_u64",
        kind: Kind::Refused,
        check: || refuse_scalar(c"test.u64", tern_gguf_kv_get_u64, 0xA5A5_A5A5_A5A5_A5A5),
    },
    Entry {
        name: "tern_gguf_kv_array_get_u64",
        kind: Kind::Refused,
        check: || refuse_element(c"test.array.u64", tern_gguf_kv_array_get_u64, 0xA5A5_A5A5_A5A5_A5A5),
    },
    Entry {
        name: "tern_gguf_kv_get_i64",
        kind: Kind::Refused,
        check: || refuse_scalar(c"test.i64", tern_gguf_kv_get_i64, 0x5A5A_5A5A_5A5A_5A5A),
    },
    Entry {
        name: "tern_gguf_kv_array_get_i64",
        kind: Kind::Refused,
        check: || refuse_element(c"test.array.i64", tern_gguf_kv_array_get_i64, 0x5A5A_5A5A_5A5A_5A5A),
    },
    Entry {
        name: "tern_gguf_kv_get_f32",
        kind: Kind::Refused,
        check: || refuse_scalar(c"test.f32", tern_gguf_kv_get_f32, CANARY),
    },
    Entry {
        name: "tern_gguf_kv_array_get_f32",
        kind: Kind::Refused,
        check: || refuse_element(c"test.array.f32", tern_gguf_kv_array_get_f32, CANARY),
    },
    Entry {
        name: "tern_gguf_kv_get_f64",
        kind: Kind::Refused,
        check: || refuse_scalar(c"test.f64", tern_gguf_kv_get_f64, CANARY as f64),
    },
    Entry {
        name: "tern_gguf_kv_array_get_f64",
        kind: Kind::Refused,
        check: || refuse_element(c"test.array.f64", tern_gguf_kv_array_get_f64, CANARY as f64),
    },
    Entry {
        name: "tern_gguf_kv_get_bool",
        kind: Kind::Refused,
        check: || refuse_scalar(c"test.bool", tern_gguf_kv_get_bool, CANARY_BYTE),
    },
    Entry {
        name: "tern_gguf_kv_array_get_bool",
        kind: Kind::Refused,
        check: || refuse_element(c"test.array.bool", tern_gguf_kv_array_get_bool, CANARY_BYTE),
    },
    Entry { name: "tern_gguf_free", kind: Kind::CannotFail(FREE), check: gguf_free },
    Entry { name: "tern_scope_new", kind: Kind::Refused, check: scope_new },
    Entry { name: "tern_scope_reset", kind: Kind::Refused, check: scope_reset },
    Entry { name: "tern_scope_get_stats", kind: Kind::Refused, check: scope_get_stats },
    Entry { name: "tern_scope_free", kind: Kind::CannotFail(FREE), check: scope_free },
    Entry {
        name: "tern_status_str",
        kind: Kind::CannotFail("any value has a string, unknown ones a generic one"),
        check: status_str,
    },
    Entry { name: "tern_tensor_wrap", kind: Kind::Refused, check: tensor_wrap },
    Entry { name: "tern_tensor_encode", kind: Kind::Refused, check: tensor_encode },
    Entry { name: "tern_tensor_get", kind: Kind::Refused, check: tensor_get },
    Entry { name: "tern_tensor_decode", kind: Kind::Refused, check: tensor_decode },
    Entry { name: "tern_tensor_validate", kind: Kind::Refused, check: tensor_validate },
    Entry { name: "tern_tensor_data", kind: Kind::Refused, check: tensor_data },
    Entry { name: "tern_tensor_format", kind: Kind::CannotFail(NO_STATUS), check: tensor_format },
    Entry { name: "tern_tensor_rows", kind: Kind::CannotFail(NO_STATUS), check: tensor_rows },
    Entry { name: "tern_tensor_cols", kind: Kind::CannotFail(NO_STATUS), check: tensor_cols },
    Entry { name: "tern_tensor_free", kind: Kind::CannotFail(FREE), check: tensor_free },
    Entry {
        name: "tern_version",
        kind: Kind::CannotFail("takes no argument; a constant of the build"),
        check: version,
    },
    Entry {
        name: "tern_version_string",
        kind: Kind::CannotFail("takes no argument; a static string"),
        check: version_string,
    },
];

/// The functions `include/tern.h` declares: `<type> tern_name(...);` lines.
fn declared() -> BTreeSet<String> {
    let header = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/tern.h")).unwrap();
    header
        .lines()
        .filter(|l| !l.starts_with("typedef") && !l.starts_with(' ') && l.trim_end().ends_with(");"))
        .filter_map(|l| {
            let name = l[..l.find('(')?].rsplit([' ', '*']).next()?;
            name.starts_with("tern_").then(|| name.to_owned())
        })
        .collect()
}

#[test]
fn every_export_has_an_entry() {
    let declared = declared();
    assert!(declared.len() >= 30, "the header parser found only {declared:?}");
    let table: BTreeSet<String> = TABLE.iter().map(|e| e.name.to_owned()).collect();
    assert_eq!(table.len(), TABLE.len(), "duplicate entries");
    let missing: Vec<_> = declared.difference(&table).collect();
    let stale: Vec<_> = table.difference(&declared).collect();
    assert!(missing.is_empty(), "exports without a canary entry: {missing:?}");
    assert!(stale.is_empty(), "entries for functions the header does not declare: {stale:?}");
}

#[test]
fn refused_calls_write_nothing() {
    for entry in TABLE {
        if let Kind::CannotFail(why) = entry.kind {
            assert!(!why.is_empty(), "{}: say why it cannot fail", entry.name);
        }
        (entry.check)();
    }
}
