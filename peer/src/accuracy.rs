//! Activation accuracy: tern's relative L2 error against an exact (f64) product next to
//! ggml's, on the same operands (`--accuracy` runs only this part; no timing).
//!
//! Operands: weights uniform in [-1, 1) quantized by ggml (`ggml_quantize_chunk`, the bytes
//! tern reads as they are), at 4096x4096 and 2560x6912 (rows x k), TQ1_0, TQ2_0 and Q2_0;
//! `TOKENS` activation rows, Gaussian, and Gaussian with 1 % of the channels (the same
//! columns in every token) 30x larger. The exact product is the f64 dot of tern's decode of
//! the weight bytes (ggml's dequantization, bit for bit) with the f32 activations.
//!
//! - ggml: the weight type's `vec_dot_type` (Q8_K per 256 for TQ1_0/TQ2_0, Q8_0 per 32 for
//!   Q2_0) quantized by ggml-cpu's `from_float`, then `vec_dot` per row, as ggml's matmul;
//! - tern per-token: `Dispatcher::matmul` with an F32 activation (I8_ABSMAX, one scale per
//!   token);
//! - tern per-block: the same with `accurate_activations` (I8_BLOCK256 for TQ1_0/TQ2_0,
//!   I8_BLOCK32 for Q2_0).
//!
//! Check: tern's per-block error is no larger than ggml's, for every case, up to
//! `SAME_RULE_MARGIN`. I8_BLOCK256 and Q8_K are the same scheme (per 256 elements, scale
//! `max |x| / 127`, codes clamped to ±127, exact integer dots scaled per block), so their
//! errors agree to 1e-5 relative here; they differ only in rounding neither side controls
//! (ggml rounds `x * (-127 / max)` to nearest, tern `x / (max / 127)` half away from zero,
//! so an element within an ulp of a half step can take the neighbouring code; ggml sums the
//! blocks of a row in another order). I8_BLOCK32 is Q8_0's scheme with the scale kept in
//! f32 where Q8_0 rounds it to f16, so tern's error is the same or slightly smaller. A real
//! loss of accuracy is far outside the margin: per-token scales cost 1.2x (Gaussian) to
//! 2.1x (outliers) here for TQ, more for Q2_0.

use crate::check::verdict;
use crate::ggml::{self, Aligned};
use llama_cpp_sys_2 as sys;
use std::ffi::{c_int, c_void};
use tern::dispatch::{Dispatcher, DispatcherOptions};
use tern::{Format, Scope, Tensor};

/// Activation rows per case: enough tokens that each case averages over several scales'
/// roundings, few enough that the Q2_0 reference kernel stays fast.
const TOKENS: usize = 4;

/// Share of outlier channels and their size relative to the others.
const OUTLIER_EVERY: usize = 100;
const OUTLIER_GAIN: f32 = 30.0;

/// How much larger than ggml's tern's per-block error may be (see the module docs).
const SAME_RULE_MARGIN: f64 = 1e-3;

/// (rows, k) of the weights.
const SHAPES: [(usize, usize); 2] = [(4096, 4096), (2560, 6912)];

/// A deterministic Gaussian stream (splitmix64 and Box-Muller).
struct Gauss(u64);

impl Gauss {
    fn u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    fn next(&mut self) -> f32 {
        let (u, v) = (self.unit(), self.unit());
        ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
    }
}

/// `TOKENS x k` Gaussian activations; with `outliers`, every channel `c` with
/// `c % OUTLIER_EVERY == 7` (1 %, spread over the blocks) is `OUTLIER_GAIN` times larger.
fn activations(k: usize, outliers: bool, seed: u64) -> Vec<f32> {
    let mut g = Gauss(seed);
    (0..TOKENS * k)
        .map(|i| {
            let x = g.next();
            if outliers && i % k % OUTLIER_EVERY == 7 {
                x * OUTLIER_GAIN
            } else {
                x
            }
        })
        .collect()
}

/// `||y - exact|| / ||exact||` in f64.
fn rel_err(y: &[f32], exact: &[f64]) -> f64 {
    let d: f64 = y.iter().zip(exact).map(|(&y, &e)| (y as f64 - e).powi(2)).sum();
    let z: f64 = exact.iter().map(|e| e * e).sum();
    (d / z).sqrt()
}

/// The exact `TOKENS x n` product of the decoded weights `w` (`n x k`) and `x`.
fn exact(w: &[f32], x: &[f32], n: usize, k: usize) -> Vec<f64> {
    let mut out = vec![0f64; TOKENS * n];
    for t in 0..TOKENS {
        let xt = &x[t * k..(t + 1) * k];
        for r in 0..n {
            out[t * n + r] = w[r * k..(r + 1) * k].iter().zip(xt).map(|(&a, &b)| a as f64 * b as f64).sum();
        }
    }
    out
}

/// ggml's product, as its matmul computes it: each activation row quantized to the weight
/// type's `vec_dot_type` by ggml-cpu's `from_float`, then `vec_dot` per weight row.
fn ggml_product(ty: u32, w: &Aligned, x: &[f32], n: usize, k: usize) -> Vec<f32> {
    ggml::init();
    // SAFETY: pointers into ggml-cpu's and ggml's static type tables, for valid type ids,
    // after init().
    let (cpu, wt) = unsafe { (&*sys::ggml_get_type_traits_cpu(ty), &*sys::ggml_get_type_traits(ty)) };
    // SAFETY: as above, the activation type's entries.
    let (act_cpu, act) =
        unsafe { (&*sys::ggml_get_type_traits_cpu(cpu.vec_dot_type), &*sys::ggml_get_type_traits(cpu.vec_dot_type)) };
    assert_eq!(cpu.nrows, 1, "vec_dot handles one row per call");
    let (vec_dot, from_float) = (cpu.vec_dot.expect("vec_dot"), act_cpu.from_float.expect("from_float"));
    let row_bytes = k / wt.blck_size as usize * wt.type_size;
    let mut q = Aligned::zeroed(k / act.blck_size as usize * act.type_size);
    let mut out = vec![0f32; TOKENS * n];
    for t in 0..TOKENS {
        // SAFETY: the row holds k floats, `q` the k / blck_size blocks of the activation
        // type, cache-line aligned.
        unsafe { from_float(x[t * k..].as_ptr(), q.bytes_mut().as_mut_ptr().cast(), k as i64) };
        for r in 0..n {
            // SAFETY: weight row r spans row_bytes inside `w` (n rows), `q` one quantized
            // row of k; one output float; strides are ignored when nrc == 1.
            unsafe {
                vec_dot(
                    k as c_int,
                    &mut out[t * n + r],
                    0,
                    w.bytes().as_ptr().add(r * row_bytes) as *const c_void,
                    0,
                    q.bytes().as_ptr().cast(),
                    0,
                    1,
                )
            };
        }
    }
    out
}

/// tern's product through the dispatcher, from the F32 activation.
fn tern_product(accurate: bool, w: &Tensor, x: &[f32], n: usize, k: usize) -> Vec<f32> {
    let options = DispatcherOptions { ignore_env: true, accurate_activations: accurate, ..Default::default() };
    let d = Dispatcher::new(options).expect("a dispatcher");
    let act = Tensor::encode(Format::F32, x, TOKENS, k).expect("finite activations");
    let mut scope = Scope::new(0).expect("a scope");
    let mut out = vec![0f32; TOKENS * n];
    d.matmul(&act, w, Some(&mut scope), &mut out).expect("tern matmul");
    out
}

/// Runs every case; returns the failed checks.
pub fn run() -> usize {
    println!("activation accuracy: relative L2 error against the exact f64 product ({TOKENS} tokens)");
    println!(
        "  {:<10} {:<5} {:<9} {:>11} {:>11} {:>11} {:>9}",
        "shape", "w", "act", "ggml", "tern/token", "tern/block", "block/ggml"
    );
    let mut failures = 0;
    for (n, k) in SHAPES {
        let w_src = crate::data::Rng::for_shape(n, k).fill(n * k);
        for (format, ty) in
            [(Format::Tq1_0, ggml::TYPE_TQ1_0), (Format::Tq2_0, ggml::TYPE_TQ2_0), (Format::Q2_0, ggml::TYPE_Q2_0)]
        {
            let mut wq = Aligned::zeroed(format.bytes_for(n, k).expect("shape fits"));
            ggml::quantize_chunk(ty, &w_src, n, k, &mut wq);
            let w = Tensor::wrap(format, wq.bytes(), n, k).expect("ggml's bytes are a tern tensor");
            let mut wf = vec![0f32; n * k];
            format.decode(wq.bytes(), n, k, &mut wf).expect("decodes");
            for (label, outliers) in [("gauss", false), ("outlier", true)] {
                let x = activations(k, outliers, 0xacc ^ (n as u64) << 16 ^ k as u64);
                let want = exact(&wf, &x, n, k);
                let ggml_err = rel_err(&ggml_product(ty, &wq, &x, n, k), &want);
                let token_err = rel_err(&tern_product(false, &w, &x, n, k), &want);
                let block_err = rel_err(&tern_product(true, &w, &x, n, k), &want);
                let ok = block_err <= ggml_err * (1.0 + SAME_RULE_MARGIN);
                failures += !ok as usize;
                println!(
                    "  {:<10} {:<5} {:<9} {ggml_err:>11.3e} {token_err:>11.3e} {block_err:>11.3e} {:>9.5} {}",
                    format!("{n}x{k}"),
                    format.name(),
                    label,
                    block_err / ggml_err,
                    verdict(ok)
                );
            }
        }
    }
    failures
}
