package tern

import java.nio.ByteBuffer

/**
 * The bridge for JDK 17 and 21 (and Android): tern.h through libtern_jni
 * (jvm/native/tern_jni.c), which passes each call through and copies JVM arrays in and out.
 */
internal object JniBridge : Bridge {
    override val name = "jni"
    override external fun version(): Int
    override external fun versionString(): Long
    override external fun statusString(status: Int): Long
    override external fun lastError(): Long
    override fun string(address: Long) = String(cString(address), Charsets.UTF_8)
    private external fun cString(address: Long): ByteArray
    override external fun copyBytes(address: Long, length: Long): ByteArray
    override external fun directAddress(buffer: ByteBuffer): Long
    override external fun directBuffer(address: Long, length: Long): ByteBuffer
    override external fun kernelCount(): Long
    override external fun kernelInfo(index: Long, out: LongArray): Int
    override external fun encoding(format: Int, out: LongArray): Int
    override external fun encodingName(encoding: Long): Long
    override external fun bytesFor(encoding: Long, rows: Long, cols: Long, out: LongArray): Int
    override external fun tensorWrap(encoding: Long, data: Long, length: Long, rows: Long, cols: Long, out: LongArray): Int
    override external fun tensorEncode(encoding: Long, src: FloatArray, rows: Long, cols: Long, out: LongArray): Int
    override external fun tensorDecode(tensor: Long, dst: FloatArray?, dstAddress: Long, dstLength: Long): Int
    override external fun tensorGet(tensor: Long, row: Long, col: Long, out: FloatArray): Int
    override external fun tensorValidate(tensor: Long): Int
    override external fun tensorData(tensor: Long, out: LongArray): Int
    override external fun transcode(
        from: Long, src: Long, srcLength: Long, rows: Long, cols: Long, to: Long, dst: Long, dstLength: Long,
    ): Int
    override external fun tensorShape(tensor: Long, out: LongArray)
    override external fun tensorFree(tensor: Long)
    override external fun scopeNew(initialBytes: Long, out: LongArray): Int
    override external fun scopeReset(scope: Long): Int
    override external fun scopeStats(scope: Long, out: LongArray): Int
    override external fun scopeFree(scope: Long)
    override external fun requantize(tensor: Long, scope: Long, out: LongArray): Int
    override external fun dispatcherNew(threads: Int, kernel: ByteArray?, flags: Int, out: LongArray): Int

    override fun setSink(dispatcher: Long, sink: EventSink?, keep: Array<AutoCloseable?>): Int {
        val ref = LongArray(1)
        val status = setSinkRef(dispatcher, sink, ref)
        // The C callback holds a global reference to the sink: released once no longer called.
        if (status == Status.OK && ref[0] != 0L) keep[0] = AutoCloseable { deleteGlobalRef(ref[0]) }
        return status
    }

    private external fun setSinkRef(dispatcher: Long, sink: EventSink?, ref: LongArray): Int
    private external fun deleteGlobalRef(ref: Long)
    override external fun dispatcherFree(dispatcher: Long)

    /** Arrays are copied in and out (never pinned), so an event callback may run during the call. */
    override external fun matmul(
        dispatcher: Long, act: Long, weight: Long, scope: Long,
        out: FloatArray?, outAddress: Long, outLength: Long, upcalls: Boolean,
    ): Int

    override external fun matmulMany(
        dispatcher: Long, act: Long, weights: LongArray, scope: Long,
        outs: Array<FloatArray>?, outAddresses: LongArray, outLengths: LongArray,
    ): Int

    override external fun ggufOpen(path: ByteArray, out: LongArray): Int
    override external fun ggufOpenBytes(address: Long, length: Long, out: LongArray): Int
    override external fun ggufCount(gguf: Long): Long
    override external fun ggufInfo(gguf: Long, index: Long, out: LongArray): Int
    override external fun ggufFind(gguf: Long, name: ByteArray, out: LongArray): Int
    override external fun ggufWrap(gguf: Long, index: Long, out: LongArray): Int
    override external fun ggufWrapSlice(gguf: Long, index: Long, slice: Long, out: LongArray): Int
    override external fun ggufTensorData(gguf: Long, index: Long, out: LongArray): Int
    override external fun ggufFree(gguf: Long)
    override external fun ggufKvCount(gguf: Long): Long
    override external fun ggufKvFind(gguf: Long, key: ByteArray, out: LongArray): Int
    override external fun ggufKvKey(gguf: Long, index: Long, out: LongArray): Int
    override external fun ggufKvType(gguf: Long, index: Long, out: LongArray): Int
    override external fun ggufKvGet(gguf: Long, index: Long, type: Int, out: LongArray): Int
    override external fun ggufKvArrayLen(gguf: Long, index: Long, out: LongArray): Int
    override external fun ggufKvArrayGet(gguf: Long, index: Long, element: Long, type: Int, out: LongArray): Int
}
