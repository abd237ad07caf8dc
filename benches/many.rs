//! `Dispatcher::matmul_many` against separate `matmul` calls on the same weights: BitNet
//! b1.58 2B4T's attention projections (Q 2560x2560, K and V 640x2560) and its gate/up pair
//! (2 x 6912x2560), TQ2_0, one F32 token (so the activation is requantized), with 1 and 2
//! threads. Interleaved rounds, medians; the ratio separate / many is measured in the same
//! rounds, so a busy machine disturbs both sides alike.
//!
//! `cargo bench -p tern-benches --bench many` prints one line per case. On a shared machine
//! the wall times are noisy; instructions are not: `target/release/deps/many-* --count
//! separate|many N` under `valgrind --tool=callgrind` runs N single-thread attention calls
//! of one kind.

mod common;
use common::{median, median_time, values};
use tern::{Dispatcher, DispatcherOptions, Format, Scope, Tensor};

const K: usize = 2560;
const ROUNDS: usize = 15;
const CALLS: usize = 100;

/// One random TQ2_0 weight of `n x K` per entry of `rows`, each from its own seed.
fn tq2_weights(rows: &[usize]) -> Vec<Tensor<'static>> {
    rows.iter()
        .enumerate()
        .map(|(i, &n)| Tensor::encode(Format::Tq2_0, &values(n * K, i as u64 + 1), n, K).unwrap())
        .collect()
}

/// `calls` single-thread attention calls, all separate or all `matmul_many`, for callgrind
/// (run it with 0 calls too: the difference is the calls' cost without the setup).
fn count(kind: &str, calls: usize) {
    let act = Tensor::encode(Format::F32, &values(K, 7), 1, K).unwrap();
    let rows = [2560, 640, 640];
    let weights = tq2_weights(&rows);
    let refs: Vec<&Tensor> = weights.iter().collect();
    let d = Dispatcher::new(DispatcherOptions::default()).unwrap();
    let mut scope = Scope::new(1 << 16).unwrap();
    let mut outs: Vec<Vec<f32>> = rows.iter().map(|&n| vec![0f32; n]).collect();
    for _ in 0..calls {
        if kind == "many" {
            let mut slices: Vec<&mut [f32]> = outs.iter_mut().map(|o| o.as_mut_slice()).collect();
            d.matmul_many(&act, &refs, Some(&mut scope), &mut slices).unwrap();
        } else {
            for (w, out) in refs.iter().zip(&mut outs) {
                d.matmul(&act, w, Some(&mut scope), out).unwrap();
            }
        }
        scope.reset();
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--count") {
        let calls = args.get(i + 2).and_then(|n| n.parse().ok()).unwrap_or(20);
        return count(args.get(i + 1).map_or("many", String::as_str), calls);
    }
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too: keep that quick.
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    let act = Tensor::encode(Format::F32, &values(K, 7), 1, K).unwrap();
    for (case, rows) in [("attention Q/K/V", &[2560, 640, 640][..]), ("ffn gate/up", &[6912, 6912][..])] {
        let weights = tq2_weights(rows);
        let refs: Vec<&Tensor> = weights.iter().collect();
        for threads in [1, 2] {
            let d = Dispatcher::new(DispatcherOptions { n_threads: threads, ..Default::default() }).unwrap();
            let mut scope = Scope::new(1 << 16).unwrap();
            let mut outs: Vec<Vec<f32>> = rows.iter().map(|&n| vec![0f32; n]).collect();
            let (mut separate, mut many) = (Vec::new(), Vec::new());
            for _ in 0..ROUNDS {
                let s = median_time(CALLS, || {
                    for (w, out) in refs.iter().zip(&mut outs) {
                        d.matmul(&act, w, Some(&mut scope), out).unwrap();
                    }
                    scope.reset();
                });
                let m = median_time(CALLS, || {
                    let mut slices: Vec<&mut [f32]> = outs.iter_mut().map(|o| o.as_mut_slice()).collect();
                    d.matmul_many(&act, &refs, Some(&mut scope), &mut slices).unwrap();
                    scope.reset();
                });
                separate.push(s.as_secs_f64() * 1e6);
                many.push(m.as_secs_f64() * 1e6);
            }
            let (s, m) = (median(separate), median(many));
            println!(
                "{case:16} {threads} thread(s): separate {s:8.1} us, many {m:8.1} us, separate / many {:.3}",
                s / m
            );
        }
    }
}
