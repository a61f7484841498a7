/*
 * broadcastload: the broadcast benchmark's load generator (scripts/bench-broadcast; not part
 * of wspipe). One thread, epoll, no WebSocket library: cheaper per delivery than the server
 * it measures, and its own CPU is reported so that its limit is known.
 *
 *   broadcastload PORT CLIENTS MESSAGES STALLED_PERCENT
 *
 * Opens CLIENTS connections to 127.0.0.1:PORT from source addresses spread over
 * 127.0.0.2-201 (bind before connect: no ephemeral-port or TIME_WAIT exhaustion), does the
 * opening handshakes by hand (no extension offered), then prints "READY" and counts the
 * data messages each client receives. STALLED_PERCENT of the clients (every n-th one, with
 * a 4 KiB receive buffer) never read after their handshake. The run ends when every reading
 * client has MESSAGES messages, or when nothing arrives for 3 s; then the stalled clients
 * are drained to see how the server ended them. One line:
 *
 *   deliveries D seconds S rate R cpu C readers N complete K stalled T closed1013 X ended E
 *
 * D: messages received by reading clients between the first and the last delivery (S
 * seconds apart, R = D / S), C: this process's user+sys CPU seconds over that time, K:
 * reading clients that got all MESSAGES, X: stalled clients that got a Close 1013, E:
 * stalled clients whose connection ended otherwise (EOF, reset, another code). Stalled
 * clients still open after the 3 s drain count in neither.
 */
#define _GNU_SOURCE
#define LOADGEN_NAME "broadcastload"
#include "loadgen.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { CONNECTING, HANDSHAKE, OPEN, DONE };

struct client {
    int fd, state, stalled;
    uint64_t messages;
    /* the frame being read: header bytes so far, payload bytes left to skip */
    struct frame_head head;
    uint64_t skip;
    int opcode, fin;
    /* a Close frame's first two payload bytes (its code) */
    unsigned char close_code[2];
    int close_got, closed, close_seen;
    char response[1024];
    int response_len;
};

static struct client *clients;
static int count, epoll_fd;
static uint64_t target, deliveries, complete;
static double first_delivery, last_delivery;

/* Counts the frames in n received bytes; a data frame with FIN is one delivery. */
static void consume(struct client *c, const unsigned char *p, size_t n) {
    while (n > 0) {
        if (c->skip > 0) {
            size_t take = c->skip < n ? (size_t)c->skip : n;
            if (c->opcode == 8) {
                for (size_t i = 0; i < take && c->close_got < 2; i++) c->close_code[c->close_got++] = p[i];
            }
            p += take;
            n -= take;
            c->skip -= take;
            if (c->skip > 0) return;
        } else {
            int whole = frame_head_add(&c->head, *p++, &c->skip, &c->opcode, &c->fin);
            n--;
            if (!whole) continue;
            if (c->opcode == 8) c->close_seen = 1;
            if (c->skip > 0) continue;
        }
        /* a frame ended */
        if (c->fin && (c->opcode == 1 || c->opcode == 2 || c->opcode == 0) && !c->close_seen) {
            c->messages++;
            if (!c->stalled) {
                double t = now();
                if (deliveries == 0) first_delivery = t;
                last_delivery = t;
                deliveries++;
                if (c->messages == target) complete++;
            }
        }
    }
}

static void end(struct client *c) {
    if (c->state != DONE) {
        epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->state = DONE;
        c->closed = 1;
    }
}

static unsigned char buf[1 << 18];

/* Reads what is there; 0 once the connection ended. */
static int service(struct client *c) {
    for (;;) {
        ssize_t r = read(c->fd, buf, sizeof buf);
        if (r > 0) {
            if (c->state == HANDSHAKE) {
                size_t keep = (size_t)r < sizeof c->response - 1 - (size_t)c->response_len
                                  ? (size_t)r : sizeof c->response - 1 - (size_t)c->response_len;
                memcpy(c->response + c->response_len, buf, keep);
                c->response_len += (int)keep;
                c->response[c->response_len] = 0;
                char *e = strstr(c->response, "\r\n\r\n");
                if (!e) continue;
                if (strncmp(c->response, "HTTP/1.1 101", 12) != 0) {
                    fprintf(stderr, "broadcastload: handshake refused: %.80s\n", c->response);
                    exit(1);
                }
                c->state = OPEN;
                size_t head = (size_t)(e + 4 - c->response);
                if (head < (size_t)c->response_len) consume(c, (unsigned char *)c->response + head, c->response_len - head);
                continue;
            }
            consume(c, buf, (size_t)r);
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) return 1;
        end(c);
        return 0;
    }
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: broadcastload PORT CLIENTS MESSAGES STALLED_PERCENT\n");
        return 2;
    }
    int port = atoi(argv[1]);
    count = atoi(argv[2]);
    target = strtoull(argv[3], NULL, 10);
    int percent = atoi(argv[4]);
    int every = percent > 0 ? 100 / percent : 0;
    struct rlimit lim;
    getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
    clients = calloc((size_t)count, sizeof *clients);
    epoll_fd = epoll_create1(0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int stalled = 0;
    char request[1024];
    size_t request_length = format_request(request, sizeof request, "/");

    /* Connect and handshake in batches of 100, so the server's backlog never overflows. */
    for (int start = 0; start < count; start += 100) {
        int stop = start + 100 < count ? start + 100 : count;
        for (int i = start; i < stop; i++) {
            struct client *c = &clients[i];
            c->stalled = every > 0 && i % every == every - 1;
            stalled += c->stalled;
            c->fd = socket(AF_INET, SOCK_STREAM, 0);
            if (c->fd < 0) die("socket");
            if (c->stalled) {
                int small = 4096;
                setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
            }
            struct sockaddr_in from = {.sin_family = AF_INET};
            from.sin_addr.s_addr = htonl(0x7F000002u + (uint32_t)(i % 200));
            if (bind(c->fd, (struct sockaddr *)&from, sizeof from) < 0) die("bind");
            if (connect(c->fd, (struct sockaddr *)&to, sizeof to) < 0) die("connect");
            if (write(c->fd, request, request_length) != (ssize_t)request_length) die("write");
            fcntl(c->fd, F_SETFL, O_NONBLOCK);
            c->state = HANDSHAKE;
        }
        for (int i = start; i < stop; i++) {
            struct client *c = &clients[i];
            double deadline = now() + 10;
            while (c->state == HANDSHAKE) {
                service(c);
                if (c->state == DONE) { fprintf(stderr, "broadcastload: client %d closed in its handshake\n", i); exit(1); }
                if (now() > deadline) { fprintf(stderr, "broadcastload: client %d: no handshake in 10 s\n", i); exit(1); }
                if (c->state == HANDSHAKE) usleep(200);
            }
            if (!c->stalled) {
                struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c->fd, &ev);
            }
        }
    }
    int readers = count - stalled;
    printf("READY\n");
    fflush(stdout);

    double cpu_start = 0;
    struct epoll_event events[256];
    double quiet_since = now();
    while (complete < (uint64_t)readers) {
        int n = epoll_wait(epoll_fd, events, 256, 100);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) die("epoll_wait");
        if (n == 0) {
            if (now() - quiet_since > 3) break;
            continue;
        }
        if (deliveries == 0) cpu_start = cpu_seconds();
        for (int i = 0; i < n; i++) service(events[i].data.ptr);
        quiet_since = now();
    }
    double cpu = cpu_seconds() - cpu_start;

    /* The stalled clients: read what the server left them (data, then maybe a Close), all
     * at once, for up to 3 s. */
    int closed1013 = 0, ended = 0, waiting = 0;
    for (int i = 0; i < count; i++) {
        struct client *c = &clients[i];
        if (!c->stalled || c->state == DONE) continue;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c->fd, &ev);
        waiting++;
    }
    double deadline = now() + 3;
    while (waiting > 0 && now() < deadline) {
        int n = epoll_wait(epoll_fd, events, 256, 100);
        for (int i = 0; i < n; i++) {
            struct client *c = events[i].data.ptr;
            if (!c->stalled) { service(c); continue; }
            service(c);
            if (c->state == DONE || (c->close_seen && c->close_got == 2)) {
                if (c->state != DONE) end(c);
                waiting--;
            }
        }
    }
    for (int i = 0; i < count; i++) {
        struct client *c = &clients[i];
        if (!c->stalled) continue;
        if (c->close_seen && c->close_got == 2 && (c->close_code[0] << 8 | c->close_code[1]) == 1013) closed1013++;
        else if (c->closed || c->close_seen) ended++;
    }
    double seconds = last_delivery - first_delivery;
    printf("deliveries %llu seconds %.3f rate %.0f cpu %.3f readers %d complete %llu stalled %d closed1013 %d ended %d\n",
           (unsigned long long)deliveries, seconds, seconds > 0 ? deliveries / seconds : 0, cpu, readers,
           (unsigned long long)complete, stalled, closed1013, ended);
    return 0;
}
