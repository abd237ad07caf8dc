//! Per-call activation preparation that SIMD kernels share, whatever the architecture.
//!
//! Weight codes stay packed; instead, the activation row is reordered once per call so
//! that a kernel's natural unpack order of the weight codes meets its activations in the
//! same lanes, and summed per block and lane (for the biased-code correction
//! `sum a*t = sum a*code - sum a`).

/// Sums of a block's prepared codes `region` per int32 lane of a register of
/// `4 * sums.len()` bytes, into `sums`: the kernel adds the products of byte `b` of every
/// vector to lane `lane(b)` (a dot-product instruction: bytes `4i..4i + 4` to lane `i`), so
/// lane `i` must subtract exactly those activations for the biased-code correction. Keeping
/// the correction per lane, not all in one lane, keeps each lane's partial sum the trit dot
/// product of its own elements: small, and exactly zero when its products are. Registers up
/// to 64 bytes wide (AVX-512).
pub fn lane_sums(region: &[i8], sums: &mut [i32], lane: fn(usize) -> usize) {
    // Column sums first, lanes last: the element-wise adds vectorize, a quad at a time not;
    // on NEON only with the width a constant (else LLVM keeps 16 scalar sums).
    let mut columns = [0i32; 64];
    let width = 4 * sums.len();
    match width {
        16 => column_sums(region, &mut columns[..16]),
        32 => column_sums(region, &mut columns[..32]),
        64 => column_sums(region, &mut columns[..64]),
        _ => column_sums(region, &mut columns[..width]),
    }
    sums.fill(0);
    for (b, column) in columns[..width].iter().enumerate() {
        sums[lane(b)] += column;
    }
}

/// Sums of `region`'s bytes per column of `columns.len()` into `columns`.
#[inline(always)]
fn column_sums(region: &[i8], columns: &mut [i32]) {
    for v in region.chunks_exact(columns.len()) {
        for (sum, &c) in columns.iter_mut().zip(v) {
            *sum += c as i32;
        }
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

/// Where the elements of one period of an activation row go in a kernel's unpack order.
#[derive(Clone, Debug)]
pub enum Placement {
    /// Runs of consecutive elements that land in consecutive slots: (first element, its
    /// slot, length), in element order. TQ2_0 keeps 32 neighbours together and TQ1_0 32, 16
    /// or 4, so copying runs beats placing bytes one at a time.
    Runs(Vec<(usize, usize, usize)>),
    /// What `Runs` becomes when every run is whole vectors of [`VECTOR`] elements that start
    /// at multiples of it, in the elements and in the slots (TQ1_0 and TQ2_0 in 16-byte
    /// loads): (first element, its slot) of each vector, in element order, and the slots
    /// they span. A move is one 16-byte load and store, and a kernel can gather a vector
    /// straight from the row.
    Vectors { moves: Vec<(usize, usize)>, slots: usize },
    /// Element `4j + s` to slot `s * lanes + j`: the four 2-bit planes of `lanes` packed
    /// bytes (BITNET_B1_58, whose byte `j` holds elements `4j..4j + 4`). Every element
    /// moves alone, so this is a de-interleave, not runs.
    Planes4 { lanes: usize },
}

impl Placement {
    /// The runs of `slot` over `period` elements.
    pub fn runs(period: usize, slot: impl Fn(usize) -> usize) -> Placement {
        let mut runs: Vec<(usize, usize, usize)> = Vec::new();
        for e in 0..period {
            let s = slot(e);
            match runs.last_mut() {
                Some((e0, s0, len)) if *e0 + *len == e && *s0 + *len == s => *len += 1,
                _ => runs.push((e, s, 1)),
            }
        }
        let whole = |&(e, s, len): &(usize, usize, usize)| [e, s, len].iter().all(|x| x.is_multiple_of(VECTOR));
        if !runs.iter().all(whole) {
            return Placement::Runs(runs);
        }
        let moves =
            runs.iter().flat_map(|&(e, s, len)| (0..len / VECTOR).map(move |j| (e + VECTOR * j, s + VECTOR * j)));
        let moves: Vec<(usize, usize)> = moves.collect();
        let slots = moves.iter().map(|&(_, s)| s + VECTOR).max().unwrap_or(0);
        Placement::Vectors { moves, slots }
    }

    /// Writes every element of `codes` (at most one period; whole groups of four for
    /// `Planes4`) to its slot in `out`. Slots no element maps to are left as they are: zero
    /// in a fresh buffer, so padding lanes contribute nothing to a dot product.
    pub fn scatter(&self, codes: &[i8], out: &mut [i8]) {
        match *self {
            Placement::Runs(ref runs) => {
                for &(e, s, len) in runs.iter().take_while(|&&(e, _, _)| e < codes.len()) {
                    let len = len.min(codes.len() - e);
                    copy_run(&mut out[s..s + len], &codes[e..e + len]);
                }
            }
            Placement::Vectors { ref moves, slots } => {
                let fits = |&(e, _): &(usize, usize)| e + VECTOR <= codes.len();
                // Element order: if the last vector fits, every one does.
                let whole = if moves.last().is_some_and(fits) { moves.len() } else { moves.partition_point(fits) };
                assert!(out.len() >= slots, "the slots of a period");
                for &(e, s) in &moves[..whole] {
                    // SAFETY: `e + VECTOR <= codes.len()` (`whole`) and `s + VECTOR <= slots <=
                    // out.len()` (asserted): one fixed-size copy, a load and a store.
                    unsafe { std::ptr::copy_nonoverlapping(codes.as_ptr().add(e), out.as_mut_ptr().add(s), VECTOR) }
                }
                // A partial last period ends inside one vector.
                if let Some(&(e, s)) = moves.get(whole).filter(|&&(e, _)| e < codes.len()) {
                    out[s..s + codes.len() - e].copy_from_slice(&codes[e..]);
                }
            }
            Placement::Planes4 { lanes } => {
                let (p0, rest) = out.split_at_mut(lanes);
                let (p1, rest) = rest.split_at_mut(lanes);
                let (p2, p3) = rest.split_at_mut(lanes);
                // Zipped, not indexed: without bounds checks the loop vectorizes (`ld4` on
                // NEON), five times fewer instructions than byte moves.
                let planes = p0.iter_mut().zip(p1).zip(p2).zip(p3);
                for (quad, (((a, b), c), d)) in codes.chunks_exact(4).zip(planes) {
                    (*a, *b, *c, *d) = (quad[0], quad[1], quad[2], quad[3]);
                }
            }
        }
    }
}

/// Elements per move of [`Placement::Vectors`]: one 16-byte vector.
pub const VECTOR: usize = 16;

/// `dst.copy_from_slice(src)` for the short runs of a placement (4 to 32 bytes in TQ
/// blocks): two overlapping fixed-size copies, where `copy_from_slice` calls `memcpy`,
/// whose call costs more than such a copy.
#[inline(always)]
fn copy_run(dst: &mut [i8], src: &[i8]) {
    /// The first and the last `W` bytes, for `W <= len <= 2 W`.
    #[inline(always)]
    fn ends<const W: usize>(dst: &mut [i8], src: &[i8]) {
        let n = src.len();
        let (Ok(first), Ok(last)) = (<[i8; W]>::try_from(&src[..W]), <[i8; W]>::try_from(&src[n - W..])) else {
            unreachable!("runs given to `ends` are at least W long")
        };
        dst[..W].copy_from_slice(&first);
        dst[n - W..].copy_from_slice(&last);
    }
    match src.len() {
        16..=32 => ends::<16>(dst, src),
        8..16 => ends::<8>(dst, src),
        4..8 => ends::<4>(dst, src),
        _ => dst.copy_from_slice(src),
    }
}

/// (byte, plane) of element `e` of a TQ2_0 row, counting only the 64 code bytes of each
/// 256-element block (the f16 scale is skipped): plane = bit shift / 2.
#[inline]
pub fn tq2_0_position(e: usize) -> (usize, usize) {
    let (byte, shift) = crate::format::tq2_0::position(e % 256);
    (64 * (e / 256) + byte, shift as usize / 2)
}
