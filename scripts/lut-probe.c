// An exact table-lookup ternary GEMV (m = 1) on AVX2, to measure against tern's
// multiply-accumulate GEMVs (`tern bench --kernel bitnet_gemv/avx2`); not part of tern.
// docs/performance.md ("A table-lookup GEMV on AVX2") has the figures and the reasons.
//
//   cc -O3 -mavx2 -Wall -Wextra -o /tmp/lut-probe scripts/lut-probe.c
//   /tmp/lut-probe 4096x4096 [runs]
//
// Each pair of ternary weights (3 x 3 values) indexes a 16-entry table of the pair's int16
// sums with the token's two int8 activations (9 entries used), kept as two byte tables (low
// and high bytes) for `vpshufb`: the sums reach 254, past int8, and the probe keeps the
// integer result exact (each row's int32 dot is checked against a scalar one). A 32-byte
// load of indices serves 16 rows x 4 pairs (two nibbles per byte; the two 128-bit lanes take
// the two pairs whose tables one 32-byte table load holds), so one table load serves 16 rows.
// The K loop runs in chunks whose tables (16 KiB) stay in L1 while every row passes over
// them. The weights are repacked into that order once (2 bits per weight, as TQ2_0's codes);
// the tables are built for every call and counted in its time.
#define _POSIX_C_SOURCE 199309L // clock_gettime
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    ROWS = 16,          // rows per index load
    QUAD = 8,           // weights per index load and row (four pairs)
    TABLE = 128,        // table bytes per quad: four pairs x 16 entries x (low, high)
    CHUNK = 1024,       // weights per K chunk (the last may be shorter): 16 KiB of tables
    FOLD = 32,          // quads between int16 -> int32 folds: 32 x 2 x 254 < 32768
    STEP = FOLD * QUAD, // K must be a multiple
};

static size_t chunk_quads(size_t c, size_t k) { return (k - c < CHUNK ? k - c : CHUNK) / QUAD; }

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

// The index of weights (w0, w1): 3 (w0 + 1) + (w1 + 1), 0..8.
static int pair_index(const int8_t *w) { return 3 * (w[0] + 1) + (w[1] + 1); }

// Chunk by chunk, 16-row group by group, quad by quad: 32 bytes. Byte j < 16 holds row j's
// pairs 4q (low nibble) and 4q + 2 (high nibble); byte 16 + j its pairs 4q + 1 and 4q + 3.
static void repack(const int8_t *w, size_t n, size_t k, uint8_t *out) {
    for (size_t c = 0; c < k; c += CHUNK)
        for (size_t g = 0; g < n; g += ROWS)
            for (size_t q = c / QUAD; q < c / QUAD + chunk_quads(c, k); q++)
                for (size_t b = 0; b < 2 * ROWS; b++) {
                    const int8_t *row = w + (g + b % ROWS) * k;
                    size_t p = 4 * q + b / ROWS;
                    *out++ = (uint8_t)(pair_index(row + 2 * p) | pair_index(row + 2 * p + 4) << 4);
                }
}

// Quad q's 128 bytes: low bytes of pairs 4q | 4q + 1, their high bytes, then the same for
// pairs 4q + 2 | 4q + 3 (each half of a 32-byte load is one pair's 16-entry table).
static void build_tables(const int8_t *a, size_t k, uint8_t *tables) {
    const __m128i w0 = _mm_setr_epi16(-1, -1, -1, 0, 0, 0, 1, 1), w1 = _mm_setr_epi16(-1, 0, 1, -1, 0, 1, -1, 0);
    const __m128i byte = _mm_set1_epi16(0xff);
    for (size_t p = 0; p < k / 2; p++) {
        uint8_t *low = tables + p / 4 * TABLE + (p % 4) / 2 * 64 + (p % 2) * 16, *high = low + 32;
        __m128i a0 = _mm_set1_epi16(a[2 * p]), a1 = _mm_set1_epi16(a[2 * p + 1]);
        // Entries 0..7, then entry 8 (w0 = w1 = 1) and seven zeros.
        __m128i first = _mm_add_epi16(_mm_mullo_epi16(a0, w0), _mm_mullo_epi16(a1, w1));
        __m128i last = _mm_cvtsi32_si128((uint16_t)(a[2 * p] + a[2 * p + 1]));
        _mm_store_si128((__m128i *)low, _mm_packus_epi16(_mm_and_si128(first, byte), _mm_and_si128(last, byte)));
        _mm_store_si128((__m128i *)high, _mm_packus_epi16(_mm_and_si128(_mm_srai_epi16(first, 8), byte),
                                                         _mm_and_si128(_mm_srai_epi16(last, 8), byte)));
    }
}

// Sign-extends the even and the odd int16 lanes of `v` into int32 and adds them to `even`
// and `odd`.
static void fold(__m256i v, __m256i *even, __m256i *odd) {
    *even = _mm256_add_epi32(*even, _mm256_srai_epi32(_mm256_slli_epi32(v, 16), 16));
    *odd = _mm256_add_epi32(*odd, _mm256_srai_epi32(v, 16));
}

static void gemv(const uint8_t *packed, const uint8_t *tables, size_t n, size_t k, int32_t *out) {
    const __m256i nibble = _mm256_set1_epi8(0x0f);
    memset(out, 0, n * sizeof *out);
    for (size_t c = 0; c < k; c += CHUNK) {
        const size_t quads = chunk_quads(c, k);
        const uint8_t *chunk_tables = tables + c / QUAD * TABLE;
        for (size_t g = 0; g < n; g += ROWS, packed += quads * 2 * ROWS) {
            // int32 sums of rows 0..7 (low) and 8..15 (high), even and odd rows apart; each
            // 128-bit lane holds one of a load's two pairs, added at the end.
            __m256i low_even = _mm256_setzero_si256(), low_odd = low_even;
            __m256i high_even = low_even, high_odd = low_even;
            for (size_t q0 = 0; q0 < quads; q0 += FOLD) {
                __m256i low = _mm256_setzero_si256(), high = low;
                for (size_t q = q0; q < q0 + FOLD; q++) {
                    const uint8_t *t = chunk_tables + q * TABLE;
                    __m256i x = _mm256_loadu_si256((const __m256i *)(packed + q * 2 * ROWS));
                    __m256i ia = _mm256_and_si256(x, nibble);
                    __m256i ib = _mm256_and_si256(_mm256_srli_epi16(x, 4), nibble);
                    __m256i la = _mm256_shuffle_epi8(_mm256_load_si256((const __m256i *)t), ia);
                    __m256i ha = _mm256_shuffle_epi8(_mm256_load_si256((const __m256i *)(t + 32)), ia);
                    __m256i lb = _mm256_shuffle_epi8(_mm256_load_si256((const __m256i *)(t + 64)), ib);
                    __m256i hb = _mm256_shuffle_epi8(_mm256_load_si256((const __m256i *)(t + 96)), ib);
                    // Low and high bytes interleaved are the int16 sums, rows in order.
                    low = _mm256_add_epi16(low, _mm256_add_epi16(_mm256_unpacklo_epi8(la, ha), _mm256_unpacklo_epi8(lb, hb)));
                    high = _mm256_add_epi16(high, _mm256_add_epi16(_mm256_unpackhi_epi8(la, ha), _mm256_unpackhi_epi8(lb, hb)));
                }
                fold(low, &low_even, &low_odd);
                fold(high, &high_even, &high_odd);
            }
            int32_t sums[4][8];
            _mm256_storeu_si256((__m256i *)sums[0], low_even);
            _mm256_storeu_si256((__m256i *)sums[1], low_odd);
            _mm256_storeu_si256((__m256i *)sums[2], high_even);
            _mm256_storeu_si256((__m256i *)sums[3], high_odd);
            for (int i = 0; i < 4; i++)
                for (int s = 0; s < 4; s++)
                    out[g + 8 * (s / 2) + 2 * i + s % 2] += sums[s][i] + sums[s][4 + i];
        }
    }
}

int main(int argc, char **argv) {
    size_t n = 4096, k = 4096;
    if (argc > 1 && sscanf(argv[1], "%zux%zu", &n, &k) != 2) n = 0;
    long runs = argc > 2 ? atol(argv[2]) : 500;
    if (n == 0 || n % ROWS || k == 0 || k % STEP || runs < 1) {
        fprintf(stderr, "usage: lut-probe NxK [runs]: N a multiple of %d, K of %d, runs >= 1\n", ROWS, STEP);
        return 2;
    }
    int8_t *w = malloc(n * k), *a = malloc(k);
    uint8_t *packed = aligned_alloc(64, n * k / 4), *tables = aligned_alloc(64, k / QUAD * TABLE);
    int32_t *out = malloc(n * sizeof *out), *expected = malloc(n * sizeof *expected);
    if (!w || !a || !packed || !tables || !out || !expected) {
        fprintf(stderr, "lut-probe: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n * k; i++) w[i] = (int8_t)(next() % 3) - 1;
    for (size_t i = 0; i < k; i++) a[i] = (int8_t)((int)(next() % 255) - 127);
    for (size_t r = 0; r < n; r++) {
        int32_t s = 0;
        for (size_t i = 0; i < k; i++) s += w[r * k + i] * a[i];
        expected[r] = s;
    }
    repack(w, n, k, packed);
    double best = 1e9, best_tables = 1e9;
    for (long i = 0; i < runs; i++) {
        double t0 = now();
        build_tables(a, k, tables);
        double t1 = now();
        gemv(packed, tables, n, k, out);
        double t2 = now();
        best = t2 - t0 < best ? t2 - t0 : best;
        best_tables = t1 - t0 < best_tables ? t1 - t0 : best_tables;
        if (i == 0 && memcmp(out, expected, n * sizeof *out) != 0) {
            fprintf(stderr, "lut-probe: the GEMV differs from the scalar dot products\n");
            return 1;
        }
    }
    printf("lut-probe %zux%zu m = 1: %.1f us fastest of %ld (tables %.1f us), %.1f GMAC/s, exact\n", n, k,
           best * 1e6, runs, best_tables * 1e6, (double)n * (double)k / best * 1e-9);
    free(w);
    free(a);
    free(packed);
    free(tables);
    free(out);
    free(expected);
    return 0;
}
