//! Gives the Linux shared library an ABI-versioned soname, `libtern.so.<major>`, so that
//! programs record the major version they were linked against and a packager can install
//! several majors side by side (CMake adds the matching file names and symlinks).
use std::env;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // The target's OS, not the host's: this also runs when cross-compiling.
    if env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        let major = env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets CARGO_PKG_VERSION_MAJOR");
        // After rustc's own `-soname=libtern.so` on the command line, so the linker keeps this one.
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtern.so.{major}");
    }
}
