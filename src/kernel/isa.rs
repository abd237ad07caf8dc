//! The CPU feature sets SIMD kernels are compiled for ([`Isa`]), and the ways into them
//! ([`Isa::enter`] for any work, [`Isa::run`] for a kernel's product).

use crate::kernel::{MatRef, OutTile};

/// A CPU feature set, implemented by each ISA's vector type.
pub(crate) trait Isa: 'static {
    /// The features, for humans (e.g. "avx2, fma, f16c").
    const FEATURES: &'static str;

    /// Whether this CPU has the features.
    fn available() -> bool;

    /// Runs `job` compiled with the features. An implementation is one generic
    /// `#[target_feature]` function that calls [`Job::run`], which is `#[inline(always)]`:
    /// the job's loops are compiled into that function with the ISA's instructions. (A
    /// closure would be compiled without the features.)
    ///
    /// # Safety
    /// The CPU must have the features.
    unsafe fn enter<J: Job>(job: J) -> J::Out;

    /// Runs the kernel product `P` compiled with the features, as [`Isa::enter`] does, with
    /// the operands as the `#[target_feature]` function's own parameters: references given
    /// as parameters tell LLVM that they alias nothing for the whole call (references read
    /// from a job struct would not), which keeps the tile loops' loads hoisted (a job struct
    /// cost the aarch64 GEMVs 6-19 instructions per 1,000 MACs).
    ///
    /// # Safety
    /// The CPU must have the features; `Kernel::run_prepared` checked the operands.
    unsafe fn run<P: Product>(w: &MatRef, act: &P::Act, out: &mut OutTile);
}

/// A kernel's product, to compile inside an [`Isa`]'s features through [`Isa::run`].
pub(crate) trait Product {
    /// Its prepared activations.
    type Act;

    /// `out[t][r] = sum_k act[t][k] * w[r][k]` for the block of `out`. Implementations are
    /// `#[inline(always)]`, so that they compile inside [`Isa::run`].
    ///
    /// # Safety
    /// The CPU must have the ISA's features; the operands were checked by
    /// `Kernel::run_prepared` and `act` is this kernel's own preparation.
    unsafe fn product(w: &MatRef, act: &Self::Act, out: &mut OutTile);
}

/// Work to compile inside an [`Isa`]'s features.
pub(crate) trait Job {
    type Out;

    /// Implementations are `#[inline(always)]`, so that they compile inside
    /// [`Isa::enter`].
    ///
    /// # Safety
    /// The CPU must have the features of the ISA whose operations the job uses.
    unsafe fn run(self) -> Self::Out;
}

/// Asserts that this CPU has `I`'s features: every kernel entry checks before it enters.
pub(crate) fn check<I: Isa>() {
    assert!(I::available(), "this kernel needs {}", I::FEATURES);
}

/// [`Isa::enter`] and [`Isa::run`] for the `#[target_feature]` list `$features`.
macro_rules! enter {
    ($features:literal) => {
        #[inline(always)]
        unsafe fn run<P: crate::kernel::isa::Product>(
            w: &crate::kernel::MatRef,
            act: &P::Act,
            out: &mut crate::kernel::OutTile,
        ) {
            #[target_feature(enable = $features)]
            unsafe fn with_features<P: crate::kernel::isa::Product>(
                w: &crate::kernel::MatRef,
                act: &P::Act,
                out: &mut crate::kernel::OutTile,
            ) {
                // SAFETY: the features are enabled here, as the caller of `run` guarantees;
                // the operands are its.
                unsafe { P::product(w, act, out) }
            }
            // SAFETY: the caller guarantees the features and the operands.
            unsafe { with_features::<P>(w, act, out) }
        }

        #[inline(always)]
        unsafe fn enter<J: crate::kernel::isa::Job>(job: J) -> J::Out {
            // Its own function: a job's constants stay out of its caller's register
            // allocation.
            #[inline(never)]
            #[target_feature(enable = $features)]
            unsafe fn with_features<J: crate::kernel::isa::Job>(job: J) -> J::Out {
                // SAFETY: the features are enabled here, as the caller of `enter` guarantees.
                unsafe { job.run() }
            }
            // SAFETY: the caller guarantees the features.
            unsafe { with_features(job) }
        }
    };
}
pub(crate) use enter;
