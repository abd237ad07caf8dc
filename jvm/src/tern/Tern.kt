package tern

import java.lang.ref.Cleaner
import java.lang.ref.Reference

/** The formats of tern.h, in the order of its `TERN_FORMAT_*` constants; [id] is the constant. */
enum class Format(val id: Int) {
    F32(1), TQ1_0(2), TQ2_0(3), BITNET_B1_58(4), I8_ABSMAX(5),

    /** ggml's Q2_0 (type 42): 64-element blocks, cols a multiple of 64. */
    Q2_0(6),

    /** bitnet.cpp's I2_S as its x86 build packs it (GGUF type 36): cols a multiple of 128. */
    I2_S(7),

    /** I2_S as bitnet.cpp's ARM build packs it: cols a multiple of 64. */
    I2_S_64(8),

    /** I2_S with four rows interleaved (x86 without ACT_PARALLEL): rows a multiple of 4, cols of 128. */
    I2_S_R4(9),

    /** Activations: int8 codes, then one f32 absmax scale per 256-element block of each row (cols a multiple of 256). */
    I8_BLOCK256(10),

    /** Activations: int8 codes, then one f32 absmax scale per 32-element block of each row (cols a multiple of 32). */
    I8_BLOCK32(11);

    companion object {
        /** The format with tern.h id [id], or null (0 and unknown ids). */
        @JvmStatic
        fun of(id: Int): Format? = entries.firstOrNull { it.id == id }
    }
}

/** tern.h's `tern_status` values (`TERN_OK`, `TERN_ERR_*`). */
object Status {
    const val OK = 0
    const val NULL_POINTER = 1
    const val UNKNOWN_FORMAT = 2
    const val INVALID_SHAPE = 3
    const val SIZE_OVERFLOW = 4
    const val LENGTH_MISMATCH = 5
    const val NON_FINITE = 6
    const val SCALE_OVERFLOW = 7
    const val CORRUPT_CODE = 8
    const val OUT_OF_BOUNDS = 9
    const val STALE_TENSOR = 10
    const val SHAPE_MISMATCH = 11
    const val UNKNOWN_KERNEL = 12
    const val KERNEL_UNAVAILABLE = 13
    const val UNSUPPORTED = 14
    const val SCOPE_REQUIRED = 15
    const val ALLOCATION_FAILED = 16
    const val INVALID_ARGUMENT = 17
    const val PANIC = 18
    const val NOT_FOUND = 19
    const val INVALID_FILE = 20
    const val IO = 21
}

/**
 * A failed tern call: [status] is the `tern_status` and [detail] the text of
 * `tern_last_error()` (or, for misuse caught on the JVM side before any native call,
 * this library's own description). Nothing was written to the caller's buffers.
 */
class TernException(val status: Int, val detail: String) :
    RuntimeException("${statusName(status)}: $detail") {
    companion object {
        /** The macro name of [status] (`TERN_ERR_NULL_POINTER`), from `tern_status_str`. */
        @JvmStatic
        fun statusName(status: Int): String = bridge.string(bridge.statusString(status)).substringBefore(':')
    }
}

/**
 * An entry of the kernel table (`tern_kernel_info`); formats are null for `matmul/reference`,
 * the decoding fallback, which is listed but cannot be forced by name (the C API refuses it
 * with TERN_ERR_UNKNOWN_KERNEL, and so does [Dispatcher]).
 */
data class KernelInfo(val name: String, val weight: Format?, val act: Format?, val available: Boolean)

/** Library-wide facts. Thread-safe. */
object Tern {
    /** `tern_version()`: `MAJOR << 16 | MINOR << 8 | PATCH`. */
    @JvmStatic
    val version: Int get() = bridge.version()

    /** `tern_version_string()`, "MAJOR.MINOR.PATCH". */
    @JvmStatic
    val versionString: String get() = bridge.string(bridge.versionString())

    /** The bridge in use: "ffm" or "jni". */
    @JvmStatic
    val bridgeName: String get() = bridge.name

    /** Every kernel entry, best first within each (weight, activation) pair. */
    @JvmStatic
    fun kernels(): List<KernelInfo> = (0L until bridge.kernelCount()).map { i ->
        val f = LongArray(4)
        check(bridge.kernelInfo(i, f))
        KernelInfo(bridge.string(f[0]), Format.of(f[1].toInt()), Format.of(f[2].toInt()), f[3] != 0L)
    }
}

/** Throws a [TernException] with this thread's `tern_last_error()` unless [status] is OK. */
internal fun lastError(): String = bridge.string(bridge.lastError())

internal fun check(status: Int) {
    if (status != Status.OK) throw TernException(status, lastError())
}

/** Misuse the JVM side catches before calling tern (tern cannot see a JVM array's length). */
internal fun fail(status: Int, message: String): Nothing = throw TernException(status, message)

/** `rows * cols` as an array length, or a SIZE_OVERFLOW failure. */
internal fun elements(rows: Int, cols: Int): Int {
    val n = rows.toLong() * cols
    if (n > Int.MAX_VALUE - 8) fail(Status.SIZE_OVERFLOW, "$rows x $cols floats do not fit a JVM array")
    return n.toInt()
}

/** A NUL-terminated UTF-8 copy of [s] for tern; a NUL inside would cut the string short. */
internal fun cString(s: String, what: String): ByteArray {
    if (s.indexOf('\u0000') >= 0) fail(Status.INVALID_ARGUMENT, "$what contains a NUL character")
    return s.toByteArray(Charsets.UTF_8) + 0
}

internal val cleaner: Cleaner = Cleaner.create()

/**
 * The native half of a handle, shared by its owner and the [cleaner]: frees the address
 * once, on close() or when the owner has become unreachable. [keep] holds memory tern borrows
 * (a wrapped buffer, GGUF bytes) until the handle is freed.
 */
internal class NativeRef(
    @Volatile var address: Long,
    val keep: Any?,
    /** For memory the JVM can free while reachable (a MemorySegment's arena): whether it still lives. */
    val alive: (() -> Boolean)? = null,
    private val free: (Long) -> Unit,
) : Runnable {
    override fun run() {
        val a = address
        address = 0
        if (a != 0L) free(a)
        Reference.reachabilityFence(keep)
    }
}

/**
 * Base of every handle: close() frees now (idempotent), the Cleaner frees a handle dropped
 * without close(). Any use of a closed handle (as the receiver or as an argument, e.g. a
 * closed Scope passed to matmul) fails with TERN_ERR_NULL_POINTER and a message naming the
 * closed handle, before any native call. One over a MemorySegment whose arena was closed
 * fails with TERN_ERR_STALE_TENSOR instead of reading freed memory (closing the arena during
 * a call is a race, as in C).
 */
abstract class Handle internal constructor(internal val ref: NativeRef) : AutoCloseable {
    private val cleanable = cleaner.register(this, ref)

    internal val address: Long
        get() {
            val a = ref.address
            if (a == 0L) fail(Status.NULL_POINTER, "this ${javaClass.simpleName} is closed")
            if (ref.alive?.invoke() == false) {
                fail(Status.STALE_TENSOR, "the memory this ${javaClass.simpleName} borrows was freed (its arena is closed)")
            }
            return a
        }

    /** Whether close() was called. */
    val isClosed: Boolean get() = ref.address == 0L

    override fun close() = cleanable.clean()
}

/** Runs [block] while keeping [a], [b], [c] reachable, so no Cleaner frees them mid-call. */
internal inline fun <R> alive(a: Any?, b: Any? = null, c: Any? = null, block: () -> R): R {
    try {
        return block()
    } finally {
        Reference.reachabilityFence(a)
        Reference.reachabilityFence(b)
        Reference.reachabilityFence(c)
    }
}
