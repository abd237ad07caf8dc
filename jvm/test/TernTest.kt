// The JVM library's test program (scripts/test-jvm.sh): run once per bridge, it checks the
// results against jvm/test/reference.c's (computed through tern.h from its own operands),
// every error path, the events, and that native memory stays flat under churn. Prints
// "N passed, N failed" last and exits non-zero on a failure.
//
// Usage: TernTestKt REFERENCE.bin GGUF_DIR EXPECTED_BRIDGE
import java.io.File
import java.nio.ByteBuffer
import java.nio.ByteOrder
import kotlin.system.exitProcess
import kotlin.test.assertContentEquals
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertNotNull
import kotlin.test.assertTrue
import tern.Dispatcher
import tern.Event
import tern.EventKind
import tern.Format
import tern.Gguf
import tern.GgufArray
import tern.GgufType
import tern.Scope
import tern.Status
import tern.Tensor
import tern.Tern
import tern.TernException

private var passed = 0
private var failed = 0

fun test(name: String, body: () -> Unit) {
    try {
        body()
        passed++
    } catch (t: Throwable) {
        failed++
        println("FAIL $name: $t")
        t.printStackTrace(System.out)
    }
}

/** Runs [block], which must fail with [status] and a message from tern (or the JVM layer). */
fun expectStatus(status: Int, block: () -> Unit): TernException {
    val e = assertFailsWith<TernException> { block() }
    assertEquals(status, e.status, "status of: ${e.message}")
    assertTrue(e.detail.isNotBlank(), "a message for ${e.message}")
    assertTrue(e.message!!.startsWith(TernException.statusName(status)), e.message)
    return e
}

/** A sentinel no tern call writes: a NaN payload. */
const val SENTINEL = 0x7fc0beef

fun sentinels(n: Int) = FloatArray(n) { Float.fromBits(SENTINEL) }
fun untouched(a: FloatArray) = assertTrue(a.all { it.toRawBits() == SENTINEL }, "output written on failure")
fun bits(a: FloatArray) = IntArray(a.size) { a[it].toRawBits() }
fun assertBits(expected: FloatArray, actual: FloatArray, what: String) =
    assertContentEquals(bits(expected), bits(actual), what)

/** Reads jvm/test/reference.c's output. */
class Reader(bytes: ByteArray) {
    private val b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN)
    fun u32() = b.int
    fun str() = String(ByteArray(u32()).also { b.get(it) }, Charsets.UTF_8)
    fun floats(n: Int) = FloatArray(n) { b.float }
    fun bytes(n: Int) = ByteArray(n).also { b.get(it) }
}

fun direct(floats: Int): ByteBuffer = ByteBuffer.allocateDirect(4 * floats).order(ByteOrder.nativeOrder())
fun ByteBuffer.floats() = FloatArray(capacity() / 4) { getFloat(4 * it) }

fun main(args: Array<String>) {
    val (referencePath, ggufDir, expectedBridge) = args
    println("tern ${Tern.versionString} through ${Tern.bridgeName} on JDK ${Runtime.version()}")
    test("bridge") { assertEquals(expectedBridge, Tern.bridgeName) }
    val r = Reader(File(referencePath).readBytes())

    val cVersion = r.u32()
    test("version") {
        assertEquals(cVersion, Tern.version)
        assertEquals("${cVersion shr 16}.${(cVersion shr 8) and 255}.${cVersion and 255}", Tern.versionString)
    }
    val kernelCount = r.u32()
    val cKernels = List(kernelCount) { listOf(r.str(), r.u32(), r.u32(), r.u32()) }
    test("kernel table") {
        val k = Tern.kernels()
        assertEquals(cKernels.map { it[0] }, k.map { it.name })
        assertEquals(cKernels.map { Format.of(it[1] as Int) }, k.map { it.weight })
        assertEquals(cKernels.map { Format.of(it[2] as Int) }, k.map { it.act })
        assertEquals(cKernels.map { it[3] == 1 }, k.map { it.available })
    }
    val forcedReferenceStatus = r.u32()
    test("forcing matmul/reference by name: as in C") {
        // Listed by tern_kernel_info (weight and act 0), and accepted by tern_dispatcher_new
        // (the forced matmul cases below run it).
        assertEquals(Status.OK, forcedReferenceStatus)
        Dispatcher(kernel = "matmul/reference").close()
    }

    val kernelsRun = sortedSetOf<String>()
    var matmuls = 0
    loop@ while (true) {
        when (val tag = r.u32()) {
            0 -> break@loop
            1 -> {
                val format = Format.of(r.u32())!!
                val rows = r.u32()
                val cols = r.u32()
                val src = r.floats(rows * cols)
                val bytes = r.bytes(r.u32())
                val decoded = r.floats(rows * cols)
                test("encode/decode $format") {
                    Tensor.encode(format, src, rows, cols).use { t ->
                        assertEquals(format, t.format)
                        assertContentEquals(bytes, t.bytes())
                        assertBits(decoded, t.decode(), "decode")
                        t.validate()
                        assertEquals(decoded[cols + 3].toRawBits(), t[1, 3].toRawBits())
                        // The same bytes wrapped without a copy decode the same.
                        val buffer = ByteBuffer.allocateDirect(bytes.size).put(bytes).flip() as ByteBuffer
                        Tensor.wrap(format, buffer, rows, cols).use { w ->
                            val out = direct(rows * cols)
                            w.decode(out)
                            assertBits(decoded, out.floats(), "wrapped decode into a direct buffer")
                        }
                    }
                }
            }
            2 -> {
                val kernel = r.str().ifEmpty { null }
                val threads = r.u32()
                val format = Format.of(r.u32())!!
                val m = r.u32()
                val n = r.u32()
                val k = r.u32()
                val a = r.floats(m * k)
                val w = r.floats(n * k)
                val expected = r.floats(m * n)
                matmuls++
                test("matmul ${kernel ?: "default"} $format m=$m threads=$threads") {
                    val events = mutableListOf<Event>()
                    Dispatcher(threads = threads, kernel = kernel, ignoreEnv = true, onEvent = { events += it }).use { d ->
                        Tensor.encode(Format.F32, a, m, k).use { act ->
                            Tensor.encode(format, w, n, k).use { weight ->
                                assertBits(expected, d.matmul(act, weight), "matmul into a new array")
                                val ran = events.last { it.kind == EventKind.KERNEL_SELECTED }
                                if (kernel != null) assertEquals(kernel, ran.name)
                                kernelsRun += ran.name
                                Scope().use { scope ->
                                    val out = direct(m * n)
                                    d.setOnEvent(null)
                                    d.matmul(act, weight, out, scope)
                                    assertBits(expected, out.floats(), "matmul into a direct buffer")
                                    val arr = FloatArray(m * n)
                                    d.matmul(act, weight, arr, scope)
                                    assertBits(expected, arr, "matmul into an array without a sink")
                                }
                            }
                        }
                    }
                }
            }
            3 -> {
                val count = r.u32()
                val m = r.u32()
                val k = r.u32()
                val a = r.floats(m * k)
                val parts = List(count) {
                    val n = r.u32()
                    Triple(n, r.floats(n * k), r.floats(m * n))
                }
                test("matmulMany") {
                    val events = mutableListOf<Event>()
                    Dispatcher(ignoreEnv = true, onEvent = { events += it }).use { d ->
                        Tensor.encode(Format.F32, a, m, k).use { act ->
                            val weights = parts.map { (n, w, _) -> Tensor.encode(Format.TQ2_0, w, n, k) }
                            val outs = d.matmulMany(act, weights)
                            parts.forEachIndexed { i, p -> assertBits(p.third, outs[i], "output $i") }
                            assertEquals(
                                listOf(EventKind.ADAPTER_INSERTED) + List(count) { EventKind.KERNEL_SELECTED },
                                events.map { it.kind },
                            )
                            val buffers = Array(count) { direct(m * parts[it].first) }
                            d.matmulMany(act, weights, buffers)
                            parts.forEachIndexed { i, p -> assertBits(p.third, buffers[i].floats(), "direct output $i") }
                            weights.forEach { it.close() }
                        }
                    }
                }
            }
            4 -> {
                val count = r.u32()
                val entries = List(count) {
                    val name = r.str()
                    val info = IntArray(9) { r.u32() }
                    Triple(name, info, r.floats(r.u32()))
                }
                test("gguf table and tensors") {
                    val path = File(ggufDir, "tiny_bitnet.gguf")
                    for (g in listOf(Gguf.open(path.path), Gguf.fromBytes(path.readBytes()))) g.use {
                        assertEquals(count, g.size)
                        g.tensors.forEachIndexed { i, t ->
                            val (name, info, decoded) = entries[i]
                            assertEquals(name, t.name)
                            assertEquals(i, g.find(name))
                            assertEquals(info[0], t.ggmlType)
                            assertEquals(Format.of(info[1]), t.format)
                            assertEquals(List(info[2]) { info[3 + it].toLong() }, t.dims)
                            assertEquals(info[7].toLong(), t.offset)
                            assertEquals(info[8].toLong(), t.bytes)
                            if (t.format != null) g.tensor(name).use { assertBits(decoded, it.decode(), name) }
                        }
                    }
                }
            }
            5 -> {
                val rows = r.u32()
                val cols = r.u32()
                val src = r.floats(rows * cols)
                val targets = List(r.u32()) { Format.of(r.u32())!! to r.bytes(r.u32()) }
                test("transcode") {
                    assertEquals(4, targets.size)
                    Tensor.encode(Format.BITNET_B1_58, src, rows, cols).use { t ->
                        val decoded = t.decode()
                        for ((format, bytes) in targets) {
                            t.transcode(format).use { u ->
                                assertEquals(format, u.format)
                                assertContentEquals(bytes, u.bytes(), "$format bytes")
                                assertBits(decoded, u.decode(), "$format decodes as the source")
                                u.validate()
                                // And back: lossless.
                                u.transcode(Format.BITNET_B1_58).use { back -> assertContentEquals(t.bytes(), back.bytes()) }
                            }
                        }
                    }
                }
            }
            6 -> metaRecord(r, ggufDir)
            else -> error("unknown record $tag")
        }
    }
    println("compared $matmuls matmuls against the C API; kernels run: ${kernelsRun.joinToString()}")
    test("every available kernel was run") {
        val available = cKernels.filter { it[3] == 1 && it[1] != 0 }.map { it[0] as String }.toSet()
        assertEquals(available, kernelsRun - "matmul/reference")
        assertTrue("matmul/reference" in kernelsRun)
    }

    errorTests(ggufDir)
    eventTests()
    if (Runtime.version().feature() >= 22) {
        segmentTests()
        ggufSegmentTests(ggufDir)
    }
    memoryTests()
    println("$passed passed, $failed failed")
    exitProcess(if (failed == 0) 0 else 1)
}

/** The value of a metadata entry as reference.c wrote it, in the Kotlin type the API gives it. */
fun readValue(r: Reader, type: GgufType): Any = when (type) {
    GgufType.STRING -> String(r.bytes(r.u32()), Charsets.UTF_8)
    GgufType.ARRAY -> {
        val elementType = GgufType.of(r.u32())!!
        val n = r.u32()
        if (elementType == GgufType.ARRAY) {
            Triple(elementType, n, null)
        } else {
            Triple(elementType, n, List(n) { readValue(r, elementType) } to r.u32())
        }
    }
    else -> decodeBits(type, r.u32().toLong() and 0xFFFF_FFFFL or (r.u32().toLong() shl 32))
}

/** reference.c's bits of a scalar, decoded independently of the library's own decoding. */
fun decodeBits(type: GgufType, bits: Long): Any = when (type) {
    GgufType.UINT8 -> bits.toInt().toUByte()
    GgufType.INT8 -> bits.toInt().toByte()
    GgufType.UINT16 -> bits.toInt().toUShort()
    GgufType.INT16 -> bits.toInt().toShort()
    GgufType.UINT32 -> bits.toUInt()
    GgufType.INT32 -> bits.toInt()
    GgufType.FLOAT32 -> Float.fromBits(bits.toInt())
    GgufType.BOOL -> bits == 1L
    GgufType.UINT64 -> bits.toULong()
    GgufType.INT64 -> bits
    GgufType.FLOAT64 -> Double.fromBits(bits)
    else -> error("not a scalar: $type")
}

/** A GGUF's metadata, tensor bytes and slices as reference.c read them through tern.h. */
fun metaRecord(r: Reader, ggufDir: String) {
    val file = r.str()
    class Entry(val key: String, val type: GgufType, val value: Any, val wrongStatus: Int)
    val entries = List(r.u32()) {
        val key = String(r.bytes(r.u32()), Charsets.UTF_8)
        val type = GgufType.of(r.u32())!!
        Entry(key, type, readValue(r, type), r.u32())
    }
    val missingStatus = r.u32()
    class Slice(val rows: Int, val cols: Int, val decoded: FloatArray)
    class TensorRecord(val name: String, val ggmlType: Int, val bytes: ByteArray, val slices: List<Slice>, val pastEnd: Int?)
    val tensors = List(r.u32()) {
        val name = r.str()
        val ggmlType = r.u32()
        val bytes = r.bytes(r.u32())
        val slices = List(r.u32()) {
            val rows = r.u32()
            val cols = r.u32()
            Slice(rows, cols, r.floats(rows * cols))
        }
        TensorRecord(name, ggmlType, bytes, slices, if (slices.isEmpty()) null else r.u32())
    }
    val dataPastEnd = r.u32()
    val path = File(ggufDir, file)

    /** Compares one entry's value (as reference.c read it) with the library's. */
    fun assertValue(expected: Any, actual: Any, what: String) {
        if (expected !is Triple<*, *, *>) {
            assertEquals(expected, actual, what)
            assertEquals(expected::class, actual::class, "Kotlin type of $what")
            return
        }
        val array = actual as GgufArray
        assertEquals(expected.first, array.elementType, "element type of $what")
        assertEquals(expected.second, array.size, "length of $what")
        if (array.elementType == GgufType.ARRAY) {
            expectStatus(Status.UNSUPPORTED) { array[0] }
            return
        }
        @Suppress("UNCHECKED_CAST")
        val (elements, pastEnd) = expected.third as Pair<List<Any>, Int>
        elements.forEachIndexed { i, e -> assertValue(e, array[i], "$what[$i]") }
        expectStatus(pastEnd) { array[array.size] }
        expectStatus(Status.OUT_OF_BOUNDS) { array[-1] }
    }

    test("metadata of $file") {
        assertTrue(entries.size >= 3, "reference.c read the metadata")
        Gguf.open(path.path).use { g ->
            assertEquals(entries.map { it.key }, g.metadata.keys.toList())
            for (e in entries) {
                assertValue(e.value, g.metadata.getValue(e.key), e.key)
                assertValue(e.value, g.metadata(e.key), e.key)
                assertValue(e.value, g.metadata(e.key, e.type), e.key)
                assertEquals(e.type, g.metadataType(e.key))
                // Read as another type: refused by tern's typed getter, with its status.
                val wrong = if (e.type == GgufType.UINT32) GgufType.FLOAT32 else GgufType.UINT32
                val x = expectStatus(e.wrongStatus) { g.metadata(e.key, wrong) }
                assertTrue(e.key in x.detail, "the message names the key: ${x.detail}")
            }
            assertEquals(Status.INVALID_ARGUMENT, entries.first().wrongStatus)
            assertEquals(Status.NOT_FOUND, missingStatus)
            expectStatus(missingStatus) { g.metadata("no.such.key") }
            expectStatus(missingStatus) { g.metadata("no.such.key", GgufType.UINT32) }
            expectStatus(Status.INVALID_ARGUMENT) { g.metadata("a\u0000b") }
        }
    }

    test("tensor data and slices of $file") {
        assertTrue(tensors.isNotEmpty(), "reference.c read the tensors")
        Gguf.open(path.path).use { g ->
            assertEquals(tensors.size, g.size)
            tensors.forEachIndexed { i, t ->
                val data = g.tensorData(t.name)
                assertEquals(t.ggmlType, data.ggmlType, t.name)
                assertEquals(g.tensors[i].ggmlType, data.ggmlType)
                assertTrue(data.bytes.isReadOnly && data.bytes.isDirect)
                assertContentEquals(t.bytes, ByteArray(data.bytes.remaining()).also { data.bytes.duplicate().get(it) }, t.name)
                t.slices.forEachIndexed { s, slice ->
                    g.slice(t.name, s).use { w ->
                        assertEquals(slice.rows to slice.cols, w.rows to w.cols)
                        assertBits(slice.decoded, w.decode(), "${t.name} slice $s")
                    }
                }
                t.pastEnd?.let { status ->
                    assertEquals(Status.OUT_OF_BOUNDS, status)
                    expectStatus(status) { g.slice(i, t.slices.size) }
                }
            }
            assertEquals(Status.OUT_OF_BOUNDS, dataPastEnd)
            expectStatus(dataPastEnd) { g.tensorData(tensors.size) }
        }
    }
}

fun ternary(rows: Int, cols: Int) = FloatArray(rows * cols) { ((it * 7) % 3 - 1).toFloat() }
fun floats(rows: Int, cols: Int) = FloatArray(rows * cols) { (it % 13) * 0.25f - 1.5f }

fun errorTests(ggufDir: String) {
    val weight = Tensor.encode(Format.TQ2_0, ternary(16, 256), 16, 256)
    val act = Tensor.encode(Format.F32, floats(2, 256), 2, 256)
    val d = Dispatcher(ignoreEnv = true)

    test("closed handles: refused before tern, naming the handle, nothing written") {
        fun closed(what: String, block: () -> Unit) {
            val e = expectStatus(Status.NULL_POINTER) { block() }
            assertEquals("this $what is closed", e.detail)
        }
        val t = Tensor.encode(Format.TQ1_0, ternary(4, 256), 4, 256)
        t.close()
        t.close() // idempotent
        assertTrue(t.isClosed)
        val out = sentinels(4 * 256)
        closed("Tensor") { t.decode(out) }
        untouched(out)
        closed("Tensor") { t[0, 0] }
        closed("Tensor") { t.validate() }
        closed("Tensor") { t.bytes() }
        closed("Tensor") { t.transcode(Format.I2_S) }
        val mm = sentinels(2 * 4)
        closed("Tensor") { d.matmul(act, t, mm) }
        untouched(mm)
        closed("Tensor") { d.matmulMany(act, listOf(weight, t), listOf(sentinels(32), mm)) }
        untouched(mm)
        val closedD = Dispatcher()
        closedD.close()
        val mm2 = sentinels(2 * 16)
        closed("Dispatcher") { closedD.matmul(act, weight, mm2) }
        untouched(mm2)
        closed("Dispatcher") { closedD.setOnEvent(null) }
        val s = Scope()
        s.close()
        closed("Scope") { s.reset() }
        closed("Scope") { s.stats() }
        closed("Scope") { s.requantize(act) }
        // A closed scope is refused as closed (tern would see NULL and report SCOPE_REQUIRED).
        val mm3 = sentinels(2 * 16)
        closed("Scope") { d.matmul(act, weight, mm3, s) }
        untouched(mm3)
        val g = Gguf.open(File(ggufDir, "all_types.gguf").path)
        val tokens = g.metadata.values.first { it is GgufArray && it.elementType == GgufType.STRING } as GgufArray
        g.close()
        closed("Gguf") { g.find("token_embd.weight") }
        closed("Gguf") { g.tensor(0) }
        closed("Gguf") { g.slice(0, 0) }
        closed("Gguf") { g.tensorData(0) }
        closed("Gguf") { g.size }
        closed("Gguf") { g.metadata("general.architecture") }
        closed("Gguf") { tokens[0] }
    }

    test("wrong lengths: nothing written") {
        val out = sentinels(16 * 256 - 1)
        expectStatus(Status.LENGTH_MISMATCH) { weight.decode(out) }
        untouched(out)
        val mm = sentinels(2 * 16 - 1)
        expectStatus(Status.LENGTH_MISMATCH) { d.matmul(act, weight, mm) }
        untouched(mm)
        val buf = direct(2 * 16 - 1)
        expectStatus(Status.LENGTH_MISMATCH) { d.matmul(act, weight, buf) }
        expectStatus(Status.LENGTH_MISMATCH) { Tensor.encode(Format.TQ2_0, ternary(16, 256), 16, 512) }
        expectStatus(Status.LENGTH_MISMATCH) {
            Tensor.wrap(Format.TQ2_0, ByteBuffer.allocateDirect(16 * 66 - 1), 16, 256)
        }
        val outs = listOf(sentinels(2 * 16), sentinels(2 * 16 - 1))
        expectStatus(Status.LENGTH_MISMATCH) { d.matmulMany(act, listOf(weight, weight), outs) }
        outs.forEach { untouched(it) }
        expectStatus(Status.LENGTH_MISMATCH) { d.matmulMany(act, listOf(weight, weight), listOf(sentinels(32))) }
        expectStatus(Status.INVALID_ARGUMENT) { d.matmulMany(act, emptyList(), emptyList<FloatArray>()) }
    }

    test("buffers tern cannot borrow") {
        expectStatus(Status.INVALID_ARGUMENT) { Tensor.wrap(Format.TQ2_0, ByteBuffer.allocate(16 * 66), 16, 256) }
        val bigEndian = ByteBuffer.allocateDirect(4 * 32).order(
            if (ByteOrder.nativeOrder() == ByteOrder.BIG_ENDIAN) ByteOrder.LITTLE_ENDIAN else ByteOrder.BIG_ENDIAN,
        )
        expectStatus(Status.INVALID_ARGUMENT) { d.matmul(act, weight, bigEndian) }
        expectStatus(Status.INVALID_ARGUMENT) { d.matmul(act, weight, direct(32).asReadOnlyBuffer()) }
        expectStatus(Status.INVALID_ARGUMENT) { Gguf.open("a\u0000b") }
    }

    test("shapes, values and bounds") {
        expectStatus(Status.INVALID_SHAPE) { Tensor.encode(Format.TQ2_0, ternary(2, 100), 2, 100) }
        expectStatus(Status.INVALID_SHAPE) { Tensor.encode(Format.F32, FloatArray(0), 0, 0) }
        expectStatus(Status.NON_FINITE) { Tensor.encode(Format.F32, floatArrayOf(1f, Float.NaN), 1, 2) }
        expectStatus(Status.OUT_OF_BOUNDS) { weight[16, 0] }
        expectStatus(Status.OUT_OF_BOUNDS) { weight[-1, 0] }
        Tensor.encode(Format.F32, floats(2, 512), 2, 512).use { wrongK ->
            val mm = sentinels(2 * 16)
            expectStatus(Status.SHAPE_MISMATCH) { d.matmul(wrongK, weight, mm) }
            untouched(mm)
        }
        val corrupt = ByteBuffer.allocateDirect(66)
        while (corrupt.hasRemaining()) corrupt.put(0xFF.toByte())
        corrupt.flip()
        Tensor.wrap(Format.TQ2_0, corrupt, 1, 256).use { expectStatus(Status.CORRUPT_CODE) { it.validate() } }
    }

    test("transcode and GGUF refusals") {
        Tensor.encode(Format.BITNET_B1_58, ternary(6, 256), 6, 256).use { b ->
            expectStatus(Status.INVALID_SHAPE) { b.transcode(Format.I2_S_R4) } // rows % 4
            expectStatus(Status.INVALID_ARGUMENT) { weight.transcode(Format.I2_S) } // TQ2_0: not that family
        }
        Tensor.encode(Format.BITNET_B1_58, ternary(4, 64), 4, 64).use { b ->
            expectStatus(Status.INVALID_SHAPE) { b.transcode(Format.I2_S) } // cols % 128
        }
        val corrupt = ByteBuffer.allocateDirect(4 * 256 / 4 + 4)
        while (corrupt.hasRemaining()) corrupt.put(0xFF.toByte())
        corrupt.flip()
        Tensor.wrap(Format.BITNET_B1_58, corrupt, 4, 256).use { expectStatus(Status.CORRUPT_CODE) { it.transcode(Format.I2_S) } }
        Gguf.open(File(ggufDir, "all_types.gguf").path).use { g ->
            expectStatus(Status.INVALID_SHAPE) { g.tensor("ffn_up_exps.weight") } // 3-D: slice() it
            val f16 = g.tensors.first { it.ggmlType == 1 }
            expectStatus(Status.UNSUPPORTED) { g.tensor(f16.index) }
            assertEquals(f16.bytes, g.tensorData(f16.index).bytes.remaining().toLong())
            expectStatus(Status.INVALID_ARGUMENT) { g.metadata("general.architecture", GgufType.ARRAY) }
            expectStatus(Status.INVALID_ARGUMENT) { g.metadata("test.array.str", GgufType.STRING) }
        }
    }

    test("stale scope tensor") {
        Scope().use { scope ->
            val q = scope.requantize(act)
            assertEquals(Format.I8_ABSMAX, q.format)
            q.decode()
            assertEquals(1L, scope.stats().allocations)
            scope.reset()
            assertEquals(1L, scope.stats().generation)
            val out = sentinels(2 * 256)
            expectStatus(Status.STALE_TENSOR) { q.decode(out) }
            untouched(out)
            val mm = sentinels(2 * 16)
            expectStatus(Status.STALE_TENSOR) { d.matmul(q, weight, mm) }
            untouched(mm)
            q.close()
        }
    }

    test("dispatcher options and strict refusals") {
        expectStatus(Status.UNKNOWN_KERNEL) { Dispatcher(kernel = "no/such-kernel") }
        expectStatus(Status.INVALID_ARGUMENT) { Dispatcher(threads = 5000) }
        expectStatus(Status.INVALID_ARGUMENT) { Dispatcher(kernel = "bitnet\u0000gemv") }
        Tern.kernels().firstOrNull { !it.available && it.weight != null }?.let { k ->
            expectStatus(Status.KERNEL_UNAVAILABLE) {
                Dispatcher(kernel = k.name).use { it.matmul(act, Tensor.encode(k.weight!!, ternary(16, 256), 16, 256)) }
            }
        }
        // Swapped operands: a ternary activation against an F32 weight has no dedicated kernel.
        Tensor.encode(Format.TQ2_0, ternary(2, 256), 2, 256).use { tAct ->
            Tensor.encode(Format.F32, floats(16, 256), 16, 256).use { fWeight ->
                Dispatcher(strict = true, ignoreEnv = true).use { strict ->
                    val mm = sentinels(2 * 16)
                    expectStatus(Status.UNSUPPORTED) { strict.matmul(tAct, fWeight, mm) }
                    untouched(mm)
                }
                assertEquals(32, d.matmul(tAct, fWeight).size) // the lenient one falls back
            }
        }
    }

    test("bad GGUF") {
        expectStatus(Status.INVALID_FILE) { Gguf.fromBytes(ByteArray(0)) }
        expectStatus(Status.INVALID_FILE) { Gguf.fromBytes("GGUF not really a file".toByteArray()) }
        val good = File(ggufDir, "tiny_bitnet.gguf").readBytes()
        expectStatus(Status.INVALID_FILE) { Gguf.fromBytes(good.copyOf(good.size / 2)) }
        expectStatus(Status.IO) { Gguf.open("/nonexistent/tern.gguf") }
        Gguf.open(File(ggufDir, "tiny_bitnet.gguf").path).use { g ->
            expectStatus(Status.NOT_FOUND) { g.find("no.such.tensor") }
            expectStatus(Status.OUT_OF_BOUNDS) { g.tensor(g.size) }
        }
    }

    test("callback exceptions reach the caller") {
        val boom = IllegalStateException("from the callback")
        Dispatcher(ignoreEnv = true, onEvent = { throw boom }).use { cb ->
            val thrown = assertFailsWith<IllegalStateException> { cb.matmul(act, weight) }
            assertTrue(thrown === boom)
            // Thrown once: the next call starts clean (and throws anew).
            assertTrue(assertFailsWith<IllegalStateException> { cb.matmul(act, weight) } === boom)
            cb.setOnEvent(null)
            assertEquals(32, cb.matmul(act, weight).size)
        }
    }
    d.close()
    act.close()
    weight.close()
}

fun eventTests() = test("events") {
    val events = mutableListOf<Event>()
    Dispatcher(ignoreEnv = true, onEvent = { events += it }).use { d ->
        Tensor.encode(Format.F32, floats(3, 512), 3, 512).use { act ->
            Tensor.encode(Format.TQ1_0, ternary(24, 512), 24, 512).use { w ->
                d.matmul(act, w)
            }
        }
    }
    assertEquals(2, events.size)
    val (adapter, kernel) = events
    assertEquals(EventKind.ADAPTER_INSERTED, adapter.kind)
    assertEquals("requantize-i8-absmax", adapter.name)
    assertEquals(Format.F32, adapter.from)
    assertEquals(Format.I8_ABSMAX, adapter.to)
    assertEquals(3L to 512L, adapter.rows to adapter.cols)
    assertEquals(3L * 512 + 4 * 3, adapter.bytes)
    assertEquals(EventKind.KERNEL_SELECTED, kernel.kind)
    assertEquals(Format.TQ1_0, kernel.from)
    assertEquals(Format.I8_ABSMAX, kernel.to)
    assertEquals(3L to 24L, kernel.rows to kernel.cols)
    assertNotNull(Tern.kernels().firstOrNull { it.name == kernel.name && it.weight == Format.TQ1_0 })
}

/** Resident memory of this process, in KiB. */
fun rssKiB(): Long = File("/proc/self/status").readLines().first { it.startsWith("VmRSS:") }
    .split(Regex("\\s+"))[1].toLong()

/**
 * Runs [cycles] warm-up cycles and then [cycles] measured ones; returns RSS (KiB) after the
 * warm-up, half-way and at the end. The warm-up lets malloc's arenas and the JIT's own memory
 * (C2 compiles late and keeps its arenas) settle; the measured cycles must leave RSS flat.
 * A GC every 500 cycles: the JVM cannot see native memory, so without collections the
 * Cleaner of dropped handles would run only when the JVM heap itself fills up.
 */
fun churn(cycles: Int, cycle: (Int) -> Unit): List<Long> {
    fun settled(): Long {
        repeat(2) { System.gc(); Thread.sleep(100) }
        return rssKiB()
    }
    val rss = mutableListOf<Long>()
    for (i in 1..2 * cycles) {
        cycle(i)
        if (i % 500 == 0) System.gc()
        if (i == cycles || i == cycles * 3 / 2 || i == 2 * cycles) rss += settled()
    }
    return rss
}

fun memoryTests() {
    // Fewer under emulation, with more slack: qemu's own translation cache grows with the
    // code HotSpot compiles (scripts/test-jvm.sh passes 400 and 16 for aarch64 under qemu).
    val cycles = System.getProperty("tern.test.cycles")?.toInt() ?: 10_000
    val slackKiB = 1024 * (System.getProperty("tern.test.rss-slack-mib")?.toInt() ?: 32)
    // Each cycle allocates about 60 KB of native memory: a 4 x 1024 F32 activation, a 64 x 1024
    // TQ2_0 weight, a scope with the requantized activation, a 26 KB copy of a GGUF.
    val a = floats(4, 1024)
    val w = ternary(64, 1024)
    val g = File(System.getProperty("tern.test.gguf")).readBytes()
    val closed = churn(cycles) {
        Dispatcher(ignoreEnv = true).use { d ->
            Scope().use { s ->
                Tensor.encode(Format.F32, a, 4, 1024).use { act ->
                    Tensor.encode(Format.TQ2_0, w, 64, 1024).use { weight ->
                        d.matmul(act, weight, s)
                        s.requantize(act).close()
                    }
                }
            }
        }
        Gguf.fromBytes(g).use { it.tensor(0).close() }
    }
    var events = 0
    val dropped = churn(cycles) {
        // With a callback: its native registration must not keep the dispatcher reachable.
        val d = Dispatcher(ignoreEnv = true, onEvent = { events++ })
        val s = Scope()
        val act = Tensor.encode(Format.F32, a, 4, 1024)
        d.matmul(act, Tensor.encode(Format.TQ2_0, w, 64, 1024), s)
        s.requantize(act)
        Gguf.fromBytes(g).tensor(0)
    }
    test("dropped dispatchers reported events") { assertEquals(4 * cycles, events) }
    for ((what, rss) in listOf("create/use/close" to closed, "dropped-without-close" to dropped)) {
        val (first, middle, last) = rss.map { it / 1024 }
        println(
            "memory: $cycles $what cycles after as many for warm-up: RSS $first MiB at the start, " +
                "$middle MiB half-way, $last MiB at the end",
        )
        // A cycle's leaked handles would add about 60 KB per measured cycle (600 MiB for 10,000).
        test("$what: RSS flat") { assertTrue(rss[2] - rss[0] < slackKiB, "grew ${rss[2] - rss[0]} KiB over $cycles cycles") }
    }
}
