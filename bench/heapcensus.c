/* LD_PRELOAD shim for docs/PERFORMANCE.md's per-connection memory breakdown: keeps every
 * live heap block with the call stack that allocated it, and each time the file named by
 * $CENSUS_TRIGGER appears (it is then removed) writes the live blocks grouped by stack to
 * $CENSUS_OUT.N (N = 1, 2, ...): "count bytes usable | frame frame ..." per line, frames
 * as offsets into their object ("wspipe+0x1234"). Diff two dumps taken around N
 * connections to see what each one holds (bench/heapcensus.py does that and symbolises).
 *
 *     cc -O2 -shared -fPIC -o heapcensus.so bench/heapcensus.c -ldl -lpthread
 *
 * Slow (a backtrace per allocation): for counting, not for timing. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

#define DEPTH 12
#define SITES 65536
#define SLOTS (1u << 22)

struct site { void *frames[DEPTH]; int depth; long count; long bytes; long usable; };
struct block { uintptr_t ptr; uint32_t site; uint32_t size; };

static struct site *sites;
static int site_count;
static struct block *blocks;
static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;  /* dump frees while it holds it */
static __thread int inside;
static int ready;

static uint32_t hash_ptr(uintptr_t p) { return (uint32_t)((p >> 4) * 2654435761u) & (SLOTS - 1); }

static int find_site(void **frames, int depth) {
    uint32_t h = 0;
    for (int i = 0; i < depth; i++) h = h * 31 + (uint32_t)((uintptr_t)frames[i] >> 2);
    for (int i = 0; i < site_count; i++) {
        if (sites[i].depth == depth && memcmp(sites[i].frames, frames, depth * sizeof(void *)) == 0) return i;
    }
    if (site_count >= SITES) return SITES - 1;
    memcpy(sites[site_count].frames, frames, depth * sizeof(void *));
    sites[site_count].depth = depth;
    (void)h;
    return site_count++;
}

static void record(void *p, size_t size) {
    if (!p || !ready || inside) return;
    inside = 1;
    void *frames[DEPTH + 2];
    int depth = backtrace(frames, DEPTH + 2) - 2;
    if (depth < 0) depth = 0;
    pthread_mutex_lock(&lock);
    int s = find_site(frames + 2, depth);
    sites[s].count++;
    sites[s].bytes += size;
    sites[s].usable += malloc_usable_size(p);
    uint32_t h = hash_ptr((uintptr_t)p);
    while (blocks[h].ptr && blocks[h].ptr != 1) h = (h + 1) & (SLOTS - 1);
    blocks[h] = (struct block){ (uintptr_t)p, (uint32_t)s, (uint32_t)size };
    pthread_mutex_unlock(&lock);
    inside = 0;
}

static void forget(void *p) {
    if (!p || !ready) return;
    pthread_mutex_lock(&lock);
    uint32_t h = hash_ptr((uintptr_t)p);
    while (blocks[h].ptr) {
        if (blocks[h].ptr == (uintptr_t)p) {
            struct site *s = &sites[blocks[h].site];
            s->count--;
            s->bytes -= blocks[h].size;
            s->usable -= malloc_usable_size(p);
            blocks[h].ptr = 1;  /* tombstone */
            break;
        }
        h = (h + 1) & (SLOTS - 1);
    }
    pthread_mutex_unlock(&lock);
}

void *malloc(size_t n) { void *p = __libc_malloc(n); record(p, n); return p; }
void *calloc(size_t a, size_t b) { void *p = __libc_calloc(a, b); record(p, a * b); return p; }
void *realloc(void *old, size_t n) { forget(old); void *p = __libc_realloc(old, n); record(p, n); return p; }
void *aligned_alloc(size_t a, size_t n) { void *p = __libc_memalign(a, n); record(p, n); return p; }
void *memalign(size_t a, size_t n) { void *p = __libc_memalign(a, n); record(p, n); return p; }
int posix_memalign(void **out, size_t a, size_t n) {
    void *p = __libc_memalign(a, n);
    if (!p) return ENOMEM;
    record(p, n);
    *out = p;
    return 0;
}
void free(void *p) { forget(p); __libc_free(p); }

static void dump(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    inside = 1;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < site_count; i++) {
        if (sites[i].count == 0) continue;
        fprintf(f, "%ld %ld %ld |", sites[i].count, sites[i].bytes, sites[i].usable);
        for (int j = 0; j < sites[i].depth; j++) {
            Dl_info info;
            if (dladdr(sites[i].frames[j], &info) && info.dli_fname) {
                const char *name = strrchr(info.dli_fname, '/');
                fprintf(f, " %s+0x%lx", name ? name + 1 : info.dli_fname,
                        (unsigned long)((char *)sites[i].frames[j] - (char *)info.dli_fbase));
            } else {
                fprintf(f, " ?%p", sites[i].frames[j]);
            }
        }
        fputc('\n', f);
    }
    pthread_mutex_unlock(&lock);
    inside = 0;
    fclose(f);
}

static void *watcher(void *unused) {
    (void)unused;
    const char *trigger = getenv("CENSUS_TRIGGER"), *out = getenv("CENSUS_OUT");
    for (int n = 1;; ) {
        usleep(100000);
        if (access(trigger, F_OK) == 0) {
            char path[4096];
            snprintf(path, sizeof path, "%s.%d", out, n++);
            dump(path);
            unlink(trigger);
        }
    }
    return NULL;
}

__attribute__((constructor)) static void start(void) {
    if (!getenv("CENSUS_TRIGGER") || !getenv("CENSUS_OUT")) return;
    inside = 1;
    sites = __libc_calloc(SITES, sizeof *sites);
    blocks = __libc_calloc(SLOTS, sizeof *blocks);
    void *warm[4];
    backtrace(warm, 4);  /* loads libgcc_s now, not inside a malloc */
    pthread_t thread;
    pthread_create(&thread, NULL, watcher, NULL);
    pthread_detach(thread);
    inside = 0;
    ready = 1;
}
