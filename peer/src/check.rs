//! The agreement checks shared by both parts: tolerances, byte parity, relative L2.

/// Relative L2 tolerance between ggml's dot (Q8_K activation, one scale per 256) and
/// tern's (I8_ABSMAX, one scale per row), both measured against the exact f64 product of
/// the dequantized weight and the f32 activation. Rounding an activation to a step s
/// leaves an error uniform in +-s/2 (standard deviation s/sqrt(12)); with s = max|x|/127
/// and x uniform in [-1, 1) (rms 1/sqrt(3)), the relative error per element is about
/// (1/127)/sqrt(12) * sqrt(3) = 0.004, and a random ternary weight carries that relative
/// error into the output norm unchanged. 1e-2 is 2.5 times that: loose enough for the
/// two schemes, tight enough to catch a wrong scale, a dropped block or a shuffled row.
/// ggml's and tern's outputs compared directly carry two independent such errors (about
/// sqrt(2) x 0.004 = 0.006), still inside; one wrong token of 512 would add
/// sqrt(2/512) = 0.06.
pub const DOT_TOLERANCE: f64 = 1e-2;

/// tern's SIMD kernels must match the reference kernel up to f32 summation order.
pub const KERNEL_TOLERANCE: f64 = 1e-5;

/// Byte parity of a whole weight matrix; reports the first mismatching row and byte.
pub fn check_bytes(name: &str, ggml: &[u8], tern: &[u8], n: usize, row_bytes: usize) -> usize {
    let mismatches = ggml.iter().zip(tern).filter(|(a, b)| a != b).count() + ggml.len().abs_diff(tern.len());
    if mismatches == 0 {
        println!("  check {name:<13} bytes: ggml_quantize_chunk == tern encode ({} bytes, {n} rows) PASS", ggml.len());
        return 0;
    }
    let first = ggml.iter().zip(tern).position(|(a, b)| a != b).unwrap_or(ggml.len().min(tern.len()));
    println!(
        "  check {name:<13} bytes: {mismatches} mismatching bytes of {}; first at row {} byte {} (ggml {:#04x}, tern {:#04x}) FAIL",
        ggml.len(),
        first / row_bytes,
        first % row_bytes,
        ggml.get(first).copied().unwrap_or(0),
        tern.get(first).copied().unwrap_or(0),
    );
    1
}

/// `||a - b|| / ||norm||` in f64.
pub fn rel_l2(a: &[f32], b: &[f32], norm: &[f32]) -> f64 {
    let d: f64 = a.iter().zip(b).map(|(&a, &b)| (a as f64 - b as f64).powi(2)).sum();
    let z: f64 = norm.iter().map(|&v| (v as f64).powi(2)).sum();
    (d / z.max(f64::MIN_POSITIVE)).sqrt()
}

pub fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "FAIL"
    }
}
