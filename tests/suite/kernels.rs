//! Every kernel in `registry()` against `bitnet_gemv/reference` (the definition), whatever
//! the architecture: token counts, ragged row counts, blocks of rows and tokens, BitNet row
//! tails, extreme and corrupt codes. Kernels this CPU cannot run are skipped with a note.
//! Also: `Kernel::run` refuses every mismatched operand without writing, and the adapter's
//! fastest requantizer is bit-identical to the format's encoder.

use crate::common::Rng;
use std::ops::Range;
use tern::adapter::requantize_i8_absmax_into;
use tern::kernel::{registry, Kernel, MatRef, OutTile};
use tern::Format;

/// The weight formats with SIMD kernels.
const TERNARY: [Format; 7] =
    [Format::Tq1_0, Format::Tq2_0, Format::BitnetB158, Format::I2S, Format::I2S64, Format::Q2_0, Format::I2SR4];
/// The formats whose kernels the test scripts' expectations name (TERN_EXPECT_KERNEL and
/// the like, see [`the_dispatcher_picks_the_best_kernel_for_this_cpu`]); the later formats
/// get the same choices but on AMX, which has no Q2_0.
const EVERY_ISA: [Format; 3] = [Format::Tq1_0, Format::Tq2_0, Format::BitnetB158];
/// Weight formats checked against the decoded product, and every kernel that registers for
/// them against the reference (Q2_0's +2 code and the I2_S packings are worth the second
/// check too).
const REFERENCE_ONLY: [Format; 4] = [Format::Q2_0, Format::I2S, Format::I2S64, Format::I2SR4];

/// `n` rows, or the next multiple of 4 for I2_S_R4, which interleaves rows in fours.
fn rows_of(format: Format, n: usize) -> usize {
    if format == Format::I2SR4 {
        n.next_multiple_of(4)
    } else {
        n
    }
}
const REFERENCE: &str = "bitnet_gemv/reference";

fn kernel(name: &str, weight: Format) -> &'static Kernel {
    registry()
        .iter()
        .find(|k| k.name() == name && k.weight() == weight && k.act() == Format::I8Absmax)
        .unwrap_or_else(|| panic!("{name} for {} is not registered", weight.name()))
}

/// Every kernel for `weight` x I8_ABSMAX but the reference, that this CPU runs; the others
/// are skipped with a note.
fn candidates(weight: Format) -> Vec<&'static Kernel> {
    registry()
        .iter()
        .filter(|k| k.weight() == weight && k.act() == Format::I8Absmax && k.name() != REFERENCE)
        .filter(|k| {
            if !k.is_available() {
                eprintln!("note: skipping {} ({}): this CPU lacks {}", k.name(), weight.name(), k.requires());
            }
            k.is_available()
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
        Format::I2S | Format::I2S64 | Format::I2SR4 => {
            let at = bytes.len() - 32;
            bytes[at..at + 4].copy_from_slice(&0.37f32.to_le_bytes());
        }
        _ => {
            let block = bytes.len() / (n * k / format.kernel_block(k));
            // The f16 scale ends a TQ block and starts a Q2_0 block.
            let at = if format == Format::Q2_0 { 0 } else { block - 2 };
            for (i, b) in bytes.chunks_exact_mut(block).enumerate() {
                let d = half::f16::from_f32(0.01 + (i % 7) as f32 * 0.1);
                b[at..at + 2].copy_from_slice(&d.to_le_bytes());
            }
        }
    }
    // Every Q2_0 code is valid (3 is +2): its random codes are extreme, not corrupt.
    assert!(format == Format::Q2_0 || format.validate(&bytes, n, k).is_err(), "random bytes should be corrupt");
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

/// Runs `k` on the block `tokens x rows` of an output prefilled with NaN.
fn run(k: &'static Kernel, w: &MatRef, a: &MatRef, rows: Range<usize>, tokens: Range<usize>) -> Vec<f32> {
    let mut out = vec![f32::NAN; a.rows() * w.rows()];
    let mut view = OutTile::new(&mut out, a.rows(), w.rows()).unwrap().restrict(rows, tokens).unwrap();
    k.run(w, a, &mut view).unwrap();
    out
}

/// Per (token, row): `a_scale * sum_blocks |w_scale * dot|` in f64, the size of the terms
/// whose f32 sum the kernels may round in another order than the reference.
fn magnitudes(format: Format, wbytes: &[u8], abytes: &[u8], m: usize, n: usize, k: usize) -> Vec<f64> {
    let block = format.kernel_block(k);
    let (mut trits, mut scales) = (vec![0i8; k], vec![0f32; k / block]);
    let (codes, a_scales) = abytes.split_at(m * k);
    let mut mag = vec![0f64; m * n];
    for r in 0..n {
        format.ternary_row(wbytes, k, r, &mut trits, &mut scales);
        for t in 0..m {
            let row = &codes[t * k..(t + 1) * k];
            let sum: f64 = trits
                .chunks_exact(block)
                .zip(row.chunks_exact(block))
                .zip(&scales)
                .map(|((w, x), &d)| {
                    let dot: i64 = w.iter().zip(x).map(|(&w, &x)| w as i64 * x as i8 as i64).sum();
                    (d as f64 * dot as f64).abs()
                })
                .sum();
            let a_scale = f32::from_le_bytes(a_scales[4 * t..4 * t + 4].try_into().unwrap());
            mag[t * n + r] = a_scale as f64 * sum;
        }
    }
    mag
}

/// Compares every output of the block `tokens x rows` to the reference, to 1e-5 relative to
/// max(1, |ref|) plus the rounding that summing the per-block terms in another order may
/// cost in f32 (`2 * blocks * eps * magnitude`; none for BitNet's single block, whose
/// integer dot is exact), and checks that nothing outside the block was written.
fn check_block(
    format: Format,
    wbytes: &[u8],
    abytes: &[u8],
    n: usize,
    k: usize,
    rows: Range<usize>,
    tokens: Range<usize>,
) {
    check_block_of(&MatRef::new(format, n, k, wbytes).unwrap(), wbytes, abytes, rows, tokens);
}

/// [`check_block`] for the operand `w` of the bytes `wbytes` (with its uniform scale, if
/// it came from [`MatRef::of`]).
fn check_block_of(w: &MatRef, wbytes: &[u8], abytes: &[u8], rows: Range<usize>, tokens: Range<usize>) {
    let (format, n, k) = (w.format(), w.rows(), w.cols());
    let m = abytes.len() / (k + 4);
    let a = MatRef::new(Format::I8Absmax, m, k, abytes).unwrap();
    let want = run(kernel(REFERENCE, format), w, &a, rows.clone(), tokens.clone());
    let mag = magnitudes(format, wbytes, abytes, m, n, k);
    let blocks = (k / format.kernel_block(k)) as f64;
    for kern in candidates(format) {
        let got = run(kern, w, &a, rows.clone(), tokens.clone());
        for t in 0..m {
            for r in 0..n {
                let (g, x) = (got[t * n + r], want[t * n + r]);
                // Formatted only when an assertion fails: one string per output would
                // dominate the run time under ASAN and qemu.
                let ctx = || {
                    format!(
                        "{} {} n={n} k={k} m={m} block {tokens:?}x{rows:?}: out[{t}][{r}]",
                        kern.name(),
                        format.name()
                    )
                };
                if rows.contains(&r) && tokens.contains(&t) {
                    let order = 2.0 * blocks * f32::EPSILON as f64 * mag[t * n + r];
                    let tol = 1e-5 * x.abs().max(1.0) as f64 + order;
                    assert!(((g - x).abs() as f64) <= tol, "{}: got {g}, want {x} (tolerance {tol})", ctx());
                } else {
                    assert!(g.is_nan(), "{}: written outside the view", ctx());
                }
            }
        }
    }
}

fn check(format: Format, wbytes: &[u8], n: usize, k: usize, m: usize, rng: &mut Rng) {
    let abytes = activations(rng, m, k);
    check_block(format, wbytes, &abytes, n, k, 0..n, 0..m);
}

#[test]
fn the_reference_comes_last_for_every_ternary_format() {
    for format in TERNARY.into_iter().chain(REFERENCE_ONLY) {
        let names: Vec<&str> = registry().iter().filter(|k| k.weight() == format).map(|k| k.name()).collect();
        assert_eq!(names.last(), Some(&REFERENCE), "{}: {names:?}", format.name());
        let simd = TERNARY.contains(&format) && cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));
        assert!(names.len() >= 2 || !simd, "{names:?}");
    }
}

/// x86_64: AVX-512 VNNI, then AVX-VNNI, then AVX2, each ISA's GEMM before its GEMV (other
/// kernels may come between them).
#[test]
#[cfg(target_arch = "x86_64")]
fn x86_kernels_come_widest_first() {
    let all = [
        "bitnet_gemm/avx512vnni",
        "bitnet_gemv/avx512vnni",
        "bitnet_gemm/avxvnni",
        "bitnet_gemv/avxvnni",
        "bitnet_gemm/avx2",
        "bitnet_gemv/avx2",
        REFERENCE,
    ];
    for format in TERNARY {
        let want = &all[..];
        // Per (weight, activation) pair: TQ formats list the same order again for I8_BLOCK256,
        // Q2_0 for I8_BLOCK32.
        for act in [Format::I8Absmax, Format::I8Block256, Format::I8Block32] {
            let names: Vec<&str> = registry()
                .iter()
                .filter(|k| k.weight() == format && k.act() == act)
                .map(|k| k.name())
                .filter(|n| all.contains(n))
                .collect();
            if act == Format::I8Absmax || format.accurate_activation() == Some(act) {
                assert_eq!(names, want, "{} x {}", format.name(), act.name());
            } else {
                assert!(names.is_empty(), "{} x {}: {names:?}", format.name(), act.name());
            }
        }
    }
}

/// wasm32: relaxed SIMD (when the build has it), then plain SIMD128, each with its GEMM
/// before its GEMV, then the reference: the whole list, since the build decides it.
#[test]
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn wasm_kernels_come_relaxed_first() {
    let mut want = Vec::new();
    if cfg!(target_feature = "relaxed-simd") {
        want.extend(["bitnet_gemm/wasm-relaxed-simd128", "bitnet_gemv/wasm-relaxed-simd128"]);
    }
    want.extend(["bitnet_gemm/wasm-simd128", "bitnet_gemv/wasm-simd128", REFERENCE]);
    for format in TERNARY {
        let names: Vec<&str> = registry()
            .iter()
            .filter(|k| k.weight() == format && k.act() == Format::I8Absmax)
            .map(|k| k.name())
            .collect();
        assert_eq!(names, want, "{}", format.name());
    }
}

#[test]
fn parity_over_shapes_and_token_counts() {
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    for format in TERNARY {
        for k in [256, 1024, 4096] {
            for n in [37, 67].map(|n| rows_of(format, n)) {
                let w = weights(&mut rng, format, n, k);
                for m in [1, 2, 3, 7, 8, 9, 16, 33] {
                    check(format, &w, n, k, m, &mut rng);
                }
            }
        }
        let n = rows_of(format, 37);
        let w = weights(&mut rng, format, n, 1024);
        check(format, &w, n, 1024, 128, &mut rng);
    }
}

/// The GEMMs' token blocks and row panels: every token count around the block sizes, row
/// counts that are not a multiple of a panel or a vector, the smallest k of each format and
/// k that is not a multiple of a panel step.
#[test]
fn parity_over_token_blocks_and_panels() {
    let mut rng = Rng(0x5EED_1234_ABCD_0008);
    let ms = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 127, 128, 129];
    for format in TERNARY {
        let ks: &[usize] = match format {
            Format::BitnetB158 => &[4, 260, 1028],
            // Odd numbers of I2_S blocks: a last short step in the GEMM, a short load on
            // every vector width.
            Format::I2S | Format::I2SR4 => &[128, 384, 1152],
            Format::I2S64 => &[64, 320, 1088],
            // Odd numbers of blocks: a short last step where a load holds several blocks.
            Format::Q2_0 => &[64, 192, 576],
            _ => &[256, 768],
        };
        for &k in ks {
            for n in [5, 67, 131].map(|n| rows_of(format, n)) {
                let w = weights(&mut rng, format, n, k);
                for m in ms {
                    check(format, &w, n, k, m, &mut rng);
                }
            }
        }
    }
}

/// `bytes` (a TQ1_0, TQ2_0 or Q2_0 matrix) with every block scale of row `r` set to
/// `d(r)`.
fn with_row_scales(format: Format, mut bytes: Vec<u8>, n: usize, k: usize, d: impl Fn(usize) -> half::f16) -> Vec<u8> {
    let block = bytes.len() / (n * k / format.kernel_block(k));
    let row_bytes = bytes.len() / n;
    // The f16 scale ends a TQ block and starts a Q2_0 block.
    let at = if format == Format::Q2_0 { 0 } else { block - 2 };
    for (i, b) in bytes.chunks_exact_mut(block).enumerate() {
        b[at..at + 2].copy_from_slice(&d(i * block / row_bytes).to_le_bytes());
    }
    bytes
}

/// `bytes` (a TQ1_0, TQ2_0 or Q2_0 matrix) with every block scale set to `d`.
fn with_uniform_scales(format: Format, bytes: Vec<u8>, n: usize, k: usize, d: half::f16) -> Vec<u8> {
    with_row_scales(format, bytes, n, k, |_| d)
}

/// Every finite f16 exponent of either sign (zero and the subnormals included), each with
/// mantissas from none to all bits, as the block scales of a row: every kernel converts
/// them as the reference does (`half`), so its outputs differ only by the rounding of its
/// summation order, `2 * blocks * eps` of the row's magnitude, which scales with the row's
/// scale (a conversion one significand bit off, or a subnormal read as zero, fails it).
#[test]
fn every_f16_exponent_as_a_block_scale() {
    let mut rng = Rng(0x5EED_1234_ABCD_0010);
    let mut scales = Vec::new();
    for sign in [0u16, 0x8000] {
        for exponent in 0..31u16 {
            for mantissa in [0u16, 1, 0x155, 0x2AA, 0x3FF] {
                scales.push(half::f16::from_bits(sign | exponent << 10 | mantissa));
            }
        }
    }
    let (n, k, m) = (scales.len(), 512, 3);
    for format in [Format::Tq1_0, Format::Tq2_0, Format::Q2_0] {
        let bytes = with_row_scales(format, weights(&mut rng, format, n, k), n, k, |r| scales[r]);
        let abytes = activations(&mut rng, m, k);
        let w = MatRef::new(format, n, k, &bytes).unwrap();
        let a = MatRef::new(Format::I8Absmax, m, k, &abytes).unwrap();
        let want = run(kernel(REFERENCE, format), &w, &a, 0..n, 0..m);
        let mag = magnitudes(format, &bytes, &abytes, m, n, k);
        let blocks = (k / format.kernel_block(k)) as f64;
        for kern in candidates(format) {
            let got = run(kern, &w, &a, 0..n, 0..m);
            for (i, (&g, &x)) in got.iter().zip(&want).enumerate() {
                let tol = 2.0 * blocks * f32::EPSILON as f64 * mag[i];
                let d = scales[i % n];
                assert!(((g - x).abs() as f64) <= tol, "{} {format:?} scale {d:?} out[{i}]: {g} vs {x}", kern.name());
            }
        }
    }
}

/// A TQ or Q2_0 tensor whose block scales are all equal is detected as such (once,
/// remembered in the tensor), and every kernel's result through `MatRef::of` (which carries
/// the uniform scale) equals the per-block result up to the stated bound: `2 * blocks *
/// eps` of `a_scale * sum_blocks |d * dot|`, plus 1e-6 relative.
#[test]
fn uniform_block_scales_match_the_per_block_path() {
    let mut rng = Rng(0x5EED_1234_ABCD_0009);
    for format in [Format::Tq1_0, Format::Tq2_0, Format::Q2_0] {
        let (n, k) = (67, 1024);
        let random = weights(&mut rng, format, n, k);
        let per_block = tern::Tensor::from_vec(format, random.clone(), n, k).unwrap();
        assert_eq!(per_block.uniform_block_scale().unwrap(), None, "{format:?}: random blocks have their own scales");
        let d = half::f16::from_f32(0.0371);
        let bytes = with_uniform_scales(format, random, n, k, d);
        let uniform = tern::Tensor::from_vec(format, bytes.clone(), n, k).unwrap();
        assert_eq!(uniform.uniform_block_scale().unwrap(), Some(d.to_f32()), "{format:?}");
        let wu = MatRef::of(&uniform).unwrap();
        let wp = MatRef::new(format, n, k, &bytes).unwrap();
        for m in [1, 2, 9, 33] {
            let abytes = activations(&mut rng, m, k);
            let a = MatRef::new(Format::I8Absmax, m, k, &abytes).unwrap();
            let mag = magnitudes(format, &bytes, &abytes, m, n, k);
            for kern in candidates(format) {
                let got = run(kern, &wu, &a, 0..n, 0..m);
                let want = run(kern, &wp, &a, 0..n, 0..m);
                for (i, (&g, &x)) in got.iter().zip(&want).enumerate() {
                    let tol = 2.0 * (k / format.kernel_block(k)) as f64 * f32::EPSILON as f64 * mag[i]
                        + 1e-6 * x.abs() as f64;
                    assert!(((g - x).abs() as f64) <= tol, "{} {format:?} m={m} out[{i}]: {g} vs {x}", kern.name());
                }
            }
        }
    }
}

/// Uniform-scale rows at and past the int32 bound (the GEMV's uniform path sums a whole row
/// in int32 up to 1,024 blocks, then takes the per-block path): every weight +1 (code 2, the
/// largest sums TQ1_0's digits make) and every activation +127, so that TQ1_0's row sums
/// (256 times a lane's dot product) come near the bound at 1,024 blocks and would overflow
/// at 2,048 and 4,096; each output must be exactly `127 * k * d * a_scale` (all in f32: k,
/// 127 and the sums are exact).
#[test]
fn uniform_scales_on_rows_past_the_int32_bound() {
    for (format, blocks) in [Format::Tq1_0, Format::Tq2_0].into_iter().flat_map(|f| [(f, 1024), (f, 2048), (f, 4096)]) {
        let (n, k, m) = (1, blocks * 256, 1);
        let bytes = encode(format, &vec![1.0f32; n * k], n, k);
        let w = tern::Tensor::from_vec(format, bytes, n, k).unwrap();
        let d = w.uniform_block_scale().unwrap().expect("one scale");
        let wm = MatRef::of(&w).unwrap();
        let abytes = encode(Format::I8Absmax, &vec![1.0f32; m * k], m, k);
        let a = MatRef::new(Format::I8Absmax, m, k, &abytes).unwrap();
        let a_scale = f32::from_le_bytes(abytes[m * k..][..4].try_into().unwrap());
        let want = a_scale * (d * (127.0 * k as f32));
        for kern in candidates(format) {
            for (i, &g) in run(kern, &wm, &a, 0..n, 0..m).iter().enumerate() {
                assert!((g - want).abs() <= 1e-6 * want, "{} {format:?} k={k} out[{i}]: {g} vs {want}", kern.name());
            }
        }
    }
}

#[test]
fn bitnet_rows_with_tails() {
    let mut rng = Rng(0x5EED_1234_ABCD_0002);
    // Row lengths in bytes: 1, 25, 65, 129, 257: not multiples of 16, 32 or 64.
    for k in [4, 100, 260, 516, 1028] {
        for n in [1, 5, 37] {
            let w = weights(&mut rng, Format::BitnetB158, n, k);
            for m in [1, 3, 8] {
                check(Format::BitnetB158, &w, n, k, m, &mut rng);
            }
        }
    }
}

#[test]
fn blocks_of_rows_and_tokens() {
    let mut rng = Rng(0x5EED_1234_ABCD_0003);
    for format in TERNARY {
        // I2_S_R4: 68 rows, so that ranges start and end inside groups of four.
        let (n, k) = (rows_of(format, 67), 1024);
        let w = weights(&mut rng, format, n, k);
        for m in [1, 5, 9] {
            let a = activations(&mut rng, m, k);
            for rows in [5..64, 1..2, 66..67, 30..30, 0..0, 0..67, 0..n] {
                for tokens in [0..m, 0..1, m - 1..m, 1.min(m)..m, 0..0] {
                    check_block(format, &w, &a, n, k, rows.clone(), tokens);
                }
            }
        }
    }
}

/// Weights that end where the readable memory ends (an inaccessible page after their
/// last byte): a kernel whose loads read past a block (TQ1_0 on AVX-512 loads 64 bytes of
/// each 54-byte block, `Tq::OVERREAD`) takes the tensor's last row from a padded copy, and
/// a read past the tensor faults here. Every format, block scales of their own and one for
/// every block (the row sums' path), one token and batches, against the reference.
#[cfg(target_os = "linux")]
#[test]
fn weights_that_end_at_unreadable_memory() {
    let mut rng = Rng(0x5EED_1234_ABCD_0011);
    for format in TERNARY {
        for (n, k) in [(1, 256), (6, 512), (67, 1024)] {
            let n = rows_of(format, n);
            let random = weights(&mut rng, format, n, k);
            let block_scaled = matches!(format, Format::Tq1_0 | Format::Tq2_0 | Format::Q2_0);
            let uniform =
                block_scaled.then(|| with_uniform_scales(format, random.clone(), n, k, half::f16::from_f32(0.25)));
            for bytes in [Some(random), uniform].into_iter().flatten() {
                let guarded = guard::AtPageEnd::new(&bytes);
                let tensor = tern::Tensor::wrap(format, guarded.bytes(), n, k).unwrap();
                let w = MatRef::of(&tensor).unwrap();
                for m in [1, 2, 3, 9] {
                    check_block_of(&w, guarded.bytes(), &activations(&mut rng, m, k), 0..n, 0..m);
                }
            }
        }
    }
}

/// Memory whose end is followed by a page that may not be read.
#[cfg(target_os = "linux")]
mod guard {
    use std::ffi::{c_int, c_long, c_void};

    extern "C" {
        fn mmap(addr: *mut c_void, len: usize, prot: c_int, flags: c_int, fd: c_int, offset: i64) -> *mut c_void;
        fn mprotect(addr: *mut c_void, len: usize, prot: c_int) -> c_int;
        fn munmap(addr: *mut c_void, len: usize) -> c_int;
        fn sysconf(name: c_int) -> c_long;
    }
    // Linux's values, the same on x86_64 and aarch64.
    const PROT_NONE: c_int = 0;
    const PROT_READ_WRITE: c_int = 1 | 2;
    const MAP_PRIVATE_ANONYMOUS: c_int = 0x02 | 0x20;
    const SC_PAGESIZE: c_int = 30;

    /// A copy of some bytes that ends where an inaccessible page begins.
    pub struct AtPageEnd {
        map: *mut u8,
        map_len: usize,
        start: usize,
        len: usize,
    }

    impl AtPageEnd {
        pub fn new(bytes: &[u8]) -> AtPageEnd {
            // SAFETY: plain libc calls on a fresh anonymous mapping of `map_len` bytes, whose
            // last page is made inaccessible; `bytes` is copied into the pages before it.
            unsafe {
                let page = sysconf(SC_PAGESIZE) as usize;
                let data = bytes.len().div_ceil(page).max(1) * page;
                let map_len = data + page;
                let map = mmap(std::ptr::null_mut(), map_len, PROT_READ_WRITE, MAP_PRIVATE_ANONYMOUS, -1, 0);
                assert!(map as isize != -1, "mmap failed");
                let map = map as *mut u8;
                assert_eq!(mprotect(map.add(data) as *mut c_void, page, PROT_NONE), 0, "mprotect failed");
                let start = data - bytes.len();
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), map.add(start), bytes.len());
                AtPageEnd { map, map_len, start, len: bytes.len() }
            }
        }

        pub fn bytes(&self) -> &[u8] {
            // SAFETY: the `len` bytes at `start` were written in `new` and stay mapped until
            // drop.
            unsafe { std::slice::from_raw_parts(self.map.add(self.start), self.len) }
        }
    }

    impl Drop for AtPageEnd {
        fn drop(&mut self) {
            // SAFETY: the mapping made in `new`, unmapped once.
            unsafe { munmap(self.map as *mut c_void, self.map_len) };
        }
    }
}

/// Extreme activations (+-127 everywhere, and the out-of-alphabet -128) with all-+1 and
/// all--1 weights exercise the widest partial sums.
#[test]
fn parity_at_extremes() {
    for format in TERNARY {
        let k = if format == Format::BitnetB158 { 452 } else { 1024 };
        let n = rows_of(format, 5);
        for sign in [1.0f32, -1.0] {
            let w = encode(format, &vec![sign; n * k], n, k);
            for code in [127i8, -127, -128] {
                let mut a = encode(Format::I8Absmax, &vec![1.0; 9 * k], 9, k);
                a[..9 * k].fill(code as u8);
                check_block(format, &w, &a, n, k, 0..n, 0..9);
            }
        }
    }
}

#[test]
fn corrupt_codes_count_as_plus_two() {
    let mut rng = Rng(0x5EED_1234_ABCD_0004);
    for format in TERNARY {
        for (n, k) in [(37, 256), (9, 1024)] {
            let n = rows_of(format, n);
            let w = corrupt_weights(&mut rng, format, n, k);
            for m in [1, 3, 8] {
                check(format, &w, n, k, m, &mut rng);
            }
        }
    }
    let w = corrupt_weights(&mut rng, Format::BitnetB158, 7, 100);
    check(Format::BitnetB158, &w, 7, 100, 3, &mut rng);
}

/// Every byte value at every TQ1_0 code position (row `r` holds byte `(r + j) mod 256` at
/// position `j`, canonical or not): the VBMI kernel looks digits up in tables indexed by
/// the byte, which only every value can check.
#[test]
fn tq1_0_every_code_byte_at_every_position() {
    let (n, k) = (256, 256);
    let d = half::f16::from_f32(0.25).to_le_bytes();
    let w: Vec<u8> = (0..n).flat_map(|r| (0..52).map(move |j| ((r + j) % 256) as u8).chain(d)).collect();
    let mut rng = Rng(0x5EED_1234_ABCD_0012);
    for m in [1, 2, 3, 8] {
        check(Format::Tq1_0, &w, n, k, m, &mut rng);
    }
}

/// Products that are all zero sum to exactly 0.0, however large the codes and scales
/// around them (a fuzz finding: with the activation-sum correction in one lane, each lane
/// held a large biased partial sum, and scaling the lanes by a block scale with a full
/// mantissa left a rounding residue of a few ulps of those partials).
#[test]
fn all_zero_products_give_exactly_zero() {
    let mut rng = Rng(0x5EED_1234_ABCD_0006);
    // One token (single-token tiles) and nine (batched tiles plus a leftover token).
    for (format, m) in TERNARY.into_iter().flat_map(|f| [(f, 1), (f, 9)]) {
        let n = rows_of(format, 5);
        for k in [256, 1536, 4096] {
            // Weights only at odd columns, with a block scale of 255.875 (11 significant bits).
            let wsrc: Vec<f32> = (0..n * k)
                .map(|i| {
                    if i % 2 == 0 {
                        0.0
                    } else if rng.below(2) == 0 {
                        255.875
                    } else {
                        -255.875
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
                for kern in candidates(format).into_iter().chain([kernel(REFERENCE, format)]) {
                    let out = run(kern, &w, &a, 0..n, 0..m);
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

/// `bitnet_gemm/amx` loads its tile configuration on every call and releases the tiles
/// after: a thread's first call is right, and so is a call on a thread whose tiles were
/// configured otherwise before (an engine's own AMX code); the dispatcher's pool runs it on
/// two threads with results bit-identical to one thread's. Skipped, visibly, without AMX.
#[test]
#[cfg(target_arch = "x86_64")]
fn amx_configures_its_tiles_on_every_thread_and_call() {
    match tern::kernel::amx_status() {
        Some(Ok(())) => {}
        other => return eprintln!("note: skipping the AMX thread test: {other:?} (None: this CPU has no AMX-INT8)"),
    }
    let _threads = crate::common::hold_threads();
    let mut rng = Rng(0x5EED_1234_ABCD_00A3);
    let (n, k, m) = (200, 512, 70);
    let wbytes = weights(&mut rng, Format::Tq2_0, n, k);
    let abytes = activations(&mut rng, m, k);
    let amx = kernel("bitnet_gemm/amx", Format::Tq2_0);
    let product = || {
        let w = MatRef::new(Format::Tq2_0, n, k, &wbytes).unwrap();
        let a = MatRef::new(Format::I8Absmax, m, k, &abytes).unwrap();
        run(amx, &w, &a, 0..n, 0..m)
    };
    check_block(Format::Tq2_0, &wbytes, &abytes, n, k, 0..n, 0..m);
    let here = product();
    std::thread::scope(|s| {
        assert_eq!(s.spawn(product).join().unwrap(), here, "a thread's first call");
        let reconfigured = s.spawn(|| {
            /// Palette 1 with tile 0 of 4 rows x 16 bytes only.
            #[repr(C, align(64))]
            struct Small([u8; 64]);
            let mut cfg = Small([0; 64]);
            (cfg.0[0], cfg.0[16], cfg.0[48]) = (1, 16, 4);
            // SAFETY: AMX is usable (amx_status above); LDTILECFG reads the 64 bytes of
            // `cfg`, a valid configuration, and TILEZERO writes only tile 0.
            unsafe { std::arch::asm!("ldtilecfg [{}]", "tilezero tmm0", in(reg) &cfg.0, out("tmm0") _) };
            product()
        });
        assert_eq!(reconfigured.join().unwrap(), here, "a thread whose tiles were configured otherwise");
    });
    let on = |threads: usize| {
        let options = tern::DispatcherOptions {
            n_threads: threads,
            kernel: Some("bitnet_gemm/amx".into()),
            ignore_env: true,
            ..Default::default()
        };
        let sink = std::sync::Arc::new(tern::RecordingSink::default());
        let mut dispatcher = tern::Dispatcher::new(options).unwrap();
        dispatcher.set_sink(Some(sink.clone()));
        let w = tern::Tensor::wrap(Format::Tq2_0, &wbytes, n, k).unwrap();
        let a = tern::Tensor::wrap(Format::I8Absmax, &abytes, m, k).unwrap();
        let mut out = vec![0.0; m * n];
        dispatcher.matmul(&a, &w, None, &mut out).unwrap();
        assert_eq!(sink.events().last().unwrap().name(), "bitnet_gemm/amx");
        out
    };
    assert_eq!(on(2), on(1), "two pool threads against one");
    assert_eq!(on(1), here);
}

/// `bitnet_gemm/amx` unpacks each panel in chunks of 4,096 elements of the row: on rows of
/// about two and a half chunks (BITNET_B1_58's with a short last step) and two and a half
/// panels of rows, its results are bit-identical to the AVX-512 GEMM's for every format and
/// activation format it serves. Skipped, visibly, without AMX.
#[test]
#[cfg(target_arch = "x86_64")]
fn amx_rows_longer_than_a_chunk_equal_the_avx512_gemm() {
    match tern::kernel::amx_status() {
        Some(Ok(())) => {}
        other => return eprintln!("note: skipping the long-row AMX test: {other:?} (None: this CPU has no AMX-INT8)"),
    }
    let mut rng = Rng(0x5EED_1234_ABCD_00C4);
    let (n, m) = (300, 33);
    let amx: Vec<&Kernel> = registry().iter().filter(|k| k.name() == "bitnet_gemm/amx").collect();
    assert!(amx.len() >= 5, "AMX serves TQ1_0, TQ2_0, BITNET_B1_58 and the I2_S packings");
    for kern in amx {
        let (format, act) = (kern.weight(), kern.act());
        let zmm = registry()
            .iter()
            .find(|k| k.name() == "bitnet_gemm/avx512vnni" && k.weight() == format && k.act() == act)
            .expect("the AVX-512 GEMM serves every pair AMX does");
        let k = if format == Format::BitnetB158 { 10_340 } else { 10_240 };
        let wbytes = weights(&mut rng, format, n, k);
        let src: Vec<f32> = (0..m * k).map(|_| rng.unit() * 3.0).collect();
        let abytes = encode(act, &src, m, k);
        let (w, a) = (MatRef::new(format, n, k, &wbytes).unwrap(), MatRef::new(act, m, k, &abytes).unwrap());
        let bits = |kern| run(kern, &w, &a, 0..n, 0..m).iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(kern), bits(zmm), "{format} by {act}, k = {k}: AMX against the AVX-512 GEMM");
    }
}

/// `Kernel::run` is the only way into a kernel, and it checks the operands together: a
/// weight and an activation of different widths, an output of the wrong shape, or operands
/// of formats the kernel does not serve are refused, and the output stays as it was. (Before
/// the check, a 256-wide activation with a 16384-wide weight read out of bounds.)
#[test]
fn every_kernel_refuses_mismatched_operands() {
    let mut rng = Rng(0x5EED_1234_ABCD_0007);
    for k in registry() {
        let (n, cols) = (16, 1024);
        let wbytes = match k.weight() {
            Format::F32 | Format::I8Absmax => encode(k.weight(), &rng.vec(n * cols, 1.0), n, cols),
            f => weights(&mut rng, f, n, cols),
        };
        let w = MatRef::new(k.weight(), n, cols, &wbytes).unwrap();
        let act = |m: usize, kk: usize| encode(k.act(), &vec![0.5; m * kk], m, kk);
        let narrow = act(1, 256);
        let narrow = MatRef::new(k.act(), 1, 256, &narrow).unwrap();
        let fine = act(2, cols);
        let fine = MatRef::new(k.act(), 2, cols, &fine).unwrap();
        let other = if k.act() == Format::F32 { Format::I8Absmax } else { Format::F32 };
        let wrong_format = encode(other, &vec![0.5; 2 * cols], 2, cols);
        let wrong_format = MatRef::new(other, 2, cols, &wrong_format).unwrap();
        let mut out = vec![7.0f32; 2 * n + 5];
        let cases: [(&MatRef, usize, usize, &str); 4] = [
            (&narrow, 1, n, "activation narrower than the weight"),
            (&fine, 2, n + 1, "output with a row too many"),
            (&fine, 1, n, "output with a token too few"),
            (&wrong_format, 2, n, "activation of another format"),
        ];
        for (a, m, outn, what) in cases {
            let mut view = OutTile::new(&mut out, m, outn).unwrap();
            let result = if k.is_available() { k.run(&w, a, &mut view) } else { Err(tern::Error::StaleTensor) };
            assert!(result.is_err(), "{k:?}: {what} was accepted");
            assert!(out.iter().all(|&x| x == 7.0), "{k:?}: {what} wrote the output");
        }
    }
}

#[test]
fn activations_prepared_by_another_kernel_are_refused() {
    let k = 256;
    let abytes = encode(Format::I8Absmax, &vec![0.5; k], 1, k);
    let a = MatRef::new(Format::I8Absmax, 1, k, &abytes).unwrap();
    let wbytes = encode(Format::Tq1_0, &vec![0.5; 4 * k], 4, k);
    let w = MatRef::new(Format::Tq1_0, 4, k, &wbytes).unwrap();
    let tq2 = kernel(REFERENCE, Format::Tq2_0);
    let prepared = tq2.prepare(&a).unwrap();
    let mut out = [3.0f32; 4];
    for k in registry().iter().filter(|k| k.weight() == Format::Tq1_0 && k.is_available()) {
        let mut view = OutTile::new(&mut out, 1, 4).unwrap();
        assert!(k.run_prepared(&w, &prepared, &mut view).is_err(), "{k:?}");
    }
    assert_eq!(out, [3.0; 4]);
}

/// The adapter (the fastest requantizer this CPU has) and `Format::I8Absmax.encode` (the
/// definition) give the same scale bits and codes.
fn requant_matches(x: &[f32]) {
    let want = encode(Format::I8Absmax, x, 1, x.len());
    let (mut codes, mut scale) = (vec![0x55u8 as i8; x.len()], [0f32]);
    requantize_i8_absmax_into(x, 1, x.len(), &mut codes, &mut scale, None).unwrap();
    let got: Vec<u8> = codes.iter().map(|&c| c as u8).chain(scale[0].to_le_bytes()).collect();
    assert_eq!(got, want, "len {} first {:?}", x.len(), &x[..x.len().min(4)]);
}

#[test]
fn requantizer_is_bit_identical_to_the_definition() {
    let mut rng = Rng(0x5EED_1234_ABCD_0005);
    // Random rows of lengths around the 16- and 32-float steps, and wide-range magnitudes.
    for len in (1..=70).chain([255, 256, 4096, 4097]) {
        let x: Vec<f32> = (0..len).map(|_| rng.unit() * 10.0).collect();
        requant_matches(&x);
        let x: Vec<f32> = (0..len).map(|_| rng.unit() * f32::powi(2.0, (rng.below(60) as i32) - 30)).collect();
        requant_matches(&x);
    }
    // Exact ties: absmax 127 gives scale 1, so k + 0.5 divides to itself; absmax 254 gives
    // scale 2 and odd integers tie.
    let ties: Vec<f32> = (0..100).map(|i| (i as f32 - 50.0) + 0.5).chain([127.0, -126.5, 126.5]).collect();
    requant_matches(&ties);
    let ties: Vec<f32> = (-127..=127).map(|i| (2 * i + 1) as f32).chain([254.0]).filter(|v| v.abs() <= 254.0).collect();
    requant_matches(&ties);
    for len in [1, 31, 32, 33, 100] {
        requant_matches(&vec![0.0; len]);
        requant_matches(&vec![-0.0; len]);
    }
    for i in 0..40 {
        let mut x = vec![0.0f32; 40];
        x[i] = -3.25;
        requant_matches(&x);
    }
}

/// The kernels the dispatcher must pick for each of [`TERNARY`] at m = 1, 8 and 128 tokens
/// on a CPU with `features`, stated per feature set (not derived from the registry, so a
/// wrong order or threshold fails here). Every x86 ISA serves every format (AMX all but
/// Q2_0); elsewhere I2_S and Q2_0 have the kernels BITNET_B1_58 has, their GEMMs from 8
/// tokens or fewer, so they get its choice at 1, 8 and 128 tokens.
fn expected_kernels(features: &[&str]) -> [[&'static str; 7]; 3] {
    let has = |f: &str| features.contains(&f);
    if has("avx2") {
        return x86_kernels(features);
    }
    let own = every_isa_kernels(features);
    std::array::from_fn(|m| [own[m][0], own[m][1], own[m][2], own[m][2], own[m][2], own[m][2], own[m][2]])
}

/// [`expected_kernels`] on x86_64, columns in the order of [`TERNARY`].
fn x86_kernels(features: &[&str]) -> [[&'static str; 7]; 3] {
    let has = |f: &str| features.contains(&f);
    if has("avx512vnni") {
        // The AVX-512 GEMM from 3 / 8 / 10 / 12 / 12 / 6 / 12 tokens on Intel, 3 / 12 / 24 /
        // 12 / 12 / 6 / 12 elsewhere; AMX (not for Q2_0) from 16 / 28 / 10 / 10 / 10 / - / 10;
        // TQ1_0's GEMV with VBMI, where it is preferred (not on Intel).
        let (gemv, gemm) = ("bitnet_gemv/avx512vnni", "bitnet_gemm/avx512vnni");
        let big = if has("amx") { "bitnet_gemm/amx" } else { gemm };
        let tq2 = if has("intel") { gemm } else { gemv };
        let tq1 = if has("avx512vbmi") && !has("intel") { "bitnet_gemv/avx512vbmi" } else { gemv };
        [
            [tq1, gemv, gemv, gemv, gemv, gemv, gemv],
            [gemm, tq2, gemv, gemv, gemv, gemm, gemv],
            [big, big, big, big, big, gemm, big],
        ]
    } else if has("avxvnni") {
        // The GEMM from 3 / 14 / 24 / 12 / 12 / 8 / 12 tokens.
        let (gemv, gemm) = ("bitnet_gemv/avxvnni", "bitnet_gemm/avxvnni");
        [[gemv; 7], [gemm, gemv, gemv, gemv, gemv, gemm, gemv], [gemm; 7]]
    } else {
        // The GEMM from 8 tokens for every format but TQ1_0 (from 3).
        [["bitnet_gemv/avx2"; 7], ["bitnet_gemm/avx2"; 7], ["bitnet_gemm/avx2"; 7]]
    }
}

/// The kernels the dispatcher must pick for TQ1_0, TQ2_0 and BITNET_B1_58 at m = 1, 8 and
/// 128 tokens on a CPU (not x86_64) or wasm build with `features`.
fn every_isa_kernels(features: &[&str]) -> [[&'static str; 3]; 3] {
    let has = |f: &str| features.contains(&f);
    if has("i8mm") {
        // i8mm from 3 / 3 / 4 tokens; every CPU with i8mm that tern knows has dotprod.
        [["bitnet_gemv/neon-dotprod"; 3], ["bitnet_gemm/neon-i8mm"; 3], ["bitnet_gemm/neon-i8mm"; 3]]
    } else if has("dotprod") {
        // The GEMMs from 3 / 5 / 4 tokens (plain NEON: 3 / 4 / 4).
        [["bitnet_gemv/neon-dotprod"; 3], ["bitnet_gemm/neon-dotprod"; 3], ["bitnet_gemm/neon-dotprod"; 3]]
    } else if has("neon") {
        [["bitnet_gemv/neon"; 3], ["bitnet_gemm/neon"; 3], ["bitnet_gemm/neon"; 3]]
    } else if has("relaxed-simd") {
        // The GEMM from 3 / 4 / 8 tokens (the other formats from 4 to 6).
        [
            ["bitnet_gemv/wasm-relaxed-simd128"; 3],
            ["bitnet_gemm/wasm-relaxed-simd128"; 3],
            ["bitnet_gemm/wasm-relaxed-simd128"; 3],
        ]
    } else if has("simd128") {
        // The GEMM from 2 / 2 / 4 tokens (the other formats from 2 to 4).
        let (gemv, gemm) = ("bitnet_gemv/wasm-simd128", "bitnet_gemm/wasm-simd128");
        [[gemv; 3], [gemm; 3], [gemm; 3]]
    } else {
        [[REFERENCE; 3]; 3]
    }
}

/// The CPU features of [`expected_kernels`] this CPU (or build, on wasm32) has, detected
/// here rather than through the kernels' own checks.
fn cpu_features() -> Vec<&'static str> {
    #[allow(unused_mut)]
    let mut found = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        let avx2 =
            is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c");
        let avx512 = avx2
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vnni");
        for (name, on) in [
            ("avx2", avx2),
            ("avxvnni", avx2 && is_x86_feature_detected!("avxvnni")),
            ("avx512vnni", avx512),
            ("avx512vbmi", avx512 && is_x86_feature_detected!("avx512vbmi")),
            // AMX also needs the OS's tile permission, which only asking tells.
            ("amx", avx512 && tern::kernel::amx_status() == Some(Ok(()))),
            // The AVX-512 GEMM's thresholds differ by vendor.
            ("intel", is_intel()),
        ] {
            if on {
                found.push(name);
            }
        }
    }
    #[cfg(target_arch = "aarch64")]
    for (name, on) in [
        ("neon", std::arch::is_aarch64_feature_detected!("neon")),
        ("dotprod", std::arch::is_aarch64_feature_detected!("dotprod")),
        ("i8mm", std::arch::is_aarch64_feature_detected!("i8mm")),
    ] {
        if on {
            found.push(name);
        }
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    found.push("simd128");
    #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
    found.push("relaxed-simd");
    found
}

/// CPUID's vendor string, read here rather than through tern.
#[cfg(target_arch = "x86_64")]
fn is_intel() -> bool {
    let id = std::arch::x86_64::__cpuid(0);
    let vendor: Vec<u8> = [id.ebx, id.edx, id.ecx].iter().flat_map(|r| r.to_le_bytes()).collect();
    vendor == b"GenuineIntel"
}

#[test]
fn expected_kernels_follow_the_best_feature() {
    let (vnni, gemm) = ("bitnet_gemv/avxvnni", "bitnet_gemm/avxvnni");
    assert_eq!(expected_kernels(&["avx2", "avxvnni"])[1], [gemm, vnni, vnni, vnni, vnni, gemm, vnni]);
    assert_eq!(expected_kernels(&["avx2", "avx512vnni", "amx"])[2][5], "bitnet_gemm/avx512vnni");
    assert_eq!(expected_kernels(&["neon"])[0], ["bitnet_gemv/neon"; 7]);
    assert_eq!(expected_kernels(&["neon", "dotprod", "i8mm"])[2][3], "bitnet_gemm/neon-i8mm");
    assert_eq!(expected_kernels(&["simd128"])[2][5], "bitnet_gemm/wasm-simd128");
    assert_eq!(expected_kernels(&[])[2], [REFERENCE; 7]);
}

/// The ternary kernel the dispatcher picks on this CPU for one token, a small batch and a
/// large one, proven by the KERNEL_SELECTED event, against [`expected_kernels`]. Under
/// qemu, `scripts/test-aarch64.sh` also sets TERN_EXPECT_KERNEL (m = 1),
/// TERN_EXPECT_BATCH_KERNEL (m = 8) and TERN_EXPECT_LARGE_BATCH_KERNEL (m = 128) from
/// QEMU_CPU, so a feature detected wrongly fails too.
#[test]
fn the_dispatcher_picks_the_best_kernel_for_this_cpu() {
    let features = cpu_features();
    let expected = expected_kernels(&features);
    let sizes = [(1, "TERN_EXPECT_KERNEL"), (8, "TERN_EXPECT_BATCH_KERNEL"), (128, "TERN_EXPECT_LARGE_BATCH_KERNEL")];
    for (i, (m, var)) in sizes.into_iter().enumerate() {
        for (j, format) in TERNARY.into_iter().enumerate() {
            let sink = std::sync::Arc::new(tern::RecordingSink::default());
            let mut dispatcher = tern::Dispatcher::new(tern::DispatcherOptions::default()).unwrap();
            dispatcher.set_sink(Some(sink.clone()));
            let (n, k) = (8, 256);
            let weight = tern::Tensor::encode(format, &vec![0.25; n * k], n, k).unwrap();
            let act = tern::Tensor::encode(Format::F32, &vec![1.0; m * k], m, k).unwrap();
            let mut scope = tern::Scope::new(0).unwrap();
            dispatcher.matmul(&act, &weight, Some(&mut scope), &mut vec![0.0; m * n]).unwrap();
            let ran = sink.events().last().expect("a kernel event").name();
            assert_eq!(ran, expected[i][j], "{format:?}, m = {m}, features {features:?}");
            // The variables name the kernels of the formats every ISA serves.
            if let Some(want) = std::env::var(var).ok().filter(|w| !w.is_empty() && EVERY_ISA.contains(&format)) {
                assert_eq!(ran, want, "{format:?}, m = {m} ({var})");
            }
        }
    }
}

/// `out[t][r] = sum_k act[t][k] * w[r][k]` from both operands decoded to f32, summed in f64,
/// with `sum_k |act[t][k] * w[r][k]|` (each decoded activation carries one f32 rounding).
fn decoded_product(format: Format, wbytes: &[u8], abytes: &[u8], m: usize, n: usize, k: usize) -> Vec<(f64, f64)> {
    let mut w = vec![0f32; n * k];
    format.decode(wbytes, n, k, &mut w).unwrap();
    let mut a = vec![0f32; m * k];
    Format::I8Absmax.decode(abytes, m, k, &mut a).unwrap();
    let mut out = vec![(0f64, 0f64); m * n];
    for t in 0..m {
        for r in 0..n {
            let products = || w[r * k..][..k].iter().zip(&a[t * k..][..k]).map(|(&w, &a)| w as f64 * a as f64);
            out[t * n + r] = (products().sum(), products().map(f64::abs).sum());
        }
    }
    out
}

/// Q2_0 (with its valid +2 code) and the I2_S packings through the registry: the reference
/// kernel equals the decoded product up to f32 rounding (one rounding of each decoded
/// activation, bounded by eps of the sum of |products|, and a few of the result), and
/// every other kernel for them matches the reference as `check` demands.
#[test]
fn reference_only_formats_match_the_decoded_product() {
    let mut rng = Rng(0x5EED_1234_ABCD_0010);
    for format in REFERENCE_ONLY {
        for (n, k) in [(4, 128), (12, 384), (8, 1024)] {
            let mut cases = vec![weights(&mut rng, format, n, k)];
            if format == Format::Q2_0 {
                // Random codes (all four, +2 included) under valid block scales.
                let mut w = rng.bytes(format.bytes_for(n, k).unwrap());
                for (i, b) in w.chunks_exact_mut(18).enumerate() {
                    b[..2].copy_from_slice(&half::f16::from_f32(0.02 + (i % 5) as f32 * 0.3).to_le_bytes());
                }
                assert_eq!(format.validate(&w, n, k), Ok(()), "every Q2_0 code is valid");
                cases.push(w);
            }
            for w in cases {
                for m in [1, 3, 9] {
                    let a = activations(&mut rng, m, k);
                    let (wm, am) =
                        (MatRef::new(format, n, k, &w).unwrap(), MatRef::new(Format::I8Absmax, m, k, &a).unwrap());
                    let got = run(kernel(REFERENCE, format), &wm, &am, 0..n, 0..m);
                    let want = decoded_product(format, &w, &a, m, n, k);
                    let blocks = (k / format.kernel_block(k)) as f64;
                    for (i, (&g, &(x, abs))) in got.iter().zip(&want).enumerate() {
                        let tol = (2.0 * blocks + 2.0) * f32::EPSILON as f64 * (abs + x.abs()) + 1e-30;
                        assert!((g as f64 - x).abs() <= tol, "{} n={n} k={k} m={m} out {i}: {g} vs {x}", format.name());
                    }
                    check_block(format, &w, &a, n, k, 0..n, 0..m);
                }
            }
        }
    }
}

/// The same trits under the same one scale give the same sums in the same order: an I2_S
/// tensor of any packing computes bit-identically to its BITNET_B1_58 transcode, through the
/// reference and through every SIMD kernel (against the same kernel's BITNET_B1_58 entry):
/// the packings differ only in where the activations are placed.
#[test]
fn i2_s_computes_exactly_like_its_bitnet_transcode() {
    let mut rng = Rng(0x5EED_1234_ABCD_0011);
    // 36 rows: I2_S_R4 interleaves rows in fours.
    let (n, k) = (36, 640);
    for format in [Format::I2S, Format::I2S64, Format::I2SR4] {
        let w = weights(&mut rng, format, n, k);
        let mut b = vec![0; Format::BitnetB158.bytes_for(n, k).unwrap()];
        format.transcode(&w, n, k, Format::BitnetB158, &mut b).unwrap();
        let kernels = candidates(format).into_iter().chain([kernel(REFERENCE, format)]);
        for kern in kernels.map(|k| k.name()) {
            for m in [1, 5, 33] {
                let a = activations(&mut rng, m, k);
                let am = MatRef::new(Format::I8Absmax, m, k, &a).unwrap();
                let got = run(kernel(kern, format), &MatRef::new(format, n, k, &w).unwrap(), &am, 0..n, 0..m);
                let bit = MatRef::new(Format::BitnetB158, n, k, &b).unwrap();
                let want = run(kernel(kern, Format::BitnetB158), &bit, &am, 0..n, 0..m);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{kern} {} m={m}", format.name());
            }
        }
    }
}
