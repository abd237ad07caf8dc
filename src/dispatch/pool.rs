//! A persistent pool of worker threads for splitting one matmul's output rows. Threads are
//! spawned once, when the dispatcher is made, and parked between calls.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a thread polls for its wake-up before it parks on a condvar. Parking and
/// waking through the kernel costs tens of microseconds, a large part of a GEMV split
/// over threads (about 80 us per part at 4096x4096); matmuls of one forward pass follow
/// each other closely, so a short spin usually sees the next job.
const SPIN: Duration = Duration::from_micros(50);

/// Polls `ready` for at most [`SPIN`]; true if it turned true.
fn spin_until(ready: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    loop {
        for _ in 0..64 {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= SPIN {
            return false;
        }
    }
}

/// A job borrowed from the caller of [`Pool::run`], with its lifetime erased.
#[derive(Clone, Copy)]
struct JobPtr(*const (dyn Fn(usize) + Sync + 'static));

// SAFETY: the pointee is `Sync`, and `run` keeps it alive until every worker is done.
unsafe impl Send for JobPtr {}

struct State {
    job: Option<JobPtr>,
    epoch: u64,
    remaining: usize,
    panicked: bool,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
    done: Condvar,
    /// Copies of `State::epoch` and `State::remaining`, written under the lock, so that
    /// spinning threads poll them without it; the lock and the condvars stay the
    /// authority, the copies only end a spin early.
    epoch: AtomicU64,
    remaining: AtomicUsize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Held for a whole `run`; a second caller that finds it taken runs inline instead
    /// of waiting.
    busy: Mutex<()>,
}

impl Pool {
    /// A pool where `threads` parts run at once: the caller plus `threads - 1` workers.
    pub fn new(threads: usize) -> std::io::Result<Pool> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State { job: None, epoch: 0, remaining: 0, panicked: false, shutdown: false }),
            work: Condvar::new(),
            done: Condvar::new(),
            epoch: AtomicU64::new(0),
            remaining: AtomicUsize::new(0),
        });
        let workers = (1..threads.max(1))
            .map(|part| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new().name(format!("tern-{part}")).spawn(move || worker(&shared, part))
            })
            .collect::<std::io::Result<_>>()?;
        Ok(Pool { shared, workers, busy: Mutex::new(()) })
    }

    /// Parts that run at once.
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `job(part)` for every part in `0..threads()`, part 0 on the calling thread, and
    /// returns when all are done. Returns false if any part panicked. If another thread is
    /// using the pool, every part runs on the calling thread.
    pub fn run(&self, job: &(dyn Fn(usize) + Sync)) -> bool {
        let _busy = match self.busy.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => {
                return (0..self.threads()).all(|part| catch_unwind(AssertUnwindSafe(|| job(part))).is_ok());
            }
        };
        // SAFETY: erases the borrow's lifetime; this function does not return before every
        // worker has finished with the job (`remaining == 0` below), so it outlives all uses.
        let ptr = JobPtr(unsafe {
            std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), *const (dyn Fn(usize) + Sync + 'static)>(job)
        });
        {
            let mut state = self.shared.lock();
            state.job = Some(ptr);
            state.epoch += 1;
            state.remaining = self.workers.len();
            state.panicked = false;
            self.shared.remaining.store(state.remaining, Ordering::Release);
            self.shared.epoch.store(state.epoch, Ordering::Release);
        }
        self.shared.work.notify_all();
        let mine = catch_unwind(AssertUnwindSafe(|| job(0))).is_ok();
        spin_until(|| self.shared.remaining.load(Ordering::Acquire) == 0);
        let mut state = self.shared.lock();
        while state.remaining > 0 {
            state = self.shared.done.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        state.job = None;
        mine && !state.panicked
    }
}

fn worker(shared: &Shared, part: usize) {
    let mut seen = 0;
    loop {
        spin_until(|| shared.epoch.load(Ordering::Acquire) != seen);
        let job = {
            let mut state = shared.lock();
            while state.epoch == seen && !state.shutdown {
                state = shared.work.wait(state).unwrap_or_else(PoisonError::into_inner);
            }
            if state.shutdown {
                return;
            }
            seen = state.epoch;
            state.job.expect("a new epoch carries a job")
        };
        // SAFETY: `run` keeps the job alive until this worker decrements `remaining`.
        let ok = catch_unwind(AssertUnwindSafe(|| unsafe { (*job.0)(part) })).is_ok();
        let mut state = shared.lock();
        state.panicked |= !ok;
        state.remaining -= 1;
        shared.remaining.store(state.remaining, Ordering::Release);
        if state.remaining == 0 {
            shared.done.notify_all();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.work.notify_all();
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}
