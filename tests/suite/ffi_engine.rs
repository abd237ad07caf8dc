//! The engine-facing dispatcher API from C's side: `tern_matmul_many`, the engine's own
//! thread pool (`parallel_for`), strict dispatch, versioned options, `matmul/reference` in
//! the kernel list, and the row-range call on tiles of rows and tokens.

use std::collections::HashSet;
use std::ffi::{c_void, CStr};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use tern::ffi::*;

const CANARY: f32 = -31337.25;

fn last_error() -> String {
    // SAFETY: never NULL, NUL-terminated.
    unsafe { CStr::from_ptr(tern_last_error()) }.to_string_lossy().into_owned()
}

use crate::common::Rng;

fn tensor(format: u32, rows: usize, cols: usize, seed: u64) -> *mut tern_tensor {
    let (mut enc, mut t) = (null(), null_mut());
    let src = Rng(seed).vec(rows * cols, 1.0);
    // SAFETY: writable out-parameters; `src` holds rows * cols floats.
    unsafe {
        assert_eq!(tern_encoding_get(format, &mut enc), TERN_OK);
        assert_eq!(tern_tensor_encode(enc, src.as_ptr(), src.len(), rows, cols, &mut t), TERN_OK, "{}", last_error());
    }
    t
}

/// Events as (kind, name, rows, cols).
#[derive(Default)]
struct Recorder(Mutex<Vec<(u32, String, usize, usize)>>);

unsafe extern "C" fn record(userdata: *mut c_void, event: *const tern_event) {
    // SAFETY: the userdata registered below and an event valid for the call.
    let (r, e) = unsafe { (&*userdata.cast::<Recorder>(), &*event) };
    // SAFETY: event names are static NUL-terminated strings.
    let name = unsafe { CStr::from_ptr(e.name) }.to_str().unwrap().to_owned();
    r.0.lock().unwrap().push((e.kind, name, e.rows, e.cols));
}

fn dispatcher(options: Option<&tern_dispatcher_options>, recorder: &Recorder) -> *mut tern_dispatcher {
    let mut d = null_mut();
    // SAFETY: options (or NULL) and a writable out-parameter; the recorder outlives `d`.
    unsafe {
        assert_eq!(tern_dispatcher_new(options.map_or(null(), |o| o as *const _), &mut d), TERN_OK, "{}", last_error());
        let userdata = (recorder as *const Recorder).cast_mut().cast();
        assert_eq!(tern_dispatcher_set_sink(d, Some(record), userdata), TERN_OK);
    }
    d
}

/// An engine's pool for the test: `threads` std threads claim tasks from a counter.
struct TestPool {
    threads: usize,
    calls: AtomicUsize,
    /// Ids of the threads that ran tasks.
    ran_on: Mutex<HashSet<std::thread::ThreadId>>,
    /// What to do wrong: 0 nothing, 1 skip the last task, 2 run task 0 twice, 3 call an
    /// index past the end.
    fault: usize,
}

impl TestPool {
    fn new(threads: usize, fault: usize) -> TestPool {
        TestPool { threads, calls: AtomicUsize::new(0), ran_on: Mutex::new(HashSet::new()), fault }
    }
}

unsafe extern "C" fn test_parallel_for(pool: *mut c_void, n_tasks: usize, task: tern_task_fn, ctx: *mut c_void) {
    // SAFETY: the pool registered in the options, alive for the dispatcher's life.
    let pool = unsafe { &*pool.cast::<TestPool>() };
    pool.calls.fetch_add(1, Ordering::SeqCst);
    let task = task.expect("tern passes a task");
    let ctx = ctx as usize;
    let next = AtomicUsize::new(0);
    let n = if pool.fault == 1 { n_tasks - 1 } else { n_tasks };
    std::thread::scope(|s| {
        for _ in 0..pool.threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    return;
                }
                pool.ran_on.lock().unwrap().insert(std::thread::current().id());
                // SAFETY: tern's task with its context, each index below n_tasks once.
                unsafe { task(ctx as *mut c_void, i) };
            });
        }
    });
    // SAFETY: as above; the faults break the contract on purpose.
    unsafe {
        match pool.fault {
            2 => task(ctx as *mut c_void, 0),
            3 => task(ctx as *mut c_void, n_tasks),
            _ => {}
        }
    }
}

fn options_with_pool(pool: &TestPool) -> tern_dispatcher_options {
    tern_dispatcher_options {
        n_threads: pool.threads as u32,
        parallel_for: Some(test_parallel_for),
        pool: (pool as *const TestPool).cast_mut().cast(),
        ..Default::default()
    }
}

/// Names of this process's threads (Linux): tern's own pool names its workers `tern-N`.
fn tern_threads() -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("tern-"))
        .count()
}

/// Q/K/V-like weights (k = 1024; 512, 256 and 256 rows: large enough to be split) run
/// through one `tern_matmul_many` and through separate `tern_matmul` calls, on a plain
/// dispatcher, tern's own pool and an engine's pool: bit-identical outputs, one adapter
/// event then one kernel event per weight. At m = 64 the adapter's passes are split too.
#[test]
#[cfg_attr(target_family = "wasm", ignore = "wasm32 has no threads")]
fn matmul_many_equals_separate_calls_on_every_executor() {
    const K: usize = 1024;
    let rows = [512, 256, 256];
    let formats = [TERN_FORMAT_TQ2_0, TERN_FORMAT_TQ1_0, TERN_FORMAT_BITNET_B1_58];
    let _threads = crate::common::hold_threads();
    for m in [1, 5, 64] {
        let act = tensor(TERN_FORMAT_F32, m, K, 7);
        let weights: Vec<_> =
            rows.iter().zip(formats).enumerate().map(|(i, (&n, f))| tensor(f, n, K, i as u64)).collect();
        let pool = TestPool::new(3, 0);
        let with_pool = options_with_pool(&pool);
        let two_threads = tern_dispatcher_options { n_threads: 2, ..Default::default() };
        let mut reference: Option<Vec<Vec<f32>>> = None;
        for options in [None, Some(&two_threads), Some(&with_pool)] {
            let recorder = Recorder::default();
            let d = dispatcher(options, &recorder);
            let mut scope = null_mut();
            let mut separate: Vec<Vec<f32>> = rows.iter().map(|&n| vec![CANARY; m * n]).collect();
            let mut many: Vec<Vec<f32>> = rows.iter().map(|&n| vec![CANARY; m * n]).collect();
            // SAFETY: live handles; each output holds m * n floats.
            unsafe {
                assert_eq!(tern_scope_new(0, &mut scope), TERN_OK);
                for (w, out) in weights.iter().zip(&mut separate) {
                    assert_eq!(tern_matmul(d, act, *w, scope, out.as_mut_ptr(), out.len()), TERN_OK);
                }
                recorder.0.lock().unwrap().clear();
                let ws: Vec<*const tern_tensor> = weights.iter().map(|&w| w.cast_const()).collect();
                let outs: Vec<*mut f32> = many.iter_mut().map(|o| o.as_mut_ptr()).collect();
                let lens: Vec<usize> = many.iter().map(Vec::len).collect();
                let s = tern_matmul_many(d, act, ws.as_ptr(), 3, scope, outs.as_ptr(), lens.as_ptr());
                assert_eq!(s, TERN_OK, "{}", last_error());
                tern_scope_free(scope);
                tern_dispatcher_free(d);
            }
            assert!(many
                .iter()
                .zip(&separate)
                .all(|(a, b)| a.iter().map(|v| v.to_bits()).eq(b.iter().map(|v| v.to_bits()))));
            let events = recorder.0.lock().unwrap().clone();
            assert_eq!(events.len(), 4, "{events:?}");
            assert_eq!(
                (events[0].0, events[0].1.as_str(), events[0].2, events[0].3),
                (TERN_EVENT_ADAPTER_INSERTED, "requantize-i8-absmax", m, K)
            );
            for (e, &n) in events[1..].iter().zip(&rows) {
                assert_eq!((e.0, e.2, e.3), (TERN_EVENT_KERNEL_SELECTED, m, n));
            }
            match &reference {
                None => reference = Some(many),
                Some(r) => {
                    assert!(r.iter().flatten().map(|v| v.to_bits()).eq(many.iter().flatten().map(|v| v.to_bits())))
                }
            }
        }
        // The engine's pool ran the tasks, on its own threads; tern started none.
        assert!(pool.calls.load(Ordering::SeqCst) >= 4, "3 separate calls and one many");
        assert!(!pool.ran_on.lock().unwrap().is_empty());
        for t in weights.into_iter().chain([act]) {
            // SAFETY: freed once.
            unsafe { tern_tensor_free(t) };
        }
    }
}

/// Polls (threads name themselves once they run) until `want` tern threads exist.
fn wait_for_tern_threads(want: usize) -> usize {
    let start = std::time::Instant::now();
    while tern_threads() != want && start.elapsed() < std::time::Duration::from_secs(2) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    tern_threads()
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "wasm32 has no threads")]
fn an_engine_pool_means_no_tern_threads() {
    let _threads = crate::common::hold_threads();
    // The workers of the lock's previous holder are joined, but may stay listed a moment
    // longer (seen under qemu, where a joined thread's task lingered past the join).
    let before = wait_for_tern_threads(0);
    let pool = TestPool::new(2, 0);
    let recorder = Recorder::default();
    let d = dispatcher(Some(&options_with_pool(&pool)), &recorder);
    assert_eq!(tern_threads(), before, "a dispatcher with parallel_for started threads");
    let own = dispatcher(Some(&tern_dispatcher_options { n_threads: 3, ..Default::default() }), &recorder);
    if std::path::Path::new("/proc/self/task").exists() {
        assert_eq!(wait_for_tern_threads(before + 2), before + 2, "the check can see tern's own workers");
    }
    // SAFETY: freed once.
    unsafe {
        tern_dispatcher_free(d);
        tern_dispatcher_free(own);
    }
}

/// A `parallel_for` that skips a task, runs one twice or calls an index out of range makes
/// the call fail with TERN_ERR_INVALID_ARGUMENT, not a crash: in the kernel's tasks (int8
/// activations, m = 1) and in the adapter's (F32 activations, m = 64, split before the
/// kernel runs).
#[test]
#[cfg_attr(target_family = "wasm", ignore = "wasm32 has no threads")]
fn a_broken_parallel_for_is_refused() {
    let (n, k) = (512, 1024);
    let w = tensor(TERN_FORMAT_TQ2_0, n, k, 2);
    for (act_format, m) in [(TERN_FORMAT_I8_ABSMAX, 1), (TERN_FORMAT_F32, 64)] {
        let act = tensor(act_format, m, k, 1);
        for fault in 1..=3 {
            let pool = TestPool::new(2, fault);
            let recorder = Recorder::default();
            let d = dispatcher(Some(&options_with_pool(&pool)), &recorder);
            let mut out = vec![0f32; m * n];
            let mut scope = null_mut();
            // SAFETY: live handles, an output of m * n floats.
            let status = unsafe {
                assert_eq!(tern_scope_new(0, &mut scope), TERN_OK);
                let status = tern_matmul(d, act, w, scope, out.as_mut_ptr(), out.len());
                tern_scope_free(scope);
                status
            };
            assert_eq!(status, TERN_ERR_INVALID_ARGUMENT, "fault {fault}");
            assert!(last_error().contains("every task exactly once"), "{}", last_error());
            let what =
                if fault == 1 { " tasks were not run;" } else { "a task was run twice or with an index out of range" };
            assert!(last_error().contains(what), "fault {fault}: {}", last_error());
            assert!(recorder.0.lock().unwrap().is_empty(), "a failed call reported an event");
            // SAFETY: freed once.
            unsafe { tern_dispatcher_free(d) };
        }
        // SAFETY: freed once.
        unsafe { tern_tensor_free(act) };
    }
    // SAFETY: freed once.
    unsafe { tern_tensor_free(w) };
}

const FORMATS: [u32; 5] =
    [TERN_FORMAT_F32, TERN_FORMAT_TQ1_0, TERN_FORMAT_TQ2_0, TERN_FORMAT_BITNET_B1_58, TERN_FORMAT_I8_ABSMAX];

/// Every (weight, activation) pair: where a plain dispatcher runs `matmul/reference`, a
/// strict one refuses with TERN_ERR_UNSUPPORTED; everywhere else both give the same bits.
#[test]
fn strict_dispatch_refuses_each_fallback_pair() {
    let recorder = Recorder::default();
    let strict_options = tern_dispatcher_options { flags: TERN_DISPATCH_STRICT, ..Default::default() };
    let (plain, strict) = (dispatcher(None, &recorder), dispatcher(Some(&strict_options), &recorder));
    let (mut refused, mut ran) = (0, 0);
    let mut scope = null_mut();
    // SAFETY: writable out-parameter.
    assert_eq!(unsafe { tern_scope_new(0, &mut scope) }, TERN_OK);
    for wf in FORMATS {
        for af in FORMATS {
            let (w, a) = (tensor(wf, 4, 256, 3), tensor(af, 2, 256, 4));
            let (mut out, mut strict_out) = (vec![CANARY; 8], vec![CANARY; 8]);
            // SAFETY: live handles, outputs of 8 floats.
            unsafe {
                recorder.0.lock().unwrap().clear();
                assert_eq!(tern_matmul(plain, a, w, scope, out.as_mut_ptr(), 8), TERN_OK, "{}", last_error());
                let fallback = recorder.0.lock().unwrap().iter().any(|e| e.1 == "matmul/reference");
                let status = tern_matmul(strict, a, w, scope, strict_out.as_mut_ptr(), 8);
                if (wf, af) == (TERN_FORMAT_F32, TERN_FORMAT_F32) {
                    // Strict runs F32 x F32: its own kernel, not a decoding fallback.
                    let events = recorder.0.lock().unwrap();
                    assert_eq!(events.last().map(|e| e.1.as_str()), Some("dense_gemv/reference"), "{events:?}");
                }
                if fallback {
                    assert_eq!(status, TERN_ERR_UNSUPPORTED, "weight {wf} x act {af}");
                    assert!(last_error().contains("strict"), "{}", last_error());
                    assert!(strict_out.iter().all(|v| v.to_bits() == CANARY.to_bits()));
                    refused += 1;
                } else {
                    assert_eq!(status, TERN_OK, "weight {wf} x act {af}: {}", last_error());
                    assert_eq!(out, strict_out);
                    ran += 1;
                }
                tern_tensor_free(w);
                tern_tensor_free(a);
            }
        }
    }
    // Ternary x {F32, I8} and F32 x F32 have kernels; the rest fall back.
    assert_eq!((ran, refused), (7, 18));
    // SAFETY: freed once.
    unsafe {
        tern_scope_free(scope);
        tern_dispatcher_free(plain);
        tern_dispatcher_free(strict);
    }
}

/// Every `struct_size` from 0 to sizeof + 16, with the bytes past the declared size zero and
/// then garbage: only the released size (and larger sizes whose extra bytes are zero) is
/// accepted, and an accepted struct's `parallel_for` and `pool` arrive whole (the large
/// matmul runs on this test's pool). Every other size is refused before a field is read:
/// the message names the accepted sizes and `out` is untouched.
#[test]
#[cfg_attr(target_family = "wasm", ignore = "wasm32 has no threads")]
fn every_struct_size_is_read_whole_or_refused() {
    const SIZE: usize = std::mem::size_of::<tern_dispatcher_options>();
    #[repr(C, align(8))]
    struct Buf([u8; SIZE + 16]);
    let (m, n, k) = (1, 512, 1024);
    let act = tensor(TERN_FORMAT_I8_ABSMAX, m, k, 1);
    let w = tensor(TERN_FORMAT_TQ2_0, n, k, 2);
    let pool = TestPool::new(2, 0);
    let mut accepted = Vec::new();
    for size in 0..=SIZE + 16 {
        for fill in [0u8, 0xA5] {
            let options = tern_dispatcher_options {
                struct_size: size as u32,
                flags: TERN_DISPATCH_IGNORE_ENV,
                ..options_with_pool(&pool)
            };
            let mut buf = Buf([fill; SIZE + 16]);
            // SAFETY: `buf` holds SIZE + 16 bytes, aligned for the struct.
            unsafe { buf.0.as_mut_ptr().cast::<tern_dispatcher_options>().write(options) };
            // Past the declared size (the size field itself stays): zero or garbage.
            buf.0[size.max(4)..].fill(fill);
            let mut d: *mut tern_dispatcher = std::ptr::NonNull::dangling().as_ptr();
            // SAFETY: `buf` holds at least `size` readable bytes; a writable out-parameter.
            let status = unsafe { tern_dispatcher_new(buf.0.as_ptr().cast(), &mut d) };
            let want_ok = size == SIZE || (size > SIZE && fill == 0);
            if !want_ok {
                assert_eq!(status, TERN_ERR_INVALID_ARGUMENT, "struct_size {size}, fill {fill:#x}");
                let message = last_error();
                assert!(message.starts_with("argument `options->struct_size`: "), "{message}");
                assert!(message.contains(&format!("accepted: {SIZE} (tern 0.2 and 0.3)")), "{message}");
                assert_eq!(d, std::ptr::NonNull::dangling().as_ptr(), "out written on a refusal");
                continue;
            }
            assert_eq!(status, TERN_OK, "struct_size {size}, fill {fill:#x}: {}", last_error());
            accepted.push((size, fill));
            let calls = pool.calls.load(Ordering::SeqCst);
            let mut out = vec![0f32; m * n];
            // SAFETY: live handles, an output of m * n floats; freed once.
            unsafe {
                assert_eq!(
                    tern_matmul(d, act, w, null_mut(), out.as_mut_ptr(), out.len()),
                    TERN_OK,
                    "{}",
                    last_error()
                );
                tern_dispatcher_free(d);
            }
            assert_eq!(pool.calls.load(Ordering::SeqCst), calls + 1, "struct_size {size}: parallel_for was not ours");
        }
    }
    let mut want = vec![(SIZE, 0), (SIZE, 0xA5)];
    want.extend((SIZE + 1..=SIZE + 16).map(|s| (s, 0)));
    assert_eq!(accepted, want);
    // SAFETY: freed once.
    unsafe {
        tern_tensor_free(act);
        tern_tensor_free(w);
    }
}

/// Every single flag bit, and every combination of the known ones: the known are accepted,
/// each unknown bit refused by name.
#[test]
fn every_flag_bit_is_known_or_refused() {
    const KNOWN: [u32; 4] = [
        TERN_DISPATCH_STRICT,
        TERN_DISPATCH_IGNORE_ENV,
        TERN_DISPATCH_SERIALIZE_EXECUTOR,
        TERN_DISPATCH_ACCURATE_ACTIVATIONS,
    ];
    let try_flags = |flags: u32| {
        let options = tern_dispatcher_options { flags, ..Default::default() };
        let mut d: *mut tern_dispatcher = std::ptr::NonNull::dangling().as_ptr();
        // SAFETY: options of the declared size and a writable out-parameter.
        let status = unsafe { tern_dispatcher_new(&options, &mut d) };
        if status == TERN_OK {
            // SAFETY: freed once.
            unsafe { tern_dispatcher_free(d) };
        } else {
            assert_eq!(d, std::ptr::NonNull::dangling().as_ptr());
        }
        status
    };
    for bit in 0..32 {
        let flag = 1u32 << bit;
        if KNOWN.contains(&flag) {
            assert_eq!(try_flags(flag), TERN_OK, "{flag:#x}: {}", last_error());
        } else {
            assert_eq!(try_flags(flag), TERN_ERR_INVALID_ARGUMENT, "{flag:#x}");
            let want = format!("argument `options->flags`: {flag:#x} has bits this library does not know (known: 0xf)");
            assert_eq!(last_error(), want);
        }
    }
    for subset in 0..16u32 {
        let flags = KNOWN.iter().enumerate().filter(|(i, _)| subset & (1 << i) != 0).fold(0, |acc, (_, f)| acc | f);
        assert_eq!(try_flags(flags), TERN_OK, "{flags:#x}: {}", last_error());
    }
}

/// A struct from a later version: accepted when its extra fields are zero.
#[test]
fn a_later_struct_is_accepted_when_its_extra_fields_are_zero() {
    #[repr(C)]
    struct Later {
        options: tern_dispatcher_options,
        extra: u64,
    }
    let size = std::mem::size_of::<Later>() as u32;
    let mut later = Later { options: tern_dispatcher_options { struct_size: size, ..Default::default() }, extra: 0 };
    let mut d = null_mut();
    // SAFETY: `later` holds `size` bytes.
    unsafe {
        assert_eq!(tern_dispatcher_new(&later.options, &mut d), TERN_OK, "{}", last_error());
        tern_dispatcher_free(d);
        d = null_mut();
        later.extra = 1;
        assert_eq!(tern_dispatcher_new(&later.options, &mut d), TERN_ERR_INVALID_ARGUMENT);
    }
    assert!(last_error().contains("extra bytes are not zero"), "{}", last_error());
    assert!(d.is_null());
}

/// An engine pool that serves one call at a time and detects a second caller: each call
/// stays until a second call has entered (now or before) or `linger` has passed, then runs
/// the tasks inline.
struct SingleCallerPool {
    inside: AtomicUsize,
    entered: AtomicUsize,
    overlaps: AtomicUsize,
    linger: std::time::Duration,
}

unsafe extern "C" fn single_caller_parallel_for(pool: *mut c_void, n: usize, task: tern_task_fn, ctx: *mut c_void) {
    // SAFETY: the pool registered in the options, alive for the dispatcher's life.
    let pool = unsafe { &*pool.cast::<SingleCallerPool>() };
    if pool.inside.fetch_add(1, Ordering::SeqCst) > 0 {
        pool.overlaps.fetch_add(1, Ordering::SeqCst);
    }
    pool.entered.fetch_add(1, Ordering::SeqCst);
    let deadline = std::time::Instant::now() + pool.linger;
    while pool.entered.load(Ordering::SeqCst) < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let task = task.expect("tern passes a task");
    for i in 0..n {
        // SAFETY: tern's task with its context, each index below n once.
        unsafe { task(ctx, i) };
    }
    pool.inside.fetch_sub(1, Ordering::SeqCst);
}

/// Two threads run a matmul on one dispatcher at the same moment. By default both call
/// `parallel_for` at once (the single-caller pool sees the overlap: each call waits up to
/// 10 s for it); with TERN_DISPATCH_SERIALIZE_EXECUTOR never (each call waits 300 ms for
/// a second caller, which tern holds back), and both results are right either way.
#[test]
#[cfg_attr(target_family = "wasm", ignore = "wasm32 has no threads")]
fn parallel_for_is_called_concurrently_unless_serialized() {
    let (m, n, k) = (1, 512, 1024);
    let act = tensor(TERN_FORMAT_I8_ABSMAX, m, k, 1);
    let w = tensor(TERN_FORMAT_TQ2_0, n, k, 2);
    let mut want = vec![0f32; m * n];
    let recorder = Recorder::default();
    let plain = dispatcher(None, &recorder);
    // SAFETY: live handles, an output of m * n floats.
    assert_eq!(unsafe { tern_matmul(plain, act, w, null_mut(), want.as_mut_ptr(), want.len()) }, TERN_OK);
    for (flags, linger_ms) in [(0, 10_000), (TERN_DISPATCH_SERIALIZE_EXECUTOR, 300)] {
        let pool = SingleCallerPool {
            inside: AtomicUsize::new(0),
            entered: AtomicUsize::new(0),
            overlaps: AtomicUsize::new(0),
            linger: std::time::Duration::from_millis(linger_ms),
        };
        let options = tern_dispatcher_options {
            n_threads: 2,
            flags,
            parallel_for: Some(single_caller_parallel_for),
            pool: (&pool as *const SingleCallerPool).cast_mut().cast(),
            ..Default::default()
        };
        let d = dispatcher(Some(&options), &recorder);
        let barrier = std::sync::Barrier::new(2);
        let (d_addr, act_addr, w_addr) = (d as usize, act as usize, w as usize);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    let mut out = vec![0f32; m * n];
                    barrier.wait();
                    let (d, act, w) = (d_addr as *const tern_dispatcher, act_addr as *const _, w_addr as *const _);
                    // SAFETY: live handles shared read-only; each thread has its own output.
                    let status = unsafe { tern_matmul(d, act, w, null_mut(), out.as_mut_ptr(), out.len()) };
                    assert_eq!(status, TERN_OK, "{}", last_error());
                    assert_eq!(out, want);
                });
            }
        });
        let overlaps = pool.overlaps.load(Ordering::SeqCst);
        if flags == 0 {
            assert_eq!(overlaps, 1, "the second caller should have entered while the first waited");
        } else {
            assert_eq!(overlaps, 0, "tern called parallel_for while another call was running");
        }
        // SAFETY: freed once, after both threads joined.
        unsafe { tern_dispatcher_free(d) };
    }
    // SAFETY: freed once.
    unsafe {
        tern_dispatcher_free(plain);
        tern_tensor_free(act);
        tern_tensor_free(w);
    }
}

#[test]
fn the_kernel_list_ends_with_matmul_reference() {
    let count = tern_kernel_count();
    let mut info = tern_kernel_info { name: null(), weight: 9, act: 9, available: 9 };
    // SAFETY: a writable out-parameter.
    unsafe {
        assert_eq!(tern_kernel_info_get(count - 1, &mut info), TERN_OK);
        assert_eq!(CStr::from_ptr(info.name).to_str().unwrap(), "matmul/reference");
        assert_eq!((info.weight, info.act, info.available), (0, 0, 1));
        for i in 0..count - 1 {
            assert_eq!(tern_kernel_info_get(i, &mut info), TERN_OK);
            assert_ne!(CStr::from_ptr(info.name).to_str().unwrap(), "matmul/reference");
            assert!(info.weight != 0 && info.act != 0);
        }
        assert_eq!(tern_kernel_info_get(count, &mut info), TERN_ERR_OUT_OF_BOUNDS);
    }
    assert_eq!(last_error(), format!("argument `index`: {count} given, there are {count} kernels"));
}

/// Tiles of (rows x tokens) from several calls fill the output exactly as one matmul does,
/// and each reports the kernel the dispatcher reports for the same m.
#[test]
fn row_and_token_tiles_equal_one_matmul_and_name_the_kernel() {
    let (m, n, k) = (9, 96, 512);
    for format in [TERN_FORMAT_TQ1_0, TERN_FORMAT_TQ2_0, TERN_FORMAT_BITNET_B1_58] {
        let (act, w) = (tensor(TERN_FORMAT_I8_ABSMAX, m, k, 5), tensor(format, n, k, 6));
        let recorder = Recorder::default();
        let d = dispatcher(None, &recorder);
        let mut whole = vec![0f32; m * n];
        let mut tiled = vec![CANARY; m * n];
        // SAFETY: live handles; outputs of m * n floats; tiles are disjoint.
        unsafe {
            assert_eq!(tern_matmul(d, act, w, null_mut(), whole.as_mut_ptr(), whole.len()), TERN_OK);
            let expected = recorder.0.lock().unwrap()[0].1.clone();
            for (rows, tokens) in [(0..48, 0..4), (48..96, 0..4), (0..96, 4..8), (0..96, 8..9)] {
                let mut ran = null();
                let s = tern_bitnet_gemv_tile(
                    null(),
                    act,
                    w,
                    rows.start,
                    rows.end,
                    tokens.start,
                    tokens.end,
                    tiled.as_mut_ptr(),
                    tiled.len(),
                    &mut ran,
                );
                assert_eq!(s, TERN_OK, "{}", last_error());
                assert_eq!(CStr::from_ptr(ran).to_str().unwrap(), expected);
            }
            assert!(whole.iter().zip(&tiled).all(|(a, b)| a.to_bits() == b.to_bits()));

            // A bad token range writes nothing and leaves `kernel_ran` alone.
            let mut untouched = vec![CANARY; m * n];
            let mut ran = null();
            for (begin, end) in [(0, m + 1), (5, 4)] {
                let s = tern_bitnet_gemv_tile(
                    null(),
                    act,
                    w,
                    0,
                    n,
                    begin,
                    end,
                    untouched.as_mut_ptr(),
                    untouched.len(),
                    &mut ran,
                );
                assert_eq!(s, TERN_ERR_OUT_OF_BOUNDS);
            }
            assert!(ran.is_null() && untouched.iter().all(|v| v.to_bits() == CANARY.to_bits()));
            let s =
                tern_bitnet_gemv_tile(null(), act, w, 0, n, 0, m, untouched.as_mut_ptr(), untouched.len(), null_mut());
            assert_eq!(s, TERN_OK, "kernel_ran may be NULL");
            tern_dispatcher_free(d);
            tern_tensor_free(act);
            tern_tensor_free(w);
        }
    }
}

#[test]
fn matmul_many_refuses_bad_arguments_before_running() {
    let (m, n, k) = (1, 4, 256);
    let act = tensor(TERN_FORMAT_F32, m, k, 1);
    let (w0, w1, wide) =
        (tensor(TERN_FORMAT_TQ2_0, n, k, 2), tensor(TERN_FORMAT_TQ2_0, n, k, 3), tensor(TERN_FORMAT_TQ2_0, n, 512, 4));
    let recorder = Recorder::default();
    let d = dispatcher(None, &recorder);
    let mut scope = null_mut();
    let mut bufs = [[CANARY; 8]; 2];
    let (o0, o1) = (bufs[0].as_mut_ptr(), bufs[1].as_mut_ptr());
    // SAFETY: NULLs and bad values are refused before any access; live buffers otherwise.
    unsafe {
        assert_eq!(tern_scope_new(0, &mut scope), TERN_OK);
        let ws = [w0.cast_const(), w1.cast_const()];
        let lens = [4usize, 4];
        let call = |ws: &[*const tern_tensor], outs: &[*mut f32], lens: &[usize], n: usize| {
            tern_matmul_many(d, act, ws.as_ptr(), n, scope, outs.as_ptr(), lens.as_ptr())
        };
        assert_eq!(call(&ws, &[o0, o1], &lens, 0), TERN_ERR_INVALID_ARGUMENT);
        assert_eq!(last_error(), "argument `n_weights`: 0 given, at least 1");
        assert_eq!(tern_matmul_many(d, act, null(), 2, scope, [o0, o1].as_ptr(), lens.as_ptr()), TERN_ERR_NULL_POINTER);
        assert_eq!(
            tern_matmul_many(null(), act, ws.as_ptr(), 2, scope, [o0, o1].as_ptr(), lens.as_ptr()),
            TERN_ERR_NULL_POINTER
        );
        assert_eq!(tern_matmul_many(d, act, ws.as_ptr(), 2, scope, [o0, o1].as_ptr(), null()), TERN_ERR_NULL_POINTER);
        assert_eq!(call(&[w0, null()], &[o0, o1], &lens, 2), TERN_ERR_NULL_POINTER);
        assert_eq!(last_error(), "weight 1: argument `weights[i]` is NULL");
        assert_eq!(call(&ws, &[o0, null_mut()], &lens, 2), TERN_ERR_NULL_POINTER);
        assert_eq!(call(&ws, &[o0, o1], &[4, 3], 2), TERN_ERR_LENGTH_MISMATCH);
        assert_eq!(last_error(), "weight 1: out (floats): 3 given, 4 required");
        assert_eq!(call(&ws, &[o0, o0.add(2)], &lens, 2), TERN_ERR_INVALID_ARGUMENT);
        assert_eq!(last_error(), "weight 1: argument `outs[i]`: overlaps `outs[j]`");
        assert_eq!(call(&[w0, wide], &[o0, o1], &lens, 2), TERN_ERR_SHAPE_MISMATCH);
        assert!(last_error().starts_with("weight 1: act is F32 1x256, weight is TQ2_0 4x512"), "{}", last_error());
        assert!(bufs.iter().flatten().all(|v| v.to_bits() == CANARY.to_bits()), "a refused call wrote");
        assert_eq!(call(&ws, &[o0, o1], &lens, 2), TERN_OK);
        let mut stats = tern_scope_stats { bytes_in_use: 0, high_water: 0, allocations: 0, capacity: 0, generation: 0 };
        assert_eq!(tern_scope_get_stats(scope, &mut stats), TERN_OK);
        assert_eq!(stats.allocations, 1, "only the successful call requantized");
        tern_scope_free(scope);
        tern_dispatcher_free(d);
        for t in [act, w0, w1, wide] {
            tern_tensor_free(t);
        }
    }
    assert_eq!(recorder.0.lock().unwrap().len(), 3, "events of the one successful call only");
}
