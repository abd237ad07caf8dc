//! The export layer of tern's JS package: tern's Rust API as a small wasm ABI for
//! `js/src/index.js`, built for wasm32-wasip1 as `tern_js.wasm` (scripts/test-wasm.sh).
//!
//! - Objects (tensors, dispatchers, GGUF files) live in a table inside the module; JS holds
//!   their handles (index + 1), so a wrong or freed handle is a status, never a wild pointer.
//! - Every fallible export returns a `tern_status` (0 = ok) and leaves a message for
//!   `tjs_last_error`. Statuses are tern's C statuses (`tern::ffi::status_of`); a GGUF file
//!   tern cannot read is `TERN_ERR_INVALID_FILE` with the reader's message.
//! - Buffers: JS allocates with `tjs_alloc`, writes, passes pointer and length, frees with
//!   `tjs_free`. `tjs_gguf_open` takes over its buffer, so a file is not copied twice.
//! - Events go to the imported `tern_js.event` while the call runs; the JS side queues them
//!   and calls the user's callback after the call returns (a callback may call tern again).
//! - wasm32 panics abort: a bug in tern traps the instance, which the JS side then drops.
//!
//! Compiled only for wasm; on other targets the crate is empty.
#![cfg(target_family = "wasm")]

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::RefCell;
use std::ffi::c_char;
use tern::ffi::{status_of, tern_status, tern_status_str, TERN_ERR_INVALID_ARGUMENT, TERN_OK};
use tern::gguf::{Gguf, TensorInfo};
use tern::{Dispatcher, DispatcherOptions, Error, Event, EventSink, Format, Scope, Tensor};

/// Alignment of every `tjs_alloc` buffer: enough for f32 and for SIMD loads.
const ALIGN: usize = 16;

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

    fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` holds `len` initialized bytes (alloc_zeroed) owned by this Buf.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
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

/// A GGUF file: its bytes and what tern's reader found in them (parsed once, when opened).
struct GgufFile {
    bytes: Buf,
    tensors: Vec<TensorEntry>,
}

struct TensorEntry {
    name: String,
    ggml_type: u32,
    dims: [u64; 4],
    n_dims: u32,
    /// Absolute, in the file.
    start: usize,
    /// `None` for a ggml type the reader cannot size.
    len: Option<usize>,
}

impl TensorEntry {
    fn new(info: &TensorInfo, data_start: u64) -> TensorEntry {
        TensorEntry {
            name: info.name.to_owned(),
            ggml_type: info.ggml_type.0,
            dims: info.dims,
            n_dims: info.n_dims,
            // The reader checked that every sized tensor lies inside the file.
            start: (data_start + info.offset) as usize,
            len: info.size.map(|s| s as usize),
        }
    }
}

/// A dispatcher and the scope its adapters allocate in, reset after every call, so that
/// memory taken for one call is reused by the next.
struct Runner {
    dispatcher: Dispatcher,
    scope: Scope,
}

enum Obj {
    Tensor(Tensor<'static>),
    Runner(Runner),
    Gguf(GgufFile),
}

thread_local! {
    static OBJECTS: RefCell<Vec<Option<Obj>>> = const { RefCell::new(Vec::new()) };
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
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
/// `ptr` must be valid for a `u32` write.
unsafe fn put(ptr: *mut u32, value: u32) {
    // SAFETY: the caller's promise.
    unsafe { ptr.write_unaligned(value) }
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

/// Frees any object; unknown handles are ignored.
#[no_mangle]
pub extern "C" fn tjs_release(handle: u32) {
    OBJECTS.with(|o| {
        if let Some(slot) = (handle as usize).checked_sub(1).and_then(|i| o.borrow_mut().get_mut(i).map(Option::take)) {
            drop(slot)
        }
    })
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
        unsafe { put(out, insert(Obj::Tensor(tensor))) };
        Ok(())
    })
}

/// A tensor over a copy of `len` encoded bytes.
///
/// # Safety
/// `bytes` must hold `len` bytes; `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn tjs_tensor_wrap(
    format: u32,
    bytes: *const u8,
    len: usize,
    rows: usize,
    cols: usize,
    out: *mut u32,
) -> tern_status {
    call(|| {
        let format = Format::from_id(format)?;
        // SAFETY: the caller's promise.
        let tensor = Tensor::from_vec(format, unsafe { slice(bytes, len) }.to_vec(), rows, cols)?;
        // SAFETY: the caller's promise.
        unsafe { put(out, insert(Obj::Tensor(tensor))) };
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
            Obj::Tensor(t) => Some(
                t.bytes()
                    .map_err(Fail::from)
                    .map(|b| [t.format().id(), t.rows() as u32, t.cols() as u32, b.len() as u32, b.as_ptr() as u32]),
            ),
            _ => None,
        })?;
        for (i, v) in info.into_iter().enumerate() {
            // SAFETY: the caller's promise (5 slots).
            unsafe { put(out.add(i), v) };
        }
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
            Obj::Tensor(t) => {
                let dst: &mut [f32] = if len == 0 {
                    &mut []
                } else {
                    // SAFETY: the caller's promise.
                    unsafe { std::slice::from_raw_parts_mut(dst, len) }
                };
                Some(t.decode_into(dst).map_err(Fail::from))
            }
            _ => None,
        })
    })
}

/// A dispatcher. `kernel` (UTF-8, `kernel_len` bytes; 0 for none) forces a kernel by name;
/// `n_threads` > 1 is refused, as on every wasm32 build.
///
/// # Safety
/// `kernel` must hold `kernel_len` bytes; `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn tjs_dispatcher_new(
    kernel: *const u8,
    kernel_len: usize,
    n_threads: u32,
    out: *mut u32,
) -> tern_status {
    call(|| {
        // SAFETY: the caller's promise.
        let name = std::str::from_utf8(unsafe { slice(kernel, kernel_len) })
            .map_err(|_| invalid("the kernel name is not UTF-8"))?;
        let kernel = (!name.is_empty()).then(|| name.to_owned());
        let options = DispatcherOptions { n_threads: n_threads as usize, kernel, ..Default::default() };
        let mut dispatcher = Dispatcher::new(options)?;
        dispatcher.set_sink(Some(std::sync::Arc::new(JsSink)));
        let runner = Runner { dispatcher, scope: Scope::new(0)? };
        // SAFETY: the caller's promise.
        unsafe { put(out, insert(Obj::Runner(runner))) };
        Ok(())
    })
}

struct JsSink;

impl EventSink for JsSink {
    fn on_event(&self, e: &Event) {
        let name = e.name.to_bytes();
        // SAFETY: an import of this module (js/src/tern.js), given a live name slice.
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

/// `out[m][n] = act (m x k) . weight (n x k)^T` into `out_len` floats. The adapter's
/// activation lives in the dispatcher's scope until the call returns.
///
/// # Safety
/// `out` must be writable for `out_len` floats.
#[no_mangle]
pub unsafe extern "C" fn tjs_matmul(
    dispatcher: u32,
    act: u32,
    weight: u32,
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
                Some(Some(Obj::Tensor(t))) => Ok(t),
                _ => Err(invalid(format!("handle {h} is not a live tensor"))),
            };
            let (a, w) = (tensor(act)?, tensor(weight)?);
            let out: &mut [f32] = if out_len == 0 {
                &mut []
            } else {
                // SAFETY: the caller's promise.
                unsafe { std::slice::from_raw_parts_mut(out, out_len) }
            };
            let done = runner.dispatcher.matmul(a, w, Some(&mut runner.scope), out);
            runner.scope.reset();
            done.map_err(Fail::from)
        });
        OBJECTS.with(|o| o.borrow_mut()[slot] = Some(Obj::Runner(runner)));
        result
    })
}

/// Parses a GGUF file from a `tjs_alloc(len)` buffer, which this call takes over (freed
/// now on failure, with the file's handle otherwise).
///
/// # Safety
/// `bytes` must come from `tjs_alloc(len)`, not be freed, and not be used by the caller
/// after this call; `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn tjs_gguf_open(bytes: *mut u8, len: usize, out: *mut u32) -> tern_status {
    let buf = Buf { ptr: bytes, len };
    call(|| {
        let gguf = Gguf::parse(buf.bytes()).map_err(Error::from)?;
        let tensors = gguf.tensors.iter().map(|t| TensorEntry::new(t, gguf.data_start)).collect();
        // SAFETY: the caller's promise.
        unsafe { put(out, insert(Obj::Gguf(GgufFile { bytes: buf, tensors }))) };
        Ok(())
    })
}

fn with_entry<T>(handle: u32, index: usize, f: impl FnOnce(&TensorEntry, &[u8]) -> Result<T, Fail>) -> Result<T, Fail> {
    with(handle, "GGUF file", |o| match o {
        Obj::Gguf(g) => Some(match g.tensors.get(index) {
            Some(entry) => f(entry, g.bytes.bytes()),
            None => Err(Error::OutOfBounds { row: index, col: 0, rows: g.tensors.len(), cols: 1 }.into()),
        }),
        _ => None,
    })
}

/// The number of tensors in the file, in `out`.
///
/// # Safety
/// `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn tjs_gguf_count(handle: u32, out: *mut u32) -> tern_status {
    call(|| {
        let n = with(handle, "GGUF file", |o| match o {
            Obj::Gguf(g) => Some(Ok(g.tensors.len() as u32)),
            _ => None,
        })?;
        // SAFETY: the caller's promise.
        unsafe { put(out, n) };
        Ok(())
    })
}

/// Tensor `index`: `out[0..11]` = ggml type, tern format id (0: none), n_dims, ne[0..4]
/// (as f64, exact below 2^53), absolute data offset, data bytes (-1 when the type is
/// unknown), and the address and length of its UTF-8 name (valid while the file lives).
///
/// # Safety
/// `out` must be writable for 11 f64s.
#[no_mangle]
pub unsafe extern "C" fn tjs_gguf_info(handle: u32, index: usize, out: *mut f64) -> tern_status {
    call(|| {
        let info = with_entry(handle, index, |e, _| {
            let format = Format::from_ggml_type(e.ggml_type).map_or(0, Format::id);
            Ok([
                e.ggml_type as f64,
                format as f64,
                e.n_dims as f64,
                e.dims[0] as f64,
                e.dims[1] as f64,
                e.dims[2] as f64,
                e.dims[3] as f64,
                e.start as f64,
                e.len.map_or(-1.0, |l| l as f64),
                e.name.as_ptr() as u32 as f64,
                e.name.len() as f64,
            ])
        })?;
        for (i, v) in info.into_iter().enumerate() {
            // SAFETY: the caller's promise (11 slots).
            unsafe { out.add(i).write_unaligned(v) };
        }
        Ok(())
    })
}

/// Tensor `index` as a tensor of its tern format, over a copy of its bytes, shaped the
/// ggml way: rows = ne[1], cols = ne[0]; ne[2] and ne[3] must be 1.
///
/// # Safety
/// `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn tjs_gguf_wrap(handle: u32, index: usize, out: *mut u32) -> tern_status {
    call(|| {
        let tensor = with_entry(handle, index, |e, bytes| {
            let format = Format::from_ggml_type(e.ggml_type)
                .ok_or_else(|| invalid(format!("tensor {:?}: ggml type {} has no tern format", e.name, e.ggml_type)))?;
            if e.dims[2] != 1 || e.dims[3] != 1 {
                return Err(invalid(format!("tensor {:?}: shape {:?} is not a matrix", e.name, e.dims)));
            }
            let len = e.len.expect("a type with a tern format has a size");
            let (rows, cols) = (e.dims[1] as usize, e.dims[0] as usize);
            Ok(Tensor::from_vec(format, bytes[e.start..e.start + len].to_vec(), rows, cols)?)
        })?;
        // SAFETY: the caller's promise.
        unsafe { put(out, insert(Obj::Tensor(tensor))) };
        Ok(())
    })
}
