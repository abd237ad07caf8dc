//! The GEMV part (m = 1): ggml's `vec_dot` per row next to every tern kernel this CPU
//! runs, one thread, activation quantized outside the timing on both sides, with a read
//! bandwidth probe for the DRAM-resident shape.

use crate::check::{check_bytes, rel_l2, verdict, DOT_TOLERANCE, KERNEL_TOLERANCE};
use crate::data::Rng;
use crate::ggml;
use crate::timing::{self, Budget, Timed};
use tern::kernel::{registry, Kernel, MatRef, OutTile};
use tern::{Dispatcher, DispatcherOptions, Format};

struct Shape {
    label: &'static str,
    n: usize,
    k: usize,
    formats: &'static [Format],
}

const ALL: &[Format] = &[Format::Tq1_0, Format::Tq2_0, Format::Q2_0, Format::BitnetB158, Format::I2S];

/// The formats with one scale per tensor, which ggml lacks: compared with ggml's TQ2_0 (the
/// same 2 bits per weight) and tern's best TQ2_0 kernel.
fn one_scale(f: Format) -> bool {
    matches!(f, Format::BitnetB158 | Format::I2S | Format::I2S64)
}

/// Runs every shape; returns the number of failed checks.
pub fn run(quick: bool, budget: &Budget) -> usize {
    let shapes = [
        Shape { label: "square 4096x4096", n: 4096, k: 4096, formats: ALL },
        Shape { label: "BitNet-2B attn 2560x2560", n: 2560, k: 2560, formats: ALL },
        Shape { label: "BitNet-2B ffn up 6912x2560", n: 6912, k: 2560, formats: ALL },
        Shape { label: "BitNet-2B ffn down 2560x6912", n: 2560, k: 6912, formats: ALL },
        Shape {
            label: "DRAM-resident 32768x8192",
            n: 32768,
            k: 8192,
            formats: if quick { &[Format::Tq2_0] } else { ALL },
        },
    ];
    println!("== GEMV: ggml vec_dot vs tern kernels, single thread, m = 1 ==");
    let probe = timing::ReadProbe::new(256 << 20);
    println!("read bandwidth (sum of u64 over 256 MiB): {:.1} GB/s", probe.bandwidth(budget) / 1e9);
    println!("(DRAM-resident shapes time this probe again in the same rounds as their GEMVs)\n");
    shapes.iter().map(|shape| run_shape(shape, budget, &probe)).sum()
}

/// A timed GEMV: its label, whether it is tern's best kernel, and the call.
type GemvImpl<'a> = (String, bool, Box<dyn FnMut() + 'a>);

/// One timed implementation of a shape's GEMV, with its output for the checks.
struct Row {
    format: Format,
    name: String,
    secs: f64,
    bytes: usize,
    /// Plain read bandwidth (bytes/s) measured in the same rounds, for DRAM-resident shapes.
    read_bw: Option<f64>,
}

/// Runs one shape: builds the operands, checks parity, times, prints. Returns the number
/// of failed checks.
fn run_shape(shape: &Shape, budget: &Budget, probe: &timing::ReadProbe) -> usize {
    let (n, k) = (shape.n, shape.k);
    // Weights larger than the last-level cache stream from DRAM on every call.
    let dram = n * k > 64 << 20;
    println!("== {} (n x k = {n} x {k}), m = 1 ==", shape.label);
    let mut rng = Rng::for_shape(n, k);
    let w = rng.fill(n * k);
    let x = rng.fill(k);

    let mut act = vec![0u8; Format::I8Absmax.bytes_for(1, k).expect("activation shape")];
    Format::I8Absmax.encode(&x, 1, k, &mut act).expect("encode activation");
    let act_ref = MatRef::new(Format::I8Absmax, 1, k, &act).expect("activation view");

    // The kernel a default dispatcher picks for one token is the one marked best.
    let dispatcher = Dispatcher::new(DispatcherOptions::default()).expect("a default dispatcher");
    let mut failures = 0;
    let mut rows: Vec<Row> = Vec::new();
    let mut tq2_best = None;
    for &format in shape.formats {
        let mut wt = vec![0u8; format.bytes_for(n, k).expect("weight shape")];
        format.encode(&w, n, k, &mut wt).expect("encode weight");
        let w_ref = MatRef::new(format, n, k, &wt).expect("weight view");
        // Every kernel serving (format, I8_ABSMAX) that this CPU runs, each timed on its own.
        let kernels: Vec<&'static Kernel> =
            registry().iter().filter(|kern| kern.weight() == format && kern.act() == Format::I8Absmax).collect();
        let available: Vec<&'static Kernel> = kernels.iter().copied().filter(|kern| kern.is_available()).collect();
        let best =
            dispatcher.plan(format, Format::I8Absmax, 1).expect("a kernel for every ternary format").kernel.name();

        // ggml's side, for the formats ggml has (its type 36 is not bitnet.cpp's I2_S).
        let peer = format.ggml_type().filter(|_| !one_scale(format)).map(|ty| {
            let q = ggml::Quant::new(ty, k);
            let gw = q.quantize(&w, n, k);
            let qa = q.quantize_act(&x);
            (q, gw, qa)
        });
        if let Some((q, gw, _)) = &peer {
            failures += check_bytes(format.name(), gw.bytes(), &wt, n, q.row_bytes);
        }

        // Outputs of one call each, for the dot-product checks.
        let tern_out = |kern: &'static Kernel| {
            let mut out = vec![0f32; n];
            let mut view = OutTile::new(&mut out, 1, n).expect("output view");
            kern.run(&w_ref, &act_ref, &mut view).expect("operands fit");
            out
        };
        let reference = *kernels
            .iter()
            .find(|kern| kern.name() == "bitnet_gemv/reference")
            .expect("a reference kernel for every ternary format");
        let ref_out = tern_out(reference);
        if let Some((q, gw, qa)) = &peer {
            let mut g_out = vec![0f32; n];
            q.gemv(gw.bytes(), k, qa.bytes(), &mut g_out);
            failures += check_dots(format, &wt, n, k, &x, &g_out, &ref_out);
        }
        // The reference is the definition, so only the other kernels are checked against it.
        let mut wrong = Vec::new();
        for kern in available.iter().filter(|kern| kern.name() != reference.name()) {
            let diff = rel_l2(&tern_out(kern), &ref_out, &ref_out);
            let ok = diff <= KERNEL_TOLERANCE;
            if !ok {
                failures += 1;
                wrong.push(kern.name());
            }
            println!(
                "  check {:<13} {:<26} vs reference: rel L2 {diff:.1e} (tol {KERNEL_TOLERANCE:.0e}) {}",
                format.name(),
                kern.name(),
                verdict(ok)
            );
        }

        // Timing: ggml first (it is the baseline), then every available tern kernel. Each
        // closure owns its output buffer.
        let mut impls: Vec<GemvImpl> = Vec::new();
        if let Some((q, gw, qa)) = &peer {
            let mut out = vec![0f32; n];
            impls.push(("ggml vec_dot".into(), false, Box::new(move || q.gemv(gw.bytes(), k, qa.bytes(), &mut out))));
        }
        for kern in &available {
            let is_best = kern.name() == best;
            let label = match (is_best, wrong.contains(&kern.name())) {
                (_, true) => format!("{} (WRONG)", kern.name()),
                (true, false) => format!("{} (best)", kern.name()),
                (false, false) => kern.name().into(),
            };
            let (kern, mut out) = (*kern, vec![0f32; n]);
            impls.push((
                label,
                is_best,
                Box::new(move || {
                    let mut view = OutTile::new(&mut out, 1, n).expect("output view");
                    kern.run(&w_ref, &act_ref, &mut view).expect("operands fit");
                }),
            ));
        }
        let mut read = || probe.run();
        let mut secs = {
            let mut fns: Vec<&mut dyn Timed> = impls.iter_mut().map(|(_, _, f)| f as &mut dyn Timed).collect();
            if dram {
                fns.push(&mut read);
            }
            timing::measure(budget, &mut fns)
        };
        let read_bw = dram.then(|| probe.bytes() as f64 / secs.pop().expect("probe timing"));
        for ((name, is_best, _), secs) in impls.iter().zip(secs) {
            if format == Format::Tq2_0 && *is_best {
                tq2_best = Some(secs);
            }
            rows.push(Row { format, name: name.clone(), secs, bytes: wt.len(), read_bw });
        }
        for kern in kernels.iter().filter(|kern| !kern.is_available()) {
            println!("  skip  {:<13} {:<26} not available on this CPU", format.name(), kern.name());
        }
    }
    print_table(&rows, tq2_best, dram);
    println!();
    failures
}

/// ggml's vec_dot and tern's reference GEMV against the exact product of the dequantized
/// weight (tern decode) and the f32 activation, and against each other.
fn check_dots(format: Format, wt: &[u8], n: usize, k: usize, x: &[f32], ggml: &[f32], tern: &[f32]) -> usize {
    let mut row = vec![0f32; k];
    let exact: Vec<f32> = (0..n)
        .map(|r| {
            // Decoding a row at a time keeps the 1 GiB DRAM-shape weight out of f32.
            let bytes_per_row = wt.len() / n;
            format.decode(&wt[r * bytes_per_row..][..bytes_per_row], 1, k, &mut row).expect("decode row");
            row.iter().zip(x).map(|(&w, &x)| w as f64 * x as f64).sum::<f64>() as f32
        })
        .collect();
    let g = rel_l2(ggml, &exact, &exact);
    let t = rel_l2(tern, &exact, &exact);
    let gt = rel_l2(ggml, tern, &exact);
    let ok = g <= DOT_TOLERANCE && t <= DOT_TOLERANCE && gt <= DOT_TOLERANCE;
    println!(
        "  check {:<13} dots: rel L2 vs exact: ggml({}) {g:.1e}, tern(I8_ABSMAX) {t:.1e}; ggml vs tern {gt:.1e} (tol {DOT_TOLERANCE:.0e}) {}",
        format.name(),
        if format == Format::Q2_0 { "Q8_0" } else { "Q8_K" },
        verdict(ok)
    );
    usize::from(!ok)
}

/// The timing table. `tern/ggml` compares with ggml on the same format (TQ2_0 for
/// BITNET_B1_58, the same 2 bits per weight); `vs tern TQ2_0` compares BITNET_B1_58 with
/// tern's best TQ2_0 kernel.
fn print_table(rows: &[Row], tq2_best: Option<f64>, dram: bool) {
    let ggml_ms = |f: Format| {
        let f = if one_scale(f) { Format::Tq2_0 } else { f };
        rows.iter().find(|r| r.format == f && r.name == "ggml vec_dot").map(|r| r.secs)
    };
    println!(
        "  {:<13} {:<33} {:>9} {:>8} {:>9} {:>9} {:>10}{}",
        "format",
        "implementation",
        "ms",
        "GB/s",
        "tern/ggml",
        "ggml/tern",
        "vs tern TQ2",
        if dram { "  % of read GB/s" } else { "" }
    );
    for r in rows {
        let gbs = r.bytes as f64 / r.secs / 1e9;
        let (t_over_g, g_over_t) = match ggml_ms(r.format) {
            Some(g) => (format!("{:.2}", r.secs / g), format!("{:.2}", g / r.secs)),
            None => ("-".into(), "-".into()),
        };
        let vs_tq2 = match (r.format, tq2_best) {
            (f, Some(t)) if one_scale(f) => format!("{:.2}", r.secs / t),
            _ => "-".into(),
        };
        let pct = match r.read_bw {
            Some(bw) => format!("  {:>9.0}% of {:.1}", 100.0 * gbs * 1e9 / bw, bw / 1e9),
            None => String::new(),
        };
        println!(
            "  {:<13} {:<33} {:>9.3} {:>8.1} {:>9} {:>9} {:>10}{pct}",
            r.format.name(),
            r.name,
            r.secs * 1e3,
            gbs,
            t_over_g,
            g_over_t,
            vs_tq2
        );
    }
}
