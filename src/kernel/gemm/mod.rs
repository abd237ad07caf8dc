//! The batched path (`bitnet_gemm/<isa>`): a register-blocked int8 GEMM over weights
//! unpacked once per row panel. An ISA supplies its vector operations through
//! [`GemmSimd`] and its register tile through [`MicroTile`]; the panel packing, the
//! activation packing, the loops and the scaling are shared. Every ISA with a 4-byte dot
//! product with one operand broadcast is its own micro-tile (x86 `vpdpbusd` and
//! `vpmaddubsw`; aarch64 `sdot` by element, and plain NEON's `smlal` of a broadcast quad;
//! wasm's relaxed int16 dot or widening `dot_i16x8` of a `load32_splat` quad); aarch64's
//! `usmmla` (2 x 8 by 8 x 2) is a micro-tile over NEON's vectors, with its own panel
//! layout, token padding and lane order ([`MicroTile`]). AMX packs its panels here
//! too ([`pack_panel`], [`Packed`], [`Scratch`]) with its own loop nest: its tiles live in
//! tile registers and memory, not in vectors.
//!
//! Layouts. A panel of `P = RV * LANES` weight rows is unpacked into biased codes
//! `[k/4][P][4]` (u8 in {0, 1, 2}; a corrupt 3 stays 3 and counts as +2): one vector holds
//! four consecutive codes of `LANES` rows, so one dot-product instruction with a broadcast
//! 4-byte activation operand feeds `LANES` rows. The activations are packed once per call
//! ([`Packed`], in `Kernel::prepare`, so every task of a split call shares them) in blocks
//! of `T` tokens, `[k/16][T][16]`: one 16-byte load gives four quads of one token, which
//! an ISA can broadcast from memory (x86) or from a register lane (ARM `sdot` by element).
//!
//! Arithmetic. `sum a*t = sum a*code - sum a`: every accumulator starts from `-sum a` of
//! its token (per 256-element block for TQ1_0/TQ2_0, per row otherwise), broadcast to every
//! lane, so each int32 lane holds the exact trit dot product of one row. TQ blocks end with
//! one convert + FMA by the rows' block scales; BITNET_B1_58 (one scale per tensor) keeps
//! int32 along the whole row and scales once, exactly as the reference does; so does a TQ
//! tensor whose block scales are all equal (`MatRef::uniform_scale`). int32 along a row
//! holds `|sum| <= 3 * 128 * k` for k up to about 5.5 million.
//!
//! Cost (one thread, m = 128, 2560x2560, AVX-512 VNNI): on AMD EPYC Zen 4 (one 512-bit
//! `vpdpbusd` per cycle) 87-90% of the same-run `vpdpbusd zmm` peak for every format, the
//! panel unpack about 0.1 cycle per weight, which sets the `min_tokens` thresholds. On an
//! Intel Xeon (Emerald Rapids, two per cycle) a weight's dot products take half the
//! cycles, and the unpack about 0.2 cycle per weight, half of it store misses (the panel
//! lives in L2): 13-16 points of the peak; the tiles alone reach 78-87%.
//!
//! The panel buffers are per thread and reused ([`SCRATCH`]): no allocation per call once
//! a thread has seen its largest shape.
//!
//! Files: [`simd`] (what an ISA supplies), [`micro`] (the register tile), [`layout`]
//! (what the GEMM needs of a weight format; each format implements it in
//! `kernel/weights/`), [`pack`] (panels and packed activations), [`loops`] (the loop nest
//! and the scaling), and here the kernel type and its registration.

pub(crate) mod layout;
mod loops;
pub(crate) mod micro;
pub(crate) mod pack;
mod simd;

pub(crate) use layout::{expand_bytes, expand_planes, Layout, QuadSink};
pub(crate) use loops::gemm;
pub(crate) use micro::MicroTile;
pub(crate) use pack::Packed;
pub(crate) use simd::GemmSimd;

use crate::format::Format;
use crate::kernel::isa::{check, Product};
use crate::kernel::weights::{Bitnet, I2s128, I2s64, I2sR4, Tq1, Tq2, Q2};
use crate::kernel::{Compute, Geometry, Kernel, MatRef, OutTile};
use std::marker::PhantomData;

/// The panel GEMM of format `L` over ISA `S`'s vectors with the micro-tile `K`: panels of
/// `RV` vectors, token blocks of `T`.
pub(crate) struct Gemm<S, K, L, const RV: usize, const T: usize>(PhantomData<Types<S, K, L>>);

/// What [`Gemm`] is made of, as a type that owns none of it.
pub(super) type Types<S, K, L> = fn() -> (S, K, L);

impl<S, K, L, const RV: usize, const T: usize> Gemm<S, K, L, RV, T> {
    pub(crate) const NEW: Self = Gemm(PhantomData);
}

impl<S: GemmSimd, K: MicroTile<S>, L: Layout, const RV: usize, const T: usize> Product for Gemm<S, K, L, RV, T> {
    type Act = Packed;

    #[inline(always)]
    unsafe fn product(w: &MatRef, act: &Packed, out: &mut OutTile) {
        // SAFETY: the caller has `K`'s features and checked the operands; the activations
        // are this kernel's own packing (`K`'s, token blocks of `T`).
        unsafe { gemm::<S, K, L, RV, T>(w, act, out) }
    }
}

impl<S: GemmSimd, K: MicroTile<S>, L: Layout, const RV: usize, const T: usize> Compute for Gemm<S, K, L, RV, T> {
    type Act = Packed;
    const REQUIRES: &'static str = K::FEATURES;
    // Row blocks of whole panels, token blocks of whole register blocks (which are the
    // packed blocks).
    const GEOMETRY: Geometry = Geometry { rows: RV * S::LANES, tokens: T };

    fn available() -> bool {
        K::available()
    }

    fn prepare(&self, a: &MatRef) -> Packed {
        // Seeds per weight block, or per the activation's scale block where it has its own
        // (I8_BLOCK32 with Q2_0: halves of the weight's blocks).
        let block = match a.format {
            Format::I8Absmax => L::BLOCK,
            act => act.i8_scale_block(a.cols).expect("an int8 activation format"),
        };
        K::pack(a, T, block)
    }

    fn run(&self, w: &MatRef, _a: &MatRef, act: &Packed, out: &mut OutTile) {
        check::<K>();
        // SAFETY: the CPU has the features (checked above).
        unsafe { K::run::<Self>(w, act, out) }
    }
}

/// The registry entries `name` (`bitnet_gemm/<isa>`) of the micro-tile `K` over ISA `S`'s
/// vectors for each (weight format, `min_tokens`) of `formats`, by I8_ABSMAX and by the
/// format's accurate activation format (`Format::accurate_activation`: I8_BLOCK256 for
/// TQ1_0 and TQ2_0, I8_BLOCK32 for Q2_0, with the same threshold): panels of `RV` vectors,
/// token blocks of `T`; preferred from `min_tokens` tokens on (measured against the kernel
/// the dispatcher would pick otherwise, by I8_ABSMAX).
pub(crate) fn kernels<S: GemmSimd, K: MicroTile<S>, const RV: usize, const T: usize>(
    name: &'static std::ffi::CStr,
    formats: &[(Format, usize)],
) -> Vec<Kernel> {
    let mut all = Vec::new();
    for &(format, min) in formats {
        for act in [Some(Format::I8Absmax), format.accurate_activation()].into_iter().flatten() {
            all.push(match format {
                Format::Tq1_0 => Kernel::new(name, format, act, min, &Gemm::<S, K, Tq1, RV, T>::NEW),
                Format::Tq2_0 => Kernel::new(name, format, act, min, &Gemm::<S, K, Tq2, RV, T>::NEW),
                Format::BitnetB158 => Kernel::new(name, format, act, min, &Gemm::<S, K, Bitnet, RV, T>::NEW),
                Format::Q2_0 => Kernel::new(name, format, act, min, &Gemm::<S, K, Q2, RV, T>::NEW),
                Format::I2S => Kernel::new(name, format, act, min, &Gemm::<S, K, I2s128, RV, T>::NEW),
                Format::I2S64 => Kernel::new(name, format, act, min, &Gemm::<S, K, I2s64, RV, T>::NEW),
                Format::I2SR4 => Kernel::new(name, format, act, min, &Gemm::<S, K, I2sR4, RV, T>::NEW),
                _ => panic!("no panel GEMM for {format}"),
            });
        }
    }
    all
}
