//! Per-call activation preparation that SIMD kernels share, whatever the architecture.
//!
//! Weight codes stay packed; instead, the activation row is summed per block (for the
//! biased-code correction `sum a*t = sum a*code - sum a`) and reordered once per call so
//! that a kernel's natural unpack order of the weight codes meets its activations in the
//! same lanes.

/// Sum of the codes of each `block`-element block of `codes` (`codes.len() / block` sums).
pub fn block_sums(codes: &[i8], block: usize) -> impl Iterator<Item = i32> + '_ {
    codes.chunks_exact(block).map(|b| b.iter().map(|&c| c as i32).sum())
}

/// Where a weight code lands after unpacking: the kernel loads the packed bytes `lanes` at
/// a time and splits every load into `planes` vectors of `lanes` codes (bit-shift planes for
/// 2-bit codes, base-3 digits for TQ1_0). The code at byte `byte`, plane `plane`, sits in
/// lane `byte % lanes` of that plane vector, which is this slot of the unpacked stream.
#[inline]
pub fn unpack_slot(byte: usize, plane: usize, lanes: usize, planes: usize) -> usize {
    (byte / lanes) * planes * lanes + plane * lanes + byte % lanes
}

/// Writes `codes[e]` to `out[slot(e)]` for every element `e`; slots no element maps to
/// stay zero, so padding lanes contribute nothing to a dot product.
pub fn scatter(codes: &[i8], out: &mut [i8], slot: impl Fn(usize) -> usize) {
    out.fill(0);
    for (e, &c) in codes.iter().enumerate() {
        out[slot(e)] = c;
    }
}

/// (byte, plane) of element `e` of a BITNET_B1_58 row: four consecutive elements per byte,
/// element `4j + s` at bit shift `2s` of byte `j`.
#[inline]
pub fn bitnet_position(e: usize) -> (usize, usize) {
    (e / 4, e % 4)
}

/// (byte, plane) of element `e` of a TQ2_0 row, counting only the 64 code bytes of each
/// 256-element block (the f16 scale is skipped): plane = bit shift / 2.
#[inline]
pub fn tq2_0_position(e: usize) -> (usize, usize) {
    let (byte, shift) = crate::format::tq2_0::position(e % 256);
    (64 * (e / 256) + byte, shift as usize / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_per_block() {
        let codes: Vec<i8> = (0..8).map(|i| i - 3).collect();
        assert_eq!(block_sums(&codes, 4).collect::<Vec<_>>(), vec![-6, 10]);
    }

    #[test]
    fn scatter_is_a_permutation_with_zero_padding() {
        // 2-bit codes, 10 elements = 3 bytes (last partial), unpacked 2 bytes at a time.
        let codes: Vec<i8> = (1..=10).collect();
        let mut out = vec![-1i8; 16];
        scatter(&codes, &mut out, |e| {
            let (b, p) = bitnet_position(e);
            unpack_slot(b, p, 2, 4)
        });
        // load 0: bytes 0,1 -> planes of elements (0,4), (1,5), (2,6), (3,7)
        assert_eq!(&out[..8], &[1, 5, 2, 6, 3, 7, 4, 8]);
        // load 1: byte 2 holds elements 8, 9; its second lane is padding
        assert_eq!(&out[8..], &[9, 0, 10, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn tq2_0_positions_cover_each_code_once() {
        let mut seen = vec![false; 2 * 256];
        for e in 0..512 {
            let (b, p) = tq2_0_position(e);
            assert!(b < 128 && p < 4);
            let i = b * 4 + p;
            assert!(!seen[i]);
            seen[i] = true;
        }
    }
}
