/*
 * The C API's happy paths from C: version, status strings, encodings, encode/decode of
 * every format, the BitNet import and tensor handles.
 */
#include "check.h"

static const uint32_t FORMATS[] = {TERN_FORMAT_F32,       TERN_FORMAT_TQ1_0,     TERN_FORMAT_TQ2_0,
                                   TERN_FORMAT_BITNET_B1_58, TERN_FORMAT_I8_ABSMAX, TERN_FORMAT_Q2_0,
                                   TERN_FORMAT_I2_S,      TERN_FORMAT_I2_S_64,   TERN_FORMAT_I2_S_R4,
                                   TERN_FORMAT_I8_BLOCK256, TERN_FORMAT_I8_BLOCK32};
static const char *const NAMES[] = {"F32",     "TQ1_0",       "TQ2_0",     "BITNET_B1_58",
                                    "I8_ABSMAX", "Q2_0",      "I2_S",      "I2_S_64",
                                    "I2_S_R4", "I8_BLOCK256", "I8_BLOCK32"};

static void test_version(void) {
    char expect[32];
    CHECK(tern_version() ==
          ((uint32_t)TERN_VERSION_MAJOR << 16 | (uint32_t)TERN_VERSION_MINOR << 8 |
           (uint32_t)TERN_VERSION_PATCH));
    CHECK(strcmp(tern_version_string(), TERN_VERSION_STRING) == 0);
    snprintf(expect, sizeof expect, "%d.%d.%d", TERN_VERSION_MAJOR, TERN_VERSION_MINOR,
             TERN_VERSION_PATCH);
    CHECK(strcmp(tern_version_string(), expect) == 0);
}

static void test_status_strings(void) {
    const char *names[] = {
        "TERN_OK", "TERN_ERR_NULL_POINTER", "TERN_ERR_UNKNOWN_FORMAT", "TERN_ERR_INVALID_SHAPE",
        "TERN_ERR_SIZE_OVERFLOW", "TERN_ERR_LENGTH_MISMATCH", "TERN_ERR_NON_FINITE",
        "TERN_ERR_SCALE_OVERFLOW", "TERN_ERR_CORRUPT_CODE", "TERN_ERR_OUT_OF_BOUNDS",
        "TERN_ERR_STALE_TENSOR", "TERN_ERR_SHAPE_MISMATCH", "TERN_ERR_UNKNOWN_KERNEL",
        "TERN_ERR_KERNEL_UNAVAILABLE", "TERN_ERR_UNSUPPORTED", "TERN_ERR_SCOPE_REQUIRED",
        "TERN_ERR_ALLOCATION_FAILED", "TERN_ERR_INVALID_ARGUMENT", "TERN_ERR_PANIC"};
    CHECK(TERN_ERR_PANIC == 18 && TERN_ERR_INVALID_ARGUMENT == 17 && TERN_OK == 0);
    for (uint32_t s = 0; s <= TERN_ERR_PANIC; s++) {
        const char *str = tern_status_str(s);
        CHECK(str != NULL && strncmp(str, names[s], strlen(names[s])) == 0 &&
              str[strlen(names[s])] == ':');
    }
    CHECK(tern_status_str(TERN_ERR_PANIC + 1) != NULL);
    CHECK(tern_status_str(UINT32_MAX) != NULL);
}

static void test_encodings(void) {
    for (size_t i = 0; i < sizeof FORMATS / sizeof FORMATS[0]; i++) {
        const tern_encoding *enc = NULL;
        tern_block_spec spec;
        size_t bytes = 0;
        if (!CHECK_OK(tern_encoding_get(FORMATS[i], &enc))) continue;
        CHECK(tern_encoding_format(enc) == FORMATS[i]);
        CHECK(strcmp(tern_encoding_name(enc), NAMES[i]) == 0);
        CHECK_OK(tern_encoding_block_spec(enc, &spec));
        CHECK(spec.cols_multiple == 1 || spec.cols_multiple == 4 || spec.cols_multiple == 32 ||
              spec.cols_multiple == 64 || spec.cols_multiple == 128 || spec.cols_multiple == 256);
        CHECK_OK(tern_encoding_bytes_for(enc, 4, 256, &bytes));
        switch (FORMATS[i]) {
        case TERN_FORMAT_F32: CHECK(bytes == 4 * 256 * 4); break;
        case TERN_FORMAT_TQ1_0: CHECK(bytes == 4 * 54 && spec.block_bytes == 54); break;
        case TERN_FORMAT_TQ2_0: CHECK(bytes == 4 * 66 && spec.block_bytes == 66); break;
        case TERN_FORMAT_Q2_0:
            CHECK(bytes == 4 * 4 * 18 && spec.block_elems == 64 && spec.block_bytes == 18);
            CHECK(spec.scale_placement == TERN_SCALE_BLOCK_START && spec.scale_bytes == 2);
            break;
        case TERN_FORMAT_I2_S:
        case TERN_FORMAT_I2_S_64:
        case TERN_FORMAT_I2_S_R4:
            CHECK(bytes == 4 * 256 / 4 + 32); /* codes, the f32 scale, 28 bytes of padding */
            CHECK(spec.blocking == TERN_BLOCKING_WHOLE_TENSOR && spec.code_bits == 2);
            CHECK(spec.scale_placement == TERN_SCALE_TENSOR_END && spec.scale_bytes == 4);
            break;
        case TERN_FORMAT_BITNET_B1_58:
            CHECK(bytes == 4 * 256 / 4 + 4);
            CHECK(spec.blocking == TERN_BLOCKING_WHOLE_TENSOR && spec.code_bits == 2);
            CHECK(spec.scale_placement == TERN_SCALE_TENSOR_END && spec.scale_bytes == 4);
            break;
        case TERN_FORMAT_I8_ABSMAX:
            CHECK(bytes == 4 * 256 + 4 * 4);
            CHECK(spec.blocking == TERN_BLOCKING_PER_ROW && spec.code_bits == 8);
            CHECK(spec.scale_placement == TERN_SCALE_ROWS_END && spec.activation_hint == 0);
            break;
        case TERN_FORMAT_I8_BLOCK256:
            CHECK(bytes == 4 * 256 + 4 * 4 && spec.block_elems == 256 && spec.code_bits == 8);
            CHECK(spec.blocking == TERN_BLOCKING_CODES_THEN_BLOCK_SCALES && spec.scale_bytes == 4);
            CHECK(spec.scale_placement == TERN_SCALE_BLOCKS_END && spec.activation_hint == 0);
            break;
        case TERN_FORMAT_I8_BLOCK32:
            CHECK(bytes == 4 * 256 + 4 * 4 * 8 && spec.block_elems == 32 && spec.code_bits == 8);
            CHECK(spec.blocking == TERN_BLOCKING_CODES_THEN_BLOCK_SCALES && spec.scale_bytes == 4);
            CHECK(spec.scale_placement == TERN_SCALE_BLOCKS_END && spec.activation_hint == 0);
            break;
        default: CHECK(!"unexpected format");
        }
        if (FORMATS[i] != TERN_FORMAT_I8_ABSMAX && FORMATS[i] != TERN_FORMAT_I8_BLOCK256 &&
            FORMATS[i] != TERN_FORMAT_I8_BLOCK32 && FORMATS[i] != TERN_FORMAT_F32) {
            CHECK(spec.activation_hint == TERN_FORMAT_I8_ABSMAX);
        }
    }
    {
        uint32_t f = 0;
        CHECK_OK(tern_format_from_ggml_type(34, &f));
        CHECK(f == TERN_FORMAT_TQ1_0);
        CHECK_OK(tern_format_from_ggml_type(35, &f));
        CHECK(f == TERN_FORMAT_TQ2_0);
        CHECK_OK(tern_format_from_ggml_type(0, &f));
        CHECK(f == TERN_FORMAT_F32);
    }
}

/* Every format round-trips ternary data (values in {-s, 0, s} per block) exactly, up to
 * the f16 block scale of TQ1_0/TQ2_0, which is exact for s = 0.5. */
static void test_round_trip(void) {
    enum { ROWS = 4, COLS = 256, N = ROWS * COLS }; /* I2_S_R4 takes rows in fours */
    float src[N], out[N];
    for (size_t i = 0; i < N; i++) src[i] = (float)((int)(i % 3) - 1) * 0.5f;
    for (size_t f = 0; f < sizeof FORMATS / sizeof FORMATS[0]; f++) {
        const tern_encoding *enc = NULL;
        size_t bytes = 0;
        unsigned char *buf;
        CHECK_OK(tern_encoding_get(FORMATS[f], &enc));
        CHECK_OK(tern_encoding_bytes_for(enc, ROWS, COLS, &bytes));
        buf = (unsigned char *)check_alloc(bytes);
        CHECK_OK(tern_encode(enc, src, ROWS, COLS, buf, bytes));
        CHECK_OK(tern_validate(enc, buf, bytes, ROWS, COLS));
        CHECK_OK(tern_decode(enc, buf, bytes, ROWS, COLS, out, N));
        if (FORMATS[f] == TERN_FORMAT_I8_ABSMAX || FORMATS[f] == TERN_FORMAT_I8_BLOCK256 ||
            FORMATS[f] == TERN_FORMAT_I8_BLOCK32) {
            /* scale 0.5/127: codes are exact, the product rounds */
            for (size_t i = 0; i < N; i++) CHECK(fabsf(out[i] - src[i]) < 1e-6f);
        } else if (FORMATS[f] == TERN_FORMAT_BITNET_B1_58) {
            /* one scale, mean |w| (summed in double, stored as float); trits are exact */
            double sum = 0;
            float scale;
            for (size_t i = 0; i < N; i++) sum += fabs((double)src[i]);
            scale = (float)(sum / N);
            for (size_t i = 0; i < N; i++) CHECK(out[i] == (src[i] > 0 ? scale : src[i] < 0 ? -scale : 0.0f));
        } else {
            CHECK(memcmp(out, src, sizeof src) == 0);
        }
        CHECK_OK(tern_encode_checked(enc, src, N, ROWS, COLS, buf, bytes));
        free(buf);
    }
}

/* BITNET_B1_58 -> I2_S (bitnet.cpp's x86 packing) -> BITNET_B1_58 gives back the bytes, and
 * the I2_S bytes decode to the same floats. */
static void test_transcode(void) {
    enum { ROWS = 2, COLS = 128, N = ROWS * COLS };
    float src[N], a[N], b[N];
    unsigned char bitnet[N / 4 + 4], i2s[N / 4 + 32], back[N / 4 + 4];
    const tern_encoding *bit = NULL, *i2 = NULL, *q2 = NULL;
    for (size_t i = 0; i < N; i++) src[i] = (float)((int)(i % 5) - 2) * 0.25f;
    CHECK_OK(tern_encoding_get(TERN_FORMAT_BITNET_B1_58, &bit));
    CHECK_OK(tern_encoding_get(TERN_FORMAT_I2_S, &i2));
    CHECK_OK(tern_encoding_get(TERN_FORMAT_Q2_0, &q2));
    CHECK_OK(tern_encode(bit, src, ROWS, COLS, bitnet, sizeof bitnet));
    CHECK_OK(tern_transcode(bit, bitnet, sizeof bitnet, ROWS, COLS, i2, i2s, sizeof i2s));
    CHECK_OK(tern_transcode(i2, i2s, sizeof i2s, ROWS, COLS, bit, back, sizeof back));
    CHECK(memcmp(bitnet, back, sizeof back) == 0);
    CHECK_OK(tern_decode(bit, bitnet, sizeof bitnet, ROWS, COLS, a, N));
    CHECK_OK(tern_decode(i2, i2s, sizeof i2s, ROWS, COLS, b, N));
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK_ERROR(tern_transcode(bit, bitnet, sizeof bitnet, ROWS, COLS, q2, i2s, sizeof i2s),
                TERN_ERR_INVALID_ARGUMENT, "BITNET_B1_58, I2_S, I2_S_64 and I2_S_R4");
}

/* TQ1_0 -> TQ2_0 writes the bytes TQ2_0's encoder writes for the same floats. */
static void test_transcode_tq(void) {
    enum { ROWS = 2, COLS = 256, N = ROWS * COLS, BLOCKS = N / 256 };
    float src[N];
    unsigned char tq1[BLOCKS * 54], tq2[BLOCKS * 66], out[BLOCKS * 66];
    const tern_encoding *e1 = NULL, *e2 = NULL;
    for (size_t i = 0; i < N; i++) src[i] = (float)((int)(i % 7) - 3) * 0.5f;
    CHECK_OK(tern_encoding_get(TERN_FORMAT_TQ1_0, &e1));
    CHECK_OK(tern_encoding_get(TERN_FORMAT_TQ2_0, &e2));
    CHECK_OK(tern_encode(e1, src, ROWS, COLS, tq1, sizeof tq1));
    CHECK_OK(tern_encode(e2, src, ROWS, COLS, tq2, sizeof tq2));
    CHECK_OK(tern_transcode(e1, tq1, sizeof tq1, ROWS, COLS, e2, out, sizeof out));
    CHECK(memcmp(out, tq2, sizeof out) == 0);
}

static void test_bitnet_import(void) {
    int8_t trits[8] = {-1, 0, 1, 1, 0, 0, -1, 1};
    unsigned char bytes[2 + 4];
    float out[8];
    const tern_encoding *enc = NULL;
    CHECK_OK(tern_bitnet_import(trits, 8, 0.125f, 2, 4, bytes, sizeof bytes));
    /* element i: byte i/4, shift 2*(i%4), code t+1 */
    CHECK(bytes[0] == (0 | 1 << 2 | 2 << 4 | 2 << 6));
    CHECK(bytes[1] == (1 | 1 << 2 | 0 << 4 | 2 << 6));
    CHECK_OK(tern_encoding_get(TERN_FORMAT_BITNET_B1_58, &enc));
    CHECK_OK(tern_decode(enc, bytes, sizeof bytes, 2, 4, out, 8));
    for (size_t i = 0; i < 8; i++) CHECK(out[i] == (float)trits[i] * 0.125f);
}

static void test_tensors(void) {
    enum { ROWS = 3, COLS = 256, N = ROWS * COLS };
    float *src = (float *)check_alloc(N * sizeof(float));
    float *a = (float *)check_alloc(N * sizeof(float));
    float *b = (float *)check_alloc(N * sizeof(float));
    const tern_encoding *enc = NULL;
    tern_tensor *owned = NULL, *wrapped = NULL;
    const void *data = NULL;
    size_t len = 0;
    unsigned char *copy;
    for (size_t i = 0; i < N; i++) src[i] = sinf((float)i * 0.37f) * 4.0f;

    CHECK_OK(tern_encoding_get(TERN_FORMAT_TQ2_0, &enc));
    CHECK_OK(tern_tensor_encode(enc, src, N, ROWS, COLS, &owned));
    CHECK(owned != NULL);
    CHECK(tern_tensor_format(owned) == TERN_FORMAT_TQ2_0);
    CHECK(tern_tensor_rows(owned) == ROWS && tern_tensor_cols(owned) == COLS);
    CHECK_OK(tern_tensor_data(owned, &data, &len));
    CHECK(data != NULL && len == ROWS * 66);
    copy = (unsigned char *)check_alloc(len);
    memcpy(copy, data, len);

    CHECK_OK(tern_tensor_wrap(enc, copy, len, ROWS, COLS, &wrapped));
    CHECK_OK(tern_tensor_validate(wrapped));
    CHECK_OK(tern_tensor_decode(owned, a, N));
    CHECK_OK(tern_tensor_decode(wrapped, b, N));
    CHECK(memcmp(a, b, N * sizeof(float)) == 0);
    for (size_t r = 0; r < ROWS; r++) {
        for (size_t c = 0; c < COLS; c += 51) {
            float x = 0;
            CHECK_OK(tern_tensor_get(wrapped, r, c, &x));
            CHECK(x == a[r * COLS + c]);
        }
    }
    /* Ternary: every non-zero value of a row (one 256-element block) has one magnitude. */
    for (size_t r = 0; r < ROWS; r++) {
        float d = 0;
        for (size_t c = 0; c < COLS; c++) d = fmaxf(d, fabsf(a[r * COLS + c]));
        CHECK(d > 3.0f);
        for (size_t c = 0; c < COLS; c++) CHECK(a[r * COLS + c] == 0.0f || fabsf(a[r * COLS + c]) == d);
    }
    tern_tensor_free(wrapped);
    tern_tensor_free(owned);
    tern_tensor_free(NULL);
    free(copy);
    free(src);
    free(a);
    free(b);
}

int main(void) {
    test_version();
    test_status_strings();
    test_encodings();
    test_round_trip();
    test_bitnet_import();
    test_transcode();
    test_transcode_tq();
    test_tensors();
    return check_report("test_api");
}
