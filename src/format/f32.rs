//! F32: plain little-endian floats.

pub fn encode(src: &[f32], dst: &mut [u8]) {
    for (d, x) in dst.chunks_exact_mut(4).zip(src) {
        d.copy_from_slice(&x.to_le_bytes());
    }
}

pub fn decode(src: &[u8], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src.chunks_exact(4)) {
        *d = get_at(s);
    }
}

pub fn get(src: &[u8], index: usize) -> f32 {
    get_at(&src[index * 4..])
}

pub fn first_non_finite(src: &[u8]) -> Option<usize> {
    src.chunks_exact(4).position(|s| !get_at(s).is_finite())
}

fn get_at(s: &[u8]) -> f32 {
    f32::from_le_bytes([s[0], s[1], s[2], s[3]])
}
