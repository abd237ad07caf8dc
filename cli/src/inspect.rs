//! `tern inspect FILE.gguf`: lists a GGUF file's metadata and tensors, then runs every
//! TQ1_0/TQ2_0 tensor through tern as it lies in the file. Other tensors' data is never
//! read.

use crate::common::*;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tern::gguf::{Gguf, TensorInfo, Value};
use tern::{Dispatcher, DispatcherOptions, Format, RecordingSink, Scope, Tensor};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The GGUF file (versions 2 and 3)
    file: PathBuf,
    /// Timed runs per kernel and tensor
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    runs: u32,
}

pub fn run(args: Args) -> Result<(), String> {
    let path = args.file.display().to_string();
    let file = File::open(&args.file).map_err(|e| format!("cannot open {path}: {e}"))?;
    let len = file.metadata().map_err(|e| format!("cannot stat {path}: {e}"))?.len();
    // An empty file cannot be mapped; it is still a (truncated) GGUF file to report on.
    let map = if len == 0 {
        None
    } else {
        // SAFETY: the map is read-only and lives until the end of this function. If another
        // process truncates the file meanwhile, reads fault (SIGBUS); that is the usual
        // contract of mapped model files, and the parser never trusts the contents.
        Some(unsafe { memmap2::Mmap::map(&file) }.map_err(|e| format!("cannot map {path}: {e}"))?)
    };
    let bytes: &[u8] = map.as_deref().unwrap_or(&[]);
    let gguf = Gguf::parse(bytes).map_err(|e| format!("{path} is not a valid GGUF file: {e}"))?;

    outln!(
        "{path}: GGUF v{}, {} bytes, {} metadata keys, {} tensors, alignment {}, data at offset {}",
        gguf.version,
        group(bytes.len()),
        gguf.metadata.len(),
        gguf.tensors.len(),
        gguf.alignment,
        gguf.data_start
    );
    outln!("\nmetadata:");
    for kv in &gguf.metadata {
        let ty = match &kv.value {
            Value::Array(a) => format!("array of {} {}", group(a.len as usize), a.elem_type),
            v => v.value_type().to_string(),
        };
        outln!("  {} ({ty}) = {}", kv.key, shorten(&kv.value.to_string(), 100));
    }
    print_tensors(&gguf);

    let ternary: Vec<_> = gguf.tensors.iter().filter(|t| is_ternary(t)).collect();
    if ternary.is_empty() {
        outln!("\nno ternary tensors (TQ1_0, TQ2_0, Q2_0, I2_S) to run");
        return Ok(());
    }
    outln!("\nternary tensors, each run on a random F32 token (1 thread):");
    let mut failures = Vec::new();
    for t in &ternary {
        if let Err(e) = run_tensor(&gguf, t, args.runs as usize) {
            outln!("    FAILED: {e}");
            failures.push(format!("{}: {e}", t.name));
        }
    }
    outln!("\n{} of {} ternary tensors ok", ternary.len() - failures.len(), ternary.len());
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{path}: {}", failures.join("; ")))
    }
}

fn is_ternary(t: &TensorInfo) -> bool {
    t.ggml_type.format().is_some_and(Format::is_ternary)
}

fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_owned(),
    }
}

fn print_tensors(gguf: &Gguf) {
    let width = gguf.tensors.iter().map(|t| t.name.len()).max().unwrap_or(4).clamp(4, 48);
    outln!("\ntensors (shape is ggml's ne: [ne0 = k, ne1 = n, ...]):");
    outln!("  {:<width$}  {:<12}{:<24}{:>14}{:>14}", "name", "type", "shape", "bytes", "file offset");
    for t in &gguf.tensors {
        let shape = format!("{:?}", t.shape());
        let bytes = t.size.map_or("?".to_owned(), |s| group(s as usize));
        outln!(
            "  {:<width$}  {:<12}{:<24}{:>14}{:>14}",
            t.name,
            t.ggml_type.to_string(),
            shape,
            bytes,
            group(gguf.file_offset(t) as usize)
        );
    }
    let unknown = gguf.tensors.iter().filter(|t| t.size.is_none()).count();
    if unknown > 0 {
        outln!("  ({unknown} tensors of unknown ggml types: listed, but their size is unknown)");
    }
}

/// Wraps the tensor's bytes as they lie in the file, validates them, runs the dispatcher on
/// a random F32 token, checks every kernel against the reference and times them.
fn run_tensor(gguf: &Gguf, t: &TensorInfo, runs: usize) -> Result<(), String> {
    let format = t.ggml_type.format().expect("only ternary tensors get here");
    let (n, k) = t.matrix();
    outln!("  {} {} {n}x{k} (n x k):", t.name, format.name());
    let (n, k) = (usize::try_from(n).map_err(|_| "too many rows")?, usize::try_from(k).map_err(|_| "too many cols")?);
    let data = gguf.tensor_data(t).map_err(|e| e.to_string())?;
    let weight = Tensor::wrap(format, data, n, k).map_err(|e| e.to_string())?;
    weight.validate().map_err(|e| format!("invalid codes: {e}"))?;
    outln!("    codes and scales valid");

    let mut rng = Rng::new(0x5eed ^ data.len() as u64);
    let token = rng.units(k);
    let act = Tensor::encode(Format::F32, &token, 1, k).map_err(|e| e.to_string())?;
    let sink = Arc::new(RecordingSink::default());
    let mut d = Dispatcher::new(DispatcherOptions::default()).map_err(|e| e.to_string())?;
    d.set_sink(Some(sink.clone()));
    let mut scope = Scope::new(0).map_err(|e| e.to_string())?;
    let mut out = vec![0f32; n];
    d.matmul(&act, &weight, Some(&mut scope), &mut out).map_err(|e| e.to_string())?;
    for event in sink.events() {
        outln!("    {}", event_line(&event));
    }

    // Kernels compare on the same token, requantized as the dispatcher did.
    let act_i8 = Tensor::encode(Format::I8Absmax, &token, 1, k).map_err(|e| e.to_string())?;
    let mut want = vec![0f32; n];
    gemv(&dispatcher(REFERENCE, 1)?, &act_i8, &weight, &mut want)?;
    let mut worst = None;
    let mut times = Vec::new();
    for kernel in gemv_kernels(format).into_iter().rev() {
        let kd = dispatcher(kernel.name(), 1)?;
        let mut got = vec![0f32; n];
        gemv(&kd, &act_i8, &weight, &mut got)?;
        let err = max_rel_err(&got, &want);
        if kernel.name() != REFERENCE {
            outln!(
                "    parity {:<26} max rel err {err:.2e} {}",
                kernel.name(),
                if err <= TOLERANCE { "ok" } else { "FAIL" }
            );
            if err > TOLERANCE && worst.is_none() {
                worst = Some(format!("{} differs from {REFERENCE} by {err:e}", kernel.name()));
            }
        }
        let mut run_err = Ok(());
        let timing = time_runs(Some(runs), Duration::ZERO, 1, runs, || {
            if let Err(e) = gemv(&kd, &act_i8, &weight, &mut got) {
                run_err = Err(e);
            }
        });
        run_err?;
        times.push(format!("{} {}", kernel.name(), fmt_duration(timing.median)));
    }
    outln!("    time per GEMV: {}", times.join(", "));
    worst.map_or(Ok(()), Err)
}
