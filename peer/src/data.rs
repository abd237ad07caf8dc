//! Deterministic test operands.

/// splitmix64: a deterministic stream, so every run quantizes the same weights.
pub struct Rng(u64);

impl Rng {
    /// The stream for an `n x k` weight and its activations: the same operands every run.
    pub fn for_shape(n: usize, k: usize) -> Rng {
        Rng(0x7e57_0000 ^ ((n as u64) << 20) ^ k as u64)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    fn next_f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 23) as f32) - 1.0
    }

    /// Trits uniform over {-1, 0, 1}, as in a BitNet b1.58 checkpoint.
    pub fn trits(&mut self, len: usize) -> Vec<i8> {
        (0..len).map(|_| (self.next_u64() % 3) as i8 - 1).collect()
    }

    pub fn fill(&mut self, len: usize) -> Vec<f32> {
        (0..len).map(|_| self.next_f32()).collect()
    }
}
