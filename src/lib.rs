//! tern: ternary (1.58-bit) LLM weight formats and kernels, with a C ABI.
//!
//! - [`format`](mod@format): the byte layouts (TQ1_0, TQ2_0, BITNET_B1_58, I8_ABSMAX, F32).
//! - [`tensor`]: views over borrowed, owned or scope-allocated bytes; [`scope`]: arenas.
//! - [`adapter`]: the `requantize-i8-absmax` activation adapter.
//! - [`kernel`]: the registry of kernels (reference and SIMD) and its checked entry.
//! - [`dispatch`]: the policy choosing adapters and kernels; [`event`]: what it reports.
//! - [`gguf`]: a checked reader of GGUF files, to hand their tensors' bytes over as they are;
//!   [`gguf::GgufFile`] owns its bytes (a memory mapping or a buffer).
//!
//! The C API is `include/tern.h`; C, C++, Swift and Kotlin programs link the library built
//! from this crate.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc, missing_docs)]

pub mod adapter;
pub mod dispatch;
pub mod error;
pub mod event;
// The C ABI (`include/tern.h`), the only home of `extern "C"`; raw pointers live there and,
// behind safe checked entries, in the kernels' inner loops and the pool. Public only so
// that tern's own Rust tests and fuzz targets can call the exports as C does; hidden from
// the docs, since Rust code uses the safe API.
#[doc(hidden)]
pub mod ffi;
pub mod format;
pub mod gguf;
pub mod kernel;
pub mod scope;
pub mod tensor;

pub use dispatch::{Dispatcher, DispatcherOptions};
pub use error::{Error, Result};
pub use event::{Event, EventKind, EventSink, RecordingSink};
pub use format::Format;
pub use gguf::{Gguf, GgufError, GgufFile};
pub use scope::{Scope, ScopeStats};
pub use tensor::Tensor;

#[cfg(target_endian = "big")]
compile_error!("tern's formats are little-endian and its casts assume a little-endian target");
