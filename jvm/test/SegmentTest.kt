// The MemorySegment forms of the API (JDK 22+ only: this file's class is loaded only there).
import java.lang.foreign.Arena
import java.lang.foreign.ValueLayout
import kotlin.test.assertContentEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertTrue
import tern.Dispatcher
import tern.Format
import tern.Gguf
import tern.Status
import tern.Tensor
import tern.decode
import tern.matmul
import tern.tensorSegment
import tern.wrap

fun segmentTests() = test("MemorySegment wrap, decode, matmul") {
    Arena.ofConfined().use { arena ->
        val weight = Tensor.encode(Format.TQ2_0, ternary(16, 256), 16, 256)
        val act = Tensor.encode(Format.F32, floats(2, 256), 2, 256)
        val bytes = weight.bytes()
        val segment = arena.allocate(bytes.size.toLong())
        segment.copyFrom(java.lang.foreign.MemorySegment.ofArray(bytes))
        Tensor.wrap(Format.TQ2_0, segment, 16, 256).use { wrapped ->
            val decoded = arena.allocate(ValueLayout.JAVA_FLOAT, 16 * 256)
            wrapped.decode(decoded)
            assertContentEquals(weight.decode(), decoded.toArray(ValueLayout.JAVA_FLOAT))
            Dispatcher(ignoreEnv = true).use { d ->
                val out = arena.allocate(ValueLayout.JAVA_FLOAT, 2 * 16)
                d.matmul(act, wrapped, out)
                assertContentEquals(d.matmul(act, weight), out.toArray(ValueLayout.JAVA_FLOAT))
                expectStatus(Status.LENGTH_MISMATCH) { d.matmul(act, wrapped, out.asSlice(0, 4L * 31)) }
                expectStatus(Status.INVALID_ARGUMENT) {
                    d.matmul(act, wrapped, java.lang.foreign.MemorySegment.ofArray(FloatArray(32)))
                }
            }
        }
        expectStatus(Status.INVALID_FILE) { Gguf.wrap(arena.allocate(64)) }
        expectStatus(Status.INVALID_ARGUMENT) { weight.decode(segment.asReadOnly()) }
        // A closed arena: refused, not read after it was freed.
        val gone = Arena.ofConfined()
        val goneBytes = gone.allocate(bytes.size.toLong()).copyFrom(java.lang.foreign.MemorySegment.ofArray(bytes))
        val orphan = Tensor.wrap(Format.TQ2_0, goneBytes, 16, 256)
        gone.close()
        expectStatus(Status.STALE_TENSOR) { orphan.decode() }
        Dispatcher(ignoreEnv = true).use { d -> expectStatus(Status.STALE_TENSOR) { d.matmul(act, orphan) } }
        orphan.close()
        expectStatus(Status.INVALID_ARGUMENT) { weight.decode(goneBytes) }
        weight.close()
        act.close()
    }
}

fun ggufSegmentTests(ggufDir: String) = test("GGUF tensor bytes as a MemorySegment") {
    val g = Gguf.open(java.io.File(ggufDir, "all_types.gguf").path)
    val f16 = g.tensors.first { it.ggmlType == 1 }
    val view = g.tensorSegment(f16.name)
    val buffer = g.tensorData(f16.index).bytes
    assertTrue(view.isReadOnly)
    assertContentEquals(ByteArray(buffer.remaining()).also { buffer.duplicate().get(it) }, view.toArray(ValueLayout.JAVA_BYTE))
    expectStatus(Status.OUT_OF_BOUNDS) { g.tensorSegment(g.size) }
    g.close()
    // After close: refused by the JVM, not a read of unmapped memory.
    assertFailsWith<IllegalStateException> { view.get(ValueLayout.JAVA_BYTE, 0) }
    expectStatus(Status.NULL_POINTER) { g.tensorSegment(0) }
}
