//! ggml, as built by `llama-cpp-sys-2`: the TQ1_0/TQ2_0 quantizers and CPU dot kernels.
//!
//! All entry points come from the crate's generated bindings: its llama.h reaches ggml.h
//! and ggml-cpu.h, so `ggml_quantize_chunk`, `ggml_get_type_traits`, `ggml_cpu_init` and
//! `ggml_get_type_traits_cpu` are there, and bindgen asserts the `ggml_type_traits_cpu`
//! layout (32 bytes: from_float, vec_dot, vec_dot_type, nrows) at compile time.

use llama_cpp_sys_2 as sys;
use std::ffi::{c_int, CStr};
use std::sync::Once;

/// ggml type ids (enum ggml_type in ggml.h).
pub const TYPE_Q8_K: u32 = sys::GGML_TYPE_Q8_K;
pub const TYPE_TQ1_0: u32 = sys::GGML_TYPE_TQ1_0;
pub const TYPE_TQ2_0: u32 = sys::GGML_TYPE_TQ2_0;

/// Bytes of one Q8_K block: `float d; int8_t qs[256]; int16_t bsums[16]`.
const Q8_K_BLOCK_BYTES: usize = 4 + 256 + 2 * 16;
const QK_K: usize = 256;

type VecDotFn =
    unsafe extern "C" fn(c_int, *mut f32, usize, *const std::ffi::c_void, usize, *const std::ffi::c_void, usize, c_int);
type FromFloatFn = unsafe extern "C" fn(*const f32, *mut std::ffi::c_void, i64);

/// Initialises ggml's CPU backend (its f16 tables) once per process.
pub fn init() {
    static INIT: Once = Once::new();
    // SAFETY: ggml_cpu_init takes no arguments and is idempotent; Once serialises it.
    INIT.call_once(|| unsafe { sys::ggml_cpu_init() });
}

/// A ggml weight type with its CPU dot product, as ggml's matmul would use it.
pub struct Quant {
    ty: u32,
    pub row_bytes: usize,
    vec_dot: VecDotFn,
    /// Quantizes f32 activations to `vec_dot_type` (Q8_K for TQ1_0/TQ2_0).
    act_from_float: FromFloatFn,
}

impl Quant {
    /// `ty` must be TQ1_0 or TQ2_0; `k` the row length (a multiple of 256).
    pub fn new(ty: u32, k: usize) -> Quant {
        assert!(ty == TYPE_TQ1_0 || ty == TYPE_TQ2_0, "only the ternary types are wired up");
        assert!(k % QK_K == 0, "row length must be a multiple of 256");
        init();
        // SAFETY: ggml_get_type_traits returns a pointer into a static table for every
        // valid type id; TQ1_0/TQ2_0 are valid.
        let traits = unsafe { &*sys::ggml_get_type_traits(ty) };
        // SAFETY: type_name points to a static NUL-terminated string.
        let name = unsafe { CStr::from_ptr(traits.type_name) }.to_str().expect("ASCII name");
        assert_eq!(traits.blck_size as usize, QK_K, "{name} block size");
        let row_bytes = k / QK_K * traits.type_size;
        // SAFETY: as above, a pointer into ggml-cpu's static table, valid after init().
        let cpu = unsafe { &*sys::ggml_get_type_traits_cpu(ty) };
        assert_eq!(cpu.vec_dot_type, TYPE_Q8_K, "{name} dots against Q8_K");
        assert_eq!(cpu.nrows, 1, "{name} vec_dot handles one row per call");
        // SAFETY: same static table, Q8_K entry.
        let q8k = unsafe { &*sys::ggml_get_type_traits_cpu(TYPE_Q8_K) };
        Quant {
            ty,
            row_bytes,
            vec_dot: cpu.vec_dot.expect("vec_dot for a ternary type"),
            act_from_float: q8k.from_float.expect("from_float for Q8_K"),
        }
    }

    /// ggml's reference quantizer over a whole `rows x k` matrix.
    pub fn quantize(&self, src: &[f32], rows: usize, k: usize) -> Aligned {
        assert_eq!(src.len(), rows * k);
        let mut dst = Aligned::zeroed(rows * self.row_bytes);
        // SAFETY: src holds rows*k floats, dst rows*row_bytes bytes (8-aligned, above the
        // 2-byte alignment of block_tq*_0), which is what ggml_quantize_chunk writes for
        // `rows` rows of `k`; TQ types need no imatrix.
        let written = unsafe {
            sys::ggml_quantize_chunk(
                self.ty,
                src.as_ptr(),
                dst.bytes_mut().as_mut_ptr().cast(),
                0,
                rows as i64,
                k as i64,
                std::ptr::null(),
            )
        };
        assert_eq!(written, dst.len, "ggml_quantize_chunk wrote an unexpected size");
        dst
    }

    /// Quantizes one activation row of `k` floats to Q8_K with ggml-cpu's `from_float`.
    pub fn quantize_act(&self, x: &[f32]) -> Aligned {
        assert_eq!(x.len() % QK_K, 0);
        let mut q = Aligned::zeroed(x.len() / QK_K * Q8_K_BLOCK_BYTES);
        // SAFETY: x holds k floats; q holds k/256 Q8_K blocks, 8-aligned (block_q8_K
        // needs 4).
        unsafe { (self.act_from_float)(x.as_ptr(), q.bytes_mut().as_mut_ptr().cast(), x.len() as i64) };
        q
    }

    /// One GEMV the way ggml's matmul does it for a single token: `vec_dot` per row, with
    /// `nrc = 1`. `w` is `n` rows of this type, `act_q8k` one Q8_K row of `k`.
    #[inline(never)]
    pub fn gemv(&self, w: &[u8], k: usize, act_q8k: &[u8], out: &mut [f32]) {
        let n = out.len();
        assert_eq!(w.len(), n * self.row_bytes);
        assert_eq!(act_q8k.len(), k / QK_K * Q8_K_BLOCK_BYTES);
        for (r, o) in out.iter_mut().enumerate() {
            // SAFETY: row r spans row_bytes bytes inside w; act_q8k holds k/256 blocks;
            // o is one writable float. bs/bx/by are ignored when nrc == 1.
            unsafe {
                (self.vec_dot)(
                    k as c_int,
                    o,
                    0,
                    w.as_ptr().add(r * self.row_bytes).cast(),
                    0,
                    act_q8k.as_ptr().cast(),
                    0,
                    1,
                )
            };
        }
    }
}

/// A byte buffer with 8-byte alignment, because ggml writes and reads its blocks through
/// struct pointers (block_q8_K starts with a float, block_tq*_0 hold an f16).
pub struct Aligned {
    words: Vec<u64>,
    len: usize,
}

impl Aligned {
    pub fn zeroed(len: usize) -> Aligned {
        Aligned { words: vec![0; len.div_ceil(8)], len }
    }

    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }
}
