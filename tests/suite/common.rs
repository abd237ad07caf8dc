//! Helpers shared by the integration tests.

/// splitmix64: a tiny deterministic generator (any seed works), so the tests need no
/// dependency and every failure reproduces.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// `n` values uniform in [-scale, scale).
    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.unit() * scale).collect()
    }

    /// `n` values in [-scale, scale), with a few exact zeros and a few spikes so block
    /// maxima are not all alike.
    pub fn weights(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|_| match self.below(16) {
                0 => 0.0,
                1 => self.unit() * scale * 4.0,
                _ => self.unit() * scale,
            })
            .collect()
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// Held by every test that starts tern's own worker threads, so that a test counting them
/// (`ffi_engine::an_engine_pool_means_no_tern_threads`) sees none of another test's;
/// whatever a panicking holder left.
pub fn hold_threads() -> std::sync::MutexGuard<'static, ()> {
    static THREADS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    THREADS.lock().unwrap_or_else(|e| e.into_inner())
}
