package tern

import java.nio.ByteBuffer

/** What an [Event] reports (`TERN_EVENT_*`). */
enum class EventKind(val id: Int) {
    ADAPTER_INSERTED(1), KERNEL_SELECTED(2);

    companion object {
        @JvmStatic
        fun of(id: Int): EventKind? = entries.firstOrNull { it.id == id }
    }
}

/**
 * One report (`tern_event`). An adapter event: [name] the adapter, [from]/[to] the formats,
 * `rows x cols` the converted tensor, [bytes] its size in [to]. A kernel event: [name] the
 * kernel, [from] the weight format, [to] the activation format it consumed, `rows x cols` the
 * output, [bytes] the weight bytes read. [nanos]: the step's wall time.
 */
data class Event(
    val kind: EventKind, val name: String, val from: Format?, val to: Format?,
    val rows: Long, val cols: Long, val bytes: Long, val nanos: Long,
)

/**
 * Chooses and runs kernels (`tern_dispatcher`). [threads]: threads per matmul, counting the
 * caller. [strict]: refuse pairs no dedicated kernel serves (TERN_DISPATCH_STRICT). [kernel]:
 * force a kernel by name for the pairs it serves; `matmul/reference`, the decoding fallback
 * that [Tern.kernels] lists, cannot be forced: TERN_ERR_UNKNOWN_KERNEL, as tern.h's
 * `tern_dispatcher_new` reports it. [ignoreEnv]: do not read `TERN_KERNEL`. No engine thread
 * pool (`parallel_for`) is bound, so TERN_DISPATCH_SERIALIZE_EXECUTOR has nothing to apply to:
 * tern's own pool already runs a concurrent caller's matmul inline on that caller's thread.
 * [onEvent]: receives the events, on the thread that called matmul; an exception it throws
 * is rethrown by that matmul once tern returns (the output is written by then). A callback
 * that captures its own dispatcher keeps it alive until close().
 *
 * Thread-safety: matmul may run on one dispatcher from several threads at once, each with
 * its own [Scope]; [setOnEvent] and close() must not race with anything else on it.
 */
class Dispatcher @JvmOverloads constructor(
    threads: Int = 1,
    strict: Boolean = false,
    kernel: String? = null,
    ignoreEnv: Boolean = false,
    onEvent: ((Event) -> Unit)? = null,
) : Handle(newDispatcher(threads, strict, kernel, ignoreEnv)) {
    @Volatile private var hasSink = false
    private val callbackFailure = ThreadLocal<Throwable?>()

    init {
        if (onEvent != null) setOnEvent(onEvent)
    }

    /** Replaces the event callback (null: none). */
    fun setOnEvent(callback: ((Event) -> Unit)?) = alive(this) {
        // The sink stays referenced from native code until replaced: it must not capture this
        // dispatcher, or a dispatcher dropped without close() could never be collected.
        val failures = callbackFailure
        val sink = callback?.let { cb ->
            EventSink { kind, name, from, to, rows, cols, bytes, nanos ->
                // A kind this library predates is skipped. An exception must not unwind through
                // tern's frames: kept, and rethrown after the call.
                val eventKind = EventKind.of(kind) ?: return@EventSink
                try {
                    cb(Event(eventKind, bridge.string(name), Format.of(from), Format.of(to), rows, cols, bytes, nanos))
                } catch (t: Throwable) {
                    if (failures.get() == null) failures.set(t)
                }
            }
        }
        val keep = arrayOfNulls<AutoCloseable>(1)
        check(bridge.setSink(address, sink, keep))
        (ref.keep as SinkKeep).replace(keep[0])
        hasSink = sink != null
    }

    /** `act x weight^T`: m x n floats, row-major (m = act.rows, n = weight.rows). */
    @JvmOverloads
    fun matmul(act: Tensor, weight: Tensor, scope: Scope? = null): FloatArray =
        FloatArray(elements(act.rows, weight.rows)).also { matmul(act, weight, it, scope) }

    /** [matmul] into [out] (at least m * n floats); on failure [out] is untouched. */
    @JvmOverloads
    fun matmul(act: Tensor, weight: Tensor, out: FloatArray, scope: Scope? = null) =
        run(act, listOf(weight), scope) { d, a, s ->
            bridge.matmul(d, a, weight.address, s, out, 0, out.size.toLong(), hasSink)
        }

    /** [matmul] into a direct buffer of native-order floats, from its position. */
    @JvmOverloads
    fun matmul(act: Tensor, weight: Tensor, out: ByteBuffer, scope: Scope? = null) =
        alive(out) { matmulAt(act, weight, floatsAddress(out), out.remaining() / 4L, scope) }

    internal fun matmulAt(act: Tensor, weight: Tensor, outAddress: Long, outLength: Long, scope: Scope?) =
        run(act, listOf(weight), scope) { d, a, s ->
            bridge.matmul(d, a, weight.address, s, null, outAddress, outLength, hasSink)
        }

    /**
     * One activation against several weights (Q/K/V), in one dispatch (`tern_matmul_many`);
     * bit-identical to separate [matmul] calls. Returns one m x rows array per weight.
     */
    @JvmOverloads
    fun matmulMany(act: Tensor, weights: List<Tensor>, scope: Scope? = null): List<FloatArray> =
        weights.map { FloatArray(elements(act.rows, it.rows)) }.also { matmulMany(act, weights, it, scope) }

    /** [matmulMany] into [outs], one per weight; on failure none is written. */
    @JvmOverloads
    fun matmulMany(act: Tensor, weights: List<Tensor>, outs: List<FloatArray>, scope: Scope? = null) {
        sameCount(weights, outs)
        val lengths = LongArray(outs.size) { outs[it].size.toLong() }
        run(act, weights, scope) { d, a, s ->
            bridge.matmulMany(d, a, addresses(weights), s, outs.toTypedArray(), LongArray(outs.size), lengths)
        }
    }

    /** [matmulMany] into direct buffers of native-order floats, from their positions. */
    @JvmOverloads
    fun matmulMany(act: Tensor, weights: List<Tensor>, outs: Array<ByteBuffer>, scope: Scope? = null) = alive(outs) {
        sameCount(weights, outs.asList())
        val addresses = LongArray(outs.size) { floatsAddress(outs[it]) }
        val lengths = LongArray(outs.size) { outs[it].remaining() / 4L }
        run(act, weights, scope) { d, a, s -> bridge.matmulMany(d, a, addresses(weights), s, null, addresses, lengths) }
    }

    private fun sameCount(weights: List<Tensor>, outs: List<*>) {
        if (weights.size != outs.size) fail(Status.LENGTH_MISMATCH, "${weights.size} weights but ${outs.size} outputs")
    }

    private fun addresses(tensors: List<Tensor>) = LongArray(tensors.size) { tensors[it].address }

    /**
     * Runs one native matmul with this dispatcher, the activation and a scope (the caller's,
     * or a temporary one when null), keeps every handle reachable meanwhile, then rethrows
     * an exception the event callback threw.
     */
    private inline fun run(act: Tensor, weights: List<Tensor>, scope: Scope?, call: (Long, Long, Long) -> Int) =
        alive(this, act, weights) {
            val temporary = if (scope == null) Scope() else null
            try {
                val status = alive(scope) { call(address, act.address, (scope ?: temporary)!!.address) }
                // Read before a callback failure is thrown: tern_last_error belongs to this thread's last call.
                val error = if (status != Status.OK) TernException(status, lastError()) else null
                callbackFailure.get()?.let { callbackFailure.remove(); throw it }
                if (error != null) throw error
            } finally {
                temporary?.close()
            }
        }

    override fun toString() = "Dispatcher(${if (isClosed) "closed" else "open"})"

    /**
     * What the current sink needs kept open (FFM: its upcall stub), closed once the dispatcher
     * no longer calls it: when replaced, or after the dispatcher is freed.
     */
    private class SinkKeep {
        @Volatile private var current: AutoCloseable? = null

        fun replace(next: AutoCloseable?) {
            current?.close()
            current = next
        }

        fun close() = replace(null)
    }

    private companion object {
        fun newDispatcher(threads: Int, strict: Boolean, kernel: String?, ignoreEnv: Boolean): NativeRef {
            val flags = (if (strict) 1 else 0) or (if (ignoreEnv) 2 else 0)
            val out = LongArray(1)
            check(bridge.dispatcherNew(threads, kernel?.let { cString(it, "kernel") }, flags, out))
            val sinks = SinkKeep()
            return NativeRef(out[0], sinks) {
                bridge.dispatcherFree(it)
                sinks.close()
            }
        }
    }
}
