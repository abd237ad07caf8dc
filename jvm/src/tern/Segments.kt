package tern

import java.lang.foreign.Arena
import java.lang.foreign.MemorySegment

// The MemorySegment forms of the API (JDK 22+, either bridge). They live in this file's own
// class so that JDK 17 never loads a signature naming java.lang.foreign. The segment must be
// native memory. A tensor or GGUF over it keeps it reachable (enough for Arena.ofAuto) and,
// once its arena is closed, fails with TERN_ERR_STALE_TENSOR instead of reading freed memory.

private fun native(segment: MemorySegment): MemorySegment {
    if (!segment.isNative) fail(Status.INVALID_ARGUMENT, "a heap MemorySegment: tern needs native memory (Arena.allocate)")
    if (!segment.scope().isAlive) fail(Status.INVALID_ARGUMENT, "a MemorySegment whose arena is closed")
    return segment
}

private fun output(segment: MemorySegment): MemorySegment {
    if (segment.isReadOnly) fail(Status.INVALID_ARGUMENT, "a read-only MemorySegment cannot receive output")
    return native(segment)
}

/** Wraps the encoded bytes of [bytes] (all of it) without copying. */
fun Tensor.Companion.wrap(format: Format, bytes: MemorySegment, rows: Int, cols: Int): Tensor =
    wrapAddress(format, native(bytes).address(), bytes.byteSize(), rows, cols, bytes, liveness(bytes))

/** Parses the GGUF bytes of [bytes] (all of it) without copying. */
fun Gguf.Companion.wrap(bytes: MemorySegment): Gguf =
    openAt(native(bytes).address(), bytes.byteSize(), bytes, liveness(bytes))

private fun liveness(segment: MemorySegment): () -> Boolean {
    val scope = segment.scope()
    return { scope.isAlive }
}

/** Decodes into native memory holding at least rows * cols floats. */
fun Tensor.decode(out: MemorySegment) = alive(this, out) {
    check(bridge.tensorDecode(address, null, output(out).address(), out.byteSize() / 4))
}

/** [Dispatcher.matmul] into native memory holding at least m * n floats. */
@JvmOverloads
fun Dispatcher.matmul(act: Tensor, weight: Tensor, out: MemorySegment, scope: Scope? = null) =
    alive(out) { matmulAt(act, weight, output(out).address(), out.byteSize() / 4, scope) }

/**
 * The bytes of tensor [index], of any ggml type, as a read-only MemorySegment over the file
 * without a copy ([Gguf.tensorData] gives the type). Unlike that ByteBuffer, the segment is
 * safe after the Gguf is closed or collected: access then throws IllegalStateException.
 */
fun Gguf.tensorSegment(index: Int): MemorySegment = alive(this) {
    val (address, length) = dataOf(index)
    val arena = Arena.ofShared()
    views.add(arena)
    MemorySegment.ofAddress(address).reinterpret(length, arena, null).asReadOnly()
}

/** The tensor named [name], as [tensorSegment]. */
fun Gguf.tensorSegment(name: String): MemorySegment = tensorSegment(find(name))
