/*
 * Every error path of the C API: each call must return its status AND leave its output
 * buffer or out-parameter exactly as it was (filled with a canary beforehand).
 */
#include "check.h"

#define CANARY_BYTE 0xA5
static const float CANARY_FLOAT = -12345.5f;

enum { ROWS = 2, COLS = 256, N = ROWS * COLS, TQ2_BYTES = ROWS * 66, BIG = 8192 };

static const tern_encoding *get(uint32_t format) {
    const tern_encoding *enc = NULL;
    CHECK_OK(tern_encoding_get(format, &enc));
    return enc;
}

static float src[N];
static unsigned char dst[BIG];
static float fdst[BIG];

static void reset_outputs(void) {
    memset(dst, CANARY_BYTE, sizeof dst);
    for (size_t i = 0; i < BIG; i++) fdst[i] = CANARY_FLOAT;
}

#define DST_UNTOUCHED() CHECK(bytes_all(dst, sizeof dst, CANARY_BYTE))
#define FDST_UNTOUCHED() CHECK(floats_all(fdst, BIG, CANARY_FLOAT))

static void test_lookup_errors(void) {
    const tern_encoding *enc = (const tern_encoding *)&dst; /* a canary pointer */
    const tern_encoding *const canary = enc;
    uint32_t format = 77;
    tern_block_spec spec;
    size_t bytes = 99;

    CHECK_STATUS(tern_encoding_get(0, &enc), TERN_ERR_UNKNOWN_FORMAT);
    CHECK_STATUS(tern_encoding_get(12, &enc), TERN_ERR_UNKNOWN_FORMAT);
    CHECK_STATUS(tern_encoding_get(UINT32_MAX, &enc), TERN_ERR_UNKNOWN_FORMAT);
    CHECK(enc == canary);
    CHECK_ERROR(tern_encoding_get(TERN_FORMAT_TQ1_0, NULL), TERN_ERR_NULL_POINTER,
                "argument `out` is NULL");
    CHECK_OK(tern_encoding_get(TERN_FORMAT_TQ1_0, &enc));
    CHECK(tern_last_error() != NULL && tern_last_error()[0] == '\0'); /* cleared by a success */
    enc = canary;

    CHECK_STATUS(tern_format_from_ggml_type(1, &format), TERN_ERR_UNKNOWN_FORMAT);
    CHECK_STATUS(tern_format_from_ggml_type(37, &format), TERN_ERR_UNKNOWN_FORMAT);
    CHECK(format == 77);
    CHECK_STATUS(tern_format_from_ggml_type(34, NULL), TERN_ERR_NULL_POINTER);

    CHECK(tern_encoding_format(NULL) == 0);
    CHECK(tern_encoding_name(NULL) != NULL && tern_encoding_name(NULL)[0] == '\0');

    memset(&spec, CANARY_BYTE, sizeof spec);
    CHECK_STATUS(tern_encoding_block_spec(NULL, &spec), TERN_ERR_NULL_POINTER);
    CHECK(bytes_all(&spec, sizeof spec, CANARY_BYTE));
    CHECK_STATUS(tern_encoding_block_spec(get(TERN_FORMAT_F32), NULL), TERN_ERR_NULL_POINTER);

    CHECK_STATUS(tern_encoding_bytes_for(NULL, ROWS, COLS, &bytes), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_encoding_bytes_for(get(TERN_FORMAT_TQ2_0), ROWS, COLS, NULL),
                 TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_encoding_bytes_for(get(TERN_FORMAT_TQ2_0), ROWS, 255, &bytes),
                 TERN_ERR_INVALID_SHAPE);
    CHECK_STATUS(tern_encoding_bytes_for(get(TERN_FORMAT_TQ1_0), 0, COLS, &bytes),
                 TERN_ERR_INVALID_SHAPE);
    CHECK_STATUS(tern_encoding_bytes_for(get(TERN_FORMAT_F32), 1, 0, &bytes),
                 TERN_ERR_INVALID_SHAPE);
    CHECK_STATUS(tern_encoding_bytes_for(get(TERN_FORMAT_BITNET_B1_58), 1, 6, &bytes),
                 TERN_ERR_INVALID_SHAPE);
    CHECK_ERROR(tern_encoding_bytes_for(get(TERN_FORMAT_F32), SIZE_MAX, 2, &bytes),
                TERN_ERR_SIZE_OVERFLOW, "x2 matrix overflows");
    CHECK_STATUS(tern_encoding_bytes_for(get(TERN_FORMAT_F32), SIZE_MAX / 2, 1, &bytes),
                 TERN_ERR_SIZE_OVERFLOW); /* elements fit, bytes do not */
    CHECK(bytes == 99);
}

static void test_encode_errors(void) {
    const tern_encoding *tq2 = get(TERN_FORMAT_TQ2_0);
    const uint32_t all[] = {TERN_FORMAT_F32, TERN_FORMAT_TQ1_0, TERN_FORMAT_TQ2_0,
                            TERN_FORMAT_BITNET_B1_58, TERN_FORMAT_I8_ABSMAX};
    const float bad[] = {NAN, INFINITY, -INFINITY};

    reset_outputs();
    /* NULLs, also with zero lengths */
    CHECK_STATUS(tern_encode(NULL, src, ROWS, COLS, dst, TQ2_BYTES), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_encode(tq2, NULL, ROWS, COLS, dst, TQ2_BYTES), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_encode(tq2, src, ROWS, COLS, NULL, TQ2_BYTES), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_encode(tq2, src, ROWS, COLS, NULL, 0), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_encode_checked(tq2, NULL, 0, ROWS, COLS, dst, TQ2_BYTES),
                 TERN_ERR_NULL_POINTER);
    /* short destination, by one byte */
    CHECK_STATUS(tern_encode(tq2, src, ROWS, COLS, dst, TQ2_BYTES - 1), TERN_ERR_LENGTH_MISMATCH);
    CHECK_STATUS(tern_encode(tq2, src, ROWS, COLS, dst, 0), TERN_ERR_LENGTH_MISMATCH);
    /* src length disagreeing with the shape */
    CHECK_STATUS(tern_encode_checked(tq2, src, N - 1, ROWS, COLS, dst, TQ2_BYTES),
                 TERN_ERR_LENGTH_MISMATCH);
    CHECK_STATUS(tern_encode_checked(tq2, src, N, 1, COLS, dst, TQ2_BYTES),
                 TERN_ERR_LENGTH_MISMATCH);
    /* shapes the format cannot hold */
    CHECK_STATUS(tern_encode(tq2, src, 4, 128, dst, TQ2_BYTES), TERN_ERR_INVALID_SHAPE);
    CHECK_STATUS(tern_encode(tq2, src, 0, COLS, dst, TQ2_BYTES), TERN_ERR_INVALID_SHAPE);
    CHECK_STATUS(tern_encode(get(TERN_FORMAT_BITNET_B1_58), src, 1, 510, dst, BIG),
                 TERN_ERR_INVALID_SHAPE);
    /* rows x cols overflow */
    CHECK_STATUS(tern_encode(get(TERN_FORMAT_F32), src, SIZE_MAX, 2, dst, BIG),
                 TERN_ERR_SIZE_OVERFLOW);
    CHECK_STATUS(tern_encode(tq2, src, SIZE_MAX / 128, 256, dst, BIG), TERN_ERR_SIZE_OVERFLOW);
    /* output overlapping the input */
    CHECK_STATUS(tern_encode(get(TERN_FORMAT_F32), src, 1, 4, (unsigned char *)src + 4, 16),
                 TERN_ERR_INVALID_ARGUMENT);
    DST_UNTOUCHED();

    /* NaN / +-Inf anywhere, in every format, are refused before anything is written */
    for (size_t f = 0; f < sizeof all / sizeof all[0]; f++) {
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            float saved = src[N - 3];
            src[N - 3] = bad[b];
            CHECK_STATUS(tern_encode(get(all[f]), src, ROWS, COLS, dst, BIG), TERN_ERR_NON_FINITE);
            src[N - 3] = saved;
        }
    }
    DST_UNTOUCHED();
    /* a block max beyond f16 (65504) */
    {
        float saved = src[300];
        src[300] = 1.0e5f;
        CHECK_STATUS(tern_encode(get(TERN_FORMAT_TQ1_0), src, ROWS, COLS, dst, BIG),
                     TERN_ERR_SCALE_OVERFLOW);
        CHECK_STATUS(tern_encode(tq2, src, ROWS, COLS, dst, BIG), TERN_ERR_SCALE_OVERFLOW);
        src[300] = saved;
    }
    DST_UNTOUCHED();
    /* the same call succeeds with a large enough buffer and writes exactly its bytes */
    CHECK_OK(tern_encode(tq2, src, ROWS, COLS, dst, BIG));
    CHECK(bytes_all(dst + TQ2_BYTES, BIG - TQ2_BYTES, CANARY_BYTE));
}

static void test_decode_and_validate_errors(void) {
    const tern_encoding *tq2 = get(TERN_FORMAT_TQ2_0);
    unsigned char bytes[TQ2_BYTES];
    CHECK_OK(tern_encode(tq2, src, ROWS, COLS, bytes, sizeof bytes));

    reset_outputs();
    CHECK_STATUS(tern_decode(NULL, bytes, TQ2_BYTES, ROWS, COLS, fdst, N), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_decode(tq2, NULL, TQ2_BYTES, ROWS, COLS, fdst, N), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_decode(tq2, bytes, TQ2_BYTES, ROWS, COLS, NULL, N), TERN_ERR_NULL_POINTER);
    /* short and long sources: the source must be exactly the matrix */
    CHECK_STATUS(tern_decode(tq2, bytes, TQ2_BYTES - 1, ROWS, COLS, fdst, N),
                 TERN_ERR_LENGTH_MISMATCH);
    CHECK_STATUS(tern_decode(tq2, dst, TQ2_BYTES + 1, ROWS, COLS, fdst, N),
                 TERN_ERR_LENGTH_MISMATCH);
    /* short destination */
    CHECK_STATUS(tern_decode(tq2, bytes, TQ2_BYTES, ROWS, COLS, fdst, N - 1),
                 TERN_ERR_LENGTH_MISMATCH);
    /* shape/format mismatch: TQ1_0 bytes of this shape are 108, not 132 */
    CHECK_STATUS(tern_decode(get(TERN_FORMAT_TQ1_0), bytes, TQ2_BYTES, ROWS, COLS, fdst, N),
                 TERN_ERR_LENGTH_MISMATCH);
    CHECK_STATUS(tern_decode(tq2, bytes, TQ2_BYTES, 4, 128, fdst, N), TERN_ERR_INVALID_SHAPE);
    CHECK_STATUS(tern_decode(tq2, bytes, TQ2_BYTES, SIZE_MAX, COLS, fdst, N),
                 TERN_ERR_SIZE_OVERFLOW);
    FDST_UNTOUCHED();

    CHECK_STATUS(tern_validate(NULL, bytes, TQ2_BYTES, ROWS, COLS), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_validate(tq2, NULL, 0, ROWS, COLS), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_validate(tq2, bytes, TQ2_BYTES - 1, ROWS, COLS), TERN_ERR_LENGTH_MISMATCH);
    CHECK_OK(tern_validate(tq2, bytes, TQ2_BYTES, ROWS, COLS));
    {
        unsigned char corrupt[TQ2_BYTES];
        float nan = NAN;
        memcpy(corrupt, bytes, sizeof corrupt);
        corrupt[70] |= 0x03; /* a code 3 in the second block */
        CHECK_STATUS(tern_validate(tq2, corrupt, TQ2_BYTES, ROWS, COLS), TERN_ERR_CORRUPT_CODE);
        CHECK_STATUS(tern_validate(get(TERN_FORMAT_F32), &nan, 4, 1, 1), TERN_ERR_NON_FINITE);
    }
}

static void test_bitnet_import_errors(void) {
    int8_t trits[16] = {0};
    unsigned char out[8];
    memset(out, CANARY_BYTE, sizeof out);
    CHECK_STATUS(tern_bitnet_import(NULL, 16, 1.0f, 2, 8, out, 8), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_bitnet_import(trits, 16, 1.0f, 2, 8, NULL, 8), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_bitnet_import(trits, 15, 1.0f, 2, 8, out, 8), TERN_ERR_LENGTH_MISMATCH);
    CHECK_STATUS(tern_bitnet_import(trits, 16, 1.0f, 2, 8, out, 7), TERN_ERR_LENGTH_MISMATCH);
    CHECK_STATUS(tern_bitnet_import(trits, 16, 1.0f, 8, 2, out, 8), TERN_ERR_INVALID_SHAPE);
    CHECK_STATUS(tern_bitnet_import(trits, 16, NAN, 2, 8, out, 8), TERN_ERR_NON_FINITE);
    CHECK_STATUS(tern_bitnet_import(trits, 16, INFINITY, 2, 8, out, 8), TERN_ERR_NON_FINITE);
    trits[9] = 2;
    CHECK_STATUS(tern_bitnet_import(trits, 16, 1.0f, 2, 8, out, 8), TERN_ERR_CORRUPT_CODE);
    trits[9] = -2;
    CHECK_STATUS(tern_bitnet_import(trits, 16, 1.0f, 2, 8, out, 8), TERN_ERR_CORRUPT_CODE);
    CHECK(bytes_all(out, sizeof out, CANARY_BYTE));
}

static void test_tensor_errors(void) {
    const tern_encoding *tq2 = get(TERN_FORMAT_TQ2_0);
    tern_tensor *const canary = (tern_tensor *)&dst;
    tern_tensor *t = canary;
    tern_tensor *ok = NULL;
    unsigned char bytes[TQ2_BYTES];
    const void *data = &dst;
    size_t len = 99;
    float x = CANARY_FLOAT;
    CHECK_OK(tern_encode(tq2, src, ROWS, COLS, bytes, sizeof bytes));

    CHECK_STATUS(tern_tensor_wrap(NULL, bytes, TQ2_BYTES, ROWS, COLS, &t), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_tensor_wrap(tq2, NULL, TQ2_BYTES, ROWS, COLS, &t), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_tensor_wrap(tq2, bytes, TQ2_BYTES, ROWS, COLS, NULL), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_tensor_wrap(tq2, bytes, TQ2_BYTES - 1, ROWS, COLS, &t),
                 TERN_ERR_LENGTH_MISMATCH);
    CHECK_STATUS(tern_tensor_wrap(get(TERN_FORMAT_TQ1_0), bytes, TQ2_BYTES, ROWS, COLS, &t),
                 TERN_ERR_LENGTH_MISMATCH);
    CHECK_STATUS(tern_tensor_wrap(tq2, bytes, TQ2_BYTES, ROWS, 100, &t), TERN_ERR_INVALID_SHAPE);
    CHECK_STATUS(tern_tensor_wrap(tq2, bytes, TQ2_BYTES, SIZE_MAX, COLS, &t),
                 TERN_ERR_SIZE_OVERFLOW);
    CHECK_STATUS(tern_tensor_encode(NULL, src, N, ROWS, COLS, &t), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_tensor_encode(tq2, NULL, N, ROWS, COLS, &t), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_tensor_encode(tq2, src, N - 1, ROWS, COLS, &t), TERN_ERR_LENGTH_MISMATCH);
    {
        float saved = src[5];
        src[5] = INFINITY;
        CHECK_STATUS(tern_tensor_encode(tq2, src, N, ROWS, COLS, &t), TERN_ERR_NON_FINITE);
        src[5] = saved;
    }
    CHECK(t == canary);

    CHECK_OK(tern_tensor_wrap(tq2, bytes, TQ2_BYTES, ROWS, COLS, &ok));
    CHECK_STATUS(tern_tensor_get(ok, ROWS, 0, &x), TERN_ERR_OUT_OF_BOUNDS);
    CHECK_STATUS(tern_tensor_get(ok, 0, COLS, &x), TERN_ERR_OUT_OF_BOUNDS);
    CHECK_STATUS(tern_tensor_get(ok, SIZE_MAX, SIZE_MAX, &x), TERN_ERR_OUT_OF_BOUNDS);
    CHECK_STATUS(tern_tensor_get(NULL, 0, 0, &x), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_tensor_get(ok, 0, 0, NULL), TERN_ERR_NULL_POINTER);
    CHECK(floats_all(&x, 1, CANARY_FLOAT));

    reset_outputs();
    CHECK_STATUS(tern_tensor_decode(ok, fdst, N - 1), TERN_ERR_LENGTH_MISMATCH);
    CHECK_STATUS(tern_tensor_decode(ok, NULL, N), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_tensor_decode(NULL, fdst, N), TERN_ERR_NULL_POINTER);
    FDST_UNTOUCHED();
    CHECK_STATUS(tern_tensor_validate(NULL), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_tensor_data(NULL, &data, &len), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_tensor_data(ok, NULL, &len), TERN_ERR_NULL_POINTER);
    CHECK_STATUS(tern_tensor_data(ok, &data, NULL), TERN_ERR_NULL_POINTER);
    CHECK(data == (const void *)&dst && len == 99);
    CHECK(tern_tensor_format(NULL) == 0 && tern_tensor_rows(NULL) == 0 && tern_tensor_cols(NULL) == 0);
    {
        unsigned char corrupt[TQ2_BYTES];
        tern_tensor *bad = NULL;
        memcpy(corrupt, bytes, sizeof corrupt);
        corrupt[0] |= 0xC0;
        CHECK_OK(tern_tensor_wrap(tq2, corrupt, TQ2_BYTES, ROWS, COLS, &bad));
        CHECK_STATUS(tern_tensor_validate(bad), TERN_ERR_CORRUPT_CODE);
        tern_tensor_free(bad);
    }
    tern_tensor_free(ok);
    tern_tensor_free(NULL);
}

int main(void) {
    for (size_t i = 0; i < N; i++) src[i] = (float)((int)(i * 7 % 11) - 5) * 0.25f;
    test_lookup_errors();
    test_encode_errors();
    test_decode_and_validate_errors();
    test_bitnet_import_errors();
    test_tensor_errors();
    return check_report("test_errors");
}
