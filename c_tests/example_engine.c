/* An engine's first steps with tern: open a GGUF file, read the model's hyperparameters
 * from its metadata, look up one token's embedding row (F16, a type tern has no format
 * for: tern_gguf_tensor_data hands over its bytes), wrap the Q/K/V weights (no copy) and
 * run the token through all three with tern_matmul_many: the activation is requantized
 * once, the three weights run in one dispatch, and the events say what ran.
 * Usage: example_engine tiny_attention.gguf */
#include <stdint.h>
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

/* The index of the hyperparameter "<arch>.<name>", e.g. "bitnet.attention.head_count". */
static size_t kv_index(const tern_gguf *g, const char *arch, const char *name) {
    char key[128];
    size_t index;
    snprintf(key, sizeof key, "%s.%s", arch, name);
    TRY(tern_gguf_kv_find(g, key, &index));
    return index;
}

static uint32_t kv_u32(const tern_gguf *g, const char *arch, const char *name) {
    uint32_t value;
    TRY(tern_gguf_kv_get_u32(g, kv_index(g, arch, name), &value)); /* refused if not a u32 */
    return value;
}

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    float f;
    if (exp == 0x1f) bits = sign | 0x7f800000u | (man << 13);       /* infinity, NaN */
    else if (exp != 0) bits = sign | ((exp + 112) << 23) | (man << 13); /* normal */
    else if (man == 0) bits = sign;                                   /* zero */
    else {                                                            /* subnormal */
        for (exp = 113; !(man & 0x400u); exp--) man <<= 1;
        bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    }
    memcpy(&f, &bits, sizeof f);
    return f;
}

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
    size_t out_lens[3], index, len, n_vocab, token = 0;
    const char *str;
    char arch[32];
    float eps;
    uint32_t type;
    int events = 0;
    if (argc != 2) return 2;

    TRY(tern_gguf_open(argv[1], &model)); /* memory-mapped; tensors are read in place */
    /* Metadata strings point into the file and are not NUL-terminated: copy or use %.*s. */
    TRY(tern_gguf_kv_find(model, "general.architecture", &index));
    TRY(tern_gguf_kv_get_str(model, index, &str, &len));
    snprintf(arch, sizeof arch, "%.*s", (int)len, str);
    uint32_t n_embd = kv_u32(model, arch, "embedding_length");
    uint32_t n_head = kv_u32(model, arch, "attention.head_count");
    uint32_t n_head_kv = kv_u32(model, arch, "attention.head_count_kv");
    uint32_t head_dim = kv_u32(model, arch, "attention.key_length");
    TRY(tern_gguf_kv_get_f32(model, kv_index(model, arch, "attention.layer_norm_rms_epsilon"), &eps));
    /* The vocabulary: an array of strings, read by index without copying it. */
    TRY(tern_gguf_kv_find(model, "tokenizer.ggml.tokens", &index));
    TRY(tern_gguf_kv_array_len(model, index, &type, &n_vocab));
    for (size_t i = 0; i < n_vocab; i++) {
        TRY(tern_gguf_kv_array_get_str(model, index, i, &str, &len));
        if (len == 3 && memcmp(str, "cat", 3) == 0) token = i;
    }
    printf("n_embd %u, %u heads (%u for K/V) of %u, rms eps %g, %zu tokens; \"cat\" is token %zu\n",
           n_embd, n_head, n_head_kv, head_dim, eps, n_vocab, token);

    /* The token's hidden state: its row of the F16 embedding (ggml type 1), converted. */
    const void *embd;
    TRY(tern_gguf_find(model, "token_embd.weight", &index));
    TRY(tern_gguf_tensor_data(model, index, &embd, &len, &type));
    if (type != 1 || len != (size_t)n_vocab * n_embd * 2) return 1;
    float *x = (float *)malloc(n_embd * sizeof(float));
    for (size_t j = 0; j < n_embd; j++) {
        uint16_t h;
        memcpy(&h, (const unsigned char *)embd + (token * n_embd + j) * 2, sizeof h);
        x[j] = f16_to_f32(h);
    }

    for (int i = 0; i < 3; i++) {
        TRY(tern_gguf_find(model, names[i], &index));
        TRY(tern_gguf_tensor_wrap(model, index, &owned[i])); /* rows = ne[1], cols = ne[0] */
        qkv[i] = owned[i];
        out_lens[i] = tern_tensor_rows(owned[i]); /* one token */
        outs[i] = (float *)calloc(out_lens[i], sizeof(float));
    }
    /* Q has n_head heads of head_dim rows, K and V n_head_kv; all take n_embd inputs. */
    if (out_lens[0] != n_head * head_dim || out_lens[1] != n_head_kv * head_dim) return 1;
    if (tern_tensor_cols(owned[0]) != n_embd) return 1;
    tern_gguf_free(model); /* the wrapped tensors keep the mapping alive; `embd` dies here */

    /* Strict: no silent matmul/reference fallback; the engine, not TERN_KERNEL, decides. */
    tern_dispatcher_options options;
    memset(&options, 0, sizeof options); /* later fields default to 0 */
    options.struct_size = sizeof options;
    options.flags = TERN_DISPATCH_STRICT | TERN_DISPATCH_IGNORE_ENV;
    tern_dispatcher *d;
    TRY(tern_dispatcher_new(&options, &d));
    TRY(tern_dispatcher_set_sink(d, on_event, &events));

    const tern_encoding *f32;
    tern_tensor *act;
    TRY(tern_encoding_get(TERN_FORMAT_F32, &f32));
    TRY(tern_tensor_wrap(f32, x, n_embd * sizeof(float), 1, n_embd, &act));

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
