//! `tern demo`: what tern does, on this CPU, with no files: the CPU and its kernels, the
//! ternary formats on a BitNet b1.58 2B4T-shaped layer set, the dispatcher's events for one
//! token, kernel parity against the reference, and time per GEMV.

use crate::common::*;
use std::sync::Arc;
use std::time::Duration;
use tern::{Format, RecordingSink, Scope, Tensor};

/// The demo takes no options.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// BitNet b1.58 2B4T's projections as n x k: attention (2560x2560), FFN up/gate
/// (6912x2560) and FFN down (2560x6912).
const SHAPES: [(usize, usize); 3] = [(2560, 2560), (6912, 2560), (2560, 6912)];

struct Encoded {
    format: Format,
    shape: (usize, usize),
    tensor: Tensor<'static>,
    rms_err: f64,
}

struct Measured {
    format: Format,
    kernel: &'static str,
    /// One per shape.
    times: Vec<Duration>,
    runs: usize,
    /// Worst over the shapes.
    max_rel_err: f32,
}

pub fn run(_args: Args) -> Result<(), String> {
    outln!("tern {} demo\n", env!("CARGO_PKG_VERSION"));
    outln!("{}", cpu_line());
    outln!("Kernels this CPU can run (best first):");
    for (name, pairs, requires) in kernel_table(true) {
        let needs = if requires.is_empty() { String::new() } else { format!("  (uses {requires})") };
        outln!("  {name:<26} {pairs}{needs}");
    }
    let missing = kernel_table(false);
    if !missing.is_empty() {
        outln!("Built in, but this CPU lacks their features:");
        for (name, _, requires) in missing {
            outln!("  {name:<26} needs {requires}");
        }
    }

    let encoded = encode_all();
    print_encodings(&encoded);
    one_token(&encoded)?;
    let measured = measure(&encoded)?;
    let parity_ok = print_parity(&measured);
    print_times(&measured);
    if parity_ok {
        Ok(())
    } else {
        Err(format!("a kernel disagrees with {REFERENCE} beyond the tolerance {TOLERANCE:e}; see the parity table"))
    }
}

/// Encodes each shape, filled with normal weights, in each ternary format.
fn encode_all() -> Vec<Encoded> {
    let mut rng = Rng::new(2025);
    let mut out = Vec::new();
    for &(n, k) in &SHAPES {
        let w: Vec<f32> = (0..n * k).map(|_| rng.normal() * 0.02).collect();
        let norm: f64 = w.iter().map(|&x| (x as f64) * (x as f64)).sum();
        let mut decoded = vec![0f32; n * k];
        for format in TERNARY {
            let tensor = Tensor::encode(format, &w, n, k).expect("demo shapes fit every ternary format");
            tensor.decode_into(&mut decoded).expect("just encoded");
            let err: f64 = w.iter().zip(&decoded).map(|(&a, &b)| ((a - b) as f64).powi(2)).sum();
            out.push(Encoded { format, shape: (n, k), tensor, rms_err: (err / norm).sqrt() });
        }
    }
    out
}

fn print_encodings(encoded: &[Encoded]) {
    let total: usize = SHAPES.iter().map(|(n, k)| n * k).sum();
    outln!(
        "\n1. Formats: a BitNet b1.58 2B4T layer set (n x k = {}; {} weights, normal, sd 0.02)",
        SHAPES.map(|(n, k)| format!("{n}x{k}")).join(", "),
        group(total)
    );
    outln!("  {:<14}{:<12}{:>12}{:>13}{:>17}", "format", "shape", "bytes", "bits/weight", "rel. RMS error");
    for e in encoded {
        let (n, k) = e.shape;
        let bytes = e.tensor.bytes().expect("owned").len();
        let bits = bytes as f64 * 8.0 / (n * k) as f64;
        outln!(
            "  {:<14}{:<12}{:>12}{:>13.4}{:>17.4}",
            e.format.name(),
            format!("{n}x{k}"),
            group(bytes),
            bits,
            e.rms_err
        );
    }
    outln!("  rel. RMS error = ||w - decode(encode(w))|| / ||w||, the price of ternarizing normal weights:");
    outln!("  TQ1_0/TQ2_0 scale each 256-block by its max |w| (ggml's quantizer), BITNET_B1_58 the");
    outln!("  tensor by its mean |w| (the BitNet b1.58 paper), which keeps more weights non-zero.");
}

/// One F32 token through the dispatcher per format, printing the events it reports.
fn one_token(encoded: &[Encoded]) -> Result<(), String> {
    let (n, k) = SHAPES[0];
    outln!("\n2. One F32 token (1x{k}) through the dispatcher, per format ({n}x{k} weight):");
    let token = Rng::new(7).units(k);
    let act = Tensor::encode(Format::F32, &token, 1, k).map_err(|e| e.to_string())?;
    let sink = Arc::new(RecordingSink::default());
    let mut d = tern::Dispatcher::new(tern::DispatcherOptions::default()).map_err(|e| e.to_string())?;
    d.set_sink(Some(sink.clone()));
    let mut scope = Scope::new(0).map_err(|e| e.to_string())?;
    let mut out = vec![0f32; n];
    for e in encoded.iter().filter(|e| e.shape == (n, k)) {
        sink.clear();
        d.matmul(&act, &e.tensor, Some(&mut scope), &mut out).map_err(|e| e.to_string())?;
        scope.reset();
        outln!("  {}:", e.format.name());
        for event in sink.events() {
            outln!("    {}", event_line(&event));
        }
    }
    Ok(())
}

/// Times every available kernel on every (format, shape) with one requantized token, and
/// keeps each output to compare with the reference's.
fn measure(encoded: &[Encoded]) -> Result<Vec<Measured>, String> {
    let mut progress = Progress::new();
    let total: usize = TERNARY.iter().map(|&f| gemv_kernels(f).len() * SHAPES.len()).sum();
    let mut done = 0;
    let mut rng = Rng::new(11);
    let acts: Vec<Tensor> = SHAPES
        .iter()
        .map(|&(_, k)| Tensor::encode(Format::I8Absmax, &rng.units(k), 1, k).expect("k fits I8_ABSMAX"))
        .collect();
    let mut measured = Vec::new();
    for format in TERNARY {
        let kernels = gemv_kernels(format);
        let mut reference_out: Vec<Vec<f32>> = Vec::new();
        // The reference (last in the registry) first, so the others have something to match.
        for kernel in kernels.iter().rev() {
            let d = dispatcher(kernel.name(), 1)?;
            let mut m = Measured { format, kernel: kernel.name(), times: Vec::new(), runs: 0, max_rel_err: 0.0 };
            for (s, &(n, _)) in SHAPES.iter().enumerate() {
                done += 1;
                progress.step(done, total, &format!("{} {} {}x{}", format.name(), kernel.name(), n, SHAPES[s].1));
                let e = encoded.iter().find(|e| e.format == format && e.shape == SHAPES[s]).expect("encoded");
                let mut out = vec![0f32; n];
                gemv(&d, &acts[s], &e.tensor, &mut out)?;
                match reference_out.get(s) {
                    Some(want) => m.max_rel_err = m.max_rel_err.max(max_rel_err(&out, want)),
                    None => reference_out.push(out.clone()),
                }
                let mut run_err = Ok(());
                let t = time_runs(None, Duration::from_millis(120), 3, 31, || {
                    if let Err(err) = gemv(&d, &acts[s], &e.tensor, &mut out) {
                        run_err = Err(err);
                    }
                });
                run_err?;
                m.times.push(t.median);
                m.runs = m.runs.max(t.runs);
            }
            measured.push(m);
        }
    }
    progress.finish();
    Ok(measured)
}

fn print_parity(measured: &[Measured]) -> bool {
    outln!("\n3. Parity against {REFERENCE}: max |out - ref| / max(1, |ref|), tolerance {TOLERANCE:e}");
    let others: Vec<_> = measured.iter().filter(|m| m.kernel != REFERENCE).collect();
    if others.is_empty() {
        outln!("  only the reference kernel runs on this CPU: nothing to compare");
        return true;
    }
    let mut ok = true;
    for m in others {
        let pass = m.max_rel_err <= TOLERANCE;
        ok &= pass;
        outln!(
            "  {:<14}{:<26}{:>10.2e}  {}",
            m.format.name(),
            m.kernel,
            m.max_rel_err,
            if pass { "ok" } else { "FAIL" }
        );
    }
    ok
}

fn print_times(measured: &[Measured]) {
    let runs = measured.iter().map(|m| m.runs).max().unwrap_or(0);
    outln!("\n4. Time per GEMV (1 token, 1 thread, median of up to {runs} runs; speedup over {REFERENCE} on the layer set)");
    let shapes: String = SHAPES.iter().map(|(n, k)| format!("{:>12}", format!("{n}x{k}"))).collect();
    outln!("  {:<14}{:<26}{shapes}{:>10}", "format", "kernel", "speedup");
    for m in measured {
        let reference = measured.iter().find(|r| r.format == m.format && r.kernel == REFERENCE);
        let total = |m: &Measured| m.times.iter().sum::<Duration>().as_secs_f64();
        let speedup = reference.map(|r| total(r) / total(m)).unwrap_or(f64::NAN);
        let times: String = m.times.iter().map(|t| format!("{:>12}", fmt_duration(*t))).collect();
        outln!("  {:<14}{:<26}{times}{:>9.2}x", m.format.name(), m.kernel, speedup);
    }
}
