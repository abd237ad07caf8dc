//! The activation adapters: F32 activations -> I8_ABSMAX (`requantize-i8-absmax`, one scale
//! per token, what the ternary kernels consume by default), I8_BLOCK256
//! (`requantize-i8-block256`, one scale per 256-element block, the accurate choice for
//! TQ1_0/TQ2_0) or I8_BLOCK32 (`requantize-i8-block32`, one per 32, the accurate choice for
//! Q2_0). They run on every token, so they use the fastest requantizer of this CPU
//! (`kernel::requant`), bit-identical to the formats' definition, and read the activations
//! twice: once for the scales and the checks that refuse input before anything is written,
//! once for the codes.

use crate::dispatch::{run_each, Executor};
use crate::error::{Error, Result};
use crate::event::{emit, Event, EventKind, EventSink};
use crate::format::{i8_absmax, Format};
use crate::kernel::{requant, Requant};
use crate::scope::Scope;
use crate::tensor::Tensor;
use std::borrow::Cow;
use std::ffi::CStr;
use std::time::Instant;

/// The I8_ABSMAX adapter's name in `AdapterInserted` events.
pub const REQUANTIZE_I8_ABSMAX: &CStr = c"requantize-i8-absmax";
/// The I8_BLOCK256 adapter's name in `AdapterInserted` events.
pub const REQUANTIZE_I8_BLOCK256: &CStr = c"requantize-i8-block256";
/// The I8_BLOCK32 adapter's name in `AdapterInserted` events.
pub const REQUANTIZE_I8_BLOCK32: &CStr = c"requantize-i8-block32";

/// The price of the adapter's output: `rows * cols` codes and `rows` f32 scales.
pub fn i8_absmax_price(rows: usize, cols: usize) -> Result<usize> {
    Format::I8Absmax.bytes_for(rows, cols)
}

/// Requantizes an F32 tensor into a new I8_ABSMAX tensor allocated in `scope`, and
/// reports one `AdapterInserted` event. Non-finite input is refused before anything is
/// allocated or reported.
pub fn requantize_i8_absmax(act: &Tensor, scope: &mut Scope, sink: Option<&dyn EventSink>) -> Result<Tensor<'static>> {
    requantize_i8(act, Format::I8Absmax, scope, sink)
}

/// Requantizes an F32 tensor into a new tensor of the int8 activation format `to`
/// (I8_ABSMAX, I8_BLOCK256 or I8_BLOCK32) allocated in `scope`, and reports one
/// `AdapterInserted` event naming `to` and its bytes. Refused before anything is allocated
/// or reported: another `to` (`Unsupported`), non-finite input, a shape `to` cannot hold
/// (I8_BLOCK256 needs cols a multiple of 256, I8_BLOCK32 of 32).
pub fn requantize_i8(
    act: &Tensor,
    to: Format,
    scope: &mut Scope,
    sink: Option<&dyn EventSink>,
) -> Result<Tensor<'static>> {
    requantize_i8_on(None, act, to, scope, sink)
}

/// Activations below this many elements are requantized on the calling thread: a split
/// costs more than it saves (a 1 x 2560 row takes under a microsecond).
const PARALLEL_MIN_ELEMENTS: usize = 1 << 16;

/// The adapter's two passes over `src` with this CPU's requantizer, in tasks of whole rows
/// on an executor (or in one task here).
struct Passes<'e> {
    executor: Option<&'e dyn Executor>,
    requant: Requant,
    /// Elements per scale, and per task (whole rows, so whole blocks).
    block: usize,
    span: usize,
}

impl<'e> Passes<'e> {
    /// Tasks of about a quarter of a thread's share of the rows, when `executor` has several
    /// threads and the activation is large enough; one task otherwise.
    fn new(executor: Option<&'e dyn Executor>, rows: usize, cols: usize, block: usize) -> Passes<'e> {
        let executor = executor.filter(|e| e.threads() > 1 && rows > 1 && rows * cols >= PARALLEL_MIN_ELEMENTS);
        let task_rows = executor.map_or(rows, |e| rows.div_ceil(4 * e.threads())).max(1);
        Passes { executor, requant: requant(), block, span: task_rows * cols }
    }

    /// The blocks' scales, after the refusals (`i8_absmax::scales_of`).
    fn scales(&self, src: &[f32]) -> Result<Vec<f32>> {
        let (block, abs_max_bits) = (self.block, self.requant.abs_max_bits);
        let mut maxima = vec![0u32; src.len() / block];
        let parts = src.chunks(self.span).zip(maxima.chunks_mut(self.span / block));
        run_each(self.executor, parts.collect(), |(src, maxima): (&[f32], &mut [u32])| {
            for (m, x) in maxima.iter_mut().zip(src.chunks_exact(block)) {
                *m = abs_max_bits(x);
            }
        })?;
        i8_absmax::scales_of(src, &maxima)
    }

    /// The codes of `src` at `scales` into `codes` (`src.len()` of them).
    fn codes(&self, src: &[f32], scales: &[f32], codes: &mut [i8]) -> Result<()> {
        let (block, quantize) = (self.block, self.requant.quantize);
        let parts = src.chunks(self.span).zip(codes.chunks_mut(self.span)).zip(scales.chunks(self.span / block));
        run_each(self.executor, parts.collect(), |((src, codes), scales)| {
            i8_absmax::quantize_blocks(src, block, scales, codes, quantize)
        })
    }
}

/// [`requantize_i8`] with both passes split by rows over `executor` (the dispatcher's) when
/// the activation is large enough; the result is the same bit for bit. An executor that
/// breaks its contract makes the call `ExecutorContract`, before any event.
pub(crate) fn requantize_i8_on(
    executor: Option<&dyn Executor>,
    act: &Tensor,
    to: Format,
    scope: &mut Scope,
    sink: Option<&dyn EventSink>,
) -> Result<Tensor<'static>> {
    let start = Instant::now();
    let (rows, cols) = (act.rows(), act.cols());
    let block = to.i8_scale_block(cols).ok_or(Error::Unsupported { weight: to, act: act.format() })?;
    to.check_shape(rows, cols)?;
    let src = f32_values(act, to)?;
    let passes = Passes::new(executor, rows, cols, block);
    let scales = passes.scales(&src)?;
    let out = Tensor::in_scope(scope, to, rows, cols, |bytes| {
        let (codes, scale_bytes) = bytes.split_at_mut(rows * cols);
        passes.codes(&src, &scales, bytemuck::cast_slice_mut(codes))?;
        for (s, scale) in scale_bytes.chunks_exact_mut(4).zip(&scales) {
            s.copy_from_slice(&scale.to_le_bytes());
        }
        Ok(())
    })?;
    report(sink, to, rows, cols, start);
    Ok(out)
}

/// The caller-buffer variant for engines that manage their own memory: codes
/// (`rows * cols`) and scales (`rows`) go into the caller's slices, which must be at least
/// that long. Reports the same event.
pub fn requantize_i8_absmax_into(
    src: &[f32],
    rows: usize,
    cols: usize,
    codes: &mut [i8],
    scales: &mut [f32],
    sink: Option<&dyn EventSink>,
) -> Result<()> {
    let start = Instant::now();
    Format::I8Absmax.check_shape(rows, cols)?;
    let n = rows * cols;
    if src.len() != n {
        return Err(Error::LengthMismatch { what: "src (floats)", want: n, got: src.len() });
    }
    if codes.len() < n {
        return Err(Error::LengthMismatch { what: "codes", want: n, got: codes.len() });
    }
    if scales.len() < rows {
        return Err(Error::LengthMismatch { what: "scales", want: rows, got: scales.len() });
    }
    let passes = Passes::new(None, rows, cols, cols);
    let row_scales = passes.scales(src)?;
    passes.codes(src, &row_scales, &mut codes[..n])?;
    scales[..rows].copy_from_slice(&row_scales);
    report(sink, Format::I8Absmax, rows, cols, start);
    Ok(())
}

fn report(sink: Option<&dyn EventSink>, to: Format, rows: usize, cols: usize, start: Instant) {
    emit(sink, || Event {
        kind: EventKind::AdapterInserted,
        name: match to {
            Format::I8Block256 => REQUANTIZE_I8_BLOCK256,
            Format::I8Block32 => REQUANTIZE_I8_BLOCK32,
            _ => REQUANTIZE_I8_ABSMAX,
        },
        from: Format::F32,
        to,
        rows,
        cols,
        bytes: to.bytes_for(rows, cols).expect("shape was checked"),
        nanos: start.elapsed().as_nanos() as u64,
    });
}

/// The values of an F32 tensor, borrowed when its bytes are 4-byte aligned.
fn f32_values<'t>(act: &'t Tensor, to: Format) -> Result<Cow<'t, [f32]>> {
    if act.format() != Format::F32 {
        return Err(Error::Unsupported { weight: to, act: act.format() });
    }
    let bytes = act.bytes()?;
    Ok(match bytemuck::try_cast_slice(bytes) {
        Ok(values) => Cow::Borrowed(values),
        Err(_) => Cow::Owned(bytes.chunks_exact(4).map(|s| f32::from_le_bytes([s[0], s[1], s[2], s[3]])).collect()),
    })
}
