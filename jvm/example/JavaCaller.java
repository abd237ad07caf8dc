// The Java example of docs/consuming.md: the same library from Java (defaults through
// @JvmOverloads, statics through @JvmStatic, failures as TernException).
import java.util.List;
import tern.Dispatcher;
import tern.Format;
import tern.Status;
import tern.Tensor;
import tern.TernException;

public final class JavaCaller {
    public static void main(String[] args) {
        float[] w = new float[8 * 256];
        for (int i = 0; i < w.length; i++) w[i] = (i % 3) - 1;
        float[] x = new float[256];
        for (int i = 0; i < x.length; i++) x[i] = i / 256f;
        try (Dispatcher d = new Dispatcher(1, true);
             Tensor weight = Tensor.encode(Format.TQ2_0, w, 8, 256);
             Tensor act = Tensor.encode(Format.F32, x, 1, 256)) {
            float[] y = d.matmul(act, weight);
            List<float[]> many = d.matmulMany(act, List.of(weight, weight));
            System.out.println("y[0] = " + y[0] + ", matmulMany gave " + many.size() + " outputs");
            try {
                d.matmul(act, weight, new float[7]);
            } catch (TernException e) {
                System.out.println("refused as expected: " + (e.getStatus() == Status.LENGTH_MISMATCH) + " " + e.getMessage());
            }
        }
    }
}
