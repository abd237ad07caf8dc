//! A persistent, work-sharing pool of worker threads. Threads are spawned once, when the
//! dispatcher is made, and wait between calls.
//!
//! One call ([`Pool::for_each`]) is a list of tasks. Every participant (the caller and each
//! worker) claims the next task from an atomic counter until none is left, so a worker that
//! the OS has descheduled delays nothing: the others, the caller among them, take the tasks
//! it has not started. The caller returns once every claimed task has finished; a worker
//! that wakes after that finds the counter exhausted and goes back to waiting.
//!
//! Wait policy: a worker polls for the next call for up to [`SPIN`], then parks on a
//! condvar; the caller polls for the last running task for up to [`SPIN`], then parks.
//! Matmuls of one forward pass follow each other closely, and parking and waking through
//! the kernel costs tens of microseconds, a large part of a split GEMV.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a thread polls before it parks (see the module docs).
const SPIN: Duration = Duration::from_micros(50);

/// The most threads a pool may have. Far above any core count tern runs on; a larger
/// request is a caller's bug (an unset or garbage count), refused rather than honoured.
pub const MAX_THREADS: usize = 1024;

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

/// A task function borrowed from the caller of [`Pool::for_each`], with its lifetime erased.
#[derive(Clone, Copy)]
struct TaskPtr(*const (dyn Fn(usize) + Sync + 'static));

// SAFETY: the pointee is `Sync`; it is called only for claimed tasks, and `for_each` does
// not return before every claimed task has finished (see `Job::work`).
unsafe impl Send for TaskPtr {}
// SAFETY: as above; sharing the pointer only shares calls of a `Sync` function.
unsafe impl Sync for TaskPtr {}

/// One call's tasks. Shared through an `Arc`, so a late worker can still read the counters
/// after the call returned; it never calls the task then.
struct Job {
    task: TaskPtr,
    n_tasks: usize,
    /// The next unclaimed task.
    next: AtomicUsize,
    /// Tasks that have finished (or panicked).
    finished: AtomicUsize,
    panicked: AtomicBool,
}

impl Job {
    /// Claims and runs tasks until none is left; true if this call finished the last one.
    fn work(&self) -> bool {
        let mut last = false;
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.n_tasks {
                return last;
            }
            // SAFETY: task `i` was claimed, so `for_each` is still waiting for it (it
            // returns only when `finished == n_tasks`), and the function is alive.
            let ok = catch_unwind(AssertUnwindSafe(|| unsafe { (*self.task.0)(i) })).is_ok();
            if !ok {
                self.panicked.store(true, Ordering::Relaxed);
            }
            last = self.finished.fetch_add(1, Ordering::AcqRel) + 1 == self.n_tasks;
        }
    }

    fn done(&self) -> bool {
        self.finished.load(Ordering::Acquire) == self.n_tasks
    }
}

struct State {
    job: Option<Arc<Job>>,
    epoch: u64,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Workers wait here for a new epoch.
    work: Condvar,
    /// The caller waits here for the last task.
    done: Condvar,
    /// A copy of `State::epoch`, so that spinning workers poll it without the lock.
    epoch: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes every worker into shutdown.
    fn shut_down(&self) {
        self.lock().shutdown = true;
        self.work.notify_all();
    }
}

/// Why a pool could not be made.
#[derive(Debug)]
pub enum PoolError {
    /// More than [`MAX_THREADS`] threads were asked for.
    TooManyThreads(usize),
    /// The OS refused to start worker `index`; the workers already started were stopped.
    Spawn { index: usize, error: std::io::Error },
}

pub struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Held for a whole call; a second caller that finds it taken runs inline instead of
    /// waiting.
    busy: Mutex<()>,
}

impl Pool {
    /// A pool where `threads` participants run at once: the caller plus `threads - 1`
    /// workers. If a worker cannot be started, the ones already running are stopped and
    /// joined before the error returns.
    pub fn new(threads: usize) -> Result<Pool, PoolError> {
        Pool::with_spawner(threads, |name, body| std::thread::Builder::new().name(name).spawn(body))
    }

    /// [`Pool::new`] with the thread-starting function given (tests make it fail).
    pub fn with_spawner(
        threads: usize,
        mut spawn: impl FnMut(String, Worker) -> std::io::Result<JoinHandle<()>>,
    ) -> Result<Pool, PoolError> {
        if threads > MAX_THREADS {
            return Err(PoolError::TooManyThreads(threads));
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State { job: None, epoch: 0, shutdown: false }),
            work: Condvar::new(),
            done: Condvar::new(),
            epoch: AtomicU64::new(0),
        });
        let mut pool = Pool { shared, workers: Vec::new(), busy: Mutex::new(()) };
        for index in 1..threads.max(1) {
            let shared = Arc::clone(&pool.shared);
            match spawn(format!("tern-{index}"), Box::new(move || worker(&shared))) {
                Ok(handle) => pool.workers.push(handle),
                // Dropping the pool stops and joins the workers started so far.
                Err(error) => return Err(PoolError::Spawn { index, error }),
            }
        }
        Ok(pool)
    }

    /// Participants that run at once.
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `task(i)` for every `i < n_tasks`, each exactly once, on the calling thread and
    /// the workers, and returns when all have finished. Returns false if any task panicked
    /// (the others still ran). If another thread is using the pool, every task runs on the
    /// calling thread.
    pub fn for_each(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) -> bool {
        // Every task runs even after one panicked, as on the pool.
        let inline = || {
            let mut ok = true;
            for i in 0..n_tasks {
                ok &= catch_unwind(AssertUnwindSafe(|| task(i))).is_ok();
            }
            ok
        };
        if self.workers.is_empty() || n_tasks <= 1 {
            return inline();
        }
        let _busy = match self.busy.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return inline(),
        };
        // SAFETY: erases the borrow's lifetime; the function is called only for claimed
        // tasks, and this function returns only after every claimed task has finished
        // (`job.done()` below), so every call happens while the borrow is alive.
        let task = TaskPtr(unsafe {
            std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), *const (dyn Fn(usize) + Sync + 'static)>(task)
        });
        let job = Arc::new(Job {
            task,
            n_tasks,
            next: AtomicUsize::new(0),
            finished: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
        });
        {
            let mut state = self.shared.lock();
            state.job = Some(Arc::clone(&job));
            state.epoch += 1;
            self.shared.epoch.store(state.epoch, Ordering::Release);
        }
        self.shared.work.notify_all();
        job.work();
        if !spin_until(|| job.done()) {
            let mut state = self.shared.lock();
            while !job.done() {
                state = self.shared.done.wait(state).unwrap_or_else(PoisonError::into_inner);
            }
        }
        self.shared.lock().job = None;
        !job.panicked.load(Ordering::Relaxed)
    }
}

/// A worker thread's body.
pub type Worker = Box<dyn FnOnce() + Send + 'static>;

fn worker(shared: &Shared) {
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
            // None when the call already finished without this worker.
            state.job.clone()
        };
        if let Some(job) = job {
            if job.work() {
                // Taking the lock orders this notification after the caller's check of
                // `done()` under the lock, so the wake-up cannot be lost.
                let _state = shared.lock();
                shared.done.notify_all();
            }
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.shut_down();
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}
