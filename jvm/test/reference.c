/*
 * The C side of the JVM tests (scripts/test-jvm.sh), linked to libtern only.
 *
 *   reference OUT.bin GGUF [METADATA_GGUF...]
 *                            writes operands and results computed through tern.h for the
 *                            Kotlin test to recompute through the JVM API and compare bit
 *                            for bit: every format's encoding and decoding, a matmul per
 *                            available kernel entry (forced by name) and m, default dispatch
 *                            with 1 and 2 threads, a matmul_many, the GGUF's tensor table and
 *                            decoded tensors, transcodings of a BITNET_B1_58 tensor; then for
 *                            each METADATA_GGUF its metadata, tensor bytes and slices (and
 *                            the statuses of bad lookups). The operands come from this program's own
 *                            generator, so the JVM side shares no code with it.
 *   bench ROUNDS CALLS       times tern_matmul on a 2560 x 2560 TQ2_0 weight at m = 1 (the
 *                            overhead baseline for the Kotlin bench): prints the median
 *                            nanoseconds per call of each round.
 *
 * Record layout (little-endian u32 and f32): see jvm/test/TernTest.kt, which reads it.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern.h"

static void die(const char *what, tern_status s) {
    fprintf(stderr, "reference: %s: %s (%s)\n", what, tern_status_str(s), tern_last_error());
    exit(1);
}

#define CHECK(call) do { tern_status s_ = (call); if (s_ != TERN_OK) die(#call, s_); } while (0)

static void *xmalloc(size_t n) {
    void *p = malloc(n == 0 ? 1 : n);
    if (p == NULL) { fprintf(stderr, "reference: out of memory\n"); exit(1); }
    return p;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

/* xorshift64*: uniform in [-1, 1). */
static float next_float(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x2545F4914F6CDD1Du;
    return (float)((double)(r >> 40) / (double)(1u << 23) - 1.0);
}

static float *random_floats(size_t n) {
    float *v = xmalloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = next_float();
    return v;
}

static FILE *out_file;

static void put_u32(uint32_t v) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    fwrite(b, 1, 4, out_file);
}

static void put_floats(const float *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], 4);
        put_u32(bits);
    }
}

static void put_str(const char *s) {
    put_u32((uint32_t)strlen(s));
    fwrite(s, 1, strlen(s), out_file);
}

static tern_tensor *encode(uint32_t format, const float *v, size_t rows, size_t cols) {
    const tern_encoding *enc;
    tern_tensor *t;
    CHECK(tern_encoding_get(format, &enc));
    CHECK(tern_tensor_encode(enc, v, rows * cols, rows, cols, &t));
    return t;
}

static tern_dispatcher *dispatcher(const char *kernel, uint32_t threads) {
    tern_dispatcher_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.n_threads = threads;
    o.kernel = kernel;
    o.flags = TERN_DISPATCH_IGNORE_ENV;
    tern_dispatcher *d;
    CHECK(tern_dispatcher_new(&o, &d));
    return d;
}

enum { TAG_END = 0, TAG_ENCODE = 1, TAG_MATMUL = 2, TAG_MANY = 3, TAG_GGUF = 4, TAG_TRANSCODE = 5, TAG_META = 6 };

/* Encoding and decoding of every format: the source, the bytes, the decoded floats. */
static void encode_cases(void) {
    const size_t rows = 8, cols = 512; /* I2_S_R4: rows a multiple of 4 */
    for (uint32_t f = TERN_FORMAT_F32; f <= TERN_FORMAT_I2_S_R4; f++) {
        float *src = random_floats(rows * cols);
        tern_tensor *t = encode(f, src, rows, cols);
        const void *data;
        size_t len;
        CHECK(tern_tensor_data(t, &data, &len));
        float *dec = xmalloc(rows * cols * sizeof *dec);
        CHECK(tern_tensor_decode(t, dec, rows * cols));
        put_u32(TAG_ENCODE), put_u32(f), put_u32(rows), put_u32(cols);
        put_floats(src, rows * cols);
        put_u32((uint32_t)len);
        fwrite(data, 1, len, out_file);
        put_floats(dec, rows * cols);
        tern_tensor_free(t);
        free(src), free(dec);
    }
}

/* One matmul with an F32 activation m x k and a `weight_format` weight n x k. */
static void matmul_case(const char *kernel, uint32_t threads, uint32_t weight_format, size_t m, size_t n, size_t k) {
    float *a = random_floats(m * k), *w = random_floats(n * k), *out = xmalloc(m * n * sizeof *out);
    tern_tensor *act = encode(TERN_FORMAT_F32, a, m, k), *weight = encode(weight_format, w, n, k);
    tern_dispatcher *d = dispatcher(kernel, threads);
    tern_scope *scope;
    CHECK(tern_scope_new(0, &scope));
    CHECK(tern_matmul(d, act, weight, scope, out, m * n));
    put_u32(TAG_MATMUL), put_str(kernel == NULL ? "" : kernel), put_u32(threads), put_u32(weight_format);
    put_u32((uint32_t)m), put_u32((uint32_t)n), put_u32((uint32_t)k);
    put_floats(a, m * k), put_floats(w, n * k), put_floats(out, m * n);
    tern_scope_free(scope), tern_dispatcher_free(d), tern_tensor_free(act), tern_tensor_free(weight);
    free(a), free(w), free(out);
}

/* Q/K/V-like: one activation against three TQ2_0 weights of different heights. */
static void many_case(void) {
    enum { N = 3 };
    const size_t m = 5, k = 512, rows[N] = {64, 32, 40};
    float *a = random_floats(m * k), *w[N], *outs[N];
    size_t lens[N];
    tern_tensor *weights[N];
    tern_tensor *act = encode(TERN_FORMAT_F32, a, m, k);
    for (int i = 0; i < N; i++) {
        w[i] = random_floats(rows[i] * k);
        weights[i] = encode(TERN_FORMAT_TQ2_0, w[i], rows[i], k);
        lens[i] = m * rows[i];
        outs[i] = xmalloc(lens[i] * sizeof(float));
    }
    tern_dispatcher *d = dispatcher(NULL, 1);
    tern_scope *scope;
    CHECK(tern_scope_new(0, &scope));
    CHECK(tern_matmul_many(d, act, (const tern_tensor *const *)weights, N, scope, outs, lens));
    put_u32(TAG_MANY), put_u32(N), put_u32((uint32_t)m), put_u32((uint32_t)k);
    put_floats(a, m * k);
    for (int i = 0; i < N; i++) {
        put_u32((uint32_t)rows[i]);
        put_floats(w[i], rows[i] * k), put_floats(outs[i], lens[i]);
        tern_tensor_free(weights[i]);
        free(w[i]), free(outs[i]);
    }
    tern_scope_free(scope), tern_dispatcher_free(d), tern_tensor_free(act);
    free(a);
}

/* The GGUF's tensor table, and the decoding of every tensor tern has a format for. */
static void gguf_case(const char *path) {
    tern_gguf *g;
    CHECK(tern_gguf_open(path, &g));
    size_t count = tern_gguf_tensor_count(g);
    put_u32(TAG_GGUF), put_u32((uint32_t)count);
    for (size_t i = 0; i < count; i++) {
        tern_gguf_tensor_info info;
        CHECK(tern_gguf_tensor_info_get(g, i, &info));
        put_str(info.name), put_u32(info.ggml_type), put_u32(info.format), put_u32(info.n_dims);
        for (int j = 0; j < 4; j++) put_u32((uint32_t)info.ne[j]);
        put_u32((uint32_t)info.offset), put_u32((uint32_t)info.bytes);
        tern_tensor *t;
        if (info.format == 0 || tern_gguf_tensor_wrap(g, i, &t) != TERN_OK) {
            put_u32(0);
            continue;
        }
        size_t n = tern_tensor_rows(t) * tern_tensor_cols(t);
        float *dec = xmalloc(n * sizeof *dec);
        CHECK(tern_tensor_decode(t, dec, n));
        put_u32((uint32_t)n), put_floats(dec, n);
        free(dec);
        tern_tensor_free(t);
    }
    tern_gguf_free(g);
}

/* A BITNET_B1_58 tensor transcoded (tern_transcode) to each I2_S packing and to itself. */
static void transcode_case(void) {
    const size_t rows = 8, cols = 256;
    float *src = random_floats(rows * cols);
    tern_tensor *t = encode(TERN_FORMAT_BITNET_B1_58, src, rows, cols);
    const void *data;
    size_t len;
    CHECK(tern_tensor_data(t, &data, &len));
    const tern_encoding *from;
    CHECK(tern_encoding_get(TERN_FORMAT_BITNET_B1_58, &from));
    const uint32_t targets[] = {TERN_FORMAT_I2_S, TERN_FORMAT_I2_S_64, TERN_FORMAT_I2_S_R4, TERN_FORMAT_BITNET_B1_58};
    put_u32(TAG_TRANSCODE), put_u32((uint32_t)rows), put_u32((uint32_t)cols), put_floats(src, rows * cols);
    put_u32(sizeof targets / sizeof *targets);
    for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
        const tern_encoding *to;
        size_t size;
        CHECK(tern_encoding_get(targets[i], &to));
        CHECK(tern_encoding_bytes_for(to, rows, cols, &size));
        unsigned char *dst = xmalloc(size);
        CHECK(tern_transcode(from, data, len, rows, cols, to, dst, size));
        put_u32(targets[i]), put_u32((uint32_t)size);
        fwrite(dst, 1, size, out_file);
        free(dst);
    }
    tern_tensor_free(t);
    free(src);
}

static void put_u64(uint64_t v) { put_u32((uint32_t)v), put_u32((uint32_t)(v >> 32)); }

static void put_bytes(const void *p, size_t n) {
    put_u32((uint32_t)n);
    fwrite(p, 1, n, out_file);
}

/* Reads entry `index` (element `i` of an array if `array`) of GGUF type `type` with its typed
 * getter: a scalar's bits zero-extended to 64 (floats as IEEE bits, as the Kotlin side decodes
 * them) to bits[0], a string's address and length to bits[0..1]. Returns the getter's status. */
static tern_status kv_read(const tern_gguf *g, size_t index, int array, size_t i, uint32_t type, uint64_t bits[2]) {
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; float f32;
            uint64_t u64; int64_t i64; double f64; } v;
    const char *str = NULL;
    size_t len = 0;
    tern_status s;
    memset(&v, 0, sizeof v);
#define GET(suffix, member, wide)                                                                     \
    s = array ? tern_gguf_kv_array_get_##suffix(g, index, i, &v.member) : tern_gguf_kv_get_##suffix(g, index, &v.member); \
    bits[0] = v.wide;                                                                                  \
    return s;
    switch (type) {
    case TERN_GGUF_TYPE_UINT8: GET(u8, u8, u8)
    case TERN_GGUF_TYPE_INT8: GET(i8, i8, u8)
    case TERN_GGUF_TYPE_BOOL: GET(bool, u8, u8)
    case TERN_GGUF_TYPE_UINT16: GET(u16, u16, u16)
    case TERN_GGUF_TYPE_INT16: GET(i16, i16, u16)
    case TERN_GGUF_TYPE_UINT32: GET(u32, u32, u32)
    case TERN_GGUF_TYPE_INT32: GET(i32, i32, u32)
    case TERN_GGUF_TYPE_FLOAT32: GET(f32, f32, u32)
    case TERN_GGUF_TYPE_UINT64: GET(u64, u64, u64)
    case TERN_GGUF_TYPE_INT64: GET(i64, i64, u64)
    case TERN_GGUF_TYPE_FLOAT64: GET(f64, f64, u64)
    case TERN_GGUF_TYPE_STRING:
        s = array ? tern_gguf_kv_array_get_str(g, index, i, &str, &len) : tern_gguf_kv_get_str(g, index, &str, &len);
        bits[0] = (uint64_t)(uintptr_t)str, bits[1] = len;
        return s;
    default: fprintf(stderr, "reference: GGUF type %u has no getter\n", type); exit(1);
    }
#undef GET
}

/* A value: scalar bits, a string's bytes, or an array's element type, length, elements and
 * the status of reading the element past its end. */
static void put_kv(const tern_gguf *g, size_t index, int array, size_t i, uint32_t type) {
    uint64_t bits[2];
    if (type == TERN_GGUF_TYPE_ARRAY) {
        uint32_t elem;
        size_t len;
        CHECK(tern_gguf_kv_array_len(g, index, &elem, &len));
        put_u32(elem), put_u32((uint32_t)len);
        if (elem == TERN_GGUF_TYPE_ARRAY) return; /* nested arrays: their type and length only */
        for (size_t j = 0; j < len; j++) put_kv(g, index, 1, j, elem);
        put_u32(kv_read(g, index, 1, len, elem, bits));
        return;
    }
    CHECK(kv_read(g, index, array, i, type, bits));
    if (type == TERN_GGUF_TYPE_STRING) put_bytes((const void *)(uintptr_t)bits[0], (size_t)bits[1]);
    else put_u64(bits[0]);
}

/* A GGUF's metadata (every key, type and value), its tensors' bytes and ggml types
 * (tern_gguf_tensor_data), the decoded slices of its 3-D tensors, and the statuses of a
 * type mismatch, a missing key and indices past the end. */
static void meta_case(const char *path) {
    tern_gguf *g;
    CHECK(tern_gguf_open(path, &g));
    const char *base = strrchr(path, '/');
    put_u32(TAG_META), put_str(base == NULL ? path : base + 1);
    size_t count = tern_gguf_kv_count(g);
    put_u32((uint32_t)count);
    for (size_t i = 0; i < count; i++) {
        const char *key;
        size_t len;
        uint32_t type;
        CHECK(tern_gguf_kv_key(g, i, &key, &len));
        CHECK(tern_gguf_kv_type(g, i, &type));
        put_bytes(key, len), put_u32(type);
        put_kv(g, i, 0, 0, type);
        /* The same entry read as another type: refused. */
        uint32_t u32;
        float f32;
        put_u32(type == TERN_GGUF_TYPE_UINT32 ? tern_gguf_kv_get_f32(g, i, &f32) : tern_gguf_kv_get_u32(g, i, &u32));
    }
    size_t missing;
    put_u32(tern_gguf_kv_find(g, "no.such.key", &missing));
    uint32_t type;
    size_t tensors = tern_gguf_tensor_count(g);
    put_u32((uint32_t)tensors);
    for (size_t i = 0; i < tensors; i++) {
        tern_gguf_tensor_info info;
        const void *data;
        size_t len;
        uint32_t ggml_type;
        CHECK(tern_gguf_tensor_info_get(g, i, &info));
        CHECK(tern_gguf_tensor_data(g, i, &data, &len, &ggml_type));
        put_str(info.name), put_u32(ggml_type), put_bytes(data, len);
        /* Every slice of a tensor tern has a format for (1 for 2-D), decoded; then the status
         * of the slice past the end. */
        uint64_t slices = info.format == 0 || info.ne[3] > 1 ? 0 : info.ne[2];
        put_u32((uint32_t)slices);
        for (uint64_t s = 0; s < slices; s++) {
            tern_tensor *t;
            CHECK(tern_gguf_tensor_wrap_slice(g, i, s, &t));
            size_t n = tern_tensor_rows(t) * tern_tensor_cols(t);
            float *dec = xmalloc(n * sizeof *dec);
            CHECK(tern_tensor_decode(t, dec, n));
            put_u32((uint32_t)tern_tensor_rows(t)), put_u32((uint32_t)tern_tensor_cols(t)), put_floats(dec, n);
            free(dec);
            tern_tensor_free(t);
        }
        if (slices > 0) {
            tern_tensor *t;
            put_u32(tern_gguf_tensor_wrap_slice(g, i, slices, &t));
        }
    }
    const void *data;
    size_t len;
    put_u32(tern_gguf_tensor_data(g, tensors, &data, &len, &type));
    tern_gguf_free(g);
}

static int reference(const char *path, const char *gguf, int n_meta, char **meta) {
    out_file = fopen(path, "wb");
    if (out_file == NULL) { perror(path); return 1; }
    put_u32(tern_version());
    size_t kernels = tern_kernel_count();
    put_u32((uint32_t)kernels);
    for (size_t i = 0; i < kernels; i++) {
        tern_kernel_info info;
        CHECK(tern_kernel_info_get(i, &info));
        put_str(info.name), put_u32(info.weight), put_u32(info.act), put_u32(info.available);
    }
    /* Forcing the listed fallback by name: the status tern_dispatcher_new gives. */
    tern_dispatcher_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.kernel = "matmul/reference";
    tern_dispatcher *forced = NULL;
    put_u32(tern_dispatcher_new(&o, &forced));
    tern_dispatcher_free(forced);
    encode_cases();
    const size_t ms[] = {1, 7, 33};
    for (size_t i = 0; i < kernels; i++) {
        tern_kernel_info info;
        CHECK(tern_kernel_info_get(i, &info));
        if (!info.available) continue;
        /* matmul/reference (weight 0) serves any pair: forced, it runs a TQ2_0 weight too. */
        uint32_t weight = info.weight ? info.weight : TERN_FORMAT_TQ2_0;
        for (size_t j = 0; j < sizeof ms / sizeof *ms; j++) matmul_case(info.name, 1, weight, ms[j], 40, 512);
    }
    for (uint32_t f = TERN_FORMAT_F32; f <= TERN_FORMAT_I2_S_R4; f++)
        for (uint32_t threads = 1; threads <= 2; threads++) matmul_case(NULL, threads, f, 9, 72, 768);
    many_case();
    gguf_case(gguf);
    transcode_case();
    for (int i = 0; i < n_meta; i++) meta_case(meta[i]);
    put_u32(TAG_END);
    return fclose(out_file) == 0 ? 0 : 1;
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The same loop as Bench.kt: matmul into one output, scope reset after each call. */
static int bench(int rounds, int calls) {
    const size_t n = 2560, k = 2560;
    float *w = random_floats(n * k), *a = random_floats(k), *out = xmalloc(n * sizeof *out);
    tern_tensor *weight = encode(TERN_FORMAT_TQ2_0, w, n, k), *act = encode(TERN_FORMAT_F32, a, 1, k);
    tern_dispatcher *d = dispatcher(NULL, 1);
    tern_scope *scope;
    CHECK(tern_scope_new(0, &scope));
    double *ns = xmalloc((size_t)calls * sizeof *ns);
    for (int r = 0; r < rounds; r++) {
        for (int c = 0; c < calls; c++) {
            double t0 = now_ns();
            CHECK(tern_matmul(d, act, weight, scope, out, n));
            CHECK(tern_scope_reset(scope));
            ns[c] = now_ns() - t0;
        }
        qsort(ns, (size_t)calls, sizeof *ns, cmp_double);
        printf("%.0f\n", ns[calls / 2]);
    }
    fflush(stdout);
    free(ns), free(w), free(a), free(out);
    tern_scope_free(scope), tern_dispatcher_free(d), tern_tensor_free(act), tern_tensor_free(weight);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "reference") == 0) return reference(argv[2], argv[3], argc - 4, argv + 4);
    if (argc == 4 && strcmp(argv[1], "bench") == 0) return bench(atoi(argv[2]), atoi(argv[3]));
    fprintf(stderr, "usage: %s reference OUT.bin GGUF [METADATA_GGUF...] | bench ROUNDS CALLS\n", argv[0]);
    return 2;
}
