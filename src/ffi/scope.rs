//! Scope handles: caller-owned arenas for the tensors of one forward pass.

use super::guard::*;
use super::status::tern_status;
use crate::scope::Scope;

/// An arena for per-pass tensors (the requantized activations). Allocations are 64-byte
/// aligned; `tern_scope_reset` frees them all at once, after which every tensor that lived
/// in the scope reports `TERN_ERR_STALE_TENSOR` instead of reading freed memory.
///
/// Ownership: created by `tern_scope_new`, released with `tern_scope_free`. Tensor handles
/// allocated in the scope are still released with `tern_tensor_free`, before or after the
/// scope is freed (their bytes stay the scope's). Thread-safety: one thread at a time (one
/// scope per thread or per forward pass); tensors allocated in it may be read from any
/// thread until the scope is reset.
pub struct tern_scope {
    scope: Scope,
}

/// A scope's counters.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tern_scope_stats {
    /// Bytes handed out since the last reset (requested sizes, without alignment padding).
    pub bytes_in_use: usize,
    /// The largest `bytes_in_use` ever reached.
    pub high_water: usize,
    /// Allocations since the last reset.
    pub allocations: usize,
    /// Bytes of memory the scope holds.
    pub capacity: usize,
    /// Bumped by every reset.
    pub generation: u64,
}

/// The scope behind a caller's handle, mutably.
///
/// # Safety
/// `s` must be NULL or a live handle from `tern_scope_new` that no other thread uses
/// during `'a`.
pub unsafe fn scope_mut<'a>(s: *mut tern_scope) -> FfiResult<&'a mut Scope> {
    // SAFETY: forwarded to the caller; `try_ref` checks NULL and alignment.
    unsafe { try_ref(s, "scope")? };
    // SAFETY: non-NULL and live (above), and exclusively ours for 'a (the caller's promise).
    Ok(&mut unsafe { &mut *s }.scope)
}

/// Creates a scope that starts with `initial_bytes` of memory (0: allocate on first use)
/// and writes it to `*out`. Errors: TERN_ERR_NULL_POINTER, TERN_ERR_ALLOCATION_FAILED.
#[no_mangle]
pub unsafe extern "C" fn tern_scope_new(initial_bytes: usize, out: *mut *mut tern_scope) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a writable out-parameter or NULL.
        let out = unsafe { Out::new(out, "out")? };
        let scope = Scope::new(initial_bytes)?;
        out.write(Box::into_raw(Box::new(tern_scope { scope })));
        Ok(())
    })
}

/// Frees every allocation of the scope at once and bumps its generation: tensors allocated
/// before become stale. Not concurrently with any other use of the scope.
#[no_mangle]
pub unsafe extern "C" fn tern_scope_reset(scope: *mut tern_scope) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live scope it owns exclusively during the call.
        unsafe { scope_mut(scope)? }.reset();
        Ok(())
    })
}

/// Writes the scope's counters to `*out`.
#[no_mangle]
pub unsafe extern "C" fn tern_scope_get_stats(scope: *const tern_scope, out: *mut tern_scope_stats) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live scope (not being reset concurrently) and a
        // writable out-parameter.
        let (scope, out) = unsafe { (&try_ref(scope, "scope")?.scope, Out::new(out, "out")?) };
        let s = scope.stats();
        out.write(tern_scope_stats {
            bytes_in_use: s.bytes_in_use,
            high_water: s.high_water,
            allocations: s.allocations,
            capacity: s.capacity,
            generation: s.generation,
        });
        Ok(())
    })
}

/// Frees a scope. Tensors allocated in it become stale (and must still be freed with
/// `tern_tensor_free`). `tern_scope_free(NULL)` is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tern_scope_free(scope: *mut tern_scope) {
    guard_value((), || {
        if !scope.is_null() {
            // SAFETY: a non-NULL scope came from Box::into_raw in tern_scope_new and is
            // freed once (the caller's promise).
            drop(unsafe { Box::from_raw(scope) });
        }
    })
}
