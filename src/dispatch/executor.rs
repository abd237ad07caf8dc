//! Who runs the tasks of a split matmul: tern's own [`Pool`](super::pool::Pool) or an
//! engine's thread pool (the C API's `parallel_for`), behind one shape.

/// Runs `task(i)` for every `i < n_tasks`, on any threads, and returns when all have
/// finished. The dispatcher does not trust an outside executor blindly: it checks after
/// `for_each` returns that every task ran exactly once (see `Dispatcher`), and refuses the
/// result otherwise.
pub trait Executor: Send + Sync {
    /// Threads that run tasks at once; the dispatcher cuts about four tasks per thread.
    fn threads(&self) -> usize;

    /// Runs the tasks; false if a task panicked (the others still ran).
    fn for_each(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) -> bool;
}

impl Executor for super::pool::Pool {
    fn threads(&self) -> usize {
        super::pool::Pool::threads(self)
    }

    fn for_each(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) -> bool {
        super::pool::Pool::for_each(self, n_tasks, task)
    }
}

/// Runs `f` on every item, each exactly once: split over `executor` when there is one, in
/// order on this thread otherwise. An outside executor is checked afterwards: a task it
/// skipped, ran twice or ran with a bad index makes the call `ExecutorContract` (items it
/// did run have had their effect).
///
/// # Panics
/// If `f` panicked on an executor's thread (after every other task ran).
pub(crate) fn run_each<T: Send>(
    executor: Option<&dyn Executor>,
    items: Vec<T>,
    f: impl Fn(T) + Sync,
) -> crate::error::Result<()> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Mutex, PoisonError};
    let tasks: Vec<Mutex<Option<T>>> = items.into_iter().map(|item| Mutex::new(Some(item))).collect();
    let broken = AtomicBool::new(false);
    let task = |i: usize| {
        let Some(slot) = tasks.get(i) else { return broken.store(true, Ordering::Relaxed) };
        let Some(item) = slot.lock().unwrap_or_else(PoisonError::into_inner).take() else {
            return broken.store(true, Ordering::Relaxed);
        };
        f(item)
    };
    match executor {
        Some(e) => assert!(e.for_each(tasks.len(), &task), "a task panicked on a pool thread"),
        None => (0..tasks.len()).for_each(task),
    }
    let missed = tasks.iter().filter(|t| t.lock().unwrap_or_else(PoisonError::into_inner).is_some()).count();
    if missed > 0 || broken.into_inner() {
        return Err(crate::error::Error::ExecutorContract { tasks: tasks.len(), missed });
    }
    Ok(())
}
