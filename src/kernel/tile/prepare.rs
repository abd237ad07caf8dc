//! Activation preparation: int8 activations placed in each format's unpack order, with the
//! per-lane sums the biased codes need, laid out once per call for every tile to read.

use super::layout::{OneScale, Tq};
use super::simd::Simd;
use crate::format::Format;
use crate::kernel::mac::Mac;
use crate::kernel::{prep, ActI8, MatRef};
use std::any::TypeId;
use std::borrow::Cow;
use std::ops::Range;
use std::sync::{Mutex, PoisonError};

/// Activations of every token, permuted into a kernel's unpack order (`stride` bytes per
/// token, zero in padding lanes), with the negated lane sums of every block (the
/// accumulators' starting values) and the scales.
pub(crate) struct Prepared {
    codes: Vec<i8>,
    pub(super) stride: usize,
    /// `W / 4` int32 lanes per (token, block), one vector's worth: see [`prep::lane_sums`].
    seeds: Vec<i32>,
    /// Per token, the sum of its seeds: minus the sum of all its codes.
    token_seeds_sum: Vec<i32>,
    pub(super) blocks: usize,
    lanes: usize,
    /// One per token (I8_ABSMAX), or one per (token, block) (I8_BLOCK256, I8_BLOCK32:
    /// `per_block`).
    scales: Vec<f32>,
    per_block: bool,
    /// Elements per scale.
    scale_block: usize,
}

impl Prepared {
    /// Places every token's codes in the unpack order of `layout` (read `vector` bytes at a
    /// time) and, given the ISA's [`Mac::lane`], sums them per block and lane (kernels that
    /// unpack weights to signed trits need no sums).
    fn new(a: &MatRef, vector: usize, lane: Option<fn(usize) -> usize>, layout: &Layout) -> Prepared {
        let act = ActI8::parse(a);
        let Layout { block, stride, period, period_slots, ref placement } = *layout;
        let placement: &prep::Placement = placement;
        let blocks = act.k.div_ceil(block);
        let mut codes = vec![0i8; act.m * stride];
        let lanes = vector / 4;
        let mut seeds = vec![0i32; if lane.is_some() { act.m * blocks * lanes } else { 0 }];
        for (t, out) in codes.chunks_exact_mut(stride).enumerate() {
            for (p, src) in act.row(t).chunks(period).enumerate() {
                placement.scatter(src, &mut out[p * period_slots..]);
            }
            if let Some(lane) = lane {
                let token_seeds = &mut seeds[t * blocks * lanes..(t + 1) * blocks * lanes];
                for (region, sums) in out.chunks_exact(stride / blocks).zip(token_seeds.chunks_exact_mut(lanes)) {
                    prep::lane_sums(region, sums, lane);
                }
            }
        }
        seeds.iter_mut().for_each(|s| *s = -*s);
        let per_token = blocks * lanes;
        let token_seeds_sum = match lane {
            Some(_) => (0..act.m).map(|t| seeds[t * per_token..(t + 1) * per_token].iter().sum()).collect(),
            None => Vec::new(),
        };
        let per_block = a.format != Format::I8Absmax;
        Prepared {
            codes,
            stride,
            seeds,
            token_seeds_sum,
            blocks,
            lanes,
            scales: act.scales,
            per_block,
            scale_block: act.block,
        }
    }

    /// The codes of `tokens` in the unpack order (`stride` bytes per token, zero in padding
    /// slots).
    pub(crate) fn tokens(&self, tokens: Range<usize>) -> &[i8] {
        &self.codes[tokens.start * self.stride..tokens.end * self.stride]
    }

    /// Bytes per token in [`Prepared::tokens`].
    pub(crate) fn stride(&self) -> usize {
        self.stride
    }

    /// The activation rows' scales: one per token, or with [`Prepared::per_block`] one per
    /// (token, block), token-major.
    pub(crate) fn scales(&self) -> &[f32] {
        &self.scales
    }

    /// Whether the activations have one scale per (token, block) (I8_BLOCK256, I8_BLOCK32).
    pub(crate) fn per_block(&self) -> bool {
        self.per_block
    }

    /// Elements per activation scale.
    pub(crate) fn scale_block(&self) -> usize {
        self.scale_block
    }

    /// The accumulator seeds of `tokens`, `blocks` vectors of `S::W` bytes per token: bounds
    /// checked once per tile, for [`Prepared::seed`].
    pub(super) fn token_seeds<S: Simd>(&self, tokens: Range<usize>) -> &[i32] {
        assert!(S::W == 4 * self.lanes, "seeds of another vector width");
        &self.seeds[tokens.start * self.blocks * self.lanes..tokens.end * self.blocks * self.lanes]
    }

    /// The sum of every seed of token `t` (minus the sum of its codes): what the lanes of a
    /// whole row's accumulator, started from zero, lack.
    pub(super) fn token_seed_sum(&self, t: usize) -> i32 {
        self.token_seeds_sum[t]
    }

    /// The seed of `block` for token `t` of `seeds` (from [`Prepared::token_seeds`]).
    ///
    /// # Safety
    /// `t` is below the tokens of `seeds` and `block` below the blocks of a row; the CPU
    /// must have `S`'s features.
    #[inline(always)]
    pub(super) unsafe fn seed<S: Simd>(&self, seeds: &[i32], t: usize, block: usize) -> S::V {
        // SAFETY: vector (t, block) lies in `seeds`, as the caller guarantees; its features.
        unsafe { S::load(seeds.as_ptr().add((t * self.blocks + block) * self.lanes) as *const u8) }
    }
}

/// The shapes of a kernel's prepared activations: see [`Prepared::new`].
pub(crate) struct Layout {
    block: usize,
    stride: usize,
    period: usize,
    period_slots: usize,
    placement: Cow<'static, prep::Placement>,
}

/// The prepared-activation layout of block-scaled format `L` for `S` and rows of `k`.
pub(crate) fn tq_layout<S: Simd, L: Tq<S>>(k: usize) -> Layout {
    let step = L::BLOCK * L::PER_STEP;
    let act_block = L::act_block();
    Layout {
        block: step,
        stride: k.div_ceil(step) * act_block,
        period: step,
        period_slots: act_block,
        placement: L::placement(),
    }
}

/// The runs of one TQ block's layout on `S`, computed once per (ISA, format) and kept.
/// Evaluating the layout per element costs several microseconds per call (a tenth of a
/// small GEMV); computing the runs per call still cost about 6,500 instructions (a few
/// percent of a 256 x 2048 GEMV on aarch64).
///
/// The cache is a `Vec`, not a `HashMap`: a hash table points into the middle of its
/// allocation, so valgrind reported the tables reachable only through it as "possibly
/// lost"; a `Vec` points at the start of its buffer and every table stays "still
/// reachable" (not a leak kind valgrind reports by default).
pub(crate) fn tq_runs<S: Simd, L: Tq<S>>() -> &'static prep::Placement {
    cached_runs::<S, L>(L::BLOCK * L::PER_STEP, L::slot)
}

/// [`prep::Placement::runs`] of `slot` over `period` elements, computed once per (ISA `S`,
/// format `L`) and kept (see [`tq_runs`] for why, and why in a `Vec`).
pub(crate) fn cached_runs<S: 'static, L: 'static>(
    period: usize,
    slot: impl Fn(usize) -> usize,
) -> &'static prep::Placement {
    static RUNS: Mutex<Vec<(TypeId, &'static prep::Placement)>> = Mutex::new(Vec::new());
    let mut runs = RUNS.lock().unwrap_or_else(PoisonError::into_inner);
    let key = TypeId::of::<(S, L)>();
    if let Some(&(_, placement)) = runs.iter().find(|(k, _)| *k == key) {
        return placement;
    }
    // Leaked once per (ISA, format) pair: a few dozen small tables at most, for the process.
    let placement: &'static prep::Placement = Box::leak(Box::new(prep::Placement::runs(period, slot)));
    runs.push((key, placement));
    placement
}

/// Elements per period of [`OneScale::placement`] on `S`: whole loads of `W` bytes and
/// whole periods of the format.
pub(crate) fn one_scale_period<S: Simd, L: OneScale>() -> usize {
    let load = 4 * S::W;
    // Both are powers of two: the larger is their least common multiple.
    assert!(load.is_power_of_two() && L::PERIOD.is_power_of_two());
    load.max(L::PERIOD)
}

/// The prepared-activation layout of format `L` for `S` and rows of `k`.
pub(crate) fn one_scale_layout<S: Simd, L: OneScale>(k: usize) -> Layout {
    let w = S::W;
    let stride = (k / 4).div_ceil(w) * w * 4;
    let period = one_scale_period::<S, L>();
    Layout { block: k, stride, period, period_slots: period, placement: L::placement::<S>() }
}

/// Prepares I8_ABSMAX activations for format `L` on `S`, with the lane sums of `S`'s
/// multiply-accumulate.
pub(crate) fn prepare_one_scale<S: Simd, L: OneScale>(a: &MatRef) -> Prepared {
    prepare_one_scale_with::<S, L>(a, Some(S::M::lane))
}

/// Prepares I8_ABSMAX activations for format `L` on `S`, with the lane sums of `lane`
/// (`None` for kernels that unpack weights to signed trits and need none).
pub(crate) fn prepare_one_scale_with<S: Simd, L: OneScale>(a: &MatRef, lane: Option<fn(usize) -> usize>) -> Prepared {
    Prepared::new(a, S::W, lane, &one_scale_layout::<S, L>(a.cols))
}

/// Prepares I8_ABSMAX activations for block-scaled format `L` on `S`.
pub(crate) fn prepare_tq<S: Simd, L: Tq<S>>(a: &MatRef) -> Prepared {
    prepare_tq_with::<S, L>(a, Some(S::M::lane))
}

/// [`prepare_tq`] with the lane sums of `lane` (`None` for kernels that unpack weights to
/// signed trits and need none).
pub(crate) fn prepare_tq_with<S: Simd, L: Tq<S>>(a: &MatRef, lane: Option<fn(usize) -> usize>) -> Prepared {
    Prepared::new(a, S::W, lane, &tq_layout::<S, L>(a.cols))
}

/// The prepared-activation layout of a format whose codes meet the activations in their own
/// order (I2_S_R4: one column per byte), for rows of `k`: one block, whole vectors.
pub(crate) fn natural_layout<S: Simd, L: 'static>(k: usize) -> Layout {
    // Any multiple of the vector divides the rows (whole 128-element blocks).
    const PERIOD: usize = 128;
    Layout {
        block: k,
        stride: k.next_multiple_of(S::W),
        period: PERIOD,
        period_slots: PERIOD,
        placement: Cow::Borrowed(cached_runs::<S, L>(PERIOD, |e| e)),
    }
}

/// Prepares I8_ABSMAX activations in their own order for format `L` on `S`, with the lane
/// sums of `S`'s multiply-accumulate.
pub(crate) fn prepare_natural<S: Simd, L: 'static>(a: &MatRef) -> Prepared {
    Prepared::new(a, S::W, Some(S::M::lane), &natural_layout::<S, L>(a.cols))
}
