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
use crate::kernel::{reference::DECODING_MATMUL, registry, Kernel, MatRef, OutRows};
use crate::scope::Scope;
use crate::tensor::Tensor;
use pool::Pool;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// Environment variable that forces a kernel by name, like [`DispatcherOptions::kernel`].
pub const KERNEL_ENV: &str = "TERN_KERNEL";

/// Below this many weight elements a matmul runs on the calling thread: waking workers
/// costs more than it saves.
const PARALLEL_MIN_ELEMS: usize = 1 << 18;

/// Output rows per thread are a multiple of this, so SIMD row tiles stay whole.
const ROW_ALIGN: usize = 16;

#[derive(Debug, Clone, Default)]
pub struct DispatcherOptions {
    /// Threads per matmul, counting the caller (0 and 1 both mean the caller alone).
    pub n_threads: usize,
    /// Force this kernel for the pairs it serves (others are chosen as usual). `None`
    /// reads [`KERNEL_ENV`].
    pub kernel: Option<String>,
}

/// The kernels this CPU can run, best first within each (weight, activation) pair.
pub fn available_kernels() -> impl Iterator<Item = &'static Kernel> {
    registry().iter().filter(|k| (k.available)())
}

/// What a matmul will do: an optional adapter into `act`, then `kernel`.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub adapter: Option<(Format, Format)>,
    pub kernel: &'static Kernel,
}

pub struct Dispatcher {
    forced: Option<&'static str>,
    sink: Option<Arc<dyn EventSink>>,
    pool: Option<Pool>,
}

impl Dispatcher {
    pub fn new(options: DispatcherOptions) -> Result<Dispatcher> {
        let env = || std::env::var(KERNEL_ENV).ok().filter(|s| !s.is_empty());
        let name = match options.kernel {
            Some(name) => Some((name, "the dispatcher option `kernel`")),
            None => env().map(|name| (name, "the environment variable TERN_KERNEL")),
        };
        let forced = name
            .map(|(name, from)| {
                let known = registry().iter().find(|k| k.name() == name).map(|k| k.name());
                known.ok_or(Error::UnknownKernel { name, from })
            })
            .transpose()?;
        let pool = match options.n_threads {
            0 | 1 => None,
            n => Some(Pool::new(n).map_err(|_| Error::AllocationFailed(0))?),
        };
        Ok(Dispatcher { forced, sink: None, pool })
    }

    pub fn set_sink(&mut self, sink: Option<Arc<dyn EventSink>>) {
        self.sink = sink;
    }

    pub fn threads(&self) -> usize {
        self.pool.as_ref().map_or(1, Pool::threads)
    }

    /// Chooses what a matmul of an `act`-format activation by a `weight`-format weight
    /// runs, without running anything.
    pub fn plan(&self, weight: Format, act: Format) -> Result<Plan> {
        if let Some(hint) = weight.activation_hint().filter(|&h| h != act && adapter_exists(act, h)) {
            if let Some(kernel) = self.best(weight, hint)? {
                return Ok(Plan { adapter: Some((act, hint)), kernel });
            }
        }
        let kernel = self.best(weight, act)?.unwrap_or(&DECODING_MATMUL);
        Ok(Plan { adapter: None, kernel })
    }

    /// The forced kernel if it serves the pair, else the first available one.
    fn best(&self, weight: Format, act: Format) -> Result<Option<&'static Kernel>> {
        let mut serving = registry().iter().filter(|k| k.weight == weight && k.act == act);
        if let Some(name) = self.forced {
            if let Some(kernel) = serving.clone().find(|k| k.name() == name) {
                return if (kernel.available)() {
                    Ok(Some(kernel))
                } else {
                    Err(Error::KernelUnavailable(kernel.name()))
                };
            }
        }
        Ok(serving.find(|k| (k.available)()))
    }

    /// `out[m][n] = sum_k act[m][k] * weight[n][k]`: `act` is `m x k`, `weight` is `n x k`,
    /// `out` holds at least `m * n` floats. A scope is needed when an adapter runs; the
    /// requantized activation stays in it until the caller resets it.
    pub fn matmul(&self, act: &Tensor, weight: &Tensor, scope: Option<&mut Scope>, out: &mut [f32]) -> Result<()> {
        let (m, n, k) = (act.rows(), weight.rows(), weight.cols());
        if act.cols() != k {
            return Err(Error::ShapeMismatch("activation cols differ from weight cols"));
        }
        let w = MatRef::new(weight.format(), n, k, weight.bytes()?)?;
        act.bytes()?;
        let out = OutRows::new(out, m, n, 0..n)?;
        let plan = self.plan(weight.format(), act.format())?;
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
        let a = MatRef::new(act.format(), m, k, act.bytes()?)?;
        self.run(plan.kernel, &w, &a, out);
        Ok(())
    }

    fn run(&self, kernel: &'static Kernel, w: &MatRef, a: &MatRef, out: OutRows) {
        let start = Instant::now();
        let (m, n) = (a.rows, w.rows);
        match &self.pool {
            Some(pool) if w.rows * w.cols >= PARALLEL_MIN_ELEMS => {
                let parts: Vec<_> =
                    out.split(pool.threads(), ROW_ALIGN).into_iter().map(std::sync::Mutex::new).collect();
                let ok = pool.run(&|part| {
                    if let Some(view) = parts.get(part) {
                        (kernel.run)(w, a, &mut view.lock().unwrap_or_else(|e| e.into_inner()));
                    }
                });
                assert!(ok, "a kernel panicked on a worker thread");
            }
            _ => {
                let mut out = out;
                (kernel.run)(w, a, &mut out);
            }
        }
        emit(self.sink.as_deref(), || Event {
            kind: EventKind::KernelSelected,
            name: kernel.name,
            from: w.format,
            to: a.format,
            rows: m,
            cols: n,
            bytes: w.bytes.len(),
            nanos: start.elapsed().as_nanos() as u64,
        });
    }
}

fn adapter_exists(from: Format, to: Format) -> bool {
    from == Format::F32 && to == Format::I8Absmax
}

/// Runs a ternary GEMV on output rows `rows` with the named kernel (`None`: the best this
/// CPU has), for engines that split work over their own threads. `act` must already be
/// I8_ABSMAX; `out` is the whole `m x n` output, of which only the columns in `rows` are
/// written. Returns the kernel that ran.
pub fn bitnet_gemv(
    kernel: Option<&str>,
    act: &Tensor,
    weight: &Tensor,
    rows: Range<usize>,
    out: &mut [f32],
) -> Result<&'static Kernel> {
    bitnet_gemv_with(kernel, act, weight, |m, n| OutRows::new(out, m, n, rows))
}

/// [`bitnet_gemv`] with the output view made by `out(m, n)` once every operand has been
/// checked, for callers whose output is not a Rust slice (the C ABI, where threads share
/// one buffer).
pub fn bitnet_gemv_with<'o>(
    kernel: Option<&str>,
    act: &Tensor,
    weight: &Tensor,
    out: impl FnOnce(usize, usize) -> Result<OutRows<'o>>,
) -> Result<&'static Kernel> {
    let (w, a) = gemv_operands(act, weight)?;
    let kernel = gemv_kernel(kernel, w.format)?;
    let mut out = out(a.rows, w.rows)?;
    (kernel.run)(&w, &a, &mut out);
    Ok(kernel)
}

/// Checks the operands of [`bitnet_gemv`] (ternary weight, I8_ABSMAX activation, equal k).
pub fn gemv_operands<'a>(act: &'a Tensor, weight: &'a Tensor) -> Result<(MatRef<'a>, MatRef<'a>)> {
    if !weight.format().is_ternary() || act.format() != Format::I8Absmax {
        return Err(Error::Unsupported { weight: weight.format(), act: act.format() });
    }
    if act.cols() != weight.cols() {
        return Err(Error::ShapeMismatch("activation cols differ from weight cols"));
    }
    let w = MatRef::new(weight.format(), weight.rows(), weight.cols(), weight.bytes()?)?;
    let a = MatRef::new(act.format(), act.rows(), act.cols(), act.bytes()?)?;
    Ok((w, a))
}

/// The named ternary kernel for `weight` (or the best available one).
pub fn gemv_kernel(name: Option<&str>, weight: Format) -> Result<&'static Kernel> {
    let mut serving = registry().iter().filter(|k| k.weight == weight && k.act == Format::I8Absmax);
    match name {
        None => serving.find(|k| (k.available)()).ok_or(Error::Unsupported { weight, act: Format::I8Absmax }),
        Some(name) => {
            let kernel = serving
                .find(|k| k.name() == name)
                .ok_or_else(|| Error::UnknownKernel { name: name.to_owned(), from: "the argument `kernel`" })?;
            if (kernel.available)() {
                Ok(kernel)
            } else {
                Err(Error::KernelUnavailable(kernel.name()))
            }
        }
    }
}
