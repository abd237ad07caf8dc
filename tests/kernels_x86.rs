//! Parity of the x86_64 SIMD kernels with `bitnet_gemv/reference`, for every kernel and
//! weight format, over token counts, ragged row counts, sub-ranges of rows, BitNet row
//! lengths with tails, and corrupt codes.
#![cfg(target_arch = "x86_64")]

mod common;
use common::Rng;
use tern::kernel::{registry, ActI8, Kernel, MatRef, OutRows};
use tern::Format;

const SIMD: [&str; 3] = ["bitnet_gemv/avx512vnni", "bitnet_gemv/avx2", "bitnet_gemm/avx512vnni"];
const TERNARY: [Format; 3] = [Format::Tq1_0, Format::Tq2_0, Format::BitnetB158];

fn kernel(name: &str, weight: Format) -> &'static Kernel {
    registry()
        .iter()
        .find(|k| k.name() == name && k.weight == weight && k.act == Format::I8Absmax)
        .unwrap_or_else(|| panic!("{name} for {} is not registered", weight.name()))
}

/// SIMD kernels this CPU runs; the others are skipped with a note.
fn simd_kernels(weight: Format) -> Vec<&'static Kernel> {
    SIMD.iter()
        .map(|name| kernel(name, weight))
        .filter(|k| {
            let ok = (k.available)();
            if !ok {
                eprintln!("note: skipping {} ({}): this CPU lacks {}", k.name(), weight.name(), k.requires);
            }
            ok
        })
        .collect()
}

fn encode(format: Format, src: &[f32], rows: usize, cols: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; format.bytes_for(rows, cols).unwrap()];
    format.encode(src, rows, cols, &mut bytes).unwrap();
    bytes
}

fn weights(rng: &mut Rng, format: Format, n: usize, k: usize) -> Vec<u8> {
    let src: Vec<f32> = (0..n * k).map(|_| rng.unit()).collect();
    encode(format, &src, n, k)
}

/// Random code bytes, so TQ2_0 and BitNet contain code 3 and TQ1_0 non-canonical bytes,
/// with valid scales.
fn corrupt_weights(rng: &mut Rng, format: Format, n: usize, k: usize) -> Vec<u8> {
    let mut bytes = rng.bytes(format.bytes_for(n, k).unwrap());
    match format {
        Format::BitnetB158 => {
            let at = bytes.len() - 4;
            bytes[at..].copy_from_slice(&0.37f32.to_le_bytes());
        }
        _ => {
            let block = bytes.len() / (n * k / 256);
            for (i, b) in bytes.chunks_exact_mut(block).enumerate() {
                let d = half::f16::from_f32(0.01 + (i % 7) as f32 * 0.1);
                b[block - 2..].copy_from_slice(&d.to_le_bytes());
            }
        }
    }
    assert!(format.validate(&bytes, n, k).is_err(), "random bytes should be corrupt");
    bytes
}

fn activations(rng: &mut Rng, m: usize, k: usize) -> Vec<u8> {
    let mut src: Vec<f32> = (0..m * k).map(|_| rng.unit() * 3.0).collect();
    if m > 1 {
        // A zero row has scale 0: its outputs must be 0 too.
        src[k..2 * k].fill(0.0);
    }
    encode(Format::I8Absmax, &src, m, k)
}

fn run(k: &Kernel, w: &MatRef, a: &MatRef, rows: std::ops::Range<usize>) -> Vec<f32> {
    let mut out = vec![f32::NAN; a.rows * w.rows];
    let mut view = OutRows::new(&mut out, a.rows, w.rows, rows).unwrap();
    (k.run)(w, a, &mut view);
    out
}

/// Per (token, row): `a_scale * sum_blocks |w_scale * dot|` in f64, the size of the terms
/// whose f32 sum the kernels round.
fn magnitudes(w: &MatRef, a: &MatRef) -> Vec<f64> {
    let act = ActI8::parse(a);
    let (n, k) = (w.rows, w.cols);
    let block = w.format.kernel_block(k);
    let (mut trits, mut scales) = (vec![0i8; k], vec![0f32; k / block]);
    let mut mag = vec![0f64; act.m * n];
    for r in 0..n {
        w.format.ternary_row(w.bytes, k, r, &mut trits, &mut scales);
        for t in 0..act.m {
            let sum: f64 = trits
                .chunks_exact(block)
                .zip(act.row(t).chunks_exact(block))
                .zip(&scales)
                .map(|((w, x), &d)| {
                    (d as f64 * w.iter().zip(x).map(|(&w, &x)| w as i64 * x as i64).sum::<i64>() as f64).abs()
                })
                .sum();
            mag[t * n + r] = act.scales[t] as f64 * sum;
        }
    }
    mag
}

/// Compares every output of `rows` to the reference, to 1e-5 relative to max(1, |ref|),
/// plus the rounding that summing the per-block terms in another order may cost in f32
/// (`2 * blocks * eps * magnitude`; zero-width for BitNet's single block), and checks that
/// outputs outside `rows` were not written.
fn check(format: Format, wbytes: &[u8], n: usize, k: usize, m: usize, rows: std::ops::Range<usize>, rng: &mut Rng) {
    let abytes = activations(rng, m, k);
    let w = MatRef::new(format, n, k, wbytes).unwrap();
    let a = MatRef::new(Format::I8Absmax, m, k, &abytes).unwrap();
    let want = run(kernel("bitnet_gemv/reference", format), &w, &a, rows.clone());
    let mag = magnitudes(&w, &a);
    let blocks = (k / format.kernel_block(k)) as f64;
    for kern in simd_kernels(format) {
        let got = run(kern, &w, &a, rows.clone());
        for t in 0..m {
            for r in 0..n {
                let (g, x) = (got[t * n + r], want[t * n + r]);
                let ctx =
                    format!("{} {} n={n} k={k} m={m} rows={rows:?} token {t} row {r}", kern.name(), format.name());
                if rows.contains(&r) {
                    let order = 2.0 * blocks * f32::EPSILON as f64 * mag[t * n + r];
                    let tol = 1e-5 * x.abs().max(1.0) as f64 + order;
                    assert!(((g - x).abs() as f64) <= tol, "{ctx}: got {g}, want {x} (tolerance {tol})");
                } else {
                    assert!(g.is_nan(), "{ctx}: written outside the view");
                }
            }
        }
    }
}

#[test]
fn every_simd_kernel_is_registered_before_the_reference() {
    for format in TERNARY {
        let names: Vec<&str> = registry().iter().filter(|k| k.weight == format).map(|k| k.name()).collect();
        assert_eq!(
            names,
            ["bitnet_gemv/avx512vnni", "bitnet_gemv/avx2", "bitnet_gemm/avx512vnni", "bitnet_gemv/reference"],
            "{}",
            format.name()
        );
    }
}

#[test]
fn parity_over_shapes_and_token_counts() {
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    for format in TERNARY {
        for k in [256, 1024, 4096] {
            for n in [37, 67] {
                let w = weights(&mut rng, format, n, k);
                for m in [1, 3, 8, 128] {
                    check(format, &w, n, k, m, 0..n, &mut rng);
                }
            }
        }
    }
}

/// The GEMM's token blocks and row panels: every token count around the block sizes, row
/// counts that are not a multiple of a panel or a vector, the smallest k of each format and
/// k that is not a multiple of a panel step.
#[test]
fn gemm_parity_over_token_blocks_and_panels() {
    let mut rng = Rng(0x5EED_1234_ABCD_0007);
    let ms = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 127, 128, 129];
    for format in TERNARY {
        let ks: &[usize] = match format {
            Format::BitnetB158 => &[4, 260, 1028],
            _ => &[256, 768],
        };
        for &k in ks {
            for n in [5, 67, 131] {
                let w = weights(&mut rng, format, n, k);
                for m in ms {
                    check(format, &w, n, k, m, 0..n, &mut rng);
                }
            }
        }
    }
}

#[test]
fn bitnet_rows_with_tails() {
    let mut rng = Rng(0x5EED_1234_ABCD_0002);
    // Row lengths in bytes: 1, 25, 65, 129, 257: not multiples of 32 or 64.
    for k in [4, 100, 260, 516, 1028] {
        for n in [1, 5, 37] {
            let w = weights(&mut rng, Format::BitnetB158, n, k);
            for m in [1, 3, 8] {
                check(Format::BitnetB158, &w, n, k, m, 0..n, &mut rng);
            }
        }
    }
}

#[test]
fn sub_ranges_of_rows() {
    let mut rng = Rng(0x5EED_1234_ABCD_0003);
    let (n, k) = (67, 1024);
    for format in TERNARY {
        let w = weights(&mut rng, format, n, k);
        for rows in [5..64, 1..2, 66..67, 30..30, 0..0] {
            for m in [1, 5] {
                check(format, &w, n, k, m, rows.clone(), &mut rng);
            }
        }
    }
}

#[test]
fn corrupt_codes_count_as_plus_two() {
    let mut rng = Rng(0x5EED_1234_ABCD_0004);
    for format in TERNARY {
        for (n, k) in [(37, 256), (9, 1024)] {
            let w = corrupt_weights(&mut rng, format, n, k);
            for m in [1, 3, 8] {
                check(format, &w, n, k, m, 0..n, &mut rng);
            }
        }
    }
    let w = corrupt_weights(&mut rng, Format::BitnetB158, 7, 100);
    check(Format::BitnetB158, &w, 7, 100, 3, 0..7, &mut rng);
}

/// Products that are all zero sum to exactly 0.0, however large the codes and scales
/// around them (a fuzz finding: with the activation-sum correction in one lane, each lane
/// held a large biased partial sum, and scaling the lanes by a block scale with a full
/// mantissa left a rounding residue of a few ulps of those partials).
#[test]
fn all_zero_products_give_exactly_zero() {
    let mut rng = Rng(0x5EED_1234_ABCD_0006);
    let n = 5;
    // One token (single-token tiles) and nine (batched tiles plus a leftover token).
    for (format, m) in TERNARY.into_iter().flat_map(|f| [(f, 1), (f, 9)]) {
        for k in [256, 1536, 4096] {
            // Weights only at odd columns, with a block scale of 255.875 (11 significant bits).
            let wsrc: Vec<f32> = (0..n * k)
                .map(|i| {
                    if i % 2 == 1 {
                        if rng.below(2) == 0 {
                            255.875
                        } else {
                            -255.875
                        }
                    } else {
                        0.0
                    }
                })
                .collect();
            let wbytes = encode(format, &wsrc, n, k);
            let w = MatRef::new(format, n, k, &wbytes).unwrap();
            // Activations only at even columns: every product is zero.
            for pattern in [2, 6] {
                let asrc: Vec<f32> =
                    (0..m * k).map(|i| if i % pattern == 0 { -0.00390625 + rng.unit() * 1e-4 } else { 0.0 }).collect();
                let abytes = encode(Format::I8Absmax, &asrc, m, k);
                let a = MatRef::new(Format::I8Absmax, m, k, &abytes).unwrap();
                for kern in simd_kernels(format).into_iter().chain([kernel("bitnet_gemv/reference", format)]) {
                    let out = run(kern, &w, &a, 0..n);
                    assert!(
                        out.iter().all(|&x| x == 0.0),
                        "{} {} k={k} m={m} pattern {pattern}: {out:?}",
                        kern.name(),
                        format.name()
                    );
                }
            }
        }
    }
}

/// Runs the SIMD requantizer and `Format::I8Absmax.encode` (the definition) on one row and
/// demands the same scale bits and codes.
fn requant_matches(x: &[f32]) {
    let requant = tern::kernel::arch::requant_row().expect("an x86_64 requantizer on an AVX2 CPU");
    let mut codes = vec![0x55u8 as i8; x.len()];
    let scale = requant(x, &mut codes);
    let want = encode(Format::I8Absmax, x, 1, x.len());
    let (want_codes, want_scale) = want.split_at(x.len());
    assert_eq!(scale.to_bits(), f32::from_le_bytes(want_scale.try_into().unwrap()).to_bits(), "scale of {x:?}");
    assert_eq!(bytemuck_i8(want_codes), codes, "codes of {x:?}");
}

fn bytemuck_i8(b: &[u8]) -> Vec<i8> {
    b.iter().map(|&b| b as i8).collect()
}

#[test]
fn requant_is_bit_identical_to_the_definition() {
    if !std::arch::is_x86_feature_detected!("avx2") {
        eprintln!("note: skipping the AVX2 requantizer: this CPU lacks avx2");
        return;
    }
    let mut rng = Rng(0x5EED_1234_ABCD_0005);
    // Random rows of lengths around the 32-float step, and wide-range magnitudes.
    for len in (1..=70).chain([255, 256, 4096, 4097]) {
        let x: Vec<f32> = (0..len).map(|_| rng.unit() * 10.0).collect();
        requant_matches(&x);
        let x: Vec<f32> = (0..len).map(|_| rng.unit() * f32::powi(2.0, (rng.next_u64() % 60) as i32 - 30)).collect();
        requant_matches(&x);
    }
    // Exact ties: absmax 127 gives scale 1, so k + 0.5 divides to itself; absmax 254 gives
    // scale 2 and odd integers tie.
    let ties: Vec<f32> = (0..100).map(|i| (i as f32 - 50.0) + 0.5).chain([127.0, -126.5, 126.5]).collect();
    requant_matches(&ties);
    let ties: Vec<f32> = (-127..=127).map(|i| (2 * i + 1) as f32).chain([254.0]).filter(|v| v.abs() <= 254.0).collect();
    requant_matches(&ties);
    // Zero rows and a row of -0.0.
    for len in [1, 31, 32, 33, 100] {
        requant_matches(&vec![0.0; len]);
        requant_matches(&vec![-0.0; len]);
    }
    // One non-zero element among zeros, at every position of a 40-element row.
    for i in 0..40 {
        let mut x = vec![0.0f32; 40];
        x[i] = -3.25;
        requant_matches(&x);
    }
}
