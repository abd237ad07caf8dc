//! Kernels: the arithmetic. A kernel computes `out[m][r] = sum_k act[m][k] * w[r][k]` for
//! the output rows `r` of its [`OutRows`], from operands whose shapes the caller checked.
//!
//! The registry lists kernels in preference order; the dispatcher (`crate::dispatch`)
//! owns the policy of choosing among them.

pub mod arch;
pub mod prep;
pub mod reference;

use crate::error::{Error, Result};
use crate::format::Format;
use std::ffi::CStr;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::OnceLock;

/// Checked operand bytes: a `rows x cols` matrix in `format`.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    pub format: Format,
    pub rows: usize,
    pub cols: usize,
    pub bytes: &'a [u8],
}

impl<'a> MatRef<'a> {
    pub fn new(format: Format, rows: usize, cols: usize, bytes: &'a [u8]) -> Result<MatRef<'a>> {
        format.check_bytes(bytes, rows, cols)?;
        Ok(MatRef { format, rows, cols, bytes })
    }
}

/// I8_ABSMAX activations split into their codes and scales.
pub struct ActI8<'a> {
    pub m: usize,
    pub k: usize,
    pub codes: &'a [i8],
    pub scales: Vec<f32>,
}

impl<'a> ActI8<'a> {
    pub fn parse(a: &MatRef<'a>) -> ActI8<'a> {
        debug_assert_eq!(a.format, Format::I8Absmax);
        let (codes, scales) = a.bytes.split_at(a.rows * a.cols);
        let scales = scales.chunks_exact(4).map(|s| f32::from_le_bytes([s[0], s[1], s[2], s[3]])).collect();
        ActI8 { m: a.rows, k: a.cols, codes: bytemuck::cast_slice(codes), scales }
    }

    pub fn row(&self, i: usize) -> &'a [i8] {
        &self.codes[i * self.k..(i + 1) * self.k]
    }
}

/// The output matrix `m x n` (row-major), of which a kernel writes only the columns in
/// `rows` (the weight rows it owns). Views made by [`OutRows::split`] cover disjoint
/// column ranges, so threads can fill one output buffer together.
pub struct OutRows<'a> {
    ptr: *mut f32,
    m: usize,
    n: usize,
    rows: Range<usize>,
    _out: PhantomData<&'a mut [f32]>,
}

// SAFETY: an OutRows only writes the columns in its own range; ranges of views that exist
// at the same time are disjoint by construction (`split`), or by the caller's promise
// (`from_raw`).
unsafe impl Send for OutRows<'_> {}

impl<'a> OutRows<'a> {
    /// A view over all of `out` (`m * n` floats) that writes the columns in `rows`.
    pub fn new(out: &'a mut [f32], m: usize, n: usize, rows: Range<usize>) -> Result<OutRows<'a>> {
        check_out(out.len(), m, n, &rows)?;
        Ok(OutRows { ptr: out.as_mut_ptr(), m, n, rows, _out: PhantomData })
    }

    /// A view over caller memory that other threads may be writing too, in other columns.
    ///
    /// # Safety
    /// `ptr` must be valid for writes of `m * n` floats for `'a`, and no other live view
    /// may write the columns in `rows`.
    pub unsafe fn from_raw(ptr: *mut f32, m: usize, n: usize, rows: Range<usize>) -> OutRows<'a> {
        OutRows { ptr, m, n, rows, _out: PhantomData }
    }

    pub fn rows(&self) -> Range<usize> {
        self.rows.clone()
    }

    pub fn m(&self) -> usize {
        self.m
    }

    #[inline(always)]
    pub fn set(&mut self, token: usize, row: usize, value: f32) {
        assert!(token < self.m && self.rows.contains(&row), "output ({token}, {row}) outside the view");
        // SAFETY: in bounds (asserted), and this view owns column `row` (see the type docs).
        unsafe { *self.ptr.add(token * self.n + row) = value }
    }

    /// Splits into at most `parts` views over consecutive, disjoint row ranges, each a
    /// multiple of `align` rows long (except the last).
    pub fn split(self, parts: usize, align: usize) -> Vec<OutRows<'a>> {
        let len = self.rows.len();
        let chunk = len.div_ceil(parts.max(1)).next_multiple_of(align.max(1)).max(1);
        (self.rows.start..self.rows.end)
            .step_by(chunk)
            .map(|start| OutRows { rows: start..(start + chunk).min(self.rows.end), ..self })
            .collect()
    }
}

/// Checks that `len` floats hold an `m x n` output and that `rows` lies in `0..n`.
pub fn check_out(len: usize, m: usize, n: usize, rows: &Range<usize>) -> Result<()> {
    let need = m.checked_mul(n).ok_or(Error::SizeOverflow { rows: m, cols: n })?;
    if len < need {
        return Err(Error::LengthMismatch { what: "out (floats)", want: need, got: len });
    }
    if rows.start > rows.end || rows.end > n {
        return Err(Error::InvalidRowRange { begin: rows.start, end: rows.end, rows: n });
    }
    Ok(())
}

/// `run(weight, act, out)`: shapes already agree (`weight.cols == act.cols`, `out` is
/// `act.rows x weight.rows`) and the formats are the kernel's own.
pub type KernelFn = fn(&MatRef, &MatRef, &mut OutRows);

/// One entry of the registry.
pub struct Kernel {
    /// Reported in events and used to force a kernel, e.g. `bitnet_gemv/avx2`.
    pub name: &'static CStr,
    pub weight: Format,
    pub act: Format,
    /// The CPU features the kernel needs, for humans.
    pub requires: &'static str,
    pub available: fn() -> bool,
    pub run: KernelFn,
}

impl Kernel {
    pub fn name(&self) -> &'static str {
        self.name.to_str().expect("kernel names are ASCII")
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({} x {})", self.name(), self.weight.name(), self.act.name())
    }
}

pub fn always() -> bool {
    true
}

/// Every kernel built into this library, best first within each (weight, act) pair.
pub fn registry() -> &'static [Kernel] {
    static REGISTRY: OnceLock<Vec<Kernel>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut all = arch::kernels();
        all.extend(reference::kernels());
        all
    })
}

/// Quantizes one activation row to I8_ABSMAX codes and returns its scale, bit-identical to
/// `format::i8_absmax::encode_row` (the definition).
pub type RequantRowFn = fn(&[f32], &mut [i8]) -> f32;

/// The fastest row requantizer this CPU runs.
pub fn requant_row() -> RequantRowFn {
    arch::requant_row().unwrap_or(crate::format::i8_absmax::encode_row)
}
