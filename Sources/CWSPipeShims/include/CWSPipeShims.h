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

/// Ends the process by `signum` (SIGINT, SIGTERM, SIGHUP), as a program that handles such a
/// signal must once it has cleaned up, so that its parent sees it die of the signal (a shell
/// stops its loop, systemd counts a stop as clean): the default disposition back, the
/// signal unblocked on this thread, raised. `_exit(128 + signum)` only if that returns.
/// Async-signal-safe: also called from the signal handler.
__attribute__((noreturn)) void wsp_die_of_signal(int signum);

/// The console's terminal (issue 36): `wsp_terminal_raw` saves the modes of `fd` (once)
/// and enters the console's raw mode (no ICANON, ECHO, ISIG, IEXTEN, IXON, ICRNL),
/// bracketed paste on (written to stdout, the same terminal). `wsp_terminal_restore` undoes it: bracketed paste off, the cursor
/// shown, colours reset, the saved modes back and typed input flushed (nothing is left
/// for the shell). Async-signal-safe and idempotent: `wsp_die_of_signal` calls it before
/// the process dies, so every exit path restores the terminal. `wsp_terminal_editing`
/// says the cursor is in the console's edit rows (the restore then ends the line first).
int wsp_terminal_raw(int fd);
void wsp_terminal_restore(void);
void wsp_terminal_editing(int editing);
/// Columns of the terminal on `fd` (TIOCGWINSZ), 0 when unknown.
int wsp_terminal_columns(int fd);
/// Rows of the terminal on `fd` (TIOCGWINSZ), 0 when unknown.
int wsp_terminal_rows(int fd);
/// Whether `fd` is a terminal whose foreground process group is ours.
int wsp_terminal_in_foreground(int fd);
/// The console's SIGTSTP and SIGCONT handlers: SIGTSTP (Ctrl-Z, or `kill -TSTP`) restores
/// the terminal, then stops the process; SIGCONT (after it, or after SIGSTOP) notes that
/// raw mode is to come back and wakes the loop through `wake_fd`
/// (`wsp_terminal_take_continued`).
void wsp_terminal_watch_stops(int wake_fd);
/// Whether the process was continued since the last call.
int wsp_terminal_take_continued(void);


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

/// openat2(2) (Linux 5.6; glibc 2.36 has no wrapper) resolving `path` beneath `dirfd`:
/// RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS, with `flags` (O_CLOEXEC is
/// added). Returns the descriptor or -1 with errno (ENOSYS where the kernel lacks it, EXDEV
/// for a path that would leave dirfd, ELOOP for a symbolic link).
int wsp_openat2_beneath(int dirfd, const char *path, int flags);
/// O_PATH (a GNU flag Swift's Glibc does not export): the same value on x86_64 and aarch64.
enum { WSP_O_PATH = 010000000 };

// Child processes (WebSocketExec). No SIGCHLD handler anywhere: a child's exit is seen
// through its pidfd (or polled with waitid on kernels without pidfd_open).

/// Spawns `path` (argv, envp NULL-terminated) with `in`, `out`, `err` as its descriptors 0,
/// 1, 2 and nothing else open (closefrom 3), in a new process group led by itself, with
/// every signal at its default disposition and none blocked. Returns 0 and sets *pid, or
/// the errno value (ENOENT, EACCES, EAGAIN...).
/// `exe` >= 0 (an O_PATH or read descriptor of the program, --dir): it becomes the child's
/// descriptor 3 and /proc/self/fd/3 is executed instead of `path`, so the file that runs is
/// the one opened (a #! script's interpreter then opens /proc/self/fd/3 too).
int wsp_spawn(const char *path, char *const argv[], char *const envp[], int in, int out, int err, int exe, pid_t *pid);

/* posix_spawn on helper threads (spawner.c). wsp_spawner_submit copies the strings and, once
 * spawned or not, closes in/out/err (the child's ends); wsp_spawner_fd is an eventfd that
 * is signalled when results wait for wsp_spawner_take (1: one taken, 0: none; error is
 * posix_spawn's result, pid valid when it is 0). */
typedef struct wsp_spawner wsp_spawner;
wsp_spawner *wsp_spawner_new(int threads);
int wsp_spawner_fd(const wsp_spawner *s);
/* exe: as wsp_spawn's (-1: none), closed here with the child's ends. */
int wsp_spawner_submit(wsp_spawner *s, unsigned long long id, const char *path, char *const argv[], char *const envp[],
                       int in, int out, int err, int exe);
int wsp_spawner_take(wsp_spawner *s, unsigned long long *id, pid_t *pid, int *error);
void wsp_spawner_free(wsp_spawner *s);

/// pidfd_open(2) (Linux 5.3+): a close-on-exec descriptor that becomes readable when `pid`
/// exits. -1 with errno (ENOSYS on older kernels).
int wsp_pidfd_open(pid_t pid);

/// Whether `pid` (our child) has exited, without reaping it (waitid WNOWAIT): 1 with
/// *exited_code (>= 0) or *signal_number (> 0) set, 0 while it runs, -1 with errno.
int wsp_child_peek(pid_t pid, int *exited_code, int *signal_number);

/// Reaps `pid` (our child, known to have exited). 0, or -1 with errno.
int wsp_child_reap(pid_t pid);

/// prctl(PR_SET_CHILD_SUBREAPER): orphaned descendants become our children (not init's), so
/// they can be reaped here. 0, or -1 with errno.
int wsp_become_subreaper(void);

/// Reaps one exited child of ours in process group `group` (WNOHANG): 1 if one was reaped,
/// 0 if none has exited, -1 with errno ECHILD when we have no child in the group.
int wsp_reap_group_member(pid_t group);

/// writev(2) to a pipe without SIGPIPE when the reader is gone (EPIPE instead), whatever
/// the process's SIGPIPE disposition: the signal is blocked on this thread for the call and
/// a SIGPIPE it raised is consumed.
ssize_t wsp_writev_nosigpipe(int fd, const struct iovec *vectors, int count);

/// pipe2(O_CLOEXEC); then O_NONBLOCK on the end at `nonblocking_index` (0: read end, 1:
/// write end) only: the child's end stays blocking. 0, or -1 with errno.
int wsp_child_pipe(int fds[2], int nonblocking_index);

/// malloc_trim(0): gives malloc's free pages back to the system (glibc's malloc.h, which the
/// Glibc module does not export). 1 if memory was released.
int wsp_malloc_trim(void);
/// Frees a `bytes` allocation that glibc's malloc serves with mmap (any over its threshold,
/// 128 KiB at start): glibc then raises its mmap threshold to `bytes` and its trim
/// threshold to twice that (its documented dynamic adjustment, as after any such free), so
/// a heap that shrinks by less than that keeps its pages instead of giving them back and
/// faulting them in again at the next allocations.
void wsp_raise_malloc_thresholds(size_t bytes);
/// POSIX extended regular expressions (glibc regcomp/regexec) for --expect and --until,
/// always in the C locale whatever the process's (bytes, and glibc's fast DFA: in a UTF-8
/// locale its matcher is up to 5,000 times slower on some patterns). REG_NOSUB.
typedef struct wsp_regex wsp_regex;
/// Compiles `pattern` (NUL-terminated). NULL on failure, with regerror's text in `error`
/// (always NUL-terminated, cut to `capacity`).
wsp_regex *wsp_regex_compile(const char *pattern, char *error, size_t capacity);
/// Whether the compiled pattern matches `text[0..<length]`, which may hold NUL bytes
/// (REG_STARTEND): 1 yes, 0 no, -1 when regexec failed (out of memory).
int wsp_regex_matches(const wsp_regex *regex, const void *text, size_t length);
void wsp_regex_free(wsp_regex *regex);
#endif
