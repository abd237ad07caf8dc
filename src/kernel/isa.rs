//! The CPU feature sets SIMD kernels are compiled for ([`Isa`]), and the one way into
//! them ([`Isa::enter`]).

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

/// [`Isa::enter`] for the `#[target_feature]` list `$features`.
macro_rules! enter {
    ($features:literal) => {
        #[inline(always)]
        unsafe fn enter<J: crate::kernel::isa::Job>(job: J) -> J::Out {
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
