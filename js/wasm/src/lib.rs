//! The export layer of tern's JS package: tern's Rust API as a small wasm ABI for
//! `js/src/index.js`, built for wasm32-wasip1 as `tern_js.wasm` (`npm run build` in js/,
//! js/scripts/build.mjs).
//!
//! - Objects (tensors, dispatchers, GGUF files) live in a table inside the module; JS holds
//!   their handles (index + 1), so a wrong or freed handle is a status, never a wild pointer.
//! - Every fallible export returns a `tern_status` (0 = ok) and leaves a message for
//!   `tjs_last_error`. Statuses are tern's C statuses (`tern::ffi::status_of`); a GGUF file
//!   tern cannot read is `TERN_ERR_INVALID_FILE` with the reader's message.
//! - Buffers: JS allocates with `tjs_alloc`, writes, passes pointer and length, frees with
//!   `tjs_free`. `tjs_gguf_open` and `tjs_tensor_wrap` take their buffer over: the file or
//!   the tensor bytes are the module's one copy, and tensors wrapped from a GGUF file are
//!   views into it (they keep it alive, so they may outlive the file's handle).
//! - Events go to the imported `tern_js.event` while the call runs; the JS side queues them
//!   and calls the user's callback after the call returns (a callback may call tern again).
//! - wasm32 panics abort: a bug in tern traps the instance, which the JS side then drops.
//!
//! Compiled only for wasm; on other targets the crate is empty.
#![cfg(target_family = "wasm")]

use std::alloc::{alloc_zeroed, dealloc, realloc, Layout};
use std::cell::RefCell;
use std::ffi::c_char;
use std::rc::Rc;
use tern::ffi::{
    status_of, tern_status, tern_status_str, tern_version_string, TERN_DISPATCH_ACCURATE_ACTIVATIONS,
    TERN_DISPATCH_IGNORE_ENV, TERN_DISPATCH_STRICT, TERN_ERR_INVALID_ARGUMENT, TERN_ERR_INVALID_SHAPE,
    TERN_ERR_UNSUPPORTED, TERN_OK,
};
use tern::gguf::{Gguf, Value};
use tern::{Dispatcher, DispatcherOptions, Error, Event, EventSink, Format, Scope, Tensor};

/// Alignment of every `tjs_alloc` buffer: enough for f32 and for SIMD loads.
const ALIGN: usize = 16;

/// This crate's version, NUL-terminated (kept equal to tern's and the npm package's; the
/// JS suite checks all three).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

#[link(wasm_import_module = "tern_js")]
extern "C" {
    /// One event, delivered during the call that caused it.
    fn event(
        kind: u32,
        name: *const u8,
        name_len: usize,
        from: u32,
        to: u32,
        rows: usize,
        cols: usize,
        bytes: usize,
        nanos: f64,
    );
}

/// A buffer from [`tjs_alloc`], owned.
struct Buf {
    ptr: *mut u8,
    len: usize,
}

impl Buf {
    fn layout(len: usize) -> Option<Layout> {
        Layout::from_size_align(len.max(1), ALIGN).ok()
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        if let Some(layout) = Buf::layout(self.len) {
            // SAFETY: allocated by `tjs_alloc` with this layout, and owned by this Buf.
            unsafe { dealloc(self.ptr, layout) }
        }
    }
}

/// `buf`'s bytes with the lifetime of whatever stores them next to a clone of `buf`.
///
/// # Safety
/// The result must only be stored in a value that also holds a clone of `buf` (so the
/// allocation, which never moves, outlives it), and be dropped before that clone.
unsafe fn backed(buf: &Rc<Buf>) -> &'static [u8] {
    // SAFETY: `ptr` holds `len` initialized bytes (alloc_zeroed, then written by JS), alive
    // while any clone of `buf` is; the caller keeps one for as long as the slice is used.
    unsafe { std::slice::from_raw_parts(buf.ptr, buf.len) }
}

/// A GGUF file: tern's reading of it, over its bytes (the module's one copy of the file).
/// Field order matters: `gguf` borrows from `bytes` and is dropped first.
struct GgufFile {
    gguf: Gguf<'static>,
    bytes: Rc<Buf>,
}

/// A tensor, and the buffer its bytes are borrowed from (a GGUF file or a wrapped buffer),
/// kept alive for as long as the tensor is. `tensor` is dropped first.
struct TensorObj {
    tensor: Tensor<'static>,
    _backing: Option<Rc<Buf>>,
}

/// A dispatcher and the scope its adapters allocate in, reset after every call, so that
/// memory taken for one call is reused by the next.
struct Runner {
    dispatcher: Dispatcher,
    scope: Scope,
}

enum Obj {
    Tensor(TensorObj),
    Runner(Runner),
    Gguf(GgufFile),
}

thread_local! {
    static OBJECTS: RefCell<Vec<Option<Obj>>> = const { RefCell::new(Vec::new()) };
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
    /// The last metadata value `tjs_gguf_meta` encoded.
    static VALUE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A failed call: its status and message.
struct Fail(tern_status, String);

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail(status_of(&e), e.to_string())
    }
}

fn invalid(msg: impl Into<String>) -> Fail {
    Fail(TERN_ERR_INVALID_ARGUMENT, msg.into())
}

/// Runs `f`, records its message, returns its status.
fn call(f: impl FnOnce() -> Result<(), Fail>) -> tern_status {
    let (status, message) = match f() {
        Ok(()) => (TERN_OK, String::new()),
        Err(Fail(status, message)) => (status, message),
    };
    LAST_ERROR.with(|e| *e.borrow_mut() = message);
    status
}

fn insert(obj: Obj) -> u32 {
    OBJECTS.with(|o| {
        let mut o = o.borrow_mut();
        let slot = o.iter().position(Option::is_none).unwrap_or_else(|| {
            o.push(None);
            o.len() - 1
        });
        o[slot] = Some(obj);
        slot as u32 + 1
    })
}

/// Runs `f` on the object behind `handle`, refusing unknown handles and other kinds.
fn with<T>(handle: u32, what: &str, f: impl FnOnce(&mut Obj) -> Option<Result<T, Fail>>) -> Result<T, Fail> {
    OBJECTS.with(|o| {
        let mut o = o.borrow_mut();
        let obj = (handle as usize).checked_sub(1).and_then(|i| o.get_mut(i)).and_then(Option::as_mut);
        obj.and_then(f).unwrap_or_else(|| Err(invalid(format!("handle {handle} is not a live {what}"))))
    })
}

/// Runs `f` on the GGUF file behind `handle`.
fn with_gguf<T>(handle: u32, f: impl FnOnce(&GgufFile) -> Result<T, Fail>) -> Result<T, Fail> {
    with(handle, "GGUF file", |o| match o {
        Obj::Gguf(g) => Some(f(g)),
        _ => None,
    })
}

/// # Safety
/// `ptr` must be valid for reads of `len` `T`s (a live `tjs_alloc` buffer), or `len` 0.
unsafe fn slice<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    if len == 0 {
        return &[];
    }
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts(ptr, len) }
}

/// # Safety
/// `ptr` must be valid for reads and writes of `len` `T`s (a live `tjs_alloc` buffer that
/// nothing else refers to during the call), or `len` 0.
unsafe fn slice_mut<'a, T>(ptr: *mut T, len: usize) -> &'a mut [T] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts_mut(ptr, len) }
}

/// Writes `values` to `out[0..values.len()]`.
///
/// # Safety
/// `out` must be valid for `values.len()` writes of `T`.
unsafe fn put<T: Copy>(out: *mut T, values: &[T]) {
    for (i, v) in values.iter().enumerate() {
        // SAFETY: the caller's promise.
        unsafe { out.add(i).write_unaligned(*v) }
    }
}

/// `len` zeroed bytes aligned to 16, or NULL if the allocation fails.
#[no_mangle]
pub extern "C" fn tjs_alloc(len: usize) -> *mut u8 {
    match Buf::layout(len) {
        // SAFETY: the layout has a non-zero size.
        Some(layout) => unsafe { alloc_zeroed(layout) },
        None => std::ptr::null_mut(),
    }
}

/// Grows or shrinks a `tjs_alloc(len)` buffer to `new_len` bytes (the bytes past `len` are
/// not zeroed); NULL if that fails, the old buffer then still being valid.
///
/// # Safety
/// `ptr` must come from `tjs_alloc(len)` (or this function, with `len`) and not be freed.
#[no_mangle]
pub unsafe extern "C" fn tjs_realloc(ptr: *mut u8, len: usize, new_len: usize) -> *mut u8 {
    match (Buf::layout(len), Buf::layout(new_len)) {
        // SAFETY: the caller's promise for `ptr` and its layout; the new size is non-zero
        // and a valid layout size.
        (Some(layout), Some(_)) => unsafe { realloc(ptr, layout, new_len.max(1)) },
        _ => std::ptr::null_mut(),
    }
}

/// # Safety
/// `ptr` must come from `tjs_alloc(len)` and not be freed yet (or be NULL).
#[no_mangle]
pub unsafe extern "C" fn tjs_free(ptr: *mut u8, len: usize) {
    if !ptr.is_null() {
        drop(Buf { ptr, len });
    }
}

/// The message of the last failed call ("" after a success), UTF-8, `tjs_last_error_len` bytes.
#[no_mangle]
pub extern "C" fn tjs_last_error() -> *const u8 {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

#[no_mangle]
pub extern "C" fn tjs_last_error_len() -> usize {
    LAST_ERROR.with(|e| e.borrow().len())
}

/// tern's description of a status, NUL-terminated, starting with its name.
#[no_mangle]
pub extern "C" fn tjs_status_str(status: tern_status) -> *const c_char {
    tern_status_str(status)
}

/// `which` 0: the version of tern compiled in; 1: this crate's; NUL-terminated.
#[no_mangle]
pub extern "C" fn tjs_version(which: u32) -> *const c_char {
    match which {
        0 => tern_version_string(),
        _ => VERSION.as_ptr().cast(),
    }
}

/// Frees any object; unknown handles are ignored.
#[no_mangle]
pub extern "C" fn tjs_release(handle: u32) {
    // Taken out first, dropped after the table is released.
    let obj = OBJECTS.with(|o| (handle as usize).checked_sub(1).and_then(|i| o.borrow_mut().get_mut(i)?.take()));
    drop(obj)
}

/// Encodes `rows x cols` floats into a new tensor of `format`.
///
/// # Safety
/// `src` must hold `len` floats; `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn tjs_tensor_encode(
    format: u32,
    src: *const f32,
    len: usize,
    rows: usize,
    cols: usize,
    out: *mut u32,
) -> tern_status {
    call(|| {
        let format = Format::from_id(format)?;
        let need = rows.checked_mul(cols).ok_or(Error::SizeOverflow { rows, cols })?;
        if len != need {
            return Err(Error::LengthMismatch { what: "src (floats)", want: need, got: len }.into());
        }
        // SAFETY: the caller's promise.
        let tensor = Tensor::encode(format, unsafe { slice(src, len) }, rows, cols)?;
        // SAFETY: the caller's promise.
        unsafe { put(out, &[insert(Obj::Tensor(TensorObj { tensor, _backing: None }))]) };
        Ok(())
    })
}

/// A tensor over `len` encoded bytes in a `tjs_alloc(len)` buffer, which this call takes
/// over (freed now on failure, with the tensor otherwise).
///
/// # Safety
/// `bytes` must come from `tjs_alloc(len)`, not be freed, and not be used by the caller
/// after this call; `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn tjs_tensor_wrap(
    format: u32,
    bytes: *mut u8,
    len: usize,
    rows: usize,
    cols: usize,
    out: *mut u32,
) -> tern_status {
    let buf = Rc::new(Buf { ptr: bytes, len });
    call(|| {
        let format = Format::from_id(format)?;
        // SAFETY: stored next to `buf` in the TensorObj, dropped before it.
        let tensor = Tensor::wrap(format, unsafe { backed(&buf) }, rows, cols)?;
        // SAFETY: the caller's promise.
        unsafe { put(out, &[insert(Obj::Tensor(TensorObj { tensor, _backing: Some(buf) }))]) };
        Ok(())
    })
}

/// The tensor's format id, rows, cols, encoded byte length and the address of its bytes
/// (valid until the tensor is released), in `out[0..5]`.
///
/// # Safety
/// `out` must be writable for 5 `u32`s.
#[no_mangle]
pub unsafe extern "C" fn tjs_tensor_info(handle: u32, out: *mut u32) -> tern_status {
    call(|| {
        let info = with(handle, "tensor", |o| match o {
            Obj::Tensor(TensorObj { tensor: t, .. }) => Some(
                t.bytes()
                    .map_err(Fail::from)
                    .map(|b| [t.format().id(), t.rows() as u32, t.cols() as u32, b.len() as u32, b.as_ptr() as u32]),
            ),
            _ => None,
        })?;
        // SAFETY: the caller's promise (5 slots).
        unsafe { put(out, &info) };
        Ok(())
    })
}

/// Decodes the tensor into `len` floats.
///
/// # Safety
/// `dst` must be writable for `len` floats.
#[no_mangle]
pub unsafe extern "C" fn tjs_tensor_decode(handle: u32, dst: *mut f32, len: usize) -> tern_status {
    call(|| {
        with(handle, "tensor", |o| match o {
            // SAFETY: the caller's promise.
            Obj::Tensor(t) => Some(t.tensor.decode_into(unsafe { slice_mut(dst, len) }).map_err(Fail::from)),
            _ => None,
        })
    })
}

/// A new tensor: the tensor's trits and scales in `format`, of the same family (tern's
/// `Tensor::transcode`).
///
/// # Safety
/// `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn tjs_tensor_transcode(handle: u32, format: u32, out: *mut u32) -> tern_status {
    call(|| {
        let to = Format::from_id(format)?;
        let tensor = with(handle, "tensor", |o| match o {
            Obj::Tensor(t) => Some(t.tensor.transcode(to).map_err(Fail::from)),
            _ => None,
        })?;
        // SAFETY: the caller's promise.
        unsafe { put(out, &[insert(Obj::Tensor(TensorObj { tensor, _backing: None }))]) };
        Ok(())
    })
}

/// A dispatcher. `kernel` (UTF-8, `kernel_len` bytes; 0 for none) forces a kernel by name;
/// `flags` are the C API's `TERN_DISPATCH_STRICT`, `TERN_DISPATCH_IGNORE_ENV` and
/// `TERN_DISPATCH_ACCURATE_ACTIVATIONS` (others are refused); `n_threads` > 1 is refused, as on every wasm32 build.
///
/// # Safety
/// `kernel` must hold `kernel_len` bytes; `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn tjs_dispatcher_new(
    kernel: *const u8,
    kernel_len: usize,
    n_threads: u32,
    flags: u32,
    out: *mut u32,
) -> tern_status {
    call(|| {
        // SAFETY: the caller's promise.
        let name = std::str::from_utf8(unsafe { slice(kernel, kernel_len) })
            .map_err(|_| invalid("the kernel name is not UTF-8"))?;
        if flags & !(TERN_DISPATCH_STRICT | TERN_DISPATCH_IGNORE_ENV | TERN_DISPATCH_ACCURATE_ACTIVATIONS) != 0 {
            return Err(invalid(format!("unknown dispatcher flags {flags:#x}")));
        }
        let options = DispatcherOptions {
            n_threads: n_threads as usize,
            kernel: (!name.is_empty()).then(|| name.to_owned()),
            strict: flags & TERN_DISPATCH_STRICT != 0,
            ignore_env: flags & TERN_DISPATCH_IGNORE_ENV != 0,
            accurate_activations: flags & TERN_DISPATCH_ACCURATE_ACTIVATIONS != 0,
            executor: None,
        };
        let mut dispatcher = Dispatcher::new(options)?;
        dispatcher.set_sink(Some(std::sync::Arc::new(JsSink)));
        let runner = Runner { dispatcher, scope: Scope::new(0)? };
        // SAFETY: the caller's promise.
        unsafe { put(out, &[insert(Obj::Runner(runner))]) };
        Ok(())
    })
}

struct JsSink;

impl EventSink for JsSink {
    fn on_event(&self, e: &Event) {
        let name = e.name.to_bytes();
        // SAFETY: an import of this module (js/src/index.js), given a live name slice.
        unsafe {
            event(
                e.kind as u32,
                name.as_ptr(),
                name.len(),
                e.from.id(),
                e.to.id(),
                e.rows,
                e.cols,
                e.bytes,
                e.nanos as f64,
            )
        }
    }
}

/// `act (m x k)` times each of `n_weights` weights (`weights`: their handles): output `i`,
/// `m x rows_i` floats, is written at `out` after the outputs before it; `out_len` floats in
/// all. Everything is checked before anything runs (tern's `Dispatcher::matmul_many`). The
/// adapter's activation lives in the dispatcher's scope until the call returns.
///
/// # Safety
/// `weights` must hold `n_weights` handles; `out` must be writable for `out_len` floats.
#[no_mangle]
pub unsafe extern "C" fn tjs_matmul_many(
    dispatcher: u32,
    act: u32,
    weights: *const u32,
    n_weights: usize,
    out: *mut f32,
    out_len: usize,
) -> tern_status {
    call(|| {
        // The runner leaves the table for the call (its scope is written), the tensors are
        // read in place; the event import only queues, it does not call back in.
        let slot =
            with(dispatcher, "dispatcher", |o| matches!(o, Obj::Runner(_)).then_some(Ok(dispatcher as usize - 1)))?;
        let Some(Obj::Runner(mut runner)) = OBJECTS.with(|o| o.borrow_mut()[slot].take()) else {
            unreachable!("checked to be a dispatcher")
        };
        let result = OBJECTS.with(|o| {
            let o = o.borrow();
            let tensor = |h: u32| match (h as usize).checked_sub(1).and_then(|i| o.get(i)) {
                Some(Some(Obj::Tensor(t))) => Ok(&t.tensor),
                _ => Err(invalid(format!("handle {h} is not a live tensor"))),
            };
            let a = tensor(act)?;
            // SAFETY: the caller's promise.
            let ws = unsafe { slice(weights, n_weights) }.iter().map(|&h| tensor(h)).collect::<Result<Vec<_>, _>>()?;
            let want = ws.iter().try_fold(0usize, |n, w| n.checked_add(a.rows().checked_mul(w.rows())?));
            if want != Some(out_len) {
                return Err(invalid(format!("out holds {out_len} floats, the outputs need {want:?}")));
            }
            // SAFETY: the caller's promise.
            let mut rest = unsafe { slice_mut(out, out_len) };
            let mut outs = Vec::with_capacity(ws.len());
            for w in &ws {
                let (head, tail) = rest.split_at_mut(a.rows() * w.rows());
                outs.push(head);
                rest = tail;
            }
            let done = runner.dispatcher.matmul_many(a, &ws, Some(&mut runner.scope), &mut outs);
            runner.scope.reset();
            done.map_err(Fail::from)
        });
        OBJECTS.with(|o| o.borrow_mut()[slot] = Some(Obj::Runner(runner)));
        result
    })
}

/// Parses a GGUF file from a `tjs_alloc(len)` buffer, which this call takes over (freed
/// now on failure, with the file's handle and its last tensor otherwise).
///
/// # Safety
/// `bytes` must come from `tjs_alloc(len)`, not be freed, and not be used by the caller
/// after this call; `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn tjs_gguf_open(bytes: *mut u8, len: usize, out: *mut u32) -> tern_status {
    let buf = Rc::new(Buf { ptr: bytes, len });
    call(|| {
        // SAFETY: stored next to `buf` in the GgufFile, dropped before it.
        let gguf = Gguf::parse(unsafe { backed(&buf) }).map_err(Error::from)?;
        // SAFETY: the caller's promise.
        unsafe { put(out, &[insert(Obj::Gguf(GgufFile { gguf, bytes: buf }))]) };
        Ok(())
    })
}

/// Runs `f` on the GGUF file behind `handle` and writes what it returns to `out`.
///
/// # Safety
/// `out` must be writable for `N` `T`s.
unsafe fn gguf_query<T: Copy, const N: usize>(
    handle: u32,
    out: *mut T,
    f: impl FnOnce(&GgufFile) -> Result<[T; N], Fail>,
) -> tern_status {
    call(|| {
        let values = with_gguf(handle, f)?;
        // SAFETY: the caller's promise.
        unsafe { put(out, &values) };
        Ok(())
    })
}

/// Entry `index` of `items`, or `TERN_ERR_OUT_OF_BOUNDS`.
fn at<T>(items: &[T], index: usize) -> Result<&T, Fail> {
    items.get(index).ok_or_else(|| Error::OutOfBounds { row: index, col: 0, rows: items.len(), cols: 1 }.into())
}

/// The number of tensors and of metadata entries, in `out[0..2]`.
///
/// # Safety
/// `out` must be writable for 2 `u32`s.
#[no_mangle]
pub unsafe extern "C" fn tjs_gguf_counts(handle: u32, out: *mut u32) -> tern_status {
    // SAFETY: the caller's promise.
    unsafe { gguf_query(handle, out, |g| Ok([g.gguf.tensors.len() as u32, g.gguf.metadata.len() as u32])) }
}

/// Tensor `index`: `out[0..11]` = ggml type, tern format id (0: none), n_dims, ne[0..4]
/// (as f64, exact below 2^53), absolute data offset, data bytes (-1 when the type is
/// unknown), and the address and length of its UTF-8 name (valid while the file lives).
///
/// # Safety
/// `out` must be writable for 11 f64s.
#[no_mangle]
pub unsafe extern "C" fn tjs_gguf_info(handle: u32, index: usize, out: *mut f64) -> tern_status {
    // SAFETY: the caller's promise (11 slots).
    unsafe {
        gguf_query(handle, out, |g| {
            let t = at(&g.gguf.tensors, index)?;
            let format = t.ggml_type.format().map_or(0, Format::id);
            Ok([
                t.ggml_type.0 as f64,
                format as f64,
                t.n_dims as f64,
                t.dims[0] as f64,
                t.dims[1] as f64,
                t.dims[2] as f64,
                t.dims[3] as f64,
                g.gguf.file_offset(t) as f64,
                t.size.map_or(-1.0, |l| l as f64),
                t.name.as_ptr() as u32 as f64,
                t.name.len() as f64,
            ])
        })
    }
}

/// Tensor `index` as a tensor of its tern format over the file's bytes (a view, no copy;
/// it keeps the file's bytes alive), shaped the ggml way: rows = ne[1], cols = ne[0]; ne[2]
/// and ne[3] must be 1.
///
/// # Safety
/// `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn tjs_gguf_wrap(handle: u32, index: usize, out: *mut u32) -> tern_status {
    call(|| {
        let obj = with_gguf(handle, |g| {
            let t = at(&g.gguf.tensors, index)?;
            let Some(format) = t.ggml_type.format() else {
                let ty = t.ggml_type.0;
                return Err(Fail(
                    TERN_ERR_UNSUPPORTED,
                    format!("tensor {:?}: ggml type {ty} has no tern format", t.name),
                ));
            };
            if t.dims[2] != 1 || t.dims[3] != 1 {
                let msg = format!("tensor {:?}: ne = {:?} is not a matrix (ne[2] = ne[3] = 1)", t.name, t.dims);
                return Err(Fail(TERN_ERR_INVALID_SHAPE, msg));
            }
            // Checked against the file's length by the reader; `g.bytes` outlives `gguf`.
            let bytes = g.gguf.tensor_data(t).map_err(Error::from)?;
            let tensor = Tensor::wrap(format, bytes, t.dims[1] as usize, t.dims[0] as usize)?;
            Ok(TensorObj { tensor, _backing: Some(g.bytes.clone()) })
        })?;
        // SAFETY: the caller's promise.
        unsafe { put(out, &[insert(Obj::Tensor(obj))]) };
        Ok(())
    })
}

/// Metadata entry `index`: `out[0..4]` = the address and length of its key (UTF-8, valid
/// while the file lives) and of its value, encoded (valid until the next call of this
/// function): a GGUF value type id (u8), then the value little-endian: numbers and bools
/// as in the file, a string as u32 length and bytes, an array as element type (u8), u32
/// count, and each element encoded this way.
///
/// # Safety
/// `out` must be writable for 4 `u32`s.
#[no_mangle]
pub unsafe extern "C" fn tjs_gguf_meta(handle: u32, index: usize, out: *mut u32) -> tern_status {
    // SAFETY: the caller's promise.
    unsafe {
        gguf_query(handle, out, |g| {
            let kv = at(&g.gguf.metadata, index)?;
            VALUE.with(|v| {
                let mut v = v.borrow_mut();
                v.clear();
                encode_value(&kv.value, &mut v);
                Ok([kv.key.as_ptr() as u32, kv.key.len() as u32, v.as_ptr() as u32, v.len() as u32])
            })
        })
    }
}

fn encode_value(value: &Value, out: &mut Vec<u8>) {
    out.push(value.value_type() as u8);
    match value {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.extend(x.to_le_bytes()),
        Value::U16(x) => out.extend(x.to_le_bytes()),
        Value::I16(x) => out.extend(x.to_le_bytes()),
        Value::U32(x) => out.extend(x.to_le_bytes()),
        Value::I32(x) => out.extend(x.to_le_bytes()),
        Value::F32(x) => out.extend(x.to_le_bytes()),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::String(s) => {
            out.extend((s.len() as u32).to_le_bytes());
            out.extend_from_slice(s);
        }
        Value::Array(a) => {
            out.push(a.elem_type as u8);
            out.extend((a.len as u32).to_le_bytes());
            for element in a.iter() {
                encode_value(&element, out);
            }
        }
        Value::U64(x) => out.extend(x.to_le_bytes()),
        Value::I64(x) => out.extend(x.to_le_bytes()),
        Value::F64(x) => out.extend(x.to_le_bytes()),
    }
}
