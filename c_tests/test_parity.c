/*
 * Byte parity with gguf's (= ggml's) TQ1_0/TQ2_0 quantizer, from C. Usage:
 *   test_parity <fixture dir>
 * The directory holds manifest.txt (lines `format case rows cols`, '#' comments) and per
 * case <format>_<case>.in.f32 (raw LE f32 input), .q.bin (expected bytes) and .deq.f32
 * (expected decode). Exits 77 (ctest's skip code) if there is no manifest.
 */
#include "check.h"

#define SKIP 77

/* Reads a whole file; returns NULL if it cannot be opened. */
static unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    unsigned char *buf;
    long size;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    buf = (unsigned char *)check_alloc((size_t)size);
    *len = fread(buf, 1, (size_t)size, f);
    fclose(f);
    if (*len != (size_t)size) {
        free(buf);
        return NULL;
    }
    return buf;
}

static unsigned char *read_case(const char *dir, const char *format, const char *name,
                                const char *ext, size_t *len) {
    char path[4096];
    unsigned char *buf;
    snprintf(path, sizeof path, "%s/%s_%s.%s", dir, format, name, ext);
    buf = read_file(path, len);
    if (!CHECK(buf != NULL)) fprintf(stderr, "    cannot read %s\n", path);
    return buf;
}

static uint32_t format_id(const char *name) {
    if (strcmp(name, "tq1_0") == 0) return TERN_FORMAT_TQ1_0;
    if (strcmp(name, "tq2_0") == 0) return TERN_FORMAT_TQ2_0;
    if (strcmp(name, "q2_0") == 0) return TERN_FORMAT_Q2_0;
    if (strcmp(name, "i2_s") == 0) return TERN_FORMAT_I2_S;
    if (strcmp(name, "i2_s_64") == 0) return TERN_FORMAT_I2_S_64;
    if (strcmp(name, "i2_s_r4") == 0) return TERN_FORMAT_I2_S_R4;
    return 0;
}

/* Checks one case; returns 1 if all its checks passed. */
static int run_case(const char *dir, const char *format, const char *name, size_t rows,
                    size_t cols) {
    int failures_before = check_failures;
    const tern_encoding *enc = NULL;
    size_t in_len = 0, q_len = 0, deq_len = 0, bytes = 0, n = rows * cols;
    unsigned char *in = read_case(dir, format, name, "in.f32", &in_len);
    unsigned char *q = read_case(dir, format, name, "q.bin", &q_len);
    unsigned char *deq = read_case(dir, format, name, "deq.f32", &deq_len);
    unsigned char *encoded = NULL;
    float *decoded = NULL;
    tern_tensor *t = NULL;

    if (!in || !q || !deq) goto done;
    if (!CHECK(format_id(format) != 0)) goto done;
    CHECK_OK(tern_encoding_get(format_id(format), &enc));
    CHECK_OK(tern_encoding_bytes_for(enc, rows, cols, &bytes));
    if (!CHECK(in_len == n * 4 && deq_len == n * 4 && q_len == bytes)) goto done;

    /* The files are little-endian f32; so are the machines tern supports. */
    encoded = (unsigned char *)check_alloc(bytes);
    decoded = (float *)check_alloc(n * sizeof(float));
    CHECK_OK(tern_encode_checked(enc, (const float *)(const void *)in, n, rows, cols, encoded, bytes));
    CHECK(memcmp(encoded, q, bytes) == 0);
    CHECK_OK(tern_validate(enc, q, q_len, rows, cols));
    CHECK_OK(tern_decode(enc, q, q_len, rows, cols, decoded, n));
    CHECK(memcmp(decoded, deq, n * sizeof(float)) == 0);

    /* The same bytes through a wrapped tensor: get() agrees with the decode. */
    CHECK_OK(tern_tensor_wrap(enc, q, q_len, rows, cols, &t));
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = 0; c < cols; c += 37) {
            float x = 0;
            CHECK_OK(tern_tensor_get(t, r, c, &x));
            CHECK(memcmp(&x, (const float *)(const void *)deq + r * cols + c, sizeof x) == 0);
        }
    }
    tern_tensor_free(t);

done:
    if (check_failures != failures_before) fprintf(stderr, "    in case %s %s\n", format, name);
    free(in);
    free(q);
    free(deq);
    free(encoded);
    free(decoded);
    return check_failures == failures_before;
}

int main(int argc, char **argv) {
    char path[4096], line[512];
    FILE *manifest;
    int cases = 0, passed = 0;
    const uint32_t one = 1;
    if (argc != 2) {
        fprintf(stderr, "usage: %s <fixture dir>\n", argv[0]);
        return 2;
    }
    snprintf(path, sizeof path, "%s/manifest.txt", argv[1]);
    manifest = fopen(path, "r");
    if (!manifest) {
        printf("SKIP: no fixture manifest at %s\n", path);
        return SKIP;
    }
    if (*(const unsigned char *)&one != 1) {
        printf("SKIP: the fixtures are little-endian and this machine is not\n");
        fclose(manifest);
        return SKIP;
    }
    while (fgets(line, sizeof line, manifest)) {
        char format[64], name[256];
        unsigned long rows, cols;
        if (line[0] == '#' || line[strspn(line, " \t\r\n")] == '\0') continue;
        if (!CHECK(sscanf(line, "%63s %255s %lu %lu", format, name, &rows, &cols) == 4)) {
            fprintf(stderr, "    bad manifest line: %s", line);
            continue;
        }
        cases++;
        passed += run_case(argv[1], format, name, (size_t)rows, (size_t)cols);
    }
    fclose(manifest);
    CHECK(cases > 0);
    printf("parity: %d of %d fixture cases match\n", passed, cases);
    return check_report("test_parity");
}
