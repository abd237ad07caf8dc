//! The one error type of the crate. `ffi::status` maps each variant to a stable C status code.

use crate::format::Format;

/// Everything that can go wrong in tern. Every fallible operation checks its inputs fully
/// before it writes anything, so an `Err` always means "nothing was written".
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    #[error("unknown format id {0}")]
    UnknownFormat(u32),
    #[error("{format:?} cannot hold a {rows}x{cols} matrix: {why}")]
    InvalidShape { format: Format, rows: usize, cols: usize, why: &'static str },
    #[error("size of a {rows}x{cols} matrix overflows usize")]
    SizeOverflow { rows: usize, cols: usize },
    /// `what` names the buffer and its unit (e.g. "dst (bytes)").
    #[error("{what}: {got} given, {want} required")]
    LengthMismatch { what: &'static str, want: usize, got: usize },
    #[error("input element {index} is not finite")]
    NonFinite { index: usize },
    #[error("block or row {block}: max |x| = {amax} does not fit the format's scale")]
    ScaleOverflow { block: usize, amax: f32 },
    #[error("corrupt code at element {index}")]
    CorruptCode { index: usize },
    #[error("index ({row}, {col}) outside a {rows}x{cols} matrix")]
    OutOfBounds { row: usize, col: usize, rows: usize, cols: usize },
    #[error("row range {begin}..{end} does not fit {rows} rows")]
    InvalidRowRange { begin: usize, end: usize, rows: usize },
    #[error("the tensor's scope was reset or freed; the view is stale")]
    StaleTensor,
    #[error("operands do not fit: {0}")]
    ShapeMismatch(&'static str),
    /// `from` says where the name came from (an argument, an option, an environment
    /// variable), so that a typo can be traced.
    #[error("no kernel named {name:?} (from {from})")]
    UnknownKernel { name: String, from: &'static str },
    #[error("kernel {0} needs CPU features this machine does not have")]
    KernelUnavailable(&'static str),
    #[error("no kernel for weight {weight:?} x activation {act:?}")]
    Unsupported { weight: Format, act: Format },
    #[error("an operation needs a scope and none was given")]
    ScopeRequired,
    #[error("allocation of {0} bytes failed")]
    AllocationFailed(usize),
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
    #[error("no dedicated kernel for weight {weight:?} x activation {act:?}, and the dispatcher is strict (it would run matmul/reference)")]
    StrictFallback { weight: Format, act: Format },
    #[error("the executor broke its contract (every task exactly once, before returning): {missed} of {tasks} tasks did not run, or a task ran twice or out of range; the output is unspecified")]
    ExecutorContract { tasks: usize, missed: usize },
    #[error("no {what} named {name:?}")]
    NotFound { what: &'static str, name: String },
    #[error("not a GGUF file tern can read: {0}")]
    Gguf(#[from] crate::gguf::GgufError),
    /// An operating-system error, with the operation and path it concerned.
    #[error("{0}")]
    Io(String),
    #[error("kernel {name:?} does not serve {weight:?} weights with I8_ABSMAX activations")]
    KernelMismatch { name: String, weight: Format },
    #[error("n_threads = {requested} is more than the {max} threads a pool may have")]
    TooManyThreads { requested: usize, max: usize },
    #[error("starting worker thread {index} failed: {reason}")]
    ThreadSpawn { index: usize, reason: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
