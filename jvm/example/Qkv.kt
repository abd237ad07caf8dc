// The JVM example of docs/consuming.md: opens a GGUF and runs an attention block's Q, K and
// V projections against one activation with matmulMany (one requantization, one dispatch).
//
// Usage: QkvKt MODEL.gguf  (scripts/test-jvm.sh runs it on tests/fixtures/gguf/tiny_attention.gguf)
import tern.Dispatcher
import tern.EventKind
import tern.Format
import tern.Gguf
import tern.Scope
import tern.Tensor
import tern.Tern

fun main(args: Array<String>) {
    println("tern ${Tern.versionString} (${Tern.bridgeName} bridge)")
    Gguf.open(args[0]).use { gguf ->
        val names = listOf("q", "k", "v").map { "blk.0.attn_$it.weight" }
        // Wrapped without a copy: the tensors read the file's mapping.
        val weights = names.map { gguf.tensor(it) }
        val tokens = 4
        val k = weights[0].cols
        val x = FloatArray(tokens * k) { i -> ((i * 37) % 101 - 50) / 50f }
        Dispatcher(threads = 2, onEvent = { e ->
            if (e.kind == EventKind.KERNEL_SELECTED) println("  ${e.name}: ${e.rows} x ${e.cols} in ${e.nanos} ns")
        }).use { dispatcher ->
            Scope().use { scope ->
                Tensor.encode(Format.F32, x, tokens, k).use { act ->
                    val (q, kk, v) = dispatcher.matmulMany(act, weights, scope)
                    names.zip(listOf(q, kk, v)).zip(weights) { (name, out), w ->
                        println("$name: ${w.rows} x ${w.cols} ${w.format} -> $tokens x ${w.rows}, first ${out[0]}")
                    }
                }
            }
        }
        weights.forEach { it.close() }
    }
}
