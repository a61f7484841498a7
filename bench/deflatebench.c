/*
 * deflatebench: the permessage-deflate benchmark's own C tools (scripts/bench-deflate; not
 * part of wspipe). The server side replays bytes compressed ahead of time, so it is never
 * the bottleneck being measured; `inflate` and `deflate` are zlib's own loops over the same
 * data, the limit a client can reach.
 *
 *   deflatebench prepare FEED DEFLATED PLAIN   one text message per FEED line: DEFLATED gets
 *                      the server's frames compressed (RSV1, context takeover, 15-bit window,
 *                      level 6, sync flush, tail removed: RFC 7692 §7.2.1), PLAIN the same
 *                      messages uncompressed; prints "messages M bytes B wire W"
 *   deflatebench serve PORT DEFLATED PLAIN     one connection: answers an offer of
 *                      permessage-deflate with "permessage-deflate" (both contexts kept,
 *                      15-bit windows) and writes DEFLATED, else PLAIN, as fast as the socket
 *                      takes it; then Close 1000, waits for the client's Close
 *   deflatebench sink PORT                    one connection: agrees to permessage-deflate
 *                      when offered, unmasks and inflates every message until the Close;
 *                      prints "messages M bytes B wire W cpu C" (B inflated, W payload on the
 *                      wire, C its own user+sys seconds)
 *   deflatebench inflate DEFLATED              inflates the frames of DEFLATED as a client
 *                      would (one stream, tail restored per message) and discards them
 *   deflatebench deflate FEED                  compresses FEED's lines as `prepare` does,
 *                      discarding them (the upload's limit)
 *   Both loops print "messages M bytes B wire W cpu C".
 *
 * PORT 0 picks a free port; the first stdout line is then "PORT <n>".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "listen.h"

static void die(const char *what) {
    fprintf(stderr, "deflatebench: %s: %s\n", what, errno ? strerror(errno) : "failed");
    exit(1);
}

static double cpu_seconds(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static const unsigned char *map_file(const char *path, size_t *size) {
    int f = open(path, O_RDONLY);
    struct stat st;
    if (f < 0 || fstat(f, &st) < 0) die(path);
    *size = (size_t)st.st_size;
    if (*size == 0) return (const unsigned char *)"";
    void *p = mmap(NULL, *size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, f, 0);
    if (p == MAP_FAILED) die("mmap");
    close(f);
    return p;
}

/* ---------------------------------------------------------------- frames */

static size_t frame_header(unsigned char *h, int first_byte, uint64_t len) {
    h[0] = (unsigned char)first_byte;
    if (len < 126) { h[1] = (unsigned char)len; return 2; }
    if (len < 65536) { h[1] = 126; h[2] = (unsigned char)(len >> 8); h[3] = len & 255; return 4; }
    h[1] = 127;
    for (int i = 0; i < 8; i++) h[2 + i] = (unsigned char)(len >> (56 - 8 * i));
    return 10;
}

/* Parses an unmasked or masked frame header at p (n bytes available): its length, or 0
 * when incomplete. */
struct frame { int fin, rsv1, opcode, masked; uint64_t len; unsigned char mask[4]; };

static size_t parse_header(const unsigned char *p, size_t n, struct frame *f) {
    if (n < 2) return 0;
    f->fin = p[0] >> 7;
    f->rsv1 = (p[0] >> 6) & 1;
    f->opcode = p[0] & 15;
    f->masked = p[1] >> 7;
    uint64_t len = p[1] & 127;
    size_t hl = 2 + (len == 126 ? 2 : len == 127 ? 8 : 0) + (f->masked ? 4 : 0);
    if (n < hl) return 0;
    if (len == 126) len = (uint64_t)p[2] << 8 | p[3];
    else if (len == 127) { len = 0; for (int i = 0; i < 8; i++) len = len << 8 | p[2 + i]; }
    if (f->masked) memcpy(f->mask, p + hl - 4, 4);
    f->len = len;
    return hl;
}

/* ---------------------------------------------------------------- zlib loops */

static const unsigned char tail[4] = {0, 0, 0xff, 0xff};

struct deflater { z_stream z; unsigned char *out; size_t cap; };

static void deflater_init(struct deflater *d) {
    memset(&d->z, 0, sizeof d->z);
    if (deflateInit2(&d->z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) die("deflateInit2");
    d->cap = 1 << 16;
    d->out = malloc(d->cap);
}

/* One message, sync-flushed, its 4-byte tail removed; returns its compressed length. */
static size_t deflate_message(struct deflater *d, const unsigned char *in, size_t len) {
    size_t need = len + len / 100 + 64;
    if (need > d->cap) { d->cap = need; d->out = realloc(d->out, d->cap); }
    d->z.next_in = (Bytef *)in;
    d->z.avail_in = (uInt)len;
    d->z.next_out = d->out;
    d->z.avail_out = (uInt)d->cap;
    if (deflate(&d->z, Z_SYNC_FLUSH) != Z_OK || d->z.avail_in != 0 || d->z.avail_out == 0) die("deflate");
    size_t produced = d->cap - d->z.avail_out;
    return produced - 4;
}

/* Inflates into a scratch buffer that is thrown away; returns the inflated byte count. */
static uint64_t inflate_into_void(z_stream *z, const unsigned char *in, size_t len) {
    static unsigned char out[1 << 16];
    uint64_t total = 0;
    z->next_in = (Bytef *)in;
    z->avail_in = (uInt)len;
    do {
        z->next_out = out;
        z->avail_out = sizeof out;
        int r = inflate(z, Z_SYNC_FLUSH);
        if (r != Z_OK && r != Z_BUF_ERROR) { errno = 0; die("inflate: corrupt data"); }
        total += sizeof out - z->avail_out;
        if (r == Z_BUF_ERROR) break;
    } while (z->avail_in > 0 || z->avail_out == 0);
    return total;
}

static void inflater_init(z_stream *z) {
    memset(z, 0, sizeof *z);
    if (inflateInit2(z, -15) != Z_OK) die("inflateInit2");
}

static int prepare(const char *feed, const char *deflated, const char *plain, int discard) {
    size_t size;
    const unsigned char *p = map_file(feed, &size), *end = p + size;
    FILE *d = discard ? NULL : fopen(deflated, "wb"), *u = discard ? NULL : fopen(plain, "wb");
    if (!discard && (!d || !u)) die("open output");
    struct deflater z;
    deflater_init(&z);
    uint64_t messages = 0, bytes = 0, wire = 0;
    double start = cpu_seconds();
    while (p < end) {
        const unsigned char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        size_t clen = deflate_message(&z, p, len);
        if (!discard) {
            unsigned char h[10];
            fwrite(h, 1, frame_header(h, 0xC1, clen), d);
            fwrite(z.out, 1, clen, d);
            fwrite(h, 1, frame_header(h, 0x81, len), u);
            fwrite(p, 1, len, u);
        }
        messages++;
        bytes += len + 1; /* a client writes each message on a line */
        wire += clen;
        p += len + 1;
    }
    if (!discard && (fclose(d) || fclose(u))) die("write output");
    printf("messages %llu bytes %llu wire %llu cpu %.3f\n", (unsigned long long)messages, (unsigned long long)bytes,
           (unsigned long long)wire, cpu_seconds() - start);
    return 0;
}

static int inflate_frames(const char *deflated) {
    size_t size;
    const unsigned char *p = map_file(deflated, &size), *end = p + size;
    z_stream z;
    inflater_init(&z);
    uint64_t messages = 0, bytes = 0, wire = 0;
    double start = cpu_seconds();
    while (p < end) {
        struct frame f;
        size_t hl = parse_header(p, (size_t)(end - p), &f);
        if (!hl || f.len > (uint64_t)(end - p - hl)) { errno = 0; die("truncated frames"); }
        bytes += inflate_into_void(&z, p + hl, (size_t)f.len);
        wire += f.len;
        if (f.fin) {
            bytes += inflate_into_void(&z, tail, 4) + 1;
            messages++;
        }
        p += hl + f.len;
    }
    printf("messages %llu bytes %llu wire %llu cpu %.3f\n", (unsigned long long)messages, (unsigned long long)bytes,
           (unsigned long long)wire, cpu_seconds() - start);
    return 0;
}

/* ---------------------------------------------------------------- the server side */

static int fd = -1;
static unsigned char *rbuf;
static size_t rcap = 4 << 20, rlen, rpos;

static void wr(const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) die("write");
        p += w;
        n -= (size_t)w;
    }
}

static int fill(void) {
    if (rpos > 0) {
        memmove(rbuf, rbuf + rpos, rlen - rpos);
        rlen -= rpos;
        rpos = 0;
    }
    if (rlen == rcap) { rcap *= 2; rbuf = realloc(rbuf, rcap); }
    for (;;) {
        ssize_t r = read(fd, rbuf + rlen, rcap - rlen);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        rlen += (size_t)r;
        return 1;
    }
}

static int accept_one(int port) {
    int s = listen_loopback(port);
    if (s < 0) die("listen");
    int c = accept(s, NULL, NULL);
    if (c < 0) die("accept");
    close(s);
    return c;
}

/* Reads the request head, answers 101; returns whether permessage-deflate was offered
 * (and so agreed, without parameters: 15-bit windows, both contexts kept). Bytes after
 * the head stay in rbuf. */
static int handshake(void) {
    char *end = NULL;
    rbuf = malloc(rcap);
    while (!end) {
        if (!fill()) die("handshake read");
        rbuf[rlen < rcap ? rlen : rcap - 1] = 0;
        end = strstr((char *)rbuf, "\r\n\r\n");
    }
    *end = 0;
    char *head = (char *)rbuf;
    int deflate = 0;
    for (char *h = strcasestr(head, "\nSec-WebSocket-Extensions:"); h; h = strcasestr(h + 1, "\nSec-WebSocket-Extensions:")) {
        char *eol = strstr(h + 1, "\r\n");
        char *pmd = strcasestr(h, "permessage-deflate");
        if (pmd && (!eol || pmd < eol)) deflate = 1;
    }
    char *key = strcasestr(head, "\nSec-WebSocket-Key:");
    if (!key) { errno = 0; die("no Sec-WebSocket-Key"); }
    key += 19;
    while (*key == ' ') key++;
    size_t keylen = strcspn(key, "\r\n ");
    char buf[256];
    snprintf(buf, sizeof buf, "%.*s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", (int)keylen, key);
    unsigned char digest[20];
    SHA1((unsigned char *)buf, strlen(buf), digest);
    char accept[64], reply[512];
    EVP_EncodeBlock((unsigned char *)accept, digest, 20);
    int n = snprintf(reply, sizeof reply,
                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Accept: %s\r\n%s\r\n", accept,
                     deflate ? "Sec-WebSocket-Extensions: permessage-deflate\r\n" : "");
    wr(reply, (size_t)n);
    rpos = (size_t)(end + 4 - head);
    return deflate;
}

/* The next whole frame (header and payload in rbuf, payload unmasked in place), or 0 at EOF. */
static int next_frame(struct frame *f, unsigned char **payload) {
    size_t hl;
    while (!(hl = parse_header(rbuf + rpos, rlen - rpos, f)) || rlen - rpos - hl < f->len)
        if (!fill()) return 0;
    unsigned char *p = rbuf + rpos + hl;
    if (f->masked)
        for (uint64_t i = 0; i < f->len; i++) p[i] ^= f->mask[i & 3];
    *payload = p;
    rpos += hl + f->len;
    return 1;
}

static void close_and_wait(void) {
    unsigned char close_frame[4] = {0x88, 2, 0x03, 0xE8};
    wr(close_frame, 4);
    struct frame f;
    unsigned char *p;
    while (next_frame(&f, &p))
        if (f.opcode == 8) break;
}

static int serve(int port, const char *deflated, const char *plain) {
    size_t dsize, psize;
    const unsigned char *d = map_file(deflated, &dsize), *u = map_file(plain, &psize);
    fd = accept_one(port);
    int agreed = handshake();
    const unsigned char *data = agreed ? d : u;
    size_t size = agreed ? dsize : psize;
    wr(data, size);
    close_and_wait();
    printf("sent %llu deflate %d\n", (unsigned long long)size, agreed);
    return 0;
}

static int sink(int port) {
    fd = accept_one(port);
    int agreed = handshake();
    z_stream z;
    inflater_init(&z);
    uint64_t messages = 0, bytes = 0, wire = 0;
    int compressed = 0;
    struct frame f;
    unsigned char *p;
    while (next_frame(&f, &p)) {
        if (f.opcode == 8) {
            unsigned char close_frame[4] = {0x88, 2, 0x03, 0xE8};
            wr(close_frame, 4);
            break;
        }
        if (f.opcode == 9) { /* wspipe's end-of-input barrier is a ping: answer it */
            unsigned char h[10];
            wr(h, frame_header(h, 0x8A, f.len));
            wr(p, (size_t)f.len);
        }
        if (f.opcode >= 8) continue;
        if (f.opcode != 0) compressed = f.rsv1;
        if (compressed && !agreed) { errno = 0; die("RSV1 set without permessage-deflate"); }
        wire += f.len;
        bytes += compressed ? inflate_into_void(&z, p, (size_t)f.len) : f.len;
        if (f.fin) {
            if (compressed) bytes += inflate_into_void(&z, tail, 4);
            messages++;
            bytes++; /* the newline the feed had */
        }
    }
    printf("messages %llu bytes %llu wire %llu cpu %.3f deflate %d\n", (unsigned long long)messages,
           (unsigned long long)bytes, (unsigned long long)wire, cpu_seconds(), agreed);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "prepare")) return prepare(argv[2], argv[3], argv[4], 0);
    if (argc == 5 && !strcmp(argv[1], "serve")) return serve(atoi(argv[2]), argv[3], argv[4]);
    if (argc == 3 && !strcmp(argv[1], "sink")) return sink(atoi(argv[2]));
    if (argc == 3 && !strcmp(argv[1], "inflate")) return inflate_frames(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "deflate")) return prepare(argv[2], NULL, NULL, 1);
    fprintf(stderr, "usage: deflatebench prepare FEED DEFLATED PLAIN | serve PORT DEFLATED PLAIN | sink PORT | "
                    "inflate DEFLATED | deflate FEED\n");
    return 2;
}
