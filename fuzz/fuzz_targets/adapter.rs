//! The activation adapter (`tern_requantize_i8_absmax` into a scope, and the caller-buffer
//! `tern_requantize_i8_absmax_into`) on arbitrary floats, shapes and buffer lengths.
//!
//! Properties: no call panics; a refused call writes nothing and reports no event; a
//! successful one reports exactly one ADAPTER_INSERTED event with the right shape and
//! price; both variants agree bit for bit with each other and with the I8_ABSMAX encoder
//! (the format's definition), whichever SIMD row requantizer this CPU uses; the scope
//! tensor goes stale on reset.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::ffi::c_void;
use std::ptr;
use tern::ffi::*;
use tern_fuzz::*;

/// Counts events and checks each one is the adapter's.
unsafe extern "C" fn on_event(userdata: *mut c_void, event: *const tern_event) {
    // SAFETY: userdata is the `Vec` the target passed, the event valid during the call.
    let (seen, event) = unsafe { (&mut *userdata.cast::<Vec<tern_event>>(), *event) };
    seen.push(event);
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let act_format = if input.one_in(4) { input.format_id() } else { TERN_FORMAT_F32 };
    let (rows, cols) = (input.dim(), input.dim());
    let palette = input.bool();
    let (src_delta, codes_delta, scales_delta) = (input.u8(), input.u8(), input.u8());
    let initial = usize::from(input.u8()) * 64;
    let payload = input.rest();

    let n = small(rows, cols).unwrap_or(payload.len() / 4);
    let src = floats(payload, Input::new(&[src_delta]).near(n), palette);
    let want = expected(&src, rows, cols);

    // The caller-buffer variant.
    let (codes_len, scales_len) = match small(rows, cols) {
        Some(n) => (Input::new(&[codes_delta]).near(n), Input::new(&[scales_delta]).near(rows)),
        None => (16, 4),
    };
    let mut codes = vec![CANARY_BYTE as i8; codes_len];
    let mut scales = canary_f32(scales_len);
    let mut events = Vec::<tern_event>::new();
    // SAFETY: the buffers are live and as long as the lengths passed; `events` outlives
    // the call that reports into it.
    let status = unsafe {
        tern_requantize_i8_absmax_into(
            src.as_ptr(),
            src.len(),
            rows,
            cols,
            codes.as_mut_ptr(),
            codes_len,
            scales.as_mut_ptr(),
            scales_len,
            Some(on_event),
            ptr::from_mut(&mut events).cast(),
        )
    };
    not_panic(status);
    if status == TERN_OK {
        let want = want.as_ref().expect("the adapter accepted what the encoder refused");
        let n = rows * cols;
        assert_eq!(code_bytes(&codes[..n]), &want[..n], "adapter codes differ from the I8_ABSMAX encoder");
        let got_scales: Vec<u8> = scales[..rows].iter().flat_map(|s| s.to_le_bytes()).collect();
        assert_eq!(got_scales, &want[n..], "adapter scales differ from the I8_ABSMAX encoder");
        assert!(codes[n..].iter().all(|&c| c == CANARY_BYTE as i8), "codes written past rows * cols");
        assert!(all_canary(&scales[rows..]), "scales written past rows");
        check_event(&events, rows, cols);
    } else {
        assert!(codes.iter().all(|&c| c == CANARY_BYTE as i8) && all_canary(&scales), "a refused adapter wrote");
        assert!(events.is_empty(), "a refused adapter reported an event");
        if src.len() == n && codes_len >= n && scales_len >= rows {
            assert!(want.is_err(), "the adapter refused ({status}) what the encoder accepts");
        }
    }

    // The scope variant, on a tensor wrapped over the same floats.
    let bytes: Vec<u8> = src.iter().flat_map(|x| x.to_le_bytes()).collect();
    let enc = encoding(act_format);
    let Ok(t) = wrap(enc, &bytes, rows, cols) else { return };
    let mut scope = ptr::null_mut();
    // SAFETY (all calls): the handles are live until freed at the end, the out-parameters
    // writable, `events` outlives the calls.
    unsafe {
        assert_eq!(tern_scope_new(initial, &mut scope), TERN_OK);
        let mut out = sentinel();
        events.clear();
        let status = tern_requantize_i8_absmax(t, scope, Some(on_event), ptr::from_mut(&mut events).cast(), &mut out);
        not_panic(status);
        if status == TERN_OK {
            assert_eq!(act_format, TERN_FORMAT_F32);
            let want = want.as_ref().expect("the adapter accepted what the encoder refused");
            let (mut p, mut len) = (ptr::null(), 0);
            assert_eq!(tern_tensor_data(out, &mut p, &mut len), TERN_OK);
            assert_eq!(
                std::slice::from_raw_parts(p.cast::<u8>(), len),
                &want[..],
                "scope adapter differs from the encoder"
            );
            assert_eq!(p.align_offset(64), 0, "scope allocations are 64-byte aligned");
            check_event(&events, rows, cols);
            assert_eq!(tern_scope_reset(scope), TERN_OK);
            assert_eq!(tern_tensor_validate(out), TERN_ERR_STALE_TENSOR);
            tern_tensor_free(out);
        } else {
            assert_eq!(out, sentinel(), "a refused adapter wrote its out-parameter");
            assert!(events.is_empty(), "a refused adapter reported an event");
            if act_format == TERN_FORMAT_F32 {
                assert!(want.is_err(), "the scope adapter refused ({status}) what the encoder accepts");
            } else {
                assert_eq!(status, TERN_ERR_UNSUPPORTED);
            }
        }
        tern_scope_free(scope);
        tern_tensor_free(t);
    }
});

/// The I8_ABSMAX encoding of `src` (the adapter's definition), or the encoder's status.
fn expected(src: &[f32], rows: usize, cols: usize) -> Result<Vec<u8>, tern_status> {
    if src.len() != rows.wrapping_mul(cols) || small(rows, cols).is_none() {
        return Err(TERN_ERR_LENGTH_MISMATCH);
    }
    let enc = encoding(TERN_FORMAT_I8_ABSMAX);
    let len = bytes_for(enc, rows, cols)?;
    encode(enc, src, rows, cols, len)
}

fn code_bytes(codes: &[i8]) -> Vec<u8> {
    codes.iter().map(|&c| c as u8).collect()
}

fn check_event(events: &[tern_event], rows: usize, cols: usize) {
    assert_eq!(events.len(), 1, "one adapter event per call");
    let e = events[0];
    assert_eq!(e.kind, TERN_EVENT_ADAPTER_INSERTED);
    assert_eq!((e.from, e.to), (TERN_FORMAT_F32, TERN_FORMAT_I8_ABSMAX));
    assert_eq!((e.rows, e.cols), (rows, cols));
    assert_eq!(e.bytes, rows * cols + 4 * rows);
}
