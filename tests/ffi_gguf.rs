//! GGUF files through the C entry points: the fixture written by the `gguf` package opened
//! by path (mmap) and from bytes, its tensors wrapped without a copy and run through the
//! dispatcher; and every prefix and many corruptions of it refused with a status, no
//! out-parameter written, and no allocation larger than the input could describe (a
//! counting allocator in this test binary measures that).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::{c_char, CStr, CString};
use std::ptr::{null, null_mut};
use tern::ffi::*;
use tern::gguf::Gguf;

/// Records the largest single allocation this thread makes while its `ARMED` is set (the
/// tests run in parallel threads).
struct Counting;

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // `try_with`: a thread being torn down still allocates.
        if ARMED.try_with(Cell::get).unwrap_or(false) {
            let _ = LARGEST.try_with(|l| l.set(l.get().max(layout.size())));
        }
        // SAFETY: the caller's layout, forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: ptr came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gguf/tiny_bitnet.gguf");

fn fixture() -> Vec<u8> {
    std::fs::read(FIXTURE).expect("tests/fixtures/gguf/tiny_bitnet.gguf")
}

fn last_error() -> String {
    // SAFETY: never NULL, NUL-terminated.
    unsafe { CStr::from_ptr(tern_last_error()) }.to_string_lossy().into_owned()
}

fn sentinel<T>() -> *mut T {
    std::ptr::NonNull::dangling().as_ptr()
}

fn info(g: *const tern_gguf, index: usize) -> tern_gguf_tensor_info {
    let mut out =
        tern_gguf_tensor_info { name: null(), ggml_type: 0, format: 0, n_dims: 0, ne: [0; 4], offset: 0, bytes: 0 };
    // SAFETY: a live handle and a writable out-parameter.
    assert_eq!(unsafe { tern_gguf_tensor_info_get(g, index, &mut out) }, TERN_OK, "{}", last_error());
    out
}

/// Opening by path and from bytes gives the table the Rust reader gives, and each tensor of
/// a tern format wraps over the file's own bytes with rows = ne[1], cols = ne[0]: the TQ
/// model, and the file of Q2_0 (type 42) and I2_S (type 36) tensors.
#[test]
#[cfg_attr(
    target_family = "wasm",
    ignore = "wasm32 has no mmap and no temp dir: tern_gguf_open is refused there; the bytes entry points are tested"
)]
fn the_fixtures_open_list_find_and_wrap() {
    let q2_i2s = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gguf/tiny_q2_i2s.gguf");
    opens_lists_finds_and_wraps(FIXTURE, &[TERN_FORMAT_TQ1_0, TERN_FORMAT_TQ2_0]);
    opens_lists_finds_and_wraps(q2_i2s, &[TERN_FORMAT_Q2_0, TERN_FORMAT_I2_S]);
}

/// See `the_fixtures_open_list_find_and_wrap`; `formats` are the ternary formats the file
/// holds.
fn opens_lists_finds_and_wraps(file: &str, formats: &[u32]) {
    let bytes = std::fs::read(file).unwrap();
    let reference = Gguf::parse(&bytes).unwrap();
    let held: Vec<u32> = reference.tensors.iter().filter_map(|t| t.ggml_type.format()).map(|f| f.id()).collect();
    assert!(formats.iter().all(|f| held.contains(f)), "{file} holds {held:?}");
    let path = CString::new(file).unwrap();
    let (mut mapped, mut lent) = (null_mut(), null_mut());
    // SAFETY (all calls): live handles, writable out-parameters, `bytes` outlives `lent`
    // and every tensor wrapped from it.
    unsafe {
        assert_eq!(tern_gguf_open(path.as_ptr(), &mut mapped), TERN_OK, "{}", last_error());
        assert_eq!(last_error(), "");
        assert_eq!(tern_gguf_open_bytes(bytes.as_ptr().cast(), bytes.len(), &mut lent), TERN_OK);
        for g in [mapped, lent] {
            assert_eq!(tern_gguf_tensor_count(g), reference.tensors.len());
            for (i, t) in reference.tensors.iter().enumerate() {
                let got = info(g, i);
                assert_eq!(CStr::from_ptr(got.name).to_str().unwrap(), t.name);
                assert_eq!((got.ggml_type, got.n_dims, got.ne), (t.ggml_type.0, t.n_dims, t.dims));
                assert_eq!(got.format, t.ggml_type.format().map_or(0, |f| f.id()));
                assert_eq!(got.offset, reference.data_start + t.data_offset);
                assert_eq!(got.bytes as u64, t.size.unwrap());
                let mut index = usize::MAX;
                let name = CString::new(t.name).unwrap();
                assert_eq!(tern_gguf_find(g, name.as_ptr(), &mut index), TERN_OK);
                assert_eq!(index, i);

                let mut w = null_mut();
                assert_eq!(tern_gguf_tensor_wrap(g, i, &mut w), TERN_OK, "{}: {}", t.name, last_error());
                assert_eq!((tern_tensor_rows(w), tern_tensor_cols(w)), (t.dims[1] as usize, t.dims[0] as usize));
                assert_eq!(tern_tensor_format(w), got.format);
                let (mut data, mut len) = (null(), 0);
                assert_eq!(tern_tensor_data(w, &mut data, &mut len), TERN_OK);
                assert_eq!(std::slice::from_raw_parts(data.cast::<u8>(), len), reference.tensor_data(t).unwrap());
                if g == lent {
                    assert_eq!(data.cast::<u8>(), bytes.as_ptr().add(got.offset as usize), "not copied");
                }
                assert_eq!(tern_tensor_validate(w), TERN_OK);
                tern_tensor_free(w);
            }
        }
        let mut index = 7usize;
        assert_eq!(tern_gguf_find(mapped, c"blk.0.attn_k.weight".as_ptr(), &mut index), TERN_ERR_NOT_FOUND);
        assert_eq!(last_error(), "no tensor named \"blk.0.attn_k.weight\"");
        assert_eq!(index, 7);
        tern_gguf_free(mapped);
        tern_gguf_free(lent);
    }
}

/// The tensor keeps the mapping: it is read after the handle is freed.
#[test]
#[cfg_attr(
    target_family = "wasm",
    ignore = "wasm32 has no mmap and no temp dir: tern_gguf_open is refused there; the bytes entry points are tested"
)]
fn a_wrapped_tensor_outlives_its_handle() {
    let path = CString::new(FIXTURE).unwrap();
    let (mut g, mut w, mut index) = (null_mut(), null_mut(), 0);
    // SAFETY: as above; `w` is used after `g` is freed, which the API allows.
    unsafe {
        assert_eq!(tern_gguf_open(path.as_ptr(), &mut g), TERN_OK);
        assert_eq!(tern_gguf_find(g, c"blk.0.attn_q.weight".as_ptr(), &mut index), TERN_OK);
        assert_eq!(tern_gguf_tensor_wrap(g, index, &mut w), TERN_OK);
        let mut before = vec![0f32; 64 * 512];
        assert_eq!(tern_tensor_decode(w, before.as_mut_ptr(), before.len()), TERN_OK);
        tern_gguf_free(g);
        let mut after = vec![1f32; 64 * 512];
        assert_eq!(tern_tensor_decode(w, after.as_mut_ptr(), after.len()), TERN_OK);
        assert_eq!(before, after);
        assert!(before.iter().any(|&v| v != 0.0));
        tern_tensor_free(w);
    }
}

#[test]
#[cfg_attr(
    target_family = "wasm",
    ignore = "wasm32 has no mmap and no temp dir: tern_gguf_open is refused there; the bytes entry points are tested"
)]
fn bad_arguments_are_refused_and_named() {
    let bytes = fixture();
    let mut g = null_mut();
    // SAFETY (all calls): NULL, dangling sentinels a refused call must not touch, or live
    // handles and buffers.
    unsafe {
        assert_eq!(tern_gguf_open_bytes(bytes.as_ptr().cast(), bytes.len(), &mut g), TERN_OK);
        let mut out = sentinel::<tern_gguf>();
        assert_eq!(tern_gguf_open(null(), &mut out), TERN_ERR_NULL_POINTER);
        assert_eq!(last_error(), "argument `path` is NULL");
        assert_eq!(tern_gguf_open(c"/nonexistent/model.gguf".as_ptr(), &mut out), TERN_ERR_IO);
        assert!(last_error().starts_with("stat /nonexistent/model.gguf: "), "{}", last_error());
        assert_eq!(tern_gguf_open(c"/".as_ptr(), &mut out), TERN_ERR_IO, "a directory");
        assert_eq!(last_error(), "open /: not a regular file");
        assert_eq!(tern_gguf_open(c"/dev/zero".as_ptr(), &mut out), TERN_ERR_IO, "a device");
        let empty = std::env::temp_dir().join(format!("tern-empty-{}.gguf", std::process::id()));
        std::fs::write(&empty, b"").unwrap();
        let empty_c = CString::new(empty.to_str().unwrap()).unwrap();
        assert_eq!(tern_gguf_open(empty_c.as_ptr(), &mut out), TERN_ERR_INVALID_FILE, "{}", last_error());
        std::fs::remove_file(&empty).unwrap();
        assert_eq!(tern_gguf_open(c"x".as_ptr(), null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_open_bytes(null(), 10, &mut out), TERN_ERR_NULL_POINTER);
        assert_eq!(last_error(), "argument `data` is NULL");
        assert_eq!(out, sentinel());

        let mut i = sentinel_info();
        assert_eq!(tern_gguf_tensor_info_get(null(), 0, &mut i), TERN_ERR_NULL_POINTER);
        assert_eq!(last_error(), "argument `g` is NULL");
        assert_eq!(tern_gguf_tensor_info_get(g, 5, &mut i), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(last_error(), "argument `index`: 5 given, the file has 5 tensors");
        assert_eq!(tern_gguf_tensor_info_get(g, usize::MAX, &mut i), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_gguf_tensor_info_get(g, 0, null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!(i.ggml_type, sentinel_info().ggml_type);

        let mut index = 99usize;
        assert_eq!(tern_gguf_find(null(), c"x".as_ptr(), &mut index), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_find(g, null(), &mut index), TERN_ERR_NULL_POINTER);
        assert_eq!(last_error(), "argument `name` is NULL");
        assert_eq!(tern_gguf_find(g, c"".as_ptr(), &mut index), TERN_ERR_NOT_FOUND);
        assert_eq!(tern_gguf_find(g, c"token_embd.weight".as_ptr(), null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!(index, 99);

        let mut t = sentinel::<tern_tensor>();
        assert_eq!(tern_gguf_tensor_wrap(null(), 0, &mut t), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_tensor_wrap(g, 5, &mut t), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_gguf_tensor_wrap(g, 0, null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!(t, sentinel());
        assert_eq!(tern_gguf_tensor_count(null()), 0);
        tern_gguf_free(null_mut());
        tern_gguf_free(g);
    }
}

fn sentinel_info() -> tern_gguf_tensor_info {
    tern_gguf_tensor_info {
        name: sentinel::<c_char>(),
        ggml_type: 0xA5A5,
        format: 9,
        n_dims: 9,
        ne: [9; 4],
        offset: 9,
        bytes: 9,
    }
}

/// Opens `bytes`; returns the status, and checks a refusal wrote nothing and allocated at
/// most a small multiple of the input (the reader copies names and a table).
fn open_status(bytes: &[u8]) -> tern_status {
    let mut g = sentinel::<tern_gguf>();
    LARGEST.with(|l| l.set(0));
    ARMED.with(|a| a.set(true));
    // SAFETY: `bytes` outlives the handle, which is freed below.
    let status = unsafe { tern_gguf_open_bytes(bytes.as_ptr().cast(), bytes.len(), &mut g) };
    ARMED.with(|a| a.set(false));
    let largest = LARGEST.with(Cell::get);
    assert!(largest <= 4 * bytes.len() + 4096, "{} bytes of input allocated {largest} at once", bytes.len());
    if status == TERN_OK {
        // SAFETY: a handle from a successful open, freed once.
        unsafe { tern_gguf_free(g) };
    } else {
        assert_eq!(g, sentinel(), "a refused open wrote its out-parameter");
        assert!(!last_error().is_empty());
    }
    status
}

/// Every prefix: refused with TERN_ERR_INVALID_FILE, or (only when the cut falls in the
/// padding after the last tensor) accepted with every tensor inside the prefix.
#[test]
fn every_prefix_is_refused_or_complete() {
    let bytes = fixture();
    let full = Gguf::parse(&bytes).unwrap();
    let end = full.tensors.iter().map(|t| full.data_start + t.data_offset + t.size.unwrap()).max().unwrap() as usize;
    for len in 0..bytes.len() {
        let status = open_status(&bytes[..len]);
        if len < end {
            assert_eq!(status, TERN_ERR_INVALID_FILE, "prefix of {len} bytes: {}", last_error());
        } else {
            assert_eq!(status, TERN_OK, "prefix of {len} bytes holds every tensor");
        }
    }
}

/// Corrupted header fields: absurd counts, string lengths, dimensions whose product
/// overflows, offsets past the end or misaligned, unknown types. Each is refused with
/// TERN_ERR_INVALID_FILE and a message, never a crash or a large allocation.
#[test]
fn corrupted_headers_are_refused() {
    let bytes = fixture();
    let full = Gguf::parse(&bytes).unwrap();
    let patch = |at: usize, value: &[u8]| {
        let mut b = bytes.clone();
        b[at..at + value.len()].copy_from_slice(value);
        b
    };
    let mut cases: Vec<(String, Vec<u8>, &str)> = vec![
        ("magic".into(), patch(0, b"GGUG"), "magic"),
        ("version 1".into(), patch(4, &1u32.to_le_bytes()), "version"),
        ("tensor count 2^63".into(), patch(8, &(1u64 << 63).to_le_bytes()), "truncated or corrupt: tensor count"),
        ("tensor count max".into(), patch(8, &u64::MAX.to_le_bytes()), "truncated or corrupt: tensor count"),
        ("metadata count 2^40".into(), patch(16, &(1u64 << 40).to_le_bytes()), "truncated or corrupt: metadata count"),
        ("first key length 2^62".into(), patch(24, &(1u64 << 62).to_le_bytes()), "truncated"),
        ("first key length max".into(), patch(24, &u64::MAX.to_le_bytes()), "truncated"),
    ];
    // The first tensor info: its name, then n_dims, dims, type, offset.
    let first = &full.tensors[0];
    let name_at = bytes.windows(first.name.len()).position(|w| w == first.name.as_bytes()).unwrap();
    let n_dims_at = name_at + first.name.len();
    let dims_at = n_dims_at + 4;
    let type_at = dims_at + 8 * first.n_dims as usize;
    let offset_at = type_at + 4;
    cases.extend([
        ("name length max".to_string(), patch(name_at - 8, &u64::MAX.to_le_bytes()), "truncated"),
        ("n_dims 5".to_string(), patch(n_dims_at, &5u32.to_le_bytes()), "dimensions"),
        ("n_dims max".to_string(), patch(n_dims_at, &u32::MAX.to_le_bytes()), "dimensions"),
        ("ne0 2^40".to_string(), patch(dims_at + 8, &(1u64 << 40).to_le_bytes()), "past the end"),
        (
            "dims overflow".to_string(),
            patch(dims_at, &[(1u64 << 40).to_le_bytes(), (1u64 << 40).to_le_bytes()].concat()),
            "more elements than fit",
        ),
        ("unknown ggml type".to_string(), patch(type_at, &9999u32.to_le_bytes()), ""),
        ("offset past end".to_string(), patch(offset_at, &(1u64 << 50).to_le_bytes()), "past the end"),
        ("offset max".to_string(), patch(offset_at, &(u64::MAX - 31).to_le_bytes()), "past the end"),
        ("misaligned offset".to_string(), patch(offset_at, &1u64.to_le_bytes()), "alignment"),
    ]);
    for (what, file, message) in &cases {
        let status = open_status(file);
        if what == "unknown ggml type" {
            // Legal: the table lists it, with format 0 and bytes 0, and wrap refuses it.
            assert_eq!(status, TERN_OK, "{what}: {}", last_error());
            let mut g = null_mut();
            let mut t = sentinel::<tern_tensor>();
            // SAFETY: `file` outlives the handle; writable out-parameters.
            unsafe {
                assert_eq!(tern_gguf_open_bytes(file.as_ptr().cast(), file.len(), &mut g), TERN_OK);
                let i = info(g, 0);
                assert_eq!((i.ggml_type, i.format, i.bytes), (9999, 0, 0));
                assert_eq!(tern_gguf_tensor_wrap(g, 0, &mut t), TERN_ERR_UNSUPPORTED);
                assert!(last_error().contains("ggml type 9999"), "{}", last_error());
                assert_eq!(t, sentinel());
                tern_gguf_free(g);
            }
            continue;
        }
        assert_eq!(status, TERN_ERR_INVALID_FILE, "{what}: {}", last_error());
        assert!(last_error().contains(message), "{what}: {}", last_error());
    }
}

const ALL_TYPES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gguf/all_types.gguf");

/// Opens `bytes` (which must outlive the handle) through the C entry point.
fn open(bytes: &[u8]) -> *mut tern_gguf {
    let mut g = null_mut();
    // SAFETY: `bytes` outlives the handle (each test frees it first).
    assert_eq!(
        unsafe { tern_gguf_open_bytes(bytes.as_ptr().cast(), bytes.len(), &mut g) },
        TERN_OK,
        "{}",
        last_error()
    );
    g
}

fn kv_index(g: *const tern_gguf, key: &str) -> usize {
    let key = CString::new(key).unwrap();
    let mut index = usize::MAX;
    // SAFETY: a live handle, a NUL-terminated key, a writable out-parameter.
    assert_eq!(unsafe { tern_gguf_kv_find(g, key.as_ptr(), &mut index) }, TERN_OK, "{}", last_error());
    index
}

/// A (pointer, length) pair from the C API as bytes.
///
/// # Safety
/// `ptr` points to `len` bytes that outlive the result.
unsafe fn bytes_at<'a>(ptr: *const c_char, len: usize) -> &'a [u8] {
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts(ptr.cast(), len) }
}

/// Checks one typed getter on the entry `key` (GGUF type `ty`, value `want`) and on every
/// entry of another type (refused, the output untouched), and the same for the array
/// `test.array.<name>` and its element getter.
macro_rules! check_getter {
    ($g:expr, $name:literal, $get:ident, $array_get:ident, $t:ty, $ty:expr, $want:expr, $canary:expr) => {{
        let g = $g;
        let index = kv_index(g, concat!("test.", $name));
        let array = kv_index(g, concat!("test.array.", $name));
        let (mut out, mut ty, mut len) = ($canary, u32::MAX, usize::MAX);
        // SAFETY (the block): a live handle and writable out-parameters.
        unsafe {
            assert_eq!(tern_gguf_kv_type(g, index, &mut ty), TERN_OK);
            assert_eq!(ty, $ty, $name);
            assert_eq!($get(g, index, &mut out), TERN_OK, "{}", last_error());
            assert_eq!(out, $want, $name);
            assert_eq!(tern_gguf_kv_array_len(g, array, &mut ty, &mut len), TERN_OK, "{}", last_error());
            assert_eq!((ty, len), ($ty, 3), $name);
            for (i, want) in
                [$want, if $ty == TERN_GGUF_TYPE_BOOL { $want } else { 0 as $t }, $want].into_iter().enumerate()
            {
                out = $canary;
                assert_eq!($array_get(g, array, i, &mut out), TERN_OK, "{}", last_error());
                assert_eq!(out, want, "{}[{i}]", $name);
            }
            out = $canary;
            assert_eq!($array_get(g, array, 3, &mut out), TERN_ERR_OUT_OF_BOUNDS);
            assert!(last_error().starts_with("argument `i`: 3 given, "), "{}", last_error());
            assert_eq!($array_get(g, index, 0, &mut out), TERN_ERR_INVALID_ARGUMENT, "a scalar is not an array");
            assert_eq!($get(g, array, &mut out), TERN_ERR_INVALID_ARGUMENT, "an array is not a scalar");
            assert!(last_error().contains(concat!("has type array of ", $name, ", not ", $name)), "{}", last_error());
            // Every other entry's type is refused by this getter (no conversion).
            for other in 0..tern_gguf_kv_count(g) {
                if other != index {
                    assert_eq!($get(g, other, &mut out), TERN_ERR_INVALID_ARGUMENT, "{} on entry {other}", $name);
                }
                if other != array {
                    assert_ne!($array_get(g, other, 0, &mut out), TERN_OK, "{} on entry {other}", $name);
                }
            }
            assert_eq!($get(g, tern_gguf_kv_count(g), &mut out), TERN_ERR_OUT_OF_BOUNDS);
            assert_eq!($get(null(), index, &mut out), TERN_ERR_NULL_POINTER);
            assert_eq!($get(g, index, null_mut()), TERN_ERR_NULL_POINTER);
            assert_eq!(out, $canary, "{}: a refused call wrote its output", $name);
        }
    }};
}

/// Every GGUF value type through its C getter: the values the gguf package wrote, each
/// getter refusing every other type (and arrays, and out-of-range elements) by name.
#[test]
fn every_metadata_type_reads_through_its_getter() {
    let bytes = std::fs::read(ALL_TYPES).unwrap();
    let g = open(&bytes);
    let reference = Gguf::parse(&bytes).unwrap();
    // SAFETY: a live handle.
    assert_eq!(unsafe { tern_gguf_kv_count(g) }, reference.metadata.len());
    // SAFETY: NULL is allowed (it counts 0).
    assert_eq!(unsafe { tern_gguf_kv_count(null()) }, 0);
    // Keys by index, and back by name.
    for (index, kv) in reference.metadata.iter().enumerate() {
        let (mut key, mut len) = (null(), 0);
        // SAFETY: a live handle, writable out-parameters; the key lives in `bytes`.
        unsafe {
            assert_eq!(tern_gguf_kv_key(g, index, &mut key, &mut len), TERN_OK);
            assert_eq!(bytes_at(key, len), kv.key.as_bytes());
        }
        assert_eq!(kv_index(g, kv.key), index);
    }
    check_getter!(g, "u8", tern_gguf_kv_get_u8, tern_gguf_kv_array_get_u8, u8, TERN_GGUF_TYPE_UINT8, 200u8, 7u8);
    check_getter!(g, "i8", tern_gguf_kv_get_i8, tern_gguf_kv_array_get_i8, i8, TERN_GGUF_TYPE_INT8, -100i8, 7i8);
    check_getter!(g, "u16", tern_gguf_kv_get_u16, tern_gguf_kv_array_get_u16, u16, TERN_GGUF_TYPE_UINT16, 60000u16, 7);
    check_getter!(g, "i16", tern_gguf_kv_get_i16, tern_gguf_kv_array_get_i16, i16, TERN_GGUF_TYPE_INT16, -30000i16, 7);
    check_getter!(
        g,
        "u32",
        tern_gguf_kv_get_u32,
        tern_gguf_kv_array_get_u32,
        u32,
        TERN_GGUF_TYPE_UINT32,
        4_000_000_000u32,
        7
    );
    check_getter!(
        g,
        "i32",
        tern_gguf_kv_get_i32,
        tern_gguf_kv_array_get_i32,
        i32,
        TERN_GGUF_TYPE_INT32,
        -2_000_000_000i32,
        7
    );
    check_getter!(
        g,
        "u64",
        tern_gguf_kv_get_u64,
        tern_gguf_kv_array_get_u64,
        u64,
        TERN_GGUF_TYPE_UINT64,
        (1u64 << 63) + 5,
        7
    );
    check_getter!(
        g,
        "i64",
        tern_gguf_kv_get_i64,
        tern_gguf_kv_array_get_i64,
        i64,
        TERN_GGUF_TYPE_INT64,
        -(1i64 << 62),
        7
    );
    check_getter!(
        g,
        "f32",
        tern_gguf_kv_get_f32,
        tern_gguf_kv_array_get_f32,
        f32,
        TERN_GGUF_TYPE_FLOAT32,
        0.25f32,
        7.0
    );
    check_getter!(
        g,
        "f64",
        tern_gguf_kv_get_f64,
        tern_gguf_kv_array_get_f64,
        f64,
        TERN_GGUF_TYPE_FLOAT64,
        -1.5e300,
        7.0
    );
    check_getter!(g, "bool", tern_gguf_kv_get_bool, tern_gguf_kv_array_get_bool, u8, TERN_GGUF_TYPE_BOOL, 1u8, 7u8);

    // SAFETY (the block): a live handle, writable out-parameters; strings live in `bytes`.
    unsafe {
        let (index, array, nested) =
            (kv_index(g, "test.str"), kv_index(g, "test.array.str"), kv_index(g, "test.array.nested"));
        let (mut s, mut len, mut ty) = (sentinel::<c_char>() as *const c_char, 99usize, 99u32);
        assert_eq!(tern_gguf_kv_get_str(g, index, &mut s, &mut len), TERN_OK);
        assert_eq!(bytes_at(s, len), "héllo".as_bytes());
        for (i, want) in ["a", "", "ccc"].into_iter().enumerate() {
            assert_eq!(tern_gguf_kv_array_get_str(g, array, i, &mut s, &mut len), TERN_OK, "{}", last_error());
            assert_eq!(bytes_at(s, len), want.as_bytes());
        }
        let (s0, len0) = (s, len);
        assert_eq!(tern_gguf_kv_array_get_str(g, array, 3, &mut s, &mut len), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_gguf_kv_array_get_str(g, index, 0, &mut s, &mut len), TERN_ERR_INVALID_ARGUMENT);
        assert_eq!(last_error(), "argument `index`: entry \"test.str\" has type string, not array of string");
        assert_eq!(tern_gguf_kv_get_str(g, array, &mut s, &mut len), TERN_ERR_INVALID_ARGUMENT);
        assert_eq!((s, len), (s0, len0), "a refused call wrote its outputs");
        // A nested array: its length and element type, no element getter.
        assert_eq!(tern_gguf_kv_array_len(g, nested, &mut ty, &mut len), TERN_OK);
        assert_eq!((ty, len), (TERN_GGUF_TYPE_ARRAY, 2));
        let mut out = 0i32;
        assert_eq!(tern_gguf_kv_array_get_i32(g, nested, 0, &mut out), TERN_ERR_INVALID_ARGUMENT);
        assert_eq!(tern_gguf_kv_array_len(g, index, &mut ty, &mut len), TERN_ERR_INVALID_ARGUMENT);
        assert_eq!((ty, len), (TERN_GGUF_TYPE_ARRAY, 2), "a refused call wrote its outputs");
        let mut found = 99usize;
        assert_eq!(tern_gguf_kv_find(g, c"test.missing".as_ptr(), &mut found), TERN_ERR_NOT_FOUND);
        assert_eq!(last_error(), "no metadata key named \"test.missing\"");
        assert_eq!(found, 99);
        tern_gguf_free(g);
    }
}

/// `tern_gguf_tensor_data` gives every tensor's bytes with ggml's sizes (types tern has no
/// format for included), wrapping one of them is refused with a message that points there,
/// and an unknown type id is reported as unknown rather than as 0 bytes.
#[test]
fn tensor_data_covers_every_known_type_and_names_unknown_ones() {
    let mut bytes = std::fs::read(ALL_TYPES).unwrap();
    let reference = Gguf::parse(&bytes).unwrap();
    // (name, ggml type, bytes): 2 rows of 512; ggml's block sizes.
    let want = [
        ("f16.weight", 1, 2048),
        ("bf16.weight", 30, 2048),
        ("q8_0.weight", 8, 2 * 16 * 34),
        ("q4_0.weight", 2, 2 * 16 * 18),
        ("q4_k.weight", 12, 2 * 2 * 144),
        ("q6_k.weight", 14, 2 * 2 * 210),
        ("ffn_up_exps.weight", 35, 2 * 64 * 66),
        ("patch.type", 0, 128),
    ];
    let g = open(&bytes);
    for (index, (name, ty, len)) in want.into_iter().enumerate() {
        let info = info(g, index);
        // SAFETY: a NUL-terminated name valid while the handle lives.
        assert_eq!(unsafe { CStr::from_ptr(info.name) }.to_str().unwrap(), name);
        let (mut data, mut n, mut ggml_type) = (null(), 0usize, u32::MAX);
        // SAFETY: a live handle, writable out-parameters.
        assert_eq!(unsafe { tern_gguf_tensor_data(g, index, &mut data, &mut n, &mut ggml_type) }, TERN_OK);
        assert_eq!((ggml_type, n, info.bytes), (ty, len, len), "{name}");
        let t = &reference.tensors[index];
        assert_eq!(data as usize - bytes.as_ptr() as usize, info.offset as usize, "{name}: the file's own bytes");
        assert_eq!(info.offset, reference.file_offset(t));
        if info.format == 0 {
            let mut tensor = sentinel();
            // SAFETY: as above.
            assert_eq!(unsafe { tern_gguf_tensor_wrap(g, index, &mut tensor) }, TERN_ERR_UNSUPPORTED, "{name}");
            assert!(last_error().contains("tern_gguf_tensor_data"), "{}", last_error());
            assert_eq!(tensor, sentinel());
        }
    }
    // SAFETY: freed once; refused calls with canary outputs.
    unsafe {
        let (mut data, mut n, mut ty) = (sentinel::<std::ffi::c_void>() as *const _, 7usize, 7u32);
        assert_eq!(tern_gguf_tensor_data(g, want.len(), &mut data, &mut n, &mut ty), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tern_gguf_tensor_data(null(), 0, &mut data, &mut n, &mut ty), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_tensor_data(g, 0, null_mut(), &mut n, &mut ty), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_tensor_data(g, 0, &mut data, null_mut(), &mut ty), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_tensor_data(g, 0, &mut data, &mut n, null_mut()), TERN_ERR_NULL_POINTER);
        assert_eq!((data, n, ty), (sentinel::<std::ffi::c_void>() as *const _, 7, 7));
        tern_gguf_free(g);
    }

    // `patch.type` with an unknown type id: listed with 0 bytes, and its data refused.
    let name_at = bytes.windows(10).position(|w| w == b"patch.type").unwrap();
    let type_at = name_at + 10 + 4 + 8; // after the name: n_dims (u32), ne[0] (u64)
    assert_eq!(bytes[type_at..type_at + 4], 0u32.to_le_bytes());
    bytes[type_at..type_at + 4].copy_from_slice(&99u32.to_le_bytes());
    let g = open(&bytes);
    let last = want.len() - 1;
    assert_eq!((info(g, last).ggml_type, info(g, last).bytes), (99, 0));
    let (mut data, mut n, mut ty) = (sentinel::<std::ffi::c_void>() as *const _, 7usize, 7u32);
    let mut tensor = sentinel();
    // SAFETY: a live handle, writable out-parameters; freed once.
    unsafe {
        assert_eq!(tern_gguf_tensor_data(g, last, &mut data, &mut n, &mut ty), TERN_ERR_UNKNOWN_FORMAT);
        assert_eq!(
            last_error(),
            "tensor \"patch.type\" has ggml type 99, which this version of tern does not know: its size cannot be computed"
        );
        assert_eq!((data, n, ty), (sentinel::<std::ffi::c_void>() as *const _, 7, 7));
        assert_eq!(tern_gguf_tensor_wrap(g, last, &mut tensor), TERN_ERR_UNSUPPORTED);
        assert!(last_error().contains("ggml type 99, which this version of tern does not know"), "{}", last_error());
        tern_gguf_free(g);
    }
}

/// A 3-D TQ2_0 tensor (two 64 x 256 experts): `tern_gguf_tensor_wrap` refuses it and names
/// the slice call; each slice wraps the file's own bytes and decodes like that expert.
#[test]
fn one_slice_of_a_3d_tensor_wraps() {
    let bytes = std::fs::read(ALL_TYPES).unwrap();
    let reference = Gguf::parse(&bytes).unwrap();
    let t = reference.tensor("ffn_up_exps.weight").unwrap();
    let all = reference.tensor_data(t).unwrap();
    let g = open(&bytes);
    let index = 6;
    let mut tensor = sentinel();
    // SAFETY (the block): a live handle, writable out-parameters; each tensor freed once.
    unsafe {
        assert_eq!(tern_gguf_tensor_wrap(g, index, &mut tensor), TERN_ERR_INVALID_SHAPE);
        assert!(last_error().contains("tern_gguf_tensor_wrap_slice"), "{}", last_error());
        assert_eq!(tern_gguf_tensor_wrap_slice(g, index, 2, &mut tensor), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(last_error(), "argument `slice`: 2 given, tensor \"ffn_up_exps.weight\" has 2 (ne[2])");
        assert_eq!(tern_gguf_tensor_wrap_slice(null(), index, 0, &mut tensor), TERN_ERR_NULL_POINTER);
        assert_eq!(tern_gguf_tensor_wrap_slice(g, 0, 0, &mut tensor), TERN_ERR_UNSUPPORTED, "F16");
        assert_eq!(tern_gguf_tensor_wrap_slice(g, 99, 0, &mut tensor), TERN_ERR_OUT_OF_BOUNDS);
        assert_eq!(tensor, sentinel());
        for slice in 0..2 {
            assert_eq!(tern_gguf_tensor_wrap_slice(g, index, slice, &mut tensor), TERN_OK, "{}", last_error());
            assert_eq!((tern_tensor_rows(tensor), tern_tensor_cols(tensor)), (64, 256));
            let (mut data, mut len) = (null(), 0);
            assert_eq!(tern_tensor_data(tensor, &mut data, &mut len), TERN_OK);
            let half = all.len() / 2;
            assert_eq!(data as usize, all[slice * half..].as_ptr() as usize, "slice {slice}: no copy");
            assert_eq!(len, half);
            tern_tensor_free(tensor);
        }
        // A 2-D tensor has one slice.
        assert_eq!(tern_gguf_tensor_wrap_slice(g, 7, 0, &mut tensor), TERN_OK, "{}", last_error());
        tern_tensor_free(tensor);
        tern_gguf_free(g);
    }
}
