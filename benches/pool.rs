//! The dispatcher's pool on TQ2_0 4096x4096, m = 1, wall time: 1 thread against 2, on idle
//! cores and with one other busy thread (a spinning loop, as another process would be),
//! interleaved rounds, medians. On a 2-core machine the busy thread takes a core from one
//! of the pool's two threads for part of every call: a static split waits for that part,
//! work sharing lets the caller take it over.
//!
//! `cargo bench -p tern-benches --bench pool` prints one line per case and the ratios the
//! pool's targets are stated in: idle 1-thread / 2-thread time (>= 1.85), busy 2-thread /
//! 1-thread time (<= 1.05).

mod common;
use common::{median, median_time, values};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tern::{Dispatcher, DispatcherOptions, Format, Tensor};

const N: usize = 4096;
const K: usize = 4096;
const ROUNDS: usize = 15;
const CALLS: usize = 200;

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too: keep that quick.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let weight = Tensor::encode(Format::Tq2_0, &values(N * K, 0x9E37_79B9_7F4A_7C15), N, K).unwrap();
    let act = Tensor::encode(Format::I8Absmax, &values(K, 0xA5A5_1235), 1, K).unwrap();
    let mut out = vec![0f32; N];
    let one = Dispatcher::new(DispatcherOptions { n_threads: 1, ..Default::default() }).unwrap();
    let two = Dispatcher::new(DispatcherOptions { n_threads: 2, ..Default::default() }).unwrap();
    let (mut idle, mut busy) = (Vec::new(), Vec::new());
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    for _ in 0..ROUNDS {
        let (t1, t2) = (
            median_time(CALLS, || one.matmul(&act, &weight, None, &mut out).unwrap()),
            median_time(CALLS, || two.matmul(&act, &weight, None, &mut out).unwrap()),
        );
        idle.push((us(t1), us(t2)));
        let stop = AtomicBool::new(false);
        let (b1, b2) = std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
            let times = (
                median_time(CALLS, || one.matmul(&act, &weight, None, &mut out).unwrap()),
                median_time(CALLS, || two.matmul(&act, &weight, None, &mut out).unwrap()),
            );
            stop.store(true, Ordering::Relaxed);
            times
        });
        busy.push((us(b1), us(b2)));
    }
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    println!("pool: TQ2_0 {N}x{K}, m = 1, {ROUNDS} rounds x {CALLS} calls, medians, {cpu}");
    for (name, xs) in [("idle", &idle), ("one busy thread", &busy)] {
        let t1 = median(xs.iter().map(|x| x.0).collect());
        let t2 = median(xs.iter().map(|x| x.1).collect());
        let ratio = median(xs.iter().map(|x| x.1 / x.0).collect());
        println!("  {name:16} 1 thread {t1:7.1} us   2 threads {t2:7.1} us   2-thread / 1-thread time {ratio:.3} (speedup {:.2}x)", 1.0 / ratio);
    }
}
