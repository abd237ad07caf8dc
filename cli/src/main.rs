//! `tern`: a demo of tern on this CPU, GEMV benchmarks, and GGUF inspection.

mod bench;
mod common;
mod demo;
mod inspect;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "tern", version, about = "Ternary (1.58-bit) weights: formats, kernels and GGUF files")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show the CPU's kernels, the ternary formats on a BitNet b1.58 2B4T layer set, the
    /// dispatcher's events, kernel parity and time per GEMV (no files needed)
    Demo(demo::Args),
    /// Time the ternary GEMV/GEMM kernels on one weight shape
    Bench(bench::Args),
    /// List a GGUF file's metadata and tensors, and run its TQ1_0/TQ2_0 tensors
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
