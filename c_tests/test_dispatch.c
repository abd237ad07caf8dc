/*
 * The adapter, scopes, events, the dispatcher and the row-range GEMV from C: parity with
 * the definition for every ternary format, the adapter's events and price, scope stats and
 * staleness, a dense weight, and every error path (status, untouched output, no event).
 */
#include "check.h"

#define CANARY (-12345.5f)

static const uint32_t TERNARY[] = {TERN_FORMAT_TQ1_0, TERN_FORMAT_TQ2_0, TERN_FORMAT_BITNET_B1_58};

typedef struct {
    int magic;
    int count;
    tern_event events[8];
} recorder;

static void record(void *userdata, const tern_event *event) {
    recorder *r = (recorder *)userdata;
    if (r->magic != 0x7e57) {
        fprintf(stderr, "callback got the wrong userdata\n");
        abort();
    }
    if (r->count < 8) r->events[r->count] = *event;
    r->count++;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* Uniform in [-1, 1). */
static float rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)(rng_state >> 40) / (float)(1u << 23) - 1.0f;
}

static tern_tensor *encode(uint32_t format, const float *src, size_t rows, size_t cols) {
    const tern_encoding *enc = NULL;
    tern_tensor *t = NULL;
    CHECK_OK(tern_encoding_get(format, &enc));
    CHECK_OK(tern_tensor_encode(enc, src, rows * cols, rows, cols, &t));
    return t;
}

/* The definition: sum of decoded activation x decoded weight, in double. */
static void definition(const tern_tensor *act, const tern_tensor *w, float *out) {
    size_t m = tern_tensor_rows(act), n = tern_tensor_rows(w), k = tern_tensor_cols(w);
    float *a = (float *)check_alloc(m * k * sizeof(float));
    float *b = (float *)check_alloc(n * k * sizeof(float));
    CHECK_OK(tern_tensor_decode(act, a, m * k));
    CHECK_OK(tern_tensor_decode(w, b, n * k));
    for (size_t i = 0; i < m; i++) {
        for (size_t r = 0; r < n; r++) {
            double dot = 0;
            for (size_t j = 0; j < k; j++) dot += (double)a[i * k + j] * (double)b[r * k + j];
            out[i * n + r] = (float)dot;
        }
    }
    free(a);
    free(b);
}

/* |got - want| <= rel * max(1, |want|) everywhere: integer sums are exact, only the order
 * of float scaling differs from the double-precision definition. */
static int close_to(const float *got, const float *want, size_t len, float rel) {
    for (size_t i = 0; i < len; i++) {
        float tol = rel * (fabsf(want[i]) > 1.0f ? fabsf(want[i]) : 1.0f);
        if (!(fabsf(got[i] - want[i]) <= tol)) {
            fprintf(stderr, "  [%zu] got %g want %g\n", i, (double)got[i], (double)want[i]);
            return 0;
        }
    }
    return 1;
}

static void test_parity(void) {
    static const size_t shapes[][3] = {{2, 4, 256}, {3, 37, 1024}, {1, 64, 4096}};
    for (size_t f = 0; f < 3; f++) {
        for (size_t s = 0; s < 3; s++) {
            size_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            float *w = (float *)check_alloc(n * k * sizeof(float));
            float *x = (float *)check_alloc(m * k * sizeof(float));
            float *out = (float *)check_alloc(m * n * sizeof(float));
            float *want = (float *)check_alloc(m * n * sizeof(float));
            tern_tensor *weight, *act;
            for (size_t i = 0; i < n * k; i++) w[i] = rnd() * 0.05f;
            for (size_t i = 0; i < m * k; i++) x[i] = rnd() * 3.0f;
            weight = encode(TERNARY[f], w, n, k);
            act = encode(TERN_FORMAT_I8_ABSMAX, x, m, k);
            definition(act, weight, want);
            /* the best kernel, and every kernel this CPU has for the format */
            CHECK_OK(tern_bitnet_gemv(NULL, act, weight, 0, n, out, m * n));
            CHECK(close_to(out, want, m * n, 1e-3f));
            for (size_t i = 0; i < tern_kernel_count(); i++) {
                tern_kernel_info info;
                CHECK_OK(tern_kernel_info_get(i, &info));
                if (info.weight != TERNARY[f] || !info.available) continue;
                for (size_t j = 0; j < m * n; j++) out[j] = CANARY;
                CHECK_OK(tern_bitnet_gemv(info.name, act, weight, 0, n, out, m * n));
                if (!CHECK(close_to(out, want, m * n, 1e-3f))) fprintf(stderr, "  kernel %s\n", info.name);
            }
            tern_tensor_free(weight);
            tern_tensor_free(act);
            free(w);
            free(x);
            free(out);
            free(want);
        }
    }
}

static void test_bitnet_k_not_256_and_zero_weight(void) {
    enum { M = 2, N = 5, K = 100 };
    float w[N * K], x[M * K], out[M * N], want[M * N];
    tern_tensor *weight, *zero, *act;
    for (size_t i = 0; i < N * K; i++) w[i] = rnd();
    for (size_t i = 0; i < M * K; i++) x[i] = rnd();
    weight = encode(TERN_FORMAT_BITNET_B1_58, w, N, K);
    act = encode(TERN_FORMAT_I8_ABSMAX, x, M, K);
    definition(act, weight, want);
    CHECK_OK(tern_bitnet_gemv(NULL, act, weight, 0, N, out, M * N));
    CHECK(close_to(out, want, M * N, 1e-3f));
    memset(w, 0, sizeof w);
    zero = encode(TERN_FORMAT_BITNET_B1_58, w, N, K);
    CHECK_OK(tern_bitnet_gemv(NULL, act, zero, 0, N, out, M * N));
    CHECK(floats_all(out, M * N, 0.0f));
    tern_tensor_free(weight);
    tern_tensor_free(zero);
    tern_tensor_free(act);
}

static void test_adapter_events_and_scope(void) {
    enum { K = 4096, N = 16 };
    float *w = (float *)check_alloc(N * K * sizeof(float));
    float x[K], out[N];
    recorder rec;
    tern_dispatcher *d = NULL;
    tern_scope *scope = NULL;
    tern_scope_stats stats;
    memset(&rec, 0, sizeof rec);
    rec.magic = 0x7e57;
    for (size_t i = 0; i < N * K; i++) w[i] = rnd();
    for (size_t i = 0; i < K; i++) x[i] = rnd() * 8.0f;
    CHECK_OK(tern_dispatcher_new(NULL, &d));
    CHECK_OK(tern_dispatcher_set_sink(d, record, &rec));
    CHECK_OK(tern_scope_new(0, &scope));
    for (size_t f = 0; f < 3; f++) {
        tern_tensor *weight = encode(TERNARY[f], w, N, K);
        tern_tensor *act = encode(TERN_FORMAT_F32, x, 1, K);
        tern_tensor *q = NULL;
        float want[N];
        rec.count = 0;
        CHECK_OK(tern_matmul(d, act, weight, scope, out, N));
        /* one adapter, then one kernel */
        CHECK(rec.count == 2);
        CHECK(rec.events[0].kind == TERN_EVENT_ADAPTER_INSERTED);
        CHECK(strcmp(rec.events[0].name, "requantize-i8-absmax") == 0);
        CHECK(rec.events[0].from == TERN_FORMAT_F32 && rec.events[0].to == TERN_FORMAT_I8_ABSMAX);
        CHECK(rec.events[0].rows == 1 && rec.events[0].cols == K);
        CHECK(rec.events[0].bytes == 4100); /* one token of a 4096-wide model */
        CHECK(rec.events[1].kind == TERN_EVENT_KERNEL_SELECTED);
        CHECK(strncmp(rec.events[1].name, "bitnet_gemv/", 12) == 0);
        /* the kernel this build must pick, when the test script knows it (the wasm legs) */
        if (getenv("TERN_EXPECT_KERNEL") && *getenv("TERN_EXPECT_KERNEL"))
            CHECK(strcmp(rec.events[1].name, getenv("TERN_EXPECT_KERNEL")) == 0);
        CHECK(rec.events[1].from == TERNARY[f] && rec.events[1].to == TERN_FORMAT_I8_ABSMAX);
        CHECK_OK(tern_scope_get_stats(scope, &stats));
        CHECK(stats.bytes_in_use == 4100 && stats.allocations == 1);
        /* the same result as requantizing by hand */
        rec.count = 0;
        CHECK_OK(tern_requantize_i8_absmax(act, scope, record, &rec, &q));
        CHECK(rec.count == 1 && rec.events[0].bytes == 4100);
        definition(q, weight, want);
        CHECK(close_to(out, want, N, 1e-3f));
        /* reset: the requantized tensor is stale */
        CHECK_OK(tern_scope_reset(scope));
        {
            float v = CANARY;
            CHECK_STATUS(tern_tensor_get(q, 0, 0, &v), TERN_ERR_STALE_TENSOR);
            CHECK(v == CANARY);
            for (size_t i = 0; i < N; i++) out[i] = CANARY;
            CHECK_STATUS(tern_bitnet_gemv(NULL, q, weight, 0, N, out, N), TERN_ERR_STALE_TENSOR);
            CHECK(floats_all(out, N, CANARY));
        }
        CHECK_OK(tern_scope_get_stats(scope, &stats));
        CHECK(stats.bytes_in_use == 0 && stats.allocations == 0 && stats.high_water == 2 * 4100);
        CHECK(stats.generation == f + 1);
        tern_tensor_free(q);
        tern_tensor_free(weight);
        tern_tensor_free(act);
    }
    tern_scope_free(scope);
    tern_dispatcher_free(d);
    free(w);
}

static void test_requantize_into(void) {
    enum { ROWS = 2, COLS = 300 };
    float x[ROWS * COLS], scales[ROWS], back[ROWS * COLS];
    int8_t codes[ROWS * COLS];
    tern_tensor *act, *q = NULL;
    tern_scope *scope = NULL;
    const void *data = NULL;
    size_t len = 0;
    recorder rec;
    memset(&rec, 0, sizeof rec);
    rec.magic = 0x7e57;
    for (size_t i = 0; i < COLS; i++) x[i] = rnd() * 10.0f;
    for (size_t i = COLS; i < 2 * COLS; i++) x[i] = 0.0f; /* a zero row survives */
    CHECK_OK(tern_requantize_i8_absmax_into(x, ROWS * COLS, ROWS, COLS, codes, ROWS * COLS, scales, ROWS, record, &rec));
    CHECK(rec.count == 1 && rec.events[0].bytes == ROWS * COLS + 4 * ROWS);
    CHECK(scales[1] == 0.0f);
    for (size_t i = 0; i < COLS; i++) CHECK(fabsf((float)codes[i] * scales[0] - x[i]) <= scales[0]);
    for (size_t i = COLS; i < 2 * COLS; i++) CHECK(codes[i] == 0);
    /* bit-identical to the scope variant */
    act = encode(TERN_FORMAT_F32, x, ROWS, COLS);
    CHECK_OK(tern_scope_new(1 << 16, &scope));
    CHECK_OK(tern_requantize_i8_absmax(act, scope, NULL, NULL, &q));
    CHECK_OK(tern_tensor_data(q, &data, &len));
    CHECK(len == ROWS * COLS + 4 * ROWS);
    CHECK(memcmp(data, codes, ROWS * COLS) == 0);
    CHECK(memcmp((const char *)data + ROWS * COLS, scales, sizeof scales) == 0);
    CHECK(((uintptr_t)data % 64) == 0);
    CHECK_OK(tern_tensor_decode(q, back, ROWS * COLS));
    tern_scope_free(scope);
    /* a freed scope's tensors are stale */
    CHECK_STATUS(tern_tensor_decode(q, back, ROWS * COLS), TERN_ERR_STALE_TENSOR);
    tern_tensor_free(q);
    tern_tensor_free(act);
}

static void test_dense_and_i8_need_no_adapter(void) {
    enum { M = 2, N = 7, K = 256 };
    float w[N * K], x[M * K], out[M * N], want[M * N];
    tern_tensor *dense, *act, *ternary, *act_i8;
    tern_dispatcher *d = NULL;
    recorder rec;
    memset(&rec, 0, sizeof rec);
    rec.magic = 0x7e57;
    for (size_t i = 0; i < N * K; i++) w[i] = rnd();
    for (size_t i = 0; i < M * K; i++) x[i] = rnd();
    dense = encode(TERN_FORMAT_F32, w, N, K);
    act = encode(TERN_FORMAT_F32, x, M, K);
    CHECK_OK(tern_dispatcher_new(NULL, &d));
    CHECK_OK(tern_dispatcher_set_sink(d, record, &rec));
    CHECK_OK(tern_matmul(d, act, dense, NULL, out, M * N));
    definition(act, dense, want);
    CHECK(close_to(out, want, M * N, 1e-5f));
    CHECK(rec.count == 1 && rec.events[0].kind == TERN_EVENT_KERNEL_SELECTED);
    CHECK(strcmp(rec.events[0].name, "dense_gemv/reference") == 0);
    /* an I8 activation goes straight to the kernel */
    ternary = encode(TERN_FORMAT_TQ2_0, w, N, K);
    act_i8 = encode(TERN_FORMAT_I8_ABSMAX, x, M, K);
    rec.count = 0;
    CHECK_OK(tern_matmul(d, act_i8, ternary, NULL, out, M * N));
    CHECK(rec.count == 1 && rec.events[0].kind == TERN_EVENT_KERNEL_SELECTED);
    tern_dispatcher_free(d);
    tern_tensor_free(dense);
    tern_tensor_free(act);
    tern_tensor_free(ternary);
    tern_tensor_free(act_i8);
}

static void test_threads_and_row_ranges(void) {
    enum { M = 3, N = 600, K = 1024 };
    float *w = (float *)check_alloc(N * K * sizeof(float));
    float *x = (float *)check_alloc(M * K * sizeof(float));
    float one[M * N], many[M * N], parts[M * N];
    tern_dispatcher *d1 = NULL, *d2 = NULL;
    tern_dispatcher_options options;
    tern_tensor *weight, *act;
    for (size_t i = 0; i < N * K; i++) w[i] = rnd();
    for (size_t i = 0; i < M * K; i++) x[i] = rnd();
    weight = encode(TERN_FORMAT_TQ1_0, w, N, K);
    act = encode(TERN_FORMAT_I8_ABSMAX, x, M, K);
    memset(&options, 0, sizeof options);
    options.struct_size = sizeof options;
    options.n_threads = 2;
    CHECK_OK(tern_dispatcher_new(NULL, &d1));
#ifdef __wasm__
    /* WebAssembly has no threads: a pool is refused and nothing is written */
    CHECK_STATUS(tern_dispatcher_new(&options, &d2), TERN_ERR_INVALID_ARGUMENT);
    CHECK(d2 == NULL);
    options.n_threads = 1;
#endif
    CHECK_OK(tern_dispatcher_new(&options, &d2));
    CHECK_OK(tern_matmul(d1, act, weight, NULL, one, M * N));
    CHECK_OK(tern_matmul(d2, act, weight, NULL, many, M * N));
    CHECK(memcmp(one, many, sizeof one) == 0);
    /* an engine's own split: three disjoint ranges fill the same buffer */
    for (size_t i = 0; i < M * N; i++) parts[i] = CANARY;
    CHECK_OK(tern_bitnet_gemv(NULL, act, weight, 0, 100, parts, M * N));
    CHECK_OK(tern_bitnet_gemv(NULL, act, weight, 100, 100, parts, M * N));
    CHECK_OK(tern_bitnet_gemv(NULL, act, weight, 100, 599, parts, M * N));
    for (size_t i = 0; i < M; i++) CHECK(parts[i * N + 599] == CANARY);
    CHECK_OK(tern_bitnet_gemv(NULL, act, weight, 599, 600, parts, M * N));
    CHECK(memcmp(one, parts, sizeof one) == 0);
    tern_dispatcher_free(d1);
    tern_dispatcher_free(d2);
    tern_tensor_free(weight);
    tern_tensor_free(act);
    free(w);
    free(x);
}

static void test_errors(void) {
    enum { M = 2, N = 6, K = 256 };
    float w[N * K], x[M * K], x2[M * 512], out[M * N];
    tern_tensor *weight, *act_i8, *act_f32, *wrong_k, *inf_act;
    tern_dispatcher *d = NULL;
    tern_scope *scope = NULL;
    tern_scope_stats stats;
    tern_dispatcher_options forced;
    recorder rec;
    memset(&rec, 0, sizeof rec);
    rec.magic = 0x7e57;
    for (size_t i = 0; i < N * K; i++) w[i] = rnd();
    for (size_t i = 0; i < M * K; i++) x[i] = rnd();
    for (size_t i = 0; i < M * 512; i++) x2[i] = rnd();
    weight = encode(TERN_FORMAT_TQ2_0, w, N, K);
    act_i8 = encode(TERN_FORMAT_I8_ABSMAX, x, M, K);
    act_f32 = encode(TERN_FORMAT_F32, x, M, K);
    wrong_k = encode(TERN_FORMAT_I8_ABSMAX, x2, M, 512);
    x[3] = INFINITY;
    {
        /* tern_tensor_encode refuses non-finite input; wrap raw bytes instead */
        const tern_encoding *enc = NULL;
        CHECK_OK(tern_encoding_get(TERN_FORMAT_F32, &enc));
        CHECK_OK(tern_tensor_wrap(enc, x, sizeof x, M, K, &inf_act));
    }
    CHECK_OK(tern_dispatcher_new(NULL, &d));
    CHECK_OK(tern_dispatcher_set_sink(d, record, &rec));
    CHECK_OK(tern_scope_new(0, &scope));
    for (size_t i = 0; i < M * N; i++) out[i] = CANARY;

#define REFUSED(call, status)                                  \
    do {                                                       \
        CHECK_STATUS(call, status);                            \
        CHECK(floats_all(out, M * N, CANARY));                 \
        CHECK(rec.count == 0);                                 \
    } while (0)

    REFUSED(tern_bitnet_gemv(NULL, wrong_k, weight, 0, N, out, M * N), TERN_ERR_SHAPE_MISMATCH);
    REFUSED(tern_bitnet_gemv(NULL, act_i8, weight, 0, N, out, M * N - 1), TERN_ERR_LENGTH_MISMATCH);
    REFUSED(tern_bitnet_gemv(NULL, act_i8, weight, 0, N + 1, out, M * N), TERN_ERR_OUT_OF_BOUNDS);
    REFUSED(tern_bitnet_gemv(NULL, act_i8, weight, 4, 3, out, M * N), TERN_ERR_OUT_OF_BOUNDS);
    REFUSED(tern_bitnet_gemv("bitnet_gemv/nope", act_i8, weight, 0, N, out, M * N), TERN_ERR_UNKNOWN_KERNEL);
    REFUSED(tern_bitnet_gemv("dense_gemv/reference", act_i8, weight, 0, N, out, M * N), TERN_ERR_UNKNOWN_KERNEL);
    REFUSED(tern_bitnet_gemv(NULL, act_f32, weight, 0, N, out, M * N), TERN_ERR_UNSUPPORTED);
    REFUSED(tern_bitnet_gemv(NULL, NULL, weight, 0, N, out, M * N), TERN_ERR_NULL_POINTER);
    REFUSED(tern_bitnet_gemv(NULL, act_i8, NULL, 0, N, out, M * N), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_bitnet_gemv(NULL, act_i8, weight, 0, N, NULL, M * N), TERN_ERR_NULL_POINTER);
    REFUSED(tern_matmul(d, act_f32, weight, NULL, out, M * N), TERN_ERR_SCOPE_REQUIRED);
    REFUSED(tern_matmul(d, wrong_k, weight, scope, out, M * N), TERN_ERR_SHAPE_MISMATCH);
    REFUSED(tern_matmul(d, act_i8, weight, scope, out, 3), TERN_ERR_LENGTH_MISMATCH);
    REFUSED(tern_matmul(d, inf_act, weight, scope, out, M * N), TERN_ERR_NON_FINITE);
    REFUSED(tern_matmul(NULL, act_i8, weight, scope, out, M * N), TERN_ERR_NULL_POINTER);
    REFUSED(tern_matmul(d, NULL, weight, scope, out, M * N), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_matmul(d, act_i8, weight, scope, NULL, M * N), TERN_ERR_NULL_POINTER);
    {
        tern_tensor *q = (tern_tensor *)&rec; /* canary pointer */
        REFUSED(tern_requantize_i8_absmax(inf_act, scope, record, &rec, &q), TERN_ERR_NON_FINITE);
        CHECK(q == (tern_tensor *)&rec);
        REFUSED(tern_requantize_i8_absmax(act_i8, scope, record, &rec, &q), TERN_ERR_UNSUPPORTED);
        REFUSED(tern_requantize_i8_absmax(act_f32, NULL, record, &rec, &q), TERN_ERR_NULL_POINTER);
        CHECK(q == (tern_tensor *)&rec);
    }
    CHECK_OK(tern_scope_get_stats(scope, &stats));
    CHECK(stats.allocations == 0 && stats.bytes_in_use == 0);
    {
        tern_dispatcher *none = (tern_dispatcher *)&rec;
        memset(&forced, 0, sizeof forced);
        forced.kernel = "no/such-kernel";
        CHECK_ERROR(tern_dispatcher_new(&forced, &none), TERN_ERR_INVALID_ARGUMENT,
                    "options->struct_size");
        forced.struct_size = sizeof forced;
        CHECK_ERROR(tern_dispatcher_new(&forced, &none), TERN_ERR_UNKNOWN_KERNEL,
                    "\"no/such-kernel\" (from the dispatcher option `kernel`)");
        CHECK(none == (tern_dispatcher *)&rec);
        CHECK_STATUS(tern_dispatcher_new(NULL, NULL), TERN_ERR_NULL_POINTER);
    }
    {
        tern_kernel_info info;
        memset(&info, 0xAB, sizeof info);
        CHECK_STATUS(tern_kernel_info_get(tern_kernel_count(), &info), TERN_ERR_OUT_OF_BOUNDS);
        CHECK(bytes_all(&info, sizeof info, 0xAB));
    }
    CHECK_STATUS(tern_scope_new(0, NULL), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_scope_reset(NULL), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_scope_get_stats(NULL, &stats), TERN_ERR_NULL_POINTER);
    tern_scope_free(NULL);
    tern_dispatcher_free(NULL);
#undef REFUSED
    tern_scope_free(scope);
    tern_dispatcher_free(d);
    tern_tensor_free(weight);
    tern_tensor_free(act_i8);
    tern_tensor_free(act_f32);
    tern_tensor_free(wrong_k);
    tern_tensor_free(inf_act);
}

int main(void) {
    test_parity();
    test_bitnet_k_not_256_and_zero_weight();
    test_adapter_events_and_scope();
    test_requantize_into();
    test_dense_and_i8_need_no_adapter();
    test_threads_and_row_ranges();
    test_errors();
    return check_report("test_dispatch");
}
