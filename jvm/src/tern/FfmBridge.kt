package tern

import java.io.File
import java.lang.foreign.Arena
import java.lang.foreign.FunctionDescriptor
import java.lang.foreign.Linker
import java.lang.foreign.MemoryLayout
import java.lang.foreign.MemorySegment
import java.lang.foreign.SymbolLookup
import java.lang.foreign.ValueLayout.ADDRESS
import java.lang.foreign.ValueLayout.JAVA_BYTE
import java.lang.foreign.ValueLayout.JAVA_FLOAT
import java.lang.foreign.ValueLayout.JAVA_INT
import java.lang.foreign.ValueLayout.JAVA_LONG
import java.lang.foreign.ValueLayout.JAVA_SHORT
import java.lang.invoke.MethodHandle
import java.lang.invoke.MethodHandles
import java.lang.invoke.MethodType
import java.lang.ref.Reference
import java.nio.ByteBuffer

/**
 * The bridge for JDK 22+: tern.h bound through the Foreign Function & Memory API. Loaded
 * by name from [bridge] only, so JDK 17 never sees this class. Calls that cannot call back
 * into the JVM are linked `critical`, which lets tern read and write JVM arrays in place;
 * a matmul with an event sink runs on native copies instead (no upcall may happen in a
 * critical call).
 */
internal class FfmBridge(private val library: File) : Bridge {
    override val name = "ffm"

    private val linker = Linker.nativeLinker()
    private val lookup = SymbolLookup.libraryLookup(library.toPath(), Arena.global())

    private fun fn(symbol: String, result: MemoryLayout?, vararg args: MemoryLayout, critical: Boolean = false): MethodHandle {
        val address = lookup.find(symbol).orElseThrow { UnsatisfiedLinkError("tern: $library has no $symbol") }
        val descriptor = if (result == null) FunctionDescriptor.ofVoid(*args) else FunctionDescriptor.of(result, *args)
        return if (critical) {
            linker.downcallHandle(address, descriptor, Linker.Option.critical(true))
        } else {
            linker.downcallHandle(address, descriptor)
        }
    }

    private val P = ADDRESS
    private val I = JAVA_INT
    private val L = JAVA_LONG
    private val hVersion = fn("tern_version", I)
    private val hVersionString = fn("tern_version_string", P)
    private val hStatusStr = fn("tern_status_str", P, I)
    private val hLastError = fn("tern_last_error", P)
    private val hKernelCount = fn("tern_kernel_count", L)
    private val hKernelInfo = fn("tern_kernel_info_get", I, L, P)
    private val hEncodingGet = fn("tern_encoding_get", I, I, P)
    private val hEncodingName = fn("tern_encoding_name", P, P)
    private val hBytesFor = fn("tern_encoding_bytes_for", I, P, L, L, P)
    private val hWrap = fn("tern_tensor_wrap", I, P, P, L, L, L, P)
    private val hEncode = fn("tern_tensor_encode", I, P, P, L, L, L, P, critical = true)
    private val hDecode = fn("tern_tensor_decode", I, P, P, L, critical = true)
    private val hGet = fn("tern_tensor_get", I, P, L, L, P, critical = true)
    private val hValidate = fn("tern_tensor_validate", I, P)
    private val hData = fn("tern_tensor_data", I, P, P, P)
    private val hFormat = fn("tern_tensor_format", I, P)
    private val hRows = fn("tern_tensor_rows", L, P)
    private val hCols = fn("tern_tensor_cols", L, P)
    private val hTensorFree = fn("tern_tensor_free", null, P)
    private val hScopeNew = fn("tern_scope_new", I, L, P)
    private val hScopeReset = fn("tern_scope_reset", I, P)
    private val hScopeStats = fn("tern_scope_get_stats", I, P, P)
    private val hScopeFree = fn("tern_scope_free", null, P)
    private val hRequantize = fn("tern_requantize_i8_absmax", I, P, P, P, P, P)
    private val hDispatcherNew = fn("tern_dispatcher_new", I, P, P)
    private val hSetSink = fn("tern_dispatcher_set_sink", I, P, P, P)
    private val hDispatcherFree = fn("tern_dispatcher_free", null, P)
    private val hMatmul = fn("tern_matmul", I, P, P, P, P, P, L)
    private val hMatmulCritical = fn("tern_matmul", I, P, P, P, P, P, L, critical = true)
    private val hMatmulMany = fn("tern_matmul_many", I, P, P, P, L, P, P, P)
    private val hGgufOpen = fn("tern_gguf_open", I, P, P)
    private val hGgufOpenBytes = fn("tern_gguf_open_bytes", I, P, L, P)
    private val hGgufCount = fn("tern_gguf_tensor_count", L, P)
    private val hGgufInfo = fn("tern_gguf_tensor_info_get", I, P, L, P)
    private val hGgufFind = fn("tern_gguf_find", I, P, P, P)
    private val hGgufWrap = fn("tern_gguf_tensor_wrap", I, P, L, P)
    private val hGgufWrapSlice = fn("tern_gguf_tensor_wrap_slice", I, P, L, L, P)
    private val hGgufTensorData = fn("tern_gguf_tensor_data", I, P, L, P, P, P)
    private val hGgufFree = fn("tern_gguf_free", null, P)
    private val hTranscode = fn("tern_transcode", I, P, P, L, L, L, P, P, L)
    private val hKvCount = fn("tern_gguf_kv_count", L, P)
    private val hKvFind = fn("tern_gguf_kv_find", I, P, P, P)
    private val hKvKey = fn("tern_gguf_kv_key", I, P, L, P, P)
    private val hKvType = fn("tern_gguf_kv_type", I, P, L, P)
    private val hKvArrayLen = fn("tern_gguf_kv_array_len", I, P, L, P, P)

    /** The C name suffix of each scalar GGUF type's getters (`tern_gguf_kv_get_u8`, ...). */
    private val kvSuffixes = mapOf(
        GgufType.UINT8 to "u8", GgufType.INT8 to "i8", GgufType.UINT16 to "u16", GgufType.INT16 to "i16",
        GgufType.UINT32 to "u32", GgufType.INT32 to "i32", GgufType.FLOAT32 to "f32", GgufType.BOOL to "bool",
        GgufType.UINT64 to "u64", GgufType.INT64 to "i64", GgufType.FLOAT64 to "f64", GgufType.STRING to "str",
    )

    // The string getters take (str, len) where the scalar ones take one out-pointer.
    private val hKvGet = kvSuffixes.map { (type, suffix) ->
        type.id to if (type == GgufType.STRING) fn("tern_gguf_kv_get_str", I, P, L, P, P) else fn("tern_gguf_kv_get_$suffix", I, P, L, P)
    }.toMap()
    private val hKvArrayGet = kvSuffixes.map { (type, suffix) ->
        type.id to if (type == GgufType.STRING) {
            fn("tern_gguf_kv_array_get_str", I, P, L, L, P, P)
        } else {
            fn("tern_gguf_kv_array_get_$suffix", I, P, L, L, P)
        }
    }.toMap()

    private fun ptr(address: Long): MemorySegment = MemorySegment.ofAddress(address)

    /** Calls [call] with a fresh pointer-sized out-slot; stores its value in `out[0]` on success. */
    private inline fun withSlot(out: LongArray, call: (MemorySegment) -> Any?): Int = slots(out, 1) { call(it[0]) }

    override fun version() = hVersion.invoke() as Int
    override fun versionString() = (hVersionString.invoke() as MemorySegment).address()
    override fun statusString(status: Int) = (hStatusStr.invoke(status) as MemorySegment).address()
    override fun lastError() = (hLastError.invoke() as MemorySegment).address()
    override fun string(address: Long): String =
        if (address == 0L) "" else ptr(address).reinterpret(Long.MAX_VALUE).getString(0)
    override fun copyBytes(address: Long, length: Long): ByteArray =
        ptr(address).reinterpret(length).toArray(JAVA_BYTE)
    override fun directAddress(buffer: ByteBuffer): Long =
        MemorySegment.ofBuffer(buffer).address() - buffer.position()

    override fun directBuffer(address: Long, length: Long): ByteBuffer = ptr(address).reinterpret(length).asByteBuffer()

    override fun kernelCount() = hKernelCount.invoke() as Long

    override fun kernelInfo(index: Long, out: LongArray): Int = Arena.ofConfined().use { arena ->
        val info = arena.allocate(24, 8)
        val status = hKernelInfo.invoke(index, info) as Int
        if (status == Status.OK) {
            out[0] = info.get(P, 0).address()
            out[1] = info.get(I, 8).toUInt().toLong()
            out[2] = info.get(I, 12).toUInt().toLong()
            out[3] = info.get(I, 16).toLong()
        }
        status
    }

    override fun encoding(format: Int, out: LongArray) = withSlot(out) { hEncodingGet.invoke(format, it) }
    override fun encodingName(encoding: Long) = (hEncodingName.invoke(ptr(encoding)) as MemorySegment).address()
    override fun bytesFor(encoding: Long, rows: Long, cols: Long, out: LongArray) =
        withSlot(out) { hBytesFor.invoke(ptr(encoding), rows, cols, it) }

    override fun tensorWrap(encoding: Long, data: Long, length: Long, rows: Long, cols: Long, out: LongArray) =
        withSlot(out) { hWrap.invoke(ptr(encoding), ptr(data), length, rows, cols, it) }

    override fun tensorEncode(encoding: Long, src: FloatArray, rows: Long, cols: Long, out: LongArray) =
        withSlot(out) { hEncode.invoke(ptr(encoding), MemorySegment.ofArray(src), src.size.toLong(), rows, cols, it) }

    override fun tensorDecode(tensor: Long, dst: FloatArray?, dstAddress: Long, dstLength: Long) =
        hDecode.invoke(ptr(tensor), dst?.let { MemorySegment.ofArray(it) } ?: ptr(dstAddress), dstLength) as Int

    override fun tensorGet(tensor: Long, row: Long, col: Long, out: FloatArray) =
        hGet.invoke(ptr(tensor), row, col, MemorySegment.ofArray(out)) as Int

    override fun tensorValidate(tensor: Long) = hValidate.invoke(ptr(tensor)) as Int

    override fun tensorData(tensor: Long, out: LongArray): Int = Arena.ofConfined().use { arena ->
        val slots = arena.allocate(16, 8)
        val status = hData.invoke(ptr(tensor), slots, slots.asSlice(8)) as Int
        if (status == Status.OK) {
            out[0] = slots.get(L, 0)
            out[1] = slots.get(L, 8)
        }
        status
    }

    override fun transcode(
        from: Long, src: Long, srcLength: Long, rows: Long, cols: Long, to: Long, dst: Long, dstLength: Long,
    ) = hTranscode.invoke(ptr(from), ptr(src), srcLength, rows, cols, ptr(to), ptr(dst), dstLength) as Int

    override fun tensorShape(tensor: Long, out: LongArray) {
        out[0] = (hFormat.invoke(ptr(tensor)) as Int).toLong()
        out[1] = hRows.invoke(ptr(tensor)) as Long
        out[2] = hCols.invoke(ptr(tensor)) as Long
    }

    override fun tensorFree(tensor: Long) {
        hTensorFree.invoke(ptr(tensor))
    }

    override fun scopeNew(initialBytes: Long, out: LongArray) = withSlot(out) { hScopeNew.invoke(initialBytes, it) }
    override fun scopeReset(scope: Long) = hScopeReset.invoke(ptr(scope)) as Int

    override fun scopeStats(scope: Long, out: LongArray): Int = Arena.ofConfined().use { arena ->
        val stats = arena.allocate(40, 8)
        val status = hScopeStats.invoke(ptr(scope), stats) as Int
        if (status == Status.OK) for (i in 0 until 5) out[i] = stats.get(L, 8L * i)
        status
    }

    override fun scopeFree(scope: Long) {
        hScopeFree.invoke(ptr(scope))
    }

    override fun requantize(tensor: Long, scope: Long, out: LongArray) =
        withSlot(out) { hRequantize.invoke(ptr(tensor), ptr(scope), MemorySegment.NULL, MemorySegment.NULL, it) }

    override fun dispatcherNew(threads: Int, kernel: ByteArray?, flags: Int, out: LongArray): Int =
        Arena.ofConfined().use { arena ->
            // tern_dispatcher_options on LP64: struct_size, n_threads, kernel, flags, parallel_for, pool.
            val options = arena.allocate(40, 8)
            options.set(I, 0, 40)
            options.set(I, 4, threads)
            options.set(P, 8, kernel?.let { arena.allocateFrom(JAVA_BYTE, *it) } ?: MemorySegment.NULL)
            options.set(I, 16, flags)
            withSlot(out) { hDispatcherNew.invoke(options, it) }
        }

    override fun setSink(dispatcher: Long, sink: EventSink?, keep: Array<AutoCloseable?>): Int {
        if (sink == null) return hSetSink.invoke(ptr(dispatcher), MemorySegment.NULL, MemorySegment.NULL) as Int
        // An automatic arena: the stub lives while `keep[0]` holds it and the GC frees it after.
        // (Closing a shared arena costs a handshake with every thread, which kept the Cleaner
        // of dropped dispatchers behind their creation.)
        val arena = Arena.ofAuto()
        val target = MethodHandles.lookup().findVirtual(
            Upcall::class.java, "call",
            MethodType.methodType(Void.TYPE, MemorySegment::class.java, MemorySegment::class.java),
        ).bindTo(Upcall(sink))
        val stub = linker.upcallStub(target, FunctionDescriptor.ofVoid(P, P), arena)
        val status = hSetSink.invoke(ptr(dispatcher), stub, MemorySegment.NULL) as Int
        if (status == Status.OK) keep[0] = AutoCloseable { Reference.reachabilityFence(arena) }
        return status
    }

    override fun dispatcherFree(dispatcher: Long) {
        hDispatcherFree.invoke(ptr(dispatcher))
    }

    override fun matmul(
        dispatcher: Long, act: Long, weight: Long, scope: Long,
        out: FloatArray?, outAddress: Long, outLength: Long, upcalls: Boolean,
    ): Int = when {
        out == null ->
            hMatmul.invoke(ptr(dispatcher), ptr(act), ptr(weight), ptr(scope), ptr(outAddress), outLength) as Int
        upcalls -> Arena.ofConfined().use { arena ->
            val native = arena.allocate(JAVA_FLOAT, maxOf(outLength, 1))
            val status = hMatmul.invoke(ptr(dispatcher), ptr(act), ptr(weight), ptr(scope), native, outLength) as Int
            if (status == Status.OK) MemorySegment.copy(native, JAVA_FLOAT, 0, out, 0, out.size)
            status
        }
        else ->
            hMatmulCritical.invoke(ptr(dispatcher), ptr(act), ptr(weight), ptr(scope), MemorySegment.ofArray(out), outLength) as Int
    }

    override fun matmulMany(
        dispatcher: Long, act: Long, weights: LongArray, scope: Long,
        outs: Array<FloatArray>?, outAddresses: LongArray, outLengths: LongArray,
    ): Int = Arena.ofConfined().use { arena ->
        val n = weights.size.toLong()
        val weightTable = arena.allocate(L, maxOf(n, 1))
        val outTable = arena.allocate(L, maxOf(n, 1))
        val lengthTable = arena.allocate(L, maxOf(n, 1))
        // JVM arrays cannot be pointed to from native memory: tern writes native copies.
        val natives = outs?.map { arena.allocate(JAVA_FLOAT, maxOf(it.size.toLong(), 1)) }
        for (i in weights.indices) {
            weightTable.setAtIndex(L, i.toLong(), weights[i])
            outTable.setAtIndex(L, i.toLong(), natives?.get(i)?.address() ?: outAddresses[i])
            lengthTable.setAtIndex(L, i.toLong(), outLengths[i])
        }
        val status = hMatmulMany.invoke(ptr(dispatcher), ptr(act), weightTable, n, ptr(scope), outTable, lengthTable) as Int
        if (status == Status.OK && outs != null) {
            outs.forEachIndexed { i, o -> MemorySegment.copy(natives!![i], JAVA_FLOAT, 0, o, 0, o.size) }
        }
        status
    }

    override fun ggufOpen(path: ByteArray, out: LongArray) = Arena.ofConfined().use { arena ->
        val cPath = arena.allocateFrom(JAVA_BYTE, *path)
        withSlot(out) { hGgufOpen.invoke(cPath, it) }
    }

    override fun ggufOpenBytes(address: Long, length: Long, out: LongArray) =
        withSlot(out) { hGgufOpenBytes.invoke(ptr(address), length, it) }

    override fun ggufCount(gguf: Long) = hGgufCount.invoke(ptr(gguf)) as Long

    override fun ggufInfo(gguf: Long, index: Long, out: LongArray): Int = Arena.ofConfined().use { arena ->
        val info = arena.allocate(72, 8)
        val status = hGgufInfo.invoke(ptr(gguf), index, info) as Int
        if (status == Status.OK) {
            out[0] = info.get(P, 0).address()
            for (i in 1..3) out[i] = info.get(I, 4L + 4 * i).toUInt().toLong()
            for (i in 4..9) out[i] = info.get(L, 24L + 8 * (i - 4))
        }
        status
    }

    override fun ggufFind(gguf: Long, name: ByteArray, out: LongArray) = findIndex(hGgufFind, gguf, name, out)

    /** tern_gguf_find or tern_gguf_kv_find ([find]): the index of a tensor or metadata entry by name. */
    private fun findIndex(find: MethodHandle, gguf: Long, name: ByteArray, out: LongArray) = Arena.ofConfined().use { arena ->
        val cName = arena.allocateFrom(JAVA_BYTE, *name)
        withSlot(out) { find.invoke(ptr(gguf), cName, it) }
    }

    override fun ggufWrap(gguf: Long, index: Long, out: LongArray) =
        withSlot(out) { hGgufWrap.invoke(ptr(gguf), index, it) }

    override fun ggufWrapSlice(gguf: Long, index: Long, slice: Long, out: LongArray) =
        withSlot(out) { hGgufWrapSlice.invoke(ptr(gguf), index, slice, it) }

    override fun ggufTensorData(gguf: Long, index: Long, out: LongArray) = slots(out, 3, intArrayOf(8, 8, 4)) { s ->
        hGgufTensorData.invoke(ptr(gguf), index, s[0], s[1], s[2])
    }

    override fun ggufFree(gguf: Long) {
        hGgufFree.invoke(ptr(gguf))
    }

    override fun ggufKvCount(gguf: Long) = hKvCount.invoke(ptr(gguf)) as Long

    override fun ggufKvFind(gguf: Long, key: ByteArray, out: LongArray) = findIndex(hKvFind, gguf, key, out)

    override fun ggufKvKey(gguf: Long, index: Long, out: LongArray) =
        slots(out, 2) { s -> hKvKey.invoke(ptr(gguf), index, s[0], s[1]) }

    override fun ggufKvType(gguf: Long, index: Long, out: LongArray) =
        slots(out, 1, intArrayOf(4)) { s -> hKvType.invoke(ptr(gguf), index, s[0]) }

    override fun ggufKvGet(gguf: Long, index: Long, type: Int, out: LongArray) = kvValue(type, out) { s ->
        if (type == GgufType.STRING.id) hKvGet.getValue(type).invoke(ptr(gguf), index, s[0], s[1])
        else hKvGet.getValue(type).invoke(ptr(gguf), index, s[0])
    }

    override fun ggufKvArrayLen(gguf: Long, index: Long, out: LongArray) =
        slots(out, 2, intArrayOf(4, 8)) { s -> hKvArrayLen.invoke(ptr(gguf), index, s[0], s[1]) }

    override fun ggufKvArrayGet(gguf: Long, index: Long, element: Long, type: Int, out: LongArray) =
        kvValue(type, out) { s ->
            if (type == GgufType.STRING.id) hKvArrayGet.getValue(type).invoke(ptr(gguf), index, element, s[0], s[1])
            else hKvArrayGet.getValue(type).invoke(ptr(gguf), index, element, s[0])
        }

    /**
     * Calls [call] with [n] zeroed 8-byte out-slots; on success stores each slot's value,
     * read at the width of its C type ([widths], default 8 bytes), zero-extended.
     */
    private inline fun slots(out: LongArray, n: Int, widths: IntArray? = null, call: (List<MemorySegment>) -> Any?): Int =
        Arena.ofConfined().use { arena ->
            val block = arena.allocate(8L * n, 8)
            val status = call(List(n) { block.asSlice(8L * it, 8) }) as Int
            if (status == Status.OK) {
                for (i in 0 until n) {
                    out[i] = when (widths?.get(i) ?: 8) {
                        1 -> block.get(JAVA_BYTE, 8L * i).toLong() and 0xFF
                        2 -> block.get(JAVA_SHORT, 8L * i).toLong() and 0xFFFF
                        4 -> block.get(I, 8L * i).toLong() and 0xFFFF_FFFFL
                        else -> block.get(L, 8L * i)
                    }
                }
            }
            status
        }

    /** A metadata value: a string's (address, length) or a scalar's bits at its type's width. */
    private inline fun kvValue(type: Int, out: LongArray, call: (List<MemorySegment>) -> Any?): Int =
        if (type == GgufType.STRING.id) slots(out, 2, null, call)
        else slots(out, 1, intArrayOf(GgufType.of(type)!!.width), call)
}

/** The FFM upcall target of an event sink: reads a `tern_event` (LP64 layout) for it. */
internal class Upcall(private val sink: EventSink) {
    fun call(@Suppress("UNUSED_PARAMETER") userdata: MemorySegment, event: MemorySegment) {
        val e = event.reinterpret(56)
        sink.onEvent(
            e.get(JAVA_INT, 0), e.get(ADDRESS, 8).address(), e.get(JAVA_INT, 16), e.get(JAVA_INT, 20),
            e.get(JAVA_LONG, 24), e.get(JAVA_LONG, 32), e.get(JAVA_LONG, 40), e.get(JAVA_LONG, 48),
        )
    }
}
