/*
 * The one assertion helper of the C tests. A failed check prints file:line and what
 * failed, and the test goes on; check_report() then makes main return non-zero.
 * Valid C11 and C++17 (every test file is also built as C++).
 */
#ifndef TERN_CHECK_H
#define TERN_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern.h"

static int check_failures = 0;
static int check_count = 0;

static inline int check_(int ok, const char *what, const char *file, int line) {
    check_count++;
    if (!ok) {
        check_failures++;
        fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
    }
    return ok;
}

static inline int check_status_(tern_status got, tern_status want, const char *what,
                                const char *file, int line) {
    check_count++;
    if (got != want) {
        check_failures++;
        fprintf(stderr, "%s:%d: %s\n    returned %u (%s: %s)\n    expected %u (%s)\n", file, line,
                what, (unsigned)got, tern_status_str(got), tern_last_error(), (unsigned)want,
                tern_status_str(want));
    }
    return got == want;
}

/* check_status_, then: the thread's tern_last_error() contains `part`. */
static inline int check_error_(tern_status got, tern_status want, const char *part,
                               const char *what, const char *file, int line) {
    if (!check_status_(got, want, what, file, line)) return 0;
    const char *message = tern_last_error();
    int ok = message != NULL && strstr(message, part) != NULL;
    check_count++;
    if (!ok) {
        check_failures++;
        fprintf(stderr, "%s:%d: tern_last_error() is \"%s\", expected it to contain \"%s\"\n", file,
                line, message ? message : "(null)", part);
    }
    return ok;
}

/* CHECK(cond): cond must be true. Evaluates to cond. */
#define CHECK(cond) check_((cond) ? 1 : 0, #cond, __FILE__, __LINE__)
/* CHECK_STATUS(call, status): call must return status. */
#define CHECK_STATUS(call, want) check_status_((call), (want), #call, __FILE__, __LINE__)
/* CHECK_OK(call): call must return TERN_OK. */
#define CHECK_OK(call) CHECK_STATUS(call, TERN_OK)
/* CHECK_ERROR(call, status, part): call must return status, with `part` in tern_last_error(). */
#define CHECK_ERROR(call, want, part) check_error_((call), (want), (part), #call, __FILE__, __LINE__)

/* 1 if all `len` bytes at p equal `value`: an output buffer an error left untouched. */
static inline int bytes_all(const void *p, size_t len, unsigned char value) {
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < len; i++) {
        if (b[i] != value) return 0;
    }
    return 1;
}

/* 1 if all `len` floats at p are bitwise equal to `value`. */
static inline int floats_all(const float *p, size_t len, float value) {
    for (size_t i = 0; i < len; i++) {
        if (memcmp(&p[i], &value, sizeof value) != 0) return 0;
    }
    return 1;
}

/* Allocates or exits: a test cannot go on without its buffers. */
static inline void *check_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
        exit(2);
    }
    return p;
}

/* Prints a summary; returns main's exit code (non-zero if any check failed). */
static inline int check_report(const char *name) {
    if (check_failures) {
        fprintf(stderr, "%s: %d of %d checks failed\n", name, check_failures, check_count);
        return 1;
    }
    printf("%s: %d checks passed\n", name, check_count);
    return 0;
}

#endif /* TERN_CHECK_H */
