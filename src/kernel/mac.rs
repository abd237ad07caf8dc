//! The one multiply-accumulate vocabulary of the SIMD kernels: how an ISA adds u8 x i8
//! products into int32 lanes.

/// How an ISA adds u8 x i8 products of vectors `V` into int32 lanes: through partial
/// accumulators that are started on an int32 accumulator, take dot products, and are
/// folded back into it (`vpdpbusd`, `sdot` and relaxed SIMD's dot add to int32 lanes
/// directly; `vpmaddubsw` and `smlal` keep int16 partial sums, which must be folded before
/// they can overflow).
///
/// A partial accumulator of the GEMV takes at most 16 dots of codes <= 3 (one TQ block:
/// `256 / W` loads of four planes, or TQ1_0's digits) or 8 of codes <= 12 (BitNet's odd
/// planes, 4 chunks) before `end`: at two products of |a| <= 128 per int16 lane and dot
/// (`smlal`, `vpmaddubsw`), |lane| <= 16 * 2 * 3 * 128 or 8 * 2 * 12 * 128 = 24,576 < 2^15.
///
/// # Safety
/// Every method but `lane` needs the CPU features of its ISA.
pub(crate) trait Mac<V: Copy>: 'static {
    /// A partial accumulator.
    type P: Copy;
    /// Groups of four dots of codes <= 3 (one per quad of the panel GEMM) a partial
    /// accumulator takes before it must be folded; `usize::MAX` for int32 partials.
    const GROUPS: usize;

    /// Starts partial dot products on top of `acc`.
    ///
    /// # Safety
    /// The CPU must have the ISA's features (as for every method here).
    unsafe fn start(acc: V) -> Self::P;

    /// `p` plus, per int32 lane, the products of its four u8 of `u` with the four i8 of `s`.
    ///
    /// # Safety
    /// As for [`Mac::start`].
    unsafe fn dot(p: Self::P, u: V, s: V) -> Self::P;

    /// Folds `p` back into the int32 accumulator `acc` given to [`Mac::start`].
    ///
    /// # Safety
    /// As for [`Mac::start`].
    unsafe fn end(p: Self::P, acc: V) -> V;

    /// The int32 lane of `end`'s result that byte `byte` of `dot`'s operands adds to, for
    /// the per-lane seeds (`prep::lane_sums`). Dot-product instructions add bytes
    /// `4i..4i + 4` to lane `i`.
    fn lane(byte: usize) -> usize {
        byte / 4
    }
}
