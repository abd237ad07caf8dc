//! Tensor wrap + validate + get + decode + transcode on arbitrary bytes and shapes, for
//! every format id (unknown ones included), through the C API.
//!
//! Properties: no call panics; refused calls write nothing; a wrapped tensor validates,
//! decodes and reads elements exactly as the free functions do on the same bytes; `get`
//! agrees bit for bit with `decode`; valid bytes decode to finite values; a transcode
//! succeeds only on valid bytes, and its output validates and decodes to the same floats
//! bit for bit (between TQ1_0 and TQ2_0, the way back gives the same bytes).

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::ptr;
use tern::ffi::*;
use tern_fuzz::*;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let format = input.format_id();
    let (rows, cols) = (input.dim(), input.dim());
    let delta = input.u8();
    let probes = [(input.dim(), input.dim()), (input.dim(), input.dim())];
    let to = input.format_id();
    let payload = input.rest();

    let enc = encoding(format);
    let bytes = match bytes_for(enc, rows, cols) {
        Ok(len) if small(rows, cols).is_some() => cycle(payload, Input::new(&[delta]).near(len)),
        _ => payload.to_vec(),
    };
    let valid = validate(enc, &bytes, rows, cols);
    let Ok(t) = wrap(enc, &bytes, rows, cols) else { return };
    // A wrap succeeds only for a known format, a good shape and the exact length.
    assert_eq!(bytes_for(enc, rows, cols), Ok(bytes.len()));
    let n = small(rows, cols).expect("wrapped bytes were cycled to a small size");

    // SAFETY (all calls): `t` is a live handle over `bytes`, the buffers are live and as
    // long as the lengths passed, the out-parameters are writable.
    unsafe {
        assert_eq!(tern_tensor_format(t), format);
        assert_eq!((tern_tensor_rows(t), tern_tensor_cols(t)), (rows, cols));
        let (mut p, mut len) = (ptr::null(), 0);
        assert_eq!(tern_tensor_data(t, &mut p, &mut len), TERN_OK);
        assert_eq!((p.cast::<u8>(), len), (bytes.as_ptr(), bytes.len()), "a wrapped tensor copies nothing");
        assert_eq!(tern_tensor_validate(t), valid);

        let mut dst = canary_f32(n + 1);
        assert_eq!(tern_tensor_decode(t, dst.as_mut_ptr(), n - 1), TERN_ERR_LENGTH_MISMATCH);
        assert!(all_canary(&dst));
        assert_eq!(tern_tensor_decode(t, dst.as_mut_ptr(), n), TERN_OK, "decoding does not validate");
        assert!(all_canary(&dst[n..]), "decode wrote past rows * cols");
        dst.truncate(n);
        let free = decode(enc, &bytes, rows, cols).expect("the free decode accepts what wrap accepted");
        assert!(dst.iter().zip(&free).all(|(a, b)| a.to_bits() == b.to_bits()), "tensor and free decode differ");
        if valid == TERN_OK {
            assert!(dst.iter().all(|x| x.is_finite()), "valid bytes decoded to a non-finite value");
        }

        for (r, c) in probes.into_iter().chain([(probes[0].0 % rows, probes[0].1 % cols), (rows, 0), (0, cols)]) {
            let mut x = f32::from_bits(CANARY_F32);
            let status = tern_tensor_get(t, r, c, &mut x);
            if r < rows && c < cols {
                assert_eq!(status, TERN_OK);
                assert_eq!(x.to_bits(), dst[r * cols + c].to_bits(), "get({r}, {c}) differs from decode");
            } else {
                assert_eq!(status, TERN_ERR_OUT_OF_BOUNDS);
                assert_eq!(x.to_bits(), CANARY_F32, "a refused get wrote its output");
            }
        }
        let to_enc = encoding(to);
        if let Ok(to_len) = bytes_for(to_enc, rows, cols) {
            let (status, out) = transcode(enc, &bytes, rows, cols, to_enc, to_len);
            if status == TERN_OK {
                assert_eq!(valid, TERN_OK, "transcode accepted bytes that do not validate");
                assert_eq!(validate(to_enc, &out, rows, cols), TERN_OK, "a transcode does not validate");
                let same = decode(to_enc, &out, rows, cols).expect("a transcode decodes");
                assert!(same.iter().zip(&dst).all(|(a, b)| a.to_bits() == b.to_bits()), "transcode changed a value");
                if [format, to].iter().all(|f| [TERN_FORMAT_TQ1_0, TERN_FORMAT_TQ2_0].contains(f)) {
                    let back = transcode(to_enc, &out, rows, cols, enc, bytes.len());
                    assert_eq!(back, (TERN_OK, bytes.clone()), "TQ1_0/TQ2_0 and back changed the bytes");
                }
            }
        }
        tern_tensor_free(t);
    }
});
