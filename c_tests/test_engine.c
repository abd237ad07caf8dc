/*
 * The engine-facing calls of 0.2 from C: GGUF files (every prefix and corrupted headers
 * refused, tensors wrapped in place), tern_matmul_many against separate tern_matmul calls
 * on an engine's pthread pool (parallel_for), strict dispatch, versioned options, the
 * tile call, matmul/reference in the kernel list, and tern_last_error. Every refused call
 * leaves its outputs untouched. Argument: the GGUF fixture directory.
 */
#include <pthread.h>

#include "check.h"

#define CANARY (-12345.5f)

static unsigned char *read_file(const char *dir, const char *name, size_t *len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = (unsigned char *)check_alloc(*len);
    if (fread(bytes, 1, *len, f) != *len) *len = 0;
    fclose(f);
    return bytes;
}

/* An engine's pool: each parallel_for starts THREADS pthreads that claim tasks. */
enum { THREADS = 3 };
typedef struct {
    pthread_mutex_t lock;
    size_t next, n_tasks;
    tern_task_fn task;
    void *ctx;
    int calls;
} pool_t;

static void *pool_worker(void *arg) {
    pool_t *p = (pool_t *)arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        size_t i = p->next++;
        pthread_mutex_unlock(&p->lock);
        if (i >= p->n_tasks) return NULL;
        p->task(p->ctx, i);
    }
}

static void parallel_for(void *pool, size_t n_tasks, tern_task_fn task, void *task_ctx) {
    pool_t *p = (pool_t *)pool;
    pthread_t threads[THREADS];
    p->next = 0;
    p->n_tasks = n_tasks;
    p->task = task;
    p->ctx = task_ctx;
    p->calls++;
    for (int t = 0; t < THREADS; t++) pthread_create(&threads[t], NULL, pool_worker, p);
    for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
}

static void test_gguf(const char *dir) {
    size_t len = 0;
    unsigned char *bytes = read_file(dir, "tiny_attention.gguf", &len);
    char path[4096];
    tern_gguf *g = (tern_gguf *)&len, *const canary = g; /* a canary pointer */
    tern_gguf_tensor_info info;
    size_t index = 77;
    tern_tensor *t = NULL;
    if (!bytes || len == 0) {
        fprintf(stderr, "test_engine: cannot read %s/tiny_attention.gguf\n", dir);
        exit(77);
    }
    /* Every prefix is refused without writing `g`, except those holding every tensor. */
    for (size_t n = 0; n < len; n++) {
        tern_status s = tern_gguf_open_bytes(bytes, n, &g);
        if (s == TERN_OK) {
            tern_gguf_free(g);
            g = canary;
            continue;
        }
        if (!CHECK(s == TERN_ERR_INVALID_FILE && g == canary && tern_last_error()[0] != '\0')) break;
    }
    /* Corrupted headers: absurd tensor count, metadata count, key length. */
    {
        const size_t at[] = {8, 16, 24};
        for (size_t i = 0; i < 3; i++) {
            unsigned char *bad = (unsigned char *)check_alloc(len);
            memcpy(bad, bytes, len);
            memset(bad + at[i], 0xff, 8);
            CHECK_STATUS(tern_gguf_open_bytes(bad, len, &g), TERN_ERR_INVALID_FILE);
            CHECK(g == canary);
            free(bad);
        }
    }
    CHECK_ERROR(tern_gguf_open(NULL, &g), TERN_ERR_NULL_POINTER, "`path`");
    CHECK_ERROR(tern_gguf_open("/nonexistent/x.gguf", &g), TERN_ERR_IO, "/nonexistent/x.gguf");
    CHECK(g == canary);

    snprintf(path, sizeof path, "%s/tiny_attention.gguf", dir);
    CHECK_OK(tern_gguf_open(path, &g));
    CHECK(tern_gguf_tensor_count(g) == 4); /* Q, K, V and the F16 token embedding */
    CHECK(tern_gguf_tensor_count(NULL) == 0);
    CHECK_OK(tern_gguf_find(g, "blk.0.attn_k.weight", &index));
    CHECK(index == 1);
    CHECK_OK(tern_gguf_tensor_info_get(g, index, &info));
    CHECK(strcmp(info.name, "blk.0.attn_k.weight") == 0 && info.ggml_type == 35u);
    CHECK(info.format == TERN_FORMAT_TQ2_0 && info.n_dims == 2 && info.ne[0] == 256 && info.ne[1] == 32);
    CHECK(info.bytes == 32 * 66 && info.offset + info.bytes <= len);
    CHECK_OK(tern_gguf_tensor_wrap(g, index, &t));
    CHECK(tern_tensor_rows(t) == 32 && tern_tensor_cols(t) == 256);
    {
        const void *data = NULL;
        size_t n = 0;
        CHECK_OK(tern_tensor_data(t, &data, &n));
        CHECK(n == info.bytes && memcmp(data, bytes + info.offset, n) == 0);
    }
    tern_tensor_free(t);
    t = (tern_tensor *)&len;
    index = 77;
    memset(&info, 0xA5, sizeof info);
    CHECK_ERROR(tern_gguf_find(g, "blk.0.attn_o.weight", &index), TERN_ERR_NOT_FOUND,
                "\"blk.0.attn_o.weight\"");
    CHECK_ERROR(tern_gguf_tensor_info_get(g, 4, &info), TERN_ERR_OUT_OF_BOUNDS, "4 given");
    CHECK_STATUS(tern_gguf_tensor_wrap(g, 4, &t), TERN_ERR_OUT_OF_BOUNDS);
    CHECK_ERROR(tern_gguf_tensor_wrap(g, 3, &t), TERN_ERR_UNSUPPORTED, "tern_gguf_tensor_data");
    CHECK_STATUS(tern_gguf_tensor_wrap(NULL, 0, &t), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_gguf_find(g, NULL, &index), TERN_ERR_NULL_POINTER);
    CHECK(index == 77 && t == (tern_tensor *)&len && bytes_all(&info, sizeof info, 0xA5));
    /* Metadata: a u32 by key, a type mismatch and a missing key refused, outputs untouched. */
    {
        uint32_t heads = 0, type = 0;
        float eps = 0.0f;
        const char *str = NULL;
        size_t n = 0;
        CHECK_OK(tern_gguf_kv_find(g, "bitnet.attention.head_count", &index));
        CHECK_OK(tern_gguf_kv_type(g, index, &type));
        CHECK_OK(tern_gguf_kv_get_u32(g, index, &heads));
        CHECK(type == TERN_GGUF_TYPE_UINT32 && heads == 4);
        CHECK_ERROR(tern_gguf_kv_get_f32(g, index, &eps), TERN_ERR_INVALID_ARGUMENT, "has type u32, not f32");
        CHECK_ERROR(tern_gguf_kv_get_str(g, index, &str, &n), TERN_ERR_INVALID_ARGUMENT, "not string");
        CHECK_ERROR(tern_gguf_kv_find(g, "bitnet.nope", &index), TERN_ERR_NOT_FOUND, "\"bitnet.nope\"");
        CHECK_ERROR(tern_gguf_kv_key(g, tern_gguf_kv_count(g), &str, &n), TERN_ERR_OUT_OF_BOUNDS, "metadata entries");
        CHECK(eps == 0.0f && str == NULL && n == 0);
        CHECK_OK(tern_gguf_kv_find(g, "tokenizer.ggml.tokens", &index));
        CHECK_OK(tern_gguf_kv_array_get_str(g, index, 3, &str, &n));
        CHECK(n == 3 && memcmp(str, "cat", 3) == 0);
    }
    tern_gguf_free(g);
    tern_gguf_free(NULL);
    free(bytes);
}

static void test_many_and_pool(const char *dir) {
    char path[4096];
    tern_gguf *g = NULL;
    tern_tensor *w[3], *act = NULL;
    const tern_tensor *ws[3];
    float x[4 * 256], separate[3][4 * 64], many[3][4 * 64];
    float *outs[3];
    size_t lens[3];
    tern_scope *scope = NULL;
    pool_t pool;
    tern_dispatcher_options options;
    tern_dispatcher *plain = NULL, *engine = NULL;
    const tern_encoding *f32 = NULL;
    memset(&pool, 0, sizeof pool);
    pthread_mutex_init(&pool.lock, NULL);
    snprintf(path, sizeof path, "%s/tiny_attention.gguf", dir);
    CHECK_OK(tern_gguf_open(path, &g));
    for (size_t i = 0; i < 3; i++) {
        CHECK_OK(tern_gguf_tensor_wrap(g, i, &w[i]));
        ws[i] = w[i];
        outs[i] = many[i];
        lens[i] = 4 * tern_tensor_rows(w[i]);
    }
    tern_gguf_free(g);
    for (size_t i = 0; i < 4 * 256; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    CHECK_OK(tern_encoding_get(TERN_FORMAT_F32, &f32));
    CHECK_OK(tern_tensor_wrap(f32, x, sizeof x, 4, 256, &act));
    CHECK_OK(tern_scope_new(0, &scope));

    memset(&options, 0, sizeof options);
    options.struct_size = sizeof options;
    options.n_threads = THREADS;
    options.parallel_for = parallel_for;
    options.pool = &pool;
    CHECK_OK(tern_dispatcher_new(NULL, &plain));
    CHECK_OK(tern_dispatcher_new(&options, &engine));
    for (size_t i = 0; i < 3; i++) CHECK_OK(tern_matmul(plain, act, w[i], scope, separate[i], lens[i]));
    CHECK_OK(tern_matmul_many(engine, act, ws, 3, scope, outs, lens));
    for (size_t i = 0; i < 3; i++) CHECK(memcmp(separate[i], many[i], lens[i] * sizeof(float)) == 0);
    CHECK(tern_last_error()[0] == '\0');

    /* Refusals write nothing. */
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < lens[i]; j++) many[i][j] = CANARY;
    CHECK_ERROR(tern_matmul_many(engine, act, ws, 0, scope, outs, lens), TERN_ERR_INVALID_ARGUMENT,
                "`n_weights`");
    lens[2] -= 1;
    CHECK_ERROR(tern_matmul_many(engine, act, ws, 3, scope, outs, lens), TERN_ERR_LENGTH_MISMATCH,
                "weight 2");
    lens[2] += 1;
    outs[1] = many[0];
    CHECK_ERROR(tern_matmul_many(engine, act, ws, 3, scope, outs, lens), TERN_ERR_INVALID_ARGUMENT,
                "overlaps");
    outs[1] = many[1];
    CHECK_STATUS(tern_matmul_many(engine, act, NULL, 3, scope, outs, lens), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_matmul_many(engine, act, ws, 3, NULL, outs, lens), TERN_ERR_SCOPE_REQUIRED);
    for (size_t i = 0; i < 3; i++) CHECK(floats_all(many[i], lens[i], CANARY));

    /* Strict: swapped operands (the F32 activation as the weight) are refused. */
    options.parallel_for = NULL;
    options.pool = NULL;
    options.n_threads = 0;
    options.flags = TERN_DISPATCH_STRICT;
    {
        tern_dispatcher *strict = NULL;
        float out[4 * 64];
        CHECK_OK(tern_dispatcher_new(&options, &strict));
        CHECK_OK(tern_matmul(plain, w[1], act, scope, out, 32 * 4));
        CHECK_ERROR(tern_matmul(strict, w[1], act, scope, many[0], 32 * 4), TERN_ERR_UNSUPPORTED,
                    "strict");
        CHECK(floats_all(many[0], 32 * 4, CANARY));
        tern_dispatcher_free(strict);
    }
    options.flags = 16; /* the first bit no TERN_DISPATCH_* flag uses */
    CHECK_ERROR(tern_dispatcher_new(&options, &engine), TERN_ERR_INVALID_ARGUMENT, "flags");
    options.flags = 0;
    options.struct_size = 4;
    CHECK_ERROR(tern_dispatcher_new(&options, &engine), TERN_ERR_INVALID_ARGUMENT, "struct_size");

    tern_dispatcher_free(plain);
    tern_dispatcher_free(engine);
    tern_scope_free(scope);
    tern_tensor_free(act);
    for (size_t i = 0; i < 3; i++) tern_tensor_free(w[i]);
    pthread_mutex_destroy(&pool.lock);
}

static void test_tiles_and_kernels(void) {
    enum { M = 5, N = 64, K = 256 };
    static float w[N * K], x[M * K], whole[M * N], tiled[M * N];
    const tern_encoding *tq2 = NULL, *i8 = NULL;
    tern_tensor *weight = NULL, *act = NULL;
    const char *ran = NULL, *first = NULL;
    tern_kernel_info info;
    for (size_t i = 0; i < N * K; i++) w[i] = (float)((i * 13) % 7) - 3.0f;
    for (size_t i = 0; i < M * K; i++) x[i] = (float)((i * 29) % 17) / 8.0f - 1.0f;
    CHECK_OK(tern_encoding_get(TERN_FORMAT_TQ2_0, &tq2));
    CHECK_OK(tern_encoding_get(TERN_FORMAT_I8_ABSMAX, &i8));
    CHECK_OK(tern_tensor_encode(tq2, w, N * K, N, K, &weight));
    CHECK_OK(tern_tensor_encode(i8, x, M * K, M, K, &act));
    CHECK_OK(tern_bitnet_gemv(NULL, act, weight, 0, N, whole, M * N));
    for (size_t i = 0; i < M * N; i++) tiled[i] = CANARY;
    CHECK_OK(tern_bitnet_gemv_tile(NULL, act, weight, 0, 32, 0, 2, tiled, M * N, &first));
    CHECK_OK(tern_bitnet_gemv_tile(NULL, act, weight, 32, 64, 0, 2, tiled, M * N, &ran));
    CHECK(first != NULL && ran != NULL && strcmp(first, ran) == 0);
    CHECK_OK(tern_bitnet_gemv_tile(NULL, act, weight, 0, 64, 2, 5, tiled, M * N, NULL));
    CHECK(memcmp(whole, tiled, sizeof whole) == 0);
    ran = NULL;
    CHECK_ERROR(tern_bitnet_gemv_tile(NULL, act, weight, 0, 64, 4, 6, tiled, M * N, &ran),
                TERN_ERR_OUT_OF_BOUNDS, "4..6");
    CHECK(ran == NULL && memcmp(whole, tiled, sizeof whole) == 0);

    CHECK_OK(tern_kernel_info_get(tern_kernel_count() - 1, &info));
    CHECK(strcmp(info.name, "matmul/reference") == 0 && info.weight == 0 && info.act == 0);
    CHECK(TERN_OK - 1u > 0u); /* the constants are unsigned */
    tern_tensor_free(weight);
    tern_tensor_free(act);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s GGUF_FIXTURE_DIR\n", argv[0]);
        return 2;
    }
    test_gguf(argv[1]);
    test_many_and_pool(argv[1]);
    test_tiles_and_kernels();
    return check_report("test_engine");
}
