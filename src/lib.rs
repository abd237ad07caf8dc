//! tern: ternary (1.58-bit) LLM weight formats and kernels, with a C ABI.
//!
//! - [`format`]: the byte layouts (TQ1_0, TQ2_0, BITNET_B1_58, I8_ABSMAX, F32).
//! - [`tensor`]: views over borrowed, owned or scope-allocated bytes.
//! - `ffi`: the C ABI (`include/tern.h`), the only home of raw pointers.

pub mod error;
pub mod ffi;
pub mod format;
pub mod kernel;
pub mod scope;
pub mod tensor;



pub use error::{Error, Result};
pub use format::Format;
pub use tensor::Tensor;
