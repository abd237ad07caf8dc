package tern

import java.nio.ByteBuffer
import java.nio.ByteOrder

/** The behaviour of one storage format (`tern_encoding`): static, never freed. Thread-safe. */
class Encoding private constructor(val format: Format, internal val address: Long) {
    /** tern's name of the format ("TQ2_0"). */
    val name: String get() = bridge.string(bridge.encodingName(address))

    /** The exact byte size of a `rows x cols` matrix (`tern_encoding_bytes_for`). */
    fun bytesFor(rows: Int, cols: Int): Long {
        val out = LongArray(1)
        check(bridge.bytesFor(address, rows.toLong(), cols.toLong(), out))
        return out[0]
    }

    override fun toString() = name

    companion object {
        private val all: Map<Format, Encoding> by lazy {
            Format.entries.associateWith { f ->
                val out = LongArray(1)
                check(bridge.encoding(f.id, out))
                Encoding(f, out[0])
            }
        }

        @JvmStatic
        fun of(format: Format): Encoding = all.getValue(format)
    }
}

/**
 * A `rows x cols` matrix in some [format] (`tern_tensor`). An encoded tensor owns its bytes;
 * a wrapped one borrows the caller's memory (kept reachable until the tensor is freed, and
 * which must not change meanwhile); a scope tensor lives in its [Scope].
 * Thread-safety: reads (decode, get, validate, matmul operands) from many threads at once;
 * close() must not race with any other use.
 */
class Tensor private constructor(ref: NativeRef) : Handle(ref) {
    val format: Format
    val rows: Int
    val cols: Int

    init {
        val shape = LongArray(3)
        bridge.tensorShape(ref.address, shape)
        format = Format.of(shape[0].toInt())!!
        if (shape[1] > Int.MAX_VALUE || shape[2] > Int.MAX_VALUE) {
            close()
            fail(Status.SIZE_OVERFLOW, "a ${shape[1]} x ${shape[2]} tensor does not fit JVM indices")
        }
        rows = shape[1].toInt()
        cols = shape[2].toInt()
    }

    /** Decodes the whole tensor (`tern_tensor_decode`). */
    fun decode(): FloatArray = FloatArray(elements(rows, cols)).also { decode(it) }

    /** Decodes into [out] (at least rows * cols floats); on failure [out] is untouched. */
    fun decode(out: FloatArray) = alive(this) { check(bridge.tensorDecode(address, out, 0, out.size.toLong())) }

    /** Decodes into a direct buffer of native-order floats, from its position. */
    fun decode(out: ByteBuffer) = alive(this, out) {
        check(bridge.tensorDecode(address, null, floatsAddress(out), out.remaining() / 4L))
    }

    /** Element ([row], [col]), decoded (`tern_tensor_get`). */
    operator fun get(row: Int, col: Int): Float = alive(this) {
        val out = FloatArray(1)
        check(bridge.tensorGet(address, row.toLong(), col.toLong(), out))
        out[0]
    }

    /** Checks every code and scale (`tern_tensor_validate`). */
    fun validate() = alive(this) { check(bridge.tensorValidate(address)) }

    /** A copy of the encoded bytes (`tern_tensor_data`). */
    fun bytes(): ByteArray = alive(this) {
        val out = LongArray(2)
        check(bridge.tensorData(address, out))
        if (out[1] > Int.MAX_VALUE - 8) fail(Status.SIZE_OVERFLOW, "${out[1]} bytes do not fit a JVM array")
        bridge.copyBytes(out[0], out[1])
    }

    /**
     * The same trits and scales in another ternary format of the same family (BITNET_B1_58,
     * I2_S, I2_S_64, I2_S_R4; or TQ1_0 and TQ2_0), without loss (`tern_transcode`): a new
     * tensor owning a new direct buffer, decoding to the same floats. Another format fails
     * with TERN_ERR_INVALID_ARGUMENT, a shape [format] cannot hold with
     * TERN_ERR_INVALID_SHAPE, bytes that do not validate with TERN_ERR_CORRUPT_CODE.
     */
    fun transcode(format: Format): Tensor = alive(this) {
        val src = LongArray(2)
        check(bridge.tensorData(address, src))
        val to = Encoding.of(format)
        val size = to.bytesFor(rows, cols)
        if (size > Int.MAX_VALUE) fail(Status.SIZE_OVERFLOW, "$size bytes do not fit a ByteBuffer")
        val dst = ByteBuffer.allocateDirect(size.toInt())
        check(
            bridge.transcode(
                Encoding.of(this.format).address, src[0], src[1], rows.toLong(), cols.toLong(),
                to.address, directAddress(dst), size,
            ),
        )
        wrap(format, dst, rows, cols)
    }

    override fun toString() = "Tensor($format, $rows x $cols${if (isClosed) ", closed" else ""})"

    companion object {
        /** A tensor over a new native handle; [keep] stays reachable until it is freed. */
        internal fun adopt(address: Long, keep: Any?, alive: (() -> Boolean)? = null) =
            Tensor(NativeRef(address, keep, alive) { bridge.tensorFree(it) })

        /** Encodes [data] (`rows * cols` floats, row-major) into a tensor that owns its bytes. */
        @JvmStatic
        fun encode(format: Format, data: FloatArray, rows: Int, cols: Int): Tensor {
            val out = LongArray(1)
            check(bridge.tensorEncode(Encoding.of(format).address, data, rows.toLong(), cols.toLong(), out))
            return adopt(out[0], null)
        }

        /**
         * Wraps encoded bytes without copying: the [bytes] of a direct buffer from its position
         * to its limit, which must be exactly the format's size for `rows x cols`.
         */
        @JvmStatic
        fun wrap(format: Format, bytes: ByteBuffer, rows: Int, cols: Int): Tensor =
            wrapAddress(format, directAddress(bytes), bytes.remaining().toLong(), rows, cols, bytes, null)

        internal fun wrapAddress(
            format: Format, address: Long, length: Long, rows: Int, cols: Int, keep: Any, alive: (() -> Boolean)?,
        ): Tensor {
            val out = LongArray(1)
            check(bridge.tensorWrap(Encoding.of(format).address, address, length, rows.toLong(), cols.toLong(), out))
            return adopt(out[0], keep, alive)
        }
    }
}

/** The address of a direct buffer's position; a heap buffer is refused (tern would keep a moving address). */
internal fun directAddress(buffer: ByteBuffer): Long {
    if (!buffer.isDirect) fail(Status.INVALID_ARGUMENT, "a heap ByteBuffer: pass a direct one (ByteBuffer.allocateDirect)")
    return bridge.directAddress(buffer) + buffer.position()
}

/** [directAddress] for an output buffer of floats: writable, in native byte order. */
internal fun floatsAddress(buffer: ByteBuffer): Long {
    if (buffer.isReadOnly) fail(Status.INVALID_ARGUMENT, "a read-only ByteBuffer cannot receive output")
    if (buffer.order() != ByteOrder.nativeOrder()) {
        fail(Status.INVALID_ARGUMENT, "a ByteBuffer of floats must be in native order (order(ByteOrder.nativeOrder()))")
    }
    return directAddress(buffer)
}

/** Counters of a [Scope] (`tern_scope_stats`). */
data class ScopeStats(val bytesInUse: Long, val highWater: Long, val allocations: Long, val capacity: Long, val generation: Long)

/**
 * An arena for per-pass tensors (`tern_scope`): the requantized activations. reset() frees
 * them all; a tensor that lived in it then fails with [Status.STALE_TENSOR].
 * Thread-safety: one thread at a time.
 */
class Scope @JvmOverloads constructor(initialBytes: Long = 0) : Handle(newScope(initialBytes)) {
    /** Frees every allocation at once; tensors allocated before become stale. */
    fun reset() = alive(this) { check(bridge.scopeReset(address)) }

    fun stats(): ScopeStats = alive(this) {
        val s = LongArray(5)
        check(bridge.scopeStats(address, s))
        ScopeStats(s[0], s[1], s[2], s[3], s[4])
    }

    /** Requantizes an F32 tensor to I8_ABSMAX in this scope (`tern_requantize_i8_absmax`, no event). */
    fun requantize(tensor: Tensor): Tensor = alive(this, tensor) {
        val out = LongArray(1)
        check(bridge.requantize(tensor.address, address, out))
        Tensor.adopt(out[0], null)
    }

    private companion object {
        fun newScope(initialBytes: Long): NativeRef {
            val out = LongArray(1)
            check(bridge.scopeNew(initialBytes, out))
            return NativeRef(out[0], null) { bridge.scopeFree(it) }
        }
    }
}
