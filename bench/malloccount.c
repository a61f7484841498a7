/* LD_PRELOAD shim for scripts/bench-api: counts malloc, calloc, realloc and
 * posix_memalign/aligned_alloc calls (all threads) and lets the program read the total
 * through malloccount_total(). Forwards to glibc's allocator via __libc_* entry points. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <errno.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static _Atomic uint64_t total;

uint64_t malloccount_total(void) { return total; }

void *malloc(size_t n) { total++; return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { total++; return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { total++; return __libc_realloc(p, n); }
void *aligned_alloc(size_t a, size_t n) { total++; return __libc_memalign(a, n); }
void *memalign(size_t a, size_t n) { total++; return __libc_memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n) {
    total++;
    void *p = __libc_memalign(a, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
