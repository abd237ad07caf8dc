//! A small, robust timer for a group of implementations of the same operation.
//!
//! The machine is shared, so load changes during a run. Implementations are therefore
//! timed in interleaved rounds (each round runs every implementation once, as a batch of
//! calls sized to a time slice) and each reports the median over rounds of its per-call
//! time: a burst of load hits all of them in the same round, and the median drops it.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// One timed implementation: `call` is what the clock measures; `settle` runs after each
/// batch of calls, outside the clock, to leave the machine as it found it (ggml's
/// threadpool workers would otherwise keep polling a core while the next implementation
/// runs). Closures are implementations with nothing to settle.
pub trait Timed {
    fn call(&mut self);
    fn settle(&mut self) {}
}

impl<F: FnMut()> Timed for F {
    fn call(&mut self) {
        self()
    }
}

pub struct Budget {
    /// Wall time to spend on each implementation, over all rounds.
    pub per_impl: Duration,
    pub rounds: usize,
}

impl Budget {
    pub fn new(per_impl_ms: u64, rounds: usize) -> Budget {
        Budget { per_impl: Duration::from_millis(per_impl_ms), rounds }
    }
}

/// Median seconds per call of each implementation.
pub fn measure(budget: &Budget, impls: &mut [&mut dyn Timed]) -> Vec<f64> {
    let slice = budget.per_impl.as_secs_f64() / budget.rounds as f64;
    let batches: Vec<usize> = impls
        .iter_mut()
        .map(|f| {
            // The first call warms caches, page tables and lazily built tables; the
            // second sizes the batch.
            f.call();
            let t = Instant::now();
            f.call();
            let once = t.elapsed().as_secs_f64().max(1e-9);
            f.settle();
            ((slice / once) as usize).clamp(1, 100_000)
        })
        .collect();
    let mut samples = vec![Vec::with_capacity(budget.rounds); impls.len()];
    for _ in 0..budget.rounds {
        for ((f, &batch), s) in impls.iter_mut().zip(&batches).zip(&mut samples) {
            let t = Instant::now();
            for _ in 0..batch {
                f.call();
            }
            s.push(t.elapsed().as_secs_f64() / batch as f64);
            f.settle();
        }
    }
    samples.into_iter().map(median).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// A plain memory read: sums a buffer of u64. Wrapping integer adds are associative, so
/// LLVM vectorises and interleaves the reduction; the loop is bound by memory, not by an
/// add chain.
pub struct ReadProbe {
    buf: Vec<u64>,
}

impl ReadProbe {
    pub fn new(bytes: usize) -> ReadProbe {
        ReadProbe { buf: (0..bytes / 8).map(|i| i as u64).collect() }
    }

    pub fn bytes(&self) -> usize {
        self.buf.len() * 8
    }

    pub fn run(&self) {
        black_box(sum_u64(black_box(&self.buf)));
    }

    /// Bytes per second, timed on its own.
    pub fn bandwidth(&self, budget: &Budget) -> f64 {
        self.bytes() as f64 / measure(budget, &mut [&mut || self.run()])[0]
    }
}

#[inline(never)]
fn sum_u64(v: &[u64]) -> u64 {
    v.iter().fold(0u64, |s, &x| s.wrapping_add(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn sum_adds_every_element() {
        let v: Vec<u64> = (1..=19).collect();
        assert_eq!(sum_u64(&v), 190);
    }
}
