/*
 * echoload: the echo and idle load generator of scripts/bench-server (not part of wspipe).
 * One thread, epoll, no WebSocket library, so it costs less per message than the servers it
 * loads; its own CPU is reported so that its limit is known.
 *
 *   echoload echo PORT CONNECTIONS SIZE WINDOW SECONDS
 *   echoload idle PORT CONNECTIONS [PATH]
 *
 * Both open CONNECTIONS connections to 127.0.0.1:PORT from source addresses spread over
 * 127.0.0.2-201 (bind before connect: 200 x the ephemeral range, no port exhaustion), do the
 * opening handshakes by hand (no extension offered; the path is /, or PATH) in batches of 100 so the server's
 * backlog never overflows.
 *
 * echo: prints "READY" once every handshake is done, then keeps WINDOW messages of SIZE
 * bytes in flight on each connection for SECONDS: masked text frames as a browser sends
 * them (a random key per connection), a new one written for each echo that comes back (the
 * replies of one read answered by one write). Then it waits up to 2 s for the last replies
 * and prints one line:
 *
 *   messages M frames F seconds S rate R p50_us A p99_us B cpu C
 *
 * M: whole messages echoed (a data frame with FIN ends one), F: the frames they came in
 * (F = M: one frame per message), S: seconds from the first write to the last reply,
 * R = M / S, A and B: round-trip percentiles from a message's write to its echo's last
 * byte, C: this process's user+sys CPU seconds over the run.
 *
 * idle: prints "open N" once N connections are open, waits for a line (or end of input) on
 * stdin, and exits, closing them.
 */
#define _GNU_SOURCE
#define LOADGEN_NAME "echoload"
#include "loadgen.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct client {
    int fd;
    /* the frame being read: header bytes so far, payload bytes left to skip */
    struct frame_head head;
    uint64_t skip;
    int fin, opcode;
    /* send times of the messages in flight, oldest first (a ring of WINDOW) */
    double *sent;
    int first, inflight;
};

static struct client *clients;
static int count, window, epoll_fd;
static size_t size;
static uint64_t messages, frames;
/* round trips in microseconds: one bucket per microsecond up to 1 s, then one overflow */
enum { BUCKETS = 1000000 };
static uint32_t *histogram;

static unsigned char buf[1 << 18];

/* Opens the connections and does their handshakes; bytes that followed a 101 are an error
 * (nothing was sent yet). */
static void open_all(int port, const char *path) {
    char request[1024];
    size_t request_length = format_request(request, sizeof request, path);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int start = 0; start < count; start += 100) {
        int stop = start + 100 < count ? start + 100 : count;
        for (int i = start; i < stop; i++) {
            struct client *c = &clients[i];
            c->fd = socket(AF_INET, SOCK_STREAM, 0);
            if (c->fd < 0) die("socket");
            struct sockaddr_in from = {.sin_family = AF_INET};
            from.sin_addr.s_addr = htonl(0x7F000002u + (uint32_t)(i % 200));
            if (bind(c->fd, (struct sockaddr *)&from, sizeof from) < 0) die("bind");
            if (connect(c->fd, (struct sockaddr *)&to, sizeof to) < 0) die("connect");
            if (write(c->fd, request, request_length) != (ssize_t)request_length) die("write");
        }
        for (int i = start; i < stop; i++) {
            char response[1024];
            size_t got = 0;
            while (!memmem(response, got, "\r\n\r\n", 4)) {
                ssize_t r = read(clients[i].fd, response + got, sizeof response - got);
                if (r <= 0 || got + (size_t)r >= sizeof response) {
                    fprintf(stderr, "echoload: connection %d ended in its handshake\n", i);
                    exit(1);
                }
                got += (size_t)r;
            }
            if (strncmp(response, "HTTP/1.1 101", 12) != 0) {
                fprintf(stderr, "echoload: handshake refused: %.80s\n", response);
                exit(1);
            }
            char *after = (char *)memmem(response, got, "\r\n\r\n", 4) + 4;
            if (after != response + got) {
                /* a Close (a program that could not start...) says why in its reason */
                fprintf(stderr, "echoload: %d bytes after the 101 of connection %d:", (int)(response + got - after), i);
                for (char *b = after; b < response + got && b < after + 64; b++)
                    fprintf(stderr, *b >= 32 && *b < 127 ? " %c" : " %02x", (unsigned char)*b);
                fprintf(stderr, "\n");
                exit(1);
            }
        }
    }
}

/* The frame every write of a connection repeats: SIZE bytes of text masked with its key. */
static unsigned char *make_frame(size_t *length) {
    size_t header = 2 + (size < 126 ? 0 : size < 65536 ? 2 : 8) + 4;
    unsigned char *f = malloc(header + size);
    f[0] = 0x81;
    if (size < 126) f[1] = 0x80 | (unsigned char)size;
    else if (size < 65536) { f[1] = 0x80 | 126; f[2] = (unsigned char)(size >> 8); f[3] = (unsigned char)size; }
    else { f[1] = 0x80 | 127; for (int i = 0; i < 8; i++) f[2 + i] = (unsigned char)(size >> (56 - 8 * i)); }
    unsigned char *key = f + header - 4;
    for (int i = 0; i < 4; i++) key[i] = (unsigned char)(rand() | 1);
    for (size_t i = 0; i < size; i++) f[header + i] = (unsigned char)('a' + i % 26) ^ key[i % 4];
    *length = header + size;
    return f;
}

static unsigned char **frame_of;
static size_t frame_length;
static unsigned char *batch;

/* Writes n more messages on c, all in one write. */
static void send_messages(struct client *c, int n) {
    unsigned char *frame = frame_of[c - clients];
    for (int i = 0; i < n; i++) memcpy(batch + (size_t)i * frame_length, frame, frame_length);
    size_t total = (size_t)n * frame_length, done = 0;
    double t = now();
    while (done < total) {
        ssize_t w = write(c->fd, batch + done, total - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) {
            /* the server is not reading: wait for room (rare: WINDOW x SIZE is small) */
            usleep(50);
            continue;
        }
        if (w <= 0) die("write");
        done += (size_t)w;
    }
    for (int i = 0; i < n; i++) {
        c->sent[(c->first + c->inflight) % window] = t;
        c->inflight++;
    }
}

/* Counts the frames of n received bytes; returns the messages that ended. */
static int consume(struct client *c, const unsigned char *p, size_t n, double t) {
    int ended = 0;
    while (n > 0) {
        if (c->skip > 0) {
            size_t take = c->skip < n ? (size_t)c->skip : n;
            p += take;
            n -= take;
            c->skip -= take;
            if (c->skip > 0) return ended;
        } else {
            int whole = frame_head_add(&c->head, *p++, &c->skip, &c->opcode, &c->fin);
            n--;
            if (!whole) continue;
            if (c->opcode == 8) { fprintf(stderr, "echoload: the server closed a connection\n"); exit(1); }
            if (c->skip > 0) continue;
        }
        /* a frame ended */
        if (c->opcode >= 8) continue;
        frames++;
        if (!c->fin) continue;
        if (c->inflight == 0) { fprintf(stderr, "echoload: an echo of nothing sent\n"); exit(1); }
        double rtt = t - c->sent[c->first];
        c->first = (c->first + 1) % window;
        c->inflight--;
        uint64_t us = (uint64_t)(rtt * 1e6);
        histogram[us < BUCKETS ? us : BUCKETS]++;
        messages++;
        ended++;
    }
    return ended;
}

static double percentile(double q) {
    uint64_t rank = (uint64_t)(messages * q), seen = 0;
    for (int i = 0; i <= BUCKETS; i++) {
        seen += histogram[i];
        if (seen > rank) return i;
    }
    return BUCKETS;
}

static int echo(double seconds) {
    histogram = calloc(BUCKETS + 1, sizeof *histogram);
    frame_of = calloc((size_t)count, sizeof *frame_of);
    for (int i = 0; i < count; i++) frame_of[i] = make_frame(&frame_length);
    batch = malloc(frame_length * (size_t)window);
    for (int i = 0; i < count; i++) {
        struct client *c = &clients[i];
        c->sent = calloc((size_t)window, sizeof *c->sent);
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fcntl(c->fd, F_SETFL, O_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c->fd, &ev) < 0) die("epoll_ctl");
    }
    printf("READY\n");
    fflush(stdout);
    double cpu_start = cpu_seconds(), start = now(), stop = start + seconds, last = start;
    for (int i = 0; i < count; i++) send_messages(&clients[i], window);
    int outstanding = count * window;
    struct epoll_event events[256];
    for (;;) {
        double t = now();
        if (t >= stop + 2 || (t >= stop && outstanding == 0)) break;
        int n = epoll_wait(epoll_fd, events, 256, 100);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) die("epoll_wait");
        for (int e = 0; e < n; e++) {
            struct client *c = events[e].data.ptr;
            for (;;) {
                ssize_t r = read(c->fd, buf, sizeof buf);
                if (r < 0 && errno == EINTR) continue;
                if (r < 0 && errno == EAGAIN) break;
                if (r <= 0) { fprintf(stderr, "echoload: the server ended a connection\n"); exit(1); }
                last = now();
                int ended = consume(c, buf, (size_t)r, last);
                outstanding -= ended;
                if (ended > 0 && last < stop) {
                    send_messages(c, ended);
                    outstanding += ended;
                }
            }
        }
    }
    double cpu = cpu_seconds() - cpu_start, elapsed = last - start;
    printf("messages %llu frames %llu seconds %.3f rate %.0f p50_us %.0f p99_us %.0f cpu %.3f\n",
           (unsigned long long)messages, (unsigned long long)frames, elapsed, elapsed > 0 ? messages / elapsed : 0,
           percentile(0.5), percentile(0.99), cpu);
    fflush(stdout);
    return outstanding == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    int is_echo = argc == 7 && strcmp(argv[1], "echo") == 0;
    int is_idle = (argc == 4 || argc == 5) && strcmp(argv[1], "idle") == 0;
    if (!is_echo && !is_idle) {
        fprintf(stderr, "usage: echoload echo PORT CONNECTIONS SIZE WINDOW SECONDS\n"
                        "       echoload idle PORT CONNECTIONS [PATH]\n");
        return 2;
    }
    int port = atoi(argv[2]);
    count = atoi(argv[3]);
    struct rlimit lim;
    getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
    if ((rlim_t)count + 16 > lim.rlim_cur) {
        fprintf(stderr, "echoload: %d connections need more descriptors than the limit of %llu: run several\n",
                count, (unsigned long long)lim.rlim_cur);
        return 2;
    }
    srand((unsigned)getpid());
    clients = calloc((size_t)count, sizeof *clients);
    epoll_fd = epoll_create1(0);
    if (is_echo) {
        size = strtoull(argv[4], NULL, 10);
        window = atoi(argv[5]);
        if (window < 1 || count < 1) { fprintf(stderr, "echoload: CONNECTIONS and WINDOW must be at least 1\n"); return 2; }
        open_all(port, "/");
        return echo(atof(argv[6]));
    }
    open_all(port, argc == 5 ? argv[4] : "/");
    printf("open %d\n", count);
    fflush(stdout);
    while (fgets((char *)buf, sizeof buf, stdin) == NULL && ferror(stdin) && errno == EINTR) {}
    return 0;
}
