//! The helpers every export uses: the panic guard, the thread's last error message,
//! NULL-checked references and slices, and out-parameters that are written only on success.

use super::status::*;
use crate::error::Error;
use std::cell::RefCell;
use std::ffi::c_char;
use std::mem::{align_of, size_of};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

/// A failed call's status and the message `tern_last_error` reports for it. `?` converts
/// a [`tern::Error`](Error) into it, so an export's body can mix core results with the
/// checks below.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: tern_status,
    pub message: String,
}

impl Status {
    pub fn new(code: tern_status, message: impl Into<String>) -> Status {
        Status { code, message: message.into() }
    }

    /// `TERN_ERR_NULL_POINTER` for the argument `arg`.
    pub fn null(arg: &str) -> Status {
        Status::new(TERN_ERR_NULL_POINTER, format!("argument `{arg}` is NULL"))
    }

    /// `TERN_ERR_INVALID_ARGUMENT` for the argument `arg`.
    pub fn invalid(arg: &str, why: impl std::fmt::Display) -> Status {
        Status::new(TERN_ERR_INVALID_ARGUMENT, format!("argument `{arg}`: {why}"))
    }

    /// Puts `context` (e.g. the argument a core error concerns) before the message.
    pub fn context(self, context: impl std::fmt::Display) -> Status {
        Status { message: format!("{context}: {}", self.message), ..self }
    }
}

impl From<Error> for Status {
    fn from(error: Error) -> Status {
        Status::new(status_of(&error), error.to_string())
    }
}

pub type FfiResult<T = ()> = Result<T, Status>;

thread_local! {
    /// The NUL-terminated message of the last failed export on this thread ("" after a
    /// success). A buffer that is cleared, not freed, so a success costs no allocation.
    static LAST_ERROR: RefCell<Vec<u8>> = RefCell::new(vec![0]);
}

fn set_last_error(message: &str) {
    LAST_ERROR.with(|last| {
        let mut last = last.borrow_mut();
        last.clear();
        // A message never holds a NUL (a name read from C cannot), but C would cut it there.
        last.extend(message.bytes().filter(|&b| b != 0));
        last.push(0);
    });
}

/// The thread's last error message (see `tern_last_error`).
pub fn last_error() -> *const c_char {
    LAST_ERROR.with(|last| last.borrow().as_ptr().cast())
}

/// Runs an export's body: `Ok` becomes `TERN_OK` and clears the thread's last error; an
/// error becomes its status and its message the thread's last error; a panic becomes
/// `TERN_ERR_PANIC` instead of unwinding into C.
pub fn guard(body: impl FnOnce() -> FfiResult) -> tern_status {
    let result = catch_unwind(AssertUnwindSafe(|| {
        #[cfg(feature = "panic-probe")]
        panic_probe::fire();
        body()
    }))
    .unwrap_or_else(|payload| Err(panicked(payload.as_ref())));
    match result {
        Ok(()) => {
            set_last_error("");
            TERN_OK
        }
        Err(status) => {
            set_last_error(&status.message);
            status.code
        }
    }
}

fn panicked(payload: &(dyn std::any::Any + Send)) -> Status {
    let what = payload.downcast_ref::<&str>().copied().or(payload.downcast_ref::<String>().map(String::as_str));
    Status::new(TERN_ERR_PANIC, format!("tern panicked (a bug in tern): {}", what.unwrap_or("no message")))
}

/// Runs the body of an export that returns a plain value; a panic returns `on_panic`.
/// These exports do not change the thread's last error.
pub fn guard_value<T>(on_panic: T, body: impl FnOnce() -> T) -> T {
    // AssertUnwindSafe: after a panic nothing the body touched is looked at again, and
    // out-parameters are only written as a body's last step.
    catch_unwind(AssertUnwindSafe(|| {
        #[cfg(feature = "panic-probe")]
        panic_probe::fire();
        body()
    }))
    .unwrap_or(on_panic)
}

/// Test-only fault injection (cargo feature `panic-probe`, off by default and absent from
/// the shipped library and header): proves that a panic inside a real export becomes
/// `TERN_ERR_PANIC` (or the export's `on_panic` value) and that the process lives on.
#[cfg(feature = "panic-probe")]
pub mod panic_probe {
    use std::cell::Cell;

    thread_local! {
        static ARMED: Cell<bool> = const { Cell::new(false) };
    }

    /// Makes the next guarded export called on this thread panic inside its guard, before
    /// its body runs. One shot: the switch turns itself off when it fires.
    pub fn arm() {
        ARMED.with(|armed| armed.set(true));
    }

    pub(super) fn fire() {
        if ARMED.with(|armed| armed.replace(false)) {
            panic!("panic-probe: injected panic");
        }
    }
}

fn check_aligned<T>(ptr: *const T, arg: &str) -> FfiResult {
    if ptr.align_offset(align_of::<T>()) == 0 {
        Ok(())
    } else {
        Err(Status::invalid(arg, format_args!("address {ptr:p} is not aligned to {} bytes", align_of::<T>())))
    }
}

/// A shared reference to a handle or struct the caller passed as `arg`, or
/// `TERN_ERR_NULL_POINTER`.
///
/// # Safety
/// A non-NULL `ptr` must point to a valid `T` that stays valid and unmutated for `'a`.
pub unsafe fn try_ref<'a, T>(ptr: *const T, arg: &'static str) -> FfiResult<&'a T> {
    check_aligned(ptr, arg)?;
    // SAFETY: the caller guarantees a non-NULL ptr is valid for 'a; NULL gives None.
    unsafe { ptr.as_ref() }.ok_or_else(|| Status::null(arg))
}

fn check_slice<T>(ptr: *const T, len: usize, arg: &str) -> FfiResult {
    if ptr.is_null() {
        return Err(Status::null(arg));
    }
    check_aligned(ptr, arg)?;
    // `from_raw_parts` needs the slice to fit in isize::MAX bytes.
    match len.checked_mul(size_of::<T>()) {
        Some(bytes) if bytes <= isize::MAX as usize => Ok(()),
        _ => Err(Status::invalid(arg, format_args!("{len} elements do not fit in the address space"))),
    }
}

/// The `len` elements at `ptr` (the argument `arg`). NULL is an error even when `len` is 0.
///
/// # Safety
/// A non-NULL `ptr` must point to `len` initialized elements that stay valid and are not
/// written by anyone else for `'a`.
pub unsafe fn slice<'a, T>(ptr: *const T, len: usize, arg: &'static str) -> FfiResult<&'a [T]> {
    check_slice(ptr, len, arg)?;
    // SAFETY: ptr is non-NULL and aligned, the size fits isize, and the caller guarantees
    // it points to `len` valid elements for 'a.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// The `len` elements at `ptr` (the argument `arg`), writable. NULL is an error even when
/// `len` is 0.
///
/// # Safety
/// A non-NULL `ptr` must point to `len` initialized elements that nobody else reads or
/// writes for `'a`.
pub unsafe fn slice_mut<'a, T>(ptr: *mut T, len: usize, arg: &'static str) -> FfiResult<&'a mut [T]> {
    check_slice(ptr, len, arg)?;
    // SAFETY: as in `slice`, and the caller guarantees exclusive access.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// Refuses an output buffer (`len` elements at `out`, the argument `out_arg`) that overlaps
/// an input (`in_len` elements at `input`, the argument `in_arg`): Rust may assume they are
/// distinct, and C callers can pass anything. Call it before turning the output into a
/// slice. NULL pointers pass here: the slice helpers refuse them.
pub fn check_disjoint<A, B>(
    (input, in_len, in_arg): (*const A, usize, &str),
    (out, out_len, out_arg): (*const B, usize, &str),
) -> FfiResult {
    if input.is_null() || out.is_null() {
        return Ok(());
    }
    let range = |p: usize, bytes: usize| (p, p.saturating_add(bytes));
    let (a_start, a_end) = range(input as usize, in_len.saturating_mul(size_of::<A>()));
    let (b_start, b_end) = range(out as usize, out_len.saturating_mul(size_of::<B>()));
    if a_start < b_end && b_start < a_end {
        Err(Status::invalid(out_arg, format_args!("overlaps `{in_arg}`")))
    } else {
        Ok(())
    }
}

/// An out-parameter, checked for NULL up front and written at most once, at the end of a
/// successful call.
pub struct Out<T>(NonNull<T>);

impl<T> Out<T> {
    /// # Safety
    /// A non-NULL `ptr` (the argument `arg`) must be valid for writing a `T` for the rest
    /// of the call.
    pub unsafe fn new(ptr: *mut T, arg: &'static str) -> FfiResult<Out<T>> {
        check_aligned(ptr, arg)?;
        NonNull::new(ptr).map(Out).ok_or_else(|| Status::null(arg))
    }

    /// Writes the result. Any previous value is overwritten, not dropped: out-parameters
    /// are plain C values or pointers, and may be uninitialized.
    pub fn write(self, value: T) {
        // SAFETY: `new`'s caller promised the pointer is valid for writes during the call.
        unsafe { self.0.as_ptr().write(value) }
    }
}
