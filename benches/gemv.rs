//! Ternary GEMV per kernel and weight format at 4096x4096, single thread, weights warm in
//! cache: m = 1 for every GEMV, m = 8 and m = 128 for the kernel the dispatcher picks
//! there (a GEMM past its `min_tokens`), m = 128 also for the best GEMV, and the activation
//! adapter (1 and 128 rows of 4096).
//!
//! `cargo bench -p tern-benches --bench gemv -- avx512vnni` runs one kernel's cases.
//!
//! `threads/N` times the [`Dispatcher`] on TQ2_0 at m = 1 with N threads (the caller and
//! N - 1 pool workers), in wall time: the 2-thread speedup includes the pool's wake-up.
//!
//! Time is the benchmark thread's CPU time (Linux `/proc/thread-self/schedstat`), so that
//! a machine shared with other jobs reports what an idle one would; elsewhere it falls back
//! to wall time.

mod common;
use common::values;
use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::time::{Duration, Instant};
use tern::adapter::requantize_i8_absmax_into;
use tern::kernel::{registry, Kernel, MatRef, OutTile};
use tern::{Dispatcher, DispatcherOptions, Format, Tensor};

const N: usize = 4096;
const K: usize = 4096;

fn encode(format: Format, src: &[f32], rows: usize, cols: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; format.bytes_for(rows, cols).unwrap()];
    format.encode(src, rows, cols, &mut bytes).unwrap();
    bytes
}

fn gemv(k: &'static Kernel, w: &MatRef, a: &MatRef, out: &mut [f32]) {
    let mut view = OutTile::new(out, a.rows(), w.rows()).unwrap();
    k.run(w, a, &mut view).unwrap();
}

/// CPU time of the calling thread in ns, or wall time where the kernel does not report it.
struct CpuTime {
    epoch: Instant,
}

impl CpuTime {
    fn now(&self) -> u64 {
        std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| self.epoch.elapsed().as_nanos() as u64)
    }
}

static WALL: WallTime = WallTime;

impl Measurement for CpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        self.now()
    }
    fn end(&self, start: u64) -> u64 {
        self.now() - start
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, ns: &u64) -> f64 {
        *ns as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        // Values are nanoseconds, as wall time's are.
        WALL.formatter()
    }
}

fn bench(c: &mut Criterion<CpuTime>) {
    let mut group = c.benchmark_group("gemv");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    let wsrc = values(N * K, 0x9E37_79B9_7F4A_7C15);
    let acts: Vec<(usize, Vec<u8>)> =
        [1, 8, 128].map(|m| (m, encode(Format::I8Absmax, &values(m * K, 0xA5A5_1234 + m as u64), m, K))).into();
    for format in [Format::Tq1_0, Format::Tq2_0, Format::BitnetB158] {
        let wbytes = encode(format, &wsrc, N, K);
        let w = MatRef::new(format, N, K, &wbytes).unwrap();
        let kernels: Vec<&Kernel> = registry()
            .iter()
            .filter(|k| k.weight() == format && k.act() == Format::I8Absmax && k.is_available())
            .collect();
        // Registry order is best first among the kernels preferred at a token count.
        let best = |m: usize| kernels.iter().find(|k| k.min_tokens() <= m).copied();
        for kernel in &kernels {
            // Every single-token kernel at m = 1; the batches on the kernel the dispatcher
            // picks for them, and m = 128 also on the best single-token kernel, for the
            // GEMM's gain.
            let picked = |m: usize| best(m).is_some_and(|b| std::ptr::eq(b, *kernel));
            let runs = |m: usize| (m == 1 && kernel.min_tokens() == 1) || picked(m) || (m == 128 && picked(1));
            for (m, abytes) in acts.iter().filter(|(m, _)| runs(*m)) {
                let a = MatRef::new(Format::I8Absmax, *m, K, abytes).unwrap();
                let mut out = vec![0f32; m * N];
                let id = BenchmarkId::new(format!("{}/{}", kernel.name(), format.name()), format!("m={m}"));
                group.bench_function(id, |b| b.iter(|| gemv(kernel, &w, &a, &mut out)));
            }
        }
    }
    group.finish();

    let mut group = c.benchmark_group("requant");
    group.sample_size(20).measurement_time(Duration::from_secs(2));
    for m in [1, 128] {
        let src = values(m * K, 0x1234_5678);
        let (mut codes, mut scales) = (vec![0i8; m * K], vec![0f32; m]);
        // The adapter as engines call it: input checks, the fastest row requantizer, no event.
        group.bench_function(BenchmarkId::new("adapter", format!("{m}x{K}")), |b| {
            b.iter(|| requantize_i8_absmax_into(&src, m, K, &mut codes, &mut scales, None).unwrap())
        });
        // The definition, for scale: the format's encoder (it also checks for non-finite input).
        let mut bytes = vec![0u8; Format::I8Absmax.bytes_for(m, K).unwrap()];
        group.bench_function(BenchmarkId::new("encode", format!("{m}x{K}")), |b| {
            b.iter(|| Format::I8Absmax.encode(&src, m, K, &mut bytes).unwrap())
        });
    }
    group.finish();
}

fn threads(c: &mut Criterion) {
    let mut group = c.benchmark_group("threads");
    group.sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    let weight = Tensor::encode(Format::Tq2_0, &values(N * K, 0x9E37_79B9_7F4A_7C15), N, K).unwrap();
    let act = Tensor::encode(Format::I8Absmax, &values(K, 0xA5A5_1235), 1, K).unwrap();
    let mut out = vec![0f32; N];
    for n_threads in [1, 2] {
        let d = Dispatcher::new(DispatcherOptions { n_threads, ..Default::default() }).unwrap();
        group.bench_function(BenchmarkId::from_parameter(n_threads), |b| {
            b.iter(|| d.matmul(&act, &weight, None, &mut out).unwrap())
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(CpuTime { epoch: Instant::now() });
    targets = bench
}
criterion_group!(wall, threads);
criterion_main!(benches, wall);
