//! Peer benchmark: ggml's own TQ1_0/TQ2_0 kernels next to tern's, in one process. Checks
//! first that both sides do the same work (byte-identical weights, outputs that agree up
//! to activation quantization), then times them in interleaved rounds:
//!
//! - `gemv`: m = 1, one thread, ggml's `vec_dot` per row against every tern kernel;
//! - `batched`: ggml's real `ggml_mul_mat` graph on a persistent threadpool against
//!   tern's dispatcher (F32 activations on both sides), m up to 512, 1 and 2 threads.
//!
//! - `formats`: Q2_0 byte parity of ggml's quantizer and dequantizer with tern's (no timing).
//! - `accuracy`: tern's activation quantization error next to ggml's, against an exact
//!   product (no timing).
//!
//! Usage: `cargo run --release [-- --quick] [--gemv | --batched | --formats | --accuracy]` (see
//! scripts/bench-peer.sh).

#![warn(clippy::undocumented_unsafe_blocks)]

mod accuracy;
mod batched;
mod check;
mod data;
mod formats;
mod gemv;
mod ggml;
mod timing;

use tern::kernel::registry;
use tern::Format;
use timing::Budget;

const USAGE: &str = "usage: tern-peer [--quick] [--gemv | --batched | --formats | --accuracy]
  --quick    shorter budget (and the DRAM-resident GEMV shape in TQ2_0 only)
  --gemv     only the m = 1 part (ggml vec_dot vs every tern kernel, one thread)
  --batched  only the batched part (ggml_mul_mat graph vs tern's dispatcher, m = 1..512, 1-2 threads)
  --formats  only the Q2_0 byte parity (ggml's quantizer and dequantizer vs tern's, every fixture)
  --accuracy only the activation accuracy (tern per-token and per-block vs ggml, exact f64 reference)";

fn main() {
    let (mut quick, mut gemv, mut batched, mut formats, mut accuracy) = (false, false, false, false, false);
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--quick" => quick = true,
            "--gemv" => gemv = true,
            "--batched" => batched = true,
            "--formats" => formats = true,
            "--accuracy" => accuracy = true,
            "-h" | "--help" => return println!("{USAGE}"),
            other => {
                eprintln!("tern-peer: unknown argument {other:?}\n{USAGE}");
                std::process::exit(2);
            }
        }
    }
    if !gemv && !batched && !formats && !accuracy {
        (gemv, batched, formats, accuracy) = (true, true, true, true);
    }

    ggml::init();
    println!("tern peer benchmark: ggml vs tern");
    print_kernels();
    let mut failures = 0;
    if formats {
        failures += formats::run();
        println!();
    }
    if accuracy {
        failures += accuracy::run();
        println!();
    }
    if gemv {
        let budgets = [Budget::new(200, 7), Budget::new(1000, 15)];
        failures += run_part(quick, budgets, |budget| gemv::run(quick, budget));
    }
    if batched {
        failures += run_part(quick, [Budget::new(100, 5), Budget::new(500, 11)], batched::run);
    }
    if failures > 0 {
        println!("{failures} check(s) FAILED");
        std::process::exit(1);
    }
    println!("all checks passed");
}

/// Runs one part with its (quick, full) budget; returns its failed checks.
fn run_part(quick: bool, [short, long]: [Budget; 2], part: impl FnOnce(&Budget) -> usize) -> usize {
    let (mode, budget) = if quick { ("quick", short) } else { ("full", long) };
    println!("mode: {mode}; timings are medians of {} interleaved rounds\n", budget.rounds);
    part(&budget)
}

fn print_kernels() {
    println!("tern kernels (registry order, * = available on this CPU):");
    for kern in registry().iter().filter(|k| k.act() == Format::I8Absmax) {
        let mark = if kern.is_available() { "*" } else { " " };
        println!("  {mark} {:<26} {:<13} needs {}", kern.name(), kern.weight().name(), or_none(kern.requires()));
    }
    println!();
}

fn or_none(s: &str) -> &str {
    if s.is_empty() {
        "-"
    } else {
        s
    }
}
