/*
 * fwdload: the load of scripts/bench-forward (not part of wspipe): a TCP echo target and
 * clients that speak WebSocket (binary frames, zero masking key: the server unmasks all
 * the same) or plain TCP (for socat, the relay without WebSocket), in C so the client is
 * never what is measured.
 *
 *   fwdload echo                              TCP echo on a free port ("PORT n"), a thread per connection
 *   fwdload stream PORT BYTES ws|tcp          one connection: BYTES up while the echo comes back;
 *                                             prints "seconds S"
 *   fwdload multi PORT N BYTES ws|tcp         N connections at once, BYTES each way each; "seconds S"
 *   fwdload rtt PORT COUNT ws|tcp             COUNT 64-byte round trips; "p50_us A p99_us B"
 *   fwdload idle PORT N ws|tcp                opens N connections, prints "open N", waits for stdin EOF
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what) { perror(what); exit(1); }

static void write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0) { if (errno == EINTR) continue; die("write"); }
        c += w; n -= (size_t)w;
    }
}

static int dial(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Dials and, for ws, does the opening handshake (leftover bytes after the head are none:
   the gateways send nothing before the client does). */
static int open_stream(int port, int ws) {
    int fd = dial(port);
    if (!ws) return fd;
    char req[256];
    int n = snprintf(req, sizeof req, "GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                     "Sec-WebSocket-Protocol: binary\r\n\r\n", port);
    write_all(fd, req, (size_t)n);
    char head[4096];
    size_t got = 0;
    while (got < sizeof head) {
        ssize_t r = read(fd, head + got, 1);  /* byte by byte: never past the head */
        if (r <= 0) die("handshake");
        got++;
        if (got >= 4 && memcmp(head + got - 4, "\r\n\r\n", 4) == 0) break;
    }
    if (strncmp(head, "HTTP/1.1 101", 12) != 0) { fprintf(stderr, "handshake refused: %.40s\n", head); exit(1); }
    return fd;
}

/* One binary frame header, masked with a zero key. */
static size_t frame_header(unsigned char *h, uint64_t len) {
    size_t n = 0;
    h[n++] = 0x82;
    if (len < 126) { h[n++] = 0x80 | (unsigned char)len; }
    else if (len < 65536) { h[n++] = 0x80 | 126; h[n++] = len >> 8; h[n++] = len & 0xFF; }
    else { h[n++] = 0x80 | 127; for (int i = 7; i >= 0; i--) h[n++] = (len >> (8 * i)) & 0xFF; }
    memset(h + n, 0, 4);
    return n + 4;
}

static void send_message(int fd, int ws, const char *p, size_t len) {
    if (ws) {
        unsigned char h[16];
        size_t n = frame_header(h, len);
        struct iovec v[2] = { { h, n }, { (void *)p, len } };
        struct msghdr m = { .msg_iov = v, .msg_iovlen = 2 };
        size_t total = n + len, done = 0;
        while (done < total) {
            ssize_t w = sendmsg(fd, &m, 0);
            if (w < 0) { if (errno == EINTR) continue; die("sendmsg"); }
            done += (size_t)w;
            while (w > 0 && m.msg_iovlen > 0) {
                if ((size_t)w >= m.msg_iov[0].iov_len) { w -= m.msg_iov[0].iov_len; m.msg_iov++; m.msg_iovlen--; }
                else { m.msg_iov[0].iov_base = (char *)m.msg_iov[0].iov_base + w; m.msg_iov[0].iov_len -= w; w = 0; }
            }
        }
    } else {
        write_all(fd, p, len);
    }
}

/* Reads until `want` payload bytes came (ws: frames' payloads, server frames unmasked). */
typedef struct { int fd, ws; uint64_t want; } reader_t;
static void *read_payload(void *arg) {
    reader_t *r = arg;
    enum { size = 1 << 18 };
    char *buf = malloc(size);
    uint64_t payload = 0, left = 0;  /* left: payload bytes still due in the current frame */
    unsigned char hdr[14];
    size_t have = 0, need = 2;
    while (payload < r->want) {
        ssize_t n = read(r->fd, buf, size);
        if (n <= 0) { fprintf(stderr, "read ended after %llu of %llu\n", (unsigned long long)payload, (unsigned long long)r->want); exit(1); }
        if (!r->ws) { payload += (uint64_t)n; continue; }
        for (ssize_t i = 0; i < n;) {
            if (left > 0) {
                uint64_t take = (uint64_t)(n - i) < left ? (uint64_t)(n - i) : left;
                left -= take; payload += take; i += (ssize_t)take;
                continue;
            }
            hdr[have++] = (unsigned char)buf[i++];
            if (have == 2) {
                int l = hdr[1] & 0x7F;
                need = 2 + (l == 126 ? 2 : l == 127 ? 8 : 0);
                if ((hdr[0] & 0x0F) == 8) { fprintf(stderr, "close after %llu\n", (unsigned long long)payload); exit(1); }
            }
            if (have >= 2 && have == need) {
                int l = hdr[1] & 0x7F;
                uint64_t len = l;
                if (l == 126) len = (uint64_t)hdr[2] << 8 | hdr[3];
                if (l == 127) { len = 0; for (int k = 0; k < 8; k++) len = len << 8 | hdr[2 + k]; }
                left = len; have = 0; need = 2;
            }
        }
    }
    free(buf);
    return NULL;
}

typedef struct { int fd, ws; uint64_t bytes; } writer_t;
static void *write_payload(void *arg) {
    writer_t *w = arg;
    static char chunk[1 << 20];
    for (uint64_t sent = 0; sent < w->bytes;) {
        size_t n = w->bytes - sent < sizeof chunk ? (size_t)(w->bytes - sent) : sizeof chunk;
        send_message(w->fd, w->ws, chunk, n);
        sent += n;
    }
    return NULL;
}

static void *echo_conn(void *arg) {
    int fd = (int)(intptr_t)arg;
    char *buf = malloc(1 << 18);
    for (;;) {
        ssize_t n = read(fd, buf, 1 << 18);
        if (n <= 0) break;
        write_all(fd, buf, (size_t)n);
    }
    free(buf);
    close(fd);
    return NULL;
}

static void echo_server(void) {
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 4096) || getsockname(l, (struct sockaddr *)&a, &len)) die("listen");
    printf("PORT %d\n", ntohs(a.sin_port));
    fflush(stdout);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (;;) {
        int fd = accept(l, NULL, NULL);
        if (fd < 0) continue;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_t t;
        int e = pthread_create(&t, &attr, echo_conn, (void *)(intptr_t)fd);
        if (e) { fprintf(stderr, "fwdload: pthread_create: %s\n", strerror(e)); close(fd); }
    }
}

static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "echo")) { echo_server(); return 0; }
    if (argc < 5) { fprintf(stderr, "usage: see the comment at the top\n"); return 2; }
    const char *mode = argv[1];
    int port = atoi(argv[2]);
    int ws = !strcmp(argv[argc - 1], "ws");
    if (!strcmp(mode, "stream") || !strcmp(mode, "multi")) {
        int n = !strcmp(mode, "multi") ? atoi(argv[3]) : 1;
        uint64_t bytes = strtoull(argv[!strcmp(mode, "multi") ? 4 : 3], NULL, 10);
        reader_t *r = calloc(n, sizeof *r);
        writer_t *w = calloc(n, sizeof *w);
        pthread_t *rt = calloc(n, sizeof *rt), *wt = calloc(n, sizeof *wt);
        for (int i = 0; i < n; i++) {
            int fd = open_stream(port, ws);
            r[i] = (reader_t){ fd, ws, bytes };
            w[i] = (writer_t){ fd, ws, bytes };
        }
        double start = now();
        for (int i = 0; i < n; i++) {
            pthread_create(&rt[i], NULL, read_payload, &r[i]);
            pthread_create(&wt[i], NULL, write_payload, &w[i]);
        }
        for (int i = 0; i < n; i++) { pthread_join(wt[i], NULL); pthread_join(rt[i], NULL); }
        printf("seconds %.4f\n", now() - start);
        return 0;
    }
    if (!strcmp(mode, "rtt")) {
        int count = atoi(argv[3]);
        int fd = open_stream(port, ws);
        double *t = calloc(count, sizeof *t);
        char msg[64];
        memset(msg, 'x', sizeof msg);
        for (int i = 0; i < count; i++) {
            double s = now();
            send_message(fd, ws, msg, sizeof msg);
            reader_t r = { fd, ws, sizeof msg };
            read_payload(&r);
            t[i] = (now() - s) * 1e6;
        }
        qsort(t, count, sizeof *t, cmp);
        printf("p50_us %.1f p99_us %.1f\n", t[count / 2], t[count * 99 / 100]);
        return 0;
    }
    if (!strcmp(mode, "idle")) {
        int n = atoi(argv[3]);
        for (int i = 0; i < n; i++) (void)open_stream(port, ws);
        printf("open %d\n", n);
        fflush(stdout);
        char c;
        while (read(0, &c, 1) > 0) {}
        return 0;
    }
    return 2;
}
