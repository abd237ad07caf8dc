//! The library version, as macros in the header and as functions for the linked library.
//!
//! The numbers are literals because cbindgen copies them into `include/tern.h` (where
//! `TERN_VERSION_STRING` is built from them, see cbindgen.toml);
//! `tests/suite/header.rs` checks them (and the functions) against Cargo.toml's version.

use super::guard::guard_value;
use std::ffi::c_char;

/// Major version of the header (and of the library it was generated from).
pub const TERN_VERSION_MAJOR: u32 = 0;
/// Minor version of the header.
pub const TERN_VERSION_MINOR: u32 = 3;
/// Patch version of the header.
pub const TERN_VERSION_PATCH: u32 = 0;
const VERSION_CSTR: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

/// The linked library's version, encoded as `MAJOR << 16 | MINOR << 8 | PATCH` (each
/// part stays below 256), so that versions compare as integers. Compare it with the header's
/// `TERN_VERSION_MAJOR`/`_MINOR`/`_PATCH` to detect a header/library mismatch.
/// Thread-safe.
#[no_mangle]
pub extern "C" fn tern_version() -> u32 {
    guard_value(0, || {
        let part = |s: &str| s.parse::<u32>().unwrap_or(0);
        part(env!("CARGO_PKG_VERSION_MAJOR")) << 16
            | part(env!("CARGO_PKG_VERSION_MINOR")) << 8
            | part(env!("CARGO_PKG_VERSION_PATCH"))
    })
}

/// The linked library's version as a static NUL-terminated string, "MAJOR.MINOR.PATCH".
/// Never NULL; must not be freed. Thread-safe.
#[no_mangle]
pub extern "C" fn tern_version_string() -> *const c_char {
    let version = VERSION_CSTR.as_ptr().cast();
    guard_value(version, || version)
}
