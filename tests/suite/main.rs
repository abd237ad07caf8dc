//! The integration tests of tern's public API, Rust and C ABI, as one crate (one link, not
//! one per file). Separate crates remain where a test needs a process or a build of its own:
//! `env.rs` sets environment variables tern reads once per process, `ffi_gguf.rs` installs a
//! counting global allocator, `panic_probe.rs` needs the `panic-probe` feature, and
//! `concurrency.rs` runs alone under ThreadSanitizer.

mod accurate;
mod canary;
mod common;
mod dispatch;
mod ffi;
mod ffi_engine;
mod ffi_guard;
mod formats;
mod gguf;
mod kernels;
mod prep;
