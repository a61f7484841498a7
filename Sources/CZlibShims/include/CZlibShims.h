#ifndef WSP_CZLIBSHIMS_H
#define WSP_CZLIBSHIMS_H
/* zlib for permessage-deflate (RFC 7692) and --decompress, loaded with dlopen on first use:
 * a session that negotiates nothing never maps libz. Headers from zlib1g-dev; at run time
 * only libz.so.1. */
#include <stddef.h>

typedef struct wsp_zstream wsp_zstream;

/* Formats of wsp_inflater_new. */
enum { WSP_Z_RAW = 0, WSP_Z_ZLIB = 1, WSP_Z_GZIP = 2 };
/* Results (zlib's own values). */
enum { WSP_Z_OK = 0, WSP_Z_STREAM_END = 1, WSP_Z_NEED_DICT = 2, WSP_Z_BUF_ERROR = -5, WSP_Z_DATA_ERROR = -3,
       WSP_Z_MEM_ERROR = -4, WSP_Z_STREAM_ERROR = -2 };
enum { WSP_Z_NO_FLUSH = 0, WSP_Z_SYNC_FLUSH = 2, WSP_Z_FINISH = 4 };

/* 0 once libz.so.1 is loaded (thread-safe, loads once); else -1 with the reason in error. */
int wsp_z_load(char *error, size_t length);

/* NULL when out of memory or the parameters are refused. windowBits 8...15. */
wsp_zstream *wsp_inflater_new(int windowBits, int format);
wsp_zstream *wsp_deflater_new(int windowBits, int memLevel, int level);
void wsp_zstream_free(wsp_zstream *stream);
int wsp_zstream_reset(wsp_zstream *stream);

/* One call of inflate/deflate over in[0..<inLength] into out[0..<outCapacity]; what was
 * taken and made in *consumed and *produced. Returns zlib's result. */
int wsp_inflate(wsp_zstream *stream, const void *in, size_t inLength, void *out, size_t outCapacity,
                size_t *consumed, size_t *produced);
int wsp_deflate(wsp_zstream *stream, const void *in, size_t inLength, void *out, size_t outCapacity,
                size_t *consumed, size_t *produced, int flush);
/* zlib's message for the last error, or NULL. */
const char *wsp_zstream_message(const wsp_zstream *stream);

#endif
