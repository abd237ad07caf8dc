//! The one multiply-accumulate vocabulary of the SIMD kernels: how an ISA adds u8 x i8
//! products into int32 lanes, of two vectors ([`Mac`], the GEMVs) or of a vector and one
//! activation quad broadcast to every lane ([`QuadMac`], the panel GEMMs).

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

    /// `acc` plus one dot product, for a loop whose partial would take just this one.
    ///
    /// # Safety
    /// As for [`Mac::start`].
    #[inline(always)]
    unsafe fn dot_once(acc: V, u: V, s: V) -> V {
        // SAFETY: the caller's features.
        unsafe { Self::end(Self::dot(Self::start(acc), u, s), acc) }
    }

    /// The int32 lane of `end`'s result that byte `byte` of `dot`'s operands adds to, for
    /// the per-lane seeds (`prep::lane_sums`). Dot-product instructions add bytes
    /// `4i..4i + 4` to lane `i`.
    fn lane(byte: usize) -> usize {
        byte / 4
    }
}

/// How an ISA's panel GEMM adds the products of a vector of weight codes (four per int32
/// lane, at most 3) with one activation quad broadcast to every lane into int32 lanes:
/// through partial accumulators, as [`Mac`]. `A` holds a group of four quads as the dot
/// product takes them: their address where the ISA broadcasts from memory (x86, wasm), or a
/// register where it takes a quad from one of its lanes (NEON's `sdot` by element).
///
/// # Safety
/// Every method needs the CPU features of its ISA.
pub(crate) trait QuadMac<V: Copy, A: Copy>: 'static {
    /// A partial accumulator of broadcast products.
    type Q: Copy;
    /// Groups of four quads a partial accumulator takes before it must be folded into int32;
    /// `usize::MAX` for int32 partials.
    const Q_GROUPS: usize;

    /// Starts a partial accumulator on top of `acc`.
    ///
    /// # Safety
    /// The CPU must have the ISA's features (as for every method here).
    unsafe fn q_start(acc: V) -> Self::Q;

    /// `q` plus, per int32 lane, the dot product of the lane's four u8 of `w` with quad `L`
    /// (0..4) of `a` (the same for every lane).
    ///
    /// # Safety
    /// As for [`QuadMac::q_start`]; an address `a` has 16 readable bytes.
    unsafe fn q_dot<const L: i32>(q: Self::Q, w: V, a: A) -> Self::Q;

    /// Folds `q` into the `acc` it was started on.
    ///
    /// # Safety
    /// As for [`QuadMac::q_start`].
    unsafe fn q_end(q: Self::Q, acc: V) -> V;
}
