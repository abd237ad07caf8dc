// The JVM example of docs/consuming.md: opens a GGUF, reads the model's hyperparameters from
// its metadata, looks up one token's embedding row (F16, a type tern has no format for: its
// bytes come without a copy) and runs it through an attention block's Q, K and V projections
// with matmulMany (one requantization, one dispatch).
//
// Usage: QkvKt MODEL.gguf  (scripts/test-jvm.sh runs it on tests/fixtures/gguf/tiny_attention.gguf)
import tern.Dispatcher
import tern.EventKind
import tern.Format
import tern.Gguf
import tern.GgufArray
import tern.GgufType
import tern.Scope
import tern.Tensor
import tern.Tern

/** An IEEE half's bits as a float (Float.float16ToFloat needs JDK 20). */
fun halfToFloat(h: Int): Float {
    val sign = if (h and 0x8000 != 0) -1f else 1f
    val exp = (h shr 10) and 0x1F
    val mant = h and 0x3FF
    return sign * when (exp) {
        0 -> Math.scalb(mant.toFloat(), -24)
        31 -> if (mant == 0) Float.POSITIVE_INFINITY else Float.NaN
        else -> Math.scalb(1024f + mant, exp - 25)
    }
}

fun main(args: Array<String>) {
    println("tern ${Tern.versionString} (${Tern.bridgeName} bridge)")
    Gguf.open(args[0]).use { gguf ->
        // Typed as in the file (UINT32 is a UInt); another type than asked is refused.
        val arch = gguf.metadata("general.architecture", GgufType.STRING) as String
        fun u32(name: String) = (gguf.metadata("$arch.$name", GgufType.UINT32) as UInt).toInt()
        val nEmbd = u32("embedding_length")
        val nHead = u32("attention.head_count")
        val nHeadKv = u32("attention.head_count_kv")
        val headDim = u32("attention.key_length")
        val eps = gguf.metadata("$arch.attention.layer_norm_rms_epsilon", GgufType.FLOAT32) as Float
        // The vocabulary: an array of strings, read element by element from the file.
        val vocab = gguf.metadata("tokenizer.ggml.tokens") as GgufArray
        val token = vocab.indexOf("cat")
        println("n_embd $nEmbd, $nHead heads ($nHeadKv for K/V) of $headDim, rms eps $eps, ${vocab.size} tokens; \"cat\" is token $token")

        // The token's hidden state: its row of the F16 embedding (ggml type 1), converted.
        val embd = gguf.tensorData("token_embd.weight")
        check(embd.ggmlType == 1 && embd.bytes.remaining() == vocab.size * nEmbd * 2)
        val x = FloatArray(nEmbd) { j -> halfToFloat(embd.bytes.getShort((token * nEmbd + j) * 2).toInt()) }

        val names = listOf("q", "k", "v").map { "blk.0.attn_$it.weight" }
        // Wrapped without a copy: the tensors read the file's mapping.
        val weights = names.map { gguf.tensor(it) }
        // Q has nHead heads of headDim rows, K and V nHeadKv; all take nEmbd inputs.
        check(weights[0].rows == nHead * headDim && weights[1].rows == nHeadKv * headDim && weights[0].cols == nEmbd)
        // Strict: no silent matmul/reference fallback; the program, not TERN_KERNEL, decides.
        Dispatcher(threads = 2, strict = true, ignoreEnv = true, onEvent = { e ->
            if (e.kind == EventKind.KERNEL_SELECTED) println("  ${e.name}: ${e.rows} x ${e.cols} in ${e.nanos} ns")
        }).use { dispatcher ->
            Scope().use { scope ->
                Tensor.encode(Format.F32, x, 1, nEmbd).use { act ->
                    val (q, k, v) = dispatcher.matmulMany(act, weights, scope)
                    names.zip(listOf(q, k, v)).zip(weights) { (name, out), w ->
                        println("$name: ${w.rows} x ${w.cols} ${w.format} -> 1 x ${w.rows}, first ${out[0]}")
                    }
                }
            }
        }
        weights.forEach { it.close() }
    }
}
