//! Events: what the library reports so that hidden costs are visible. Every adapter the
//! dispatcher inserts (with its byte price) and every kernel choice becomes an [`Event`]
//! delivered to the caller's [`EventSink`].

use crate::format::Format;
use std::ffi::CStr;
use std::sync::Mutex;

/// Stable kind ids of the C ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum EventKind {
    /// An activation was converted so that a kernel could consume it.
    AdapterInserted = 1,
    /// A kernel ran.
    KernelSelected = 2,
}

/// One report. For `AdapterInserted`: `name` is the adapter, `from`/`to` the formats,
/// `rows x cols` the converted tensor and `bytes` its size in `to`. For `KernelSelected`:
/// `name` is the kernel, `from` the weight format, `to` the activation format the kernel
/// consumed, `rows x cols` the output (tokens x weight rows), `bytes` the weight bytes read.
/// `nanos` is the wall time of the step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Adapter or kernel.
    pub kind: EventKind,
    /// The adapter's or kernel's name, e.g. `requantize-i8-absmax`, `bitnet_gemv/avx2`.
    pub name: &'static CStr,
    /// Adapter: the input format. Kernel: the weight format.
    pub from: Format,
    /// Adapter: the output format. Kernel: the activation format it consumed.
    pub to: Format,
    /// Adapter: rows of the converted tensor. Kernel: tokens of the output.
    pub rows: usize,
    /// Adapter: columns of the converted tensor. Kernel: weight rows (outputs per token).
    pub cols: usize,
    /// Adapter: bytes of its output (its price). Kernel: weight bytes read.
    pub bytes: usize,
    /// Wall time of the step.
    pub nanos: u64,
}

impl Event {
    /// [`Event::name`] as a `&str`.
    pub fn name(&self) -> &'static str {
        self.name.to_str().expect("event names are ASCII")
    }
}

/// Receives events. Events are delivered on the thread that called the operation, in the
/// order they happen (an adapter before the kernel it feeds). A sink shared by a
/// dispatcher that several threads use at once is called from all of them, hence `Sync`.
pub trait EventSink: Send + Sync {
    /// Called once per event, on the thread that ran the step.
    fn on_event(&self, event: &Event);
}

impl<F: Fn(&Event) + Send + Sync> EventSink for F {
    fn on_event(&self, event: &Event) {
        self(event)
    }
}

/// A sink that keeps every event, for tests and tools.
#[derive(Debug, Default)]
pub struct RecordingSink {
    events: Mutex<Vec<Event>>,
}

impl RecordingSink {
    /// A copy of the events received so far, oldest first.
    pub fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Forgets the events received so far.
    pub fn clear(&self) {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).clear()
    }
}

impl EventSink for RecordingSink {
    fn on_event(&self, event: &Event) {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).push(event.clone())
    }
}

pub(crate) fn emit(sink: Option<&dyn EventSink>, event: impl FnOnce() -> Event) {
    if let Some(sink) = sink {
        sink.on_event(&event())
    }
}
