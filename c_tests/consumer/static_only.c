/* Links libtern.a and nothing else of tern's, and also uses compiler runtime helpers that
 * Rust's compiler_builtins (inside libtern.a) defines as well: 128-bit division and, on
 * x86, the CPU model data behind __builtin_cpu_supports. It must link without duplicate
 * symbols and run. scripts/check-packaging.sh builds it (static-only, kotlin-def) with
 * no project flags, only what a consumer would pass.
 *
 * Usage: static_only  (exit 0 on success, 1 with a message otherwise) */
#include <stdio.h>
#include <string.h>

#include "tern.h"

int main(int argc, char **argv) {
    (void)argv;
    /* argc keeps the division from being folded at compile time, so __udivti3 and
     * __umodti3 are called. */
    __extension__ typedef unsigned __int128 u128;
    u128 big = ((u128)1 << 100) + (u128)argc;
    u128 d = (u128)(6 + argc);
    if (big / d * d + big % d != big || big / d >> 64 == 0) {
        fprintf(stderr, "static_only: 128-bit division is wrong\n");
        return 1;
    }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    printf("static_only: sse2 %d\n", __builtin_cpu_supports("sse2") != 0);
#endif

    if (strcmp(tern_version_string(), TERN_VERSION_STRING) != 0) {
        fprintf(stderr, "static_only: header %s, library %s\n", TERN_VERSION_STRING, tern_version_string());
        return 1;
    }
    if (tern_kernel_count() == 0 || tern_status_str(TERN_OK) == NULL) {
        fprintf(stderr, "static_only: the library answers nonsense\n");
        return 1;
    }
    struct tern_scope *scope = NULL;
    if (tern_scope_new(4096, &scope) != TERN_OK || scope == NULL) {
        fprintf(stderr, "static_only: tern_scope_new failed\n");
        return 1;
    }
    tern_scope_free(scope);
    printf("static_only: tern %s, %zu kernels\n", tern_version_string(), tern_kernel_count());
    return 0;
}
