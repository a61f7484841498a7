/*
 * churn: connection churn load for an exec server (wspipe --exec, websocketd), not part
 * of wspipe. Each of THREADS clients loops for SECONDS: connect, opening handshake, send
 * one text message, wait for the first message back (the child's echo), send Close, wait
 * for the server's Close or its TCP close (websocketd sends no Close), close.
 *
 *   churn PORT THREADS SECONDS      prints "connections <n> seconds <s> rate <n/s> failed <f>"
 *
 * Blocking sockets and one thread per client: cheaper than the servers it loads (each
 * connection costs them a fork/exec). Source addresses are spread over 127.0.0.2-201 so
 * TIME_WAIT does not exhaust ports.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int port;
static double seconds;
static atomic_long done, failed;
static double started;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Reads until `want` bytes of frames after the head are there; returns bytes held, -1 on failure. */
static int read_some(int fd, char *buffer, int held, int capacity) {
    ssize_t n = recv(fd, buffer + held, capacity - held, 0);
    if (n <= 0) return -1;
    return held + (int)n;
}

static int one_connection(int source) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct timeval timeout = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in local = {.sin_family = AF_INET, .sin_port = 0};
    local.sin_addr.s_addr = htonl(0x7F000002 + (uint32_t)(source % 200));
    bind(fd, (struct sockaddr *)&local, sizeof local);
    struct sockaddr_in remote = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    remote.sin_addr.s_addr = htonl(0x7F000001);
    if (connect(fd, (struct sockaddr *)&remote, sizeof remote) != 0) { close(fd); return -1; }
    char request[512];
    int length = snprintf(request, sizeof request,
                          "GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", port);
    /* "hello", masked with key 0 (a valid mask): the payload is sent as is. */
    static const char hello[] = {(char)0x81, (char)0x85, 0, 0, 0, 0, 'h', 'e', 'l', 'l', 'o'};
    static const char close_frame[] = {(char)0x88, (char)0x82, 0, 0, 0, 0, 0x03, (char)0xE8};
    if (send(fd, request, length, MSG_NOSIGNAL) != length) { close(fd); return -1; }
    char buffer[8192];
    int held = 0;
    char *body = NULL;
    while (!body) {
        if ((held = read_some(fd, buffer, held, sizeof buffer - 1)) < 0) { close(fd); return -1; }
        buffer[held] = 0;
        body = strstr(buffer, "\r\n\r\n");
    }
    if (strncmp(buffer, "HTTP/1.1 101", 12) != 0) { close(fd); return -1; }
    body += 4;
    if (send(fd, hello, sizeof hello, MSG_NOSIGNAL) != (ssize_t)sizeof hello) { close(fd); return -1; }
    /* The first message: a whole frame (header and payload) after the head. */
    for (;;) {
        int after = held - (int)(body - buffer);
        if (after >= 2) {
            int payload = buffer[body - buffer + 1] & 0x7F;
            int header = payload == 126 ? 4 : 2;
            if (payload == 126 && after >= 4) payload = ((unsigned char)body[2] << 8) | (unsigned char)body[3];
            if (payload < 126 || after >= 4) { if (after >= header + payload) break; }
        }
        if (held >= (int)sizeof buffer - 1 || (held = read_some(fd, buffer, held, sizeof buffer - 1)) < 0) { close(fd); return -1; }
    }
    send(fd, close_frame, sizeof close_frame, MSG_NOSIGNAL);
    /* The server's Close or its TCP close, whichever comes. */
    for (;;) {
        ssize_t n = recv(fd, buffer, sizeof buffer, 0);
        if (n <= 0) break;
        if (memchr(buffer, 0x88, (size_t)n)) break;
    }
    close(fd);
    return 0;
}

static void *client(void *argument) {
    long id = (long)argument;
    int source = (int)id * 50;
    while (now() - started < seconds) {
        if (one_connection(source++) == 0) atomic_fetch_add(&done, 1);
        else atomic_fetch_add(&failed, 1);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: churn PORT THREADS SECONDS\n");
        return 2;
    }
    port = atoi(argv[1]);
    int threads = atoi(argv[2]);
    seconds = atof(argv[3]);
    pthread_t ids[64];
    if (threads < 1 || threads > 64) return 2;
    started = now();
    for (long i = 0; i < threads; i++) pthread_create(&ids[i], NULL, client, (void *)i);
    for (int i = 0; i < threads; i++) pthread_join(ids[i], NULL);
    double took = now() - started;
    printf("connections %ld seconds %.2f rate %.0f failed %ld\n", atomic_load(&done), took, atomic_load(&done) / took,
           atomic_load(&failed));
    return 0;
}
