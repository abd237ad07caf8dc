//! Bit-identity check for kernel refactors: runs every registry kernel this CPU runs over
//! fixed seeded operands (every ternary format; m = 1, 2, 5, 8, 16, 33, 128; ragged row
//! counts; corrupt codes; uniform block scales; a restricted output block) and prints one
//! FNV-1a hash of every output bit per kernel and format, then one over all of them.
//! Compare the last line before and after a change:
//! `cargo run --release --example kernel_hash`.

use tern::kernel::{registry, Kernel, MatRef, OutTile};
use tern::{Format, Tensor};

/// splitmix64, so the operands are the same on every run and machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

struct Fnv(u64);

impl Fnv {
    fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01B3);
        }
    }
}

/// One weight operand: its tensor (for the uniform scale) or raw bytes (corrupt codes).
struct Weight {
    bytes: Vec<u8>,
    uniform: bool,
    n: usize,
    k: usize,
}

fn weights(rng: &mut Rng, format: Format, n: usize, k: usize) -> Vec<Weight> {
    let random: Vec<f32> = (0..n * k).map(|_| rng.unit()).collect();
    // Ternary values with every 256-element block reaching 0.5: equal block scales.
    let uniform: Vec<f32> =
        (0..n * k).map(|i| if i % 256 == 0 { 0.5 } else { (rng.next() % 3) as f32 * 0.5 - 0.5 }).collect();
    let mut out = Vec::new();
    for (src, uniform) in [(random, false), (uniform, true)] {
        let t = Tensor::encode(format, &src, n, k).unwrap();
        out.push(Weight { bytes: t.bytes().unwrap().to_vec(), uniform, n, k });
    }
    // Random code bytes (TQ2_0/BitNet code 3, non-canonical TQ1_0 bytes), valid scales.
    let mut bytes: Vec<u8> = (0..format.bytes_for(n, k).unwrap()).map(|_| rng.next() as u8).collect();
    if format == Format::BitnetB158 {
        let at = bytes.len() - 4;
        bytes[at..].copy_from_slice(&0.37f32.to_le_bytes());
    } else {
        let block = bytes.len() / (n * k / 256);
        for (i, b) in bytes.chunks_exact_mut(block).enumerate() {
            b[block - 2..].copy_from_slice(&half::f16::from_f32(0.01 + (i % 7) as f32 * 0.1).to_le_bytes());
        }
    }
    out.push(Weight { bytes, uniform: false, n, k });
    out
}

fn activations(rng: &mut Rng, m: usize, k: usize) -> Vec<u8> {
    let mut src: Vec<f32> = (0..m * k).map(|_| rng.unit() * 3.0).collect();
    if m > 1 {
        src[k..2 * k].fill(0.0);
    }
    Tensor::encode(Format::I8Absmax, &src, m, k).unwrap().bytes().unwrap().to_vec()
}

fn run(kernel: &'static Kernel, w: &MatRef, a: &MatRef, restrict: bool, h: &mut Fnv) {
    let (m, n) = (a.rows(), w.rows());
    let mut out = vec![f32::NAN; m * n];
    let mut view = OutTile::new(&mut out, m, n).unwrap();
    if restrict && n > 2 && m > 1 {
        view = view.restrict(1..n - 1, 1..m).unwrap();
    }
    kernel.run(w, a, &mut view).unwrap();
    for x in out {
        h.add(&x.to_bits().to_le_bytes());
    }
}

fn main() {
    let formats = [Format::Tq1_0, Format::Tq2_0, Format::BitnetB158];
    let tokens = [1, 2, 5, 8, 16, 33, 128];
    let mut total = Fnv(0xCBF2_9CE4_8422_2325);
    for (seed, format) in formats.into_iter().enumerate() {
        let mut rng = Rng(0x7E51 + seed as u64);
        // Ragged row counts (not multiples of any tile or panel), k of 1 to 5 blocks; BitNet
        // also with row tails (k not a multiple of a vector).
        let mut shapes = vec![(1, 256), (7, 512), (33, 768), (70, 1280), (129, 256)];
        if format == Format::BitnetB158 {
            shapes.extend([(17, 260), (40, 100)]);
        }
        let mut cases: Vec<(Weight, Vec<Vec<u8>>)> = Vec::new();
        for &(n, k) in &shapes {
            for w in weights(&mut rng, format, n, k) {
                let acts = tokens.iter().map(|&m| activations(&mut rng, m, k)).collect();
                cases.push((w, acts));
            }
        }
        for kernel in registry().iter().filter(|k| k.weight() == format && k.act() == Format::I8Absmax) {
            if !kernel.is_available() {
                continue;
            }
            let mut h = Fnv(0xCBF2_9CE4_8422_2325);
            for (w, acts) in &cases {
                let t = Tensor::wrap(format, &w.bytes, w.n, w.k).unwrap();
                let wref =
                    if w.uniform { MatRef::of(&t).unwrap() } else { MatRef::new(format, w.n, w.k, &w.bytes).unwrap() };
                for (abytes, &m) in acts.iter().zip(&tokens) {
                    let a = MatRef::new(Format::I8Absmax, m, w.k, abytes).unwrap();
                    run(kernel, &wref, &a, false, &mut h);
                    run(kernel, &wref, &a, true, &mut h);
                }
            }
            println!("{:016x} {} {}", h.0, format.name(), kernel.name());
            total.add(&h.0.to_le_bytes());
        }
    }
    println!("{:016x} all", total.0);
}
