/* An engine's attention projections with tern: open a GGUF file, wrap its Q/K/V weights
 * (no copy), and run one token through all three with tern_matmul_many: the activation
 * is requantized once, the three weights run in one dispatch, and the events say what
 * ran. Usage: example_engine tiny_attention.gguf */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tern.h>

#define TRY(call)                                                                      \
    do {                                                                               \
        tern_status s_ = (call);                                                       \
        if (s_ != TERN_OK) {                                                           \
            fprintf(stderr, "%s: %s (%s)\n", #call, tern_status_str(s_), tern_last_error()); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

static void on_event(void *userdata, const tern_event *e) {
    int *count = (int *)userdata;
    ++*count;
    printf("  %s %s: %zu x %zu, %zu bytes\n",
           e->kind == TERN_EVENT_ADAPTER_INSERTED ? "ADAPTER_INSERTED" : "KERNEL_SELECTED ",
           e->name, e->rows, e->cols, e->bytes);
}

int main(int argc, char **argv) {
    static const char *const names[3] = {"blk.0.attn_q.weight", "blk.0.attn_k.weight",
                                         "blk.0.attn_v.weight"};
    tern_gguf *model = NULL;
    const tern_tensor *qkv[3];
    tern_tensor *owned[3];
    float *outs[3];
    size_t out_lens[3];
    int events = 0;
    if (argc != 2) return 2;

    TRY(tern_gguf_open(argv[1], &model)); /* memory-mapped; tensors are read in place */
    for (int i = 0; i < 3; i++) {
        size_t index;
        TRY(tern_gguf_find(model, names[i], &index));
        TRY(tern_gguf_tensor_wrap(model, index, &owned[i])); /* rows = ne[1], cols = ne[0] */
        qkv[i] = owned[i];
        out_lens[i] = tern_tensor_rows(owned[i]); /* one token */
        outs[i] = (float *)calloc(out_lens[i], sizeof(float));
    }
    tern_gguf_free(model); /* the wrapped tensors keep the mapping alive */

    /* Strict: no silent matmul/reference fallback; the engine, not TERN_KERNEL, decides. */
    tern_dispatcher_options options;
    memset(&options, 0, sizeof options); /* later fields default to 0 */
    options.struct_size = sizeof options;
    options.flags = TERN_DISPATCH_STRICT | TERN_DISPATCH_IGNORE_ENV;
    tern_dispatcher *d;
    TRY(tern_dispatcher_new(&options, &d));
    TRY(tern_dispatcher_set_sink(d, on_event, &events));

    size_t k = tern_tensor_cols(owned[0]);
    float *x = (float *)malloc(k * sizeof(float)); /* the token's hidden state */
    for (size_t j = 0; j < k; j++) x[j] = (float)((j * 7) % 13) / 13.0f - 0.5f;
    const tern_encoding *f32;
    tern_tensor *act;
    TRY(tern_encoding_get(TERN_FORMAT_F32, &f32));
    TRY(tern_tensor_wrap(f32, x, k * sizeof(float), 1, k, &act));

    tern_scope *scope; /* one per forward pass: holds the requantized activation */
    TRY(tern_scope_new(0, &scope));
    printf("Q/K/V of one token:\n");
    TRY(tern_matmul_many(d, act, qkv, 3, scope, outs, out_lens));
    printf("q[0] = %.6f, k[0] = %.6f, v[0] = %.6f\n", outs[0][0], outs[1][0], outs[2][0]);
    tern_scope_reset(scope);

    tern_scope_free(scope);
    tern_tensor_free(act);
    free(x);
    for (int i = 0; i < 3; i++) {
        tern_tensor_free(owned[i]);
        free(outs[i]);
    }
    tern_dispatcher_free(d);
    return events == 4 ? 0 : 1; /* one ADAPTER_INSERTED, then one KERNEL_SELECTED per weight */
}
