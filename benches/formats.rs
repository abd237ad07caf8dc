//! Encode and decode throughput per format at 4096x4096, single thread.
//! Throughput is stated in bytes of f32 (input for encode, output for decode).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tern::Format;

const ROWS: usize = 4096;
const COLS: usize = 4096;

fn weights() -> Vec<f32> {
    // A deterministic spread of magnitudes and signs (xorshift), no allocation in the loop.
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    (0..ROWS * COLS)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let src = weights();
    let mut group = c.benchmark_group("format");
    group.sample_size(10);
    group.throughput(Throughput::Bytes((ROWS * COLS * 4) as u64));
    for format in Format::ALL {
        let mut bytes = vec![0u8; format.bytes_for(ROWS, COLS).unwrap()];
        group.bench_function(format!("encode/{}", format.name()), |b| {
            b.iter(|| format.encode(&src, ROWS, COLS, &mut bytes).unwrap())
        });
        let mut out = vec![0f32; ROWS * COLS];
        group.bench_function(format!("decode/{}", format.name()), |b| {
            b.iter(|| format.decode(&bytes, ROWS, COLS, &mut out).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
