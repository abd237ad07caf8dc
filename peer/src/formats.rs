//! Q2_0 (ggml type 42) byte parity: ggml's own quantizer (`ggml_quantize_chunk`, which runs
//! `quantize_row_q2_0_ref`) against `tern::Format::Q2_0` on random, edge and tie inputs and
//! on every Q2_0 input committed in tests/fixtures (whose bytes scripts/gen_fixtures.py
//! transcribed, so this run is what ties those fixtures to ggml); and ggml's dequantizer
//! against tern's decode on every byte value (every code, +2 included).

use crate::check::check_bytes;
use crate::ggml;
use tern::Format;

const QK: usize = 64;
const BLOCK_BYTES: usize = 18;

/// ggml's Q2_0 bytes for `rows x k` floats.
fn ggml_encode(src: &[f32], rows: usize, k: usize) -> Vec<u8> {
    let mut dst = ggml::Aligned::zeroed(rows * k / QK * BLOCK_BYTES);
    let written = ggml::quantize_chunk(ggml::TYPE_Q2_0, src, rows, k, &mut dst);
    assert_eq!(written, dst.bytes().len(), "ggml_quantize_chunk wrote an unexpected size");
    dst.bytes().to_vec()
}

fn tern_encode(src: &[f32], rows: usize, k: usize) -> Vec<u8> {
    tern::Tensor::encode(Format::Q2_0, src, rows, k).expect("a finite input").bytes().expect("owned").to_vec()
}

/// A deterministic generator (xorshift), so that a failure can be rerun.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
}

/// One input matrix.
struct Case {
    name: String,
    rows: usize,
    k: usize,
    x: Vec<f32>,
}

fn case(name: &str, rows: usize, k: usize, x: Vec<f32>) -> Case {
    Case { name: name.to_owned(), rows, k, x }
}

fn cases() -> Vec<Case> {
    let mut rng = Rng(0x2_0042);
    let mut cases = Vec::new();
    for scale in [1e-4f32, 1e-2, 1.0, 3e2, 6e4] {
        let x: Vec<f32> = (0..8 * 512).map(|_| rng.unit() * scale).collect();
        cases.push(case(&format!("random x{scale:e}"), 8, 512, x));
    }
    // Per block: a max, elements at exactly +-max/2 and one ulp either side (the f32
    // product x * (1/max) decides the rounding), zeros, -0.0.
    let mut ties = Vec::new();
    for (b, max) in [1.0f32, 0.125, 3.0, 0.7, 1e-3, 4096.0, 6.1e-5, 65504.0].into_iter().enumerate() {
        let half = max * 0.5;
        // One ulp either side of a positive finite value (f32::next_up is newer than the MSRV).
        let (below, above) = (f32::from_bits(half.to_bits() - 1), f32::from_bits(half.to_bits() + 1));
        let pool = [half, -half, below, above, -below, -above, 0.0, -0.0];
        let mut block: Vec<f32> = (0..QK).map(|i| pool[(i * 7 + b) % pool.len()]).collect();
        block[(b * 13) % QK] = if b % 2 == 0 { max } else { -max };
        ties.extend(block);
    }
    cases.push(case("ties", 2, 256, ties));
    cases.push(case("zeros", 2, 128, vec![0.0; 256]));
    // Largest magnitude negative; maxima whose f16 is subnormal or zero; the f16 limit.
    let mut edge: Vec<f32> = (0..10 * QK).map(|_| rng.unit() * 0.9).collect();
    for (b, max) in [-1.0f32, -2.75, 1e-6, 3e-8, 1e-30, 65519.0, -65504.0, 1e-38, 1e-40, -2e-45].into_iter().enumerate()
    {
        let block = &mut edge[b * QK..][..QK];
        for x in block.iter_mut() {
            *x *= max.abs();
        }
        block[(b * 5) % QK] = max;
    }
    cases.push(case("edge maxima", 5, 128, edge));
    // Every input code: values at -1, -0.5, 0, 0.5, 1 times the max, so the quantizer writes
    // codes 0, 1 and 2 in every field position.
    let codes: Vec<f32> = (0..4 * QK).map(|i| [-1.0, -0.5, 0.0, 0.5, 1.0, -0.49][i % 6]).collect();
    cases.push(case("all codes", 1, 256, codes));
    cases
}

/// Q2_0 fixtures listed in tests/fixtures/manifest.txt, with their committed bytes.
fn fixtures() -> Vec<(Case, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let manifest = String::from_utf8(read("manifest.txt")).expect("UTF-8 manifest");
    manifest
        .lines()
        .filter_map(|l| l.strip_prefix("q2_0 "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let stem = format!("q2_0_{}", f[0]);
            let input = read(&format!("{stem}.in.f32"));
            let input = input.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            let bytes = read(&format!("{stem}.q.bin"));
            (case(&format!("{stem} (committed)"), f[1].parse().unwrap(), f[2].parse().unwrap(), input), bytes)
        })
        .collect()
}

/// Runs every check; returns the number that failed.
pub fn run() -> usize {
    println!("Q2_0 (ggml type 42) parity:");
    let mut failures = 0;
    for c in cases() {
        let ggml = ggml_encode(&c.x, c.rows, c.k);
        failures += check_bytes(&c.name, &ggml, &tern_encode(&c.x, c.rows, c.k), c.rows, c.k / QK * BLOCK_BYTES);
    }
    let fixtures = fixtures();
    assert!(fixtures.len() >= 12, "the Q2_0 fixtures are listed in the manifest");
    for (c, committed) in fixtures {
        let ggml = ggml_encode(&c.x, c.rows, c.k);
        failures += check_bytes(&c.name, &ggml, &committed, c.rows, c.k / QK * BLOCK_BYTES);
    }

    // Every byte value in every position, under four f16 scales (0.375, about 1e-3, 59968,
    // the smallest subnormal): ggml's dequantizer and tern's decode agree bit for bit.
    let mut bytes = Vec::new();
    for (b, d) in (0..16u8).zip([0x3600u16, 0x1419, 0x7B53, 0x0001].into_iter().cycle()) {
        bytes.extend(d.to_le_bytes());
        bytes.extend((0..16u8).map(|m| b * 16 + m));
    }
    let n = 16 * QK;
    let ggml = ggml::to_float(ggml::TYPE_Q2_0, &bytes, n);
    let tern = tern::Tensor::wrap(Format::Q2_0, &bytes, 1, n).and_then(|t| t.decode()).expect("whole blocks");
    let same = ggml.iter().zip(&tern).all(|(a, b)| a.to_bits() == b.to_bits());
    println!(
        "  check every byte value  decode: ggml to_float == tern decode ({n} elements, code 3 = +2d) {}",
        crate::check::verdict(same)
    );
    failures + usize::from(!same)
}
