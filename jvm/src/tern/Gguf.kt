package tern

import java.nio.ByteBuffer
import java.nio.ByteOrder

/** A GGUF tensor's header entry (`tern_gguf_tensor_info`); [dims] are ggml's `ne`, the contiguous one first. */
data class GgufTensorInfo(
    val index: Int, val name: String, val ggmlType: Int, val format: Format?,
    val dims: List<Long>, val offset: Long, val bytes: Long,
)

/**
 * The type of a GGUF metadata value (`TERN_GGUF_TYPE_*`, GGUF's own numbers), and the Kotlin
 * type [Gguf.metadata] gives it: UINT8/16/32/64 as [UByte]/[UShort]/[UInt]/[ULong] (exact:
 * no unsigned value turns negative; Java sees them boxed as kotlin.UInt etc.), INT8/16/32/64
 * as [Byte]/[Short]/[Int]/[Long], FLOAT32/64 as [Float]/[Double], BOOL as [Boolean], STRING
 * as [String] (decoded as UTF-8), ARRAY as a [GgufArray].
 */
enum class GgufType(val id: Int) {
    UINT8(0), INT8(1), UINT16(2), INT16(3), UINT32(4), INT32(5), FLOAT32(6), BOOL(7),
    STRING(8), ARRAY(9), UINT64(10), INT64(11), FLOAT64(12);

    /** Bytes of a scalar's C type; 0 for STRING and ARRAY. */
    internal val width: Int
        get() = when (this) {
            UINT8, INT8, BOOL -> 1
            UINT16, INT16 -> 2
            UINT32, INT32, FLOAT32 -> 4
            UINT64, INT64, FLOAT64 -> 8
            STRING, ARRAY -> 0
        }

    /** A scalar from the bits a bridge read (zero-extended to 64; floats as IEEE bits). */
    internal fun decode(bits: Long): Any = when (this) {
        UINT8 -> bits.toUByte()
        INT8 -> bits.toByte()
        UINT16 -> bits.toUShort()
        INT16 -> bits.toShort()
        UINT32 -> bits.toUInt()
        INT32 -> bits.toInt()
        FLOAT32 -> Float.fromBits(bits.toInt())
        BOOL -> bits != 0L
        UINT64 -> bits.toULong()
        INT64 -> bits
        FLOAT64 -> Double.fromBits(bits)
        STRING, ARRAY -> throw IllegalArgumentException("$this is not a scalar")
    }

    companion object {
        /** The type with GGUF number [id], or null. */
        @JvmStatic
        fun of(id: Int): GgufType? = entries.firstOrNull { it.id == id }
    }
}

/**
 * A metadata array of a [Gguf] (e.g. a tokenizer's tokens), read element by element from the
 * file without a copy of the whole array (`tern_gguf_kv_array_get_*`, constant time). Each
 * access needs its Gguf open: on a closed one it fails with TERN_ERR_NULL_POINTER. A bad index
 * fails with TERN_ERR_OUT_OF_BOUNDS (a [TernException], not an IndexOutOfBoundsException).
 * Elements of an array of arrays are not readable (tern gives their type and length only):
 * TERN_ERR_UNSUPPORTED.
 */
class GgufArray internal constructor(
    private val gguf: Gguf, private val entry: Long, val elementType: GgufType, override val size: Int,
) : AbstractList<Any>() {
    override fun get(index: Int): Any = gguf.element(entry, index, elementType)
}

/** The bytes of a GGUF tensor of any ggml type ([Gguf.tensorData]); keeps its Gguf reachable. */
class GgufTensorData internal constructor(
    /** ggml's type id (0 F32, 1 F16, 8 Q8_0, 30 BF16, 35 TQ2_0, ...). */
    val ggmlType: Int,
    /**
     * A read-only, little-endian view of the bytes in the file's mapping (or the bytes the Gguf
     * was opened on), not a copy. It is valid only while its [Gguf] is open, as in C: reading
     * it after close() reads unmapped memory (copy what must outlive the Gguf; on JDK 22+,
     * `tensorSegment` gives a view that fails safely instead). Hold this
     * object, not only the buffer: it keeps the Gguf from being collected (and freed).
     */
    val bytes: ByteBuffer,
    @Suppress("unused") private val gguf: Gguf,
)

/**
 * What the MemorySegment views of tensor data hold open (their arenas, see Segments.kt):
 * closed before the handle is freed, so that a view used after close() fails instead of
 * reading unmapped memory.
 */
internal class GgufViews : AutoCloseable {
    private val open = mutableListOf<AutoCloseable>()

    @Synchronized
    fun add(view: AutoCloseable) {
        open += view
    }

    @Synchronized
    override fun close() {
        open.forEach { it.close() }
        open.clear()
    }
}

/**
 * A parsed GGUF file (`tern_gguf`) over a read-only mapping of the file or over the caller's
 * bytes. Tensors from [tensor] wrap the file's bytes without copying and may outlive it.
 * Thread-safety: reads from many threads at once; close() must not race with any other use.
 */
class Gguf private constructor(ref: NativeRef, internal val views: GgufViews) : Handle(ref) {
    /** The tensor table, in file order. */
    val tensors: List<GgufTensorInfo> by lazy { alive(this) { (0 until size).map { info(it) } } }

    /** The number of tensors. */
    val size: Int get() = alive(this) { bridge.ggufCount(address).toInt() }

    /**
     * Every metadata entry, in file order: key -> value, typed as [GgufType] says (arrays are
     * [GgufArray]s, read on access). Read once, on first use.
     */
    val metadata: Map<String, Any> by lazy {
        alive(this) {
            (0L until bridge.ggufKvCount(address)).associate { i ->
                val key = LongArray(2)
                check(bridge.ggufKvKey(address, i, key))
                utf8(key) to value(i, null)
            }
        }
    }

    /** The value of [key] (typed as in [metadata]); TERN_ERR_NOT_FOUND if no entry has it. */
    fun metadata(key: String): Any = alive(this) { value(kvFind(key), null) }

    /**
     * The value of [key] if it has [type] (`tern_gguf_kv_get_<type>`, `_array_len` for ARRAY):
     * another type fails with TERN_ERR_INVALID_ARGUMENT, tern's message naming both (no
     * conversion is made, not even between widths); a missing key with TERN_ERR_NOT_FOUND.
     */
    fun metadata(key: String, type: GgufType): Any = alive(this) { value(kvFind(key), type) }

    /** The type of [key]'s value (`tern_gguf_kv_type`). */
    fun metadataType(key: String): GgufType = alive(this) { type(kvFind(key)) }

    private fun kvFind(key: String): Long {
        val out = LongArray(1)
        check(bridge.ggufKvFind(address, cString(key, "metadata key"), out))
        return out[0]
    }

    private fun type(entry: Long): GgufType {
        val out = LongArray(1)
        check(bridge.ggufKvType(address, entry, out))
        return GgufType.of(out[0].toInt()) ?: fail(Status.UNSUPPORTED, "GGUF value type ${out[0]} is newer than this library")
    }

    private fun value(entry: Long, expected: GgufType?): Any {
        val out = LongArray(2)
        return when (val type = expected ?: type(entry)) {
            GgufType.ARRAY -> {
                check(bridge.ggufKvArrayLen(address, entry, out))
                if (out[1] > Int.MAX_VALUE) fail(Status.SIZE_OVERFLOW, "an array of ${out[1]} elements does not fit a JVM list")
                val elementType = GgufType.of(out[0].toInt())
                    ?: fail(Status.UNSUPPORTED, "GGUF value type ${out[0]} is newer than this library")
                GgufArray(this, entry, elementType, out[1].toInt())
            }
            else -> {
                check(bridge.ggufKvGet(address, entry, type.id, out))
                if (type == GgufType.STRING) utf8(out) else type.decode(out[0])
            }
        }
    }

    internal fun element(entry: Long, index: Int, type: GgufType): Any = alive(this) {
        if (type == GgufType.ARRAY) fail(Status.UNSUPPORTED, "tern reads only the type and length of a nested array")
        val out = LongArray(2)
        check(bridge.ggufKvArrayGet(address, entry, index.toLong(), type.id, out))
        if (type == GgufType.STRING) utf8(out) else type.decode(out[0])
    }

    /** The UTF-8 text at (address, length) = ([out] 0, 1), in the file. */
    private fun utf8(out: LongArray) = String(bridge.copyBytes(out[0], out[1]), Charsets.UTF_8)

    /**
     * The bytes of tensor [index] whatever its ggml type (F16, BF16, Q8_0, ... as well as
     * tern's formats), without a copy (`tern_gguf_tensor_data`). TERN_ERR_UNKNOWN_FORMAT for a
     * ggml type tern does not know the size of. See [GgufTensorData.bytes] for its lifetime.
     */
    fun tensorData(index: Int): GgufTensorData = alive(this) {
        val (address, length, type) = dataOf(index)
        val bytes = bridge.directBuffer(address, length).asReadOnlyBuffer().order(ByteOrder.LITTLE_ENDIAN)
        GgufTensorData(type.toInt(), bytes, this)
    }

    /** (address, length, ggml type) of tensor [index]'s bytes (`tern_gguf_tensor_data`). */
    internal fun dataOf(index: Int): LongArray {
        val out = LongArray(3)
        check(bridge.ggufTensorData(address, index.toLong(), out))
        if (out[1] > Int.MAX_VALUE) fail(Status.SIZE_OVERFLOW, "${out[1]} bytes do not fit a ByteBuffer")
        return out
    }

    /** The tensor named [name], as [tensorData]. */
    fun tensorData(name: String): GgufTensorData = tensorData(find(name))

    private fun info(index: Int): GgufTensorInfo {
        val f = LongArray(10)
        check(bridge.ggufInfo(address, index.toLong(), f))
        return GgufTensorInfo(
            index, bridge.string(f[0]), f[1].toInt(), Format.of(f[2].toInt()),
            (0 until f[3].toInt()).map { f[4 + it] }, f[8], f[9],
        )
    }

    /** The index of the tensor named [name]; [Status.NOT_FOUND] if none. */
    fun find(name: String): Int = alive(this) {
        val out = LongArray(1)
        check(bridge.ggufFind(address, cString(name, "tensor name"), out))
        out[0].toInt()
    }

    /** Tensor [index] over the file's bytes, without a copy: rows = ne[1], cols = ne[0]. */
    fun tensor(index: Int): Tensor = wrapped { bridge.ggufWrap(address, index.toLong(), it) }

    /** The tensor named [name], as [tensor]. */
    fun tensor(name: String): Tensor = tensor(find(name))

    /**
     * Matrix [slice] (< ne[2]) of 3-D tensor [index] (e.g. one expert), without a copy
     * (`tern_gguf_tensor_wrap_slice`): rows = ne[1], cols = ne[0]. A 1-D or 2-D tensor has
     * slice 0 only; a bad slice fails with TERN_ERR_OUT_OF_BOUNDS.
     */
    fun slice(index: Int, slice: Int): Tensor =
        wrapped { bridge.ggufWrapSlice(address, index.toLong(), slice.toLong(), it) }

    /** Matrix [slice] of the tensor named [name], as [slice]. */
    fun slice(name: String, slice: Int): Tensor = slice(find(name), slice)

    private inline fun wrapped(call: (LongArray) -> Int): Tensor = alive(this) {
        val out = LongArray(1)
        check(call(out))
        Tensor.adopt(out[0], ref.keep, ref.alive)
    }

    companion object {
        private fun adopt(address: Long, keep: Any?, alive: (() -> Boolean)? = null): Gguf {
            val views = GgufViews()
            return Gguf(
                NativeRef(address, keep, alive) {
                    views.close()
                    bridge.ggufFree(it)
                },
                views,
            )
        }

        /** Memory-maps and parses the file at [path] (`tern_gguf_open`). */
        @JvmStatic
        fun open(path: String): Gguf {
            val out = LongArray(1)
            check(bridge.ggufOpen(cString(path, "path"), out))
            return adopt(out[0], null)
        }

        /** Parses a copy of [bytes] in native memory (a JVM array may move, so tern cannot borrow it). */
        @JvmStatic
        fun fromBytes(bytes: ByteArray): Gguf =
            wrap(ByteBuffer.allocateDirect(maxOf(bytes.size, 1)).put(bytes).flip() as ByteBuffer)

        /** Parses a direct buffer (position to limit) without copying; it is kept reachable while needed. */
        @JvmStatic
        fun wrap(bytes: ByteBuffer): Gguf = openAt(directAddress(bytes), bytes.remaining().toLong(), bytes, null)

        internal fun openAt(address: Long, length: Long, keep: Any, alive: (() -> Boolean)?): Gguf {
            val out = LongArray(1)
            check(bridge.ggufOpenBytes(address, length, out))
            return adopt(out[0], keep, alive)
        }
    }
}
