/*
 * rtt: round-trip latency of a stdio bridge. Runs CMD (through /bin/sh) with pipes, writes
 * a 32-byte line plus "\n" (one 32-byte text message), waits for the same line to come
 * back, N times, and prints "p50 <us> p99 <us> n <N>". The first 100 round trips are warm-up.
 *
 *   rtt N CMD
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: rtt N CMD\n"); return 2; }
    int n = atoi(argv[1]);
    int in[2], out[2];
    if (pipe(in) || pipe(out)) return 1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0); dup2(out[1], 1);
        close(in[1]); close(out[0]);
        execl("/bin/sh", "sh", "-c", argv[2], (char *)NULL);
        _exit(127);
    }
    close(in[0]); close(out[1]);
    const char msg[] = "0123456789abcdef0123456789abcdef\n";  /* 32-byte message + newline */
    double *t = malloc(sizeof(double) * (size_t)(n + 100));
    char buf[4096];
    for (int i = 0; i < n + 100; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        if (write(in[1], msg, sizeof msg - 1) != (ssize_t)(sizeof msg - 1)) return 1;
        size_t got = 0;
        while (got < sizeof msg - 1) {
            ssize_t r = read(out[0], buf + got, sizeof buf - got);
            if (r <= 0) { fprintf(stderr, "rtt: reply missing at %d\n", i); return 1; }
            got += (size_t)r;
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (memcmp(buf, msg, sizeof msg - 1) != 0) { fprintf(stderr, "rtt: wrong reply at %d\n", i); return 1; }
        t[i] = (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
    }
    close(in[1]);
    int status = 0;
    waitpid(pid, &status, 0);
    qsort(t + 100, (size_t)n, sizeof(double), cmp);
    printf("p50 %.1f p99 %.1f n %d\n", t[100 + n / 2], t[100 + (n * 99) / 100], n);
    return 0;
}
