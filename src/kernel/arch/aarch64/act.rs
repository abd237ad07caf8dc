//! Activation preparation, once per call: the per-block code sums that turn biased-code
//! dot products into trit dot products (`sum a*t = sum a*code - sum a`), and BitNet's
//! permuted copy.

use crate::kernel::ActI8;

/// `bias[token * blocks + b]`: `[-s, 0, 0, 0]` where `s` is the sum of the token's codes
/// in block `b` of `block` elements. A block's first accumulator starts from it, which
/// turns the biased-code dot into the trit dot (`sum a*t = sum a*code - sum a`) for free.
pub(super) fn block_bias(act: &ActI8, block: usize) -> Vec<[i32; 4]> {
    (0..act.m)
        .flat_map(|t| act.row(t).chunks_exact(block).map(|c| [-c.iter().map(|&x| x as i32).sum::<i32>(), 0, 0, 0]))
        .collect()
}

/// Element `64c + 16s + j` of a row of [`BitnetAct::codes`] holds activation `64c + 4j + s`:
/// the order in which [`super::unpack::bitnet_chunk`] delivers the codes of 16 packed
/// bytes (shift `2s` of byte `j`), so the weights are used as stored.
pub(super) struct BitnetAct {
    /// Row length: `k` rounded up to 64; the padding is zero.
    pub stride: usize,
    pub codes: Vec<i8>,
    /// The sum of each token's codes.
    pub sums: Vec<i32>,
}

impl BitnetAct {
    pub fn new(act: &ActI8) -> BitnetAct {
        let stride = act.k.next_multiple_of(64);
        let mut codes = vec![0i8; act.m * stride];
        for (t, dst) in codes.chunks_exact_mut(stride).enumerate() {
            for (i, &x) in act.row(t).iter().enumerate() {
                let (c, e) = (i / 64, i % 64);
                dst[64 * c + 16 * (e % 4) + e / 4] = x;
            }
        }
        let sums = (0..act.m).map(|t| act.row(t).iter().map(|&x| x as i32).sum()).collect();
        BitnetAct { stride, codes, sums }
    }

    pub fn row(&self, t: usize) -> &[i8] {
        &self.codes[t * self.stride..][..self.stride]
    }
}
