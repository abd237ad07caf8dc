//! Kernels: the arithmetic. A kernel computes `out[t][r] = sum_k act[t][k] * w[r][k]` for
//! the block of tokens `t` and output rows `r` of its [`OutTile`].
//!
//! Every kernel is a type implementing `Compute` (its prepared-activation type and its
//! product), registered by `Kernel::new`, which erases that type: the one registration
//! path. This file depends on no ISA.
//!
//! - `reference`: the definition every other kernel matches.
//! - `isa`: the CPU feature sets and the ways into them (`Isa::enter`, `Isa::run`).
//! - `mac`: the one multiply-accumulate trait of the SIMD kernels.
//! - `weights`: one marker type per ternary weight format.
//! - `tile`: the GEMV skeleton (activation preparation, row x token tiles, the block loop);
//!   `arch/<arch>/<isa>.rs` supplies vector operations through `tile::Simd`.
//! - `gemm`: the panel GEMM skeleton (x86_64, aarch64 and wasm32 with SIMD128), over
//!   `gemm::GemmSimd` and a register tile (`gemm::MicroTile`: the broadcast ISAs' own, or
//!   `arch/aarch64/i8mm.rs`).
//! - `arch/x86_64/amx.rs`: a GEMM with a loop nest of its own over the shared panel packer.
//! - `prep`: where activations go in a kernel's unpack order, and their lane sums.
//!
//! The registry lists kernels in preference order; the dispatcher (`crate::dispatch`)
//! owns the policy of choosing among them through `select`. [`Kernel::run`] is the one
//! entry: it checks formats and shapes, so no safe call can make a kernel read out of
//! bounds.

pub(crate) mod arch;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64", all(target_arch = "wasm32", target_feature = "simd128")))]
pub(crate) mod gemm;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64", all(target_arch = "wasm32", target_feature = "simd128")))]
pub(crate) mod isa;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64", all(target_arch = "wasm32", target_feature = "simd128")))]
pub(crate) mod mac;
// Public (hidden) for its tests in tests/suite/prep.rs, which need no build of tern of
// their own.
#[doc(hidden)]
pub mod prep;
pub(crate) mod reference;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64", all(target_arch = "wasm32", target_feature = "simd128")))]
pub(crate) mod tile;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64", all(target_arch = "wasm32", target_feature = "simd128")))]
pub(crate) mod weights;

use crate::error::{Error, Result};
use crate::format::Format;
use std::any::Any;
use std::ffi::CStr;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::OnceLock;

/// Checked operand bytes: a `rows x cols` matrix in `format`. Made only by [`MatRef::new`],
/// so a kernel can rely on `bytes` holding exactly such a matrix.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    pub(crate) format: Format,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) bytes: &'a [u8],
    /// The one block scale of a TQ1_0/TQ2_0 tensor whose block scales are all equal, when
    /// known ([`crate::Tensor::uniform_block_scale`]): kernels may then keep int32 along the
    /// whole row and scale once.
    pub(crate) uniform_scale: Option<f32>,
}

impl<'a> MatRef<'a> {
    /// Checks that `bytes` is exactly a `rows x cols` matrix in `format`.
    pub fn new(format: Format, rows: usize, cols: usize, bytes: &'a [u8]) -> Result<MatRef<'a>> {
        format.check_bytes(bytes, rows, cols)?;
        Ok(MatRef { format, rows, cols, bytes, uniform_scale: None })
    }

    /// The operand of a tensor, if its bytes are still valid, with the tensor's uniform
    /// block scale if it has one.
    pub fn of(tensor: &'a crate::Tensor) -> Result<MatRef<'a>> {
        let m = MatRef::new(tensor.format(), tensor.rows(), tensor.cols(), tensor.bytes()?)?;
        Ok(MatRef { uniform_scale: tensor.uniform_block_scale()?, ..m })
    }

    /// The operand's format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Rows: a weight's output rows, an activation's tokens.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The one block scale of a TQ1_0/TQ2_0 operand whose block scales are all equal, when
    /// it came from a tensor that found it (`MatRef::of`); `None` otherwise.
    pub fn uniform_scale(&self) -> Option<f32> {
        self.uniform_scale
    }

    /// Columns: the shared dimension k.
    pub fn cols(&self) -> usize {
        self.cols
    }
}

/// Int8 activations (I8_ABSMAX or I8_BLOCK256) split into their codes and scales.
pub(crate) struct ActI8<'a> {
    pub m: usize,
    pub k: usize,
    pub codes: &'a [i8],
    /// One scale per (token, scale block), token-major: one per token for I8_ABSMAX.
    pub scales: Vec<f32>,
    /// Elements per scale: `k` for I8_ABSMAX, 256 for I8_BLOCK256.
    pub block: usize,
}

impl<'a> ActI8<'a> {
    pub fn parse(a: &MatRef<'a>) -> ActI8<'a> {
        let block = a.format.i8_scale_block(a.cols).expect("activations must be an int8 activation format");
        let (codes, scales) = a.bytes.split_at(a.rows * a.cols);
        let scales = scales.chunks_exact(4).map(|s| f32::from_le_bytes([s[0], s[1], s[2], s[3]])).collect();
        ActI8 { m: a.rows, k: a.cols, codes: bytemuck::cast_slice(codes), scales, block }
    }

    pub fn row(&self, i: usize) -> &'a [i8] {
        &self.codes[i * self.k..(i + 1) * self.k]
    }

    /// The scales of token `i`, one per scale block.
    pub fn row_scales(&self, i: usize) -> &[f32] {
        let blocks = self.k / self.block;
        &self.scales[i * blocks..(i + 1) * blocks]
    }
}

/// The `m x n` output matrix (row-major: token-major, one column per weight row), of which
/// this view writes only the block `tokens x rows`. Views made by `OutTile::split` cover
/// disjoint blocks, so threads can fill one output buffer together.
pub struct OutTile<'a> {
    ptr: *mut f32,
    m: usize,
    n: usize,
    rows: Range<usize>,
    tokens: Range<usize>,
    _out: PhantomData<&'a mut [f32]>,
}

// SAFETY: an OutTile writes only the elements of its own block; blocks of views that exist
// at the same time are disjoint by construction (`split`, `restrict`), or by the caller's
// promise (`from_raw`).
unsafe impl Send for OutTile<'_> {}

impl<'a> OutTile<'a> {
    /// A view that writes all of `out`, which must hold at least `m * n` floats.
    pub fn new(out: &'a mut [f32], m: usize, n: usize) -> Result<OutTile<'a>> {
        check_out(out.len(), m, n, &(0..n), &(0..m))?;
        Ok(OutTile { ptr: out.as_mut_ptr(), m, n, rows: 0..n, tokens: 0..m, _out: PhantomData })
    }

    /// A view over caller memory that other threads may be writing too, in other blocks.
    ///
    /// # Safety
    /// `ptr` must be valid for writes of `m * n` floats for `'a`, no other live view may
    /// write the block `tokens x rows`, and both ranges must lie in `0..m` and `0..n`.
    pub(crate) unsafe fn from_raw(
        ptr: *mut f32,
        m: usize,
        n: usize,
        rows: Range<usize>,
        tokens: Range<usize>,
    ) -> OutTile<'a> {
        OutTile { ptr, m, n, rows, tokens, _out: PhantomData }
    }

    /// Narrows the view to the block `tokens x rows`, which must lie inside the current one.
    pub fn restrict(self, rows: Range<usize>, tokens: Range<usize>) -> Result<OutTile<'a>> {
        let inside = |inner: &Range<usize>, outer: &Range<usize>| {
            inner.start <= inner.end && outer.start <= inner.start && inner.end <= outer.end
        };
        if !inside(&rows, &self.rows) {
            return Err(Error::InvalidRowRange { begin: rows.start, end: rows.end, rows: self.rows.end });
        }
        if !inside(&tokens, &self.tokens) {
            return Err(Error::InvalidRowRange { begin: tokens.start, end: tokens.end, rows: self.tokens.end });
        }
        Ok(OutTile { rows, tokens, ..self })
    }

    /// The output rows (weight rows) this view writes.
    pub fn rows(&self) -> Range<usize> {
        self.rows.clone()
    }

    /// The tokens (activation rows) this view writes.
    pub fn tokens(&self) -> Range<usize> {
        self.tokens.clone()
    }

    /// Tokens of the whole output.
    pub fn m(&self) -> usize {
        self.m
    }

    /// Output rows of the whole output.
    pub fn n(&self) -> usize {
        self.n
    }

    #[inline(always)]
    pub(crate) fn set(&mut self, token: usize, row: usize, value: f32) {
        assert!(self.tokens.contains(&token) && self.rows.contains(&row), "output ({token}, {row}) outside the view");
        // SAFETY: in bounds (the view's block lies in `m x n`, asserted membership), and this
        // view owns the element (see the type docs).
        unsafe { *self.ptr.add(token * self.n + row) = value }
    }

    /// Writes `values` to the outputs of `token` at rows `row..row + values.len()`, which are
    /// contiguous in the output: one bounds check for a run of rows. (Used by the GEMMs.)
    #[inline(always)]
    #[cfg_attr(
        not(any(
            target_arch = "x86_64",
            target_arch = "aarch64",
            all(target_arch = "wasm32", target_feature = "simd128")
        )),
        allow(dead_code)
    )]
    pub(crate) fn set_run(&mut self, token: usize, row: usize, values: &[f32]) {
        let inside = self.rows.start <= row && row + values.len() <= self.rows.end;
        assert!(self.tokens.contains(&token) && inside, "outputs ({token}, {row}..+{}) outside the view", values.len());
        // SAFETY: in bounds (the view's block lies in `m x n`, asserted membership), and this
        // view owns the elements (see the type docs).
        unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), self.ptr.add(token * self.n + row), values.len()) }
    }

    /// Splits into disjoint views of at most `row_chunk` rows x `token_chunk` tokens,
    /// row blocks outermost.
    pub(crate) fn split(self, row_chunk: usize, token_chunk: usize) -> Vec<OutTile<'a>> {
        let (row_chunk, token_chunk) = (row_chunk.max(1), token_chunk.max(1));
        let mut views = Vec::new();
        for r in self.rows.clone().step_by(row_chunk) {
            for t in self.tokens.clone().step_by(token_chunk) {
                views.push(OutTile {
                    rows: r..(r + row_chunk).min(self.rows.end),
                    tokens: t..(t + token_chunk).min(self.tokens.end),
                    ..self
                });
            }
        }
        views
    }
}

/// Checks that `len` floats hold an `m x n` output and that `rows` and `tokens` lie in
/// `0..n` and `0..m`.
pub(crate) fn check_out(len: usize, m: usize, n: usize, rows: &Range<usize>, tokens: &Range<usize>) -> Result<()> {
    let need = m.checked_mul(n).ok_or(Error::SizeOverflow { rows: m, cols: n })?;
    if len < need {
        return Err(Error::LengthMismatch { what: "out (floats)", want: need, got: len });
    }
    if rows.start > rows.end || rows.end > n {
        return Err(Error::InvalidRowRange { begin: rows.start, end: rows.end, rows: n });
    }
    if tokens.start > tokens.end || tokens.end > m {
        return Err(Error::InvalidRowRange { begin: tokens.start, end: tokens.end, rows: m });
    }
    Ok(())
}

/// A kernel's arithmetic: what it makes of the activations once per call ([`Compute::Act`],
/// shared by every task of the call) and the product itself. One type per (ISA, format,
/// loop nest) implements it; [`Kernel::new`] registers it, type-erased, which is the one
/// registration path of every kernel.
pub(crate) trait Compute: Sync + 'static {
    /// Activations made ready for this kernel (`()` for kernels that read the operand as
    /// it is).
    type Act: Send + Sync + 'static;
    /// The CPU features it needs, for humans (empty for portable kernels).
    const REQUIRES: &'static str;
    /// How it likes its work cut.
    const GEOMETRY: Geometry;
    /// Whether this CPU runs it.
    fn available() -> bool;
    /// Prepares `a`, called only through [`Kernel::prepare`], which checked the format and
    /// that the CPU runs the kernel.
    fn prepare(&self, a: &MatRef) -> Self::Act;
    /// `out[t][r] = sum_k a[t][k] * w[r][k]` for the block of `out`, called only through
    /// [`Kernel::run_prepared`], which checked that the formats are the kernel's own, `act`
    /// was prepared by this kernel from `a`, `w.cols == a.cols` and `out` is
    /// `a.rows x w.rows`.
    fn run(&self, w: &MatRef, a: &MatRef, act: &Self::Act, out: &mut OutTile);
}

/// Prepared activations with their type erased: what a [`PreparedAct`] holds.
type AnyAct = dyn Any + Send + Sync;

/// [`Compute`] with its activation type erased, as the registry holds it.
trait Erased: Sync {
    fn prepare(&self, a: &MatRef) -> Box<AnyAct>;
    fn run(&self, w: &MatRef, a: &MatRef, act: &AnyAct, out: &mut OutTile);
}

impl<C: Compute> Erased for C {
    fn prepare(&self, a: &MatRef) -> Box<AnyAct> {
        Box::new(Compute::prepare(self, a))
    }

    fn run(&self, w: &MatRef, a: &MatRef, act: &AnyAct, out: &mut OutTile) {
        let act =
            act.downcast_ref::<C::Act>().expect("Kernel::run_prepared checks that a kernel gets its own preparation");
        Compute::run(self, w, a, act, out)
    }
}

/// Activations prepared by one kernel ([`Kernel::prepare`]), for any number of its runs.
pub struct PreparedAct<'a> {
    kernel: &'static Kernel,
    /// The operand they were prepared from.
    act: MatRef<'a>,
    prep: Box<AnyAct>,
}

impl PreparedAct<'_> {
    /// Tokens (activation rows).
    pub fn rows(&self) -> usize {
        self.act.rows
    }

    /// The kernel that prepared them, the only one that can use them.
    pub fn kernel(&self) -> &'static Kernel {
        self.kernel
    }
}

/// How a kernel likes its work cut when the dispatcher splits a matmul over threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// Row blocks are multiples of this (the kernel's row tile or panel).
    pub rows: usize,
    /// Token blocks are multiples of this (the kernel's token tile).
    pub tokens: usize,
}

/// One entry of the registry: a kernel for one (weight, activation) format pair.
pub struct Kernel {
    name: &'static CStr,
    weight: Format,
    act: Format,
    requires: &'static str,
    available: fn() -> bool,
    /// The smallest token count for which the kernel is preferred (every kernel computes
    /// any token count correctly; a GEMM pays off only past a threshold).
    min_tokens: usize,
    pub(crate) geometry: Geometry,
    compute: &'static dyn Erased,
}

impl Kernel {
    /// The registry entry `name` for `weight` x `act`, computed by `compute`, preferred from
    /// `min_tokens` tokens on.
    pub(crate) const fn new<C: Compute>(
        name: &'static CStr,
        weight: Format,
        act: Format,
        min_tokens: usize,
        compute: &'static C,
    ) -> Kernel {
        Kernel {
            name,
            weight,
            act,
            requires: C::REQUIRES,
            available: C::available,
            min_tokens,
            geometry: C::GEOMETRY,
            compute,
        }
    }

    /// Reported in events and used to force a kernel, e.g. `bitnet_gemv/avx2`.
    pub fn name(&self) -> &'static str {
        self.name.to_str().expect("kernel names are ASCII")
    }

    /// [`Kernel::name`] as a NUL-terminated string, for the C ABI.
    pub fn c_name(&self) -> &'static CStr {
        self.name
    }

    /// The weight format it serves.
    pub fn weight(&self) -> Format {
        self.weight
    }

    /// The activation format it serves.
    pub fn act(&self) -> Format {
        self.act
    }

    /// The CPU features it needs, for humans (empty for portable kernels).
    pub fn requires(&self) -> &'static str {
        self.requires
    }

    /// Whether this CPU runs it.
    pub fn is_available(&self) -> bool {
        (self.available)()
    }

    /// The smallest token count for which the dispatcher prefers it.
    pub fn min_tokens(&self) -> usize {
        self.min_tokens
    }

    /// Whether it serves any (weight, activation) pair: `matmul/reference`, which decodes
    /// both operands, and whose `weight()` and `act()` are nominal.
    pub fn serves_any_pair(&self) -> bool {
        std::ptr::eq(self, &reference::DECODING_MATMUL)
    }

    /// Prepares `act` for any number of [`Kernel::run_prepared`] calls (activation
    /// placement and sums, paid once per call instead of once per task).
    pub fn prepare<'a>(&'static self, act: &MatRef<'a>) -> Result<PreparedAct<'a>> {
        if act.format != self.act && !self.serves_any_pair() {
            return Err(Error::Unsupported { weight: self.weight, act: act.format });
        }
        if !self.is_available() {
            return Err(Error::KernelUnavailable(self.name()));
        }
        Ok(PreparedAct { kernel: self, act: *act, prep: self.compute.prepare(act) })
    }

    /// `out[t][r] = sum_k act[t][k] * weight[r][k]` for the block of `out`. Checks the
    /// weight's format, that `act` was prepared by this kernel, `weight.cols == act.cols`
    /// and that `out` is `act.rows x weight.rows`, and writes nothing when a check fails.
    pub fn run_prepared(&self, weight: &MatRef, act: &PreparedAct, out: &mut OutTile) -> Result<()> {
        if weight.format != self.weight && !self.serves_any_pair() {
            return Err(Error::Unsupported { weight: weight.format, act: self.act });
        }
        if !std::ptr::eq(act.kernel, self) {
            return Err(Error::InvalidArgument("activations were prepared by another kernel"));
        }
        if weight.cols != act.act.cols {
            return Err(Error::ShapeMismatch("activation cols differ from weight cols"));
        }
        if out.m != act.act.rows || out.n != weight.rows {
            return Err(Error::ShapeMismatch("output is not activation rows x weight rows"));
        }
        self.compute.run(weight, &act.act, &*act.prep, out);
        Ok(())
    }

    /// [`Kernel::prepare`], then [`Kernel::run_prepared`].
    pub fn run(&'static self, weight: &MatRef, act: &MatRef, out: &mut OutTile) -> Result<()> {
        if weight.format != self.weight && !self.serves_any_pair() {
            return Err(Error::Unsupported { weight: weight.format, act: act.format });
        }
        // Before `prepare`: a SIMD preparation lays the activation out in the weight
        // format's blocks, and an activation of another k does not fit them.
        if weight.cols != act.cols {
            return Err(Error::ShapeMismatch("activation cols differ from weight cols"));
        }
        self.run_prepared(weight, &self.prepare(act)?, out)
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({} x {})", self.name(), self.weight.name(), self.act.name())
    }
}

/// Every kernel built into this library, best first within each (weight, act) pair.
pub fn registry() -> &'static [Kernel] {
    static REGISTRY: OnceLock<Vec<Kernel>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut all = arch::kernels();
        all.extend(reference::kernels());
        all
    })
}

/// The kernel for an `m`-token matmul of a `weight` by an `act` matrix: the named one if
/// `forced` names a kernel serving the pair (an error if this CPU cannot run it), else the
/// first available one preferred at `m` tokens. `None` when no kernel serves the pair.
/// A forced name that serves other pairs only leaves this pair's choice alone; a name no
/// kernel has is an error.
pub(crate) fn select(weight: Format, act: Format, m: usize, forced: Option<&str>) -> Result<Option<&'static Kernel>> {
    let serving = || registry().iter().filter(move |k| k.weight == weight && k.act == act);
    if let Some(name) = forced.filter(|&name| !exists(name)) {
        return Err(Error::UnknownKernel { name: name.to_owned(), from: "the argument `kernel`" });
    }
    if let Some(kernel) = forced.and_then(|name| serving().find(|k| k.name() == name)) {
        return if kernel.is_available() { Ok(Some(kernel)) } else { Err(Error::KernelUnavailable(kernel.name())) };
    }
    Ok(serving().find(|k| k.is_available() && k.min_tokens <= m.max(1)))
}

/// Whether any kernel (of any pair) has this name.
pub(crate) fn exists(name: &str) -> bool {
    registry().iter().any(|k| k.name() == name)
}

/// AMX-INT8 on this machine: `None` when the CPU has none (or is not x86_64); `Some(Ok(()))`
/// when `bitnet_gemm/amx` can run; `Some(Err(why))` when the CPU has AMX-INT8 but tern
/// cannot use it (say, the OS refused tile data). On Linux the first call asks the OS for
/// tile data for this process (`arch_prctl`); every AMX kernel call goes through it.
pub fn amx_status() -> Option<Result<(), &'static str>> {
    arch::amx_status()
}

/// An activation requantizer in the adapter's two passes (block maxima for
/// `format::i8_absmax::scales_of`, then `quantize_blocks`), each bit-identical to its
/// definition.
#[derive(Clone, Copy)]
pub(crate) struct Requant {
    /// A block's max |x| as bits (`format::abs_max_bits`).
    pub(crate) abs_max_bits: fn(&[f32]) -> u32,
    /// A block's codes at its nonzero scale (`format::i8_absmax::quantize`).
    pub(crate) quantize: fn(&[f32], f32, &mut [i8]),
}

/// The fastest requantizer this CPU runs.
pub(crate) fn requant() -> Requant {
    use crate::format::{abs_max_bits, i8_absmax::quantize};
    arch::requant().unwrap_or(Requant { abs_max_bits, quantize })
}
