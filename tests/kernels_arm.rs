//! aarch64 kernels against the reference kernel (the definition), and the NEON
//! requantizer against `encode_row`. Runs under qemu-user: `scripts/test-aarch64.sh`.
#![cfg(target_arch = "aarch64")]

mod common;
use common::Rng;
use tern::kernel::{reference, registry, requant_row, Kernel, KernelFn, MatRef, OutRows};
use tern::Format;

const TERNARY: [Format; 3] = [Format::Tq1_0, Format::Tq2_0, Format::BitnetB158];
const PATHS: [&str; 2] = ["bitnet_gemv/neon-dotprod", "bitnet_gemv/neon"];

fn encode(format: Format, src: &[f32], rows: usize, cols: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; format.bytes_for(rows, cols).unwrap()];
    format.encode(src, rows, cols, &mut bytes).unwrap();
    bytes
}

/// The kernel `name` for `format`, if this CPU runs it.
fn kernel(name: &str, format: Format) -> Option<&'static Kernel> {
    let k = registry().iter().find(|k| k.name() == name && k.weight == format && k.act == Format::I8Absmax);
    let k = k.unwrap_or_else(|| panic!("{name} for {format:?} is not registered"));
    (k.available)().then_some(k)
}

/// Runs `run` over output rows `rows` of an `m x n` output prefilled with NaN.
fn run(run: KernelFn, w: &MatRef, a: &MatRef, rows: std::ops::Range<usize>) -> Vec<f32> {
    let (m, n) = (a.rows, w.rows);
    let mut out = vec![f32::NAN; m * n];
    run(w, a, &mut OutRows::new(&mut out, m, n, rows).unwrap());
    out
}

/// Checks every available aarch64 kernel against the reference on the given operands;
/// returns how many kernels ran.
fn check(
    format: Format,
    w_bytes: &[u8],
    a_bytes: &[u8],
    m: usize,
    n: usize,
    k: usize,
    rows: std::ops::Range<usize>,
) -> usize {
    let w = MatRef::new(format, n, k, w_bytes).unwrap();
    let a = MatRef::new(Format::I8Absmax, m, k, a_bytes).unwrap();
    let want = run(reference::bitnet_gemv, &w, &a, rows.clone());
    let mut ran = 0;
    for name in PATHS {
        let Some(kernel) = kernel(name, format) else { continue };
        ran += 1;
        let got = run(kernel.run, &w, &a, rows.clone());
        for t in 0..m {
            for r in 0..n {
                let (g, e) = (got[t * n + r], want[t * n + r]);
                let ctx = format!("{name} {format:?} m={m} n={n} k={k} rows={rows:?}: out[{t}][{r}]");
                if rows.contains(&r) {
                    assert!((g - e).abs() <= 1e-5 * e.abs().max(1.0), "{ctx} = {g}, reference {e}");
                } else {
                    assert!(g.is_nan(), "{ctx} outside the row range was written");
                }
            }
        }
    }
    ran
}

fn random_case(format: Format, m: usize, n: usize, k: usize, seed: u64) -> (Vec<u8>, Vec<u8>) {
    let mut rng = Rng(seed);
    let w = encode(format, &rng.vec(n * k, 1.0), n, k);
    let a = encode(Format::I8Absmax, &rng.vec(m * k, 3.0), m, k);
    (w, a)
}

fn ks(format: Format) -> &'static [usize] {
    match format {
        // 100, 260, 452: partial chunks after 0, 1 and 1 full 256-groups (452 leaves 3 full 64-chunks).
        Format::BitnetB158 => &[100, 192, 260, 452, 256, 1024],
        _ => &[256, 1024],
    }
}

#[test]
fn parity_with_reference() {
    let mut ran = 0;
    for format in TERNARY {
        for &k in ks(format) {
            for m in [1, 3, 8] {
                for n in [37, 67] {
                    let (w, a) = random_case(format, m, n, k, (m * 1000 + n * 10 + k) as u64);
                    ran += check(format, &w, &a, m, n, k, 0..n);
                }
            }
        }
    }
    assert!(ran > 0, "no aarch64 kernel ran");
}

#[test]
fn parity_with_reference_many_tokens() {
    for format in TERNARY {
        for &k in ks(format) {
            let (w, a) = random_case(format, 128, 37, k, 7 + k as u64);
            check(format, &w, &a, 128, 37, k, 0..37);
        }
    }
}

#[test]
fn parity_on_row_ranges() {
    for format in TERNARY {
        let k = ks(format)[0];
        for m in [1, 3] {
            let (w, a) = random_case(format, m, 67, k, 99);
            for rows in [0..1, 5..6, 3..40, 40..67, 66..67, 10..10] {
                check(format, &w, &a, m, 67, k, rows);
            }
        }
    }
}

/// Extreme activations (+-127 everywhere, and the out-of-alphabet -128) with all-+1 and
/// all--1 weights exercise the widest partial sums.
#[test]
fn parity_at_extremes() {
    for format in TERNARY {
        for &k in ks(format) {
            for sign in [1.0f32, -1.0] {
                let w = encode(format, &vec![sign; 5 * k], 5, k);
                for code in [127i8, -127, -128] {
                    let mut a = encode(Format::I8Absmax, &vec![1.0; 3 * k], 3, k);
                    a[..3 * k].fill(code as u8);
                    check(format, &w, &a, 3, 5, k, 0..5);
                }
            }
        }
    }
}

/// Code 3 is outside the alphabet: it counts as +2 in every kernel, as ggml decodes it.
/// TQ1_0 has no such code, but any byte (canonical or not, a qh byte with a fifth digit)
/// must decode to the digits the reference reads from it.
#[test]
fn parity_on_corrupt_codes() {
    for format in TERNARY {
        for &k in ks(format) {
            for m in [1, 3] {
                let (mut w, a) = random_case(format, m, 37, k, 5);
                // Only code bytes are corrupted; the scales stay intact.
                let is_code = |i: usize| match format {
                    Format::Tq1_0 => i % 54 < 52,
                    Format::Tq2_0 => i % 66 < 64,
                    _ => i < (37 * k).div_ceil(4),
                };
                let mut rng = Rng(11);
                for _ in 0..w.len() / 3 {
                    let i = (rng.next_u64() % w.len() as u64) as usize;
                    if !is_code(i) {
                        continue;
                    }
                    match format {
                        Format::Tq1_0 => w[i] = rng.next_u64() as u8,
                        _ => w[i] |= 3 << (2 * (rng.next_u64() % 4)),
                    }
                }
                assert!(format.validate(&w, 37, k).is_err(), "the corruption did not take");
                check(format, &w, &a, m, 37, k, 0..37);
            }
        }
    }
}

/// The best available ternary kernel is the one this CPU should get; under qemu,
/// `scripts/test-aarch64.sh` sets TERN_EXPECT_ARM_KERNEL from QEMU_CPU.
#[test]
fn best_kernel_for_this_cpu() {
    let expected = if std::arch::is_aarch64_feature_detected!("dotprod") {
        "bitnet_gemv/neon-dotprod"
    } else {
        "bitnet_gemv/neon"
    };
    for format in TERNARY {
        // The KERNEL_SELECTED event of a real dispatch proves which path ran.
        let sink = std::sync::Arc::new(tern::RecordingSink::default());
        let mut dispatcher = tern::Dispatcher::new(tern::DispatcherOptions::default()).unwrap();
        dispatcher.set_sink(Some(sink.clone()));
        let (n, k) = (8, 256);
        let weight = tern::Tensor::encode(format, &vec![0.25; n * k], n, k).unwrap();
        let act = tern::Tensor::encode(Format::F32, &vec![1.0; k], 1, k).unwrap();
        let mut scope = tern::Scope::new(0).unwrap();
        dispatcher.matmul(&act, &weight, Some(&mut scope), &mut [0.0; 8]).unwrap();
        let events = sink.events();
        let ran = events.last().expect("a kernel event").name();
        assert_eq!(ran, expected, "{format:?}");
        if let Some(want) = std::env::var("TERN_EXPECT_ARM_KERNEL").ok().filter(|w| !w.is_empty()) {
            assert_eq!(ran, want, "{format:?} (QEMU_CPU={:?})", std::env::var("QEMU_CPU").ok());
        }
    }
}

fn requant_matches(x: &[f32]) {
    let mut want = vec![0u8; x.len() + 4];
    Format::I8Absmax.encode(x, 1, x.len(), &mut want).unwrap();
    let mut got = vec![99i8; x.len()];
    let scale = requant_row()(x, &mut got);
    let got_bytes: Vec<u8> = got.iter().map(|&c| c as u8).chain(scale.to_le_bytes()).collect();
    assert_eq!(got_bytes, want, "len {} first {:?}", x.len(), &x[..x.len().min(4)]);
}

#[test]
fn requant_is_bit_identical() {
    let mut rng = Rng(3);
    for len in [1, 3, 15, 16, 17, 31, 64, 100, 4096] {
        for amp in [1.0, 1e-3, 3e4, 1e-40] {
            requant_matches(&rng.vec(len, amp));
        }
        requant_matches(&vec![0.0; len]);
        requant_matches(&vec![-0.0; len]);
        // amax 127 makes the scale exactly 1: every .5 is a tie to round away from zero.
        let ties: Vec<f32> = (0..len).map(|i| if i == 0 { 127.0 } else { (i % 254) as f32 - 126.5 }).collect();
        requant_matches(&ties);
    }
}

/// Indicative only: qemu translates instructions, it does not model a core. Milliseconds
/// per call (best of 3) of each kernel and the reference for m = 1, 512 x 4096 weights.
/// `scripts/count-arm-insns.sh` runs it (`-- --ignored --nocapture`) for its report.
#[test]
#[ignore]
fn timing() {
    let (m, n, k) = (1, 512, 4096);
    for format in TERNARY {
        let (w_bytes, a_bytes) = random_case(format, m, n, k, 1);
        let w = MatRef::new(format, n, k, &w_bytes).unwrap();
        let a = MatRef::new(Format::I8Absmax, m, k, &a_bytes).unwrap();
        let mut kernels: Vec<(&str, KernelFn)> = vec![("bitnet_gemv/reference", reference::bitnet_gemv)];
        kernels.extend(PATHS.iter().filter_map(|name| kernel(name, format)).map(|k| (k.name(), k.run)));
        for (name, run) in kernels {
            let mut out = vec![0f32; m * n];
            let best = (0..3)
                .map(|_| {
                    let start = std::time::Instant::now();
                    run(&w, &a, &mut OutRows::new(&mut out, m, n, 0..n).unwrap());
                    start.elapsed().as_secs_f64() * 1e3
                })
                .fold(f64::INFINITY, f64::min);
            println!("TIMING {} {name} {best:.3}", format.name());
        }
    }
}
