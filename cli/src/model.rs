//! `tern bench --model bitnet-b1.58-2b`: tern's llama-bench. Every matmul of a model's layer
//! stack with its real shapes and random ternary weights (DRAM-resident), through the
//! dispatcher: token generation (m = 1) and prompt processing (m = M) in tokens per second,
//! the weights' GB/s, and a read-bandwidth probe with the same thread count, interleaved in
//! the same process.

use crate::common::*;
use serde_json::json;
use std::time::Duration;
use tern::{Format, Tensor};

/// One model's layer stack: the `(rows, cols)` of each matmul of a layer.
#[derive(Debug)]
pub struct Model {
    pub name: &'static str,
    pub layers: usize,
    pub matmuls: [(&'static str, usize, usize); 7],
    /// Which of a layer's activations each matmul reads (Q, K and V the attention's input,
    /// gate and up the FFN's): neighbours that read the same one run as one `matmul_many`
    /// with `--many`.
    pub inputs: [u8; 7],
    /// Where the shapes come from.
    pub source: &'static str,
    /// The weight format the model ships in (the default of `--format`).
    pub format: Format,
}

/// BitNet b1.58 2B4T, from its published `config.json` (huggingface.co/microsoft/
/// bitnet-b1.58-2B-4T): hidden_size 2560, intermediate_size 6912, num_attention_heads 20,
/// num_key_value_heads 5 (head_dim 2560 / 20 = 128, so K and V have 640 rows),
/// num_hidden_layers 30.
pub const BITNET_2B: Model = Model {
    name: "bitnet-b1.58-2b",
    layers: 30,
    matmuls: [
        ("q", 2560, 2560),
        ("k", 640, 2560),
        ("v", 640, 2560),
        ("o", 2560, 2560),
        ("gate", 6912, 2560),
        ("up", 6912, 2560),
        ("down", 2560, 6912),
    ],
    inputs: [0, 0, 0, 1, 2, 2, 3],
    source: "config.json of huggingface.co/microsoft/bitnet-b1.58-2B-4T: hidden 2560, \
             intermediate 6912, 20 query heads, 5 KV heads of 128, 30 layers",
    format: Format::BitnetB158,
};

/// Ternary-Bonsai-8B (PrismML), whose model card gives Qwen3-8B as its base: 36 layers, 32
/// query and 8 KV heads; the shapes are Qwen3-8B's published `config.json`
/// (huggingface.co/Qwen/Qwen3-8B): hidden_size 4096, intermediate_size 12288, head_dim 128
/// (K and V have 8 x 128 = 1024 rows).
pub const BONSAI_8B: Model = Model {
    name: "ternary-bonsai-8b",
    layers: 36,
    matmuls: [
        ("q", 4096, 4096),
        ("k", 1024, 4096),
        ("v", 1024, 4096),
        ("o", 4096, 4096),
        ("gate", 12288, 4096),
        ("up", 12288, 4096),
        ("down", 4096, 12288),
    ],
    inputs: [0, 0, 0, 1, 2, 2, 3],
    source: "Ternary-Bonsai-8B (base Qwen3-8B, config.json of huggingface.co/Qwen/Qwen3-8B): hidden 4096, \
             intermediate 12288, 32 query heads, 8 KV heads of 128, 36 layers",
    format: Format::Q2_0,
};

/// The models known, by name.
const MODELS: [&Model; 2] = [&BITNET_2B, &BONSAI_8B];

pub fn parse_model(s: &str) -> Result<&'static Model, String> {
    MODELS.into_iter().find(|m| m.name == s).ok_or_else(|| {
        let names: Vec<_> = MODELS.iter().map(|m| m.name).collect();
        format!("unknown model {s:?}: the models known are {}", names.join(", "))
    })
}

pub struct Options {
    pub format: Format,
    pub tokens: usize,
    pub threads: usize,
    pub layers: usize,
    pub kernel: Option<String>,
    pub rounds: usize,
    pub json: bool,
    /// TQ1_0/TQ2_0: every block of a matrix with one scale, as a BitNet checkpoint converted
    /// to GGUF has.
    pub uniform_scales: bool,
    /// Q/K/V and gate/up as one `matmul_many` each, as an engine (the ggml backend) calls
    /// them, instead of one `matmul` per weight.
    pub many: bool,
}

/// Median time of each measurement over the interleaved rounds, and the calls a pass makes.
struct Results {
    tg: Duration,
    pp: Duration,
    probe: Duration,
    /// Dispatcher calls per token pass.
    calls: usize,
}

pub fn run(model: &Model, o: &Options) -> Result<(), String> {
    if o.layers == 0 || o.layers > model.layers {
        return Err(format!("--layers must be in 1..={} for {}", model.layers, model.name));
    }
    let mut progress = Progress::new();
    progress.step(0, 3, "random weights");
    let stack = weights(model, o.format, o.layers, o.uniform_scales)?;
    let weight_bytes: usize = stack.iter().map(|w| w.bytes().map(<[u8]>::len).unwrap_or(0)).sum();
    let mut rng = Rng::new(7);
    let act = |m: usize, k: usize, rng: &mut Rng| Tensor::encode(Format::I8Absmax, &rng.units(m * k), m, k);
    let acts = |m: usize, rng: &mut Rng| -> Result<Vec<Tensor<'static>>, String> {
        let mut ks: Vec<usize> = model.matmuls.iter().map(|&(_, _, k)| k).collect();
        ks.dedup();
        ks.iter().map(|&k| act(m, k, rng).map_err(|e| e.to_string())).collect()
    };
    let (act1, act_m) = (acts(1, &mut rng)?, acts(o.tokens, &mut rng)?);
    let options = tern::DispatcherOptions { n_threads: o.threads, kernel: o.kernel.clone(), ..Default::default() };
    let d = tern::Dispatcher::new(options).map_err(|e| e.to_string())?;
    // The weights of each call of a token pass, made once: only the calls are timed.
    let groups = dispatch_groups(model, o.many);
    let calls: Vec<Vec<&Tensor>> = stack
        .chunks(model.matmuls.len())
        .flat_map(|layer| groups.iter().map(move |g| layer[g.clone()].iter().collect()))
        .collect();
    let max_rows = calls.iter().map(|ws| ws.iter().map(|w| w.rows()).sum::<usize>()).max().unwrap_or(0);
    let mut out = vec![0f32; o.tokens * max_rows];
    let pass = |acts: &[Tensor], out: &mut [f32]| -> Result<(), String> {
        for weights in &calls {
            let a = acts.iter().find(|a| a.cols() == weights[0].cols()).expect("an activation for every k");
            let mut outs = Vec::with_capacity(weights.len());
            let mut rest = &mut out[..];
            for w in weights {
                let (mine, others) = rest.split_at_mut(a.rows() * w.rows());
                outs.push(mine);
                rest = others;
            }
            d.matmul_many(a, weights, None, &mut outs).map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    // Warm-up: the pool's threads, the GEMM's per-thread buffers, page faults of `out`.
    pass(&act1, &mut out)?;
    pass(&act_m, &mut out)?;
    // One thread: its CPU time, which other jobs on a shared machine barely disturb;
    // several: wall time.
    let clock = if o.threads == 1 { Clock::ThreadCpu } else { Clock::Wall };
    let (mut tg, mut pp, mut probe) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..o.rounds {
        progress.step(round + 1, o.rounds, "tg, read probe, pp");
        let (result, t) = clock.measure(|| pass(&act1, &mut out));
        tg.push((result?, t).1);
        probe.push(clock.measure(|| std::hint::black_box(read_probe(&stack, o.threads))).1);
        let (result, t) = clock.measure(|| pass(&act_m, &mut out));
        pp.push((result?, t).1);
    }
    progress.finish();
    let r = Results { tg: median(tg), pp: median(pp), probe: median(probe), calls: calls.len() };
    if o.json {
        print_json(model, o, &r, weight_bytes);
    } else {
        print_table(model, o, &r, weight_bytes);
    }
    Ok(())
}

/// A layer's matmuls in the order of the model, cut into one dispatch each: with `many`,
/// runs of neighbours that read the same activation; otherwise one matmul each.
fn dispatch_groups(model: &Model, many: bool) -> Vec<std::ops::Range<usize>> {
    let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
    for (i, &input) in model.inputs.iter().enumerate() {
        match groups.last_mut() {
            Some(g) if many && model.inputs[g.start] == input => g.end = i + 1,
            _ => groups.push(i..i + 1),
        }
    }
    groups
}

/// The layer stack, `layers` times the model's seven matmuls. One layer is encoded from
/// random normal values (with `uniform`, each TQ matrix then given one block scale); the
/// others are copies of its bytes in their own memory, which reads the same (what is
/// measured is streaming them from DRAM, not their values).
fn weights(model: &Model, format: Format, layers: usize, uniform: bool) -> Result<Vec<Tensor<'static>>, String> {
    let mut rng = Rng::new(42);
    let mut first = Vec::new();
    for &(_, n, k) in &model.matmuls {
        format.check_shape(n, k).map_err(|e| e.to_string())?;
        let src: Vec<f32> = (0..n * k).map(|_| rng.normal()).collect();
        let mut bytes = vec![0u8; format.bytes_for(n, k).map_err(|e| e.to_string())?];
        format.encode(&src, n, k, &mut bytes).map_err(|e| e.to_string())?;
        if uniform {
            let w = with_uniform_scales(Tensor::from_vec(format, bytes, n, k).map_err(|e| e.to_string())?)?;
            bytes = w.bytes().map_err(|e| e.to_string())?.to_vec();
        }
        first.push((bytes, n, k));
    }
    let mut stack = Vec::new();
    for _ in 0..layers {
        for (bytes, n, k) in &first {
            stack.push(Tensor::from_vec(format, bytes.clone(), *n, *k).map_err(|e| e.to_string())?);
        }
    }
    Ok(stack)
}

/// Reads every weight byte once, split over `threads` threads (the caller and scoped
/// helpers): the bandwidth a matmul that only streams its weights could reach.
fn read_probe(stack: &[Tensor], threads: usize) -> u64 {
    let slices: Vec<&[u8]> = stack.iter().filter_map(|w| w.bytes().ok()).collect();
    let sum_part = |part: usize| -> u64 {
        let mut s = 0u64;
        for bytes in &slices {
            let chunk = bytes.len().div_ceil(threads);
            let mine = bytes.chunks(chunk.max(1)).nth(part).unwrap_or(&[]);
            // SAFETY: every bit pattern is a valid u64; `align_to` only reinterprets the
            // aligned middle of the slice.
            let (head, words, tail) = unsafe { mine.align_to::<u64>() };
            // Eight independent lanes (vector adds), so the adds are never the limit.
            let mut lanes = [0u64; 8];
            for w in words.chunks_exact(8) {
                for (l, &x) in lanes.iter_mut().zip(w) {
                    *l = l.wrapping_add(x);
                }
            }
            let edges = head.iter().chain(tail).map(|&b| b as u64);
            s = lanes.iter().copied().chain(edges).fold(s, u64::wrapping_add);
        }
        s
    };
    if threads <= 1 {
        return std::hint::black_box(sum_part(0));
    }
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads).map(|p| scope.spawn(move || sum_part(p))).collect();
        let mine = sum_part(0);
        helpers.into_iter().fold(mine, |a, h| a.wrapping_add(h.join().unwrap_or(0)))
    })
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn gb_per_s(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}

fn print_table(model: &Model, o: &Options, r: &Results, weight_bytes: usize) {
    let matmuls = o.layers * model.matmuls.len();
    outln!(
        "tern bench --model {}: {} layer(s), {matmuls} matmuls in {} calls, {} weights, {} thread(s), {} round(s) interleaved",
        model.name,
        o.layers,
        r.calls,
        o.format.name(),
        o.threads,
        o.rounds
    );
    outln!("  shapes: {}", model.source);
    let uniform = if o.uniform_scales { ", one scale per matrix" } else { "" };
    outln!("  weights: {} bytes per token pass (DRAM-resident{uniform})", group(weight_bytes));
    let probe = gb_per_s(weight_bytes, r.probe);
    outln!("  {:<22}{:>12}{:>14}{:>10}{:>14}", "test", "time", "tokens/s", "GB/s", "of read probe");
    for (what, m, t) in [("tg (m = 1)".to_owned(), 1, r.tg), (format!("pp (m = {})", o.tokens), o.tokens, r.pp)] {
        let gbs = gb_per_s(weight_bytes, t);
        outln!(
            "  {:<22}{:>12}{:>14.2}{:>10.2}{:>13.0}%",
            what,
            fmt_duration(t),
            m as f64 / t.as_secs_f64(),
            gbs,
            100.0 * gbs / probe
        );
    }
    outln!("  {:<22}{:>12}{:>14}{:>10.2}", "read probe", fmt_duration(r.probe), "-", probe);
    let clock = if o.threads == 1 && Clock::ThreadCpu.is_cpu_time() { "thread CPU time" } else { "wall time" };
    outln!("  medians of {clock}; the matmul part only (no attention, norms or sampling)");
}

fn print_json(model: &Model, o: &Options, r: &Results, weight_bytes: usize) {
    let tps = |m: usize, t: Duration| m as f64 / t.as_secs_f64();
    let doc = json!({
        "model": model.name,
        "shapes_source": model.source,
        "format": o.format.name(),
        "layers": o.layers,
        "uniform_scales": o.uniform_scales,
        "many": o.many,
        "calls": r.calls,
        "threads": o.threads,
        "rounds": o.rounds,
        "clock": if o.threads == 1 && Clock::ThreadCpu.is_cpu_time() { "thread_cpu" } else { "wall" },
        "weight_bytes": weight_bytes,
        "tokens_per_second": { "tg": tps(1, r.tg), "pp": tps(o.tokens, r.pp) },
        "pp_tokens": o.tokens,
        "median_ns": { "tg": r.tg.as_nanos() as u64, "pp": r.pp.as_nanos() as u64, "read_probe": r.probe.as_nanos() as u64 },
        "gb_per_s": {
            "tg": gb_per_s(weight_bytes, r.tg),
            "pp": gb_per_s(weight_bytes, r.pp),
            "read_probe": gb_per_s(weight_bytes, r.probe),
        },
    });
    outln!("{}", serde_json::to_string_pretty(&doc).expect("a JSON value serializes"));
}
