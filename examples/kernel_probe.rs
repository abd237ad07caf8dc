//! Tools for `scripts/count-arm-insns.sh` (not tests: they assert nothing about tern).
//!
//! - `kernel_probe <format> <kernel> <m> <n> <k> <reps>`: runs one kernel `reps` times on
//!   an `n x k` weight and `m` tokens, for `scripts/count-arm-insns.py`, which counts the
//!   instructions qemu executes; the difference between two rep counts is the per-call
//!   cost, setup excluded.
//! - `kernel_probe timing`: milliseconds per call (best of 3) of every kernel this CPU runs
//!   for m = 1, 512 x 4096 weights, one `TIMING <format> <kernel> <ms>` line each.
//!   Indicative only: under qemu it translates instructions, it does not model a core.

use tern::kernel::{registry, Kernel, MatRef, OutTile};
use tern::{Format, Tensor};

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
    let format = TERNARY.into_iter().find(|x| x.name() == args[0]).expect("a ternary format name");
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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.len() {
        1 if args[0] == "timing" => timing(),
        6 => probe(&args),
        _ => {
            eprintln!("usage: kernel_probe <format> <kernel> <m> <n> <k> <reps> | kernel_probe timing");
            std::process::exit(2);
        }
    }
}
