// Calling overhead (scripts/test-jvm.sh): the loop of `reference bench` (jvm/test/reference.c)
// through the Kotlin API: matmul of a 1 x 2560 F32 activation by a 2560 x 2560 TQ2_0 weight
// into one FloatArray, the scope reset after each call. Prints the median nanoseconds per
// call of each round, after an unprinted warm-up round.
//
// Usage: BenchKt ROUNDS CALLS [new]   ("new": the allocating form, matmul(act, weight))
import tern.Dispatcher
import tern.Format
import tern.Scope
import tern.Tensor

fun main(args: Array<String>) {
    val rounds = args[0].toInt()
    val calls = args[1].toInt()
    val allocating = args.getOrNull(2) == "new"
    val n = 2560
    var state = 0x9E3779B97F4A7C15uL
    fun next(): Float {
        state = state xor (state shr 12)
        state = state xor (state shl 25)
        state = state xor (state shr 27)
        return (((state * 0x2545F4914F6CDD1DuL) shr 40).toDouble() / (1 shl 23) - 1.0).toFloat()
    }
    val weight = Tensor.encode(Format.TQ2_0, FloatArray(n * n) { next() }, n, n)
    val act = Tensor.encode(Format.F32, FloatArray(n) { next() }, 1, n)
    val out = FloatArray(n)
    val ns = LongArray(calls)
    Dispatcher(ignoreEnv = true).use { d ->
        Scope().use { scope ->
            for (round in 0..rounds) {
                for (c in 0 until calls) {
                    val t0 = System.nanoTime()
                    if (allocating) {
                        d.matmul(act, weight)
                    } else {
                        d.matmul(act, weight, out, scope)
                        scope.reset()
                    }
                    ns[c] = System.nanoTime() - t0
                }
                ns.sort()
                if (round > 0) println(ns[calls / 2])
            }
        }
    }
}
