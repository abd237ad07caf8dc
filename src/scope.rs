//! Scopes: caller-owned arenas for per-pass tensors (the requantized activations).
//!
//! Allocations are 64-byte aligned. `reset` frees everything at once and bumps a
//! generation; a tensor allocated before the reset sees the new generation and reports
//! [`Error::StaleTensor`] instead of reading memory that now belongs to someone else.
//! Memory is only reused when no tensor holds on to it (`Arc::get_mut`), so even a stale
//! tensor on another thread can never observe a later pass's bytes.

use crate::error::{Error, Result};
use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Alignment of every scope allocation, in bytes.
pub const ALIGN: usize = 64;

/// A 64-byte aligned block of raw memory owned by a scope (and, through `Arc`, by the
/// tensors carved out of it).
struct Chunk {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: a Chunk is plain heap memory. Mutable access happens only through
// `Scope::alloc_with`, which hands out each region once, before any tensor can see it;
// afterwards the region is only read.
unsafe impl Send for Chunk {}
// SAFETY: as above: shared access is read-only.
unsafe impl Sync for Chunk {}

impl Chunk {
    fn new(len: usize) -> Result<Chunk> {
        let layout = Layout::from_size_align(len.max(ALIGN), ALIGN).map_err(|_| Error::AllocationFailed(len))?;
        // SAFETY: the layout has non-zero size.
        let ptr = unsafe { alloc::alloc(layout) };
        NonNull::new(ptr).map(|ptr| Chunk { ptr, layout }).ok_or(Error::AllocationFailed(len))
    }

    fn len(&self) -> usize {
        self.layout.size()
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: allocated in `Chunk::new` with this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Counters a scope reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScopeStats {
    /// Bytes handed out since the last reset (requested sizes, without alignment padding).
    pub bytes_in_use: usize,
    /// The largest `bytes_in_use` ever reached.
    pub high_water: usize,
    /// Allocations since the last reset.
    pub allocations: usize,
    /// Bytes of memory the scope holds.
    pub capacity: usize,
    /// Bumped by every reset.
    pub generation: u64,
}

/// A caller-owned arena, one per thread or forward pass: allocating and resetting take
/// `&mut self`, so one thread at a time does. A shared `&Scope` only reads its statistics.
pub struct Scope {
    chunks: Vec<Arc<Chunk>>,
    /// Next free offset in the last chunk.
    offset: usize,
    generation: Arc<AtomicU64>,
    stats: ScopeStats,
}

/// Bytes allocated in a scope, valid while the scope's generation has not moved on.
pub(crate) struct ScopedBytes {
    chunk: Arc<Chunk>,
    offset: usize,
    len: usize,
    generation: u64,
    current: Arc<AtomicU64>,
}

impl ScopedBytes {
    pub(crate) fn get(&self) -> Result<&[u8]> {
        if self.current.load(Ordering::Acquire) != self.generation {
            return Err(Error::StaleTensor);
        }
        // SAFETY: the region [offset, offset + len) lies inside the chunk (checked when it
        // was carved), was fully written before this value existed, and is never written
        // again: the chunk is only reused once no ScopedBytes holds it.
        Ok(unsafe { std::slice::from_raw_parts(self.chunk.ptr.as_ptr().add(self.offset), self.len) })
    }
}

impl Scope {
    /// A scope that starts with `initial_bytes` of memory (0 allocates on first use).
    pub fn new(initial_bytes: usize) -> Result<Scope> {
        let chunks = if initial_bytes > 0 { vec![Arc::new(Chunk::new(initial_bytes)?)] } else { Vec::new() };
        let capacity = chunks.iter().map(|c| c.len()).sum();
        Ok(Scope {
            chunks,
            offset: 0,
            generation: Arc::new(AtomicU64::new(0)),
            stats: ScopeStats { capacity, ..ScopeStats::default() },
        })
    }

    /// Bytes in use, their high-water mark, allocations, capacity and resets so far.
    pub fn stats(&self) -> ScopeStats {
        self.stats
    }

    /// Allocates `len` bytes, lets `init` fill them (it sees zeroed memory), and returns
    /// them as scope-owned bytes. If `init` fails, the scope is left as it was.
    pub(crate) fn alloc_with<E>(
        &mut self,
        len: usize,
        init: impl FnOnce(&mut [u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<ScopedBytes, E>
    where
        E: From<Error>,
    {
        let fits = |chunk: &Chunk, offset: usize| offset.checked_add(len).is_some_and(|end| end <= chunk.len());
        let start = self.offset.next_multiple_of(ALIGN);
        let (chunk_index, start) = match self.chunks.last() {
            Some(last) if fits(last, start) => (self.chunks.len() - 1, start),
            _ => {
                let grow = self.chunks.last().map_or(0, |c| c.len() * 2);
                let chunk = Chunk::new(len.max(grow).next_multiple_of(ALIGN))?;
                self.stats.capacity += chunk.len();
                self.chunks.push(Arc::new(chunk));
                (self.chunks.len() - 1, 0)
            }
        };
        let chunk = &self.chunks[chunk_index];
        // SAFETY: [start, start + len) is inside the chunk and past every region handed
        // out in this generation; regions from earlier generations never share a chunk
        // with new ones unless no ScopedBytes refers to that chunk (see `reset`). So no
        // other reference to these bytes exists.
        let region = unsafe { std::slice::from_raw_parts_mut(chunk.ptr.as_ptr().add(start), len) };
        region.fill(0);
        init(region)?;
        self.offset = start + len;
        self.stats.bytes_in_use += len;
        self.stats.high_water = self.stats.high_water.max(self.stats.bytes_in_use);
        self.stats.allocations += 1;
        Ok(ScopedBytes {
            chunk: Arc::clone(chunk),
            offset: start,
            len,
            generation: self.stats.generation,
            current: Arc::clone(&self.generation),
        })
    }

    /// Frees every allocation at once. Tensors allocated before become stale.
    pub fn reset(&mut self) {
        self.stats.generation += 1;
        self.generation.store(self.stats.generation, Ordering::Release);
        // Keep the largest chunk nobody else holds, so a steady-state pass reuses it.
        let used: usize = self.chunks.iter().map(|c| c.len()).sum();
        let mut reusable: Vec<Arc<Chunk>> =
            self.chunks.drain(..).filter_map(|mut c| Arc::get_mut(&mut c).is_some().then_some(c)).collect();
        reusable.sort_by_key(|c| c.len());
        self.chunks = reusable.pop().into_iter().collect();
        // If last pass spilled over several chunks, start the next with one that fits it.
        if self.chunks.first().map_or(0, |c| c.len()) < used && used > 0 {
            self.chunks = Chunk::new(used).map(|c| vec![Arc::new(c)]).unwrap_or_default();
        }
        self.offset = 0;
        self.stats.bytes_in_use = 0;
        self.stats.allocations = 0;
        self.stats.capacity = self.chunks.iter().map(|c| c.len()).sum();
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        // Tensors that outlive their scope are stale too.
        self.generation.store(u64::MAX, Ordering::Release);
    }
}
