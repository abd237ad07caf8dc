//! One dispatcher and one weight shared by several threads calling `matmul` at once, each
//! with its own scope, F32 activations (so every call runs the adapter, then a kernel),
//! for every ternary format, with and without the dispatcher's worker pool.
//!
//! Checks: every thread's output is bit-identical to the single-threaded run of the same
//! inputs; the sink receives every thread's events on that thread, the adapter before its
//! kernel. Under ThreadSanitizer (scripts/test-sanitizers.sh) this is also the data-race
//! test of the dispatcher, its pool, the sink and shared tensors. The pool's own contract
//! (every task once, panics reported, work sharing, failed spawns, the thread limit) is
//! tested at the end, directly.
//!
//! Not built for wasm32, which has no threads (the dispatcher refuses `n_threads > 1` there:
//! tests/suite/dispatch.rs).
#![cfg(not(target_family = "wasm"))]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};
use tern::dispatch::pool::{Pool, PoolError};
use tern::dispatch::MAX_THREADS;
use tern::{Dispatcher, DispatcherOptions, Event, EventKind, EventSink, Format, Scope, Tensor};

const THREADS: usize = 4;
const ROUNDS: usize = 3;
/// n x k = 256 x 1024 elements: above the size from which the pool splits a matmul.
const N: usize = 256;
const K: usize = 1024;
const M: usize = 2;

/// Records which thread each event arrived on.
#[derive(Default)]
struct ThreadSink(Mutex<Vec<(ThreadId, EventKind, String)>>);

impl EventSink for ThreadSink {
    fn on_event(&self, event: &Event) {
        self.0.lock().unwrap().push((thread::current().id(), event.kind, event.name().to_owned()));
    }
}

fn weight(format: Format) -> Tensor<'static> {
    let values: Vec<f32> = (0..N * K).map(|i| ((i * 7919 % 13) as f32 - 6.0) * 0.01).collect();
    Tensor::encode(format, &values, N, K).unwrap()
}

/// A different activation per thread and round, so that mixed-up outputs show.
fn activation(thread: usize, round: usize) -> Tensor<'static> {
    let values: Vec<f32> = (0..M * K).map(|i| ((i * 31 + thread * 101 + round * 7) % 17) as f32 - 8.0).collect();
    Tensor::encode(Format::F32, &values, M, K).unwrap()
}

fn run(dispatcher: &Dispatcher, act: &Tensor, weight: &Tensor, scope: &mut Scope) -> Vec<f32> {
    let mut out = vec![0.0; M * N];
    dispatcher.matmul(act, weight, Some(scope), &mut out).unwrap();
    out
}

fn concurrent_matmuls_match_single_threaded(n_threads: usize) {
    for format in [Format::Tq1_0, Format::Tq2_0, Format::BitnetB158] {
        let weight = weight(format);
        let acts: Vec<Vec<Tensor>> = (0..THREADS).map(|t| (0..ROUNDS).map(|r| activation(t, r)).collect()).collect();
        let single = Dispatcher::new(DispatcherOptions::default()).unwrap();
        let mut scope = Scope::new(0).unwrap();
        let want: Vec<Vec<Vec<f32>>> = acts
            .iter()
            .map(|rounds| rounds.iter().map(|act| run(&single, act, &weight, &mut scope)).collect())
            .collect();

        let sink = Arc::new(ThreadSink::default());
        let mut dispatcher = Dispatcher::new(DispatcherOptions { n_threads, ..Default::default() }).unwrap();
        dispatcher.set_sink(Some(sink.clone()));
        assert_eq!(dispatcher.threads(), n_threads.max(1));
        let barrier = Barrier::new(THREADS);
        let (dispatcher, weight) = (&dispatcher, &weight);
        let (got, ids): (Vec<Vec<Vec<f32>>>, Vec<ThreadId>) = thread::scope(|s| {
            let handles: Vec<_> = acts
                .iter()
                .map(|rounds| {
                    let barrier = &barrier;
                    s.spawn(move || {
                        let mut scope = Scope::new(0).unwrap();
                        barrier.wait();
                        let outs = rounds.iter().map(|act| run(dispatcher, act, weight, &mut scope)).collect();
                        (outs, thread::current().id())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).unzip()
        });

        for (t, (got, want)) in got.iter().zip(&want).enumerate() {
            for (r, (g, w)) in got.iter().zip(want).enumerate() {
                assert!(
                    g.iter().zip(w).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{format:?}, {n_threads} pool threads: thread {t} round {r} differs from the single-threaded run"
                );
            }
        }

        let mut by_thread: HashMap<ThreadId, Vec<(EventKind, String)>> = HashMap::new();
        for (id, kind, name) in sink.0.lock().unwrap().drain(..) {
            by_thread.entry(id).or_default().push((kind, name));
        }
        assert_eq!(by_thread.len(), THREADS, "events came from {} threads, not the {THREADS} callers", by_thread.len());
        for id in &ids {
            let events = by_thread.get(id).unwrap_or_else(|| panic!("no events from thread {id:?}"));
            assert_eq!(events.len(), 2 * ROUNDS, "{format:?}: {events:?}");
            for pair in events.chunks_exact(2) {
                assert_eq!(pair[0], (EventKind::AdapterInserted, "requantize-i8-absmax".to_owned()));
                assert_eq!(pair[1].0, EventKind::KernelSelected, "the adapter comes before its kernel: {events:?}");
                let ternary = ["bitnet_gemv/", "bitnet_gemm/"].iter().any(|p| pair[1].1.starts_with(p));
                assert!(ternary, "{}", pair[1].1);
            }
        }
    }
}

#[test]
fn concurrent_matmuls_without_a_pool() {
    concurrent_matmuls_match_single_threaded(1);
}

#[test]
fn concurrent_matmuls_sharing_a_pool_of_two() {
    concurrent_matmuls_match_single_threaded(2);
}

/// The task counter under pressure: three dispatchers (pools of 2, 3 and 4 threads on this
/// 2-core machine, so workers are often descheduled mid-call) each called from two threads
/// at once, 40 calls per thread with random shapes (row counts that are and are not whole
/// panels, 1 to 40 tokens, so calls split by rows, by tokens, or run inline), every output
/// bit-identical to the single-threaded dispatcher's. Under ThreadSanitizer this is the
/// data-race test of the work-sharing pool.
#[test]
fn random_sizes_on_several_pools_match_single_threaded() {
    let single = Dispatcher::new(DispatcherOptions::default()).unwrap();
    let pools: Vec<Dispatcher> = [2, 3, 4]
        .map(|n_threads| Dispatcher::new(DispatcherOptions { n_threads, ..Default::default() }).unwrap())
        .into();
    let calls = 40;
    thread::scope(|s| {
        for (p, pool) in pools.iter().enumerate() {
            for caller in 0..2 {
                let single = &single;
                s.spawn(move || {
                    let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ (p * 2 + caller) as u64;
                    let mut next = |below: usize| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        (seed % below as u64) as usize
                    };
                    let formats = [Format::Tq1_0, Format::Tq2_0, Format::BitnetB158];
                    for call in 0..calls {
                        let format = formats[next(3)];
                        let (n, k, m) = (1 + next(700), 256 * (1 + next(4)), 1 + next(40));
                        let values: Vec<f32> = (0..n * k).map(|i| ((i * 7919 + call) % 13) as f32 - 6.0).collect();
                        let weight = Tensor::encode(format, &values, n, k).unwrap();
                        let values: Vec<f32> = (0..m * k).map(|i| ((i * 31 + call) % 17) as f32 - 8.0).collect();
                        let act = Tensor::encode(Format::I8Absmax, &values, m, k).unwrap();
                        let (mut want, mut got) = (vec![0f32; m * n], vec![f32::NAN; m * n]);
                        single.matmul(&act, &weight, None, &mut want).unwrap();
                        pool.matmul(&act, &weight, None, &mut got).unwrap();
                        assert!(
                            got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                            "pool {p} caller {caller} call {call}: {format:?} {m}x{n}x{k} differs"
                        );
                    }
                });
            }
        }
    });
}

#[test]
fn every_task_runs_exactly_once() {
    let pool = Pool::new(3).unwrap();
    for n in [0, 1, 2, 3, 7, 64, 1000] {
        let counts: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
        assert!(pool.for_each(n, &|i| {
            counts[i].fetch_add(1, Ordering::Relaxed);
        }));
        assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1), "{n} tasks");
    }
}

#[test]
fn a_panicking_task_is_reported_and_the_others_still_run() {
    let pool = Pool::new(2).unwrap();
    let ran = AtomicU32::new(0);
    let ok = pool.for_each(16, &|i| {
        ran.fetch_add(1, Ordering::Relaxed);
        assert!(i != 5, "task 5 fails on purpose");
    });
    assert!(!ok);
    assert_eq!(ran.load(Ordering::Relaxed), 16);
    // The pool still works afterwards.
    assert!(pool.for_each(4, &|_| {}));
}

#[test]
fn a_blocked_worker_does_not_hold_the_call() {
    // One task blocks until every other task has run: with a static split it would
    // wait for a part nobody runs; with work sharing the other participant takes the
    // rest.
    let pool = Pool::new(2).unwrap();
    let others = AtomicU32::new(0);
    let n = 32;
    assert!(pool.for_each(n, &|i| {
        if i == 0 {
            let start = Instant::now();
            while others.load(Ordering::Acquire) < n as u32 - 1 {
                assert!(start.elapsed() < Duration::from_secs(10), "the other tasks never ran");
                std::thread::yield_now();
            }
        } else {
            others.fetch_add(1, Ordering::Release);
        }
    }));
}

#[test]
fn a_failed_spawn_stops_the_workers_already_started() {
    let live = Arc::new(AtomicU32::new(0));
    let mut started = 0;
    let result = Pool::with_spawner(4, |name, body| {
        started += 1;
        if started == 3 {
            return Err(std::io::Error::other("refused on purpose"));
        }
        let live = Arc::clone(&live);
        live.fetch_add(1, Ordering::SeqCst);
        std::thread::Builder::new().name(name).spawn(move || {
            body();
            live.fetch_sub(1, Ordering::SeqCst);
        })
    });
    assert!(matches!(result, Err(PoolError::Spawn { index: 3, .. })));
    // The error returns after the two started workers were joined.
    assert_eq!(live.load(Ordering::SeqCst), 0);
}

#[test]
fn too_many_threads_are_refused() {
    assert!(matches!(Pool::new(MAX_THREADS + 1), Err(PoolError::TooManyThreads(n)) if n == MAX_THREADS + 1));
}
