//! The one error type of the crate. `ffi::status` maps each variant to a stable C status code.

use crate::format::Format;

/// Everything that can go wrong in tern. Every fallible operation checks its inputs fully
/// before it writes anything, so an `Err` means "nothing was written", with one exception:
/// [`Error::ExecutorContract`], raised after an engine's executor ran tasks wrongly.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A format id that is not one of [`Format::ALL`].
    #[error("unknown format id {0}")]
    UnknownFormat(u32),
    /// A shape the format cannot hold (zero dimensions, `cols` not a multiple of its block).
    #[error("{format} cannot hold a {rows}x{cols} matrix: {why}")]
    InvalidShape {
        /// The format asked to hold the matrix.
        format: Format,
        /// Rows asked for.
        rows: usize,
        /// Columns asked for.
        cols: usize,
        /// The rule the shape breaks.
        why: &'static str,
    },
    /// `rows x cols` elements (or their bytes) do not fit in `usize`.
    #[error("size of a {rows}x{cols} matrix overflows usize")]
    SizeOverflow {
        /// Rows asked for.
        rows: usize,
        /// Columns asked for.
        cols: usize,
    },
    /// A buffer of the wrong length: inputs must be exact, outputs at least as long.
    #[error("{what}: {got} given, {want} required")]
    LengthMismatch {
        /// The buffer and its unit, e.g. "dst (bytes)".
        what: &'static str,
        /// The length the shape requires.
        want: usize,
        /// The length given.
        got: usize,
    },
    /// NaN or infinity in an input that must be finite.
    #[error("input element {index} is not finite")]
    NonFinite {
        /// Row-major index of the first such element.
        index: usize,
    },
    /// A block or row whose scale the format cannot store (f16 overflow, or an I8_ABSMAX
    /// scale that would decode code 127 to infinity).
    #[error("block or row {block}: max |x| = {amax} does not fit the format's scale")]
    ScaleOverflow {
        /// The block (TQ) or row (I8_ABSMAX).
        block: usize,
        /// Its max |x|.
        amax: f32,
    },
    /// Validation found bytes no encoder writes (see [`Format::validate`]).
    #[error("corrupt code at element {index}")]
    CorruptCode {
        /// Row-major index of the first element concerned.
        index: usize,
    },
    /// An element index outside the matrix.
    #[error("index ({row}, {col}) outside a {rows}x{cols} matrix")]
    OutOfBounds {
        /// Row asked for.
        row: usize,
        /// Column asked for.
        col: usize,
        /// Rows of the matrix.
        rows: usize,
        /// Columns of the matrix.
        cols: usize,
    },
    /// A range of output rows (or tokens) that is reversed or runs past the end.
    #[error("row range {begin}..{end} does not fit {rows} rows")]
    InvalidRowRange {
        /// First row of the range.
        begin: usize,
        /// One past its last row.
        end: usize,
        /// Rows there are.
        rows: usize,
    },
    /// A scope tensor used after its scope was reset or freed.
    #[error("the tensor's scope was reset or freed; the view is stale")]
    StaleTensor,
    /// Operands whose shapes do not fit together; the text says which.
    #[error("operands do not fit: {0}")]
    ShapeMismatch(&'static str),
    /// A kernel name no kernel has.
    #[error("no kernel named {name:?} (from {from})")]
    UnknownKernel {
        /// The name as given.
        name: String,
        /// Where it came from (an argument, an option, an environment variable), so that a
        /// typo can be traced.
        from: &'static str,
    },
    /// A forced kernel this CPU cannot run.
    #[error("kernel {0} needs CPU features this machine does not have")]
    KernelUnavailable(&'static str),
    /// No kernel (not even the fallback) serves this pair of formats.
    #[error("no kernel for weight {weight} x activation {act}")]
    Unsupported {
        /// The weight's format.
        weight: Format,
        /// The activation's format.
        act: Format,
    },
    /// The adapter has to run and no scope was given to hold its output.
    #[error("an operation needs a scope and none was given")]
    ScopeRequired,
    /// Memory could not be had (the byte count asked for).
    #[error("allocation of {0} bytes failed")]
    AllocationFailed(usize),
    /// An argument that is wrong in itself; the text says which and why.
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
    /// A strict dispatcher refused to run the decoding fallback.
    #[error("no dedicated kernel for weight {weight} x activation {act}, and the dispatcher is strict (it would run matmul/reference)")]
    StrictFallback {
        /// The weight's format.
        weight: Format,
        /// The activation's format.
        act: Format,
    },
    /// An engine's executor skipped a task, ran one twice or out of range; the output is
    /// unspecified.
    #[error("the executor broke its contract (every task exactly once, before returning): {}; the output is unspecified", executor_fault(.tasks, .missed))]
    ExecutorContract {
        /// Tasks handed to the executor.
        tasks: usize,
        /// Tasks that did not run (0 when every task ran but one ran twice or out of range).
        missed: usize,
    },
    /// A lookup by name found nothing.
    #[error("no {what} named {name:?}")]
    NotFound {
        /// What was looked for, e.g. "tensor".
        what: &'static str,
        /// The name looked for.
        name: String,
    },
    /// A file that is not a GGUF file tern can read. The message is the reader's, which
    /// says what is wrong and where (`tern_status_str` already says "not a GGUF file tern
    /// can read", so printing both does not repeat it).
    #[error(transparent)]
    Gguf(#[from] crate::gguf::GgufError),
    /// An operating-system error, with the operation and path it concerned.
    #[error("{0}")]
    Io(String),
    /// A kernel named for a row-range call that does not serve the weight's format.
    #[error("kernel {name:?} does not serve {weight} weights with I8_ABSMAX activations")]
    KernelMismatch {
        /// The name as given.
        name: String,
        /// The weight's format.
        weight: Format,
    },
    /// More threads than a pool may have ([`crate::dispatch::MAX_THREADS`]).
    #[error("n_threads = {requested} is more than the {max} threads a pool may have")]
    TooManyThreads {
        /// Threads asked for.
        requested: usize,
        /// The most a pool may have.
        max: usize,
    },
    /// The OS refused to start a worker thread; no worker is left running.
    #[error("starting worker thread {index} failed: {reason}")]
    ThreadSpawn {
        /// Which worker (1-based: the caller is thread 0).
        index: usize,
        /// The OS's reason.
        reason: String,
    },
}

/// tern's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What [`Error::ExecutorContract`] says went wrong.
fn executor_fault(&tasks: &usize, &missed: &usize) -> String {
    match missed {
        0 => format!("a task was run twice or with an index out of range (0..{tasks})"),
        _ => format!("{missed} of {tasks} tasks were not run"),
    }
}
