//! Tools for `scripts/count-arm-insns.sh` (not tests: they assert nothing about tern).
//!
//! - `kernel_probe <format> <kernel> <m> <n> <k> <reps>`: runs one kernel `reps` times on
//!   an `n x k` weight and `m` tokens, for `scripts/count-arm-insns.py`, which counts the
//!   instructions qemu executes; the difference between two rep counts is the per-call
//!   cost, setup excluded.
//! - `kernel_probe timing`: milliseconds per call (best of 3) of every kernel this CPU runs
//!   for m = 1, 512 x 4096 weights, one `TIMING <format> <kernel> <ms>` line each.
//!   Indicative only: under qemu it translates instructions, it does not model a core.
//! - `kernel_probe act-cost <rounds> [FORMAT]`: the cost of per-block activation scales. For
//!   TQ1_0, TQ2_0 and Q2_0 (or the one named) at 4096x4096 and 2560x6912 (n x k), m = 1 and
//!   128, one thread: a dispatcher matmul by I8_ABSMAX and by the format's accurate
//!   activations (I8_BLOCK256, I8_BLOCK32; the kernel, its activation preparation
//!   included), and from F32 activations without and with
//!   `accurate_activations` (the adapter included). Medians of `rounds` interleaved rounds
//!   (every variant once per round), one `ACT_COST` line per case with the ratios.

use std::time::Instant;
use tern::kernel::{registry, Kernel, MatRef, OutTile};
use tern::{Dispatcher, DispatcherOptions, Format, Scope, Tensor};

const TERNARY: [Format; 3] = [Format::Tq1_0, Format::Tq2_0, Format::BitnetB158];

/// splitmix64: the operands are the same on every run.
struct Rng(u64);

impl Rng {
    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

fn encode(format: Format, src: &[f32], rows: usize, cols: usize) -> Vec<u8> {
    Tensor::encode(format, src, rows, cols).unwrap().bytes().unwrap().to_vec()
}

/// `n x k` weights in `format` and `m` tokens of I8_ABSMAX activations (the second a zero
/// row).
fn operands(rng: &mut Rng, format: Format, m: usize, n: usize, k: usize) -> (Vec<u8>, Vec<u8>) {
    let w: Vec<f32> = (0..n * k).map(|_| rng.unit()).collect();
    let mut a: Vec<f32> = (0..m * k).map(|_| rng.unit() * 3.0).collect();
    if m > 1 {
        a[k..2 * k].fill(0.0);
    }
    (encode(format, &w, n, k), encode(Format::I8Absmax, &a, m, k))
}

fn kernel(name: &str, weight: Format) -> &'static Kernel {
    registry()
        .iter()
        .find(|k| k.name() == name && k.weight() == weight && k.act() == Format::I8Absmax)
        .unwrap_or_else(|| panic!("{name} for {} is not registered", weight.name()))
}

fn probe(args: &[String]) {
    let format =
        Format::ALL.into_iter().find(|x| x.is_ternary() && x.name() == args[0]).expect("a ternary format name");
    let [m, n, k, reps] = [2, 3, 4, 5].map(|i| args[i].parse::<usize>().expect("a number"));
    let (wbytes, abytes) = operands(&mut Rng(1), format, m, n, k);
    let w = MatRef::new(format, n, k, &wbytes).unwrap();
    let a = MatRef::new(Format::I8Absmax, m, k, &abytes).unwrap();
    let kern = kernel(&args[1], format);
    let mut out = vec![0f32; m * n];
    for _ in 0..reps {
        kern.run(&w, &a, &mut OutTile::new(&mut out, m, n).unwrap()).unwrap();
    }
    assert!(out.iter().all(|x| x.is_finite()));
}

fn timing() {
    let (m, n, k) = (1, 512, 4096);
    let mut rng = Rng(1);
    for format in TERNARY {
        let (wbytes, abytes) = operands(&mut rng, format, m, n, k);
        let w = MatRef::new(format, n, k, &wbytes).unwrap();
        let a = MatRef::new(Format::I8Absmax, m, k, &abytes).unwrap();
        for kern in registry().iter().filter(|k| k.weight() == format && k.act() == Format::I8Absmax) {
            if !kern.is_available() {
                continue;
            }
            let mut out = vec![0f32; m * n];
            let best = (0..3)
                .map(|_| {
                    let start = std::time::Instant::now();
                    kern.run(&w, &a, &mut OutTile::new(&mut out, m, n).unwrap()).unwrap();
                    start.elapsed().as_secs_f64() * 1e3
                })
                .fold(f64::INFINITY, f64::min);
            println!("TIMING {} {} {best:.3}", format.name(), kern.name());
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn act_cost(rounds: usize, only: Option<&str>) {
    let dispatcher = |accurate| {
        Dispatcher::new(DispatcherOptions { ignore_env: true, accurate_activations: accurate, ..Default::default() })
            .unwrap()
    };
    let (plain, accurate) = (dispatcher(false), dispatcher(true));
    let mut rng = Rng(7);
    for (n, k) in [(4096, 4096), (2560, 6912)] {
        for format in [Format::Tq1_0, Format::Tq2_0, Format::Q2_0] {
            if only.is_some_and(|name| name != format.name()) {
                continue;
            }
            let accurate_format = format.accurate_activation().expect("a format with accurate activations");
            let w = Tensor::encode(format, &(0..n * k).map(|_| rng.unit()).collect::<Vec<_>>(), n, k).unwrap();
            for m in [1, 128] {
                let x: Vec<f32> = (0..m * k).map(|_| rng.unit() * 3.0).collect();
                let f32_act = Tensor::encode(Format::F32, &x, m, k).unwrap();
                let absmax = Tensor::encode(Format::I8Absmax, &x, m, k).unwrap();
                let block = Tensor::encode(accurate_format, &x, m, k).unwrap();
                let variants: [(&Dispatcher, &Tensor); 4] =
                    [(&plain, &absmax), (&plain, &block), (&plain, &f32_act), (&accurate, &f32_act)];
                let mut out = vec![0f32; m * n];
                let mut scope = Scope::new(0).unwrap();
                // Calls per round: about 20 ms of work each.
                let reps = (20_000_000 / (m * n * k / 1000).max(1)).clamp(1, 200);
                let mut times = vec![Vec::new(); variants.len()];
                for _ in 0..rounds {
                    for ((d, a), t) in variants.iter().zip(&mut times) {
                        let start = Instant::now();
                        for _ in 0..reps {
                            scope.reset();
                            d.matmul(a, &w, Some(&mut scope), &mut out).unwrap();
                        }
                        t.push(start.elapsed().as_secs_f64() * 1e3 / reps as f64);
                    }
                }
                let [ab, bl, f_ab, f_bl] = [0, 1, 2, 3].map(|i| median(times[i].clone()));
                println!(
                    "ACT_COST {} {n}x{k} m={m}: kernel I8_ABSMAX {ab:.3} ms, {} {bl:.3} ms ({:.3}x); \
                     from F32 per-token {f_ab:.3} ms, accurate {f_bl:.3} ms ({:.3}x)",
                    format.name(),
                    accurate_format.name(),
                    bl / ab,
                    f_bl / f_ab
                );
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.len() {
        1 if args[0] == "timing" => timing(),
        2 | 3 if args[0] == "act-cost" => {
            act_cost(args[1].parse().expect("a number of rounds"), args.get(2).map(String::as_str))
        }
        6 => probe(&args),
        _ => {
            eprintln!(
                "usage: kernel_probe <format> <kernel> <m> <n> <k> <reps> | kernel_probe timing | \
                 kernel_probe act-cost <rounds> [FORMAT]"
            );
            std::process::exit(2);
        }
    }
}
