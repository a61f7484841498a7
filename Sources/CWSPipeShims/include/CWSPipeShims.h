#ifndef WSPIPE_SHIMS_H
#define WSPIPE_SHIMS_H
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/epoll.h>

/// Fills `buffer` with `length` bytes from the kernel CSPRNG (getrandom(2), blocking
/// until the pool is initialised). Returns 0, or -1 with errno set.
int wsp_getrandom(void *buffer, size_t length);

/// A non-blocking, close-on-exec eventfd(2) counter, or -1 with errno set.
int wsp_eventfd(void);

/// Adds 1 to an eventfd counter; async-signal-safe.
void wsp_eventfd_signal(int fd);

/// Resets an eventfd counter to 0 (reads it); returns the value read, 0 when it was 0.
unsigned long long wsp_eventfd_drain(int fd);

/// fcntl(F_GETFL): fcntl is variadic, which Swift cannot call.
int wsp_get_fl(int fd);

/// Installs `handler` for `signum` without SA_RESTART (so blocking calls see EINTR).
int wsp_signal(int signum, void (*handler)(int));

/// Ignores SIGPIPE so writes to a closed pipe or socket fail with EPIPE instead.
void wsp_ignore_sigpipe(void);

/// What a standard descriptor is, from fstat(2): decides how it is read and written
/// without blocking and without touching its (shared) O_NONBLOCK flag.
enum { WSP_FD_CLOSED = 0, WSP_FD_REGULAR = 1, WSP_FD_PIPE = 2, WSP_FD_SOCKET = 3, WSP_FD_TERMINAL = 4, WSP_FD_OTHER = 5 };
int wsp_fd_kind(int fd);

/// readv/writev with RWF_NOWAIT (Linux 4.14+ for sockets and files, pipes since 5.x):
/// EAGAIN instead of blocking, for this call only. -1 with errno EOPNOTSUPP where the
/// kernel or file does not support it.
ssize_t wsp_readv_nowait(int fd, const struct iovec *vectors, int count);
ssize_t wsp_writev_nowait(int fd, const struct iovec *vectors, int count);

/// Sets O_NONBLOCK on a descriptor the process made itself (a socketpair end). Returns 0 or -1.
int wsp_set_nonblocking(int fd);
/// accept4(2) with SOCK_NONBLOCK | SOCK_CLOEXEC (a GNU extension Swift's Glibc lacks).
int wsp_accept4(int fd, void *address, unsigned int *length);
#endif
