/* What the load generators (broadcastload.c, echoload.c) share: errors, clocks, the opening
 * handshake's request (a fixed key: the servers check its form, not its value).
 * Each defines LOADGEN_NAME, the program name its errors start with, before including. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static void die(const char *what) {
    fprintf(stderr, LOADGEN_NAME ": %s: %s\n", what, strerror(errno));
    exit(1);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu_seconds(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* The request for `path` into out (1 KiB is room enough); returns its length. */
static size_t format_request(char *out, size_t size, const char *path) {
    int n = snprintf(out, size,
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", path);
    if (n < 0 || (size_t)n >= size) { fprintf(stderr, LOADGEN_NAME ": the path is too long\n"); exit(2); }
    return (size_t)n;
}

/* A received frame's header, read a byte at a time (reads split headers anywhere). */
struct frame_head {
    unsigned char bytes[14];
    int length;
};

/* Adds one byte; once the header is whole, sets the payload length, opcode and FIN, starts
 * over and returns 1. */
static int frame_head_add(struct frame_head *h, unsigned char byte, uint64_t *payload, int *opcode, int *fin) {
    h->bytes[h->length++] = byte;
    if (h->length < 2) return 0;
    int len7 = h->bytes[1] & 127;
    int need = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + ((h->bytes[1] & 128) ? 4 : 0);
    if (h->length < need) return 0;
    uint64_t len = (uint64_t)len7;
    if (len7 == 126) len = (uint64_t)h->bytes[2] << 8 | h->bytes[3];
    else if (len7 == 127) { len = 0; for (int i = 0; i < 8; i++) len = len << 8 | h->bytes[2 + i]; }
    *payload = len;
    *opcode = h->bytes[0] & 15;
    *fin = h->bytes[0] >> 7;
    h->length = 0;
    return 1;
}
