//! x86_64 kernels, chosen at run time: AVX-512 VNNI, then AVX2. Each ISA supplies vector
//! operations ([`crate::kernel::tile::Simd`]); the loops are the shared skeleton's.

mod avx2;
mod avx512vnni;
mod gemm;
mod requant;

use crate::kernel::Kernel;
use std::arch::x86_64::*;

/// A block scale stored as f16, converted by F16C (part of every x86 kernel's features).
///
/// # Safety
/// The CPU must have F16C; `p` must have 2 readable bytes.
#[inline(always)]
unsafe fn f16c(p: *const u8) -> f32 {
    // SAFETY: 2 readable bytes at `p` and F16C, as the caller guarantees.
    unsafe {
        let bits = u16::from_le_bytes([*p, *p.add(1)]);
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
    }
}

/// The registry entries of one ISA for TQ1_0, TQ2_0 and BITNET_B1_58: entry points that
/// check the CPU once per call, then run the skeleton inside `#[target_feature]` functions
/// so that it compiles to the ISA's instructions. `R1` rows per single-token tile, `RB x TB`
/// per batch tile.
macro_rules! isa_kernels {
    ($isa:ty, $name:literal, $features:literal, $r1:literal, $rb:literal, $tb:literal) => {
        pub(super) fn kernels() -> [crate::kernel::Kernel; 3] {
            use crate::format::Format;
            use crate::kernel::tile::{self, Prepared, Tq1, Tq2};
            use crate::kernel::{Kernel, MatRef, OutTile, Prep};

            #[target_feature(enable = $features)]
            fn prepare_tq1(a: &MatRef) -> Prepared {
                tile::prepare_tq::<$isa, Tq1>(a)
            }
            #[target_feature(enable = $features)]
            fn prepare_tq2(a: &MatRef) -> Prepared {
                tile::prepare_tq::<$isa, Tq2>(a)
            }
            #[target_feature(enable = $features)]
            fn prepare_bitnet(a: &MatRef) -> Prepared {
                tile::prepare_bitnet::<$isa>(a)
            }
            #[target_feature(enable = $features)]
            fn run_tq1(w: &MatRef, a: &Prepared, out: &mut OutTile) {
                // SAFETY: features enabled here; `Kernel::run_prepared` checked the shapes
                // and that `a` is this entry's own preparation.
                unsafe { tile::tq::<$isa, Tq1, $r1, $rb, $tb>(w, a, out) }
            }
            #[target_feature(enable = $features)]
            fn run_tq2(w: &MatRef, a: &Prepared, out: &mut OutTile) {
                // SAFETY: as in `run_tq1`.
                unsafe { tile::tq::<$isa, Tq2, $r1, $rb, $tb>(w, a, out) }
            }
            #[target_feature(enable = $features)]
            fn run_bitnet(w: &MatRef, a: &Prepared, out: &mut OutTile) {
                // SAFETY: as in `run_tq1`.
                unsafe { tile::bitnet::<$isa, $r1, $rb, $tb>(w, a, out) }
            }

            fn cpu() {
                assert!(available(), "{:?} needs {FEATURES}", $name);
            }

            fn entry(
                weight: Format,
                prepare: crate::kernel::PrepareFn,
                run: crate::kernel::KernelFn,
            ) -> crate::kernel::Kernel {
                // Row blocks of whole panels keep each thread's panel walk intact; token
                // blocks of whole batch tiles keep the batch tiles full.
                let geometry = crate::kernel::Geometry { rows: tile::PANEL, tokens: $tb };
                Kernel {
                    name: $name,
                    weight,
                    act: Format::I8Absmax,
                    requires: FEATURES,
                    available,
                    min_tokens: 1,
                    geometry,
                    prepare,
                    run,
                }
            }

            [
                entry(
                    Format::Tq1_0,
                    |a| {
                        cpu();
                        // SAFETY: the CPU has the features (checked above).
                        Prep::Tile(unsafe { prepare_tq1(a) })
                    },
                    |w, a, out| {
                        cpu();
                        // SAFETY: as above.
                        unsafe { run_tq1(w, a.tile(), out) }
                    },
                ),
                entry(
                    Format::Tq2_0,
                    |a| {
                        cpu();
                        // SAFETY: the CPU has the features (checked above).
                        Prep::Tile(unsafe { prepare_tq2(a) })
                    },
                    |w, a, out| {
                        cpu();
                        // SAFETY: as above.
                        unsafe { run_tq2(w, a.tile(), out) }
                    },
                ),
                entry(
                    Format::BitnetB158,
                    |a| {
                        cpu();
                        // SAFETY: the CPU has the features (checked above).
                        Prep::Tile(unsafe { prepare_bitnet(a) })
                    },
                    |w, a, out| {
                        cpu();
                        // SAFETY: as above.
                        unsafe { run_bitnet(w, a.tile(), out) }
                    },
                ),
            ]
        }
    };
}
use isa_kernels;

/// Best first: AVX-512 VNNI, then AVX2; within an ISA the GEMM first, preferred from its
/// `min_tokens` on.
pub(crate) fn kernels() -> Vec<Kernel> {
    let avx512 = avx512vnni::gemm_kernels().into_iter().chain(avx512vnni::kernels());
    avx512.chain(avx2::gemm_kernels()).chain(avx2::kernels()).collect()
}

/// The AVX2 requantizer when this CPU has AVX2 (the division, not the width, bounds it).
pub(crate) fn requant_row() -> Option<crate::kernel::RequantRowFn> {
    requant::available().then_some(requant::requant_row as crate::kernel::RequantRowFn)
}
