//! The C ABI (`include/tern.h`): the only module with `extern "C"` and raw pointers.
//!
//! Conventions (docs/design.md §3), after rustls-ffi:
//! - every fallible function returns a `tern_status`; results go through out-parameters
//!   that are written only on success (`guard::Out`);
//! - every pointer is checked for NULL and every length against the shape before anything
//!   is read or written (`guard::slice`, `guard::slice_mut`, `guard::try_ref`);
//! - every exported body runs inside `guard::guard` (or `guard::guard_value`), which
//!   maps a `tern::Error` to its status and a caught panic to `TERN_ERR_PANIC`, so no
//!   panic ever unwinds into C. That needs `panic = "unwind"`, which the release profile
//!   keeps (checked by `tests/suite/header.rs`); under `panic = "abort"` a panic aborts instead.
//!
//! New exports go in a new file here and use the same helpers.
//!
//! # Safety
//! The contract of every `unsafe extern "C"` function here is the one the header states:
//! each pointer is NULL (refused with `TERN_ERR_NULL_POINTER`) or valid for the documented
//! number of elements, handles come from the matching constructor and are not yet freed,
//! and output buffers do not alias inputs or other threads' buffers.

#![deny(unsafe_op_in_unsafe_fn)]
// The exported names are C names (`tern_status`, `tern_tensor`, ...).
#![allow(non_camel_case_types)]
// The per-function safety contract is the header's documentation (see above).
#![allow(clippy::missing_safety_doc)]

pub mod dispatch;
pub mod encoding;
pub mod gguf;
pub mod gguf_kv;
pub mod guard;
pub mod options;
pub mod scope;
pub mod status;
pub mod tensor;
pub mod version;

pub use dispatch::*;
pub use encoding::*;
pub use gguf::*;
pub use gguf_kv::*;
pub use guard::{guard, guard_value, Status};
pub use options::*;
pub use scope::*;
pub use status::*;
pub use tensor::*;
pub use version::*;
