//! The dispatcher: the policy that turns (activation, weight) into a kernel run.
//!
//! The key is (weight format, activation format). When the weight's activation hint
//! differs from the activation's format and a kernel exists for (weight, hint), the
//! activation is requantized into the caller's scope first (one `AdapterInserted` event
//! per target format);
//! the kernel's existence is checked before the adapter is paid for. Pairs no kernel
//! serves fall back to `matmul/reference`, which decodes both operands (a strict
//! dispatcher refuses them instead). Every run reports `KernelSelected`.
//!
//! The hint is I8_ABSMAX (one scale per token); with
//! [`DispatcherOptions::accurate_activations`], TQ1_0/TQ2_0 weights hint I8_BLOCK256 (one
//! scale per 256-element weight block, ggml's Q8_K granularity) and Q2_0 weights I8_BLOCK32
//! (one per 32 elements, Q8_0's) instead ([`Format::accurate_activation`]). BITNET_B1_58
//! and I2_S keep I8_ABSMAX.
//!
//! Work is split into (row block x token block) tasks run by an [`Executor`]: tern's own
//! pool, or an engine's (`DispatcherOptions::executor`), in which case tern starts no
//! threads. [`Dispatcher::matmul_many`] runs several weights against one activation in
//! one dispatch: the activation is requantized and prepared once.

mod executor;
// Public (hidden) for its tests in tests/concurrency.rs, which ThreadSanitizer runs.
#[doc(hidden)]
pub mod pool;

use crate::adapter::requantize_i8_on;
use crate::error::{Error, Result};
use crate::event::{emit, Event, EventKind, EventSink};
use crate::format::Format;
use crate::kernel::{self, reference::DECODING_MATMUL, registry, Kernel, MatRef, OutTile, PreparedAct};
use crate::scope::Scope;
use crate::tensor::Tensor;
use pool::{Pool, PoolError};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

pub(crate) use executor::run_each;
pub use executor::Executor;
pub use pool::MAX_THREADS;

/// Environment variable that forces a kernel by name, like [`DispatcherOptions::kernel`].
pub const KERNEL_ENV: &str = "TERN_KERNEL";

/// Below this many multiply-adds a matmul runs on the calling thread: waking workers
/// costs more than it saves.
const PARALLEL_MIN_MACS: usize = 1 << 18;

/// Whether this target can start threads. wasm32 cannot (no `std::thread::spawn` on
/// wasip1 or in a browser without shared memory), so there a dispatcher runs every matmul
/// on the calling thread and refuses `n_threads > 1` rather than quietly running one.
const HAS_THREADS: bool = cfg!(not(target_family = "wasm"));

/// Tasks per thread of a split matmul. More tasks than threads is what lets the others
/// take over the share of a thread the OS has descheduled; each task should still be long
/// against claiming it (an atomic add): at 4096x4096, m = 1, 2 threads, a task is 512
/// rows, about 20 us.
const TASKS_PER_THREAD: usize = 4;

/// How to make a [`Dispatcher`].
#[derive(Clone, Default)]
pub struct DispatcherOptions {
    /// Threads per matmul, counting the caller (0 and 1 both mean the caller alone); at
    /// most [`MAX_THREADS`]. With an `executor`, the threads it runs tasks on. On wasm32,
    /// which has no threads, more than 1 without an executor is refused
    /// (`Error::InvalidArgument`).
    pub n_threads: usize,
    /// Force this kernel for the pairs it serves (others are chosen as usual). `None`
    /// reads [`KERNEL_ENV`] unless `ignore_env` is set.
    pub kernel: Option<String>,
    /// Refuse pairs no dedicated kernel serves (`Error::StrictFallback`) instead of running
    /// `matmul/reference`.
    pub strict: bool,
    /// Do not read [`KERNEL_ENV`].
    pub ignore_env: bool,
    /// Run split matmuls on this executor (an engine's thread pool) instead of a pool of
    /// tern's own; no thread is started then.
    pub executor: Option<Arc<dyn Executor>>,
    /// Requantize F32 activations that meet TQ1_0/TQ2_0 weights to I8_BLOCK256 (one scale
    /// per 256-element block), and those that meet Q2_0 weights to I8_BLOCK32 (one per 32),
    /// instead of I8_ABSMAX (one per token): as accurate as ggml's Q8_K and Q8_0 activations.
    /// Other weights keep I8_ABSMAX.
    pub accurate_activations: bool,
}

impl std::fmt::Debug for DispatcherOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DispatcherOptions")
            .field("n_threads", &self.n_threads)
            .field("kernel", &self.kernel)
            .field("strict", &self.strict)
            .field("ignore_env", &self.ignore_env)
            .field("executor", &self.executor.is_some())
            .field("accurate_activations", &self.accurate_activations)
            .finish()
    }
}

/// The kernels this CPU can run, best first within each (weight, activation) pair.
pub fn available_kernels() -> impl Iterator<Item = &'static Kernel> {
    registry().iter().filter(|k| k.is_available())
}

/// Every kernel a dispatcher may run: the registry, then `matmul/reference`, the decoding
/// fallback for pairs no kernel serves (its formats are nominal: it serves any pair).
pub fn all_kernels() -> impl Iterator<Item = &'static Kernel> {
    registry().iter().chain(std::iter::once(&DECODING_MATMUL))
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
    strict: bool,
    accurate: bool,
    sink: Option<Arc<dyn EventSink>>,
    executor: Option<Arc<dyn Executor>>,
}

impl Dispatcher {
    /// Checks the forced kernel name (option or [`KERNEL_ENV`]) and starts the pool's
    /// workers. Errors: [`Error::UnknownKernel`], [`Error::TooManyThreads`],
    /// [`Error::ThreadSpawn`] (no worker is left running then).
    pub fn new(options: DispatcherOptions) -> Result<Dispatcher> {
        let env = || std::env::var(KERNEL_ENV).ok().filter(|s| !s.is_empty());
        let (forced, from) = match options.kernel {
            Some(name) => (Some(name), "the dispatcher option `kernel`"),
            None if options.ignore_env => (None, ""),
            None => (env(), "the environment variable TERN_KERNEL"),
        };
        if let Some(name) = forced.as_deref().filter(|&name| all_kernels().all(|k| k.name() != name)) {
            return Err(Error::UnknownKernel { name: name.to_owned(), from });
        }
        let executor = match (options.executor, options.n_threads) {
            (_, n) if n > MAX_THREADS => return Err(Error::TooManyThreads { requested: n, max: MAX_THREADS }),
            (Some(executor), _) => Some(executor),
            (None, 0 | 1) => None,
            (None, _) if !HAS_THREADS => {
                return Err(Error::InvalidArgument(
                    "n_threads > 1, but this build (wasm32) has no threads: pass 0 or 1, or an executor",
                ))
            }
            (None, n) => Some(Arc::new(Pool::new(n).map_err(|e| match e {
                PoolError::TooManyThreads(requested) => Error::TooManyThreads { requested, max: MAX_THREADS },
                PoolError::Spawn { index, error } => Error::ThreadSpawn { index, reason: error.to_string() },
            })?) as Arc<dyn Executor>),
        };
        Ok(Dispatcher { forced, strict: options.strict, accurate: options.accurate_activations, sink: None, executor })
    }

    /// Where events go (`None`: nowhere).
    pub fn set_sink(&mut self, sink: Option<Arc<dyn EventSink>>) {
        self.sink = sink;
    }

    /// Threads per matmul, counting the caller.
    pub fn threads(&self) -> usize {
        self.executor.as_ref().map_or(1, |e| e.threads())
    }

    /// Chooses what an `m`-token matmul of an `act`-format activation by a `weight`-format
    /// weight runs, without running anything.
    pub fn plan(&self, weight: Format, act: Format, m: usize) -> Result<Plan> {
        let forced = self.forced.as_deref();
        // Forced by name, the decoding fallback runs every pair as it comes: asked for, it is
        // not the silent fallback that `strict` refuses.
        if forced == Some(DECODING_MATMUL.name()) {
            return Ok(Plan { adapter: None, kernel: &DECODING_MATMUL });
        }
        let hint = match weight.accurate_activation() {
            Some(accurate) if self.accurate => Some(accurate),
            _ => weight.activation_hint(),
        };
        if let Some(hint) = hint.filter(|&h| h != act && adapter_exists(act, h)) {
            if let Some(kernel) = kernel::select(weight, hint, m, forced)? {
                return Ok(Plan { adapter: Some((act, hint)), kernel });
            }
        }
        match kernel::select(weight, act, m, forced)? {
            Some(kernel) => Ok(Plan { adapter: None, kernel }),
            None if self.strict => Err(Error::StrictFallback { weight, act }),
            None => Ok(Plan { adapter: None, kernel: &DECODING_MATMUL }),
        }
    }

    /// `out[m][n] = sum_k act[m][k] * weight[n][k]`: `act` is `m x k`, `weight` is `n x k`,
    /// `out` holds at least `m * n` floats. A scope is needed when an adapter runs; the
    /// requantized activation stays in it until the caller resets it.
    pub fn matmul(&self, act: &Tensor, weight: &Tensor, scope: Option<&mut Scope>, out: &mut [f32]) -> Result<()> {
        self.matmul_many(act, &[weight], scope, &mut [out])
    }

    /// [`Dispatcher::matmul`] for several weights against one activation (Q/K/V, gate/up):
    /// `outs[i]` receives `act x weights[i]`. Every operand is checked before anything
    /// runs; the activation is requantized once per adapter target (one `AdapterInserted`
    /// event each: under `accurate_activations`, I8_BLOCK256 for TQ weights, I8_BLOCK32 for Q2_0
    /// and I8_ABSMAX for the others) and prepared once per kernel, and all the weights run in one dispatch,
    /// then one `KernelSelected` event per weight, in order. Results are bit-identical to
    /// separate `matmul` calls.
    pub fn matmul_many(
        &self,
        act: &Tensor,
        weights: &[&Tensor],
        scope: Option<&mut Scope>,
        outs: &mut [&mut [f32]],
    ) -> Result<()> {
        if weights.len() != outs.len() {
            return Err(Error::LengthMismatch { what: "outs (one per weight)", want: weights.len(), got: outs.len() });
        }
        let m = act.rows();
        act.bytes()?;
        let mut plans = Vec::with_capacity(weights.len());
        for weight in weights {
            if act.cols() != weight.cols() {
                return Err(Error::ShapeMismatch("activation cols differ from weight cols"));
            }
            plans.push((MatRef::of(weight)?, self.plan(weight.format(), act.format(), m)?));
        }
        let tiles =
            outs.iter_mut().zip(weights).map(|(out, w)| OutTile::new(out, m, w.rows())).collect::<Result<Vec<_>>>()?;
        // One requantization per adapter target, in the order the weights need them.
        let mut targets: Vec<Format> = Vec::new();
        for (_, plan) in &plans {
            if let Some((_, to)) = plan.adapter.filter(|(_, to)| !targets.contains(to)) {
                targets.push(to);
            }
        }
        let mut requantized = Vec::with_capacity(targets.len());
        if !targets.is_empty() {
            let scope = scope.ok_or(Error::ScopeRequired)?;
            for &to in &targets {
                requantized.push(requantize_i8_on(self.executor.as_deref(), act, to, scope, self.sink.as_deref())?);
            }
        }
        let raw = MatRef::of(act)?;
        let adapted = requantized.iter().map(MatRef::of).collect::<Result<Vec<_>>>()?;
        // One preparation per (kernel, operand): usually one for the whole call.
        let mut preps: Vec<(&'static Kernel, Format, PreparedAct)> = Vec::new();
        for (_, plan) in &plans {
            let operand = match plan.adapter {
                Some((_, to)) => adapted.iter().find(|a| a.format() == to).expect("requantized above"),
                None => &raw,
            };
            if !preps.iter().any(|(k, f, _)| std::ptr::eq(*k, plan.kernel) && *f == operand.format()) {
                preps.push((plan.kernel, operand.format(), plan.kernel.prepare(operand)?));
            }
        }
        let jobs = plans.iter().zip(tiles).map(|((w, plan), out)| {
            let act_format = plan.adapter.map_or(act.format(), |(_, to)| to);
            let prep = preps.iter().find(|(k, f, _)| std::ptr::eq(*k, plan.kernel) && *f == act_format);
            Job { kernel: plan.kernel, w, act: &prep.expect("prepared above").2, act_format, out }
        });
        self.run(jobs.collect())
    }

    /// Runs every job, split into tasks over the executor when the work is large enough,
    /// then reports one `KernelSelected` per job. The time reported is the call's wall time
    /// for a single job; with several (one dispatch), each job's time summed over threads.
    fn run(&self, jobs: Vec<Job>) -> Result<()> {
        let start = Instant::now();
        let macs: usize = jobs.iter().map(|j| j.act.rows() * j.w.rows() * j.w.cols()).sum();
        let executor = self.executor.as_deref().filter(|_| macs >= PARALLEL_MIN_MACS);
        let mut tasks = Vec::new();
        let mut reports = Vec::with_capacity(jobs.len());
        for (index, job) in jobs.into_iter().enumerate() {
            let (m, n) = (job.act.rows(), job.w.rows());
            let views = match executor {
                Some(e) => {
                    let (rows, tokens) = task_blocks(job.kernel, m, n, e.threads());
                    job.out.split(rows, tokens)
                }
                None => vec![job.out],
            };
            tasks.extend(views.into_iter().map(|v| (index, v)));
            reports.push((job.kernel, job.w, job.act, job.act_format, AtomicU64::new(0)));
        }
        let failure = Mutex::new(None);
        let contract = run_each(executor, tasks, |(index, mut view)| {
            let (kernel, w, act, _, nanos) = &reports[index];
            let started = Instant::now();
            if let Err(e) = kernel.run_prepared(w, act, &mut view) {
                *failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
            }
            nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        });
        if let Some(e) = failure.into_inner().unwrap_or_else(PoisonError::into_inner) {
            return Err(e);
        }
        contract?;
        let single = reports.len() == 1;
        for (kernel, w, act, act_format, nanos) in &reports {
            emit(self.sink.as_deref(), || Event {
                kind: EventKind::KernelSelected,
                name: kernel.c_name(),
                from: w.format(),
                to: *act_format,
                rows: act.rows(),
                cols: w.rows(),
                bytes: w.bytes.len(),
                nanos: if single { start.elapsed().as_nanos() as u64 } else { nanos.load(Ordering::Relaxed) },
            });
        }
        Ok(())
    }
}

/// One weight's share of a dispatch: its kernel, operands and output.
struct Job<'a> {
    kernel: &'static Kernel,
    w: &'a MatRef<'a>,
    act: &'a PreparedAct<'a>,
    /// The activation's format (the fallback kernel's own formats are nominal).
    act_format: Format,
    out: OutTile<'a>,
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
    from == Format::F32 && to.is_i8_activation()
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
