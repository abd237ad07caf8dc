//! Gives the Linux shared library an ABI-versioned soname, so that programs record the ABI
//! they were linked against and a packager can install several side by side (CMake adds
//! the matching file names and symlinks): `libtern.so.<major>` from 1.0 on, and
//! `libtern.so.0.<minor>` before, where every minor version may break the ABI (0.2 did).
use std::env;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // The target's OS, not the host's: this also runs when cross-compiling.
    if env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        let major = env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets CARGO_PKG_VERSION_MAJOR");
        let minor = env::var("CARGO_PKG_VERSION_MINOR").expect("cargo sets CARGO_PKG_VERSION_MINOR");
        let abi = if major == "0" { format!("0.{minor}") } else { major };
        // After rustc's own `-soname=libtern.so` on the command line, so the linker keeps this one.
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtern.so.{abi}");
    }
}
