//! `tern`: a demo of tern on this CPU, GEMV benchmarks, and GGUF inspection.

/// `println!` for the report on stdout. When stdout is closed early (`tern inspect x | head`)
/// the process ends quietly with success instead of panicking; other write errors end it
/// with a message and exit code 1.
macro_rules! outln {
    () => {
        $crate::write_stdout(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::write_stdout(format_args!($($arg)*))
    };
}

mod bench;
mod common;
mod demo;
mod inspect;
mod model;
mod peak;

use clap::{Parser, Subcommand};
use std::io::Write;
use std::process::ExitCode;

fn write_stdout(args: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("tern: error: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

#[derive(Parser, Debug)]
#[command(name = "tern", version, about = "Ternary (1.58-bit) weights: formats, kernels and GGUF files")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Tour tern on this CPU (no files needed)
    ///
    /// Shows the CPU features and kernels, the ternary formats on a BitNet b1.58 2B4T layer
    /// set, the dispatcher's events for one token, kernel parity against the reference, and
    /// time per GEMV. Takes well under a minute in a release build.
    Demo(demo::Args),
    /// Time the ternary GEMV/GEMM kernels on one weight shape
    ///
    /// Every kernel this CPU runs (or --kernel) on each format, with parity against the
    /// reference kernel; a table, or one JSON document with --json.
    Bench(bench::Args),
    /// List a GGUF file's metadata and tensors, and run its TQ1_0/TQ2_0 tensors
    ///
    /// The file is memory-mapped and checked field by field; a malformed file gives a message
    /// naming the problem and exit code 1. Each TQ1_0/TQ2_0 tensor is wrapped as it lies in
    /// the file, validated, run through the dispatcher on a random token, checked against
    /// the reference kernel and timed. Other tensors' data is never read.
    Inspect(inspect::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Inspect(args) => inspect::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("tern: error: {message}");
            ExitCode::FAILURE
        }
    }
}
