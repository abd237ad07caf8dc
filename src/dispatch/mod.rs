//! The dispatcher: the policy that turns (activation, weight) into a kernel run.
//!
//! The key is (weight format, activation format). When the weight's activation hint
//! differs from the activation's format and a kernel exists for (weight, hint), the
//! activation is requantized into the caller's scope first (one `AdapterInserted` event);
//! the kernel's existence is checked before the adapter is paid for. Pairs no kernel
//! serves fall back to `matmul/reference`, which decodes both operands. Every run reports
//! `KernelSelected`.

mod pool;

use crate::adapter::requantize_i8_absmax;
use crate::error::{Error, Result};
use crate::event::{emit, Event, EventKind, EventSink};
use crate::format::Format;
use crate::kernel::{self, reference::DECODING_MATMUL, registry, Kernel, MatRef, OutTile};
use crate::scope::Scope;
use crate::tensor::Tensor;
use pool::{Pool, PoolError};
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub use pool::MAX_THREADS;

/// Environment variable that forces a kernel by name, like [`DispatcherOptions::kernel`].
pub const KERNEL_ENV: &str = "TERN_KERNEL";

/// Below this many multiply-adds a matmul runs on the calling thread: waking workers
/// costs more than it saves.
const PARALLEL_MIN_MACS: usize = 1 << 18;

/// Tasks per thread of a split matmul. More tasks than threads is what lets the others
/// take over the share of a thread the OS has descheduled; each task should still be long
/// against claiming it (an atomic add): at 4096x4096, m = 1, 2 threads, a task is 512
/// rows, about 20 us.
const TASKS_PER_THREAD: usize = 4;

/// How to make a [`Dispatcher`].
#[derive(Debug, Clone, Default)]
pub struct DispatcherOptions {
    /// Threads per matmul, counting the caller (0 and 1 both mean the caller alone); at
    /// most [`MAX_THREADS`].
    pub n_threads: usize,
    /// Force this kernel for the pairs it serves (others are chosen as usual). `None`
    /// reads [`KERNEL_ENV`].
    pub kernel: Option<String>,
}

/// The kernels this CPU can run, best first within each (weight, activation) pair.
pub fn available_kernels() -> impl Iterator<Item = &'static Kernel> {
    registry().iter().filter(|k| k.is_available())
}

/// What a matmul will do: an optional adapter into `act`, then `kernel`.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// (from, to) formats of the activation adapter, if one runs first.
    pub adapter: Option<(Format, Format)>,
    /// The kernel that runs.
    pub kernel: &'static Kernel,
}

/// Turns (activation, weight) into adapter and kernel runs and reports them; optionally
/// splits each run over a persistent pool of threads. Share it freely: `matmul` takes
/// `&self`, and concurrent callers each run on their own thread (a pool busy with one
/// caller's call runs another caller's call inline).
pub struct Dispatcher {
    forced: Option<String>,
    sink: Option<Arc<dyn EventSink>>,
    pool: Option<Pool>,
}

impl Dispatcher {
    /// Checks the forced kernel name (option or [`KERNEL_ENV`]) and starts the pool's
    /// workers. Errors: [`Error::UnknownKernel`], [`Error::TooManyThreads`],
    /// [`Error::ThreadSpawn`] (no worker is left running then).
    pub fn new(options: DispatcherOptions) -> Result<Dispatcher> {
        let forced = options.kernel.or_else(|| std::env::var(KERNEL_ENV).ok().filter(|s| !s.is_empty()));
        if let Some(name) = forced.as_deref().filter(|name| !kernel::exists(name)) {
            return Err(Error::UnknownKernel(name.to_owned()));
        }
        let pool = match options.n_threads {
            0 | 1 => None,
            n => Some(Pool::new(n).map_err(|e| match e {
                PoolError::TooManyThreads(requested) => Error::TooManyThreads { requested, max: MAX_THREADS },
                PoolError::Spawn { index, error } => Error::ThreadSpawn { index, reason: error.to_string() },
            })?),
        };
        Ok(Dispatcher { forced, sink: None, pool })
    }

    /// Where events go (`None`: nowhere).
    pub fn set_sink(&mut self, sink: Option<Arc<dyn EventSink>>) {
        self.sink = sink;
    }

    /// Threads per matmul, counting the caller.
    pub fn threads(&self) -> usize {
        self.pool.as_ref().map_or(1, Pool::threads)
    }

    /// Chooses what an `m`-token matmul of an `act`-format activation by a `weight`-format
    /// weight runs, without running anything.
    pub fn plan(&self, weight: Format, act: Format, m: usize) -> Result<Plan> {
        let forced = self.forced.as_deref();
        if let Some(hint) = weight.activation_hint().filter(|&h| h != act && adapter_exists(act, h)) {
            if let Some(kernel) = kernel::select(weight, hint, m, forced)? {
                return Ok(Plan { adapter: Some((act, hint)), kernel });
            }
        }
        let kernel = kernel::select(weight, act, m, forced)?.unwrap_or(&DECODING_MATMUL);
        Ok(Plan { adapter: None, kernel })
    }

    /// `out[m][n] = sum_k act[m][k] * weight[n][k]`: `act` is `m x k`, `weight` is `n x k`,
    /// `out` holds at least `m * n` floats. A scope is needed when an adapter runs; the
    /// requantized activation stays in it until the caller resets it.
    pub fn matmul(&self, act: &Tensor, weight: &Tensor, scope: Option<&mut Scope>, out: &mut [f32]) -> Result<()> {
        let (m, n, k) = (act.rows(), weight.rows(), weight.cols());
        if act.cols() != k {
            return Err(Error::ShapeMismatch("activation cols differ from weight cols"));
        }
        let w = MatRef::of(weight)?;
        act.bytes()?;
        let out = OutTile::new(out, m, n)?;
        let plan = self.plan(weight.format(), act.format(), m)?;
        let sink = self.sink.as_deref();
        let requantized;
        let act = match plan.adapter {
            Some(_) => {
                let scope = scope.ok_or(Error::ScopeRequired)?;
                requantized = requantize_i8_absmax(act, scope, sink)?;
                &requantized
            }
            None => act,
        };
        self.run(plan.kernel, &w, &MatRef::of(act)?, out)
    }

    /// Runs `kernel` on the whole of `out`, split into tasks over the pool when the work
    /// is large enough, and reports it.
    fn run(&self, kernel: &'static Kernel, w: &MatRef, a: &MatRef, mut out: OutTile) -> Result<()> {
        let start = Instant::now();
        let (m, n) = (a.rows(), w.rows());
        let prepared = kernel.prepare(a)?;
        match &self.pool {
            Some(pool) if m * n * w.cols() >= PARALLEL_MIN_MACS => {
                let (rows, tokens) = task_blocks(kernel, m, n, pool.threads());
                let views: Vec<_> = out.split(rows, tokens).into_iter().map(|v| Mutex::new(Some(v))).collect();
                let failure = Mutex::new(None);
                let ok = pool.for_each(views.len(), &|i| {
                    let view = views[i].lock().unwrap_or_else(|e| e.into_inner()).take();
                    let mut view = view.expect("each task runs once");
                    if let Err(e) = kernel.run_prepared(w, &prepared, &mut view) {
                        *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                    }
                });
                assert!(ok, "a kernel panicked on a pool thread");
                if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
                    return Err(e);
                }
            }
            _ => kernel.run_prepared(w, &prepared, &mut out)?,
        }
        emit(self.sink.as_deref(), || Event {
            kind: EventKind::KernelSelected,
            name: kernel.c_name(),
            from: w.format(),
            to: a.format(),
            rows: m,
            cols: n,
            bytes: w.bytes.len(),
            nanos: start.elapsed().as_nanos() as u64,
        });
        Ok(())
    }
}

/// The (rows, tokens) of each task when an `m x n` output is split over `threads`: about
/// [`TASKS_PER_THREAD`] tasks per thread, in row blocks first (every token of a row block
/// reuses its weights), then in token blocks when there are too few rows; both multiples
/// of the kernel's geometry.
fn task_blocks(kernel: &Kernel, m: usize, n: usize, threads: usize) -> (usize, usize) {
    let target = threads * TASKS_PER_THREAD;
    let whole = |len: usize, parts: usize, align: usize| {
        len.div_ceil(parts.max(1)).checked_next_multiple_of(align.max(1)).unwrap_or(len).clamp(1, len.max(1))
    };
    let rows = whole(n, target, kernel.geometry.rows);
    let row_tasks = n.div_ceil(rows);
    let tokens =
        if row_tasks >= target { m.max(1) } else { whole(m, target.div_ceil(row_tasks), kernel.geometry.tokens) };
    (rows, tokens)
}

fn adapter_exists(from: Format, to: Format) -> bool {
    from == Format::F32 && to == Format::I8Absmax
}

/// Runs a ternary GEMV on output rows `rows` with the named kernel (`None`: the best this
/// CPU has for the call's token count), for engines that split work over their own
/// threads. `act` must already be I8_ABSMAX; `out` is the whole `m x n` output, of which
/// only the columns in `rows` are written. Returns the kernel that ran.
pub fn bitnet_gemv(
    kernel: Option<&str>,
    act: &Tensor,
    weight: &Tensor,
    rows: Range<usize>,
    out: &mut [f32],
) -> Result<&'static Kernel> {
    bitnet_gemv_with(kernel, act, weight, |m, n| OutTile::new(out, m, n)?.restrict(rows, 0..m))
}

/// [`bitnet_gemv`] with the output view made by `out(m, n)` once every operand has been
/// checked, for callers whose output is not a Rust slice (the C ABI, where threads share
/// one buffer).
pub fn bitnet_gemv_with<'o>(
    kernel: Option<&str>,
    act: &Tensor,
    weight: &Tensor,
    out: impl FnOnce(usize, usize) -> Result<OutTile<'o>>,
) -> Result<&'static Kernel> {
    if !weight.format().is_ternary() || act.format() != Format::I8Absmax {
        return Err(Error::Unsupported { weight: weight.format(), act: act.format() });
    }
    let (w, a) = (MatRef::of(weight)?, MatRef::of(act)?);
    let chosen = kernel::select(w.format(), Format::I8Absmax, a.rows(), kernel)?
        .ok_or(Error::Unsupported { weight: w.format(), act: Format::I8Absmax })?;
    // A name this call asked for must be the kernel that runs, not merely exist.
    if let Some(name) = kernel.filter(|&name| name != chosen.name()) {
        return Err(Error::KernelMismatch { name: name.to_owned(), weight: w.format() });
    }
    chosen.run(&w, &a, &mut out(a.rows(), w.rows())?)?;
    Ok(chosen)
}
