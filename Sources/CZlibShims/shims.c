#include "CZlibShims.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* Function pointers with zlib's own types, filled by wsp_z_load(). */
#define WSP_Z_FUNCTIONS(X) X(inflateInit2_) X(inflate) X(inflateEnd) X(inflateReset) \
    X(deflateInit2_) X(deflate) X(deflateEnd) X(deflateReset) X(zlibVersion)
#define WSP_DECLARE(name) static __typeof__(&name) p_##name;
WSP_Z_FUNCTIONS(WSP_DECLARE)

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded;

int wsp_z_load(char *error, size_t length) {
    pthread_mutex_lock(&load_lock);
    if (loaded) { pthread_mutex_unlock(&load_lock); return 0; }
    void *handle = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        snprintf(error, length, "cannot load libz.so.1 (install zlib: apt-get install zlib1g): %s", why ? why : "not found");
        pthread_mutex_unlock(&load_lock);
        return -1;
    }
#define WSP_RESOLVE(name)                                                                     \
    p_##name = (__typeof__(&name))dlsym(handle, #name);                                       \
    if (!p_##name) {                                                                          \
        snprintf(error, length, "libz.so.1 lacks %s", #name);                                 \
        pthread_mutex_unlock(&load_lock);                                                     \
        return -1;                                                                            \
    }
    WSP_Z_FUNCTIONS(WSP_RESOLVE)
    loaded = 1;
    pthread_mutex_unlock(&load_lock);
    return 0;
}

struct wsp_zstream {
    z_stream z;
    int inflating;
};

wsp_zstream *wsp_inflater_new(int windowBits, int format) {
    if (!loaded || windowBits < 8 || windowBits > 15) return NULL;
    wsp_zstream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    int bits = format == WSP_Z_RAW ? -windowBits : format == WSP_Z_GZIP ? windowBits + 16 : windowBits;
    if (p_inflateInit2_(&s->z, bits, ZLIB_VERSION, (int)sizeof(z_stream)) != Z_OK) { free(s); return NULL; }
    s->inflating = 1;
    return s;
}

wsp_zstream *wsp_deflater_new(int windowBits, int memLevel, int level) {
    /* zlib cannot make raw streams for a 256-byte window (8 becomes 9): callers never ask. */
    if (!loaded || windowBits < 9 || windowBits > 15) return NULL;
    wsp_zstream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (p_deflateInit2_(&s->z, level, Z_DEFLATED, -windowBits, memLevel, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                        (int)sizeof(z_stream)) != Z_OK) { free(s); return NULL; }
    return s;
}

void wsp_zstream_free(wsp_zstream *s) {
    if (!s) return;
    if (s->inflating) p_inflateEnd(&s->z); else p_deflateEnd(&s->z);
    free(s);
}

int wsp_zstream_reset(wsp_zstream *s) { return s->inflating ? p_inflateReset(&s->z) : p_deflateReset(&s->z); }

/* z_stream counts in uInt: larger buffers are taken in pieces by the caller's loop. */
static uInt clamp(size_t n) { return n > 0x40000000u ? 0x40000000u : (uInt)n; }

/* One inflate or deflate call over the caller's buffers, reporting what it took and made. */
static int step(wsp_zstream *s, int (*run)(z_streamp, int), int flush, const void *in, size_t inLength,
                void *out, size_t outCapacity, size_t *consumed, size_t *produced) {
    s->z.next_in = (Bytef *)in;
    s->z.avail_in = clamp(inLength);
    s->z.next_out = out;
    s->z.avail_out = clamp(outCapacity);
    uInt availIn = s->z.avail_in, availOut = s->z.avail_out;
    int result = run(&s->z, flush);
    *consumed = availIn - s->z.avail_in;
    *produced = availOut - s->z.avail_out;
    return result;
}

int wsp_inflate(wsp_zstream *s, const void *in, size_t inLength, void *out, size_t outCapacity,
                size_t *consumed, size_t *produced) {
    return step(s, p_inflate, Z_SYNC_FLUSH, in, inLength, out, outCapacity, consumed, produced);
}

int wsp_deflate(wsp_zstream *s, const void *in, size_t inLength, void *out, size_t outCapacity,
                size_t *consumed, size_t *produced, int flush) {
    return step(s, p_deflate, flush, in, inLength, out, outCapacity, consumed, produced);
}

const char *wsp_zstream_message(const wsp_zstream *s) { return s->z.msg; }
