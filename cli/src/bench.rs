//! `tern bench`: time per GEMV/GEMM of one weight shape, per format and kernel, as a table
//! or one JSON document.

use crate::common::*;
use crate::model;
use crate::peak::{self, Peak};
use serde_json::json;
use std::time::Duration;
use tern::adapter::{i8_absmax_price, requantize_i8_absmax_into};
use tern::{Format, Tensor};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Weight format: any ternary one (TQ1_0, TQ2_0, BITNET_B1_58, Q2_0, I2_S, I2_S_64,
    /// I2_S_R4), or all (TQ1_0, TQ2_0 and BITNET_B1_58)
    #[arg(long, default_value = "all", value_parser = parse_format_choice)]
    format: FormatChoice,
    /// Weight shape as NxK (n output rows, k inputs), e.g. 2560x6912
    #[arg(long, default_value = "2560x6912", value_parser = parse_shape)]
    shape: Shape,
    /// Activation rows (tokens) per call: 1 is a GEMV, more is a GEMM [default: 1; with
    /// --model, the prompt length of the pp test: 128]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    tokens: Option<u32>,
    /// Threads per call (the dispatcher's pool, counting the caller)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    threads: u32,
    /// Only these kernels, comma-separated (e.g. bitnet_gemm/amx,bitnet_gemm/avx512vnni);
    /// default: every kernel this CPU runs. With --model: the one kernel to force
    #[arg(long)]
    kernel: Option<String>,
    /// Timed runs per kernel; default: as many as fit half a second (at least 5)
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    runs: Option<u32>,
    /// Also measure this core's int8 dot-product peaks (vpdpbusd, vpmaddubsw) in this
    /// process and print every kernel's rate as a share of its instruction's peak
    #[arg(long)]
    peak: bool,
    /// Print one JSON document instead of a table
    #[arg(long)]
    json: bool,
    /// Instead of one shape, every matmul of this model's layer stack (tern's llama-bench):
    /// token generation (m = 1) and prompt processing (m = --tokens) in tokens/s, the
    /// weights' GB/s and a read-bandwidth probe with the same threads. Known: bitnet-b1.58-2b
    /// (weights BITNET_B1_58 unless --format names one), ternary-bonsai-8b (Q2_0 unless
    /// --format names one)
    #[arg(long, value_parser = model::parse_model)]
    model: Option<&'static model::Model>,
    /// TQ1_0/TQ2_0: give every block the first block's scale, as a BitNet checkpoint
    /// converted to GGUF has (the kernels' per-tensor-scale path); also with --model
    #[arg(long)]
    uniform_scales: bool,
    /// TQ1_0/TQ2_0/Q2_0: activations with a scale per block (I8_BLOCK256, I8_BLOCK32), what a
    /// dispatcher with accurate activations gives those formats (the ggml backend's choice)
    #[arg(long)]
    accurate: bool,
    /// With --model: Q/K/V and gate/up as one matmul_many each (one dispatch per shared
    /// activation, as the ggml backend calls them); default: one matmul per weight
    #[arg(long)]
    many: bool,
    /// With --model: layers of the stack to run (default: all of the model's)
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    layers: Option<u32>,
}

impl Args {
    /// Tokens per call of the one-shape benchmark.
    fn tokens(&self) -> usize {
        self.tokens.unwrap_or(1) as usize
    }
}

#[derive(Debug, Clone, Copy)]
pub enum FormatChoice {
    All,
    One(Format),
}

fn parse_format_choice(s: &str) -> Result<FormatChoice, String> {
    if s.eq_ignore_ascii_case("all") {
        Ok(FormatChoice::All)
    } else {
        parse_ternary_format(s).map(FormatChoice::One)
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Shape {
    n: usize,
    k: usize,
}

fn parse_shape(s: &str) -> Result<Shape, String> {
    let bad = || format!("bad shape {s:?}: write NxK with positive integers (n rows, k cols), e.g. 2560x6912");
    let (n, k) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let n: usize = n.trim().parse().map_err(|_| bad())?;
    let k: usize = k.trim().parse().map_err(|_| bad())?;
    if n == 0 || k == 0 {
        return Err(bad());
    }
    Ok(Shape { n, k })
}

/// The largest operand `bench` makes (its f32 staging alone is 1 GiB).
const MAX_ELEMS: usize = 1 << 28;

struct Row {
    format: Format,
    kernel: &'static str,
    weight_bytes: usize,
    timing: Timing,
    /// With several threads: the CPU time of all of them per call (median).
    cpu: Option<Duration>,
    max_rel_err: f32,
}

pub fn run(args: Args) -> Result<(), String> {
    if let Some(model) = args.model {
        let format = match args.format {
            FormatChoice::All => model.format,
            FormatChoice::One(f) => f,
        };
        let options = model::Options {
            format,
            tokens: args.tokens.unwrap_or(128) as usize,
            threads: args.threads as usize,
            layers: args.layers.map_or(model.layers, |l| l as usize),
            kernel: args.kernel.clone(),
            rounds: args.runs.unwrap_or(5) as usize,
            json: args.json,
            uniform_scales: args.uniform_scales,
            many: args.many,
        };
        return model::run(model, &options);
    }
    if args.layers.is_some() || args.many {
        return Err(format!("--{} needs --model", if args.many { "many" } else { "layers" }));
    }
    let Shape { n, k } = args.shape;
    let (m, threads) = (args.tokens(), args.threads as usize);
    let wanted: Option<Vec<&str>> = args.kernel.as_deref().map(|list| list.split(',').map(str::trim).collect());
    for name in wanted.iter().flatten() {
        check_kernel_name(name)?;
    }
    for (what, rows, cols) in [("weight", n, k), ("activation", m, k), ("output", m, n)] {
        if rows.checked_mul(cols).is_none_or(|elems| elems > MAX_ELEMS) {
            return Err(format!(
                "the {what} {rows}x{cols} is too large to benchmark here (at most {} elements); pick a smaller --shape or --tokens",
                group(MAX_ELEMS)
            ));
        }
    }
    let formats: Vec<Format> = match args.format {
        FormatChoice::All => TERNARY.to_vec(),
        FormatChoice::One(f) => vec![f],
    };
    for &f in &formats {
        f.check_shape(n, k).map_err(|e| {
            format!("{e}; pick K as a multiple of 256 for TQ1_0/TQ2_0 (4 for BITNET_B1_58), e.g. --shape 2560x6912")
        })?;
    }
    // Only the kernels asked for, among those serving each format.
    let plan: Vec<(Format, Vec<&'static str>)> = formats
        .iter()
        .map(|&f| {
            // The reference (last in the registry) first, as the baseline of the table.
            let names = gemv_kernels(f)
                .into_iter()
                .rev()
                .map(|k| k.name())
                .filter(|name| wanted.as_ref().is_none_or(|want| want.contains(name)));
            (f, names.collect::<Vec<_>>())
        })
        .filter(|(_, names)| !names.is_empty())
        .collect();
    if plan.is_empty() {
        return Err(format!(
            "kernel {} serves none of the formats asked for; drop --format or pick another --kernel",
            args.kernel.as_deref().unwrap_or("?")
        ));
    }

    let mut rng = Rng::new(42);
    let act_f32 = rng.units(m * k);
    let act = Tensor::encode(Format::I8Absmax, &act_f32, m, k).map_err(|e| e.to_string())?;
    let mut progress = Progress::new();
    let total: usize = plan.iter().map(|(_, names)| names.len()).sum();
    let runs = args.runs.map(|r| r as usize);
    let budget = Duration::from_millis(500);
    // One thread: its CPU time, which other jobs on the machine barely disturb; several:
    // wall time, which is what they share.
    let clock = if threads == 1 { Clock::ThreadCpu } else { Clock::Wall };
    let mut rows = Vec::new();
    let mut done = 0;
    // The peaks move with the machine's clock from one second to the next: measured before
    // every kernel and once after the last, the best of each is what the table divides by.
    let mut peaks = Vec::new();
    for (format, names) in &plan {
        let w: Vec<f32> = (0..n * k).map(|_| rng.normal()).collect();
        let mut weight = Tensor::encode(*format, &w, n, k).map_err(|e| e.to_string())?;
        drop(w);
        if args.uniform_scales {
            weight = with_uniform_scales(weight)?;
        }
        let accurate = format.accurate_activation().filter(|_| args.accurate);
        let act = match accurate {
            Some(f) => &Tensor::encode(f, &act_f32, m, k).map_err(|e| e.to_string())?,
            None => &act,
        };
        let mut want = vec![0f32; m * n];
        gemv(&dispatcher(REFERENCE, 1)?, act, &weight, &mut want)?;
        for name in names {
            done += 1;
            progress.step(done, total, &format!("{} {name}", format.name()));
            if args.peak {
                peaks = peak::best_of(peaks, peak::measure(threads));
            }
            let d = dispatcher(name, threads)?;
            let mut out = vec![0f32; m * n];
            gemv(&d, act, &weight, &mut out)?;
            let max_rel_err = max_rel_err(&out, &want);
            let mut run_err = Ok(());
            let timing = time_runs_on(clock, runs, budget, 5, 10_000, || {
                if let Err(e) = gemv(&d, act, &weight, &mut out) {
                    run_err = Err(e);
                }
            });
            // The work of a split call, whatever the machine's other jobs let run at once:
            // with the single-thread time, the split's overhead.
            let cpu = (threads > 1).then(|| {
                time_runs_on(Clock::ProcessCpu, Some(timing.runs.min(20)), budget, 1, 20, || {
                    if let Err(e) = gemv(&d, act, &weight, &mut out) {
                        run_err = Err(e);
                    }
                })
                .median
            });
            run_err?;
            let weight_bytes = weight.bytes().map_err(|e| e.to_string())?.len();
            rows.push(Row { format: *format, kernel: name, weight_bytes, timing, cpu, max_rel_err });
        }
    }
    let requant = time_requant(&act_f32, m, k, runs)?;
    if args.peak {
        peaks = peak::best_of(peaks, peak::measure(threads));
    }
    progress.finish();

    if args.json {
        print_json(&args, &rows, requant, threads, &peaks);
    } else {
        print_table(&args, &rows, requant, threads, &peaks);
    }
    match rows.iter().find(|r| r.max_rel_err > TOLERANCE) {
        Some(r) => Err(format!(
            "{} on {} differs from {REFERENCE} by {:e} (tolerance {TOLERANCE:e})",
            r.kernel,
            r.format.name(),
            r.max_rel_err
        )),
        None => Ok(()),
    }
}

/// The adapter every F32 activation pays before a ternary kernel: F32 -> I8_ABSMAX.
fn time_requant(act: &[f32], m: usize, k: usize, runs: Option<usize>) -> Result<Timing, String> {
    let mut codes = vec![0i8; m * k];
    let mut scales = vec![0f32; m];
    let mut err = Ok(());
    let t = time_runs(runs, Duration::from_millis(100), 5, 10_000, || {
        if let Err(e) = requantize_i8_absmax_into(act, m, k, &mut codes, &mut scales, None) {
            err = Err(e.to_string());
        }
    });
    err.map(|_| t)
}

fn speedup(rows: &[Row], r: &Row) -> Option<f64> {
    let reference = rows.iter().find(|x| x.format == r.format && x.kernel == REFERENCE)?;
    Some(reference.timing.median.as_secs_f64() / r.timing.median.as_secs_f64())
}

fn gb_per_s(r: &Row) -> f64 {
    r.weight_bytes as f64 / r.timing.median.as_secs_f64() / 1e9
}

/// Multiply-adds per second of the fastest run (`m * n * k` per call): on a shared machine
/// the fastest run is the least disturbed, as for the peaks.
fn macs_per_s(args: &Args, r: &Row) -> f64 {
    (args.tokens() * args.shape.n * args.shape.k) as f64 / r.timing.min.as_secs_f64()
}

/// The fastest run's rate as a share of the peak of the kernel's instruction, per thread.
fn share_of_peak(args: &Args, r: &Row, peaks: &[Peak], threads: usize) -> Option<f64> {
    let p = peak::for_kernel(peaks, r.kernel)?;
    Some(macs_per_s(args, r) / (p.macs_per_s * threads as f64))
}

fn print_table(args: &Args, rows: &[Row], requant: Timing, threads: usize, peaks: &[Peak]) {
    let Shape { n, k } = args.shape;
    let clock = if threads == 1 && Clock::ThreadCpu.is_cpu_time() { "thread CPU time" } else { "wall time" };
    outln!("tern bench: weight {n}x{k} (n x k), {} token(s), {threads} thread(s), {clock}", args.tokens());
    for p in peaks {
        let at_once = if threads > 1 { format!(", {threads} threads at once") } else { String::new() };
        outln!(
            "  peak {:<20}{:>8.1} GMAC/s per thread (dependency-free loop, best over the run{at_once})",
            p.name,
            p.macs_per_s / 1e9
        );
    }
    outln!(
        "  {:<14}{:<26}{:>12}{:>12}{:>7}{:>10}{:>10}{:>9}{:>10}{:>13}",
        "format",
        "kernel",
        "median",
        "min",
        "runs",
        "GB/s",
        "GMAC/s",
        "of peak",
        "speedup",
        "max rel err"
    );
    for r in rows {
        let speedup = speedup(rows, r).map_or("-".to_owned(), |s| format!("{s:.2}x"));
        let share = share_of_peak(args, r, peaks, threads).map_or("-".to_owned(), |s| format!("{:.0}%", 100.0 * s));
        outln!(
            "  {:<14}{:<26}{:>12}{:>12}{:>7}{:>10.2}{:>10.1}{:>9}{:>10}{:>13.2e}",
            r.format.name(),
            r.kernel,
            fmt_duration(r.timing.median),
            fmt_duration(r.timing.min),
            r.timing.runs,
            gb_per_s(r),
            macs_per_s(args, r) / 1e9,
            share,
            speedup,
            r.max_rel_err
        );
    }
    if !peaks.is_empty() {
        outln!("  GMAC/s and share of peak from the fastest run of each (machine load only slows runs down)");
    }
    for r in rows.iter().filter(|r| r.cpu.is_some()) {
        let cpu = r.cpu.unwrap_or_default();
        outln!(
            "  CPU time of all {threads} threads per call (median): {} for {} {}",
            fmt_duration(cpu),
            r.format.name(),
            r.kernel
        );
    }
    outln!(
        "  adapter requantize-i8-absmax {}x{k}: {} (median), price {} bytes",
        args.tokens(),
        fmt_duration(requant.median),
        group(i8_absmax_price(args.tokens(), k).unwrap_or(0))
    );
}

fn print_json(args: &Args, rows: &[Row], requant: Timing, threads: usize, peaks: &[Peak]) {
    let Shape { n, k } = args.shape;
    let ns = |d: Duration| d.as_nanos() as u64;
    let results: Vec<_> = rows
        .iter()
        .map(|r| {
            json!({
                "format": r.format.name(),
                "kernel": r.kernel,
                "weight_bytes": r.weight_bytes,
                "runs": r.timing.runs,
                "median_ns": ns(r.timing.median),
                "min_ns": ns(r.timing.min),
                "max_ns": ns(r.timing.max),
                "gb_per_s": gb_per_s(r),
                "gmac_per_s_best": macs_per_s(args, r) / 1e9,
                "share_of_peak": share_of_peak(args, r, peaks, threads),
                "speedup_vs_reference": speedup(rows, r),
                "max_rel_err": r.max_rel_err,
                "cpu_ns_all_threads": r.cpu.map(|d| d.as_nanos() as u64),
                "parity_ok": r.max_rel_err <= TOLERANCE,
            })
        })
        .collect();
    let features: serde_json::Map<String, serde_json::Value> =
        cpu_features().into_iter().map(|(name, has)| (name.to_owned(), has.into())).collect();
    let doc = json!({
        "tern_version": env!("CARGO_PKG_VERSION"),
        "arch": std::env::consts::ARCH,
        "cpu_features": features,
        "n": n,
        "k": k,
        "tokens": args.tokens(),
        "threads": threads,
        "reference_kernel": REFERENCE,
        "tolerance": TOLERANCE,
        "results": results,
        "peaks_gmac_per_s": peaks.iter().map(|p| (p.name.to_owned(), (p.macs_per_s / 1e9).into())).collect::<serde_json::Map<String, serde_json::Value>>(),
        "adapter": {
            "name": "requantize-i8-absmax",
            "bytes": i8_absmax_price(args.tokens(), k).unwrap_or(0),
            "runs": requant.runs,
            "median_ns": ns(requant.median),
        },
    });
    outln!("{}", serde_json::to_string_pretty(&doc).expect("a JSON value serializes"));
}
