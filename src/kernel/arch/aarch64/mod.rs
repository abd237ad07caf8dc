//! aarch64 kernels, chosen at run time: NEON with dotprod (`sdot`), then plain NEON.
//!
//! - [`unpack`]: each format's bytes -> 16-lane vectors of biased codes {0, 1, 2} (3 for a
//!   corrupt TQ2_0/BitNet code, which then counts as +2 like everywhere else).
//! - [`act`]: per-call activation preparation (per-block sums, BitNet's permuted copy).
//! - [`gemv`]: the row loops, generic over a multiply-accumulate ([`gemv::Mac`]).
//! - [`neon`] (`smull`/`smlal` into i16) and [`dotprod`] (`sdot` into i32) provide the
//!   multiply-accumulates and instantiate the loops under their own symbols.
//! - [`requant`]: the NEON I8_ABSMAX row requantizer for the activation adapter.

mod act;
mod dotprod;
mod gemv;
mod neon;
mod requant;
mod unpack;

use crate::format::Format;
use crate::kernel::{raw, Geometry, Kernel, KernelFn, RequantRowFn};
use std::ffi::CStr;

/// One instruction path: its kernel name, the features it needs, and its kernels for
/// TQ1_0, TQ2_0 and BITNET_B1_58.
struct Path {
    name: &'static CStr,
    requires: &'static str,
    available: fn() -> bool,
    runs: [KernelFn; 3],
}

pub(crate) fn kernels() -> Vec<Kernel> {
    let paths = [
        Path {
            name: c"bitnet_gemv/neon-dotprod",
            requires: "neon,dotprod",
            available: dotprod::available,
            runs: [dotprod::tq1_0, dotprod::tq2_0, dotprod::bitnet],
        },
        Path {
            name: c"bitnet_gemv/neon",
            requires: "neon",
            available: neon::available,
            runs: [neon::tq1_0, neon::tq2_0, neon::bitnet],
        },
    ];
    let formats = [Format::Tq1_0, Format::Tq2_0, Format::BitnetB158];
    paths
        .into_iter()
        .flat_map(|p| {
            formats.into_iter().zip(p.runs).map(move |(weight, run)| Kernel {
                name: p.name,
                weight,
                act: Format::I8Absmax,
                requires: p.requires,
                available: p.available,
                min_tokens: 1,
                geometry: Geometry { rows: 16, tokens: 1 },
                prepare: raw,
                run,
            })
        })
        .collect()
}

pub(crate) fn requant_row() -> Option<RequantRowFn> {
    Some(requant::encode_row)
}
