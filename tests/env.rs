//! `TERN_KERNEL` read by the dispatcher. One test in its own process: the variable is
//! process-wide, and other test binaries create dispatchers that read it.

use std::ffi::CStr;
use std::ptr::{null, null_mut};
use tern::ffi::*;

#[test]
fn a_typo_in_tern_kernel_names_the_variable_and_the_value_unless_ignored() {
    // SAFETY: this binary has no other test, so no thread reads the environment meanwhile.
    unsafe { std::env::set_var("TERN_KERNEL", "bitnet_gemv/avx3") };
    let mut d = null_mut();
    // SAFETY: NULL options and a writable out-parameter.
    assert_eq!(unsafe { tern_dispatcher_new(null(), &mut d) }, TERN_ERR_UNKNOWN_KERNEL);
    assert!(d.is_null());
    // SAFETY: tern_last_error returns a NUL-terminated string.
    let message = unsafe { CStr::from_ptr(tern_last_error()) }.to_str().unwrap();
    assert_eq!(message, "no kernel named \"bitnet_gemv/avx3\" (from the environment variable TERN_KERNEL)");

    // An engine that opts out of the variable is not affected by it.
    let options = tern_dispatcher_options { flags: TERN_DISPATCH_IGNORE_ENV, ..Default::default() };
    // SAFETY: options with struct_size set and a writable out-parameter.
    assert_eq!(unsafe { tern_dispatcher_new(&options, &mut d) }, TERN_OK);
    // SAFETY: freed once.
    unsafe { tern_dispatcher_free(d) };
}
