//! The helpers every export uses: the panic guard, NULL-checked references and slices,
//! and out-parameters that are written only on success.

use super::status::*;
use crate::error::Error;
use std::mem::{align_of, size_of};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

/// A failed call's status. `?` converts a [`tern::Error`](Error) into it, so an export's
/// body can mix core results with the checks below.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status(pub tern_status);

impl From<Error> for Status {
    fn from(error: Error) -> Status {
        Status(status_of(&error))
    }
}

pub type FfiResult<T = ()> = Result<T, Status>;

/// Runs an export's body: `Ok` becomes `TERN_OK`, an error its status, and a panic
/// `TERN_ERR_PANIC` instead of unwinding into C.
pub fn guard(body: impl FnOnce() -> FfiResult) -> tern_status {
    match guard_value(Err(Status(TERN_ERR_PANIC)), body) {
        Ok(()) => TERN_OK,
        Err(Status(status)) => status,
    }
}

/// Runs the body of an export that returns a plain value; a panic returns `on_panic`.
pub fn guard_value<T>(on_panic: T, body: impl FnOnce() -> T) -> T {
    // AssertUnwindSafe: after a panic nothing the body touched is looked at again, and
    // out-parameters are only written as a body's last step.
    catch_unwind(AssertUnwindSafe(|| {
        #[cfg(any(test, feature = "panic-probe"))]
        panic_probe::fire();
        body()
    }))
    .unwrap_or(on_panic)
}

/// Test-only fault injection (cargo feature `panic-probe`, off by default and absent from
/// the shipped library and header): proves that a panic inside a real export becomes
/// `TERN_ERR_PANIC` (or the export's `on_panic` value) and that the process lives on.
#[cfg(any(test, feature = "panic-probe"))]
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

const NULL: Status = Status(TERN_ERR_NULL_POINTER);
const INVALID: Status = Status(TERN_ERR_INVALID_ARGUMENT);

fn check_aligned<T>(ptr: *const T) -> FfiResult {
    if ptr.align_offset(align_of::<T>()) == 0 {
        Ok(())
    } else {
        Err(INVALID)
    }
}

/// A shared reference to a handle or struct the caller passed, or `TERN_ERR_NULL_POINTER`.
///
/// # Safety
/// A non-NULL `ptr` must point to a valid `T` that stays valid and unmutated for `'a`.
pub unsafe fn try_ref<'a, T>(ptr: *const T) -> FfiResult<&'a T> {
    check_aligned(ptr)?;
    // SAFETY: the caller guarantees a non-NULL ptr is valid for 'a; NULL gives None.
    unsafe { ptr.as_ref() }.ok_or(NULL)
}

fn check_slice<T>(ptr: *const T, len: usize) -> FfiResult {
    if ptr.is_null() {
        return Err(NULL);
    }
    check_aligned(ptr)?;
    // `from_raw_parts` needs the slice to fit in isize::MAX bytes.
    match len.checked_mul(size_of::<T>()) {
        Some(bytes) if bytes <= isize::MAX as usize => Ok(()),
        _ => Err(INVALID),
    }
}

/// The `len` elements at `ptr`. NULL is an error even when `len` is 0.
///
/// # Safety
/// A non-NULL `ptr` must point to `len` initialized elements that stay valid and are not
/// written by anyone else for `'a`.
pub unsafe fn slice<'a, T>(ptr: *const T, len: usize) -> FfiResult<&'a [T]> {
    check_slice(ptr, len)?;
    // SAFETY: ptr is non-NULL and aligned, the size fits isize, and the caller guarantees
    // it points to `len` valid elements for 'a.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// The `len` elements at `ptr`, writable. NULL is an error even when `len` is 0.
///
/// # Safety
/// A non-NULL `ptr` must point to `len` initialized elements that nobody else reads or
/// writes for `'a`.
pub unsafe fn slice_mut<'a, T>(ptr: *mut T, len: usize) -> FfiResult<&'a mut [T]> {
    check_slice(ptr, len)?;
    // SAFETY: as in `slice`, and the caller guarantees exclusive access.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// Refuses an output buffer (`len` elements at `out`) that overlaps an input (`in_len`
/// elements at `input`): Rust may assume they are distinct, and C callers can pass
/// anything. Call it before turning the output into a slice. NULL pointers pass here: the
/// slice helpers refuse them.
pub fn check_disjoint<A, B>(input: *const A, in_len: usize, out: *const B, out_len: usize) -> FfiResult {
    if input.is_null() || out.is_null() {
        return Ok(());
    }
    let range = |p: usize, bytes: usize| (p, p.saturating_add(bytes));
    let (a_start, a_end) = range(input as usize, in_len.saturating_mul(size_of::<A>()));
    let (b_start, b_end) = range(out as usize, out_len.saturating_mul(size_of::<B>()));
    if a_start < b_end && b_start < a_end {
        Err(INVALID)
    } else {
        Ok(())
    }
}

/// An out-parameter, checked for NULL up front and written at most once, at the end of a
/// successful call.
pub struct Out<T>(NonNull<T>);

impl<T> Out<T> {
    /// # Safety
    /// A non-NULL `ptr` must be valid for writing a `T` for the rest of the call.
    pub unsafe fn new(ptr: *mut T) -> FfiResult<Out<T>> {
        check_aligned(ptr)?;
        NonNull::new(ptr).map(Out).ok_or(NULL)
    }

    /// Writes the result. Any previous value is overwritten, not dropped: out-parameters
    /// are plain C values or pointers, and may be uninitialized.
    pub fn write(self, value: T) {
        // SAFETY: `new`'s caller promised the pointer is valid for writes during the call.
        unsafe { self.0.as_ptr().write(value) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_maps_ok_errors_and_panics() {
        assert_eq!(guard(|| Ok(())), TERN_OK);
        assert_eq!(guard(|| Err(Error::StaleTensor.into())), TERN_ERR_STALE_TENSOR);
        assert_eq!(guard(|| Err(NULL)), TERN_ERR_NULL_POINTER);
        assert_eq!(guard(|| panic!("bug")), TERN_ERR_PANIC);
        assert_eq!(guard_value(7u32, || panic!("bug")), 7);
        assert_eq!(guard_value(7u32, || 3), 3);
    }

    #[test]
    fn panic_probe_fires_once_inside_the_guard() {
        panic_probe::arm();
        assert_eq!(guard(|| Ok(())), TERN_ERR_PANIC);
        assert_eq!(guard(|| Ok(())), TERN_OK, "the probe is one shot");
        panic_probe::arm();
        assert_eq!(guard_value(7u32, || 3), 7);
        assert_eq!(guard_value(7u32, || 3), 3);
    }

    #[test]
    fn slices_refuse_null_misaligned_and_oversized() {
        let xs = [1.0f32, 2.0];
        // SAFETY: (all calls) each pointer is NULL, misaligned or oversized (refused before
        // any read), or points into `xs` with a length inside it.
        unsafe {
            assert_eq!(slice::<f32>(std::ptr::null(), 0), Err(NULL));
            assert_eq!(slice(xs.as_ptr(), 2).unwrap(), &xs);
            assert_eq!(slice(xs.as_ptr(), 0).unwrap(), &[] as &[f32]);
            assert_eq!(slice(xs.as_ptr(), usize::MAX / 2), Err(INVALID));
            let raw = [0u32; 2];
            let odd = (raw.as_ptr() as *const u8).add(1) as *const f32;
            assert_eq!(slice(odd, 1), Err(INVALID));
            assert_eq!(try_ref::<u32>(std::ptr::null()), Err(NULL));
            assert!(Out::<u32>::new(std::ptr::null_mut()).is_err());
        }
    }

    #[test]
    fn disjointness() {
        let buf = [0u32; 4];
        let p = buf.as_ptr();
        let bytes = p.cast::<u8>();
        assert_eq!(check_disjoint(p, 2, p.wrapping_add(2), 2), Ok(()));
        assert_eq!(check_disjoint(p, 2, bytes.wrapping_add(7), 1), Err(INVALID));
        assert_eq!(check_disjoint(p, 2, bytes.wrapping_add(8), 8), Ok(()));
        assert_eq!(check_disjoint(p.wrapping_add(1), 1, bytes, 16), Err(INVALID));
        assert_eq!(check_disjoint(p, 0, bytes, 16), Ok(()));
        assert_eq!(check_disjoint(p, 4, std::ptr::null::<u8>(), usize::MAX), Ok(()));
    }
}
