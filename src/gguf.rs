//! A GGUF reader (versions 2 and 3) over a byte slice, for tools that hand tensor bytes to
//! tern as they are (e.g. a memory-mapped file).
//!
//! The input is untrusted. Every count, length and offset is checked against the bytes
//! that remain before it is used, arithmetic is overflow-checked, and no allocation is
//! sized by a field that was not first bounded by the file's length. Metadata values are
//! borrowed from the input; arrays are kept as a byte range and decoded on demand, so a
//! 100k-entry tokenizer array costs nothing until someone iterates it.
//!
//! Layout (all little-endian): magic `GGUF`, version u32, tensor count u64, metadata
//! count u64, metadata key/values, tensor infos, padding to `general.alignment`
//! (default 32), then the data section. Tensor offsets are relative to the data section
//! and multiples of the alignment. ggml dims are `[ne0, ne1, ...]` with `ne0` the
//! contiguous one: a weight matrix `n x k` has `ne0 = k`, `ne1 = n`.

use crate::format::Format;
use std::collections::HashSet;
use std::fmt;

/// The first four bytes of every GGUF file.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// The data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml's `GGML_MAX_DIMS`.
pub const MAX_DIMS: usize = 4;
/// Arrays of arrays are legal; this bounds the recursion a hostile file could ask for.
pub const MAX_ARRAY_NESTING: usize = 8;

/// Why a buffer is not a GGUF file tern can read. Each variant names the problem and,
/// where there is one, the byte offset. The fields are what the message prints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[allow(missing_docs)] // each variant's message (its `#[error]`) says what it and its fields mean
pub enum GgufError {
    #[error("truncated at offset {offset}: {what} needs {need} bytes, {remaining} remain")]
    Truncated { what: &'static str, offset: usize, need: u64, remaining: usize },
    #[error("not a GGUF file: magic is {0:02x?}, expected \"GGUF\"")]
    BadMagic([u8; 4]),
    #[error("unsupported GGUF version {0}: tern reads versions 2 and 3")]
    UnsupportedVersion(u32),
    #[error("truncated or corrupt: {what} count {count} at offset {offset}, but the remaining {remaining} bytes hold at most {max}")]
    AbsurdCount { what: &'static str, count: u64, offset: usize, remaining: usize, max: u64 },
    #[error("unknown metadata value type {ty} at offset {offset}")]
    UnknownValueType { ty: u32, offset: usize },
    #[error("arrays nested deeper than {MAX_ARRAY_NESTING} at offset {offset}")]
    NestingTooDeep { offset: usize },
    #[error("{what} at offset {offset} is not valid UTF-8")]
    BadUtf8 { what: &'static str, offset: usize },
    #[error("duplicate metadata key {0:?}")]
    DuplicateKey(String),
    #[error("general.alignment must be a u32, found {0}")]
    AlignmentType(ValueType),
    #[error("general.alignment {0} is not a power of two")]
    BadAlignment(u32),
    #[error("tensor {name:?}: {n_dims} dimensions, at most {MAX_DIMS} are allowed")]
    TooManyDims { name: String, n_dims: u32 },
    #[error("tensor {name:?}: shape {dims:?} has more elements than fit in 63 bits")]
    ShapeOverflow { name: String, dims: Vec<u64> },
    #[error("duplicate tensor name {0:?}")]
    DuplicateTensor(String),
    #[error("tensor {name:?}: unknown ggml type {ty}, its size cannot be computed")]
    UnknownType { name: String, ty: u32 },
    #[error("tensor {name:?}: ne0 = {ne0} is not a multiple of the {block}-element block of {ty}")]
    BadBlockShape { name: String, ne0: u64, block: u64, ty: &'static str },
    #[error("tensor {name:?}: offset {offset} is not a multiple of the alignment {alignment}")]
    Misaligned { name: String, offset: u64, alignment: u64 },
    #[error("tensor {name:?}: data {start}..{end} runs past the end of the file ({len} bytes)")]
    OffsetPastEnd { name: String, start: u64, end: u64, len: usize },
}

/// The reader's result type.
pub type Result<T> = std::result::Result<T, GgufError>;

/// Metadata value types, by their stable GGUF ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
#[allow(missing_docs)] // the variants are GGUF's type names
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    fn from_id(id: u32) -> Option<ValueType> {
        use ValueType::*;
        [U8, I8, U16, I16, U32, I32, F32, Bool, String, Array, U64, I64, F64].into_iter().find(|t| *t as u32 == id)
    }

    /// Bytes of one value of a fixed-size type; `None` for strings and arrays.
    fn fixed_size(self) -> Option<usize> {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }

    /// The fewest bytes one value of this type can take: what bounds an array's count.
    fn min_size(self) -> usize {
        match self {
            ValueType::String => 8,
            ValueType::Array => 12,
            t => t.fixed_size().expect("fixed-size type"),
        }
    }

    /// GGUF's name of the type, e.g. `u32`.
    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A metadata value, borrowed from the input: one variant per [`ValueType`].
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(missing_docs)] // the variants are GGUF's type names
pub enum Value<'a> {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    /// GGUF strings should be UTF-8 but values are not always; they are kept as bytes.
    String(&'a [u8]),
    Array(Array<'a>),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl Value<'_> {
    /// The value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }
}

impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::U8(v) => write!(f, "{v}"),
            Value::I8(v) => write!(f, "{v}"),
            Value::U16(v) => write!(f, "{v}"),
            Value::I16(v) => write!(f, "{v}"),
            Value::U32(v) => write!(f, "{v}"),
            Value::I32(v) => write!(f, "{v}"),
            Value::F32(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::String(s) => write!(f, "{:?}", String::from_utf8_lossy(s)),
            Value::Array(a) => write!(f, "{a}"),
            Value::U64(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
        }
    }
}

/// An array value: its element type, its length and its (already bounds-checked) bytes.
/// Elements are decoded on demand by [`Array::iter`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Array<'a> {
    /// The type of every element.
    pub elem_type: ValueType,
    /// Elements.
    pub len: u64,
    bytes: &'a [u8],
    /// Offset of `bytes` in the file, for error messages.
    offset: usize,
    depth: usize,
}

impl<'a> Array<'a> {
    /// The elements, decoded one by one. The array was fully walked when the file was
    /// parsed, so every element decodes.
    pub fn iter(&self) -> impl Iterator<Item = Value<'a>> + 'a {
        let mut cur = Cursor { buf: self.bytes, pos: 0, base: self.offset };
        let (elem_type, depth) = (self.elem_type, self.depth);
        (0..self.len).map_while(move |_| cur.value(elem_type, depth).ok())
    }
}

impl<'a> Array<'a> {
    /// Element `i`, or `None` past the end. Constant time for fixed-size elements; strings
    /// and nested arrays are walked from the start (use [`Array::iter`] to visit them all).
    pub fn get(&self, i: u64) -> Option<Value<'a>> {
        if i >= self.len {
            return None;
        }
        match self.elem_type.fixed_size() {
            Some(size) => {
                // In range: `len * size` bytes were checked when the file was parsed.
                let start = i as usize * size;
                let bytes = &self.bytes[start..start + size];
                let mut cur = Cursor { buf: bytes, pos: 0, base: self.offset + start };
                cur.value(self.elem_type, self.depth).ok()
            }
            None => self.iter().nth(i as usize),
        }
    }
}

impl fmt::Display for Array<'_> {
    /// At most 8 elements, then the count of the rest.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 8;
        write!(f, "[")?;
        for (i, v) in self.iter().take(SHOWN).enumerate() {
            write!(f, "{}{v}", if i > 0 { ", " } else { "" })?;
        }
        if self.len > SHOWN as u64 {
            write!(f, ", ... {} more", self.len - SHOWN as u64)?;
        }
        write!(f, "]")
    }
}

/// One metadata entry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeyValue<'a> {
    /// The key, e.g. `general.architecture`.
    pub key: &'a str,
    /// Its value.
    pub value: Value<'a>,
}

/// A ggml tensor type id, known or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GgmlType(pub u32);

/// bitnet.cpp's I2_S: 4 elements a byte, and the tensor is `elements / 4 + 32` bytes (a
/// scale and padding after the codes), which no (block, bytes) pair says.
const I2_S: u32 = 36;
const I2_S_TAIL_BYTES: u64 = 32;

/// (id, name, elements per block, bytes per block), as in ggml's type traits (and
/// bitnet.cpp's for I2_S, plus its tail).
const GGML_TYPES: [(u32, &str, u64, u64); 36] = [
    (0, "F32", 1, 4),
    (1, "F16", 1, 2),
    (2, "Q4_0", 32, 18),
    (3, "Q4_1", 32, 20),
    (6, "Q5_0", 32, 22),
    (7, "Q5_1", 32, 24),
    (8, "Q8_0", 32, 34),
    (9, "Q8_1", 32, 40),
    (10, "Q2_K", 256, 84),
    (11, "Q3_K", 256, 110),
    (12, "Q4_K", 256, 144),
    (13, "Q5_K", 256, 176),
    (14, "Q6_K", 256, 210),
    (15, "Q8_K", 256, 292),
    (16, "IQ2_XXS", 256, 66),
    (17, "IQ2_XS", 256, 74),
    (18, "IQ3_XXS", 256, 98),
    (19, "IQ1_S", 256, 50),
    (20, "IQ4_NL", 32, 18),
    (21, "IQ3_S", 256, 110),
    (22, "IQ2_S", 256, 82),
    (23, "IQ4_XS", 256, 136),
    (24, "I8", 1, 1),
    (25, "I16", 1, 2),
    (26, "I32", 1, 4),
    (27, "I64", 1, 8),
    (28, "F64", 1, 8),
    (29, "IQ1_M", 256, 56),
    (30, "BF16", 1, 2),
    (34, "TQ1_0", 256, 54),
    (35, "TQ2_0", 256, 66),
    (I2_S, "I2_S", 4, 1),
    (39, "MXFP4", 32, 17),
    (40, "NVFP4", 64, 36),
    (41, "Q1_0", 128, 18),
    (42, "Q2_0", 64, 18),
];

impl GgmlType {
    fn traits(self) -> Option<(&'static str, u64, u64)> {
        GGML_TYPES.iter().find(|t| t.0 == self.0).map(|&(_, name, block, bytes)| (name, block, bytes))
    }

    /// The ggml name, or `None` for a type this reader does not know.
    pub fn name(self) -> Option<&'static str> {
        self.traits().map(|t| t.0)
    }

    /// (elements per block, bytes per block).
    pub fn block(self) -> Option<(u64, u64)> {
        self.traits().map(|t| (t.1, t.2))
    }

    /// The tern format for this type, if tern has one (F32, TQ1_0, TQ2_0, I2_S as the x86
    /// packing `Format::I2S`, Q2_0).
    pub fn format(self) -> Option<Format> {
        Format::from_ggml_type(self.0)
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "unknown({})", self.0),
        }
    }
}

/// One tensor's header entry.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo<'a> {
    /// The tensor's name, e.g. `blk.0.attn_q.weight`.
    pub name: &'a str,
    /// `dims[..n_dims]` are ggml's `ne`, `ne0` first; the rest are 1.
    pub dims: [u64; MAX_DIMS],
    /// Dimensions the file gives.
    pub n_dims: u32,
    /// The ggml type of the data.
    pub ggml_type: GgmlType,
    /// Where the tensor's data starts, relative to the data section ([`Gguf::data_start`]);
    /// [`Gguf::file_offset`] gives the offset in the file, which is what the C API's
    /// `tern_gguf_tensor_info.offset` reports.
    pub data_offset: u64,
    /// Bytes of data; `None` when the type is unknown.
    pub size: Option<u64>,
}

impl TensorInfo<'_> {
    /// ggml's `ne[..n_dims]`, `ne0` (the contiguous one) first.
    pub fn shape(&self) -> &[u64] {
        &self.dims[..self.n_dims as usize]
    }

    /// Total elements (fits in 63 bits: checked when parsed).
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// The tensor as a `rows x cols` matrix: `cols = ne0`, rows = the product of the
    /// other dims (a weight `n x k` has `ne0 = k`, `ne1 = n`).
    pub fn matrix(&self) -> (u64, u64) {
        (self.dims[1..].iter().product(), self.dims[0])
    }
}

/// A parsed GGUF file, borrowing its input.
#[derive(Debug, Clone)]
pub struct Gguf<'a> {
    /// The GGUF version (2 or 3).
    pub version: u32,
    /// Every metadata entry, in file order.
    pub metadata: Vec<KeyValue<'a>>,
    /// Every tensor's header entry, in file order.
    pub tensors: Vec<TensorInfo<'a>>,
    /// The data alignment (`general.alignment`, or [`DEFAULT_ALIGNMENT`]).
    pub alignment: u64,
    /// Offset of the data section in the file.
    pub data_start: u64,
    bytes: &'a [u8],
}

impl<'a> Gguf<'a> {
    /// Parses and checks the header, metadata and tensor infos, and checks that every
    /// tensor of a known type lies inside the file.
    pub fn parse(bytes: &'a [u8]) -> Result<Gguf<'a>> {
        let mut cur = Cursor { buf: bytes, pos: 0, base: 0 };
        let magic = cur.array::<4>("magic")?;
        if magic != MAGIC {
            return Err(GgufError::BadMagic(magic));
        }
        let version = cur.u32("version")?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::UnsupportedVersion(version));
        }
        let tensor_count = cur.u64("tensor count")?;
        let kv_count = cur.u64("metadata count")?;

        // Smallest key/value: empty key (8), type (4), one-byte value (1).
        let kv_count = cur.bounded_count("metadata", kv_count, 13)?;
        let mut metadata = Vec::with_capacity(kv_count);
        let mut keys = HashSet::with_capacity(kv_count);
        for _ in 0..kv_count {
            let key = cur.str("metadata key")?;
            let ty = cur.value_type()?;
            let value = cur.value(ty, 0)?;
            if !keys.insert(key) {
                return Err(GgufError::DuplicateKey(key.to_owned()));
            }
            metadata.push(KeyValue { key, value });
        }
        let alignment = match metadata.iter().find(|kv| kv.key == "general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(KeyValue { value: Value::U32(a), .. }) if a.is_power_of_two() => u64::from(*a),
            Some(KeyValue { value: Value::U32(a), .. }) => return Err(GgufError::BadAlignment(*a)),
            Some(kv) => return Err(GgufError::AlignmentType(kv.value.value_type())),
        };

        // Smallest tensor info: empty name (8), n_dims (4), type (4), offset (8).
        let tensor_count = cur.bounded_count("tensor", tensor_count, 24)?;
        let mut tensors = Vec::with_capacity(tensor_count);
        let mut names = HashSet::with_capacity(tensor_count);
        for _ in 0..tensor_count {
            let info = cur.tensor_info(alignment)?;
            if !names.insert(info.name) {
                return Err(GgufError::DuplicateTensor(info.name.to_owned()));
            }
            tensors.push(info);
        }

        let end_of_infos = cur.pos as u64;
        let data_start = end_of_infos.next_multiple_of(alignment);
        for t in &tensors {
            check_range(t, data_start, bytes.len())?;
        }
        Ok(Gguf { version, metadata, tensors, alignment, data_start, bytes })
    }

    /// The metadata value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value<'a>> {
        self.metadata.iter().find(|kv| kv.key == key).map(|kv| &kv.value)
    }

    /// The header entry of the tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo<'a>> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The bytes of a tensor of a known type (ranges were checked by `parse`).
    pub fn tensor_data(&self, info: &TensorInfo) -> Result<&'a [u8]> {
        let size =
            info.size.ok_or_else(|| GgufError::UnknownType { name: info.name.to_owned(), ty: info.ggml_type.0 })?;
        let (start, end) = data_range(info, self.data_start, size, self.bytes.len())?;
        Ok(&self.bytes[start as usize..end as usize])
    }

    /// The whole input.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Where a tensor's data starts in the file: `data_start + info.data_offset`, what the C
    /// API's `tern_gguf_tensor_info.offset` reports. Cannot overflow: `parse` checked every
    /// tensor's range against the input.
    pub fn file_offset(&self, info: &TensorInfo) -> u64 {
        self.data_start + info.data_offset
    }
}

/// The bytes a [`GgufFile`] parses: a read-only mapping of a file, a buffer, or bytes that
/// live as long as the process.
enum Source {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
    Static(&'static [u8]),
}

impl Source {
    fn bytes(&self) -> &[u8] {
        match self {
            Source::Mapped(map) => map,
            Source::Owned(bytes) => bytes,
            Source::Static(bytes) => bytes,
        }
    }
}

/// A parsed GGUF file that owns its bytes (a memory mapping or a buffer), for callers that
/// keep a model open: [`Gguf`] without the borrow. Tensors wrapped over its bytes
/// ([`crate::Tensor::wrap`] with [`Gguf::tensor_data`]) borrow it.
pub struct GgufFile {
    /// Borrows `source`'s bytes: declared first, so it is dropped first.
    parsed: Gguf<'static>,
    source: std::sync::Arc<Source>,
}

impl fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GgufFile").field("parsed", &self.parsed).finish_non_exhaustive()
    }
}

impl GgufFile {
    fn new(source: Source) -> crate::Result<GgufFile> {
        let source = std::sync::Arc::new(source);
        // SAFETY: the bytes are a mapping, a Vec's heap buffer or static bytes: none moves
        // when the `Arc` (or this struct) does, and the `Arc` this struct holds keeps them
        // alive and unchanged as long as `parsed`, which `gguf` lends out only for a
        // borrow of `self`.
        let bytes: &'static [u8] = unsafe { &*std::ptr::from_ref::<[u8]>(source.bytes()) };
        Ok(GgufFile { parsed: Gguf::parse(bytes)?, source })
    }

    /// Reads the file at `path` into memory and parses it. Errors: [`crate::Error::Io`]
    /// (with the path), [`crate::Error::Gguf`].
    pub fn read(path: impl AsRef<std::path::Path>) -> crate::Result<GgufFile> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| crate::Error::Io(format!("read {}: {e}", path.display())))?;
        GgufFile::new(Source::Owned(bytes))
    }

    /// Memory-maps the file at `path` read-only and parses it; tensor data is not read
    /// until used. A FIFO or a device is refused before it is opened (opening a FIFO would
    /// block). Errors: [`crate::Error::Io`] (with the path and the system's reason),
    /// [`crate::Error::Gguf`].
    ///
    /// # Safety
    /// The file must not be modified or truncated while the result (or anything borrowing
    /// it) lives: the mapping would change under references Rust assumes immutable (as for
    /// any memory-mapped file).
    pub unsafe fn map(path: impl AsRef<std::path::Path>) -> crate::Result<GgufFile> {
        let path = path.as_ref();
        let io = |what: &str, e: std::io::Error| crate::Error::Io(format!("{what} {}: {e}", path.display()));
        if !std::fs::metadata(path).map_err(|e| io("stat", e))?.is_file() {
            return Err(crate::Error::Io(format!("open {}: not a regular file", path.display())));
        }
        let file = std::fs::File::open(path).map_err(|e| io("open", e))?;
        // An empty file cannot be mapped; it is refused by the parser like any short file.
        if file.metadata().map_err(|e| io("stat", e))?.len() == 0 {
            return GgufFile::new(Source::Static(&[]));
        }
        // SAFETY: read-only and private to this value; the caller promises the file is not
        // modified or truncated while it lives.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| io("mmap", e))?;
        GgufFile::new(Source::Mapped(map))
    }

    /// Parses bytes the result takes over.
    pub fn from_vec(bytes: Vec<u8>) -> crate::Result<GgufFile> {
        GgufFile::new(Source::Owned(bytes))
    }

    /// Parses bytes that live as long as the process (e.g. `include_bytes!`, or memory
    /// the caller leaked or otherwise keeps for good).
    pub fn from_static(bytes: &'static [u8]) -> crate::Result<GgufFile> {
        GgufFile::new(Source::Static(bytes))
    }

    /// The parsed file, borrowing `self`.
    pub fn gguf(&self) -> &Gguf<'_> {
        &self.parsed
    }

    /// A handle that keeps the bytes alive (for the C API's tensors, which outlive the file
    /// handle they were wrapped from).
    pub(crate) fn keep_alive(&self) -> std::sync::Arc<dyn Send + Sync> {
        self.source.clone()
    }
}

fn check_range(info: &TensorInfo, data_start: u64, len: usize) -> Result<()> {
    data_range(info, data_start, info.size.unwrap_or(0), len).map(|_| ())
}

/// `[start, end)` of a tensor in the file, checked against the file's length.
fn data_range(info: &TensorInfo, data_start: u64, size: u64, len: usize) -> Result<(u64, u64)> {
    let start = data_start.checked_add(info.data_offset);
    let end = start.and_then(|s| s.checked_add(size));
    match (start, end) {
        (Some(start), Some(end)) if end <= len as u64 => Ok((start, end)),
        _ => Err(GgufError::OffsetPastEnd {
            name: info.name.to_owned(),
            start: start.unwrap_or(u64::MAX),
            end: end.unwrap_or(u64::MAX),
            len,
        }),
    }
}

/// Reads little-endian fields, each checked against the bytes that remain.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Offset of `buf` in the file, so that errors report file offsets.
    base: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn offset(&self) -> usize {
        self.base + self.pos
    }

    fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8]> {
        let remaining = self.remaining();
        match usize::try_from(n) {
            Ok(n) if n <= remaining => {
                let bytes = &self.buf[self.pos..self.pos + n];
                self.pos += n;
                Ok(bytes)
            }
            _ => Err(GgufError::Truncated { what, offset: self.offset(), need: n, remaining }),
        }
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        Ok(self.take(N as u64, what)?.try_into().expect("took N bytes"))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &'static str) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A count of items each at least `min_size` bytes long, checked against what the
    /// remaining bytes could hold, so that it may size an allocation.
    fn bounded_count(&mut self, what: &'static str, count: u64, min_size: usize) -> Result<usize> {
        let remaining = self.remaining();
        let max = (remaining / min_size) as u64;
        if count > max {
            return Err(GgufError::AbsurdCount { what, count, offset: self.offset(), remaining, max });
        }
        Ok(count as usize)
    }

    fn string(&mut self, what: &'static str) -> Result<&'a [u8]> {
        let len = self.u64(what)?;
        self.take(len, what)
    }

    fn str(&mut self, what: &'static str) -> Result<&'a str> {
        let offset = self.offset();
        std::str::from_utf8(self.string(what)?).map_err(|_| GgufError::BadUtf8 { what, offset })
    }

    fn value_type(&mut self) -> Result<ValueType> {
        let offset = self.offset();
        let ty = self.u32("value type")?;
        ValueType::from_id(ty).ok_or(GgufError::UnknownValueType { ty, offset })
    }

    fn value(&mut self, ty: ValueType, depth: usize) -> Result<Value<'a>> {
        const WHAT: &str = "metadata value";
        Ok(match ty {
            ValueType::U8 => Value::U8(u8::from_le_bytes(self.array(WHAT)?)),
            ValueType::I8 => Value::I8(i8::from_le_bytes(self.array(WHAT)?)),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.array(WHAT)?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.array(WHAT)?)),
            ValueType::U32 => Value::U32(u32::from_le_bytes(self.array(WHAT)?)),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.array(WHAT)?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.array(WHAT)?)),
            ValueType::Bool => Value::Bool(self.array::<1>(WHAT)?[0] != 0),
            ValueType::String => Value::String(self.string("string value")?),
            ValueType::U64 => Value::U64(u64::from_le_bytes(self.array(WHAT)?)),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.array(WHAT)?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.array(WHAT)?)),
            ValueType::Array => Value::Array(self.array_value(depth)?),
        })
    }

    /// Walks an array without allocating: fixed-size elements are skipped in one step
    /// (after an overflow-checked size), strings and nested arrays one by one.
    fn array_value(&mut self, depth: usize) -> Result<Array<'a>> {
        if depth >= MAX_ARRAY_NESTING {
            return Err(GgufError::NestingTooDeep { offset: self.offset() });
        }
        let elem_type = self.value_type()?;
        let len = self.u64("array length")?;
        self.bounded_count("array element", len, elem_type.min_size())?;
        let start = self.pos;
        match elem_type.fixed_size() {
            Some(size) => {
                // Cannot overflow: len <= remaining / size.
                self.take(len * size as u64, "array data")?;
            }
            None => {
                for _ in 0..len {
                    self.value(elem_type, depth + 1)?;
                }
            }
        }
        Ok(Array { elem_type, len, bytes: &self.buf[start..self.pos], offset: self.base + start, depth: depth + 1 })
    }

    fn tensor_info(&mut self, alignment: u64) -> Result<TensorInfo<'a>> {
        let name = self.str("tensor name")?;
        let n_dims = self.u32("tensor n_dims")?;
        if n_dims as usize > MAX_DIMS {
            return Err(GgufError::TooManyDims { name: name.to_owned(), n_dims });
        }
        let mut dims = [1u64; MAX_DIMS];
        for d in &mut dims[..n_dims as usize] {
            *d = self.u64("tensor dimension")?;
        }
        let ggml_type = GgmlType(self.u32("tensor type")?);
        let offset = self.u64("tensor offset")?;

        let shape = &dims[..n_dims as usize];
        let overflow = || GgufError::ShapeOverflow { name: name.to_owned(), dims: shape.to_vec() };
        let elements = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)).ok_or_else(overflow)?;
        if elements > i64::MAX as u64 {
            return Err(overflow());
        }
        let size = match ggml_type.block() {
            None => None,
            Some((block, block_bytes)) => {
                if dims[0] % block != 0 {
                    let ty = ggml_type.name().expect("known type");
                    return Err(GgufError::BadBlockShape { name: name.to_owned(), ne0: dims[0], block, ty });
                }
                let tail = if ggml_type.0 == I2_S { I2_S_TAIL_BYTES } else { 0 };
                let codes = (elements / block).checked_mul(block_bytes);
                Some(codes.and_then(|c| c.checked_add(tail)).ok_or_else(overflow)?)
            }
        };
        if offset % alignment != 0 {
            return Err(GgufError::Misaligned { name: name.to_owned(), offset, alignment });
        }
        Ok(TensorInfo { name, dims, n_dims, ggml_type, data_offset: offset, size })
    }
}
