package tern

import java.io.File
import java.nio.ByteBuffer
import java.nio.file.Files
import java.nio.file.StandardCopyOption

/**
 * Receives tern events from a bridge. [name] is the address of a static C string (read it
 * with [Bridge.string]). Implementations must not throw: a bridge calls it from native code.
 */
internal fun interface EventSink {
    fun onEvent(kind: Int, name: Long, from: Int, to: Int, rows: Long, cols: Long, bytes: Long, nanos: Long)
}

/**
 * The native calls of tern.h, one method per C function, shared by the FFM and the JNI
 * bridge. Pointers are Longs (0 is NULL); a fallible call returns its tern_status and writes
 * its out-values to `out` on success only. Buffers of floats are either a JVM array or an
 * (address, length) pair of native memory; all checks live in the API layer above.
 */
internal interface Bridge {
    val name: String
    fun version(): Int
    /** Strings tern returns are addresses: read them with [string]. */
    fun versionString(): Long
    fun statusString(status: Int): Long
    fun lastError(): Long

    /** A NUL-terminated UTF-8 string at [address] (tern's: static or owned by a live handle). */
    fun string(address: Long): String
    fun copyBytes(address: Long, length: Long): ByteArray

    /** The address of element 0 of a direct buffer. */
    fun directAddress(buffer: ByteBuffer): Long

    /** A direct buffer over [length] bytes of native memory at [address], without a copy. */
    fun directBuffer(address: Long, length: Long): ByteBuffer

    fun kernelCount(): Long
    fun kernelInfo(index: Long, out: LongArray): Int
    fun encoding(format: Int, out: LongArray): Int
    fun encodingName(encoding: Long): Long
    fun bytesFor(encoding: Long, rows: Long, cols: Long, out: LongArray): Int

    fun tensorWrap(encoding: Long, data: Long, length: Long, rows: Long, cols: Long, out: LongArray): Int
    fun tensorEncode(encoding: Long, src: FloatArray, rows: Long, cols: Long, out: LongArray): Int
    fun tensorDecode(tensor: Long, dst: FloatArray?, dstAddress: Long, dstLength: Long): Int
    fun tensorGet(tensor: Long, row: Long, col: Long, out: FloatArray): Int
    fun tensorValidate(tensor: Long): Int
    fun tensorData(tensor: Long, out: LongArray): Int
    fun transcode(from: Long, src: Long, srcLength: Long, rows: Long, cols: Long, to: Long, dst: Long, dstLength: Long): Int

    /** format, rows, cols of a live tensor (tern_tensor_format/_rows/_cols). */
    fun tensorShape(tensor: Long, out: LongArray)
    fun tensorFree(tensor: Long)

    fun scopeNew(initialBytes: Long, out: LongArray): Int
    fun scopeReset(scope: Long): Int
    fun scopeStats(scope: Long, out: LongArray): Int
    fun scopeFree(scope: Long)
    fun requantize(tensor: Long, scope: Long, out: LongArray): Int

    fun dispatcherNew(threads: Int, kernel: ByteArray?, flags: Int, out: LongArray): Int

    /** Sets the sink (null: none); `keep[0]` receives what must stay open until it is replaced or the dispatcher freed. */
    fun setSink(dispatcher: Long, sink: EventSink?, keep: Array<AutoCloseable?>): Int
    fun dispatcherFree(dispatcher: Long)

    /** [upcalls]: the dispatcher has a sink, so the call may call back into the JVM. */
    fun matmul(
        dispatcher: Long, act: Long, weight: Long, scope: Long,
        out: FloatArray?, outAddress: Long, outLength: Long, upcalls: Boolean,
    ): Int

    /** Outputs are the arrays [outs] if given, else the native buffers ([outAddresses], [outLengths]). */
    fun matmulMany(
        dispatcher: Long, act: Long, weights: LongArray, scope: Long,
        outs: Array<FloatArray>?, outAddresses: LongArray, outLengths: LongArray,
    ): Int

    fun ggufOpen(path: ByteArray, out: LongArray): Int
    fun ggufOpenBytes(address: Long, length: Long, out: LongArray): Int
    fun ggufCount(gguf: Long): Long

    /** name, ggml_type, format, n_dims, ne[0..3], offset, bytes. */
    fun ggufInfo(gguf: Long, index: Long, out: LongArray): Int
    fun ggufFind(gguf: Long, name: ByteArray, out: LongArray): Int
    fun ggufWrap(gguf: Long, index: Long, out: LongArray): Int
    fun ggufWrapSlice(gguf: Long, index: Long, slice: Long, out: LongArray): Int

    /** address, length, ggml_type. */
    fun ggufTensorData(gguf: Long, index: Long, out: LongArray): Int
    fun ggufFree(gguf: Long)

    fun ggufKvCount(gguf: Long): Long
    fun ggufKvFind(gguf: Long, key: ByteArray, out: LongArray): Int

    /** address, length of the key (not NUL-terminated). */
    fun ggufKvKey(gguf: Long, index: Long, out: LongArray): Int
    fun ggufKvType(gguf: Long, index: Long, out: LongArray): Int

    /**
     * `tern_gguf_kv_get_<type>` for the GGUF value [type] (a scalar type or STRING: the
     * eleven typed getters and `_get_str` are one method, chosen by [type]). A scalar goes
     * to `out[0]` as its bits zero-extended to 64 (floats as their IEEE bits: the API layer
     * decodes them, see [GgufType.decode]); a string as address and length.
     */
    fun ggufKvGet(gguf: Long, index: Long, type: Int, out: LongArray): Int

    /** element type, length. */
    fun ggufKvArrayLen(gguf: Long, index: Long, out: LongArray): Int

    /** `tern_gguf_kv_array_get_<type>` for element [element], as [ggufKvGet]. */
    fun ggufKvArrayGet(gguf: Long, index: Long, element: Long, type: Int, out: LongArray): Int
}

/**
 * The bridge of this JVM: `-Dtern.bridge=ffm|jni` forces one, otherwise FFM on JDK 22+
 * and JNI below. The FFM bridge is loaded by name, so a JDK 17 never loads a class that
 * refers to java.lang.foreign.
 */
internal val bridge: Bridge by lazy {
    val forced = System.getProperty("tern.bridge")
    // Not Runtime.version(): Android has no such method (and reports "0.9" here, so: JNI).
    val feature = System.getProperty("java.specification.version")?.toIntOrNull() ?: 0
    when (forced ?: if (feature >= 22) "ffm" else "jni") {
        "ffm" -> {
            if (feature < 22) throw UnsupportedOperationException("tern.bridge=ffm needs JDK 22 or later; this is JDK $feature")
            Class.forName("tern.FfmBridge").getDeclaredConstructor(File::class.java)
                .newInstance(NativeLibrary.file("tern")) as Bridge
        }
        "jni" -> {
            System.load(NativeLibrary.file("tern").path)
            System.load(NativeLibrary.file("tern_jni").path)
            JniBridge
        }
        else -> throw IllegalArgumentException("tern.bridge must be ffm or jni, not '$forced'")
    }
}

/**
 * Finds a native library: in the directory of `-Dtern.library.path` if set, else in the
 * jar under `native/<os>-<arch>/`, extracted once per JVM to a temporary directory.
 */
internal object NativeLibrary {
    private val platform: String by lazy {
        val os = System.getProperty("os.name").lowercase().let { if (it.startsWith("linux")) "linux" else it.replace(' ', '_') }
        val arch = when (val a = System.getProperty("os.arch").lowercase()) {
            "amd64", "x86_64" -> "x86_64"
            "arm64", "aarch64" -> "aarch64"
            else -> a
        }
        "$os-$arch"
    }
    private val extractDir: File by lazy {
        Files.createTempDirectory("tern-native").toFile().apply { deleteOnExit() }
    }

    fun file(name: String): File {
        val fileName = System.mapLibraryName(name)
        System.getProperty("tern.library.path")?.let { dir ->
            val f = File(dir, fileName)
            if (!f.isFile) throw UnsatisfiedLinkError("tern: tern.library.path=$dir has no $fileName")
            return f.absoluteFile // System.load takes absolute paths only
        }
        val resource = "/native/$platform/$fileName"
        val input = NativeLibrary::class.java.getResourceAsStream(resource)
            ?: throw UnsatisfiedLinkError(
                "tern: no native library for platform $platform in this jar (looked for $resource); " +
                    "build tern for it and pass -Dtern.library.path=<directory of $fileName>"
            )
        // Loaded before the JNI library, libtern satisfies its dependency by soname.
        val target = File(extractDir, fileName)
        synchronized(this) {
            if (!target.isFile) {
                input.use { Files.copy(it, target.toPath(), StandardCopyOption.REPLACE_EXISTING) }
                target.deleteOnExit()
            } else {
                input.close()
            }
        }
        return target
    }
}
