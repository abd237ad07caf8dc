//! Events, the activation adapter, the dispatcher and the row-range GEMV.

use super::guard::*;
use super::options::{dispatcher_options, tern_dispatcher_options};
use super::scope::{scope_mut, tern_scope};
use super::status::*;
use super::tensor::{tensor_ref, tern_tensor};
use crate::adapter::{requantize_i8_absmax, requantize_i8_absmax_into};
use crate::dispatch::{all_kernels, bitnet_gemv_with, Dispatcher};
use crate::error::Error;
use crate::event::{Event, EventSink};
use crate::format::Format;
use crate::kernel::{check_out, Kernel, OutTile};
use crate::tensor::Tensor;
use std::ffi::{c_char, c_void, CStr};
use std::ops::Range;
use std::sync::Arc;

/// An adapter converted an activation so that a kernel could consume it.
pub const TERN_EVENT_ADAPTER_INSERTED: u32 = 1u32;
/// A kernel ran.
pub const TERN_EVENT_KERNEL_SELECTED: u32 = 2u32;

/// One report, valid only during the callback.
///
/// For TERN_EVENT_ADAPTER_INSERTED: `name` is the adapter (`requantize-i8-absmax`),
/// `from`/`to` the formats, `rows x cols` the converted tensor, `bytes` its size in `to`
/// (`rows * cols + 4 * rows` for I8_ABSMAX). For TERN_EVENT_KERNEL_SELECTED: `name` is the
/// kernel (e.g. `bitnet_gemv/avx512vnni`), `from` the weight format, `to` the activation
/// format the kernel consumed, `rows x cols` the output (tokens x weight rows), `bytes` the
/// weight bytes read. `nanos` is the step's wall time.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tern_event {
    pub kind: u32,
    /// A static NUL-terminated string: may be kept after the callback returns.
    pub name: *const c_char,
    pub from: u32,
    pub to: u32,
    pub rows: usize,
    pub cols: usize,
    pub bytes: usize,
    pub nanos: u64,
}

/// An event callback: `userdata` first, as given when the callback was registered.
pub type tern_event_fn = Option<unsafe extern "C" fn(userdata: *mut c_void, event: *const tern_event)>;

/// A C callback with its userdata.
struct CallbackSink {
    callback: unsafe extern "C" fn(*mut c_void, *const tern_event),
    userdata: *mut c_void,
}

// SAFETY: the header makes the callback's thread-safety the caller's contract: a sink set on
// a dispatcher that several threads use at once is called from all of them.
unsafe impl Send for CallbackSink {}
// SAFETY: as above.
unsafe impl Sync for CallbackSink {}

impl EventSink for CallbackSink {
    fn on_event(&self, event: &Event) {
        let c = tern_event {
            kind: event.kind as u32,
            name: event.name.as_ptr(),
            from: event.from.id(),
            to: event.to.id(),
            rows: event.rows,
            cols: event.cols,
            bytes: event.bytes,
            nanos: event.nanos,
        };
        // SAFETY: the caller registered a callback that accepts its own userdata and a
        // pointer to an event valid for the call.
        unsafe { (self.callback)(self.userdata, &c) }
    }
}

fn sink(callback: tern_event_fn, userdata: *mut c_void) -> Option<CallbackSink> {
    callback.map(|callback| CallbackSink { callback, userdata })
}

/// Reads an optional C string (NULL = none); it must be UTF-8.
///
/// # Safety
/// A non-NULL `s` must point to a NUL-terminated string valid for `'a`.
unsafe fn opt_str<'a>(s: *const c_char, arg: &str) -> FfiResult<Option<&'a str>> {
    if s.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL and NUL-terminated (the caller's promise).
    let s = unsafe { CStr::from_ptr(s) };
    s.to_str().map(Some).map_err(|_| Status::invalid(arg, "not UTF-8"))
}

/// Requantizes an F32 tensor to I8_ABSMAX (per-row absmax / 127) into a new tensor whose
/// bytes live in `scope`, and reports one TERN_EVENT_ADAPTER_INSERTED event to `callback`
/// (NULL: no event) before returning. The result goes stale when the scope is reset; free
/// the handle with `tern_tensor_free`. Errors: TERN_ERR_NULL_POINTER, TERN_ERR_UNSUPPORTED
/// (not F32), TERN_ERR_NON_FINITE and TERN_ERR_SCALE_OVERFLOW (a row max within rounding
/// of FLT_MAX; both before anything is allocated or reported),
/// TERN_ERR_STALE_TENSOR, TERN_ERR_ALLOCATION_FAILED.
#[no_mangle]
pub unsafe extern "C" fn tern_requantize_i8_absmax(
    f32_tensor: *const tern_tensor,
    scope: *mut tern_scope,
    callback: tern_event_fn,
    userdata: *mut c_void,
    out: *mut *mut tern_tensor,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live tensor, a scope it owns during the call and a
        // writable out-parameter.
        let (act, scope, out) =
            unsafe { (tensor_ref(f32_tensor, "f32_tensor")?, scope_mut(scope)?, Out::new(out, "out")?) };
        let sink = sink(callback, userdata);
        let tensor = requantize_i8_absmax(act, scope, sink.as_ref().map(|s| s as &dyn EventSink))?;
        out.write(tern_tensor::into_raw(tensor));
        Ok(())
    })
}

/// The caller-buffer variant for engines that manage their own memory: requantizes
/// `src_len == rows * cols` floats into `codes` (at least `rows * cols` int8) and `scales`
/// (at least `rows` floats), bit-identical to `tern_requantize_i8_absmax`, and reports the
/// same event.
#[no_mangle]
pub unsafe extern "C" fn tern_requantize_i8_absmax_into(
    src: *const f32,
    src_len: usize,
    rows: usize,
    cols: usize,
    codes: *mut i8,
    codes_len: usize,
    scales: *mut f32,
    scales_len: usize,
    callback: tern_event_fn,
    userdata: *mut c_void,
) -> tern_status {
    guard(|| {
        check_disjoint((src, src_len, "src"), (codes, codes_len, "codes"))?;
        check_disjoint((src, src_len, "src"), (scales, scales_len, "scales"))?;
        check_disjoint((codes, codes_len, "codes"), (scales, scales_len, "scales"))?;
        // SAFETY: the caller passes buffers of the stated lengths; they are disjoint
        // (checked above).
        let (src, codes, scales) = unsafe {
            (
                slice(src, src_len, "src")?,
                slice_mut(codes, codes_len, "codes")?,
                slice_mut(scales, scales_len, "scales")?,
            )
        };
        let sink = sink(callback, userdata);
        requantize_i8_absmax_into(src, rows, cols, codes, scales, sink.as_ref().map(|s| s as &dyn EventSink))?;
        Ok(())
    })
}

/// Chooses and runs kernels, inserting the activation adapter when the weight asks for it.
///
/// Ownership: created by `tern_dispatcher_new`, released with `tern_dispatcher_free`.
/// Thread-safety: `tern_matmul` may be called on one dispatcher from several threads at
/// once (each with its own scope; its worker pool serves one call at a time and the others
/// run on their calling thread); `tern_dispatcher_set_sink` and `tern_dispatcher_free` must
/// not race with anything else on the same dispatcher.
pub struct tern_dispatcher {
    dispatcher: Dispatcher,
}

/// Creates a dispatcher. `options` may be NULL (the defaults); otherwise its `struct_size`
/// must be set (see `tern_dispatcher_options`), and a `parallel_for` and its `pool` must
/// stay valid until the dispatcher is freed. Errors: TERN_ERR_NULL_POINTER (`out`),
/// TERN_ERR_UNKNOWN_KERNEL (a forced kernel this library does not have; the message says
/// whether the name came from the option or from `TERN_KERNEL`), TERN_ERR_INVALID_ARGUMENT
/// (a `struct_size` that is not a released version's size, or larger with extra bytes set;
/// unknown flag bits; a name that is not UTF-8; more than 1024 threads),
/// TERN_ERR_ALLOCATION_FAILED (threads could not start).
#[no_mangle]
pub unsafe extern "C" fn tern_dispatcher_new(
    options: *const tern_dispatcher_options,
    out: *mut *mut tern_dispatcher,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a writable out-parameter, and NULL or options of
        // `struct_size` bytes as documented.
        let (out, options) = unsafe { (Out::new(out, "out")?, dispatcher_options(options)?) };
        let dispatcher = Dispatcher::new(options)?;
        out.write(Box::into_raw(Box::new(tern_dispatcher { dispatcher })));
        Ok(())
    })
}

/// Sets the event callback (NULL: no events). `userdata` is passed back as the callback's
/// first argument. The callback runs on the thread that called the operation, adapter
/// events before the kernel event they feed; with several threads calling `tern_matmul`,
/// it is called from all of them.
#[no_mangle]
pub unsafe extern "C" fn tern_dispatcher_set_sink(
    dispatcher: *mut tern_dispatcher,
    callback: tern_event_fn,
    userdata: *mut c_void,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a live dispatcher no one else uses during the call.
        unsafe { try_ref(dispatcher, "dispatcher")? };
        // SAFETY: non-NULL and live (above), exclusively ours during the call.
        let d = unsafe { &mut (*dispatcher).dispatcher };
        d.set_sink(sink(callback, userdata).map(|s| Arc::new(s) as Arc<dyn EventSink>));
        Ok(())
    })
}

/// Frees a dispatcher and stops its worker threads. `tern_dispatcher_free(NULL)` is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tern_dispatcher_free(dispatcher: *mut tern_dispatcher) {
    guard_value((), || {
        if !dispatcher.is_null() {
            // SAFETY: a non-NULL dispatcher came from Box::into_raw in tern_dispatcher_new
            // and is freed once (the caller's promise).
            drop(unsafe { Box::from_raw(dispatcher) });
        }
    })
}

/// Refuses an output that overlaps a tensor's bytes.
fn check_out_disjoint(t: &Tensor, arg: &'static str, out: *const f32, out_len: usize) -> FfiResult {
    let bytes = t.bytes().map_err(|e| Status::from(e).context(format_args!("argument `{arg}`")))?;
    check_disjoint((bytes.as_ptr(), bytes.len(), arg), (out, out_len, "out"))
}

/// `out[m][n] = sum_k act[m][k] * weight[n][k]` (`act` is m x k, `weight` n x k, `out`
/// at least m * n floats, row-major). A ternary weight with an F32 activation is
/// requantized into `scope` first (one TERN_EVENT_ADAPTER_INSERTED event; the scope may
/// be NULL otherwise); every run reports TERN_EVENT_KERNEL_SELECTED. Errors (nothing is
/// written and nothing reported): TERN_ERR_NULL_POINTER, TERN_ERR_SHAPE_MISMATCH (k),
/// TERN_ERR_LENGTH_MISMATCH (`out_len`), TERN_ERR_SCOPE_REQUIRED, TERN_ERR_STALE_TENSOR,
/// TERN_ERR_NON_FINITE, TERN_ERR_SCALE_OVERFLOW (an activation row whose I8_ABSMAX scale
/// would overflow), TERN_ERR_ALLOCATION_FAILED (the scope could not grow),
/// TERN_ERR_KERNEL_UNAVAILABLE (a forced kernel this CPU lacks), TERN_ERR_INVALID_ARGUMENT
/// (`out` overlaps an operand). TERN_ERR_PANIC (a bug) may leave `out` partly written.
#[no_mangle]
pub unsafe extern "C" fn tern_matmul(
    dispatcher: *const tern_dispatcher,
    act: *const tern_tensor,
    weight: *const tern_tensor,
    scope: *mut tern_scope,
    out: *mut f32,
    out_len: usize,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes live handles, a scope it owns during the call (or
        // NULL), and `out_len` writable floats at `out` that no other thread touches.
        unsafe {
            let d = &try_ref(dispatcher, "dispatcher")?.dispatcher;
            let (act, weight) = (tensor_ref(act, "act")?, tensor_ref(weight, "weight")?);
            let scope = scope_opt(scope)?;
            check_out_disjoint(act, "act", out, out_len)?;
            check_out_disjoint(weight, "weight", out, out_len)?;
            d.matmul(act, weight, scope, slice_mut(out, out_len, "out")?)
                .map_err(|e| operands_context(e, act, weight))?;
        }
        Ok(())
    })
}

/// `tern_matmul` for `n_weights` weights against one activation (Q/K/V, gate/up):
/// `outs[i]` (`out_lens[i]` floats, at least m * rows of `weights[i]`) receives
/// `act x weights[i]`. Every operand is checked before anything runs. The activation is
/// requantized once (one TERN_EVENT_ADAPTER_INSERTED) and prepared once, all the weights
/// run in one dispatch (one wake-up of the pool or one `parallel_for`), then one
/// TERN_EVENT_KERNEL_SELECTED per weight, in order (its `nanos`: the time spent on that
/// weight, summed over threads). The results are bit-identical to `n_weights` separate
/// `tern_matmul` calls. Errors as for `tern_matmul` (the message names the weight's
/// index), plus TERN_ERR_INVALID_ARGUMENT for `n_weights == 0` and for outputs that overlap
/// each other. Thread-safety as for `tern_matmul`.
#[no_mangle]
pub unsafe extern "C" fn tern_matmul_many(
    dispatcher: *const tern_dispatcher,
    act: *const tern_tensor,
    weights: *const *const tern_tensor,
    n_weights: usize,
    scope: *mut tern_scope,
    outs: *const *mut f32,
    out_lens: *const usize,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes live handles, `n_weights` tensor pointers at `weights`,
        // `n_weights` output pointers and lengths at `outs` and `out_lens` (each output
        // `out_lens[i]` writable floats that no other thread touches), and a scope it owns
        // during the call (or NULL).
        unsafe {
            let d = &try_ref(dispatcher, "dispatcher")?.dispatcher;
            let act = tensor_ref(act, "act")?;
            if n_weights == 0 {
                return Err(Status::invalid("n_weights", "0 given, at least 1"));
            }
            let (ws, os, lens) = (
                slice(weights, n_weights, "weights")?,
                slice(outs, n_weights, "outs")?,
                slice(out_lens, n_weights, "out_lens")?,
            );
            let at = |i: usize| move |s: Status| s.context(format_args!("weight {i}"));
            let ws = ws
                .iter()
                .enumerate()
                .map(|(i, &w)| tensor_ref(w, "weights[i]").map_err(at(i)))
                .collect::<FfiResult<Vec<_>>>()?;
            for (i, (&out, &len)) in os.iter().zip(lens).enumerate() {
                check_out_disjoint(act, "act", out, len).map_err(at(i))?;
                for w in &ws {
                    check_out_disjoint(w, "weights[j]", out, len).map_err(at(i))?;
                }
                for (&other, &other_len) in os[..i].iter().zip(lens) {
                    check_disjoint((other.cast_const(), other_len, "outs[j]"), (out, len, "outs[i]")).map_err(at(i))?;
                }
            }
            let mut out_slices =
                os.iter().zip(lens).map(|(&o, &len)| slice_mut(o, len, "outs[i]")).collect::<FfiResult<Vec<_>>>()?;
            d.matmul_many(act, &ws, scope_opt(scope)?, &mut out_slices).map_err(|e| {
                // Name the first weight that does not fit the activation or its output.
                let short = |i: usize| lens[i] < act.rows().saturating_mul(ws[i].rows());
                let culprit = match e {
                    Error::ShapeMismatch(_) => ws.iter().position(|w| w.cols() != act.cols()),
                    Error::LengthMismatch { .. } => (0..ws.len()).find(|&i| short(i)),
                    _ => None,
                };
                match culprit {
                    Some(i) => operands_context(e, act, ws[i]).context(format_args!("weight {i}")),
                    None => Status::from(e),
                }
            })?;
        }
        Ok(())
    })
}

/// An optional scope (NULL: none).
///
/// # Safety
/// As for `scope_mut`.
unsafe fn scope_opt<'a>(scope: *mut tern_scope) -> FfiResult<Option<&'a mut crate::scope::Scope>> {
    if scope.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded to the caller.
    unsafe { scope_mut(scope) }.map(Some)
}

/// Runs a ternary GEMV on the weight rows `[row_begin, row_end)` with the kernel named
/// `kernel` (NULL: the best this CPU has), for engines with their own thread pools: `out`
/// is the whole m x n output (`out_len >= m * n`), of which only the columns in the range
/// are written, so threads may pass the same `out` with disjoint ranges. `act` must be
/// I8_ABSMAX (see `tern_requantize_i8_absmax`); no events are reported. Errors (nothing
/// written): TERN_ERR_NULL_POINTER, TERN_ERR_UNSUPPORTED (non-ternary weight or non-I8
/// activation), TERN_ERR_SHAPE_MISMATCH, TERN_ERR_LENGTH_MISMATCH, TERN_ERR_OUT_OF_BOUNDS
/// (range), TERN_ERR_UNKNOWN_KERNEL, TERN_ERR_KERNEL_UNAVAILABLE, TERN_ERR_STALE_TENSOR,
/// TERN_ERR_INVALID_ARGUMENT (`out` overlaps an operand).
#[no_mangle]
pub unsafe extern "C" fn tern_bitnet_gemv(
    kernel: *const c_char,
    act_i8: *const tern_tensor,
    weight: *const tern_tensor,
    row_begin: usize,
    row_end: usize,
    out: *mut f32,
    out_len: usize,
) -> tern_status {
    guard(|| {
        // SAFETY: forwarded to the caller (the contract of `tern_bitnet_gemv_tile`, with
        // every token).
        unsafe { bitnet_gemv_tile(kernel, act_i8, weight, row_begin..row_end, None, out, out_len) }.map(|_| ())
    })
}

/// `tern_bitnet_gemv` on a tile: the weight rows `[row_begin, row_end)` for the tokens
/// (activation rows) `[token_begin, token_end)`, so an engine can split a batch by tokens as
/// well as by rows (with few weight rows and many tokens, rows alone give too few tasks).
/// The kernel is chosen for the whole activation's m, as the dispatcher does, so every tile
/// of one matmul runs the same kernel and the results equal one whole call's. Threads may
/// share one `out` if their tiles are disjoint. `kernel_ran` (nullable) receives the kernel
/// that ran, a static NUL-terminated name (e.g. "bitnet_gemm/avx512vnni"), on success only.
/// Errors as for `tern_bitnet_gemv`; TERN_ERR_OUT_OF_BOUNDS for a token range outside
/// `0..m` or reversed. Thread-safe as `tern_bitnet_gemv`.
#[no_mangle]
pub unsafe extern "C" fn tern_bitnet_gemv_tile(
    kernel: *const c_char,
    act_i8: *const tern_tensor,
    weight: *const tern_tensor,
    row_begin: usize,
    row_end: usize,
    token_begin: usize,
    token_end: usize,
    out: *mut f32,
    out_len: usize,
    kernel_ran: *mut *const c_char,
) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a writable `kernel_ran`, and the rest as for
        // `bitnet_gemv_tile`.
        unsafe {
            let ran = if kernel_ran.is_null() { None } else { Some(Out::new(kernel_ran, "kernel_ran")?) };
            let tokens = Some(token_begin..token_end);
            let chosen = bitnet_gemv_tile(kernel, act_i8, weight, row_begin..row_end, tokens, out, out_len)?;
            if let Some(ran) = ran {
                ran.write(chosen.c_name().as_ptr());
            }
        }
        Ok(())
    })
}

/// The body of the row-range GEMV: `tokens` None means every token.
///
/// # Safety
/// `kernel` is NULL or a NUL-terminated name; the tensors are live; `out` holds `out_len`
/// writable floats of which no other thread writes the tile `tokens x rows`.
unsafe fn bitnet_gemv_tile(
    kernel: *const c_char,
    act_i8: *const tern_tensor,
    weight: *const tern_tensor,
    rows: Range<usize>,
    tokens: Option<Range<usize>>,
    out: *mut f32,
    out_len: usize,
) -> FfiResult<&'static Kernel> {
    // SAFETY: forwarded to the caller.
    unsafe {
        let name = opt_str(kernel, "kernel")?;
        let (act, weight) = (tensor_ref(act_i8, "act_i8")?, tensor_ref(weight, "weight")?);
        slice(out.cast_const(), 0, "out")?;
        check_out_disjoint(act, "act_i8", out, out_len)?;
        check_out_disjoint(weight, "weight", out, out_len)?;
        bitnet_gemv_with(name, act, weight, |m, n| {
            let tokens = tokens.unwrap_or(0..m);
            check_out(out_len, m, n, &rows, &tokens)?;
            // SAFETY: `out` is non-NULL with room for m * n floats (checked), the ranges
            // lie in the output (checked), and this view writes only the tile the caller
            // reserved for this call.
            Ok(OutTile::from_raw(out, m, n, rows, tokens))
        })
        .map_err(|e| operands_context(e, act, weight))
    }
}

/// Adds both operands' shapes and formats to a shape or format error: a weight wrapped
/// transposed (n and k swapped) shows up here.
fn operands_context(error: Error, act: &Tensor, weight: &Tensor) -> Status {
    let shapes = matches!(error, Error::ShapeMismatch(_) | Error::Unsupported { .. });
    let status = Status::from(error);
    if !shapes {
        return status;
    }
    let describe = |t: &Tensor| format!("{} {}x{}", t.format(), t.rows(), t.cols());
    status.context(format_args!("act is {}, weight is {}", describe(act), describe(weight)))
}

/// What a kernel is and whether this CPU can run it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tern_kernel_info {
    /// A static NUL-terminated string, e.g. "bitnet_gemv/avx2".
    pub name: *const c_char,
    /// The weight format id the entry serves; 0 for `matmul/reference`, which serves any
    /// pair (it decodes both operands).
    pub weight: u32,
    /// The activation format id the entry consumes; 0 for `matmul/reference`.
    pub act: u32,
    /// 1 if this CPU has the features the kernel needs.
    pub available: u32,
}

/// The number of kernel entries built into this library (one per kernel and weight
/// format), best first within each (weight, activation) pair, and last
/// `matmul/reference`, the fallback a dispatcher runs for pairs no kernel serves (a strict
/// dispatcher refuses them instead).
#[no_mangle]
pub extern "C" fn tern_kernel_count() -> usize {
    guard_value(0, || all_kernels().count())
}

/// Describes kernel entry `index` (< `tern_kernel_count()`). Errors: TERN_ERR_NULL_POINTER,
/// TERN_ERR_OUT_OF_BOUNDS.
#[no_mangle]
pub unsafe extern "C" fn tern_kernel_info_get(index: usize, out: *mut tern_kernel_info) -> tern_status {
    guard(|| {
        // SAFETY: the caller passes a writable out-parameter.
        let out = unsafe { Out::new(out, "out")? };
        let count = all_kernels().count();
        let k = all_kernels().nth(index).ok_or_else(|| {
            Status::new(TERN_ERR_OUT_OF_BOUNDS, format!("argument `index`: {index} given, there are {count} kernels"))
        })?;
        let format = |f: Format| if k.serves_any_pair() { 0 } else { f.id() };
        out.write(tern_kernel_info {
            name: k.c_name().as_ptr(),
            weight: format(k.weight()),
            act: format(k.act()),
            available: k.is_available() as u32,
        });
        Ok(())
    })
}
