//! The activation preparation SIMD kernels share (`kernel::prep`): lane sums for the
//! biased-code correction and the placements that reorder a row into a kernel's unpack
//! order, element by element against what each placement must write.

use tern::kernel::prep::*;

#[test]
fn sums_per_lane() {
    // Two 8-byte vectors, two lanes: lane 0 = bytes 0..4 of each, lane 1 = bytes 4..8.
    let codes: Vec<i8> = (0..16).map(|i| i - 3).collect();
    let mut sums = [7; 2];
    lane_sums(&codes, &mut sums, |b| b / 4);
    // Lane 0: (-3 - 2 - 1 + 0) + (5 + 6 + 7 + 8); lane 1: (1 + 2 + 3 + 4) + (9 + 10 + 11 + 12).
    assert_eq!(sums, [20, 52]);
    // Even and odd byte pairs: lane 0 = bytes 0, 1, 4, 5 of each vector, lane 1 = 2, 3, 6, 7:
    // (-3 - 2 + 1 + 2) + (5 + 6 + 9 + 10) and (-1 + 0 + 3 + 4) + (7 + 8 + 11 + 12).
    lane_sums(&codes, &mut sums, |b| (b / 2) % 2);
    assert_eq!(sums, [28, 44]);
}

#[test]
fn runs_of_every_length_are_copied_exactly() {
    // One run per length: short runs take fixed-size copies of their two ends (4 to 32
    // bytes), others a plain copy.
    let src: Vec<i8> = (0..40).map(|i| i as i8 - 20).collect();
    for len in 0..=40 {
        let mut dst = vec![99i8; len + 2];
        Placement::Runs(vec![(0, 1, len)]).scatter(&src[..len], &mut dst);
        assert_eq!(&dst[1..len + 1], &src[..len], "len {len}");
        assert_eq!((dst[0], dst[len + 1]), (99, 99), "len {len}: wrote outside the run");
    }
}

/// Element by element: what each placement must write.
fn place(codes: &[i8], out: &mut [i8], slot: impl Fn(usize) -> usize) {
    for (e, &c) in codes.iter().enumerate() {
        out[slot(e)] = c;
    }
}

#[test]
fn planes4_is_the_bitnet_unpack_order() {
    // BITNET_B1_58: element 4j + s sits at bit shift 2s of byte j; loads of 64 bytes.
    let slot = |e: usize| unpack_slot(e / 4, e % 4, 64, 4);
    for n in [256, 100, 4] {
        let codes: Vec<i8> = (0..n).map(|i| (i % 200 - 100) as i8).collect();
        let (mut got, mut want) = (vec![0i8; 256], vec![0i8; 256]);
        Placement::Planes4 { lanes: 64 }.scatter(&codes, &mut got);
        place(&codes, &mut want, slot);
        assert_eq!(got, want, "{n} elements");
    }
}

#[test]
fn runs_copy_what_element_by_element_placement_writes() {
    // TQ2_0 in 64-byte loads: runs of 32, whole vectors (moved as 16 of them); in 8-byte
    // loads, runs of 8 and 16, not all whole vectors. A partial last period is cut short.
    for (lanes, vectors) in [(64, true), (8, false)] {
        let slot = |e: usize| {
            let (b, p) = tq2_0_position(e);
            unpack_slot(b, p, lanes, 4)
        };
        let runs = Placement::runs(256, slot);
        match &runs {
            Placement::Vectors { moves, slots } => assert!(vectors && moves.len() == 256 / VECTOR && *slots == 256),
            Placement::Runs(r) => assert!(!vectors && r.iter().any(|&(_, _, len)| !len.is_multiple_of(VECTOR))),
            Placement::Planes4 { .. } => unreachable!(),
        }
        for n in [256, 200, 33, 1] {
            let codes: Vec<i8> = (0..n).map(|i| (i % 200 - 100) as i8).collect();
            let (mut got, mut want) = (vec![0i8; 256], vec![0i8; 256]);
            runs.scatter(&codes, &mut got);
            place(&codes, &mut want, slot);
            assert_eq!(got, want, "{lanes}-byte loads, {n} elements");
        }
    }
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
