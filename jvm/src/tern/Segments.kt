package tern

import java.lang.foreign.MemorySegment

// The MemorySegment forms of the API (JDK 22+, either bridge). They live in this file's own
// class so that JDK 17 never loads a signature naming java.lang.foreign. The segment must be
// native memory whose arena stays open while tern uses it (for a tensor or a GGUF: until
// they are freed); it is kept reachable until then.

private fun native(segment: MemorySegment): MemorySegment {
    if (!segment.isNative) fail(Status.INVALID_ARGUMENT, "a heap MemorySegment: tern needs native memory (Arena.allocate)")
    return segment
}

/** Wraps the encoded bytes of [bytes] (all of it) without copying. */
fun Tensor.Companion.wrap(format: Format, bytes: MemorySegment, rows: Int, cols: Int): Tensor =
    wrapAddress(format, native(bytes).address(), bytes.byteSize(), rows, cols, bytes)

/** Parses the GGUF bytes of [bytes] (all of it) without copying. */
fun Gguf.Companion.wrap(bytes: MemorySegment): Gguf = openAt(native(bytes).address(), bytes.byteSize(), bytes)

/** Decodes into native memory holding at least rows * cols floats. */
fun Tensor.decode(out: MemorySegment) = alive(this, out) {
    check(bridge.tensorDecode(address, null, native(out).address(), out.byteSize() / 4))
}

/** [Dispatcher.matmul] into native memory holding at least m * n floats. */
@JvmOverloads
fun Dispatcher.matmul(act: Tensor, weight: Tensor, out: MemorySegment, scope: Scope? = null) =
    alive(out) { matmulAt(act, weight, native(out).address(), out.byteSize() / 4, scope) }
