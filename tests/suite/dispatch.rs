//! The adapter, scopes, events, the reference kernels and the dispatcher (docs/design.md §2).

use crate::common::Rng;
use std::sync::Arc;
use tern::adapter::{requantize_i8_absmax, requantize_i8_absmax_into};
use tern::dispatch::{available_kernels, bitnet_gemv};
use tern::{Dispatcher, DispatcherOptions, Error, EventKind, Format, RecordingSink, Scope, Tensor};

const TERNARY: [Format; 3] = [Format::Tq1_0, Format::Tq2_0, Format::BitnetB158];
const CANARY: f32 = -12345.5;

fn dispatcher(sink: &Arc<RecordingSink>) -> Dispatcher {
    let mut d = Dispatcher::new(DispatcherOptions::default()).unwrap();
    d.set_sink(Some(sink.clone()));
    d
}

/// The definition: sum of decoded activation x decoded weight, in f64.
fn definition(act: &Tensor, weight: &Tensor) -> Vec<f32> {
    let (a, w) = (act.decode().unwrap(), weight.decode().unwrap());
    let (m, n, k) = (act.rows(), weight.rows(), weight.cols());
    let mut out = vec![0f32; m * n];
    for i in 0..m {
        for r in 0..n {
            let dot: f64 = (0..k).map(|j| a[i * k + j] as f64 * w[r * k + j] as f64).sum();
            out[i * n + r] = dot as f32;
        }
    }
    out
}

fn assert_close(got: &[f32], want: &[f32], rel: f32, what: &str) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= rel * w.abs().max(1.0), "{what}: [{i}] got {g}, want {w}");
    }
}

#[test]
fn reference_kernel_matches_the_definition() {
    let mut rng = Rng(7);
    let shapes = [(2, 4, 256), (3, 37, 1024), (1, 64, 4096)];
    for format in TERNARY {
        for &(m, n, k) in &shapes {
            let weight = Tensor::encode(format, &rng.vec(n * k, 0.05), n, k).unwrap();
            let act = Tensor::encode(Format::I8Absmax, &rng.vec(m * k, 3.0), m, k).unwrap();
            let mut out = vec![CANARY; m * n];
            let kernel = bitnet_gemv(Some("bitnet_gemv/reference"), &act, &weight, 0..n, &mut out).unwrap();
            assert_eq!(kernel.name(), "bitnet_gemv/reference");
            // Integer sums are exact; only float scaling order differs from f64.
            assert_close(&out, &definition(&act, &weight), 1e-3, &format!("{format:?} {m}x{n}x{k}"));
        }
    }
}

#[test]
fn bitnet_k_multiple_of_4_not_256() {
    let mut rng = Rng(11);
    let (m, n, k) = (3, 5, 100);
    let weight = Tensor::encode(Format::BitnetB158, &rng.vec(n * k, 1.0), n, k).unwrap();
    let act = Tensor::encode(Format::I8Absmax, &rng.vec(m * k, 1.0), m, k).unwrap();
    for kernel in available_kernels().filter(|k| k.weight() == Format::BitnetB158) {
        let mut out = vec![CANARY; m * n];
        bitnet_gemv(Some(kernel.name()), &act, &weight, 0..n, &mut out).unwrap();
        assert_close(&out, &definition(&act, &weight), 1e-3, kernel.name());
    }
}

#[test]
fn all_zero_weight_yields_exact_zero() {
    let mut rng = Rng(3);
    let (m, n, k) = (2, 9, 512);
    let act = Tensor::encode(Format::I8Absmax, &rng.vec(m * k, 2.0), m, k).unwrap();
    for format in TERNARY {
        let weight = Tensor::encode(format, &vec![0.0; n * k], n, k).unwrap();
        for kernel in available_kernels().filter(|kn| kn.weight() == format) {
            let mut out = vec![CANARY; m * n];
            bitnet_gemv(Some(kernel.name()), &act, &weight, 0..n, &mut out).unwrap();
            assert!(out.iter().all(|&x| x.to_bits() == 0.0f32.to_bits()), "{}: {out:?}", kernel.name());
        }
    }
}

#[test]
fn row_ranges_write_only_their_columns() {
    let mut rng = Rng(5);
    let (m, n, k) = (3, 37, 256);
    for format in TERNARY {
        let weight = Tensor::encode(format, &rng.vec(n * k, 1.0), n, k).unwrap();
        let act = Tensor::encode(Format::I8Absmax, &rng.vec(m * k, 1.0), m, k).unwrap();
        let want = definition(&act, &weight);
        let mut out = vec![CANARY; m * n];
        bitnet_gemv(None, &act, &weight, 5..20, &mut out).unwrap();
        for i in 0..m {
            for r in 0..n {
                let got = out[i * n + r];
                if (5..20).contains(&r) {
                    assert!((got - want[i * n + r]).abs() <= 1e-3 * want[i * n + r].abs().max(1.0));
                } else {
                    assert_eq!(got, CANARY, "column {r} outside the range was written");
                }
            }
        }
    }
}

#[test]
fn dense_weight_takes_the_dense_path_without_adapter() {
    let mut rng = Rng(9);
    let (m, n, k) = (2, 7, 33);
    let weight = Tensor::encode(Format::F32, &rng.vec(n * k, 1.0), n, k).unwrap();
    let act = Tensor::encode(Format::F32, &rng.vec(m * k, 1.0), m, k).unwrap();
    let sink = Arc::new(RecordingSink::default());
    let mut out = vec![CANARY; m * n];
    dispatcher(&sink).matmul(&act, &weight, None, &mut out).unwrap();
    assert_close(&out, &definition(&act, &weight), 1e-5, "dense");
    let events = sink.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, EventKind::KernelSelected);
    assert_eq!(events[0].name(), "dense_gemv/reference");
}

#[test]
fn ternary_weight_with_f32_activation_pays_one_adapter() {
    let mut rng = Rng(13);
    let (m, n, k) = (1, 64, 4096);
    for format in TERNARY {
        let weight = Tensor::encode(format, &rng.vec(n * k, 0.1), n, k).unwrap();
        let x = rng.vec(m * k, 4.0);
        let act = Tensor::encode(Format::F32, &x, m, k).unwrap();
        let sink = Arc::new(RecordingSink::default());
        let mut scope = Scope::new(0).unwrap();
        let mut out = vec![CANARY; m * n];
        dispatcher(&sink).matmul(&act, &weight, Some(&mut scope), &mut out).unwrap();

        let events = sink.events();
        assert_eq!(events.len(), 2, "{events:?}");
        let (adapter, kernel) = (&events[0], &events[1]);
        assert_eq!(adapter.kind, EventKind::AdapterInserted);
        assert_eq!(adapter.name(), "requantize-i8-absmax");
        assert_eq!((adapter.from, adapter.to), (Format::F32, Format::I8Absmax));
        assert_eq!((adapter.rows, adapter.cols), (1, 4096));
        assert_eq!(adapter.bytes, 4100, "one token of a 4096-wide model");
        assert_eq!(kernel.kind, EventKind::KernelSelected);
        assert!(kernel.name().starts_with("bitnet_gemv/"), "{}", kernel.name());
        assert_eq!((kernel.from, kernel.to), (format, Format::I8Absmax));
        assert_eq!(scope.stats().bytes_in_use, 4100);
        assert_eq!(scope.stats().allocations, 1);

        let i8_act = Tensor::encode(Format::I8Absmax, &x, m, k).unwrap();
        assert_close(&out, &definition(&i8_act, &weight), 1e-3, "after the adapter");
    }
}

#[test]
fn i8_activation_needs_no_adapter_and_no_scope() {
    let mut rng = Rng(17);
    let (m, n, k) = (2, 8, 256);
    let weight = Tensor::encode(Format::Tq2_0, &rng.vec(n * k, 1.0), n, k).unwrap();
    let act = Tensor::encode(Format::I8Absmax, &rng.vec(m * k, 1.0), m, k).unwrap();
    let sink = Arc::new(RecordingSink::default());
    let mut out = vec![CANARY; m * n];
    dispatcher(&sink).matmul(&act, &weight, None, &mut out).unwrap();
    let events = sink.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, EventKind::KernelSelected);
}

#[test]
fn the_sink_receives_its_own_state() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    let mut d = Dispatcher::new(DispatcherOptions::default()).unwrap();
    d.set_sink(Some(Arc::new(move |_: &tern::Event| {
        counter.fetch_add(1, Ordering::SeqCst);
    })));
    let mut rng = Rng(19);
    let weight = Tensor::encode(Format::Tq1_0, &rng.vec(4 * 256, 1.0), 4, 256).unwrap();
    let act = Tensor::encode(Format::F32, &rng.vec(256, 1.0), 1, 256).unwrap();
    let mut scope = Scope::new(1024).unwrap();
    d.matmul(&act, &weight, Some(&mut scope), &mut [0.0; 4]).unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 2);
}

#[test]
fn requantization_is_faithful() {
    let mut rng = Rng(23);
    let (rows, cols) = (4, 300);
    let mut x = rng.vec(rows * cols, 10.0);
    x[cols..2 * cols].fill(0.0); // a zero row
    let act = Tensor::encode(Format::F32, &x, rows, cols).unwrap();
    let mut scope = Scope::new(0).unwrap();
    let q = requantize_i8_absmax(&act, &mut scope, None).unwrap();
    let back = q.decode().unwrap();
    for r in 0..rows {
        let row = &x[r * cols..][..cols];
        let step = row.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
        for (c, (&want, &got)) in row.iter().zip(&back[r * cols..][..cols]).enumerate() {
            assert!((want - got).abs() <= step, "({r},{c}): {want} vs {got}, step {step}");
        }
    }
    assert!(back[cols..2 * cols].iter().all(|&v| v == 0.0), "zero row survives");
    // The scope variant and the caller-buffer variant agree bit for bit.
    let (mut codes, mut scales) = (vec![0i8; rows * cols], vec![0f32; rows]);
    requantize_i8_absmax_into(&x, rows, cols, &mut codes, &mut scales, None).unwrap();
    let mut want = vec![0u8; Format::I8Absmax.bytes_for(rows, cols).unwrap()];
    Format::I8Absmax.encode(&x, rows, cols, &mut want).unwrap();
    assert_eq!(q.bytes().unwrap(), &want[..]);
    assert_eq!(bytemuck::cast_slice::<i8, u8>(&codes), &want[..rows * cols]);
    assert_eq!(scales[1], 0.0);
}

/// Rows whose scale comes out of the max |x| bits at the edges: signed zeros only,
/// subnormals (a subnormal scale), exact half codes (127 is the max, so x = 63.5 scales to
/// a code of exactly 63.5), a row near f32::MAX / 127, and lengths that end mid-vector.
#[test]
fn requantization_matches_the_definition_on_edge_values() {
    let cols = 37;
    let tiny = f32::MIN_POSITIVE / 8.0;
    let rows: Vec<Vec<f32>> = vec![
        (0..cols).map(|i| if i % 2 == 0 { -0.0 } else { 0.0 }).collect(),
        (0..cols).map(|i| tiny * (i % 5) as f32 * if i % 3 == 0 { -1.0 } else { 1.0 }).collect(),
        (0..cols).map(|i| (i as f32 - 18.0) + 0.5).map(|v| v * 127.0 / 17.5).collect(),
        (0..cols).map(|i| if i == 7 { -127.0 } else { i as f32 - 63.5 }).collect(),
        (0..cols).map(|i| f32::MAX / 256.0 * ((i % 7) as f32 - 3.0) / 3.0).collect(),
    ];
    let x: Vec<f32> = rows.concat();
    let n = rows.len();
    let mut want = vec![0u8; Format::I8Absmax.bytes_for(n, cols).unwrap()];
    Format::I8Absmax.encode(&x, n, cols, &mut want).unwrap();
    let (mut codes, mut scales) = (vec![0i8; n * cols], vec![0f32; n]);
    requantize_i8_absmax_into(&x, n, cols, &mut codes, &mut scales, None).unwrap();
    assert_eq!(bytemuck::cast_slice::<i8, u8>(&codes), &want[..n * cols]);
    let want_scales: Vec<f32> =
        want[n * cols..].chunks_exact(4).map(|s| f32::from_le_bytes(s.try_into().unwrap())).collect();
    assert_eq!(
        scales.iter().map(|s| s.to_bits()).collect::<Vec<_>>(),
        want_scales.iter().map(|s| s.to_bits()).collect::<Vec<_>>()
    );
    assert_eq!(scales[0], 0.0, "signed zeros give scale 0");
    assert!(scales[1] > 0.0 && !scales[1].is_normal(), "a subnormal scale");
}

/// A non-finite value is refused first, before a scale overflow in an earlier row, and the
/// caller's buffers stay untouched.
#[test]
fn requantization_refuses_non_finite_before_an_earlier_scale_overflow() {
    let mut x = vec![1.0f32; 64];
    x[3] = f32::MAX;
    x[40] = f32::INFINITY;
    let (mut codes, mut scales) = (vec![0x5Ai8; 64], vec![7.0f32; 2]);
    let err = requantize_i8_absmax_into(&x, 2, 32, &mut codes, &mut scales, None).unwrap_err();
    assert_eq!(err, Error::NonFinite { index: 40 });
    assert!(codes.iter().all(|&c| c == 0x5A) && scales == [7.0; 2], "nothing written");
    x[40] = 1.0;
    let err = requantize_i8_absmax_into(&x, 2, 32, &mut codes, &mut scales, None).unwrap_err();
    assert!(matches!(err, Error::ScaleOverflow { block: 0, .. }), "{err:?}");
    assert!(codes.iter().all(|&c| c == 0x5A) && scales == [7.0; 2], "nothing written");
}

#[test]
fn requantization_refuses_non_finite_before_allocating_or_reporting() {
    let mut x = vec![1.0f32; 512];
    x[511] = f32::NAN;
    let act = Tensor::encode(Format::F32, &vec![0.0; 512], 2, 256).unwrap();
    let bad = Tensor::from_vec(Format::F32, bytemuck::cast_slice(&x).to_vec(), 2, 256).unwrap();
    let sink = RecordingSink::default();
    let mut scope = Scope::new(0).unwrap();
    assert_eq!(requantize_i8_absmax(&bad, &mut scope, Some(&sink)).unwrap_err(), Error::NonFinite { index: 511 });
    assert_eq!(scope.stats().allocations, 0);
    assert!(sink.events().is_empty());
    requantize_i8_absmax(&act, &mut scope, Some(&sink)).unwrap();
    assert_eq!(sink.events().len(), 1);
}

#[test]
fn scope_stats_staleness_and_high_water() {
    let mut scope = Scope::new(0).unwrap();
    let act = Tensor::encode(Format::F32, &vec![1.0; 4096 * 3], 3, 4096).unwrap();
    let a = requantize_i8_absmax(&act, &mut scope, None).unwrap();
    let b = requantize_i8_absmax(&act, &mut scope, None).unwrap();
    let stats = scope.stats();
    assert_eq!(stats.bytes_in_use, 2 * (3 * 4096 + 12));
    assert_eq!(stats.allocations, 2);
    assert_eq!(stats.high_water, stats.bytes_in_use);
    let pointer = a.bytes().unwrap().as_ptr() as usize;
    assert_eq!(pointer % 64, 0, "64-byte aligned");
    assert_eq!(b.bytes().unwrap().as_ptr() as usize % 64, 0);

    scope.reset();
    assert_eq!(a.bytes().unwrap_err(), Error::StaleTensor);
    assert_eq!(b.get(0, 0).unwrap_err(), Error::StaleTensor);
    let stats = scope.stats();
    assert_eq!((stats.bytes_in_use, stats.allocations, stats.generation), (0, 0, 1));
    assert_eq!(stats.high_water, 2 * (3 * 4096 + 12), "the high-water mark holds");

    // A stale activation is refused by the kernels too.
    let weight = Tensor::encode(Format::Tq2_0, &vec![0.5; 4 * 4096], 4, 4096).unwrap();
    let mut out = vec![CANARY; 12];
    assert_eq!(bitnet_gemv(None, &a, &weight, 0..4, &mut out).unwrap_err(), Error::StaleTensor);
    assert!(out.iter().all(|&v| v == CANARY));

    let c = requantize_i8_absmax(&act, &mut scope, None).unwrap();
    assert!(c.get(2, 4095).is_ok());
    drop(scope);
    assert_eq!(c.bytes().unwrap_err(), Error::StaleTensor, "a freed scope's tensors are stale");
}

/// Every refused call writes nothing and reports nothing.
#[test]
fn bad_input_writes_nothing_and_reports_nothing() {
    let mut rng = Rng(29);
    let (m, n, k) = (2, 6, 256);
    let weight = Tensor::encode(Format::Tq2_0, &rng.vec(n * k, 1.0), n, k).unwrap();
    let act_i8 = Tensor::encode(Format::I8Absmax, &rng.vec(m * k, 1.0), m, k).unwrap();
    let act_f32 = Tensor::encode(Format::F32, &rng.vec(m * k, 1.0), m, k).unwrap();
    let wrong_k = Tensor::encode(Format::I8Absmax, &rng.vec(m * 512, 1.0), m, 512).unwrap();
    let sink = Arc::new(RecordingSink::default());
    let d = dispatcher(&sink);
    let mut out = vec![CANARY; m * n];
    let untouched = |out: &[f32]| out.iter().all(|&v| v == CANARY);

    type Call<'a> = Box<dyn Fn(&mut [f32]) -> Result<(), Error> + 'a>;
    let cases: Vec<(&str, Error, Call)> = vec![
        (
            "mismatched k",
            Error::ShapeMismatch("activation cols differ from weight cols"),
            Box::new(|o| bitnet_gemv(None, &wrong_k, &weight, 0..n, o).map(|_| ())),
        ),
        (
            "short output",
            Error::LengthMismatch { what: "out (floats)", want: m * n, got: m * n - 1 },
            Box::new(|o| bitnet_gemv(None, &act_i8, &weight, 0..n, &mut o[1..]).map(|_| ())),
        ),
        (
            "range past n",
            Error::InvalidRowRange { begin: 0, end: n + 1, rows: n },
            Box::new(|o| bitnet_gemv(None, &act_i8, &weight, 0..n + 1, o).map(|_| ())),
        ),
        (
            "unknown kernel",
            Error::UnknownKernel { name: "bitnet_gemv/nope".into(), from: "the argument `kernel`" },
            Box::new(|o| bitnet_gemv(Some("bitnet_gemv/nope"), &act_i8, &weight, 0..n, o).map(|_| ())),
        ),
        (
            "f32 activation to bitnet_gemv",
            Error::Unsupported { weight: Format::Tq2_0, act: Format::F32 },
            Box::new(|o| bitnet_gemv(None, &act_f32, &weight, 0..n, o).map(|_| ())),
        ),
        ("no scope for the adapter", Error::ScopeRequired, Box::new(|o| d.matmul(&act_f32, &weight, None, o))),
        (
            "matmul mismatched k",
            Error::ShapeMismatch("activation cols differ from weight cols"),
            Box::new(|o| d.matmul(&wrong_k, &weight, None, o)),
        ),
        (
            "matmul short output",
            Error::LengthMismatch { what: "out (floats)", want: m * n, got: 3 },
            Box::new(|o| d.matmul(&act_i8, &weight, None, &mut o[..3])),
        ),
    ];
    for (what, want, call) in cases {
        assert_eq!(call(&mut out).unwrap_err(), want, "{what}");
        assert!(untouched(&out), "{what}: output written");
        assert!(sink.events().is_empty(), "{what}: event reported");
    }
    let mut scope = Scope::new(0).unwrap();
    let mut x = vec![1.0f32; m * k];
    x[3] = f32::INFINITY;
    let inf_act = Tensor::from_vec(Format::F32, bytemuck::cast_slice(&x).to_vec(), m, k).unwrap();
    assert_eq!(d.matmul(&inf_act, &weight, Some(&mut scope), &mut out).unwrap_err(), Error::NonFinite { index: 3 });
    assert!(untouched(&out) && sink.events().is_empty() && scope.stats().allocations == 0);
}

#[test]
fn forcing_kernels() {
    assert!(matches!(
        Dispatcher::new(DispatcherOptions { kernel: Some("no/such".into()), ..Default::default() }),
        Err(Error::UnknownKernel { .. })
    ));
    let sink = Arc::new(RecordingSink::default());
    let mut d =
        Dispatcher::new(DispatcherOptions { kernel: Some("bitnet_gemv/reference".into()), ..Default::default() })
            .unwrap();
    d.set_sink(Some(sink.clone()));
    let mut rng = Rng(31);
    let weight = Tensor::encode(Format::BitnetB158, &rng.vec(4 * 64, 1.0), 4, 64).unwrap();
    let act = Tensor::encode(Format::I8Absmax, &rng.vec(64, 1.0), 1, 64).unwrap();
    d.matmul(&act, &weight, None, &mut [0.0; 4]).unwrap();
    assert_eq!(sink.events()[0].name(), "bitnet_gemv/reference");
    assert!(available_kernels().any(|k| k.name() == "bitnet_gemv/reference"));
    assert!(available_kernels().any(|k| k.name() == "dense_gemv/reference"));
}

/// `matmul/reference`, listed with the kernels, can be forced too (also on a strict
/// dispatcher: asked for, it is no silent fallback): it runs every pair as it comes, with
/// no adapter, so its output is the product of the decoded operands (up to the f32
/// summation: 256 terms, each rounding by at most eps of the running sum of |products|).
#[test]
fn forcing_the_decoding_matmul() {
    let mut rng = Rng(32);
    let (m, n, k) = (2, 4, 256);
    let weight = Tensor::encode(Format::Tq2_0, &rng.vec(n * k, 1.0), n, k).unwrap();
    let a = rng.vec(m * k, 1.0);
    let act = Tensor::encode(Format::F32, &a, m, k).unwrap();
    let w = weight.decode().unwrap();
    let exact: Vec<(f64, f64)> = (0..m * n)
        .map(|i| {
            let products = (0..k).map(|j| a[i / n * k + j] as f64 * w[i % n * k + j] as f64);
            products.fold((0.0, 0.0), |(s, abs), p| (s + p, abs + p.abs()))
        })
        .collect();
    for strict in [false, true] {
        let sink = Arc::new(RecordingSink::default());
        let options = DispatcherOptions { kernel: Some("matmul/reference".into()), strict, ..Default::default() };
        let mut d = Dispatcher::new(options).unwrap();
        d.set_sink(Some(sink.clone()));
        let mut out = [0.0; 8];
        d.matmul(&act, &weight, None, &mut out).unwrap();
        let names: Vec<_> = sink.events().iter().map(|e| e.name().to_owned()).collect();
        assert_eq!(names, ["matmul/reference"], "strict = {strict}");
        for (&o, &(sum, abs)) in out.iter().zip(&exact) {
            assert!((o as f64 - sum).abs() <= k as f64 * f32::EPSILON as f64 * abs, "{o} vs {sum}");
        }
    }
}

/// wasm32 has no threads: a pool is refused with a message, the calling thread works.
#[test]
#[cfg(target_family = "wasm")]
fn wasm_refuses_threads() {
    let err = Dispatcher::new(DispatcherOptions { n_threads: 2, ..Default::default() }).err();
    assert!(matches!(err, Some(Error::InvalidArgument(why)) if why.contains("n_threads")), "{err:?}");
    for n_threads in [0, 1] {
        assert_eq!(Dispatcher::new(DispatcherOptions { n_threads, ..Default::default() }).unwrap().threads(), 1);
    }
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "wasm32 has no threads")]
fn threads_give_the_single_thread_result() {
    let _threads = crate::common::hold_threads();
    let mut rng = Rng(37);
    let (m, n, k) = (3, 1000, 1024);
    for format in TERNARY {
        let weight = Tensor::encode(format, &rng.vec(n * k, 1.0), n, k).unwrap();
        let act = Tensor::encode(Format::I8Absmax, &rng.vec(m * k, 1.0), m, k).unwrap();
        let one = Dispatcher::new(DispatcherOptions::default()).unwrap();
        let two = Dispatcher::new(DispatcherOptions { n_threads: 3, ..Default::default() }).unwrap();
        assert_eq!(two.threads(), 3);
        let (mut a, mut b) = (vec![CANARY; m * n], vec![CANARY; m * n]);
        one.matmul(&act, &weight, None, &mut a).unwrap();
        for _ in 0..3 {
            two.matmul(&act, &weight, None, &mut b).unwrap();
            assert_eq!(a, b);
        }
    }
}
