//! wasm32 kernels. WebAssembly has no run-time feature detection: the build decides. With
//! `-C target-feature=+simd128` this registers `bitnet_gemv/wasm-simd128`; with
//! `+simd128,+relaxed-simd` also `bitnet_gemv/wasm-relaxed-simd128`, first. Without simd128
//! only the reference kernels exist. An engine without a feature refuses to compile a
//! module that uses it, so a running module has what its kernels need (`available` is
//! always true), and a JS loader picks the best build the engine validates (js/src).
//!
//! Both kernels are the shared skeleton ([`crate::kernel::tile`]) over [`simd128::Wasm`];
//! they differ only in the multiply-accumulate ([`simd128::Dot`]).

#[cfg(target_feature = "simd128")]
mod requant;
#[cfg(target_feature = "simd128")]
mod simd128;

use crate::kernel::Kernel;

pub(crate) fn kernels() -> Vec<Kernel> {
    #[allow(unused_mut)]
    let mut all = Vec::new();
    // Tiles: 2 rows for one token, 2 x 2 for batches, as AVX2 (engines map v128 onto the 16
    // xmm registers, and the plain build keeps two partial sums per (row, token)); 4 rows
    // for one token measured no better (TQ2_0 2560x2560 under node 22, within the noise).
    #[cfg(target_feature = "relaxed-simd")]
    all.extend(family::<simd128::Wasm<simd128::RelaxedDot>, 2, 2, 2>(
        c"bitnet_gemv/wasm-relaxed-simd128",
        "simd128, relaxed-simd",
    ));
    #[cfg(target_feature = "simd128")]
    all.extend(family::<simd128::Wasm<simd128::Widening>, 2, 2, 2>(c"bitnet_gemv/wasm-simd128", "simd128"));
    all
}

/// The SIMD128 requantizer when the build has simd128.
pub(crate) fn requant_row() -> Option<crate::kernel::RequantRowFn> {
    #[cfg(target_feature = "simd128")]
    return Some(requant::requant_row);
    #[cfg(not(target_feature = "simd128"))]
    None
}

/// The registry entries of one SIMD128 ISA for TQ1_0, TQ2_0 and BITNET_B1_58: `R1` rows per
/// single-token tile, `RB x TB` per batch tile.
#[cfg(target_feature = "simd128")]
fn family<S: crate::kernel::tile::Simd + 'static, const R1: usize, const RB: usize, const TB: usize>(
    name: &'static std::ffi::CStr,
    requires: &'static str,
) -> [Kernel; 3] {
    use crate::format::Format;
    use crate::kernel::tile::{self, Tq, Tq1, Tq2};
    use crate::kernel::{always, Geometry, KernelFn, MatRef, OutTile, Prep, PrepareFn};

    fn prepare_tq<S: tile::Simd, L: Tq>(a: &MatRef) -> Prep<'static> {
        Prep::Tile(tile::prepare_tq::<S, L>(a))
    }
    fn prepare_bitnet<S: tile::Simd>(a: &MatRef) -> Prep<'static> {
        Prep::Tile(tile::prepare_bitnet::<S>(a))
    }
    fn run_tq<S: tile::Simd, L: Tq, const R1: usize, const RB: usize, const TB: usize>(
        w: &MatRef,
        a: &Prep,
        out: &mut OutTile,
    ) {
        // SAFETY: the whole build has simd128 (this code exists only then); `Kernel::run_prepared`
        // checked the shapes and that `a` is this entry's own preparation.
        unsafe { tile::tq::<S, L, R1, RB, TB>(w, a.tile(), out) }
    }
    fn run_bitnet<S: tile::Simd, const R1: usize, const RB: usize, const TB: usize>(
        w: &MatRef,
        a: &Prep,
        out: &mut OutTile,
    ) {
        // SAFETY: as in `run_tq`.
        unsafe { tile::bitnet::<S, R1, RB, TB>(w, a.tile(), out) }
    }

    let entry = |weight, prepare: PrepareFn, run: KernelFn| Kernel {
        name,
        weight,
        act: Format::I8Absmax,
        requires,
        available: always,
        min_tokens: 1,
        // Row blocks of whole panels, token blocks of whole batch tiles.
        geometry: Geometry { rows: tile::PANEL, tokens: TB },
        prepare,
        run,
    };
    [
        entry(Format::Tq1_0, prepare_tq::<S, Tq1>, run_tq::<S, Tq1, R1, RB, TB>),
        entry(Format::Tq2_0, prepare_tq::<S, Tq2>, run_tq::<S, Tq2, R1, RB, TB>),
        entry(Format::BitnetB158, prepare_bitnet::<S>, run_bitnet::<S, R1, RB, TB>),
    ]
}
