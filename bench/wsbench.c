/*
 * wsbench: a minimal, fast WebSocket server for benchmarks (not part of wspipe).
 *
 * It serves one connection and exits, so each benchmark round gets a fresh process.
 * Written in C so that the server side is never the bottleneck being measured.
 *
 *   wsbench sink   PORT             count messages/bytes received until the client's Close
 *   wsbench source PORT BYTES SIZE  send BYTES in binary messages of SIZE bytes, then Close
 *   wsbench lines  PORT COUNT       send COUNT short text messages, then Close
 *   wsbench echo   PORT             echo every message until the client's Close
 *   wsbench echo-loop PORT          like echo, for one connection after another (startup runs)
 *   wsbench tcpsink PORT            raw TCP (or TLS): read until EOF (reference, no WebSocket)
 *   wsbench tcpsource PORT BYTES    raw TCP: write BYTES then close (reference)
 *   wsbench count                   read stdin to EOF; print "messages <newlines> bytes <b>"
 *
 * PORT 0 picks a free port. The first stdout line is "PORT <n>"; at the end, one line
 * "messages <m> bytes <b>" says what was received (sink, echo) or sent (source, lines).
 * TLS: set WSBENCH_CERT and WSBENCH_KEY to PEM files to serve wss:// (OpenSSL).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "listen.h"

static SSL *tls;
static int fd = -1;

static void die(const char *what) {
    fprintf(stderr, "wsbench: %s: %s\n", what, strerror(errno));
    exit(1);
}

static ssize_t rd(void *buf, size_t n) {
    if (tls) {
        int r = SSL_read(tls, buf, n > INT32_MAX ? INT32_MAX : (int)n);
        if (r > 0) return r;
        int e = SSL_get_error(tls, r);
        return (e == SSL_ERROR_ZERO_RETURN || e == SSL_ERROR_SYSCALL) ? 0 : -1;
    }
    for (;;) {
        ssize_t r = read(fd, buf, n);
        if (r < 0 && errno == EINTR) continue;
        return r;
    }
}

static void wr(const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t w;
        if (tls) {
            int r = SSL_write(tls, p, n > (1 << 30) ? (1 << 30) : (int)n);
            w = r > 0 ? r : -1;
        } else {
            w = write(fd, p, n);
            if (w < 0 && errno == EINTR) continue;
        }
        if (w <= 0) die("write");
        p += w;
        n -= (size_t)w;
    }
}

/* Reads until the end of the HTTP request head; answers 101 with the right Accept.
 * Bytes after the head are kept in `leftover`. */
static char leftover[65536];
static size_t leftover_len;

static void handshake(void) {
    char head[65536];
    size_t len = 0;
    char *end = NULL;
    while (!end) {
        ssize_t r = rd(head + len, sizeof head - 1 - len);
        if (r <= 0) die("handshake read");
        len += (size_t)r;
        head[len] = 0;
        end = strstr(head, "\r\n\r\n");
        if (!end && len >= sizeof head - 1) die("handshake too long");
    }
    end += 4;
    leftover_len = len - (size_t)(end - head);
    memcpy(leftover, end, leftover_len);
    char *key = strcasestr(head, "\nSec-WebSocket-Key:");
    if (!key) die("no key");
    key += 19;
    while (*key == ' ') key++;
    char *eol = strstr(key, "\r\n");
    char buf[256];
    snprintf(buf, sizeof buf, "%.*s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", (int)(eol - key), key);
    unsigned char digest[20];
    SHA1((unsigned char *)buf, strlen(buf), digest);
    char accept[64];
    EVP_EncodeBlock((unsigned char *)accept, digest, 20);
    char reply[512];
    int n = snprintf(reply, sizeof reply,
                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Accept: %s\r\n\r\n", accept);
    wr(reply, (size_t)n);
}

/* Frame reader over a large buffer: calls on_frame for each complete frame header and
 * lets the caller consume payload lazily. For the sink we only count; payload bytes are
 * skipped without unmasking (the data path under test is the client's). */
static unsigned char *rbuf;
static size_t rcap = 4 << 20, rlen, rpos;

static int fill(void) {
    if (rpos > 0 && rpos == rlen) rpos = rlen = 0;
    if (rlen == rcap) {
        memmove(rbuf, rbuf + rpos, rlen - rpos);
        rlen -= rpos;
        rpos = 0;
    }
    ssize_t r = rd(rbuf + rlen, rcap - rlen);
    if (r <= 0) return 0;
    rlen += (size_t)r;
    return 1;
}

static int need(size_t n) {
    while (rlen - rpos < n) {
        if (rpos > 0) {
            memmove(rbuf, rbuf + rpos, rlen - rpos);
            rlen -= rpos;
            rpos = 0;
        }
        if (!fill()) return 0;
    }
    return 1;
}

struct frame { int fin, opcode; uint64_t len; unsigned char mask[4]; int masked; };

static int next_header(struct frame *f) {
    if (!need(2)) return 0;
    unsigned char *p = rbuf + rpos;
    f->fin = p[0] >> 7;
    f->opcode = p[0] & 15;
    f->masked = p[1] >> 7;
    uint64_t len = p[1] & 127;
    size_t hl = 2 + (len == 126 ? 2 : len == 127 ? 8 : 0) + (f->masked ? 4 : 0);
    if (!need(hl)) return 0;
    p = rbuf + rpos;
    if (len == 126) len = (uint64_t)p[2] << 8 | p[3];
    else if (len == 127) { len = 0; for (int i = 0; i < 8; i++) len = len << 8 | p[2 + i]; }
    if (f->masked) memcpy(f->mask, p + hl - 4, 4);
    f->len = len;
    rpos += hl;
    return 1;
}

/* Copies (and unmasks) up to len payload bytes into out (NULL: skip). */
static int payload(struct frame *f, unsigned char *out, uint64_t len) {
    uint64_t done = 0;
    while (done < len) {
        if (rpos == rlen && !fill()) return 0;
        size_t take = rlen - rpos;
        if (take > len - done) take = (size_t)(len - done);
        if (out) {
            for (size_t i = 0; i < take; i++) out[done + i] = rbuf[rpos + i] ^ (f->masked ? f->mask[(done + i) & 3] : 0);
        }
        rpos += take;
        done += take;
    }
    return 1;
}

static void send_frame(int opcode, const void *data, size_t len) {
    unsigned char h[10];
    size_t hl;
    h[0] = 0x80 | (unsigned char)opcode;
    if (len < 126) { h[1] = (unsigned char)len; hl = 2; }
    else if (len < 65536) { h[1] = 126; h[2] = len >> 8; h[3] = len & 255; hl = 4; }
    else { h[1] = 127; for (int i = 0; i < 8; i++) h[2 + i] = (unsigned char)(len >> (56 - 8 * i)); hl = 10; }
    wr(h, hl);
    if (len) wr(data, len);
}

/* After our data: send Close 1000 and wait for the client's Close (or EOF). */
static void close_and_wait(void) {
    unsigned char body[2] = {0x03, 0xE8};
    send_frame(8, body, 2);
    struct frame f;
    while (next_header(&f)) {
        if (!payload(&f, NULL, f.len)) break;
        if (f.opcode == 8) break;
    }
}

static int listen_on(int port) {
    int s = listen_loopback(port);
    if (s < 0) die("listen");
    return s;
}

int main(int argc, char **argv) {
    if (argc < 3 && !(argc == 2 && !strcmp(argv[1], "count"))) {
        fprintf(stderr, "usage: wsbench sink|source|lines|echo|echo-loop|tcpsink|tcpsource PORT [ARGS] | wsbench count\n");
        return 2;
    }
    const char *mode = argv[1];
    if (!strcmp(mode, "count")) {
        size_t cap = 1 << 20;
        unsigned char *buf = malloc(cap);
        unsigned long long total = 0, lines = 0;
        ssize_t r;
        while ((r = read(0, buf, cap)) > 0) {
            total += (unsigned long long)r;
            for (unsigned char *p = buf, *end = buf + r; (p = memchr(p, '\n', (size_t)(end - p))); p++) lines++;
        }
        printf("messages %llu bytes %llu\n", lines, total);
        return 0;
    }
    int s = listen_on(atoi(argv[2]));
    if (!strcmp(mode, "echo-loop")) {
        /* One connection after another, each in a child, until killed. */
        for (;;) {
            int c = accept(s, NULL, NULL);
            if (c < 0) continue;
            pid_t pid = fork();
            if (pid == 0) {
                close(s);
                fd = c;
                mode = "echo";
                break;
            }
            close(c);
            while (waitpid(-1, NULL, WNOHANG) > 0) {}
        }
    }
    if (fd < 0) fd = accept(s, NULL, NULL);
    if (fd < 0) die("accept");
    close(s);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    rbuf = malloc(rcap);

    const char *cert = getenv("WSBENCH_CERT"), *keyfile = getenv("WSBENCH_KEY");
    if (cert && keyfile) {
        SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
        if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 || SSL_CTX_use_PrivateKey_file(ctx, keyfile, SSL_FILETYPE_PEM) != 1) {
            ERR_print_errors_fp(stderr);
            return 1;
        }
        tls = SSL_new(ctx);
        SSL_set_fd(tls, fd);
        if (SSL_accept(tls) != 1) {
            ERR_print_errors_fp(stderr);
            return 1;
        }
    }

    if (!strcmp(mode, "tcpsink")) {
        uint64_t total = 0;
        ssize_t r;
        while ((r = rd(rbuf, rcap)) > 0) total += (uint64_t)r;
        printf("messages 0 bytes %llu\n", (unsigned long long)total);
        return 0;
    }
    if (!strcmp(mode, "tcpsource")) {
        uint64_t left = strtoull(argv[3], NULL, 10);
        memset(rbuf, 'x', rcap);
        while (left > 0) {
            size_t n = left < rcap ? (size_t)left : rcap;
            wr(rbuf, n);
            left -= n;
        }
        printf("messages 0 bytes %s\n", argv[3]);
        return 0;
    }

    handshake();
    memcpy(rbuf, leftover, leftover_len);
    rlen = leftover_len;

    uint64_t messages = 0, bytes = 0;
    if (!strcmp(mode, "sink")) {
        struct frame f;
        while (next_header(&f)) {
            if (f.opcode == 8) {
                unsigned char body[125];
                payload(&f, body, f.len);
                send_frame(8, body, f.len >= 2 ? 2 : 0);
                break;
            }
            if (f.opcode == 9) {
                unsigned char body[125];
                payload(&f, body, f.len);
                send_frame(10, body, f.len);
                continue;
            }
            if (f.opcode == 10) { payload(&f, NULL, f.len); continue; }
            bytes += f.len;
            if (f.fin) messages++;
            if (!payload(&f, NULL, f.len)) break;
        }
    } else if (!strcmp(mode, "echo")) {
        struct frame f;
        unsigned char *msg = malloc(64 << 20);
        size_t mlen = 0;
        int type = 1;
        while (next_header(&f)) {
            if (f.len > (64 << 20) - mlen) die("message too big");
            if (f.opcode >= 8) {
                unsigned char body[125];
                payload(&f, body, f.len);
                if (f.opcode == 8) { send_frame(8, body, f.len >= 2 ? 2 : 0); break; }
                if (f.opcode == 9) send_frame(10, body, f.len);
                continue;
            }
            if (f.opcode != 0) type = f.opcode;
            if (!payload(&f, msg + mlen, f.len)) break;
            mlen += f.len;
            if (f.fin) {
                send_frame(type, msg, mlen);
                messages++;
                bytes += mlen;
                mlen = 0;
            }
        }
    } else if (!strcmp(mode, "source")) {
        uint64_t total = strtoull(argv[3], NULL, 10);
        size_t size = (size_t)strtoull(argv[4], NULL, 10);
        size_t per = (4u << 20) / (size + 10);
        if (per == 0) per = 1;
        size_t frame_len = size + (size < 126 ? 2 : size < 65536 ? 4 : 10);
        unsigned char *block = malloc(per * frame_len);
        for (size_t i = 0; i < size; i++) block[(size < 126 ? 2 : size < 65536 ? 4 : 10) + i] = (unsigned char)(i * 131 + 7);
        /* Build one frame, then repeat it `per` times. */
        unsigned char *p = block;
        p[0] = 0x82;
        if (size < 126) { p[1] = (unsigned char)size; }
        else if (size < 65536) { p[1] = 126; p[2] = size >> 8; p[3] = size & 255; }
        else { p[1] = 127; for (int i = 0; i < 8; i++) p[2 + i] = (unsigned char)((uint64_t)size >> (56 - 8 * i)); }
        for (size_t i = 1; i < per; i++) memcpy(block + i * frame_len, block, frame_len);
        uint64_t count = total / size;
        while (messages < count) {
            size_t n = count - messages < per ? (size_t)(count - messages) : per;
            wr(block, n * frame_len);
            messages += n;
        }
        bytes = messages * size;
        close_and_wait();
    } else if (!strcmp(mode, "lines")) {
        uint64_t count = strtoull(argv[3], NULL, 10);
        size_t per = 65536;
        /* "message 0000000" style: 15-byte text messages, 17-byte frames. */
        unsigned char *block = malloc(per * 17);
        while (messages < count) {
            size_t n = count - messages < per ? (size_t)(count - messages) : per;
            for (size_t i = 0; i < n; i++) {
                unsigned char *f = block + i * 17;
                f[0] = 0x81;
                f[1] = 15;
                snprintf((char *)f + 2, 16, "message %07llu", (unsigned long long)((messages + i) % 10000000));
            }
            wr(block, n * 17);
            messages += n;
        }
        bytes = messages * 15;
        close_and_wait();
    } else {
        fprintf(stderr, "wsbench: unknown mode %s\n", mode);
        return 2;
    }
    printf("messages %llu bytes %llu\n", (unsigned long long)messages, (unsigned long long)bytes);
    if (tls) SSL_shutdown(tls);
    return 0;
}
