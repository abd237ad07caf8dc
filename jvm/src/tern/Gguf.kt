package tern

import java.nio.ByteBuffer

/** A GGUF tensor's header entry (`tern_gguf_tensor_info`); [dims] are ggml's `ne`, the contiguous one first. */
data class GgufTensorInfo(
    val index: Int, val name: String, val ggmlType: Int, val format: Format?,
    val dims: List<Long>, val offset: Long, val bytes: Long,
)

/**
 * A parsed GGUF file (`tern_gguf`) over a read-only mapping of the file or over the caller's
 * bytes. Tensors from [tensor] wrap the file's bytes without copying and may outlive it.
 * Thread-safety: reads from many threads at once; close() must not race with any other use.
 */
class Gguf private constructor(ref: NativeRef) : Handle(ref) {
    /** The tensor table, in file order. */
    val tensors: List<GgufTensorInfo> by lazy { alive(this) { (0 until size).map { info(it) } } }

    /** The number of tensors. */
    val size: Int
        get() = alive(this) {
            // tern_gguf_tensor_count reports 0 for NULL; a closed file is an error, not an empty one.
            if (isClosed) fail(Status.NULL_POINTER, "the Gguf is closed")
            bridge.ggufCount(address).toInt()
        }

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
    fun tensor(index: Int): Tensor = alive(this) {
        val out = LongArray(1)
        check(bridge.ggufWrap(address, index.toLong(), out))
        Tensor.adopt(out[0], ref.keep, ref.alive)
    }

    /** The tensor named [name], as [tensor]. */
    fun tensor(name: String): Tensor = tensor(find(name))

    companion object {
        private fun adopt(address: Long, keep: Any?, alive: (() -> Boolean)? = null) =
            Gguf(NativeRef(address, keep, alive) { bridge.ggufFree(it) })

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
