//! Per-call activation preparation that SIMD kernels share, whatever the architecture.
//!
//! Weight codes stay packed; instead, the activation row is reordered once per call so
//! that a kernel's natural unpack order of the weight codes meets its activations in the
//! same lanes, and summed per block and lane (for the biased-code correction
//! `sum a*t = sum a*code - sum a`).

/// Sums of a block's prepared codes `region` per int32 lane of a register of
/// `4 * sums.len()` bytes, into `sums`: a dot-product instruction adds bytes `4i..4i + 4` of
/// every vector to lane `i`, so lane `i` must subtract exactly those activations for the
/// biased-code correction. Keeping the correction per lane, not all in one lane, keeps each
/// lane's partial sum the trit dot product of its own elements: small, and exactly zero
/// when its products are. Registers up to 64 bytes wide (AVX-512).
pub fn lane_sums(region: &[i8], sums: &mut [i32]) {
    // Column sums first, lanes last: the element-wise adds vectorize, a quad at a time not.
    let mut columns = [0i32; 64];
    let columns = &mut columns[..4 * sums.len()];
    for v in region.chunks_exact(columns.len()) {
        for (sum, &c) in columns.iter_mut().zip(v) {
            *sum += c as i32;
        }
    }
    for (sum, quad) in sums.iter_mut().zip(columns.chunks_exact(4)) {
        *sum = quad.iter().sum();
    }
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
    fn sums_per_lane() {
        // Two 8-byte vectors, two lanes: lane 0 = bytes 0..4 of each, lane 1 = bytes 4..8.
        let codes: Vec<i8> = (0..16).map(|i| i - 3).collect();
        let mut sums = [7; 2];
        lane_sums(&codes, &mut sums);
        // Lane 0: (-3 - 2 - 1 + 0) + (5 + 6 + 7 + 8); lane 1: (1 + 2 + 3 + 4) + (9 + 10 + 11 + 12).
        assert_eq!(sums, [20, 52]);
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
