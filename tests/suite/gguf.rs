//! The GGUF reader on buffers built here: well-formed files of both versions, and every
//! kind of malformed file (each must give an error naming the problem, never a panic).

use tern::gguf::{Gguf, GgufError, GgufFile, Value, ValueType};
use tern::{Format, Tensor};

const TQ1_0: u32 = 34;
const TQ2_0: u32 = 35;
const F32: u32 = 0;

#[derive(Clone)]
struct TensorSpec {
    name: String,
    dims: Vec<u64>,
    ty: u32,
    data: Vec<u8>,
    /// Written instead of the computed offset.
    offset: Option<u64>,
}

/// A GGUF file described field by field, so that a test can break any one of them.
#[derive(Clone)]
struct Builder {
    magic: [u8; 4],
    version: u32,
    kvs: Vec<(Vec<u8>, Vec<u8>)>,
    kv_count: Option<u64>,
    tensors: Vec<TensorSpec>,
    tensor_count: Option<u64>,
    alignment: u64,
}

fn string(s: &[u8]) -> Vec<u8> {
    let mut v = (s.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(s);
    v
}

/// A typed value: type id, then payload.
fn typed(ty: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = ty.to_le_bytes().to_vec();
    v.extend_from_slice(payload);
    v
}

fn array(elem_ty: u32, len: u64, payload: &[u8]) -> Vec<u8> {
    let mut v = elem_ty.to_le_bytes().to_vec();
    v.extend_from_slice(&len.to_le_bytes());
    v.extend_from_slice(payload);
    typed(9, &v)
}

fn ternary_data(format: Format, rows: usize, cols: usize, seed: u32) -> Vec<u8> {
    let src: Vec<f32> =
        (0..rows * cols).map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 7) as f32 - 3.0).collect();
    Tensor::encode(format, &src, rows, cols).unwrap().bytes().unwrap().to_vec()
}

impl Builder {
    /// Three tensors (TQ2_0 2x256, F32 3x4, TQ1_0 1x256) and metadata of every type.
    fn valid() -> Builder {
        let strings: Vec<u8> = [&b"a"[..], b"bc", b""].iter().flat_map(|s| string(s)).collect();
        let inner = [array(4, 2, &[1, 0, 0, 0, 2, 0, 0, 0]), array(8, 1, &string(b"x"))];
        let nested: Vec<u8> = inner.iter().flat_map(|a| a[4..].to_vec()).collect();
        let kvs = vec![
            (b"general.architecture".to_vec(), typed(8, &string(b"bitnet"))),
            (b"general.alignment".to_vec(), typed(4, &32u32.to_le_bytes())),
            (b"t.u8".to_vec(), typed(0, &[200])),
            (b"t.i8".to_vec(), typed(1, &[0xff])),
            (b"t.u16".to_vec(), typed(2, &500u16.to_le_bytes())),
            (b"t.i16".to_vec(), typed(3, &(-500i16).to_le_bytes())),
            (b"t.i32".to_vec(), typed(5, &(-7i32).to_le_bytes())),
            (b"t.f32".to_vec(), typed(6, &1.5f32.to_le_bytes())),
            (b"t.bool".to_vec(), typed(7, &[1])),
            (b"t.u64".to_vec(), typed(10, &(1u64 << 40).to_le_bytes())),
            (b"t.i64".to_vec(), typed(11, &(-(1i64 << 40)).to_le_bytes())),
            (b"t.f64".to_vec(), typed(12, &0.25f64.to_le_bytes())),
            (b"t.strings".to_vec(), array(8, 3, &strings)),
            (b"t.empty".to_vec(), array(6, 0, &[])),
            (b"t.nested".to_vec(), typed(9, &[&9u32.to_le_bytes()[..], &2u64.to_le_bytes(), &nested].concat())),
        ];
        let f32_data: Vec<u8> = (0..12).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let tensors = vec![
            TensorSpec {
                name: "w2".into(),
                dims: vec![256, 2],
                ty: TQ2_0,
                data: ternary_data(Format::Tq2_0, 2, 256, 1),
                offset: None,
            },
            TensorSpec { name: "f".into(), dims: vec![4, 3], ty: F32, data: f32_data, offset: None },
            TensorSpec {
                name: "w1".into(),
                dims: vec![256],
                ty: TQ1_0,
                data: ternary_data(Format::Tq1_0, 1, 256, 2),
                offset: None,
            },
        ];
        Builder { magic: *b"GGUF", version: 3, kvs, kv_count: None, tensors, tensor_count: None, alignment: 32 }
    }

    fn kv(mut self, key: &str, value: Vec<u8>) -> Builder {
        self.kvs.retain(|(k, _)| k != key.as_bytes());
        self.kvs.push((key.as_bytes().to_vec(), value));
        self
    }

    /// Tensor data is laid out in order, each start aligned; the file ends right after the
    /// last tensor's bytes, so every shorter prefix is missing something.
    fn build(&self) -> Vec<u8> {
        let mut f = self.magic.to_vec();
        f.extend_from_slice(&self.version.to_le_bytes());
        f.extend_from_slice(&self.tensor_count.unwrap_or(self.tensors.len() as u64).to_le_bytes());
        f.extend_from_slice(&self.kv_count.unwrap_or(self.kvs.len() as u64).to_le_bytes());
        for (k, v) in &self.kvs {
            f.extend_from_slice(&string(k));
            f.extend_from_slice(v);
        }
        let mut data = Vec::new();
        for t in &self.tensors {
            data.resize((data.len() as u64).next_multiple_of(self.alignment) as usize, 0);
            f.extend_from_slice(&string(t.name.as_bytes()));
            f.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                f.extend_from_slice(&d.to_le_bytes());
            }
            f.extend_from_slice(&t.ty.to_le_bytes());
            f.extend_from_slice(&t.offset.unwrap_or(data.len() as u64).to_le_bytes());
            data.extend_from_slice(&t.data);
        }
        f.resize((f.len() as u64).next_multiple_of(self.alignment) as usize, 0);
        f.extend_from_slice(&data);
        f
    }
}

fn parse_err(b: &Builder) -> GgufError {
    Gguf::parse(&b.build()).expect_err("a malformed file must not parse")
}

#[test]
fn a_well_formed_file_parses_completely() {
    for version in [2, 3] {
        let b = Builder { version, ..Builder::valid() };
        let bytes = b.build();
        let g = Gguf::parse(&bytes).unwrap();
        assert_eq!(g.version, version);
        assert_eq!(g.alignment, 32);
        assert_eq!(g.data_start % 32, 0);
        assert_eq!(g.metadata.len(), b.kvs.len());
        assert!(matches!(g.get("general.architecture"), Some(Value::String(b"bitnet"))));
        assert_eq!(g.get("t.u8"), Some(&Value::U8(200)));
        assert_eq!(g.get("t.i8"), Some(&Value::I8(-1)));
        assert_eq!(g.get("t.u16"), Some(&Value::U16(500)));
        assert_eq!(g.get("t.i16"), Some(&Value::I16(-500)));
        assert_eq!(g.get("t.i32"), Some(&Value::I32(-7)));
        assert_eq!(g.get("t.f32"), Some(&Value::F32(1.5)));
        assert_eq!(g.get("t.bool"), Some(&Value::Bool(true)));
        assert_eq!(g.get("t.u64"), Some(&Value::U64(1 << 40)));
        assert_eq!(g.get("t.i64"), Some(&Value::I64(-(1 << 40))));
        assert_eq!(g.get("t.f64"), Some(&Value::F64(0.25)));

        let Some(Value::Array(strings)) = g.get("t.strings") else { panic!("t.strings is an array") };
        assert_eq!((strings.elem_type, strings.len), (ValueType::String, 3));
        let got: Vec<_> = strings.iter().collect();
        assert_eq!(got, [Value::String(b"a"), Value::String(b"bc"), Value::String(b"")]);
        let Some(Value::Array(empty)) = g.get("t.empty") else { panic!("t.empty is an array") };
        assert_eq!((empty.elem_type, empty.iter().count()), (ValueType::F32, 0));
        let Some(Value::Array(nested)) = g.get("t.nested") else { panic!("t.nested is an array") };
        let inner: Vec<_> = nested.iter().collect();
        assert_eq!(inner.len(), 2);
        let Value::Array(first) = inner[0] else { panic!("nested elements are arrays") };
        assert_eq!(first.iter().collect::<Vec<_>>(), [Value::U32(1), Value::U32(2)]);
        assert_eq!(nested.to_string(), "[[1, 2], [\"x\"]]");

        let names: Vec<_> = g.tensors.iter().map(|t| t.name).collect();
        assert_eq!(names, ["w2", "f", "w1"]);
        let w2 = g.tensor("w2").unwrap();
        assert_eq!(
            (w2.shape(), w2.ggml_type.name(), w2.size, w2.data_offset),
            (&[256, 2][..], Some("TQ2_0"), Some(132), 0)
        );
        assert_eq!(w2.matrix(), (2, 256));
        let f = g.tensor("f").unwrap();
        assert_eq!((f.shape(), f.size, f.data_offset, f.elements()), (&[4, 3][..], Some(48), 160, 12));
        let w1 = g.tensor("w1").unwrap();
        assert_eq!((w1.n_dims, w1.matrix(), w1.size, w1.data_offset), (1, (1, 256), Some(54), 224));
        assert_eq!(g.data_start + 224 + 54, bytes.len() as u64);

        for (t, spec) in g.tensors.iter().zip(&b.tensors) {
            assert_eq!(g.tensor_data(t).unwrap(), &spec.data[..]);
        }
        let w = Tensor::wrap(w2.ggml_type.format().unwrap(), g.tensor_data(w2).unwrap(), 2, 256).unwrap();
        w.validate().unwrap();
        // Source element 0 is -2 in a block whose max |x| is 3: one trit of -1 times 3.
        assert_eq!(w.get(0, 0).unwrap(), -3.0);
    }
}

#[test]
fn a_file_without_metadata_or_tensors_parses() {
    let b = Builder { kvs: vec![], tensors: vec![], ..Builder::valid() };
    let bytes = b.build();
    let g = Gguf::parse(&bytes).unwrap();
    assert!(g.metadata.is_empty() && g.tensors.is_empty());
    assert_eq!(g.data_start, 24 + 8);
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = Builder::valid().build();
    for len in 0..bytes.len() {
        let err = Gguf::parse(&bytes[..len]).expect_err("a truncated file must not parse");
        assert!(
            matches!(
                err,
                GgufError::Truncated { .. } | GgufError::AbsurdCount { .. } | GgufError::OffsetPastEnd { .. }
            ),
            "prefix of {len} bytes: {err}"
        );
    }
    let err = Gguf::parse(&bytes[..10]).unwrap_err();
    assert_eq!(err.to_string(), "truncated at offset 8: tensor count needs 8 bytes, 2 remain");
    let err = Gguf::parse(&bytes[..bytes.len() - 1]).unwrap_err();
    assert!(err.to_string().starts_with("tensor \"w1\": data "), "{err}");
}

#[test]
fn corrupting_any_byte_never_panics() {
    let bytes = Builder::valid().build();
    let header = Gguf::parse(&bytes).unwrap().data_start as usize;
    for i in 0..header {
        for pattern in [0xff, 0x80, 0x01] {
            let mut b = bytes.clone();
            b[i] ^= pattern;
            if let Ok(g) = Gguf::parse(&b) {
                for t in &g.tensors {
                    let _ = g.tensor_data(t);
                }
                for kv in &g.metadata {
                    let _ = kv.value.to_string();
                }
            }
        }
    }
}

#[test]
fn magic_and_versions_are_checked() {
    assert_eq!(parse_err(&Builder { magic: *b"GGML", ..Builder::valid() }), GgufError::BadMagic(*b"GGML"));
    for version in [0, 1, 4, u32::MAX] {
        assert_eq!(parse_err(&Builder { version, ..Builder::valid() }), GgufError::UnsupportedVersion(version));
    }
    let msg = GgufError::UnsupportedVersion(1).to_string();
    assert!(msg.contains("versions 2 and 3"), "{msg}");
}

#[test]
fn absurd_counts_are_refused_before_allocating() {
    for count in [u64::MAX, 1 << 40, 10_000] {
        let err = parse_err(&Builder { tensor_count: Some(count), ..Builder::valid() });
        assert!(matches!(err, GgufError::AbsurdCount { what: "tensor", count: c, .. } if c == count), "{err}");
        let err = parse_err(&Builder { kv_count: Some(count), ..Builder::valid() });
        assert!(matches!(err, GgufError::AbsurdCount { what: "metadata", .. }), "{err}");
        let err = parse_err(&Builder::valid().kv("t.big", array(8, count, &string(b"x"))));
        assert!(matches!(err, GgufError::AbsurdCount { what: "array element", .. }), "{err}");
        let err = parse_err(&Builder::valid().kv("t.big", array(12, count, &[0; 8])));
        assert!(matches!(err, GgufError::AbsurdCount { what: "array element", .. }), "{err}");
    }
    let err = parse_err(&Builder::valid().kv("t.s", typed(8, &u64::MAX.to_le_bytes())));
    assert!(matches!(err, GgufError::Truncated { what: "string value", need: u64::MAX, .. }), "{err}");
    let mut b = Builder::valid();
    b.kvs.insert(0, (vec![b'k'; 3], typed(8, &(1u64 << 62).to_le_bytes())));
    assert!(matches!(parse_err(&b), GgufError::Truncated { what: "string value", offset: 47, .. }));
}

#[test]
fn tensor_data_past_the_end_is_refused() {
    for offset in [1 << 20, u64::MAX - 31] {
        let mut b = Builder::valid();
        b.tensors[1].offset = Some(offset);
        let err = parse_err(&b);
        assert!(matches!(&err, GgufError::OffsetPastEnd { name, .. } if name == "f"), "{err}");
    }
    let mut b = Builder::valid();
    b.tensors[0].dims = vec![256, 1 << 20];
    assert!(matches!(parse_err(&b), GgufError::OffsetPastEnd { .. }));
    let mut b = Builder::valid();
    b.tensors[1].dims = vec![u64::MAX / 2, 4];
    assert!(matches!(parse_err(&b), GgufError::ShapeOverflow { .. }));
    b.tensors[1].dims = vec![1 << 62, 2];
    assert!(matches!(parse_err(&b), GgufError::ShapeOverflow { .. }));
    let mut b = Builder::valid();
    b.tensors[0].dims = vec![256, 1, 1, 1, 1];
    assert!(matches!(parse_err(&b), GgufError::TooManyDims { n_dims: 5, .. }));
    b.tensors[0].dims = vec![100, 2];
    assert!(matches!(parse_err(&b), GgufError::BadBlockShape { ne0: 100, block: 256, .. }));
}

#[test]
fn alignment_is_checked() {
    let mut b = Builder::valid();
    b.tensors[1].offset = Some(161);
    let err = parse_err(&b);
    assert!(matches!(&err, GgufError::Misaligned { offset: 161, alignment: 32, .. }), "{err}");
    assert!(err.to_string().contains("not a multiple of the alignment 32"));

    let b = Builder { alignment: 64, ..Builder::valid() }.kv("general.alignment", typed(4, &64u32.to_le_bytes()));
    let bytes = b.build();
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!((g.alignment, g.data_start % 64, g.tensor("w1").unwrap().data_offset), (64, 0, 256));
    let mut bad = b.clone();
    bad.tensors[1].offset = Some(160);
    assert!(matches!(parse_err(&bad), GgufError::Misaligned { alignment: 64, .. }));

    let b = Builder::valid().kv("general.alignment", typed(4, &48u32.to_le_bytes()));
    assert_eq!(parse_err(&b), GgufError::BadAlignment(48));
    let b = Builder::valid().kv("general.alignment", typed(4, &0u32.to_le_bytes()));
    assert_eq!(parse_err(&b), GgufError::BadAlignment(0));
    let b = Builder::valid().kv("general.alignment", typed(10, &32u64.to_le_bytes()));
    assert_eq!(parse_err(&b), GgufError::AlignmentType(ValueType::U64));
}

#[test]
fn unknown_tensor_types_are_listed_but_not_sized() {
    let mut b = Builder::valid();
    b.tensors[1].ty = 200;
    let bytes = b.build();
    let g = Gguf::parse(&bytes).unwrap();
    let t = g.tensor("f").unwrap();
    assert_eq!((t.ggml_type.name(), t.size, t.ggml_type.to_string()), (None, None, "unknown(200)".to_owned()));
    let err = g.tensor_data(t).unwrap_err();
    assert_eq!(err, GgufError::UnknownType { name: "f".into(), ty: 200 });
    assert!(g.tensor_data(g.tensor("w1").unwrap()).is_ok());
}

#[test]
fn other_malformations_are_named() {
    let b = Builder::valid().kv("t.x", typed(13, &[0; 8]));
    assert!(matches!(parse_err(&b), GgufError::UnknownValueType { ty: 13, .. }));
    let b = Builder::valid().kv("t.x", array(77, 1, &[0; 8]));
    assert!(matches!(parse_err(&b), GgufError::UnknownValueType { ty: 77, .. }));

    let mut deep = array(4, 0, &[]);
    for _ in 0..20 {
        deep = typed(9, &[&9u32.to_le_bytes()[..], &1u64.to_le_bytes(), &deep[4..]].concat());
    }
    assert!(matches!(parse_err(&Builder::valid().kv("t.deep", deep)), GgufError::NestingTooDeep { .. }));

    let mut b = Builder::valid();
    b.kvs.push((b"t.u8".to_vec(), typed(0, &[1])));
    assert_eq!(parse_err(&b), GgufError::DuplicateKey("t.u8".into()));
    let mut b = Builder::valid();
    b.tensors[2].name = "w2".into();
    assert_eq!(parse_err(&b), GgufError::DuplicateTensor("w2".into()));
    let mut b = Builder::valid();
    b.kvs.push((vec![0xff, 0xfe], typed(0, &[1])));
    assert!(matches!(parse_err(&b), GgufError::BadUtf8 { what: "metadata key", .. }));
}

/// Files written by the `gguf` PyPI package (scripts/gen_gguf_fixtures.py): tern reads its
/// layout, and decodes its TQ1_0/TQ2_0 bytes exactly as gguf's own dequantizer does.
#[test]
fn files_written_by_the_gguf_package_parse_and_decode_like_gguf() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gguf/");
    let model = std::fs::read(format!("{dir}tiny_bitnet.gguf")).unwrap();
    let expected = std::fs::read(format!("{dir}tiny_bitnet.expected.gguf")).unwrap();
    let (g, e) = (Gguf::parse(&model).unwrap(), Gguf::parse(&expected).unwrap());
    assert_eq!(g.version, 3);
    assert!(matches!(g.get("general.architecture"), Some(Value::String(b"bitnet"))));
    assert_eq!(g.get("bitnet.block_count"), Some(&Value::U32(1)));
    let Some(Value::Array(tokens)) = g.get("tokenizer.ggml.tokens") else { panic!("tokens are an array") };
    assert_eq!(tokens.iter().nth(2), Some(Value::String(b"hello")));
    let shapes: Vec<_> = g.tensors.iter().map(|t| (t.name, t.ggml_type.to_string(), t.shape().to_vec())).collect();
    let want = [
        ("token_embd.weight", "F32", vec![256, 8]),
        ("blk.0.attn_q.weight", "TQ2_0", vec![512, 64]),
        ("blk.0.ffn_down.weight", "TQ1_0", vec![768, 32]),
        ("blk.0.ffn_up.weight", "TQ2_0", vec![256, 48]),
        ("output_norm.weight", "F32", vec![256]),
    ];
    assert_eq!(shapes, want.map(|(n, t, s)| (n, t.to_owned(), s)));

    let mut checked = 0;
    for t in g.tensors.iter().filter(|t| matches!(t.ggml_type.format(), Some(Format::Tq1_0 | Format::Tq2_0))) {
        let (n, k) = t.matrix();
        let w = Tensor::wrap(t.ggml_type.format().unwrap(), g.tensor_data(t).unwrap(), n as usize, k as usize).unwrap();
        w.validate().unwrap();
        let oracle = e.tensor(t.name).unwrap();
        assert_eq!(oracle.shape(), t.shape());
        let want: Vec<f32> = e
            .tensor_data(oracle)
            .unwrap()
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect();
        assert_eq!(w.decode().unwrap(), want, "{}", t.name);
        checked += 1;
    }
    assert_eq!(checked, 3);
}

const I2_S: u32 = 36;
const Q2_0: u32 = 42;

/// bitnet.cpp's I2_S (type 36: `elements / 4 + 32` bytes) and ggml's Q2_0 (type 42: 18 bytes
/// per 64 elements) are sized, and wrap in place as `Format::I2S` (the x86 packing, the
/// official file's) and `Format::Q2_0`.
#[test]
fn i2_s_and_q2_0_tensors_are_sized_and_wrap_in_place() {
    let src: Vec<f32> = (0..4 * 256).map(|i| ((i * 7919) % 5) as f32 - 2.0).collect();
    let mut b = Builder::valid();
    b.tensors.push(TensorSpec {
        name: "i2s".into(),
        dims: vec![256, 4],
        ty: I2_S,
        data: Tensor::encode(Format::I2S, &src, 4, 256).unwrap().bytes().unwrap().to_vec(),
        offset: None,
    });
    b.tensors.push(TensorSpec {
        name: "q2".into(),
        dims: vec![128, 8],
        ty: Q2_0,
        data: Tensor::encode(Format::Q2_0, &src, 8, 128).unwrap().bytes().unwrap().to_vec(),
        offset: None,
    });
    let bytes = b.build();
    let g = Gguf::parse(&bytes).unwrap();
    for (name, format, rows, cols, size) in
        [("i2s", Format::I2S, 4, 256, 4 * 256 / 4 + 32), ("q2", Format::Q2_0, 8, 128, 16 * 18)]
    {
        let t = g.tensor(name).unwrap();
        assert_eq!((t.size, t.ggml_type.format()), (Some(size as u64), Some(format)), "{name}");
        assert_eq!(t.matrix(), (rows as u64, cols as u64));
        let data = g.tensor_data(t).unwrap();
        let at = data.as_ptr() as usize - bytes.as_ptr() as usize;
        assert_eq!(at as u64, g.data_start + t.data_offset, "{name}: the file's own bytes");
        let w = Tensor::wrap(format, data, rows, cols).unwrap();
        assert_eq!(w.validate(), Ok(()));
        assert_eq!(w.decode().unwrap(), Tensor::encode(format, &src, rows, cols).unwrap().decode().unwrap());
    }
    assert_eq!(g.tensor("i2s").unwrap().ggml_type.name(), Some("I2_S"));
    assert_eq!(g.tensor("q2").unwrap().ggml_type.name(), Some("Q2_0"));

    // Bad sizes: a Q2_0 row that is not whole blocks is refused by the parser, an I2_S row
    // of 64 by the format (x86 I2_S needs 128-element blocks), and a file cut inside the
    // I2_S padding has no room for the tensor.
    let mut q = b.clone();
    q.tensors[4].dims = vec![96, 8];
    assert!(matches!(parse_err(&q), GgufError::BadBlockShape { ne0: 96, block: 64, .. }));
    let mut i = b.clone();
    i.tensors[3].dims = vec![64, 16];
    let bytes = i.build();
    let g = Gguf::parse(&bytes).unwrap();
    let t = g.tensor("i2s").unwrap();
    assert_eq!(t.size, Some(16 * 64 / 4 + 32));
    assert!(matches!(
        Tensor::wrap(Format::I2S, g.tensor_data(t).unwrap(), 16, 64).map(|_| ()),
        Err(tern::Error::InvalidShape { .. })
    ));
    let mut cut = b.clone();
    cut.tensors.truncate(4);
    let bytes = cut.build();
    assert!(Gguf::parse(&bytes[..bytes.len() - 1]).is_err(), "the I2_S padding is part of the tensor");
}

/// A header cut right after its counts says "truncated", whichever count it stops at.
#[test]
fn a_truncated_header_says_truncated() {
    let bytes = Builder::valid().build();
    for len in [16, 24, 30] {
        let message = Gguf::parse(&bytes[..len]).unwrap_err().to_string();
        assert!(message.starts_with("truncated"), "{len} bytes: {message}");
    }
}

/// `GgufFile` owns its bytes (read, mapped, a Vec or static bytes): the same parse as
/// `Gguf::parse`; tensors wrap over it, `file_offset` is the C API's absolute offset, an
/// unreadable path is `Error::Io` with the path, a corrupt file converts into `tern::Error`.
#[test]
fn an_owned_file_parses_like_a_borrowed_one() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gguf/tiny_bitnet.gguf");
    let bytes = std::fs::read(path).unwrap();
    let borrowed = Gguf::parse(&bytes).unwrap();
    // Static bytes without a leak (LeakSanitizer reports a leaked Box).
    let embedded: &'static [u8] = include_bytes!("../fixtures/gguf/tiny_bitnet.gguf");
    let mut files = vec![
        GgufFile::read(path).unwrap(),
        GgufFile::from_vec(bytes.clone()).unwrap(),
        GgufFile::from_static(embedded).unwrap(),
    ];
    // SAFETY: a committed fixture nobody modifies while the test runs.
    let mapped = unsafe { GgufFile::map(path) };
    if cfg!(target_os = "wasi") {
        // WASI has no mmap: mapping is an I/O error with the path, never a crash.
        assert!(matches!(&mapped, Err(tern::Error::Io(m)) if m.contains(path)), "{:?}", mapped.err());
    } else {
        files.push(mapped.unwrap());
    }
    for file in files {
        let g = file.gguf();
        assert_eq!(
            (g.metadata.len(), g.tensors.len(), g.data_start),
            (borrowed.metadata.len(), 5, borrowed.data_start)
        );
        let t = g.tensor("blk.0.attn_q.weight").unwrap();
        assert_eq!(g.file_offset(t), g.data_start + t.data_offset);
        let data = g.tensor_data(t).unwrap();
        assert_eq!(data, &bytes[g.file_offset(t) as usize..][..data.len()]);
        let (rows, cols) = t.matrix();
        let w = Tensor::wrap(Format::Tq2_0, data, rows as usize, cols as usize).unwrap();
        assert_eq!(
            w.decode().unwrap(),
            Tensor::wrap(Format::Tq2_0, borrowed.tensor_data(borrowed.tensor(t.name).unwrap()).unwrap(), 64, 512)
                .unwrap()
                .decode()
                .unwrap()
        );
    }
    let missing = GgufFile::read("/nonexistent/x.gguf").unwrap_err();
    assert!(matches!(&missing, tern::Error::Io(m) if m.contains("/nonexistent/x.gguf")), "{missing}");
    // SAFETY: the path does not exist; nothing is mapped.
    let missing = unsafe { GgufFile::map("/nonexistent/x.gguf") }.unwrap_err();
    assert!(matches!(missing, tern::Error::Io(_)));
    let corrupt = GgufFile::from_vec(bytes[..100].to_vec()).unwrap_err();
    assert!(matches!(corrupt, tern::Error::Gguf(GgufError::AbsurdCount { what: "metadata", .. })), "{corrupt}");
    assert!(corrupt.to_string().starts_with("truncated or corrupt: "), "{corrupt}");
    let converted: tern::Error = GgufError::BadMagic(*b"GGUG").into();
    assert_eq!(converted.to_string(), GgufError::BadMagic(*b"GGUG").to_string(), "the reader's message alone");
}

/// `Array::get` reads any element: constant time for fixed-size ones, strings by walking.
#[test]
fn array_elements_by_index() {
    let b = Builder::valid()
        .kv("t.u16", array(2, 3, &[1, 0, 2, 0, 3, 0]))
        .kv("t.s", array(8, 2, &[string(b"ab"), string(b"")].concat()));
    let bytes = b.build();
    let g = Gguf::parse(&bytes).unwrap();
    let Some(Value::Array(u16s)) = g.get("t.u16") else { panic!("an array") };
    assert_eq!(
        (0..4).map(|i| u16s.get(i)).collect::<Vec<_>>(),
        [Some(Value::U16(1)), Some(Value::U16(2)), Some(Value::U16(3)), None]
    );
    let Some(Value::Array(strings)) = g.get("t.s") else { panic!("an array") };
    assert_eq!(
        [strings.get(0), strings.get(1), strings.get(2)],
        [Some(Value::String(b"ab")), Some(Value::String(b"")), None]
    );
}

/// `Tensor::from_f32` views the floats without a copy.
#[test]
fn an_f32_tensor_from_floats() {
    let values = [1.0f32, -2.5, 3.0, 0.5, 0.0, 4.0];
    let t = Tensor::from_f32(&values, 2, 3).unwrap();
    assert_eq!((t.format(), t.rows(), t.cols()), (Format::F32, 2, 3));
    assert_eq!(t.bytes().unwrap().as_ptr(), values.as_ptr().cast::<u8>(), "no copy");
    assert_eq!(t.decode().unwrap(), values);
    assert!(matches!(Tensor::from_f32(&values, 2, 4), Err(tern::Error::LengthMismatch { .. })));
}
