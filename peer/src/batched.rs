//! The batched part: ggml's real matmul path against tern's, m tokens at once, on 1 and 2
//! threads, F32 activations on both sides.
//!
//! - ggml: one `ggml_mul_mat` graph per (weight, m, threads), computed by
//!   `ggml_graph_compute` on a persistent `ggml_threadpool`. The timing includes ggml's
//!   Q8_K quantization of the F32 activation (done inside the graph, as in llama.cpp),
//!   the matmul itself, and the threadpool's kick-off and join.
//! - tern: `Dispatcher::matmul` (what `tern_matmul` runs) with an F32 activation, a scope
//!   reset before each call and a dispatcher of the same thread count (tern's own pool).
//!   The timing includes the F32 -> I8_ABSMAX requantization into the scope, the kernel's
//!   activation preparation, the kernel over (row x token) tasks, and the pool's kick-off
//!   and join.
//!
//! Every tern tensor is compared with ggml on the same matrix: TQ1_0 and TQ2_0 with
//! random weights (a block scale per 256 weights, all different), and, for BITNET_B1_58
//! (ggml has no BitNet format), ggml's TQ2_0 holding the identical BitNet matrix (trits
//! times one power-of-two scale, exact in TQ2_0's f16 block scales), as for I2_S of the same
//! matrix. tern's TQ2_0 of that matrix is timed too: its block scales are all equal, so tern
//! detects the uniform scale and runs its per-tensor-scale path. Q2_0 (ggml's activations
//! Q8_0 per 32) with the random weights, a block scale per 64.

use crate::check::{check_bytes, rel_l2, verdict, DOT_TOLERANCE};
use crate::data::Rng;
use crate::ggml::{self, Aligned, MulMat, ThreadPool};
use crate::timing::{self, Budget, Timed};
use tern::format::bitnet_import_trits;
use tern::{Dispatcher, DispatcherOptions, Format, Scope, Tensor};

/// Token counts: one token (generation), small batches, prompt processing.
const TOKENS: [usize; 5] = [1, 8, 32, 128, 512];
const THREADS: [usize; 2] = [1, 2];
/// BitNet b1.58 2B4T's attention (Q, O) and FFN up/gate shapes, rows x k.
const SHAPES: [(usize, usize); 2] = [(2560, 2560), (6912, 2560)];
/// The BitNet matrix's scale: a power of two, so TQ2_0's f16 block scale holds it exactly.
const BITNET_SCALE: f32 = 1.0 / 64.0;

/// ggml's matrices of a shape, in the order [`weights`] makes them.
const GGML: [&str; 4] = ["TQ1_0", "TQ2_0", "TQ2_0 BitNet", "Q2_0"];
/// tern's matrices of a shape, each with the index in [`GGML`] of ggml's matrix holding
/// the same values: its baseline for timing and agreement.
const TERN: [(&str, usize); 6] =
    [("TQ1_0", 0), ("TQ2_0", 1), ("TQ2_0 unif", 2), ("BITNET", 2), ("I2_S", 2), ("Q2_0", 3)];

/// A weight matrix as ggml holds it.
struct GgmlWeight {
    ty: u32,
    bytes: Aligned,
}

/// The `n x k` matrices of one shape, both sides: `ggml` in [`GGML`] order, `tern` in
/// [`TERN`] order.
struct Weights {
    n: usize,
    k: usize,
    ggml: Vec<GgmlWeight>,
    tern: Vec<Tensor<'static>>,
}

/// tern's side of one case: what `tern_matmul` does with an F32 activation.
struct TernMatmul<'a> {
    dispatcher: &'a Dispatcher,
    weight: &'a Tensor<'static>,
    act: Tensor<'a>,
    scope: Scope,
    out: Vec<f32>,
}

impl Timed for TernMatmul<'_> {
    fn call(&mut self) {
        self.scope.reset();
        self.dispatcher.matmul(&self.act, self.weight, Some(&mut self.scope), &mut self.out).expect("operands fit");
    }
}

/// Median seconds per call, `[threads index][weight index]`, for one (shape, m).
struct Case {
    n: usize,
    k: usize,
    m: usize,
    ggml: Vec<Vec<f64>>,
    tern: Vec<Vec<f64>>,
}

/// Runs every (shape, m) case and prints the summary tables; returns the number of
/// failed checks.
pub fn run(budget: &Budget) -> usize {
    println!("== batched: ggml_mul_mat graph (ggml threadpool) vs tern Dispatcher::matmul (tern pool) ==");
    println!("F32 activations on both sides: each side's activation quantization is inside its timing");
    println!("(ggml: Q8_K per 256, Q8_0 per 32 for Q2_0; tern: I8_ABSMAX per token); m in {TOKENS:?}, threads {THREADS:?}\n");
    let pools: Vec<(ThreadPool, Dispatcher)> = THREADS
        .iter()
        .map(|&t| {
            let options = DispatcherOptions { n_threads: t, ..DispatcherOptions::default() };
            (ThreadPool::new(t), Dispatcher::new(options).expect("a dispatcher"))
        })
        .collect();
    let mut failures = 0;
    let mut cases = Vec::new();
    for &(n, k) in &SHAPES {
        let weights = weights(n, k, &mut failures);
        let mut rng = Rng::for_shape(n, k);
        for &m in &TOKENS {
            let x = rng.fill(m * k);
            cases.push(run_case(&weights, &x, &pools, budget, &mut failures));
        }
        println!();
    }
    print_tables(&cases);
    failures
}

/// The matrices of one shape, both sides, with their byte parity checked.
fn weights(n: usize, k: usize, failures: &mut usize) -> Weights {
    println!("-- {n} x {k} --");
    let mut rng = Rng::for_shape(n, k);
    let random = rng.fill(n * k);
    let trits = rng.trits(n * k);
    let bitnet: Vec<f32> = trits.iter().map(|&t| f32::from(t) * BITNET_SCALE).collect();
    let mut ggml_weight = |label, format: Format, src: &[f32]| {
        let ty = format.ggml_type().expect("a ggml type");
        let q = ggml::Quant::new(ty, k);
        let bytes = q.quantize(src, n, k);
        let tensor = Tensor::encode(format, src, n, k).expect("encode weight");
        *failures += check_bytes(label, bytes.bytes(), tensor.bytes().expect("owned bytes"), n, q.row_bytes);
        (GgmlWeight { ty, bytes }, tensor)
    };
    let (g_tq1, t_tq1) = ggml_weight(GGML[0], Format::Tq1_0, &random);
    let (g_tq2, t_tq2) = ggml_weight(GGML[1], Format::Tq2_0, &random);
    let (g_bit, t_uni) = ggml_weight(GGML[2], Format::Tq2_0, &bitnet);
    assert!(t_uni.uniform_block_scale().expect("valid bytes").is_some(), "the BitNet matrix has uniform block scales");
    let mut bytes = vec![0u8; Format::BitnetB158.bytes_for(n, k).expect("weight shape")];
    bitnet_import_trits(&trits, BITNET_SCALE, &mut bytes).expect("import trits");
    let t_bit = Tensor::from_vec(Format::BitnetB158, bytes, n, k).expect("BITNET_B1_58 tensor");
    // bitnet.cpp's quantizer keeps exactly ternary weights exact: scale = max |w|.
    let t_i2s = Tensor::encode(Format::I2S, &bitnet, n, k).expect("encode I2_S");
    let (g_q2, t_q2) = ggml_weight(GGML[3], Format::Q2_0, &random);
    Weights {
        n,
        k,
        ggml: vec![g_tq1, g_tq2, g_bit, g_q2],
        tern: vec![t_tq1, t_tq2, t_uni, t_bit, t_i2s, t_q2],
    }
}

/// One (shape, m): builds every implementation for every thread count, checks each tern
/// output against ggml's on the same matrix, then times them all in the same rounds.
fn run_case(
    weights: &Weights,
    x: &[f32],
    pools: &[(ThreadPool, Dispatcher)],
    budget: &Budget,
    failures: &mut usize,
) -> Case {
    let (n, k, ggml_w, tern_w) = (weights.n, weights.k, &weights.ggml, &weights.tern);
    let m = x.len() / k;
    let mut ggml_impls: Vec<Vec<MulMat>> = Vec::new();
    let mut tern_impls: Vec<Vec<TernMatmul>> = Vec::new();
    for (pool, dispatcher) in pools {
        let mut g: Vec<MulMat> = ggml_w.iter().map(|w| MulMat::new(w.ty, &w.bytes, n, k, x, pool)).collect();
        g.iter_mut().for_each(MulMat::compute);
        pool.pause();
        let mut t: Vec<TernMatmul> = tern_w
            .iter()
            .map(|weight| TernMatmul {
                dispatcher,
                weight,
                act: Tensor::wrap(Format::F32, bytemuck::cast_slice(x), m, k).expect("F32 activation"),
                scope: Scope::new(0).expect("a scope"),
                out: vec![0f32; m * n],
            })
            .collect();
        for (imp, (label, peer)) in t.iter_mut().zip(TERN) {
            imp.call();
            let diff = rel_l2(&imp.out, g[peer].output(), &imp.out);
            let ok = diff <= DOT_TOLERANCE;
            *failures += usize::from(!ok);
            if !ok || m == TOKENS[0] || m == *TOKENS.last().expect("tokens") {
                println!(
                    "  check m = {m:<3} threads {}: tern {:<10} vs ggml {:<12} rel L2 {diff:.1e} (tol {DOT_TOLERANCE:.0e}) {}",
                    pool.threads(),
                    label,
                    GGML[peer],
                    verdict(ok)
                );
            }
        }
        ggml_impls.push(g);
        tern_impls.push(t);
    }
    let secs = {
        let mut fns: Vec<&mut dyn Timed> = Vec::new();
        for (g, t) in ggml_impls.iter_mut().zip(&mut tern_impls) {
            fns.extend(g.iter_mut().map(|f| f as &mut dyn Timed));
            fns.extend(t.iter_mut().map(|f| f as &mut dyn Timed));
        }
        timing::measure(budget, &mut fns)
    };
    let per_threads = ggml_w.len() + tern_w.len();
    let (ggml, tern) =
        secs.chunks(per_threads).map(|s| (s[..ggml_w.len()].to_vec(), s[ggml_w.len()..].to_vec())).unzip();
    Case { n, k, m, ggml, tern }
}

/// Table 1: ggml time / tern time per (shape, m, threads) and tern weight, with tern's and
/// ggml's GMAC/s. Table 2: 2-thread speedup (1-thread time / 2-thread time), same run.
fn print_tables(cases: &[Case]) {
    let tern_labels = || TERN.iter().map(|(label, _)| label.to_string());
    let ggml_labels = || GGML.iter().map(|label| label.to_string());
    let shape = |case: &Case| format!("{}x{}", case.n, case.k);
    println!("ggml time / tern time, same matrix (BITNET and TQ2_0 unif against ggml TQ2_0 of the BitNet matrix);");
    println!("GMAC/s = m x n x k / time. Medians of interleaved rounds; every implementation of a (shape, m) in the same rounds.");
    println!(
        "  {:<11} {:>4} {:>3} |{} | tern GMAC/s:{} | ggml GMAC/s:{}",
        "n x k",
        "m",
        "thr",
        cells(tern_labels(), 10),
        cells(tern_labels(), 10),
        cells(ggml_labels(), 12)
    );
    for case in cases {
        let macs = (case.m * case.n * case.k) as f64;
        for (ti, threads) in THREADS.iter().enumerate() {
            let (g, t) = (&case.ggml[ti], &case.tern[ti]);
            let gmacs = |secs: &f64| format!("{:.1}", macs / secs / 1e9);
            println!(
                "  {:<11} {:>4} {threads:>3} |{} |             {} |             {}",
                shape(case),
                case.m,
                cells(TERN.iter().zip(t).map(|((_, peer), t)| format!("{:.2}x", g[*peer] / t)), 10),
                cells(t.iter().map(gmacs), 10),
                cells(g.iter().map(gmacs), 12)
            );
        }
    }
    println!("\n2-thread speedup (1-thread time / 2-thread time), same rounds:");
    println!("  {:<11} {:>4} | tern:{} | ggml:{}", "n x k", "m", cells(tern_labels(), 10), cells(ggml_labels(), 12));
    let speedups =
        |one: &[f64], two: &[f64]| one.iter().zip(two).map(|(a, b)| format!("{:.2}x", a / b)).collect::<Vec<_>>();
    for case in cases {
        println!(
            "  {:<11} {:>4} |      {} |      {}",
            shape(case),
            case.m,
            cells(speedups(&case.tern[0], &case.tern[1]), 10),
            cells(speedups(&case.ggml[0], &case.ggml[1]), 12)
        );
    }
    println!();
}

/// Table cells: each right-aligned to `width`, a space before each.
fn cells(items: impl IntoIterator<Item = String>, width: usize) -> String {
    items.into_iter().map(|item| format!(" {item:>width$}")).collect()
}
