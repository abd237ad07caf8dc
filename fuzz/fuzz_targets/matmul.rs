//! `tern_matmul` (and `tern_bitnet_gemv`) through the C API with arbitrary formats,
//! shapes, bytes (corrupt codes included), scopes and output lengths, on three
//! dispatchers: the caller alone, a pool of 2 threads, and one forcing
//! `bitnet_gemv/reference`.
//!
//! Properties: every error is a status, never TERN_ERR_PANIC; a refused call writes no
//! output and reports no event; all three dispatchers return the same status; the pool's
//! output is bit-identical to the caller-alone output; on valid operands the best kernel
//! agrees with the reference kernel (to 1e-4 of the sum of |terms|); a successful call
//! writes nothing past `m * n` and reports the adapter (for a ternary weight with an F32
//! activation) and then the kernel; `tern_bitnet_gemv` writes only its row range and
//! agrees bit for bit with the matmul.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::ffi::c_void;
use std::ptr;
use std::sync::{Mutex, OnceLock};
use tern::ffi::*;
use tern_fuzz::*;

/// An event's kind, formats (from, to) and shape (rows, cols).
type Seen = (u32, u32, u32, usize, usize);

/// Multiply-adds per call at most, to keep executions fast (see the use).
const MAX_WORK: usize = 1 << 22;

/// Events of the current run: the fuzzer calls the target from one thread at a time.
static EVENTS: Mutex<Vec<Seen>> = Mutex::new(Vec::new());

unsafe extern "C" fn on_event(_: *mut c_void, event: *const tern_event) {
    // SAFETY: the event is valid during the callback.
    let e = unsafe { *event };
    EVENTS.lock().unwrap().push((e.kind, e.from, e.to, e.rows, e.cols));
}

fn take_events() -> Vec<Seen> {
    std::mem::take(&mut *EVENTS.lock().unwrap())
}

struct Dispatchers([*mut tern_dispatcher; 3]);
// SAFETY: the dispatchers are created once and never freed; `tern_matmul` may be called
// on them from any thread.
unsafe impl Send for Dispatchers {}
// SAFETY: as above.
unsafe impl Sync for Dispatchers {}

/// Caller alone, 2 threads, and the reference kernel forced (starting a pool per input
/// would cost more than the matmul).
fn dispatchers() -> &'static [*mut tern_dispatcher; 3] {
    static D: OnceLock<Dispatchers> = OnceLock::new();
    &D.get_or_init(|| {
        let make = |n_threads, kernel: Option<&'static std::ffi::CStr>| {
            let options = tern_dispatcher_options {
                n_threads,
                kernel: kernel.map_or(ptr::null(), |k| k.as_ptr()),
                ..Default::default()
            };
            let mut d = ptr::null_mut();
            // SAFETY: valid options and out-parameter; the sink callback is a plain function.
            unsafe {
                assert_eq!(tern_dispatcher_new(&options, &mut d), TERN_OK);
                assert_eq!(tern_dispatcher_set_sink(d, Some(on_event), ptr::null_mut()), TERN_OK);
            }
            d
        };
        Dispatchers([make(1, None), make(2, None), make(1, Some(c"bitnet_gemv/reference"))])
    })
    .0
}

/// Operand bytes: raw (possibly corrupt codes), or floats encoded (valid codes).
fn operand(input: &mut Input, format: u32, rows: usize, cols: usize, payload: &[u8]) -> (Enc, Vec<u8>) {
    let (mode, delta) = (input.u8() % 3, input.u8());
    let enc = encoding(format);
    let Ok(len) = bytes_for(enc, rows, cols) else { return (enc, payload.to_vec()) };
    if small(rows, cols).is_none() {
        return (enc, payload.to_vec());
    }
    if mode > 0 {
        if let Ok(bytes) = encode(enc, &floats(payload, rows * cols, mode == 1), rows, cols, len) {
            return (enc, bytes);
        }
    }
    (enc, cycle(payload, Input::new(&[delta]).near(len)))
}

/// Bit-identical, except that any NaN equals any NaN: corrupt raw scales can be NaN, and
/// which NaN payload survives depends on the operand order the compiler picks for an FMA.
fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// A weight format whose kernels take I8_ABSMAX activations (through the adapter for F32).
fn ternary(format: u32) -> bool {
    tern::Format::from_id(format).is_ok_and(tern::Format::is_ternary)
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let w_format = input.format_id();
    let (n, k) = (input.dim(), input.dim());
    let a_format = if input.one_in(4) { input.format_id() } else { TERN_FORMAT_F32 };
    let m = if input.one_in(8) { input.dim() } else { 1 + usize::from(input.u8() % 4) };
    let a_k = if input.one_in(8) { input.dim() } else { k };
    let with_scope = !input.one_in(4);
    let out_delta = input.u8();
    let (row_begin, row_end) = (input.dim(), input.dim());
    let split = usize::from(input.u8());
    let (w_mode, a_mode) = (input.u8(), input.u8());
    let payload = input.rest();
    let (w_payload, a_payload) = payload.split_at(split.min(payload.len()));

    let (w_enc, w_bytes) = operand(&mut Input::new(&[w_mode, w_mode >> 2]), w_format, n, k, w_payload);
    let (a_enc, a_bytes) = operand(&mut Input::new(&[a_mode, a_mode >> 2]), a_format, m, a_k, a_payload);
    let Ok(weight) = wrap(w_enc, &w_bytes, n, k) else { return };
    let Ok(act) = wrap(a_enc, &a_bytes, m, a_k) else {
        // SAFETY: `weight` is a live handle.
        unsafe { tern_tensor_free(weight) };
        return;
    };
    let mn = m * n; // both are small: their tensors were wrapped
    if a_k == k && mn * k > MAX_WORK {
        // The call would run: at this size the instrumented reference kernels take seconds
        // (the pool's two threads fight over libFuzzer's shared coverage counters), while
        // the pool's split only needs a large weight, not many tokens.
        // SAFETY: live handles, freed once.
        unsafe {
            tern_tensor_free(act);
            tern_tensor_free(weight);
        }
        return;
    }
    let out_len = Input::new(&[out_delta]).near(mn);

    let mut scope = ptr::null_mut();
    take_events();
    let mut runs = Vec::new();
    // SAFETY (all calls): handles are live until freed below, buffers live and as long as
    // the lengths passed, the scope is used by this thread only.
    unsafe {
        if with_scope {
            assert_eq!(tern_scope_new(0, &mut scope), TERN_OK);
        }
        for &d in dispatchers() {
            let mut out = canary_f32(out_len + 4);
            let status = tern_matmul(d, act, weight, scope, out.as_mut_ptr(), out_len);
            not_panic(status);
            runs.push((status, out, take_events()));
        }
    }
    let (status, out, _) = &runs[0];
    for (s, _, _) in &runs[1..] {
        assert_eq!(s, status, "dispatchers disagree on the status");
    }
    if *status != TERN_OK {
        for (_, out, events) in &runs {
            assert!(all_canary(out), "a refused matmul ({status}) wrote its output");
            assert!(events.is_empty(), "a refused matmul reported {events:?}");
        }
    } else {
        assert_eq!(a_k, k);
        assert!(out_len >= mn);
        for (_, out, events) in &runs {
            assert!(all_canary(&out[mn..]), "matmul wrote past m * n");
            let adapter = ternary(w_format) && a_format == TERN_FORMAT_F32;
            let consumed = if adapter { TERN_FORMAT_I8_ABSMAX } else { a_format };
            let kernel = (TERN_EVENT_KERNEL_SELECTED, w_format, consumed, m, n);
            if adapter {
                assert_eq!(
                    events[..],
                    [(TERN_EVENT_ADAPTER_INSERTED, TERN_FORMAT_F32, TERN_FORMAT_I8_ABSMAX, m, k), kernel]
                );
            } else {
                assert_eq!(events[..], [kernel]);
            }
        }
        let pool = &runs[1].1;
        assert!(out[..mn].iter().zip(&pool[..mn]).all(|(a, b)| same(*a, *b)), "the pool's output differs");
        if validate(w_enc, &w_bytes, n, k) == TERN_OK && validate(a_enc, &a_bytes, m, k) == TERN_OK {
            check_close(&out[..mn], &runs[2].1[..mn], w_enc, &w_bytes, a_enc, &a_bytes, (m, n, k));
        }
    }

    if ternary(w_format) && a_format == TERN_FORMAT_I8_ABSMAX {
        let mut gemv = canary_f32(out_len + 4);
        // SAFETY: as above.
        let s = unsafe { tern_bitnet_gemv(ptr::null(), act, weight, row_begin, row_end, gemv.as_mut_ptr(), out_len) };
        not_panic(s);
        if s == TERN_OK {
            assert!(row_begin <= row_end && row_end <= n);
            for (i, (g, o)) in gemv[..mn].iter().zip(&out[..mn]).enumerate() {
                if (row_begin..row_end).contains(&(i % n)) {
                    assert!(same(*g, *o), "gemv and matmul differ at {i}: {g} vs {o}");
                } else {
                    assert_eq!(g.to_bits(), CANARY_F32, "gemv wrote column {} outside its range", i % n);
                }
            }
        } else {
            assert!(all_canary(&gemv), "a refused gemv wrote its output");
        }
    }
    // SAFETY: the handles are live and freed once.
    unsafe {
        tern_scope_free(scope);
        tern_tensor_free(act);
        tern_tensor_free(weight);
    }
});

/// The best kernel against the reference one, relative to the sum of |terms|.
fn check_close(
    got: &[f32],
    reference: &[f32],
    w_enc: Enc,
    w_bytes: &[u8],
    a_enc: Enc,
    a_bytes: &[u8],
    (m, n, k): (usize, usize, usize),
) {
    let w = decode(w_enc, w_bytes, n, k).expect("a wrapped weight decodes");
    let a = decode(a_enc, a_bytes, m, k).expect("a wrapped activation decodes");
    for (i, (g, r)) in got.iter().zip(reference).enumerate() {
        if g == r || (g.is_nan() && r.is_nan()) {
            // Equal, or both overflowed the same way: the definition's order, w_scale times
            // the integer sum and then a_scale, overflows f32 for a huge weight scale met by
            // a tiny activation scale even when the true result is finite.
            continue;
        }
        let (row, col) = (i / n, i % n);
        let terms: f64 = (0..k).map(|j| f64::from(a[row * k + j]).abs() * f64::from(w[col * k + j]).abs()).sum();
        if !terms.is_finite() || terms > 1e37 {
            // f32 accumulation may overflow differently from f64.
            continue;
        }
        let tol = 1e-4 * terms + 1e-30;
        assert!(f64::from(*g - *r).abs() <= tol, "[{row}][{col}]: best {g} vs reference {r} (sum |terms| {terms})");
    }
}
