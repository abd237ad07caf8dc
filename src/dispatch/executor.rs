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
