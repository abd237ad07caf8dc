//! Runs the `tern` binary: the demo, bench (table, JSON, errors) and inspect on GGUF files
//! written by the `gguf` PyPI package, and on truncated and corrupted copies of them. A
//! malformed input must give exit code 1 and a message; 101 (a panic) fails the test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use tern::gguf::Gguf;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/gguf/tiny_bitnet.gguf");

fn tern(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tern")).args(args).output().expect("the tern binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts a clean failure: exit code 1 (not a panic's 101), and a message on stderr.
fn assert_fails_cleanly(o: &Output, what: &str, message: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{what}: exit {:?}, stderr: {err}", o.status.code());
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert!(err.contains(message), "{what}: stderr lacks {message:?}: {err}");
}

/// Asserts a usage error from the command line parser: exit code 2 and a hint.
fn assert_usage_error(o: &Output, message: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains(message), "stderr lacks {message:?}: {err}");
}

/// A file of its own for each call: tests run in parallel.
fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let unique = COUNTER.fetch_add(1, Ordering::Relaxed);
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tern-cli-{}-{unique}-{name}", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

fn inspect_bytes(name: &str, bytes: &[u8]) -> Output {
    let path = temp_file(name, bytes);
    let out = tern(&["inspect", path.to_str().unwrap()]);
    std::fs::remove_file(&path).unwrap();
    out
}

/// Byte offset of a tensor info's fields (n_dims, type, offset) in the fixture.
struct InfoAt {
    n_dims: usize,
    ty: usize,
    offset: usize,
}

fn info_at(bytes: &[u8], name: &str) -> InfoAt {
    let key = [&(name.len() as u64).to_le_bytes()[..], name.as_bytes()].concat();
    let start = bytes.windows(key.len()).position(|w| w == key).expect("tensor name in the file") + key.len();
    let dims = u32::from_le_bytes(bytes[start..start + 4].try_into().unwrap()) as usize;
    let ty = start + 4 + 8 * dims;
    InfoAt { n_dims: start, ty, offset: ty + 4 }
}

#[test]
fn every_subcommand_has_help() {
    for args in [&["--help"][..], &["demo", "--help"], &["bench", "--help"], &["inspect", "--help"], &["help", "bench"]]
    {
        let o = tern(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).contains("Usage: tern"), "{args:?}: {}", stdout(&o));
    }
    let o = tern(&["bench", "--help"]);
    for flag in ["--format", "--shape", "--tokens", "--threads", "--kernel", "--json"] {
        assert!(stdout(&o).contains(flag), "bench --help lacks {flag}");
    }
    assert_usage_error(&tern(&[]), "Usage: tern");
}

#[test]
fn demo_prints_kernels_formats_events_parity_and_times() {
    let o = tern(&["demo"]);
    let out = stdout(&o);
    assert!(o.status.success(), "demo failed: {}\n{out}", stderr(&o));
    for needle in [
        "CPU (",
        "Kernels this CPU can run",
        "bitnet_gemv/reference",
        "bits/weight",
        "ADAPTER_INSERTED  requantize-i8-absmax       F32 -> I8_ABSMAX, 1x2560, price 2,564 bytes",
        "KERNEL_SELECTED",
        "Parity against bitnet_gemv/reference",
        "Time per GEMV",
        "speedup",
    ] {
        assert!(out.contains(needle), "demo output lacks {needle:?}:\n{out}");
    }
    // Each format's encoding row, its two events, and one timing row per kernel it has.
    for (format, bytes) in [("TQ1_0", "1,382,400"), ("TQ2_0", "1,689,600"), ("BITNET_B1_58", "1,638,404")] {
        assert!(
            out.lines().any(|l| l.contains(format) && l.contains("2560x2560") && l.contains(bytes)),
            "{format}:\n{out}"
        );
        assert!(out.contains(&format!("{format} x I8_ABSMAX, out 1x2560, {bytes} weight bytes")), "{format}:\n{out}");
        let timed = out.lines().filter(|l| l.trim_start().starts_with(format) && l.trim_end().ends_with('x')).count();
        assert!(timed >= 1, "{format} has no timing row:\n{out}");
    }
    assert!(!out.contains("FAIL"), "{out}");
}

#[test]
fn bench_json_is_one_document_with_every_field() {
    let o = tern(&["bench", "--json", "--shape", "64x512", "--tokens", "2", "--runs", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is one JSON document");
    assert_eq!(
        (doc["n"].as_u64(), doc["k"].as_u64(), doc["tokens"].as_u64(), doc["threads"].as_u64()),
        (Some(64), Some(512), Some(2), Some(1))
    );
    assert_eq!(doc["reference_kernel"], "bitnet_gemv/reference");
    assert!(doc["cpu_features"].is_object() && doc["arch"].is_string() && doc["tern_version"].is_string());
    assert_eq!(doc["adapter"]["name"], "requantize-i8-absmax");
    assert_eq!(doc["adapter"]["bytes"].as_u64(), Some(2 * 516));
    let results = doc["results"].as_array().unwrap();
    for format in ["TQ1_0", "TQ2_0", "BITNET_B1_58"] {
        let reference = results
            .iter()
            .find(|r| r["format"] == format && r["kernel"] == "bitnet_gemv/reference")
            .unwrap_or_else(|| panic!("no reference result for {format}: {doc}"));
        assert_eq!(reference["speedup_vs_reference"].as_f64(), Some(1.0));
    }
    for r in results {
        for field in ["weight_bytes", "runs", "median_ns", "min_ns", "max_ns"] {
            assert!(r[field].as_u64().is_some(), "{field} in {r}");
        }
        assert_eq!(r["runs"].as_u64(), Some(3));
        assert!(r["min_ns"].as_u64() <= r["median_ns"].as_u64() && r["median_ns"].as_u64() <= r["max_ns"].as_u64());
        assert!(r["gb_per_s"].as_f64().unwrap() > 0.0);
        assert!(r["max_rel_err"].as_f64().unwrap() <= 1e-5, "{r}");
        assert_eq!(r["parity_ok"], true);
    }
    let tq2 = results.iter().find(|r| r["format"] == "TQ2_0").unwrap();
    assert_eq!(tq2["weight_bytes"].as_u64(), Some(64 * 2 * 66));
}

#[test]
fn bench_prints_a_table_and_honours_kernel_and_threads() {
    let o = tern(&[
        "bench",
        "--format",
        "tq2_0",
        "--shape",
        "128x256",
        "--threads",
        "2",
        "--kernel",
        "bitnet_gemv/reference",
        "--runs",
        "2",
    ]);
    let out = stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.contains("weight 128x256 (n x k), 1 token(s), 2 thread(s)"), "{out}");
    assert!(out.contains("median") && out.contains("speedup") && out.contains("max rel err"), "{out}");
    let rows: Vec<_> = out.lines().filter(|l| l.trim_start().starts_with("TQ")).collect();
    assert_eq!(rows.len(), 1, "{out}");
    assert!(
        rows[0].contains("TQ2_0") && rows[0].contains("bitnet_gemv/reference") && rows[0].contains("1.00x"),
        "{out}"
    );
    assert!(out.contains("adapter requantize-i8-absmax 1x256"), "{out}");
}

/// `--peak` measures the dot-product peaks in the same process and prints every SIMD
/// kernel's rate as a share of its instruction's peak.
#[test]
fn bench_peak_prints_each_kernel_as_a_share_of_its_peak() {
    let o = tern(&["bench", "--format", "tq2_0", "--shape", "64x256", "--tokens", "9", "--runs", "2", "--peak"]);
    let out = stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.contains("GMAC/s") && out.contains("of peak"), "{out}");
    // With one scale for every block (the per-tensor-scale path), parity still holds.
    let u =
        tern(&["bench", "--format", "tq1_0", "--shape", "64x512", "--tokens", "33", "--runs", "2", "--uniform-scales"]);
    assert!(u.status.success(), "{}", stderr(&u));
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            assert!(out.contains("peak vpmaddubsw ymm"), "{out}");
            let avx2 = out.lines().find(|l| l.contains("bitnet_gemm/avx2")).expect("the AVX2 GEMM row");
            assert!(avx2.contains('%'), "{out}");
            // With two threads every peak loop runs on both at once, and says so.
            let two = tern(&[
                "bench",
                "--format",
                "tq2_0",
                "--shape",
                "64x256",
                "--tokens",
                "9",
                "--runs",
                "2",
                "--peak",
                "--threads",
                "2",
            ]);
            assert!(two.status.success(), "{}", stderr(&two));
            let two = stdout(&two);
            let line = two.lines().find(|l| l.contains("peak vpmaddubsw ymm")).expect("the AVX2 peak");
            assert!(line.contains("2 threads at once"), "{two}");
            let rate: f64 = line.split_whitespace().nth(3).and_then(|x| x.parse().ok()).expect("GMAC/s");
            assert!(rate > 0.0, "{two}");
        }
        if std::arch::is_x86_feature_detected!("avxvnni") {
            assert!(out.contains("peak vpdpbusd ymm (vex)"), "{out}");
            let vnni = out.lines().find(|l| l.contains("bitnet_gemm/avxvnni")).expect("the AVX-VNNI GEMM row");
            assert!(vnni.contains('%'), "{out}");
        }
    }
}

/// One layer of the model's stack, as JSON: the fields tools read.
#[test]
fn bench_model_reports_tokens_per_second_as_json() {
    let o = tern(&["bench", "--model", "bitnet-b1.58-2b", "--layers", "1", "--tokens", "2", "--runs", "1", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("one JSON document");
    // Q, K, V, O: 2560x2560 twice and 640x2560 twice; gate, up: 6912x2560; down: 2560x6912;
    // BITNET_B1_58 packs 4 codes a byte, plus a 4-byte scale per tensor.
    let elems = 2 * 2560 * 2560 + 2 * 640 * 2560 + 3 * 6912 * 2560;
    assert_eq!(doc["weight_bytes"], elems / 4 + 7 * 4, "{doc}");
    assert_eq!(doc["format"], "BITNET_B1_58", "{doc}");
    assert_eq!((&doc["many"], &doc["calls"]), (&false.into(), &7.into()), "{doc}");
    for test in ["tg", "pp"] {
        let tps = doc["tokens_per_second"][test].as_f64().expect("tokens/s");
        assert!(tps.is_finite() && tps > 0.0, "{test}: {doc}");
    }
}

/// With --many, Q/K/V and gate/up are one call each: four calls a layer (QKV, O, gate/up, down).
#[test]
fn bench_model_many_groups_the_shared_activations() {
    let o = tern(&[
        "bench",
        "--model",
        "bitnet-b1.58-2b",
        "--layers",
        "2",
        "--tokens",
        "2",
        "--runs",
        "1",
        "--many",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("one JSON document");
    assert_eq!((&doc["many"], &doc["calls"]), (&true.into(), &8.into()), "{doc}");
}

#[test]
fn bench_model_refuses_what_it_cannot_run() {
    assert_usage_error(
        &tern(&["bench", "--model", "llama-70b"]),
        "the models known are bitnet-b1.58-2b, ternary-bonsai-8b",
    );
    assert_fails_cleanly(&tern(&["bench", "--layers", "2"]), "layers alone", "--layers needs --model");
    assert_fails_cleanly(&tern(&["bench", "--many"]), "many alone", "--many needs --model");
    assert_fails_cleanly(
        &tern(&["bench", "--model", "bitnet-b1.58-2b", "--layers", "31"]),
        "too many layers",
        "--layers must be in 1..=30",
    );
}

#[test]
fn bench_errors_say_what_to_do() {
    assert_usage_error(&tern(&["bench", "--format", "Q4_0"]), "use one of TQ1_0, TQ2_0, BITNET_B1_58");
    assert_usage_error(&tern(&["bench", "--shape", "2560"]), "write NxK with positive integers");
    assert_usage_error(&tern(&["bench", "--shape", "0x256"]), "write NxK");
    assert_usage_error(&tern(&["bench", "--tokens", "0"]), "--tokens");
    assert_fails_cleanly(&tern(&["bench", "--shape", "16x100"]), "bad k", "pick K as a multiple of 256");
    assert_fails_cleanly(&tern(&["bench", "--shape", "100000x100000"]), "huge", "too large to benchmark here");
    assert_fails_cleanly(
        &tern(&["bench", "--shape", "8x1048576", "--tokens", "1024"]),
        "huge act",
        "the activation 1024x1048576",
    );
    let o = tern(&["bench", "--kernel", "bitnet_gemv/nope"]);
    assert_fails_cleanly(&o, "unknown kernel", "unknown kernel \"bitnet_gemv/nope\"; kernels this CPU can run: ");
    assert!(stderr(&o).contains("bitnet_gemv/reference"), "{}", stderr(&o));
    let o = tern(&["bench", "--kernel", "dense_gemv/reference", "--shape", "16x256"]);
    assert_fails_cleanly(&o, "wrong kernel", "serves none of the formats");
}

#[test]
fn inspect_lists_a_gguf_package_file_and_runs_its_ternary_tensors() {
    let o = tern(&["inspect", FIXTURE]);
    let out = stdout(&o);
    assert!(o.status.success(), "{}\n{out}", stderr(&o));
    assert!(out.contains("GGUF v3, 26,656 bytes, 7 metadata keys, 5 tensors, alignment 32"), "{out}");
    assert!(
        out.contains("tokenizer.ggml.tokens (array of 4 string) = [\"<s>\", \"</s>\", \"hello\", \"world\"]"),
        "{out}"
    );
    for (name, ty, shape) in [
        ("token_embd.weight", "F32", "[256, 8]"),
        ("blk.0.attn_q.weight", "TQ2_0", "[512, 64]"),
        ("blk.0.ffn_down.weight", "TQ1_0", "[768, 32]"),
        ("blk.0.ffn_up.weight", "TQ2_0", "[256, 48]"),
        ("output_norm.weight", "F32", "[256]"),
    ] {
        let listed = out.lines().any(|l| {
            let f: Vec<_> = l.split_whitespace().collect();
            f.first() == Some(&name) && f.get(1) == Some(&ty) && l.contains(shape)
        });
        assert!(listed, "{name} {ty} {shape} not listed:\n{out}");
    }
    for run in [
        "blk.0.attn_q.weight TQ2_0 64x512 (n x k):",
        "blk.0.ffn_down.weight TQ1_0 32x768 (n x k):",
        "blk.0.ffn_up.weight TQ2_0 48x256 (n x k):",
    ] {
        assert!(out.contains(run), "{run}\n{out}");
    }
    assert_eq!(out.matches("codes and scales valid").count(), 3, "{out}");
    assert!(
        out.contains("ADAPTER_INSERTED  requantize-i8-absmax       F32 -> I8_ABSMAX, 1x768, price 772 bytes"),
        "{out}"
    );
    assert!(out.contains("TQ1_0 x I8_ABSMAX, out 1x32, 5,184 weight bytes"), "{out}");
    assert_eq!(out.matches("time per GEMV: ").count(), 3, "{out}");
    assert!(out.contains("3 of 3 ternary tensors ok"), "{out}");
    assert!(!out.contains("token_embd.weight F32"), "non-ternary tensors are never run:\n{out}");
}

/// Q2_0 (ggml type 42) and I2_S (bitnet.cpp type 36) tensors written by the gguf package
/// (scripts/gen_gguf_fixtures.py): listed with their sizes, wrapped, validated and run.
#[test]
fn inspect_runs_q2_0_and_i2_s_tensors() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/gguf/tiny_q2_i2s.gguf");
    let o = tern(&["inspect", path]);
    let out = stdout(&o);
    assert!(o.status.success(), "{}\n{out}", stderr(&o));
    for (name, ty, shape, bytes) in [
        ("blk.0.attn_q.weight", "Q2_0", "[192, 32]", "1,728"), // 32 * 192 / 64 blocks of 18 bytes
        ("blk.0.ffn_up.weight", "I2_S", "[256, 16]", "1,056"), // 16 * 256 / 4 + 32
    ] {
        let listed = out.lines().any(|l| {
            let f: Vec<_> = l.split_whitespace().collect();
            f.first() == Some(&name) && f.get(1) == Some(&ty) && l.contains(shape) && f.get(4) == Some(&bytes)
        });
        assert!(listed, "{name} {ty} {shape} {bytes} not listed:\n{out}");
    }
    assert!(out.contains("blk.0.attn_q.weight Q2_0 32x192 (n x k):"), "{out}");
    assert!(out.contains("blk.0.ffn_up.weight I2_S 16x256 (n x k):"), "{out}");
    assert_eq!(out.matches("codes and scales valid").count(), 2, "{out}");
    assert!(out.contains("Q2_0 x I8_ABSMAX, out 1x32, 1,728 weight bytes"), "{out}");
    assert!(out.contains("I2_S x I8_ABSMAX, out 1x16, 1,056 weight bytes"), "{out}");
    assert!(out.contains("2 of 2 ternary tensors ok"), "{out}");
}

#[test]
fn inspect_reads_version_2() {
    let mut bytes = std::fs::read(FIXTURE).unwrap();
    bytes[4..8].copy_from_slice(&2u32.to_le_bytes());
    let o = inspect_bytes("v2.gguf", &bytes);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("GGUF v2"));
}

#[test]
fn inspect_refuses_truncated_files_cleanly() {
    let bytes = std::fs::read(FIXTURE).unwrap();
    let header = Gguf::parse(&bytes).unwrap().data_start as usize;
    let mut lens: Vec<usize> = (0..header).step_by(7).collect();
    lens.extend([header, header + 1, bytes.len() / 2, bytes.len() - 1]);
    for len in lens {
        let o = inspect_bytes("truncated.gguf", &bytes[..len]);
        assert_fails_cleanly(&o, &format!("truncated to {len} bytes"), "is not a valid GGUF file");
    }
    let o = inspect_bytes("empty.gguf", &[]);
    assert_fails_cleanly(&o, "empty", "truncated at offset 0: magic needs 4 bytes, 0 remain");
    assert_fails_cleanly(&tern(&["inspect", "/nonexistent/x.gguf"]), "missing file", "cannot open /nonexistent/x.gguf");
}

#[test]
fn inspect_refuses_corrupted_files_cleanly() {
    let bytes = std::fs::read(FIXTURE).unwrap();
    let q = info_at(&bytes, "blk.0.attn_q.weight");
    let patch = |at: usize, value: &[u8]| {
        let mut b = bytes.clone();
        b[at..at + value.len()].copy_from_slice(value);
        b
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("magic", patch(0, b"GGML"), "not a GGUF file"),
        ("version 1", patch(4, &1u32.to_le_bytes()), "unsupported GGUF version 1"),
        ("version 4", patch(4, &4u32.to_le_bytes()), "unsupported GGUF version 4"),
        ("tensor count", patch(8, &u64::MAX.to_le_bytes()), "truncated or corrupt: tensor count"),
        ("metadata count", patch(16, &(1u64 << 50).to_le_bytes()), "truncated or corrupt: metadata count"),
        ("n_dims", patch(q.n_dims, &9u32.to_le_bytes()), "9 dimensions"),
        ("misaligned", patch(q.offset, &8200u64.to_le_bytes()), "not a multiple of the alignment 32"),
        ("past the end", patch(q.offset, &(1u64 << 40).to_le_bytes()), "runs past the end of the file"),
        ("block shape", patch(q.n_dims + 4, &100u64.to_le_bytes()), "not a multiple of the 256-element block"),
    ];
    for (what, b, message) in cases {
        assert_fails_cleanly(&inspect_bytes("corrupt.gguf", &b), what, message);
    }

    // A code of 3 in the TQ2_0 tensor's data: listed, then refused by validation.
    let g = Gguf::parse(&bytes).unwrap();
    let at = (g.data_start + g.tensor("blk.0.attn_q.weight").unwrap().data_offset) as usize;
    let o = inspect_bytes("bad-codes.gguf", &patch(at, &[0xff]));
    assert_fails_cleanly(&o, "bad codes", "blk.0.attn_q.weight: invalid codes: corrupt code at element 0");
    assert!(stdout(&o).contains("2 of 3 ternary tensors ok"), "{}", stdout(&o));

    // An unknown type is listed without a size, and nothing else is affected.
    let o = inspect_bytes("unknown-type.gguf", &patch(info_at(&bytes, "token_embd.weight").ty, &200u32.to_le_bytes()));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).lines().any(|l| l.contains("token_embd.weight") && l.contains("unknown(200)") && l.contains('?')),
        "{}",
        stdout(&o)
    );

    // Any single corrupted header byte: exit 0 or 1, never a panic.
    for i in 0..g.data_start as usize {
        let mut b = bytes.clone();
        b[i] ^= 0xa5;
        let o = inspect_bytes("flipped.gguf", &b);
        assert!(matches!(o.status.code(), Some(0 | 1)), "byte {i}: exit {:?}, {}", o.status.code(), stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "byte {i}: {}", stderr(&o));
    }
}

#[test]
fn a_closed_stdout_ends_the_report_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["bench", "--format", "TQ2_0", "--shape", "16x256", "--runs", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Close the reading end before the report is written, as `| head -0` would.
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
}
