//! The C API driven from Rust: results agree with the core, every error path returns its
//! status and leaves outputs untouched.

use std::ffi::{c_void, CStr};
use std::ptr::{null, null_mut};
use tern::ffi::*;
use tern::Format;

const CANARY_F: f32 = -12345.5;
const CANARY_B: u8 = 0xA5;

fn enc(format: u32) -> *const tern_encoding {
    let mut out = null();
    // SAFETY: out is a valid out-parameter.
    assert_eq!(unsafe { tern_encoding_get(format, &mut out) }, TERN_OK);
    out
}

/// Deterministic values in [-amp, amp).
fn values(n: usize, seed: u32, amp: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s as f32 / u32::MAX as f32 * 2.0 - 1.0) * amp
        })
        .collect()
}

fn shape_of(format: Format) -> (usize, usize) {
    match format {
        Format::Tq1_0 | Format::Tq2_0 | Format::I8Block256 => (3, 512),
        Format::Q2_0 | Format::I8Block32 => (3, 128),
        Format::I2S | Format::I2S64 | Format::I2SR4 => (4, 256),
        _ => (3, 8),
    }
}

#[test]
fn encode_decode_matches_the_core_for_every_format() {
    for format in Format::ALL {
        let (rows, cols) = shape_of(format);
        let src = values(rows * cols, format.id(), 2.0);
        let e = enc(format.id());
        let mut need = 0;
        // SAFETY (all calls): buffers are live Vecs with their true lengths.
        unsafe {
            assert_eq!(tern_encoding_format(e), format.id());
            assert_eq!(CStr::from_ptr(tern_encoding_name(e)).to_str().unwrap(), format.name());
            assert_eq!(tern_encoding_bytes_for(e, rows, cols, &mut need), TERN_OK);
            assert_eq!(need, format.bytes_for(rows, cols).unwrap());

            let mut want = vec![0u8; need];
            format.encode(&src, rows, cols, &mut want).unwrap();
            // One spare byte: encode writes exactly `need` bytes.
            let mut dst = vec![CANARY_B; need + 1];
            let st = tern_encode(e, src.as_ptr(), rows, cols, dst.as_mut_ptr().cast(), dst.len());
            assert_eq!(st, TERN_OK);
            assert_eq!(&dst[..need], &want[..], "{format:?}");
            assert_eq!(dst[need], CANARY_B);
            let mut checked = vec![0u8; need];
            let st = tern_encode_checked(e, src.as_ptr(), src.len(), rows, cols, checked.as_mut_ptr().cast(), need);
            assert_eq!(st, TERN_OK);
            assert_eq!(checked, want);
            assert_eq!(tern_validate(e, want.as_ptr().cast(), need, rows, cols), TERN_OK);

            let mut out = vec![CANARY_F; rows * cols + 1];
            let st = tern_decode(e, want.as_ptr().cast(), need, rows, cols, out.as_mut_ptr(), out.len());
            assert_eq!(st, TERN_OK);
            let core = core_decode(format, &want, rows, cols);
            assert_eq!(&out[..rows * cols], &core[..]);
            assert_eq!(out[rows * cols], CANARY_F);
        }
    }
}

/// The core's decode, into a fresh Vec.
fn core_decode(format: Format, src: &[u8], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; rows * cols];
    format.decode(src, rows, cols, &mut out).unwrap();
    out
}

#[test]
fn lookups() {
    let mut out = 77u32;
    let mut e = null();
    // SAFETY (all calls): out-parameters are live locals; the NULL ones are refused.
    unsafe {
        assert_eq!(tern_format_from_ggml_type(0, &mut out), TERN_OK);
        assert_eq!(out, TERN_FORMAT_F32);
        assert_eq!(tern_format_from_ggml_type(34, &mut out), TERN_OK);
        assert_eq!(out, TERN_FORMAT_TQ1_0);
        assert_eq!(tern_format_from_ggml_type(35, &mut out), TERN_OK);
        assert_eq!(out, TERN_FORMAT_TQ2_0);
        assert_eq!(tern_format_from_ggml_type(36, &mut out), TERN_OK);
        assert_eq!(out, TERN_FORMAT_I2_S, "type 36 is the x86 packing, the official file's");
        assert_eq!(tern_format_from_ggml_type(42, &mut out), TERN_OK);
        assert_eq!(out, TERN_FORMAT_Q2_0);
        out = 77;
        assert_eq!(tern_format_from_ggml_type(1, &mut out), TERN_ERR_UNKNOWN_FORMAT);
        assert_eq!(out, 77);
        assert_eq!(tern_format_from_ggml_type(34, null_mut()), TERN_ERR_NULL_POINTER);

        for bad in [0, 12, u32::MAX] {
            assert_eq!(tern_encoding_get(bad, &mut e), TERN_ERR_UNKNOWN_FORMAT);
            assert!(e.is_null());
        }
        assert_eq!(tern_encoding_get(TERN_FORMAT_F32, null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_encoding_format(null()), 0);
        assert_eq!(CStr::from_ptr(tern_encoding_name(null())).to_bytes(), b"");
        // The same format always gives the same static handle.
        assert_eq!(enc(TERN_FORMAT_TQ2_0), enc(TERN_FORMAT_TQ2_0));
    }
}

#[test]
fn block_specs_describe_the_layouts() {
    let spec = |format| {
        let mut s = std::mem::MaybeUninit::<tern_block_spec>::uninit();
        // SAFETY: s is writable; it is read only after TERN_OK says it was written.
        unsafe {
            assert_eq!(tern_encoding_block_spec(enc(format), s.as_mut_ptr()), TERN_OK);
            s.assume_init()
        }
    };
    let tq1 = spec(TERN_FORMAT_TQ1_0);
    assert_eq!((tq1.blocking, tq1.block_elems, tq1.block_bytes), (TERN_BLOCKING_FIXED, 256, 54));
    assert_eq!((tq1.scale_placement, tq1.scale_bytes, tq1.cols_multiple), (TERN_SCALE_BLOCK_END, 2, 256));
    assert_eq!(tq1.bits_per_element, 1.6875);
    assert_eq!(tq1.activation_hint, TERN_FORMAT_I8_ABSMAX);
    let tq2 = spec(TERN_FORMAT_TQ2_0);
    assert_eq!((tq2.block_elems, tq2.block_bytes, tq2.bits_per_element), (256, 66, 2.0625));
    let bitnet = spec(TERN_FORMAT_BITNET_B1_58);
    assert_eq!((bitnet.blocking, bitnet.code_bits, bitnet.scale_bytes), (TERN_BLOCKING_WHOLE_TENSOR, 2, 4));
    assert_eq!((bitnet.scale_placement, bitnet.cols_multiple), (TERN_SCALE_TENSOR_END, 4));
    let i8 = spec(TERN_FORMAT_I8_ABSMAX);
    assert_eq!((i8.blocking, i8.code_bits, i8.scale_bytes), (TERN_BLOCKING_PER_ROW, 8, 4));
    assert_eq!((i8.scale_placement, i8.activation_hint), (TERN_SCALE_ROWS_END, 0));
    let q2 = spec(TERN_FORMAT_Q2_0);
    assert_eq!((q2.blocking, q2.block_elems, q2.block_bytes), (TERN_BLOCKING_FIXED, 64, 18));
    assert_eq!((q2.scale_placement, q2.scale_bytes, q2.cols_multiple), (TERN_SCALE_BLOCK_START, 2, 64));
    assert_eq!((q2.bits_per_element, q2.activation_hint), (2.25, TERN_FORMAT_I8_ABSMAX));
    for (id, cols_multiple) in [(TERN_FORMAT_I2_S, 128), (TERN_FORMAT_I2_S_64, 64), (TERN_FORMAT_I2_S_R4, 128)] {
        let i2s = spec(id);
        assert_eq!((i2s.blocking, i2s.code_bits, i2s.scale_bytes), (TERN_BLOCKING_WHOLE_TENSOR, 2, 4));
        assert_eq!((i2s.scale_placement, i2s.cols_multiple), (TERN_SCALE_TENSOR_END, cols_multiple));
    }
    let f32 = spec(TERN_FORMAT_F32);
    assert_eq!((f32.block_elems, f32.block_bytes, f32.scale_placement), (1, 4, TERN_SCALE_NONE));
    assert_eq!(f32.activation_hint, TERN_FORMAT_F32);

    let mut untouched = spec(TERN_FORMAT_F32);
    let before = untouched;
    // SAFETY: NULL arguments are refused before any access.
    unsafe {
        assert_eq!(tern_encoding_block_spec(null(), &mut untouched), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_encoding_block_spec(enc(TERN_FORMAT_F32), null_mut()), TERN_ERR_NULL_POINTER);
    }
    assert_eq!(untouched, before);
}

/// Runs `tern_encode_checked` on a canary-filled buffer and checks it stays untouched
/// whenever the status is an error.
fn encode_status(format: u32, src: &[f32], rows: usize, cols: usize, dst_len: usize) -> tern_status {
    let mut dst = vec![CANARY_B; dst_len];
    // SAFETY: src and dst are live with their true lengths.
    let st = unsafe {
        tern_encode_checked(enc(format), src.as_ptr(), src.len(), rows, cols, dst.as_mut_ptr().cast(), dst_len)
    };
    if st != TERN_OK {
        assert!(dst.iter().all(|&b| b == CANARY_B), "format {format}: error {st} wrote the buffer");
    }
    st
}

#[test]
fn encode_errors_write_nothing() {
    let src = values(512, 1, 1.0);
    assert_eq!(encode_status(TERN_FORMAT_TQ2_0, &src, 2, 256, 132), TERN_OK);
    assert_eq!(encode_status(TERN_FORMAT_TQ2_0, &src, 2, 256, 131), TERN_ERR_LENGTH_MISMATCH);
    assert_eq!(encode_status(TERN_FORMAT_TQ2_0, &src[..511], 2, 256, 132), TERN_ERR_LENGTH_MISMATCH);
    assert_eq!(encode_status(TERN_FORMAT_TQ2_0, &src, 4, 128, 132), TERN_ERR_INVALID_SHAPE);
    assert_eq!(encode_status(TERN_FORMAT_TQ1_0, &src, 0, 512, 108), TERN_ERR_INVALID_SHAPE);
    assert_eq!(encode_status(TERN_FORMAT_BITNET_B1_58, &src, 1, 510, 200), TERN_ERR_INVALID_SHAPE);
    assert_eq!(encode_status(TERN_FORMAT_F32, &src, usize::MAX, 2, 4096), TERN_ERR_SIZE_OVERFLOW);
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let mut x = src.clone();
        x[300] = bad;
        for format in
            [TERN_FORMAT_F32, TERN_FORMAT_TQ1_0, TERN_FORMAT_TQ2_0, TERN_FORMAT_BITNET_B1_58, TERN_FORMAT_I8_ABSMAX]
        {
            assert_eq!(encode_status(format, &x, 2, 256, 4096), TERN_ERR_NON_FINITE, "format {format}");
        }
    }
    let mut huge = src.clone();
    huge[7] = 1.0e6;
    assert_eq!(encode_status(TERN_FORMAT_TQ1_0, &huge, 2, 256, 108), TERN_ERR_SCALE_OVERFLOW);

    let mut dst = [CANARY_B; 132];
    // SAFETY (all calls): NULL and overlapping pointers are refused before any access;
    // the others are live buffers with their true lengths.
    unsafe {
        let e = enc(TERN_FORMAT_TQ2_0);
        let d = dst.as_mut_ptr().cast::<c_void>();
        assert_eq!(tern_encode(null(), src.as_ptr(), 2, 256, d, 132), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_encode(e, null(), 2, 256, d, 132), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_encode(e, src.as_ptr(), 2, 256, null_mut(), 132), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_encode(e, src.as_ptr(), 2, 256, null_mut(), 0), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_encode_checked(e, null(), 0, 2, 256, d, 132), TERN_ERR_NULL_POINTER);
        assert!(dst.iter().all(|&b| b == CANARY_B));

        // dst overlapping src.
        let mut both = vec![0.5f32; 512 + 40];
        let p = both.as_mut_ptr();
        assert_eq!(tern_encode(e, p, 2, 256, p.add(500).cast(), 132), TERN_ERR_INVALID_ARGUMENT);
        // A misaligned float pointer.
        let raw = [0u32; 8];
        let odd = raw.as_ptr().cast::<u8>().add(1).cast::<f32>();
        let f = enc(TERN_FORMAT_F32);
        assert_eq!(tern_encode(f, odd, 1, 1, d, 132), TERN_ERR_INVALID_ARGUMENT);
    }
}

#[test]
fn decode_and_validate_errors() {
    let (rows, cols) = (2, 256);
    let src = values(rows * cols, 2, 1.0);
    let mut bytes = vec![0u8; 132];
    Format::Tq2_0.encode(&src, rows, cols, &mut bytes).unwrap();
    let e = enc(TERN_FORMAT_TQ2_0);
    let decode = |bytes: &[u8], rows, cols, dst_len| {
        let mut dst = vec![CANARY_F; dst_len];
        // SAFETY: live buffers with their true lengths.
        let st = unsafe { tern_decode(e, bytes.as_ptr().cast(), bytes.len(), rows, cols, dst.as_mut_ptr(), dst_len) };
        if st != TERN_OK {
            assert!(dst.iter().all(|&x| x == CANARY_F), "error {st} wrote the buffer");
        }
        st
    };
    assert_eq!(decode(&bytes, rows, cols, 512), TERN_OK);
    assert_eq!(decode(&bytes, rows, cols, 511), TERN_ERR_LENGTH_MISMATCH);
    assert_eq!(decode(&bytes[..131], rows, cols, 512), TERN_ERR_LENGTH_MISMATCH);
    assert_eq!(decode(&bytes, 1, 512, 512), TERN_OK);
    assert_eq!(decode(&bytes, 4, 128, 512), TERN_ERR_INVALID_SHAPE);
    assert_eq!(decode(&bytes, usize::MAX, 256, 512), TERN_ERR_SIZE_OVERFLOW);

    // SAFETY (all calls): NULLs are refused; the rest are live buffers.
    unsafe {
        let mut dst = [CANARY_F; 512];
        assert_eq!(
            tern_decode(null(), bytes.as_ptr().cast(), 132, 2, 256, dst.as_mut_ptr(), 512),
            TERN_ERR_NULL_POINTER
        );
        assert_eq!(tern_decode(e, null(), 132, 2, 256, dst.as_mut_ptr(), 512), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_decode(e, bytes.as_ptr().cast(), 132, 2, 256, null_mut(), 512), TERN_ERR_NULL_POINTER);
        assert!(dst.iter().all(|&x| x == CANARY_F));

        assert_eq!(tern_validate(e, bytes.as_ptr().cast(), 132, 2, 256), TERN_OK);
        assert_eq!(tern_validate(e, null(), 132, 2, 256), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_validate(e, bytes.as_ptr().cast(), 131, 2, 256), TERN_ERR_LENGTH_MISMATCH);
        let mut corrupt = bytes.clone();
        corrupt[5] |= 0b11; // element 5 of the first block gets code 3
        assert_eq!(tern_validate(e, corrupt.as_ptr().cast(), 132, 2, 256), TERN_ERR_CORRUPT_CODE);
        let f = enc(TERN_FORMAT_F32);
        let nan = f32::NAN.to_le_bytes();
        assert_eq!(tern_validate(f, nan.as_ptr().cast(), 4, 1, 1), TERN_ERR_NON_FINITE);
    }
}

#[test]
fn bitnet_import_keeps_the_given_scale() {
    let trits: Vec<i8> = (0..16).map(|i| (i % 3) as i8 - 1).collect();
    let mut dst = vec![CANARY_B; 9];
    // SAFETY (all calls): live buffers with their true lengths, or NULLs that are refused.
    unsafe {
        let st = tern_bitnet_import(trits.as_ptr(), 16, 0.25, 2, 8, dst.as_mut_ptr().cast(), 9);
        assert_eq!(st, TERN_OK);
        let mut want = vec![0u8; 8];
        tern::format::bitnet_import_trits(&trits, 0.25, &mut want).unwrap();
        assert_eq!(&dst[..8], &want[..]);
        assert_eq!(dst[8], CANARY_B);
        let mut out = [0f32; 16];
        let e = enc(TERN_FORMAT_BITNET_B1_58);
        assert_eq!(tern_decode(e, dst.as_ptr().cast(), 8, 2, 8, out.as_mut_ptr(), 16), TERN_OK);
        let expect: Vec<f32> = trits.iter().map(|&t| t as f32 * 0.25).collect();
        assert_eq!(&out[..], &expect[..]);

        let mut fresh = vec![CANARY_B; 8];
        let d = fresh.as_mut_ptr().cast::<c_void>();
        let mut bad = trits.clone();
        bad[3] = 2;
        assert_eq!(tern_bitnet_import(bad.as_ptr(), 16, 0.25, 2, 8, d, 8), TERN_ERR_CORRUPT_CODE);
        assert_eq!(tern_bitnet_import(trits.as_ptr(), 16, f32::NAN, 2, 8, d, 8), TERN_ERR_NON_FINITE);
        assert_eq!(tern_bitnet_import(trits.as_ptr(), 15, 0.25, 2, 8, d, 8), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(tern_bitnet_import(trits.as_ptr(), 16, 0.25, 2, 8, d, 7), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(tern_bitnet_import(trits.as_ptr(), 16, 0.25, 4, 4, d, 8), TERN_OK);
        fresh.fill(CANARY_B);
        let d = fresh.as_mut_ptr().cast::<c_void>();
        assert_eq!(tern_bitnet_import(trits.as_ptr(), 16, 0.25, 8, 2, d, 8), TERN_ERR_INVALID_SHAPE);
        assert_eq!(tern_bitnet_import(null(), 16, 0.25, 2, 8, d, 8), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_bitnet_import(trits.as_ptr(), 16, 0.25, 2, 8, null_mut(), 8), TERN_ERR_NULL_POINTER);
        assert!(fresh.iter().all(|&b| b == CANARY_B));
    }
}

#[test]
fn tensors_wrap_encode_get_decode_and_free() {
    let (rows, cols) = (2, 256);
    let src = values(rows * cols, 3, 3.0);
    let e = enc(TERN_FORMAT_TQ1_0);
    // SAFETY (all calls): live buffers with their true lengths; tensors are freed once,
    // after their last use; `bytes` outlives the wrapped tensor.
    unsafe {
        let mut owned = null_mut();
        assert_eq!(tern_tensor_encode(e, src.as_ptr(), src.len(), rows, cols, &mut owned), TERN_OK);
        assert_eq!((tern_tensor_format(owned), tern_tensor_rows(owned), tern_tensor_cols(owned)), (2, rows, cols));

        let (mut data, mut len) = (null(), 0);
        assert_eq!(tern_tensor_data(owned, &mut data, &mut len), TERN_OK);
        let bytes = std::slice::from_raw_parts(data.cast::<u8>(), len).to_vec();
        assert_eq!(len, 108);

        let mut wrapped = null_mut();
        assert_eq!(tern_tensor_wrap(e, bytes.as_ptr().cast(), len, rows, cols, &mut wrapped), TERN_OK);
        assert_eq!(tern_tensor_validate(wrapped), TERN_OK);
        let mut a = vec![0f32; rows * cols];
        let mut b = vec![0f32; rows * cols];
        assert_eq!(tern_tensor_decode(owned, a.as_mut_ptr(), a.len()), TERN_OK);
        assert_eq!(tern_tensor_decode(wrapped, b.as_mut_ptr(), b.len()), TERN_OK);
        assert_eq!(a, b);
        assert_eq!(a, core_decode(Format::Tq1_0, &bytes, rows, cols));
        for (row, col) in [(0, 0), (1, 255), (1, 17)] {
            let mut x = CANARY_F;
            assert_eq!(tern_tensor_get(wrapped, row, col, &mut x), TERN_OK);
            assert_eq!(x, a[row * cols + col]);
        }

        let mut x = CANARY_F;
        assert_eq!(tern_tensor_get(wrapped, 2, 0, &mut x), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_tensor_get(wrapped, 0, 256, &mut x), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_tensor_get(null(), 0, 0, &mut x), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_tensor_get(wrapped, 0, 0, null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!(x, CANARY_F);
        let mut short = vec![CANARY_F; rows * cols - 1];
        assert_eq!(tern_tensor_decode(wrapped, short.as_mut_ptr(), short.len()), TERN_ERR_LENGTH_MISMATCH);
        assert!(short.iter().all(|&v| v == CANARY_F));
        assert_eq!(tern_tensor_decode(wrapped, null_mut(), 512), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_tensor_validate(null()), TERN_ERR_NULL_POINTER);
        assert_eq!((tern_tensor_format(null()), tern_tensor_rows(null()), tern_tensor_cols(null())), (0, 0, 0));

        let mut untouched = std::ptr::dangling_mut::<tern_tensor>();
        assert_eq!(
            tern_tensor_wrap(e, bytes.as_ptr().cast(), len - 1, rows, cols, &mut untouched),
            TERN_ERR_LENGTH_MISMATCH
        );
        assert_eq!(tern_tensor_wrap(e, null(), len, rows, cols, &mut untouched), TERN_ERR_NULL_POINTER);
        assert_eq!(
            tern_tensor_wrap(null(), bytes.as_ptr().cast(), len, rows, cols, &mut untouched),
            TERN_ERR_NULL_POINTER
        );
        let mut nan = src.clone();
        nan[0] = f32::NAN;
        assert_eq!(tern_tensor_encode(e, nan.as_ptr(), nan.len(), rows, cols, &mut untouched), TERN_ERR_NON_FINITE);
        assert_eq!(tern_tensor_encode(e, src.as_ptr(), src.len(), 1, 256, &mut untouched), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(untouched, std::ptr::dangling_mut::<tern_tensor>());
        assert_eq!(tern_tensor_wrap(e, bytes.as_ptr().cast(), len, rows, cols, null_mut()), TERN_ERR_NULL_POINTER);

        tern_tensor_free(wrapped);
        tern_tensor_free(owned);
        tern_tensor_free(null_mut());
    }
}

#[test]
fn a_wrapped_tensor_reads_the_callers_bytes_in_place() {
    let bytes = 1.5f32.to_le_bytes();
    // SAFETY: bytes outlives the tensor, which is freed once.
    unsafe {
        let mut t = null_mut();
        assert_eq!(tern_tensor_wrap(enc(TERN_FORMAT_F32), bytes.as_ptr().cast(), 4, 1, 1, &mut t), TERN_OK);
        let (mut data, mut len) = (null(), 0);
        assert_eq!(tern_tensor_data(t, &mut data, &mut len), TERN_OK);
        assert_eq!((data.cast::<u8>(), len), (bytes.as_ptr(), 4));
        tern_tensor_free(t);
    }
}

/// A tensor handle moved to other threads (the header documents tensors as readable from
/// many threads at once).
struct Shared(*const tern_tensor);
// SAFETY: tern_tensor is Send + Sync (asserted in src/ffi/tensor.rs); this only carries
// the pointer, which outlives the threads below.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// Going through a method makes closures capture the whole (Sync) wrapper.
    fn ptr(&self) -> *const tern_tensor {
        self.0
    }
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "wasm32 has no threads")]
fn one_tensor_is_read_from_many_threads() {
    let (rows, cols) = (4, 256);
    let src = values(rows * cols, 9, 1.0);
    let mut t = null_mut();
    // SAFETY: live buffers with their true lengths; t is freed after the threads end.
    unsafe {
        assert_eq!(tern_tensor_encode(enc(TERN_FORMAT_TQ2_0), src.as_ptr(), src.len(), rows, cols, &mut t), TERN_OK);
    }
    let mut want = vec![0f32; rows * cols];
    // SAFETY: t is live and want holds rows * cols floats.
    assert_eq!(unsafe { tern_tensor_decode(t, want.as_mut_ptr(), want.len()) }, TERN_OK);
    let shared = Shared(t);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let t = shared.ptr();
                for _ in 0..50 {
                    let mut out = vec![0f32; rows * cols];
                    // SAFETY: t stays live until the scope ends; out is this thread's.
                    assert_eq!(unsafe { tern_tensor_decode(t, out.as_mut_ptr(), out.len()) }, TERN_OK);
                    assert_eq!(out, want);
                    let mut x = 0.0;
                    // SAFETY: as above.
                    assert_eq!(unsafe { tern_tensor_get(t, 3, 255, &mut x) }, TERN_OK);
                    assert_eq!(x, want[3 * cols + 255]);
                }
            });
        }
    });
    // SAFETY: every thread has ended; t is freed once.
    unsafe { tern_tensor_free(t) };
}

/// Random shapes and lengths, right and wrong, through every buffer function: each call
/// returns a status (never TERN_ERR_PANIC) and an error never touches the output.
#[test]
fn random_arguments_never_panic_and_errors_never_write() {
    let mut s = 0x9E3779B9u32;
    let mut next = |n: usize| {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        s as usize % n
    };
    let floats = values(4096, 5, 2.0);
    let pick = |r: usize| [0, 1, 2, 3, 4, 7, 8, 255, 256, 257, 512, 1024][r];
    // Successes per function ([encode, decode, wrap, import]): the loop must reach both sides.
    let mut ok = [0usize; 4];
    for _ in 0..3000 {
        let format = 1 + next(5) as u32;
        let (rows, cols) = (pick(next(6)), pick(next(12)));
        let e = enc(format);
        let mut need = 0;
        // SAFETY: need is a live out-parameter.
        let shape_ok = unsafe { tern_encoding_bytes_for(e, rows, cols, &mut need) } == TERN_OK;
        let n = rows.saturating_mul(cols).min(4096);
        let src_len = match next(3) {
            0 => n,
            1 => n.saturating_sub(1),
            _ => next(4096),
        };
        let dst_len = match next(3) {
            0 if shape_ok => need,
            1 if shape_ok => need.saturating_sub(1 + next(4)),
            _ => next(8192),
        };
        let mut dst = vec![CANARY_B; dst_len];
        // SAFETY: src_len <= floats.len() and dst is dst_len bytes.
        let st =
            unsafe { tern_encode_checked(e, floats.as_ptr(), src_len, rows, cols, dst.as_mut_ptr().cast(), dst_len) };
        assert_ne!(st, TERN_ERR_PANIC);
        if st != TERN_OK {
            assert!(dst.iter().all(|&b| b == CANARY_B), "encode error {st} wrote");
        } else {
            assert!(shape_ok && src_len == rows * cols && dst_len >= need);
            ok[0] += 1;
        }

        let bytes_len = if shape_ok && next(2) == 0 { need } else { next(8192) };
        let bytes: Vec<u8> = (0..bytes_len).map(|_| next(256) as u8).collect();
        let out_len = if next(2) == 0 { n } else { next(4096) };
        let mut out = vec![CANARY_F; out_len];
        // SAFETY: live buffers with their true lengths.
        let st = unsafe { tern_decode(e, bytes.as_ptr().cast(), bytes.len(), rows, cols, out.as_mut_ptr(), out_len) };
        assert_ne!(st, TERN_ERR_PANIC);
        if st != TERN_OK {
            assert!(out.iter().all(|&x| x.to_bits() == CANARY_F.to_bits()), "decode error {st} wrote");
        } else {
            ok[1] += 1;
        }
        // SAFETY: live buffer with its true length.
        let st = unsafe { tern_validate(e, bytes.as_ptr().cast(), bytes.len(), rows, cols) };
        assert_ne!(st, TERN_ERR_PANIC);

        let mut t = null_mut();
        // SAFETY: bytes outlives the tensor, which is freed below.
        let st = unsafe { tern_tensor_wrap(e, bytes.as_ptr().cast(), bytes.len(), rows, cols, &mut t) };
        assert_ne!(st, TERN_ERR_PANIC);
        if st == TERN_OK {
            ok[2] += 1;
            let mut x = CANARY_F;
            // SAFETY: t is live.
            let st = unsafe { tern_tensor_get(t, next(rows + 1), next(cols + 1), &mut x) };
            assert!(st == TERN_OK || (st == TERN_ERR_OUT_OF_BOUNDS && x.to_bits() == CANARY_F.to_bits()));
            // SAFETY: t is live.
            assert_ne!(unsafe { tern_tensor_validate(t) }, TERN_ERR_PANIC);
        }
        // SAFETY: t is NULL or live, and freed once.
        unsafe { tern_tensor_free(t) };

        let mut bitnet_need = 0;
        // SAFETY: bitnet_need is a live out-parameter.
        let bitnet_ok =
            unsafe { tern_encoding_bytes_for(enc(TERN_FORMAT_BITNET_B1_58), rows, cols, &mut bitnet_need) } == TERN_OK;
        let trits_len = if next(2) == 0 { n } else { next(2048) };
        let trits: Vec<i8> = (0..trits_len).map(|_| next(3) as i8 - 1).collect();
        let mut dst = vec![CANARY_B; if bitnet_ok && next(2) == 0 { bitnet_need } else { next(1024) }];
        // SAFETY: live buffers with their true lengths.
        let st = unsafe {
            tern_bitnet_import(trits.as_ptr(), trits.len(), 0.5, rows, cols, dst.as_mut_ptr().cast(), dst.len())
        };
        assert_ne!(st, TERN_ERR_PANIC);
        if st != TERN_OK {
            assert!(dst.iter().all(|&b| b == CANARY_B), "import error {st} wrote");
        } else {
            ok[3] += 1;
        }
    }
    assert!(ok.iter().all(|&n| n > 0), "successes per function: {ok:?}");
}

fn last_error() -> String {
    // SAFETY: tern_last_error never returns NULL; the string is read before the next call.
    unsafe { CStr::from_ptr(tern_last_error()) }.to_str().unwrap().to_owned()
}

#[test]
fn the_last_error_names_the_argument_and_the_values() {
    let e = enc(TERN_FORMAT_TQ2_0);
    let src = values(512, 3, 1.0);
    let mut dst = vec![CANARY_B; 100];
    // SAFETY (all calls): buffers are live with their true lengths, or NULL.
    unsafe {
        assert_eq!(tern_encode(e, src.as_ptr(), 2, 256, dst.as_mut_ptr().cast(), dst.len()), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(last_error(), "dst (bytes): 100 given, 132 required");
        assert_eq!(tern_encode(e, null(), 2, 256, dst.as_mut_ptr().cast(), dst.len()), TERN_ERR_NULL_POINTER);
        assert_eq!(last_error(), "argument `src` is NULL");
        assert_eq!(tern_encode(e, src.as_ptr(), 2, 100, dst.as_mut_ptr().cast(), dst.len()), TERN_ERR_INVALID_SHAPE);
        assert!(last_error().contains("2x100"), "{}", last_error());
        let mut big = vec![0u8; 132];
        assert_eq!(tern_encode(e, src.as_ptr(), 2, 256, big.as_mut_ptr().cast(), big.len()), TERN_OK);
        assert_eq!(last_error(), "", "a success clears the message");

        // Overlapping buffers name both arguments.
        let mut floats = vec![0f32; 512];
        let p = floats.as_mut_ptr();
        assert_eq!(tern_decode(e, p.cast(), 132, 2, 256, p, 512), TERN_ERR_INVALID_ARGUMENT);
        assert_eq!(last_error(), "argument `dst`: overlaps `src`");

        // The forced kernel's name and where it came from.
        let opts = tern_dispatcher_options { n_threads: 1, kernel: c"bitnet_gemv/avx9".as_ptr(), ..Default::default() };
        let mut d = null_mut();
        assert_eq!(tern_dispatcher_new(&opts, &mut d), TERN_ERR_UNKNOWN_KERNEL);
        assert_eq!(last_error(), "no kernel named \"bitnet_gemv/avx9\" (from the dispatcher option `kernel`)");
        assert!(d.is_null());

        // A transposed weight: both shapes in the message.
        let (mut w, mut x) = (null_mut(), null_mut());
        let wsrc = values(256 * 512, 4, 1.0);
        assert_eq!(tern_tensor_encode(e, wsrc.as_ptr(), wsrc.len(), 256, 512, &mut w), TERN_OK);
        let xsrc = values(256, 5, 1.0);
        assert_eq!(tern_tensor_encode(enc(TERN_FORMAT_F32), xsrc.as_ptr(), 256, 1, 256, &mut x), TERN_OK);
        assert_eq!(tern_dispatcher_new(null(), &mut d), TERN_OK);
        let mut scope = null_mut();
        assert_eq!(tern_scope_new(0, &mut scope), TERN_OK);
        let mut out = vec![CANARY_F; 512];
        assert_eq!(tern_matmul(d, x, w, scope, out.as_mut_ptr(), out.len()), TERN_ERR_SHAPE_MISMATCH);
        assert!(last_error().starts_with("act is F32 1x256, weight is TQ2_0 256x512: "), "{}", last_error());
        assert!(out.iter().all(|v| v.to_bits() == CANARY_F.to_bits()));
        tern_scope_free(scope);
        tern_dispatcher_free(d);
        tern_tensor_free(w);
        tern_tensor_free(x);
    }
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "wasm32 has no threads")]
fn each_thread_has_its_own_last_error() {
    // SAFETY: a NULL encoding is refused.
    assert_eq!(unsafe { tern_encoding_block_spec(null(), null_mut()) }, TERN_ERR_NULL_POINTER);
    assert_eq!(last_error(), "argument `enc` is NULL");
    std::thread::spawn(|| assert_eq!(last_error(), "")).join().unwrap();
    assert_eq!(last_error(), "argument `enc` is NULL");
}
