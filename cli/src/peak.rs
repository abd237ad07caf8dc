//! The int8 dot-product peaks of this core, measured in this process: loops of independent
//! instructions with no loads, so that the only limit is the instruction's throughput. GEMM
//! figures are printed as a share of the peak of the instruction their kernel is built on.

/// One instruction's measured throughput.
#[derive(Debug, Clone, Copy)]
pub struct Peak {
    /// The instruction, e.g. `vpdpbusd zmm`.
    pub name: &'static str,
    /// Multiply-adds (u8 x i8 products) per second and thread, best of the repeats, with
    /// every thread of the benchmark running the loop at once.
    pub macs_per_s: f64,
}

/// The peaks of every instruction this CPU has among those tern's kernels use, with
/// `threads` threads running each at once.
pub fn measure(threads: usize) -> Vec<Peak> {
    arch::measure(threads)
}

/// Per instruction, the higher of two measurements of the same peaks (`old` may be empty).
pub fn best_of(old: Vec<Peak>, new: Vec<Peak>) -> Vec<Peak> {
    new.into_iter()
        .map(|p| match old.iter().find(|o| o.name == p.name) {
            Some(o) if o.macs_per_s > p.macs_per_s => *o,
            _ => p,
        })
        .collect()
}

/// The peak a kernel's figures are compared with: `tdpbusd` for AMX kernels, `vpdpbusd zmm`
/// for AVX-512 VNNI kernels (and the VBMI one, which multiplies with it), the VEX `vpdpbusd
/// ymm` for AVX-VNNI ones, `vpmaddubsw ymm` for AVX2 ones.
pub fn for_kernel<'a>(peaks: &'a [Peak], kernel: &str) -> Option<&'a Peak> {
    let want = if kernel.ends_with("/amx") {
        "tdpbusd (AMX)"
    } else if kernel.ends_with("/avx512vnni") || kernel.ends_with("/avx512vbmi") {
        "vpdpbusd zmm"
    } else if kernel.ends_with("/avxvnni") {
        VEX_YMM
    } else if kernel.ends_with("/avx2") {
        "vpmaddubsw ymm"
    } else {
        return None;
    };
    peaks.iter().find(|p| p.name == want)
}

/// AVX-VNNI's VEX-encoded `vpdpbusd` (the AVX-512 VL form, `vpdpbusd ymm`, is another
/// instruction and may run on other ports).
const VEX_YMM: &str = "vpdpbusd ymm (vex)";

#[cfg(target_arch = "x86_64")]
mod arch {
    use super::{Peak, VEX_YMM};
    use crate::common::{time_runs_on, Clock};

    /// Loop iterations per timed run (14 instructions each): several milliseconds per run.
    const ITERS: u64 = 1_000_000;
    const REPEATS: usize = 15;

    /// The best of [`REPEATS`] runs of `probe(ITERS)` (which performs `macs_per_iter * ITERS`
    /// MACs), since other processes only ever slow a run down. One thread is timed on its own
    /// CPU time. With more, every thread runs the probe at once and a run lasts until the last
    /// one finishes (wall time): vCPUs that share a physical core, or a clock that drops when
    /// every core runs wide vectors, show as a lower rate per thread, which is what a split
    /// GEMM can hope for.
    fn best(name: &'static str, macs_per_iter: u64, threads: usize, probe: impl Fn(u64) + Sync) -> Peak {
        let macs = (macs_per_iter * ITERS) as f64;
        let t = if threads <= 1 {
            time_runs_on(Clock::ThreadCpu, Some(REPEATS), std::time::Duration::ZERO, 1, REPEATS, || probe(ITERS)).min
        } else {
            all_at_once(threads, || probe(ITERS))
        };
        Peak { name, macs_per_s: macs / t.as_secs_f64() }
    }

    /// The fastest of [`REPEATS`] rounds in which `threads` threads (the caller and scoped
    /// helpers) each run `f` once, started together by a barrier; a round ends when the last
    /// thread is done.
    fn all_at_once(threads: usize, f: impl Fn() + Sync) -> std::time::Duration {
        use std::sync::Barrier;
        let (start, end) = (Barrier::new(threads), Barrier::new(threads));
        std::thread::scope(|scope| {
            for _ in 1..threads {
                scope.spawn(|| {
                    for _ in 0..REPEATS {
                        start.wait();
                        f();
                        end.wait();
                    }
                });
            }
            (0..REPEATS)
                .map(|_| {
                    start.wait();
                    Clock::Wall
                        .measure(|| {
                            f();
                            end.wait();
                        })
                        .1
                })
                .min()
                .expect("REPEATS > 0")
        })
    }

    /// One instruction per destination register per iteration, all independent, fed from two
    /// source registers that never change; enough chains to cover the instruction's latency
    /// at full throughput.
    macro_rules! probe {
        ($name:ident, $features:literal, $insn:literal, $s:literal, $t:literal, [$($d:literal),*]) => {
            /// # Safety
            /// The CPU must have the features this function enables.
            #[target_feature(enable = $features)]
            unsafe fn $name(iters: u64) {
                // SAFETY: register-only instructions the CPU has (the caller checked); every
                // register the loop writes is declared clobbered.
                unsafe {
                    std::arch::asm!(
                        "2:",
                        $(concat!($insn, " ", $d, ", ", $s, ", ", $t),)*
                        "dec {n}",
                        "jnz 2b",
                        n = inout(reg) iters => _,
                        out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
                        out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
                        out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
                        out("xmm12") _, out("xmm13") _,
                        options(nostack, nomem),
                    )
                }
            }
        };
    }

    // Fourteen destinations each; the sources (zmm/ymm 14, 15) are never written.
    probe!(
        vnni_zmm,
        "avx512f,avx512vnni",
        "vpdpbusd",
        "zmm14",
        "zmm15",
        [
            "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", "zmm10", "zmm11", "zmm12",
            "zmm13"
        ]
    );
    probe!(
        vnni_ymm,
        "avx512f,avx512vl,avx512vnni",
        "vpdpbusd",
        "ymm14",
        "ymm15",
        [
            "ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "ymm6", "ymm7", "ymm8", "ymm9", "ymm10", "ymm11", "ymm12",
            "ymm13"
        ]
    );
    probe!(
        vnni_vex_ymm,
        "avxvnni",
        "{{vex}} vpdpbusd",
        "ymm14",
        "ymm15",
        [
            "ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "ymm6", "ymm7", "ymm8", "ymm9", "ymm10", "ymm11", "ymm12",
            "ymm13"
        ]
    );
    probe!(
        maddubs_ymm,
        "avx2",
        "vpmaddubsw",
        "ymm14",
        "ymm15",
        [
            "ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "ymm6", "ymm7", "ymm8", "ymm9", "ymm10", "ymm11", "ymm12",
            "ymm13"
        ]
    );

    /// Instructions per loop iteration.
    const PER_ITER: u64 = 14;

    /// `ldtilecfg`'s operand: palette 1, tiles 0-7 of 16 rows x 64 bytes.
    #[repr(C, align(64))]
    struct TileConfig([u8; 64]);

    static TILES: TileConfig = {
        let mut c = [0u8; 64];
        c[0] = 1;
        let mut t = 0;
        while t < 8 {
            c[16 + 2 * t] = 64;
            c[48 + t] = 16;
            t += 1;
        }
        TileConfig(c)
    };

    /// Tile instructions per loop iteration of [`amx`], and multiply-adds per instruction.
    const AMX_PER_ITER: u64 = 6;
    const AMX_MACS: u64 = 16 * 16 * 64;

    /// `tdpbusd` into six independent C tiles (enough to cover its latency) from one A and
    /// one B tile loaded once from non-zero bytes.
    ///
    /// # Safety
    /// AMX must be usable: `tern::kernel::amx_status()` returned `Some(Ok(()))`.
    unsafe fn amx(iters: u64) {
        let src = [0x5au8; 1024];
        // SAFETY: AMX is usable (the caller's promise); LDTILECFG reads the 64-byte
        // configuration, the two tile loads read 16 rows of 64 bytes of `src`, and the
        // tiles are released before the block ends.
        unsafe {
            std::arch::asm!(
                "ldtilecfg [{cfg}]",
                "tileloadd tmm6, [{src} + {row}*1]",
                "tileloadd tmm7, [{src} + {row}*1]",
                "tilezero tmm0",
                "tilezero tmm1",
                "tilezero tmm2",
                "tilezero tmm3",
                "tilezero tmm4",
                "tilezero tmm5",
                "2:",
                "tdpbusd tmm0, tmm6, tmm7",
                "tdpbusd tmm1, tmm6, tmm7",
                "tdpbusd tmm2, tmm6, tmm7",
                "tdpbusd tmm3, tmm6, tmm7",
                "tdpbusd tmm4, tmm6, tmm7",
                "tdpbusd tmm5, tmm6, tmm7",
                "dec {n}",
                "jnz 2b",
                "tilerelease",
                cfg = in(reg) &TILES,
                src = in(reg) src.as_ptr(),
                row = in(reg) 64usize,
                n = inout(reg) iters => _,
                out("tmm0") _, out("tmm1") _, out("tmm2") _, out("tmm3") _,
                out("tmm4") _, out("tmm5") _, out("tmm6") _, out("tmm7") _,
                options(nostack, readonly),
            )
        }
    }

    pub fn measure(threads: usize) -> Vec<Peak> {
        let mut peaks = Vec::new();
        if tern::kernel::amx_status() == Some(Ok(())) {
            // A tenth of the iterations: each instruction is 256 times a vpdpbusd zmm's work.
            // SAFETY: AMX is usable (checked just above).
            peaks.push(best("tdpbusd (AMX)", AMX_PER_ITER * AMX_MACS / 10, threads, |n| unsafe { amx(n / 10) }));
        }
        let avx512 = is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni");
        if avx512 {
            // SAFETY: the CPU has the features (checked just above).
            peaks.push(best("vpdpbusd zmm", PER_ITER * 64, threads, |n| unsafe { vnni_zmm(n) }));
        }
        if avx512 && is_x86_feature_detected!("avx512vl") {
            // SAFETY: as above, plus AVX-512 VL.
            peaks.push(best("vpdpbusd ymm", PER_ITER * 32, threads, |n| unsafe { vnni_ymm(n) }));
        }
        if is_x86_feature_detected!("avxvnni") {
            // SAFETY: the CPU has AVX-VNNI (checked just above).
            peaks.push(best(VEX_YMM, PER_ITER * 32, threads, |n| unsafe { vnni_vex_ymm(n) }));
        }
        if is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            peaks.push(best("vpmaddubsw ymm", PER_ITER * 32, threads, |n| unsafe { maddubs_ymm(n) }));
        }
        peaks
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod arch {
    pub fn measure(_threads: usize) -> Vec<super::Peak> {
        Vec::new()
    }
}
