//! Helpers shared by the benchmarks. Each bench is its own crate and uses only some of
//! them, hence the `allow`.
#![allow(dead_code)]

use std::time::{Duration, Instant};

/// `len` values uniform in [-1, 1), from a seeded xorshift (any seed but 0 works).
pub fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Median wall time of `call` over `calls` calls.
pub fn median_time(calls: usize, mut call: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..calls)
        .map(|_| {
            let start = Instant::now();
            call();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[calls / 2]
}

/// The median of `xs` (the upper one of an even count).
pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}
