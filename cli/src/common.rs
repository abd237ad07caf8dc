//! What the subcommands share: random data, CPU facts, kernel lists, timing, parity and
//! formatting.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};
use tern::dispatch::available_kernels;
use tern::kernel::{registry, Kernel};
use tern::{Dispatcher, DispatcherOptions, Event, EventKind, Format, Tensor};

/// The kernel every other kernel must match (docs/design.md §2: the definition).
pub const REFERENCE: &str = "bitnet_gemv/reference";
/// Parity tolerance, relative to max(1, |reference|).
pub const TOLERANCE: f32 = 1e-5;
pub const TERNARY: [Format; 3] = [Format::Tq1_0, Format::Tq2_0, Format::BitnetB158];

/// xorshift64: reproducible data without a dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// Roughly normal with standard deviation 1 (a sum of four uniforms), like trained
    /// weights before ternarization.
    pub fn normal(&mut self) -> f32 {
        (self.unit() + self.unit() + self.unit() + self.unit()) * 0.866
    }

    pub fn units(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.unit()).collect()
    }
}

/// The CPU features tern's kernels care about, and whether this CPU has them.
pub fn cpu_features() -> Vec<(&'static str, bool)> {
    #[cfg(target_arch = "x86_64")]
    {
        vec![
            ("avx2", std::arch::is_x86_feature_detected!("avx2")),
            ("fma", std::arch::is_x86_feature_detected!("fma")),
            ("avx512f", std::arch::is_x86_feature_detected!("avx512f")),
            ("avx512bw", std::arch::is_x86_feature_detected!("avx512bw")),
            ("avx512vnni", std::arch::is_x86_feature_detected!("avx512vnni")),
            ("avxvnni", std::arch::is_x86_feature_detected!("avxvnni")),
            ("amx-int8", tern::kernel::amx_status().is_some()),
        ]
    }
    #[cfg(target_arch = "aarch64")]
    {
        vec![
            ("neon", std::arch::is_aarch64_feature_detected!("neon")),
            ("dotprod", std::arch::is_aarch64_feature_detected!("dotprod")),
        ]
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        Vec::new()
    }
}

pub fn cpu_line() -> String {
    let features = cpu_features();
    let list = if features.is_empty() {
        "no SIMD kernels for this architecture".to_owned()
    } else {
        features
            .iter()
            .map(|(name, has)| format!("{name} {}", if *has { "yes" } else { "no" }))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let amx = match tern::kernel::amx_status() {
        Some(Err(why)) => format!("\n  AMX-INT8 is there, but bitnet_gemm/amx cannot run: {why}"),
        _ => String::new(),
    };
    format!("CPU ({}): {list}{amx}", std::env::consts::ARCH)
}

/// The ternary kernels this CPU runs for `weight`, best first (the reference is last).
pub fn gemv_kernels(weight: Format) -> Vec<&'static Kernel> {
    available_kernels().filter(|k| k.weight() == weight && k.act() == Format::I8Absmax).collect()
}

/// Kernel names, each once, in registry order, with the (weight x act) pairs they serve.
pub fn kernel_table(available: bool) -> Vec<(&'static str, String, &'static str)> {
    let mut rows: Vec<(&'static str, Vec<&'static Kernel>)> = Vec::new();
    for k in registry().iter().filter(|k| k.is_available() == available) {
        match rows.iter_mut().find(|(name, _)| *name == k.name()) {
            Some((_, ks)) => ks.push(k),
            None => rows.push((k.name(), vec![k])),
        }
    }
    rows.into_iter()
        .map(|(name, ks)| {
            // The weights per activation format, each activation format once, in order.
            let mut by_act: Vec<(Format, Vec<&str>)> = Vec::new();
            for k in &ks {
                match by_act.iter_mut().find(|(act, _)| *act == k.act()) {
                    Some((_, weights)) => weights.push(k.weight().name()),
                    None => by_act.push((k.act(), vec![k.weight().name()])),
                }
            }
            let pairs: Vec<_> =
                by_act.iter().map(|(act, weights)| format!("{} x {}", weights.join(", "), act.name())).collect();
            (name, pairs.join("; "), ks[0].requires())
        })
        .collect()
}

/// Checks a kernel name given on the command line; the error says what to do.
pub fn check_kernel_name(name: &str) -> Result<(), String> {
    let available: Vec<_> = kernel_table(true).into_iter().map(|(n, _, _)| n).collect();
    match registry().iter().find(|k| k.name() == name) {
        None => Err(format!(
            "unknown kernel {name:?}; kernels this CPU can run: {} (`tern demo` lists them all)",
            available.join(", ")
        )),
        Some(k) if !k.is_available() => Err(format!(
            "kernel {name} needs {}, which this CPU lacks; pick one of: {}",
            k.requires(),
            available.join(", ")
        )),
        Some(_) => Ok(()),
    }
}

/// Parses a format name (case-insensitive; `-` and `_` alike) among the ternary ones.
pub fn parse_ternary_format(s: &str) -> Result<Format, String> {
    let want = s.to_ascii_uppercase().replace('-', "_");
    let ternary = || Format::ALL.into_iter().filter(|f| f.is_ternary());
    ternary().find(|f| f.name() == want || (want == "BITNET" && *f == Format::BitnetB158)).ok_or_else(|| {
        let names: Vec<_> = ternary().map(|f| f.name()).collect();
        format!("unknown format {s:?}; use one of {} (or `all`)", names.join(", "))
    })
}

/// A single-threaded dispatcher forced to `kernel`.
pub fn dispatcher(kernel: &str, threads: usize) -> Result<Dispatcher, String> {
    Dispatcher::new(DispatcherOptions { n_threads: threads, kernel: Some(kernel.to_owned()), ..Default::default() })
        .map_err(|e| e.to_string())
}

/// Median, min and max of timed runs.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub median: Duration,
    pub min: Duration,
    pub max: Duration,
    pub runs: usize,
}

/// Runs `f` once to warm up and to size the count, then `runs` times (or as many as fit
/// `budget`, within `[min_runs, max_runs]`), and reports the median.
pub fn time_runs(runs: Option<usize>, budget: Duration, min_runs: usize, max_runs: usize, f: impl FnMut()) -> Timing {
    time_runs_on(Clock::Wall, runs, budget, min_runs, max_runs, f)
}

/// What a timing counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    Wall,
    /// CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`), so that a single-threaded
    /// run on a machine shared with other jobs reports about what an idle one would; wall
    /// time where there is no such clock.
    ThreadCpu,
    /// CPU time of every thread of the process (`CLOCK_PROCESS_CPUTIME_ID`): the work a
    /// multi-threaded call does, whether or not its threads ran at the same time.
    ProcessCpu,
}

/// The calling thread's (or with `process`, the process's) CPU time in ns, if the OS keeps it.
#[cfg(unix)]
fn cpu_ns(process: bool) -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    let clock = if process { libc::CLOCK_PROCESS_CPUTIME_ID } else { libc::CLOCK_THREAD_CPUTIME_ID };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// WASI has one thread: the process's CPU time (`clock_time_get` of `process_cputime_id`,
/// which node's WASI keeps), if the host keeps it.
#[cfg(target_os = "wasi")]
fn cpu_ns(_process: bool) -> Option<u64> {
    #[link(wasm_import_module = "wasi_snapshot_preview1")]
    unsafe extern "C" {
        fn clock_time_get(id: u32, precision: u64, time: *mut u64) -> u16;
    }
    const PROCESS_CPUTIME_ID: u32 = 2;
    let mut ns = 0u64;
    // SAFETY: WASI preview 1's `clock_time_get` writes one u64 at `time`, a valid, writable
    // local, and nothing else.
    let errno = unsafe { clock_time_get(PROCESS_CPUTIME_ID, 1, &mut ns) };
    (errno == 0).then_some(ns)
}

#[cfg(not(any(unix, target_os = "wasi")))]
fn cpu_ns(_process: bool) -> Option<u64> {
    None
}

fn thread_cpu_ns() -> Option<u64> {
    cpu_ns(false)
}

impl Clock {
    /// Nanoseconds since an arbitrary origin.
    fn now(self, epoch: Instant) -> u64 {
        match self {
            Clock::ThreadCpu => thread_cpu_ns().unwrap_or_else(|| epoch.elapsed().as_nanos() as u64),
            Clock::ProcessCpu => cpu_ns(true).unwrap_or_else(|| epoch.elapsed().as_nanos() as u64),
            Clock::Wall => epoch.elapsed().as_nanos() as u64,
        }
    }

    /// Times `f` on this clock, less the cost of reading the clock (`overhead`).
    fn time(self, epoch: Instant, overhead: u64, f: &mut impl FnMut()) -> Duration {
        let t = self.now(epoch);
        f();
        Duration::from_nanos((self.now(epoch) - t).saturating_sub(overhead))
    }

    /// Times one call of `f` on this clock.
    pub fn measure<T>(self, f: impl FnOnce() -> T) -> (T, Duration) {
        let epoch = Instant::now();
        let t = self.now(epoch);
        let out = f();
        (out, Duration::from_nanos(self.now(epoch) - t))
    }

    /// Whether this clock counts CPU time here.
    pub fn is_cpu_time(self) -> bool {
        self == Clock::ThreadCpu && thread_cpu_ns().is_some()
    }
}

/// [`time_runs`] on `clock`.
pub fn time_runs_on(
    clock: Clock,
    runs: Option<usize>,
    budget: Duration,
    min_runs: usize,
    max_runs: usize,
    mut f: impl FnMut(),
) -> Timing {
    let epoch = Instant::now();
    // The clock's own cost, as the least of a few back-to-back reads.
    let overhead = (0..5).map(|_| clock.time(epoch, 0, &mut || {}).as_nanos() as u64).min().unwrap_or(0);
    let first = clock.time(epoch, overhead, &mut f).max(Duration::from_nanos(1));
    let n = runs
        .unwrap_or_else(|| ((budget.as_secs_f64() / first.as_secs_f64()) as usize).clamp(min_runs, max_runs))
        .max(1);
    let mut times: Vec<Duration> = (0..n).map(|_| clock.time(epoch, overhead, &mut f)).collect();
    times.sort();
    Timing { median: times[n / 2], min: times[0], max: times[n - 1], runs: n }
}

/// `m x n` outputs of `act` (I8_ABSMAX) by `weight` through the forced-kernel dispatcher.
pub fn gemv(d: &Dispatcher, act: &Tensor, weight: &Tensor, out: &mut [f32]) -> Result<(), String> {
    d.matmul(act, weight, None, out).map_err(|e| e.to_string())
}

/// max |got - want| / max(1, |want|).
pub fn max_rel_err(got: &[f32], want: &[f32]) -> f32 {
    got.iter().zip(want).map(|(g, w)| (g - w).abs() / w.abs().max(1.0)).fold(0.0, f32::max)
}

pub fn fmt_duration(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// 1234567 -> "1,234,567".
pub fn group(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn event_line(e: &Event) -> String {
    let took = fmt_duration(Duration::from_nanos(e.nanos));
    let (kind, pair, shape, bytes_before, bytes_after) = match e.kind {
        EventKind::AdapterInserted => ("ADAPTER_INSERTED", "->", "", "price ", " bytes"),
        EventKind::KernelSelected => ("KERNEL_SELECTED", "x", "out ", "", " weight bytes"),
    };
    format!(
        "{kind:<17} {:<26} {} {pair} {}, {shape}{}x{}, {bytes_before}{}{bytes_after}, {took}",
        e.name(),
        e.from.name(),
        e.to.name(),
        e.rows,
        e.cols,
        group(e.bytes)
    )
}

/// Progress on stderr, shown only once a run has lasted more than a second: short runs
/// stay quiet. On a terminal the line is redrawn in place.
pub struct Progress {
    start: Instant,
    shown: bool,
    tty: bool,
}

impl Progress {
    pub fn new() -> Progress {
        Progress { start: Instant::now(), shown: false, tty: std::io::stderr().is_terminal() }
    }

    pub fn step(&mut self, done: usize, total: usize, what: &str) {
        if self.start.elapsed() < Duration::from_secs(1) {
            return;
        }
        self.shown = true;
        let mut err = std::io::stderr().lock();
        let line = format!("[{done}/{total}] {what} ({:.1} s)", self.start.elapsed().as_secs_f64());
        // A failed write to stderr only loses the progress line.
        let _ = if self.tty { write!(err, "\r\x1b[2K{line}") } else { writeln!(err, "{line}") };
        let _ = err.flush();
    }

    /// Clears the redrawn line, so that the report follows on a clean terminal.
    pub fn finish(&mut self) {
        if self.shown && self.tty {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}

/// `weight` with every TQ block's f16 scale replaced by the first block's (other formats
/// as they are).
pub fn with_uniform_scales(weight: Tensor<'static>) -> Result<Tensor<'static>, String> {
    let block = match weight.format() {
        Format::Tq1_0 => 54,
        Format::Tq2_0 => 66,
        _ => return Ok(weight),
    };
    let (format, n, k) = (weight.format(), weight.rows(), weight.cols());
    let mut bytes = weight.bytes().map_err(|e| e.to_string())?.to_vec();
    let first = [bytes[block - 2], bytes[block - 1]];
    for b in bytes.chunks_exact_mut(block) {
        b[block - 2..].copy_from_slice(&first);
    }
    Tensor::from_vec(format, bytes, n, k).map_err(|e| e.to_string())
}
