//! ggml, as built by `llama-cpp-sys-2`: the TQ1_0/TQ2_0 quantizers and CPU dot kernels,
//! and a `ggml_mul_mat` graph computed on a persistent ggml threadpool.
//!
//! All entry points come from the crate's generated bindings: its llama.h reaches ggml.h
//! and ggml-cpu.h, so `ggml_quantize_chunk`, `ggml_get_type_traits`, `ggml_cpu_init`,
//! `ggml_get_type_traits_cpu`, the graph API and `ggml_threadpool_*` are there, and bindgen
//! asserts the layouts of the structs used here (`ggml_type_traits_cpu`, `ggml_tensor`,
//! `ggml_cplan`, `ggml_threadpool_params`) at compile time.

use crate::timing::Timed;
use llama_cpp_sys_2 as sys;
use std::ffi::{c_int, CStr};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Once;

/// ggml type ids (enum ggml_type in ggml.h).
pub const TYPE_TQ1_0: u32 = sys::GGML_TYPE_TQ1_0;
pub const TYPE_TQ2_0: u32 = sys::GGML_TYPE_TQ2_0;
pub const TYPE_Q2_0: u32 = sys::GGML_TYPE_Q2_0;


type VecDotFn =
    unsafe extern "C" fn(c_int, *mut f32, usize, *const std::ffi::c_void, usize, *const std::ffi::c_void, usize, c_int);
type FromFloatFn = unsafe extern "C" fn(*const f32, *mut std::ffi::c_void, i64);

/// Initialises ggml's CPU backend (its f16 tables) once per process.
pub fn init() {
    static INIT: Once = Once::new();
    // SAFETY: ggml_cpu_init takes no arguments and is idempotent; Once serialises it.
    INIT.call_once(|| unsafe { sys::ggml_cpu_init() });
}

/// `ggml_quantize_chunk` of a `rows x k` matrix of a type that needs no importance matrix
/// (TQ1_0, TQ2_0, Q2_0); returns the bytes ggml says it wrote.
pub fn quantize_chunk(ty: u32, src: &[f32], rows: usize, k: usize, dst: &mut Aligned) -> usize {
    assert_eq!(src.len(), rows * k);
    init();
    // SAFETY: a pointer into ggml's static type table, for a valid type id.
    let traits = unsafe { &*sys::ggml_get_type_traits(ty) };
    assert_eq!(k % traits.blck_size as usize, 0, "whole blocks per row");
    assert_eq!(dst.len, rows * k / traits.blck_size as usize * traits.type_size, "dst holds the matrix");
    // SAFETY: src holds rows*k floats, dst the rows*k/block blocks ggml writes for `rows`
    // rows of `k` (8-aligned, above the 2-byte alignment of the f16 in these blocks); these
    // types need no imatrix.
    unsafe {
        sys::ggml_quantize_chunk(
            ty,
            src.as_ptr(),
            dst.bytes_mut().as_mut_ptr().cast(),
            0,
            rows as i64,
            k as i64,
            std::ptr::null(),
        )
    }
}

/// ggml's dequantizer (`type_traits.to_float`) for `n` elements of type `ty`.
pub fn to_float(ty: u32, bytes: &[u8], n: usize) -> Vec<f32> {
    init();
    // SAFETY: a pointer into ggml's static type table, for a valid type id.
    let traits = unsafe { &*sys::ggml_get_type_traits(ty) };
    assert_eq!(bytes.len(), n / traits.blck_size as usize * traits.type_size, "whole blocks");
    let to_float = traits.to_float.expect("a quantized type has to_float");
    let mut src = Aligned::zeroed(bytes.len());
    src.bytes_mut().copy_from_slice(bytes);
    let mut out = vec![0f32; n];
    // SAFETY: src holds the n / blck_size blocks (aligned as ggml's structs need), out n
    // writable floats.
    unsafe { to_float(src.bytes().as_ptr().cast(), out.as_mut_ptr(), n as i64) };
    out
}

/// A ggml weight type with its CPU dot product, as ggml's matmul would use it.
pub struct Quant {
    ty: u32,
    pub row_bytes: usize,
    vec_dot: VecDotFn,
    /// Quantizes f32 activations to `vec_dot_type` (Q8_K for TQ1_0/TQ2_0, Q8_0 for Q2_0).
    act_from_float: FromFloatFn,
    /// Elements and bytes per block of `vec_dot_type`.
    act_block: (usize, usize),
}

impl Quant {
    /// `ty` must be TQ1_0, TQ2_0 or Q2_0; `k` the row length (whole blocks).
    pub fn new(ty: u32, k: usize) -> Quant {
        assert!([TYPE_TQ1_0, TYPE_TQ2_0, TYPE_Q2_0].contains(&ty), "only the ternary types are wired up");
        init();
        // SAFETY: ggml_get_type_traits returns a pointer into a static table for every
        // valid type id; the ternary types are valid.
        let traits = unsafe { &*sys::ggml_get_type_traits(ty) };
        // SAFETY: type_name points to a static NUL-terminated string.
        let name = unsafe { CStr::from_ptr(traits.type_name) }.to_str().expect("ASCII name");
        let block = traits.blck_size as usize;
        assert!(k % block == 0, "{name}: row length must be whole blocks of {block}");
        let row_bytes = k / block * traits.type_size;
        // SAFETY: as above, a pointer into ggml-cpu's static table, valid after init().
        let cpu = unsafe { &*sys::ggml_get_type_traits_cpu(ty) };
        assert_eq!(cpu.nrows, 1, "{name} vec_dot handles one row per call");
        // SAFETY: same static tables, the vec_dot_type's entries.
        let (act, act_cpu) =
            unsafe { (&*sys::ggml_get_type_traits(cpu.vec_dot_type), &*sys::ggml_get_type_traits_cpu(cpu.vec_dot_type)) };
        assert!(k % act.blck_size as usize == 0, "{name}: whole activation blocks");
        Quant {
            ty,
            row_bytes,
            vec_dot: cpu.vec_dot.expect("vec_dot for a ternary type"),
            act_from_float: act_cpu.from_float.expect("from_float for the vec_dot type"),
            act_block: (act.blck_size as usize, act.type_size),
        }
    }

    /// ggml's reference quantizer over a whole `rows x k` matrix.
    pub fn quantize(&self, src: &[f32], rows: usize, k: usize) -> Aligned {
        let mut dst = Aligned::zeroed(rows * self.row_bytes);
        let written = quantize_chunk(self.ty, src, rows, k, &mut dst);
        assert_eq!(written, dst.len, "ggml_quantize_chunk wrote an unexpected size");
        dst
    }

    /// Bytes of one activation row of `k` in the vec_dot type.
    fn act_bytes(&self, k: usize) -> usize {
        k / self.act_block.0 * self.act_block.1
    }

    /// Quantizes one activation row of `k` floats to the vec_dot type with ggml-cpu's
    /// `from_float`.
    pub fn quantize_act(&self, x: &[f32]) -> Aligned {
        let mut q = Aligned::zeroed(self.act_bytes(x.len()));
        // SAFETY: x holds k floats; q holds the k / block blocks of the vec_dot type,
        // 8-aligned (its structs need at most 4).
        unsafe { (self.act_from_float)(x.as_ptr(), q.bytes_mut().as_mut_ptr().cast(), x.len() as i64) };
        q
    }

    /// One GEMV the way ggml's matmul does it for a single token: `vec_dot` per row, with
    /// `nrc = 1`. `w` is `n` rows of this type, `act` one row of `k` in the vec_dot type.
    #[inline(never)]
    pub fn gemv(&self, w: &[u8], k: usize, act: &[u8], out: &mut [f32]) {
        let n = out.len();
        assert_eq!(w.len(), n * self.row_bytes);
        assert_eq!(act.len(), self.act_bytes(k));
        for (r, o) in out.iter_mut().enumerate() {
            // SAFETY: row r spans row_bytes bytes inside w; act holds the row's blocks; o is
            // one writable float. bs/bx/by are ignored when nrc == 1.
            unsafe {
                (self.vec_dot)(k as c_int, o, 0, w.as_ptr().add(r * self.row_bytes).cast(), 0, act.as_ptr().cast(), 0, 1)
            };
        }
    }
}

/// A ggml CPU threadpool: `n_threads - 1` workers started once (the caller of
/// `ggml_graph_compute` is thread 0), with ggml's default hybrid polling (`poll` = 50, also
/// llama.cpp's default), as llama.cpp keeps one for a whole session.
pub struct ThreadPool {
    ptr: NonNull<sys::ggml_threadpool>,
    n_threads: usize,
}

impl ThreadPool {
    pub fn new(n_threads: usize) -> ThreadPool {
        init();
        let threads = c_int::try_from(n_threads).expect("thread count fits a C int");
        // SAFETY: fills and returns a plain struct by value.
        let mut params = unsafe { sys::ggml_threadpool_params_default(threads) };
        // SAFETY: params is a fully initialised struct that ggml only reads during the call.
        let ptr = unsafe { sys::ggml_threadpool_new(&mut params) };
        ThreadPool { ptr: NonNull::new(ptr).expect("ggml_threadpool_new failed"), n_threads }
    }

    pub fn threads(&self) -> usize {
        self.n_threads
    }

    /// Sends the workers to sleep until the next graph. After a graph, ggml's workers poll
    /// for the next one (up to 1024 * 128 * poll `pause` instructions, milliseconds); on a
    /// 2-core machine that would take a core from whatever is timed next. The next
    /// `ggml_graph_compute` resumes them itself (the wake-up is then inside its timing,
    /// once per batch of calls).
    pub fn pause(&self) {
        // SAFETY: a live threadpool (freed only in Drop); pausing an idle pool is allowed.
        unsafe { sys::ggml_threadpool_pause(self.ptr.as_ptr()) };
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        // SAFETY: made by ggml_threadpool_new, freed once; no graph is computing on it (a
        // MulMat borrows the pool, so none outlives it).
        unsafe { sys::ggml_threadpool_free(self.ptr.as_ptr()) };
    }
}

/// `out = weights x act` as one `ggml_mul_mat` node, computed the way llama.cpp's CPU
/// backend computes a matmul: a graph planned for a threadpool; inside
/// `ggml_graph_compute`, every thread quantizes its share of the F32 activation to Q8_K
/// (into the plan's work buffer), synchronises, then runs the weight type's `vec_dot` over
/// (row x token) chunks. The tensors point at Rust-owned buffers; the ggml context holds
/// only their metadata and the graph.
pub struct MulMat<'a> {
    ctx: NonNull<sys::ggml_context>,
    graph: NonNull<sys::ggml_cgraph>,
    plan: sys::ggml_cplan,
    pool: &'a ThreadPool,
    /// The buffers the tensors point at; kept alive (and never moved: they are heap
    /// allocations) for as long as the graph may run.
    _act: Aligned,
    out: Aligned,
    _work: Aligned,
    _weights: PhantomData<&'a Aligned>,
}

impl<'a> MulMat<'a> {
    /// `weights` holds `n` rows of `k` in ggml type `ty`; `x` holds `m` tokens of `k`
    /// floats (row-major), copied in once. The output is `m x n` (token-major, as tern's).
    pub fn new(ty: u32, weights: &'a Aligned, n: usize, k: usize, x: &[f32], pool: &'a ThreadPool) -> MulMat<'a> {
        init();
        let m = x.len() / k;
        assert!(m > 0 && m * k == x.len(), "x holds whole tokens of k floats");
        let mut act = Aligned::zeroed(x.len() * 4);
        act.bytes_mut().copy_from_slice(bytemuck::cast_slice(x));
        let mut out = Aligned::zeroed(m * n * 4);
        let dim = |v: usize| i64::try_from(v).expect("dimension fits i64");
        // SAFETY: plain queries of ggml's object sizes.
        let meta = unsafe { 3 * sys::ggml_tensor_overhead() + sys::ggml_graph_overhead() };
        // no_alloc: the context holds metadata only (3 tensors, one graph; the slack covers
        // ggml's alignment of each object).
        let params = sys::ggml_init_params { mem_size: meta + 1024, mem_buffer: std::ptr::null_mut(), no_alloc: true };
        // SAFETY: valid params; ggml allocates and owns the context's memory.
        let ctx = NonNull::new(unsafe { sys::ggml_init(params) }).expect("ggml_init failed");
        // SAFETY: ctx is live and sized for these three tensors and one graph. The data
        // pointers set below stay valid while `self` lives: `weights` is borrowed for 'a,
        // the other buffers are owned by `self`. ggml only reads src tensors, so the const
        // weight pointer is never written through. ggml_nbytes checks each buffer's size.
        let (graph, plan) = unsafe {
            let c = ctx.as_ptr();
            let w = sys::ggml_new_tensor_2d(c, ty, dim(k), dim(n));
            let a = sys::ggml_new_tensor_2d(c, sys::GGML_TYPE_F32, dim(k), dim(m));
            let y = sys::ggml_mul_mat(c, w, a);
            assert_eq!(sys::ggml_nbytes(w), weights.len, "weight bytes for {n} x {k}");
            assert_eq!(sys::ggml_nbytes(a), act.len);
            assert_eq!(sys::ggml_nbytes(y), out.len);
            (*w).data = weights.bytes().as_ptr().cast_mut().cast();
            (*a).data = act.bytes_mut().as_mut_ptr().cast();
            (*y).data = out.bytes_mut().as_mut_ptr().cast();
            let graph = NonNull::new(sys::ggml_new_graph(c)).expect("ggml_new_graph failed");
            sys::ggml_build_forward_expand(graph.as_ptr(), y);
            let threads = c_int::try_from(pool.n_threads).expect("thread count fits a C int");
            (graph, sys::ggml_graph_plan(graph.as_ptr(), threads, pool.ptr.as_ptr()))
        };
        let mut work = Aligned::zeroed(plan.work_size);
        let plan = sys::ggml_cplan { work_data: work.bytes_mut().as_mut_ptr(), ..plan };
        MulMat { ctx, graph, plan, pool, _act: act, out, _work: work, _weights: PhantomData }
    }

    pub fn compute(&mut self) {
        // SAFETY: the graph and every buffer it points at are alive (see `new`); the plan's
        // work buffer has the size the plan asked for; its threadpool outlives `self`.
        let status = unsafe { sys::ggml_graph_compute(self.graph.as_ptr(), &mut self.plan) };
        assert_eq!(status, sys::GGML_STATUS_SUCCESS, "ggml_graph_compute failed");
    }

    /// The output of the last `compute`, `m x n`.
    pub fn output(&self) -> &[f32] {
        bytemuck::cast_slice(self.out.bytes())
    }
}

impl Timed for MulMat<'_> {
    fn call(&mut self) {
        self.compute();
    }

    fn settle(&mut self) {
        self.pool.pause();
    }
}

impl Drop for MulMat<'_> {
    fn drop(&mut self) {
        // SAFETY: made by ggml_init, freed once; no compute is running (`compute` takes
        // &mut self and returns when the graph is done).
        unsafe { sys::ggml_free(self.ctx.as_ptr()) };
    }
}

/// One cache line, the unit of [`Aligned`].
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

// SAFETY: Line is 64 plain bytes (repr(C), no padding: size 64 == align 64); all-zero is
// a valid value.
unsafe impl bytemuck::Zeroable for Line {}
// SAFETY: as above; every bit pattern is a valid [u8; 64], and Line is Copy + 'static.
unsafe impl bytemuck::Pod for Line {}

/// A byte buffer aligned to a cache line, because ggml reads and writes its blocks through
/// struct pointers (block_q8_K starts with a float, block_tq*_0 hold an f16) and its SIMD
/// code runs over activations and the work buffer.
pub struct Aligned {
    lines: Vec<Line>,
    len: usize,
}

impl Aligned {
    pub fn zeroed(len: usize) -> Aligned {
        Aligned { lines: vec![Line([0; 64]); len.div_ceil(64)], len }
    }

    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.lines)[..self.len]
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.lines)[..self.len]
    }
}
