//! Encode on arbitrary floats (NaN, infinities, subnormals, f16 overflow) and shapes, for
//! every format id, through the C API.
//!
//! Properties: no call panics; a refused call leaves the whole destination untouched and
//! a successful one writes exactly `bytes_for` bytes; `tern_encode` and
//! `tern_encode_checked` agree; what the encoder writes validates; F32 round-trips bit for
//! bit; re-encoding a decode is stable: TQ1_0/TQ2_0/Q2_0 decode to the same values again,
//! I2_S (every packing) gives the same bytes unless its scale is inside the 1e-6 dead zone,
//! and BITNET_B1_58 and I8_ABSMAX keep their codes (their scales are re-derived from the
//! decoded values, so only the codes are a fixpoint).

#![no_main]

use libfuzzer_sys::fuzz_target;
use tern::ffi::*;
use tern::Format;
use tern_fuzz::*;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let format = input.format_id();
    let (rows, cols) = (input.dim(), input.dim());
    let palette = input.bool();
    let (src_delta, dst_delta) = (input.u8(), input.u8());
    let payload = input.rest();

    let enc = encoding(format);
    let n = small(rows, cols).unwrap_or(payload.len() / 4);
    let src = floats(payload, Input::new(&[src_delta]).near(n), palette);
    let dst_len = match bytes_for(enc, rows, cols) {
        Ok(len) if len <= 4 * MAX_ELEMS => Input::new(&[dst_delta]).near(len),
        _ => 64,
    };
    let first = encode(enc, &src, rows, cols, dst_len);
    if src.len() == n && small(rows, cols).is_some() {
        // The unchecked variant reads `rows * cols` floats, which `src` holds here.
        let mut dst = vec![CANARY_BYTE; dst_len + 8];
        // SAFETY: `src` holds rows * cols floats, `dst` at least `dst_len` bytes.
        let status = unsafe { tern_encode(enc.ptr(), src.as_ptr(), rows, cols, dst.as_mut_ptr().cast(), dst_len) };
        match &first {
            Ok(bytes) => assert_eq!(&dst[..bytes.len()], &bytes[..], "encode and encode_checked differ"),
            Err(status_checked) => {
                assert_eq!(status, *status_checked);
                assert!(dst.iter().all(|&b| b == CANARY_BYTE), "a refused encode wrote its output");
            }
        }
    }
    let Ok(bytes) = first else { return };
    assert!(src.iter().all(|x| x.is_finite()), "non-finite input was encoded");
    assert_eq!(validate(enc, &bytes, rows, cols), TERN_OK, "the encoder wrote bytes validation refuses");

    let decoded = decode(enc, &bytes, rows, cols).expect("encoded bytes decode");
    let format = Format::from_id(format).expect("the encode succeeded");
    if format == Format::F32 {
        assert!(src.iter().zip(&decoded).all(|(a, b)| a.to_bits() == b.to_bits()), "F32 round trip");
        return;
    }
    let again = encode(enc, &decoded, rows, cols, bytes.len()).expect("a decode re-encodes");
    match format {
        Format::Tq1_0 | Format::Tq2_0 | Format::Q2_0 => {
            let redecoded = decode(enc, &again, rows, cols).expect("encoded bytes decode");
            assert_eq!(decoded, redecoded, "{format:?}: decode(encode(decode(x))) != decode(x)");
        }
        Format::BitnetB158 => {
            // The re-derived scale is mean |t * s| = s * (share of non-zero trits): when it
            // is subnormal, t * s / scale rounds away from t.
            let codes = bytes.len() - 4;
            let scale = f32::from_le_bytes(again[codes..].try_into().unwrap());
            if scale.is_normal() {
                assert_eq!(&bytes[..codes], &again[..codes], "BITNET_B1_58 codes changed on re-encode");
            }
        }
        Format::I8Absmax | Format::I8Block256 | Format::I8Block32 => {
            // A scale block (a row of I8_ABSMAX) whose scale is subnormal loses code
            // precision when decoded; the others must keep their codes.
            let block = format.i8_scale_block(cols).expect("an int8 activation format");
            let scales = |b: &[u8]| -> Vec<f32> {
                b[rows * cols..].chunks_exact(4).map(|s| f32::from_le_bytes(s.try_into().unwrap())).collect()
            };
            for (i, scale) in scales(&bytes).into_iter().enumerate() {
                let codes = i * block..(i + 1) * block;
                if scale.is_normal() {
                    assert_eq!(
                        &bytes[codes.clone()],
                        &again[codes],
                        "{format:?} block {i} (scale {scale}) changed its codes"
                    );
                }
            }
        }
        Format::I2S | Format::I2S64 | Format::I2SR4 => {
            // The re-derived scale is the max of +-s: s again; the codes stay unless s is
            // inside the 1e-6 dead zone, where every code becomes 0.
            let codes = bytes.len() - 32;
            let scale = f32::from_le_bytes(bytes[codes..codes + 4].try_into().unwrap());
            if f64::from(scale) >= 1e-6 {
                assert_eq!(bytes, again, "{format:?} changed on re-encode");
            }
        }
        Format::F32 => unreachable!("returned above"),
    }
});
