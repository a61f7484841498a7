#define _GNU_SOURCE
#include "CWSPipeShims.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

int wsp_getrandom(void *buffer, size_t length) {
    unsigned char *p = buffer;
    while (length > 0) {
        ssize_t n = getrandom(p, length, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += n;
        length -= (size_t)n;
    }
    return 0;
}

int wsp_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

void wsp_eventfd_signal(int fd) {
    int saved = errno;
    unsigned long long one = 1;
    ssize_t r = write(fd, &one, sizeof one);
    (void)r;
    errno = saved;
}

unsigned long long wsp_eventfd_drain(int fd) {
    unsigned long long value = 0;
    if (read(fd, &value, sizeof value) != (ssize_t)sizeof value) return 0;
    return value;
}

int wsp_get_fl(int fd) { return fcntl(fd, F_GETFL); }

int wsp_signal(int signum, void (*handler)(int)) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;
    return sigaction(signum, &action, NULL);
}

void wsp_ignore_sigpipe(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_IGN;
    sigemptyset(&action.sa_mask);
    sigaction(SIGPIPE, &action, NULL);
}

int wsp_fd_kind(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return WSP_FD_CLOSED;
    if (S_ISREG(st.st_mode)) return WSP_FD_REGULAR;
    if (S_ISFIFO(st.st_mode)) return WSP_FD_PIPE;
    if (S_ISSOCK(st.st_mode)) return WSP_FD_SOCKET;
    if (isatty(fd)) return WSP_FD_TERMINAL;
    return WSP_FD_OTHER;
}

ssize_t wsp_readv_nowait(int fd, const struct iovec *vectors, int count) {
    return preadv2(fd, vectors, count, -1, RWF_NOWAIT);
}

ssize_t wsp_writev_nowait(int fd, const struct iovec *vectors, int count) {
    return pwritev2(fd, vectors, count, -1, RWF_NOWAIT);
}

int wsp_accept4(int fd, void *address, unsigned int *length) {
    return accept4(fd, address, length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int wsp_set_nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL);
    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}
