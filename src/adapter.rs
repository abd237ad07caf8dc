//! The activation adapter `requantize-i8-absmax`: F32 activations -> I8_ABSMAX, the format
//! the ternary kernels consume. It runs on every token, so it uses the fastest row
//! requantizer of this CPU (`kernel::requant_row`), bit-identical to the format's
//! definition.

use crate::error::{Error, Result};
use crate::event::{emit, Event, EventKind, EventSink};
use crate::format::{check_finite, i8_absmax, Format};
use crate::kernel::requant_row;
use crate::scope::Scope;
use crate::tensor::Tensor;
use std::borrow::Cow;
use std::ffi::CStr;
use std::time::Instant;

/// The adapter's name in `AdapterInserted` events.
pub const REQUANTIZE_I8_ABSMAX: &CStr = c"requantize-i8-absmax";

/// The price of the adapter's output: `rows * cols` codes and `rows` f32 scales.
pub fn i8_absmax_price(rows: usize, cols: usize) -> Result<usize> {
    Format::I8Absmax.bytes_for(rows, cols)
}

/// Requantizes an F32 tensor into a new I8_ABSMAX tensor allocated in `scope`, and
/// reports one `AdapterInserted` event. Non-finite input is refused before anything is
/// allocated or reported.
pub fn requantize_i8_absmax(act: &Tensor, scope: &mut Scope, sink: Option<&dyn EventSink>) -> Result<Tensor<'static>> {
    let start = Instant::now();
    let (rows, cols) = (act.rows(), act.cols());
    let src = f32_values(act)?;
    check_finite(&src)?;
    i8_absmax::check_row_scales(&src, cols)?;
    let requant = requant_row();
    let out = Tensor::in_scope(scope, Format::I8Absmax, rows, cols, |bytes| {
        let (codes, scales) = bytes.split_at_mut(rows * cols);
        let codes: &mut [i8] = bytemuck::cast_slice_mut(codes);
        for ((x, c), s) in src.chunks_exact(cols).zip(codes.chunks_exact_mut(cols)).zip(scales.chunks_exact_mut(4)) {
            s.copy_from_slice(&requant(x, c).to_le_bytes());
        }
        Ok(())
    })?;
    report(sink, rows, cols, start);
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
    check_finite(src)?;
    i8_absmax::check_row_scales(src, cols)?;
    let requant = requant_row();
    for ((x, c), s) in src.chunks_exact(cols).zip(codes.chunks_exact_mut(cols)).zip(scales.iter_mut()) {
        *s = requant(x, c);
    }
    report(sink, rows, cols, start);
    Ok(())
}

fn report(sink: Option<&dyn EventSink>, rows: usize, cols: usize, start: Instant) {
    emit(sink, || Event {
        kind: EventKind::AdapterInserted,
        name: REQUANTIZE_I8_ABSMAX,
        from: Format::F32,
        to: Format::I8Absmax,
        rows,
        cols,
        bytes: i8_absmax_price(rows, cols).expect("shape was checked"),
        nanos: start.elapsed().as_nanos() as u64,
    });
}

/// The values of an F32 tensor, borrowed when its bytes are 4-byte aligned.
fn f32_values<'t>(act: &'t Tensor) -> Result<Cow<'t, [f32]>> {
    if act.format() != Format::F32 {
        return Err(Error::Unsupported { weight: Format::I8Absmax, act: act.format() });
    }
    let bytes = act.bytes()?;
    Ok(match bytemuck::try_cast_slice(bytes) {
        Ok(values) => Cow::Borrowed(values),
        Err(_) => Cow::Owned(bytes.chunks_exact(4).map(|s| f32::from_le_bytes([s[0], s[1], s[2], s[3]])).collect()),
    })
}
