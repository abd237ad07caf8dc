//! `tern_dispatcher_options`: a versioned struct (its first field is its size, so later
//! versions can append fields) and the engine's `parallel_for` as a dispatcher executor.

use super::guard::*;
use crate::dispatch::{DispatcherOptions, Executor};
use std::ffi::{c_char, c_void, CStr};
use std::mem::{offset_of, size_of, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// `tern_dispatcher_options.flags`: no silent fallback. A pair no dedicated kernel serves
/// (what would run `matmul/reference`, which decodes both operands, e.g. swapped operands)
/// returns TERN_ERR_UNSUPPORTED instead. F32 weights with F32 activations are served: their
/// kernel, `dense_gemv/reference`, is the plain f32 dot product that pair needs, not a
/// decoding fallback (an F32 output head is a real use), so strict runs it; to catch an F32
/// tensor passed as a weight by mistake (a norm), watch KERNEL_SELECTED for that name.
pub const TERN_DISPATCH_STRICT: u32 = 1u32;
/// `tern_dispatcher_options.flags`: do not read the `TERN_KERNEL` environment variable.
pub const TERN_DISPATCH_IGNORE_ENV: u32 = 2u32;
/// `tern_dispatcher_options.flags` (since 0.3): call `parallel_for` one call at a time.
/// Without it, matmuls run at once from several threads on one dispatcher call
/// `parallel_for` at once (see `tern_parallel_for_fn`); with it, tern holds a lock around
/// each call, so a pool that serves one caller at a time is safe to share (a matmul waits
/// for the one running). Without `parallel_for` it changes nothing: tern's own pool already
/// runs a second caller's matmul inline on that caller's thread.
pub const TERN_DISPATCH_SERIALIZE_EXECUTOR: u32 = 4u32;
/// `tern_dispatcher_options.flags` (since 0.3): F32 activations that meet TQ1_0/TQ2_0
/// weights are requantized to TERN_FORMAT_I8_BLOCK256 (one scale per 256-element block, as
/// accurate as ggml's Q8_K), those that meet Q2_0 weights to TERN_FORMAT_I8_BLOCK32 (one per
/// 32 elements, as accurate as ggml's Q8_0), instead of TERN_FORMAT_I8_ABSMAX (one scale per
/// token); the
/// ADAPTER_INSERTED event names the format and its bytes. BITNET_B1_58 and I2_S weights keep
/// I8_ABSMAX (one weight scale per tensor; those models are trained with per-token absmax).
pub const TERN_DISPATCH_ACCURATE_ACTIVATIONS: u32 = 8u32;
const KNOWN_FLAGS: u32 = TERN_DISPATCH_STRICT
    | TERN_DISPATCH_IGNORE_ENV
    | TERN_DISPATCH_SERIALIZE_EXECUTOR
    | TERN_DISPATCH_ACCURATE_ACTIVATIONS;

/// A task of a split matmul: `task(task_ctx, i)` computes task `i`. Thread-safe: any
/// thread may run any task, several at once.
pub type tern_task_fn = Option<unsafe extern "C" fn(task_ctx: *mut c_void, task: usize)>;

/// An engine's thread pool: runs `task(task_ctx, i)` for every `i < n_tasks`, each exactly
/// once, on any of its threads (the calling thread included), and returns only when all
/// have finished. `pool` is the options' `pool`, passed back as it was given. It is called
/// from the thread that called `tern_matmul` (or `tern_matmul_many`), once per large call,
/// never re-entrantly from a task; tasks never block on each other.
///
/// Concurrency: matmuls may run on one dispatcher from several threads at once, and each
/// calls `parallel_for` from its own thread, so by default `parallel_for` must accept
/// concurrent calls (as a work-stealing pool does). A pool that serves one call at a time
/// sets `TERN_DISPATCH_SERIALIZE_EXECUTOR`: tern then never calls it while another call on
/// the same dispatcher is in progress. Every task must have finished when `parallel_for`
/// returns: a task run later reads freed memory, which tern cannot detect. If it breaks
/// the contract in a way tern can see (a task skipped, run twice, or an index out of
/// range), the call returns TERN_ERR_INVALID_ARGUMENT and the output is unspecified.
pub type tern_parallel_for_fn =
    Option<unsafe extern "C" fn(pool: *mut c_void, n_tasks: usize, task: tern_task_fn, task_ctx: *mut c_void)>;

/// Dispatcher options; pass NULL to `tern_dispatcher_new` for the defaults. Zero-initialize
/// it and set `struct_size = sizeof(tern_dispatcher_options)`. `tern_dispatcher_new` accepts
/// the size of every released version of the struct (24 with 32-bit pointers and 40 with
/// 64-bit ones since 0.2), so a library from a later version reads only the fields the
/// caller's struct has; it accepts a larger struct only when the extra bytes are zero
/// (options it would not understand), and refuses every other size, which would cut a field.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tern_dispatcher_options {
    /// `sizeof(tern_dispatcher_options)` as the caller compiled it.
    pub struct_size: u32,
    /// Threads per matmul, counting the caller; 0 and 1 both mean the caller alone. The
    /// workers are started once and kept alive until `tern_dispatcher_free`. With
    /// `parallel_for`, the number of threads the engine's pool runs tasks on (tern cuts
    /// about four tasks per thread; 0 counts as 1) and tern starts no threads. WebAssembly
    /// builds have no threads: without `parallel_for` they refuse more than 1
    /// (`TERN_ERR_INVALID_ARGUMENT`).
    pub n_threads: u32,
    /// NULL, or the name of a kernel to force for the pairs it serves (others are chosen as
    /// usual); `"matmul/reference"` forces the decoding fallback for every pair, also on a
    /// strict dispatcher (asked for, it is no silent fallback). NULL reads the `TERN_KERNEL` environment variable, unless `flags` has
    /// `TERN_DISPATCH_IGNORE_ENV`.
    pub kernel: *const c_char,
    /// `TERN_DISPATCH_STRICT`, `TERN_DISPATCH_IGNORE_ENV`, `TERN_DISPATCH_SERIALIZE_EXECUTOR`
    /// and/or `TERN_DISPATCH_ACCURATE_ACTIVATIONS`; other bits are refused.
    pub flags: u32,
    /// NULL, or the engine's thread pool (see `tern_parallel_for_fn`): large matmuls run
    /// their tasks through it instead of tern's own threads.
    pub parallel_for: tern_parallel_for_fn,
    /// Passed to `parallel_for` as its first argument.
    pub pool: *mut c_void,
}

impl Default for tern_dispatcher_options {
    /// The defaults, with `struct_size` set (for Rust callers of the C API).
    fn default() -> tern_dispatcher_options {
        tern_dispatcher_options {
            struct_size: size_of::<tern_dispatcher_options>() as u32,
            n_threads: 0,
            kernel: std::ptr::null(),
            flags: 0,
            parallel_for: None,
            pool: std::ptr::null_mut(),
        }
    }
}

/// The sizes of every released version of the struct, with the version that introduced
/// each: tern 0.2 (the first with `struct_size`) and 0.3 share one layout (0.3 added only
/// a flag). A later version appends its size here; a size between two of these would cut a
/// field (a pointer read half from the caller's struct and half from beyond it), so it is
/// refused, never read.
const RELEASED_SIZES: [(usize, &str); 1] =
    [(offset_of!(tern_dispatcher_options, pool) + size_of::<*mut c_void>(), "tern 0.2 and 0.3")];

/// What the refusal of a `struct_size` says is accepted.
fn accepted_sizes() -> String {
    let sizes: Vec<String> = RELEASED_SIZES.iter().map(|(size, from)| format!("{size} ({from})")).collect();
    format!(
        "accepted: {}, or a larger struct whose extra bytes are zero; set it to sizeof(tern_dispatcher_options)",
        sizes.join(", ")
    )
}

/// The caller's options, the fields past its `struct_size` zero (their defaults). Only the
/// sizes of released versions are read (see [`RELEASED_SIZES`]), and larger ones whose
/// extra bytes are all zero; any other size is refused before a field is copied.
///
/// # Safety
/// `options` must point to at least `options->struct_size` readable bytes.
unsafe fn read_versioned(options: *const tern_dispatcher_options) -> FfiResult<tern_dispatcher_options> {
    // SAFETY: the caller's pointer; `try_ref` checks NULL and alignment, and the first
    // field is present in every version.
    let size = unsafe { try_ref(options.cast::<u32>(), "options") }?;
    let size = *size as usize;
    let ours = size_of::<tern_dispatcher_options>();
    let released = RELEASED_SIZES.iter().any(|&(s, _)| s == size);
    if !released && size <= ours {
        return Err(Status::invalid(
            "options->struct_size",
            format_args!("{size} is not the size of a released tern_dispatcher_options ({})", accepted_sizes()),
        ));
    }
    // SAFETY: the caller promises `size` readable bytes at `options`.
    let bytes = unsafe { slice(options.cast::<u8>(), size, "options") }?;
    if bytes[ours.min(size)..].iter().any(|&b| b != 0) {
        return Err(Status::invalid(
            "options->struct_size",
            format_args!(
                "{size} is larger than this library's {ours} and the extra bytes are not zero (options this \
                 version does not know; {})",
                accepted_sizes()
            ),
        ));
    }
    let mut copy = MaybeUninit::<tern_dispatcher_options>::zeroed();
    // SAFETY: `size` is a released version's size (the end of a field) or at least ours, so
    // the copy of `ours.min(size)` bytes into the local ends on a field boundary: every
    // field copied is whole, and the rest stay zero, a valid value of every field (0, NULL,
    // None). Every byte copied comes from a struct the caller built with the same layout.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), copy.as_mut_ptr().cast::<u8>(), ours.min(size));
        Ok(copy.assume_init())
    }
}

/// The options as the dispatcher takes them.
///
/// # Safety
/// `options` must be NULL or point to `struct_size` readable bytes whose `kernel` is NULL or
/// a NUL-terminated string; `pool` must be what `parallel_for` expects, and both must stay
/// valid until the dispatcher is freed.
pub(super) unsafe fn dispatcher_options(options: *const tern_dispatcher_options) -> FfiResult<DispatcherOptions> {
    if options.is_null() {
        return Ok(DispatcherOptions::default());
    }
    // SAFETY: forwarded to the caller.
    let o = unsafe { read_versioned(options) }?;
    if o.flags & !KNOWN_FLAGS != 0 {
        return Err(Status::invalid(
            "options->flags",
            format_args!("{:#x} has bits this library does not know (known: {KNOWN_FLAGS:#x})", o.flags),
        ));
    }
    let kernel = if o.kernel.is_null() {
        None
    } else {
        // SAFETY: non-NULL and NUL-terminated (the caller's promise).
        let name = unsafe { CStr::from_ptr(o.kernel) };
        Some(name.to_str().map_err(|_| Status::invalid("options->kernel", "not UTF-8"))?.to_owned())
    };
    let serial = o.flags & TERN_DISPATCH_SERIALIZE_EXECUTOR != 0;
    let executor = o.parallel_for.map(|parallel_for| {
        let serial = serial.then(|| Mutex::new(()));
        Arc::new(ParallelFor { parallel_for, pool: o.pool, threads: o.n_threads.max(1) as usize, serial })
            as Arc<dyn Executor>
    });
    Ok(DispatcherOptions {
        n_threads: o.n_threads as usize,
        kernel,
        strict: o.flags & TERN_DISPATCH_STRICT != 0,
        ignore_env: o.flags & TERN_DISPATCH_IGNORE_ENV != 0,
        executor,
        accurate_activations: o.flags & TERN_DISPATCH_ACCURATE_ACTIVATIONS != 0,
    })
}

/// The engine's `parallel_for` as an [`Executor`].
struct ParallelFor {
    parallel_for: unsafe extern "C" fn(*mut c_void, usize, tern_task_fn, *mut c_void),
    pool: *mut c_void,
    threads: usize,
    /// Held around each call with `TERN_DISPATCH_SERIALIZE_EXECUTOR`.
    serial: Option<Mutex<()>>,
}

// SAFETY: the header makes `parallel_for` and `pool` usable from any thread that calls a
// matmul (the engine's pool is shared by its threads); tern only passes them back.
unsafe impl Send for ParallelFor {}
// SAFETY: as above.
unsafe impl Sync for ParallelFor {}

/// What a task's C entry point gets: the task function and a flag for panics, which must
/// not unwind into the engine's threads.
struct TaskContext<'a> {
    task: &'a (dyn Fn(usize) + Sync),
    panicked: AtomicBool,
}

/// The `tern_task_fn` tern hands to `parallel_for`.
///
/// # Safety
/// `ctx` must be the `TaskContext` that `ParallelFor::for_each` passed, still alive (it is
/// until `parallel_for` returns).
unsafe extern "C" fn run_task(ctx: *mut c_void, task: usize) {
    // SAFETY: the caller's promise above.
    let ctx = unsafe { &*ctx.cast::<TaskContext>() };
    if catch_unwind(AssertUnwindSafe(|| (ctx.task)(task))).is_err() {
        ctx.panicked.store(true, Ordering::Relaxed);
    }
}

impl Executor for ParallelFor {
    fn threads(&self) -> usize {
        self.threads
    }

    fn for_each(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) -> bool {
        let ctx = TaskContext { task, panicked: AtomicBool::new(false) };
        // A poisoned lock only means a call panicked; the pool is free again.
        let _turn = self.serial.as_ref().map(|lock| lock.lock().unwrap_or_else(PoisonError::into_inner));
        // SAFETY: the engine's function with its own pool; `ctx` outlives the call, which
        // returns only when every task has finished (its documented contract; a task run
        // later would be a use after return, which no check can catch).
        unsafe {
            (self.parallel_for)(self.pool, n_tasks, Some(run_task), (&ctx as *const TaskContext).cast_mut().cast())
        };
        !ctx.panicked.load(Ordering::Relaxed)
    }
}

const _: () = assert!(RELEASED_SIZES[RELEASED_SIZES.len() - 1].0 == size_of::<tern_dispatcher_options>());
