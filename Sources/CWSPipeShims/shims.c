#define _GNU_SOURCE
#include "CWSPipeShims.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <pthread.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <linux/openat2.h>

#ifndef SYS_openat2
#define SYS_openat2 437  /* the same number on x86_64 and aarch64 */
#endif

int wsp_openat2_beneath(int dirfd, const char *path, int flags) {
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = (unsigned long long)(flags | O_CLOEXEC);
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS;
    long fd;
    do fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how); while (fd < 0 && errno == EINTR);
    return (int)fd;
}

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

/// `signum` with its default action, on this thread: the disposition back to SIG_DFL, the
/// signal unblocked (blocked here while its handler runs, or by the thread's mask), raised.
static void wsp_raise_default(int signum) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    sigaction(signum, &action, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signum);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    raise(signum);
}

void wsp_die_of_signal(int signum) {
    wsp_terminal_restore();
    wsp_raise_default(signum);  // the default action ends the process
    _exit(128 + signum);
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

static int spawn_with(const char *path, char *const argv[], char *const envp[], int in, int out, int err, int exe, pid_t *pid);

int wsp_spawn(const char *path, char *const argv[], char *const envp[], int in, int out, int err, int exe, pid_t *pid) {
    /* dup2(3, 3) would keep close-on-exec with a glibc older than 2.29: move it off 3. */
    int moved = -1;
    if (exe == 3) {
        if ((moved = fcntl(exe, F_DUPFD_CLOEXEC, 4)) < 0) return errno;
        exe = moved;
    }
    int spawned = spawn_with(path, argv, envp, in, out, err, exe, pid);
    if (moved >= 0) close(moved);
    return spawned;
}

static int spawn_with(const char *path, char *const argv[], char *const envp[], int in, int out, int err, int exe, pid_t *pid) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    int result = posix_spawn_file_actions_init(&actions);
    if (result != 0) return result;
    result = posix_spawnattr_init(&attributes);
    if (result != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return result;
    }
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    // A new group led by the child (pgid 0 = its pid): the whole group can be signalled.
    // Default dispositions: the parent ignores SIGPIPE, which the child must not inherit.
    if ((result = posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)) == 0
        && (result = posix_spawnattr_setpgroup(&attributes, 0)) == 0
        && (result = posix_spawnattr_setsigmask(&attributes, &none)) == 0
        && (result = posix_spawnattr_setsigdefault(&attributes, &all)) == 0
        && (result = posix_spawn_file_actions_adddup2(&actions, in, 0)) == 0
        && (result = posix_spawn_file_actions_adddup2(&actions, out, 1)) == 0
        && (result = posix_spawn_file_actions_adddup2(&actions, err, 2)) == 0
        // The program's own descriptor (after 0-2 took theirs), not close-on-exec.
        && (exe < 0 || (result = posix_spawn_file_actions_adddup2(&actions, exe, 3)) == 0)
        // Descriptors the process inherited without close-on-exec stay out of the child too.
        && (result = posix_spawn_file_actions_addclosefrom_np(&actions, exe < 0 ? 3 : 4)) == 0) {
        result = posix_spawn(pid, exe < 0 ? path : "/proc/self/fd/3", &actions, &attributes, argv, envp);
    }
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    return result;
}

int wsp_pidfd_open(pid_t pid) {
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}

int wsp_child_peek(pid_t pid, int *exited_code, int *signal_number) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    for (;;) {
        if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0) break;
        if (errno != EINTR) return -1;
    }
    if (info.si_pid == 0) return 0;
    *exited_code = -1;
    *signal_number = 0;
    if (info.si_code == CLD_EXITED) *exited_code = info.si_status;
    else *signal_number = info.si_status;
    return 1;
}

int wsp_child_reap(pid_t pid) {
    siginfo_t info;
    for (;;) {
        if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG) == 0) return 0;
        if (errno != EINTR) return -1;
    }
}

int wsp_child_pipe(int fds[2], int nonblocking_index) {
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    int fd = fds[nonblocking_index & 1];
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        int saved = errno;
        close(fds[0]);
        close(fds[1]);
        errno = saved;
        return -1;
    }
    return 0;
}

int wsp_become_subreaper(void) { return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }

int wsp_reap_group_member(pid_t group) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    for (;;) {
        if (waitid(P_PGID, (id_t)group, &info, WEXITED | WNOHANG) == 0) return info.si_pid != 0 ? 1 : 0;
        if (errno != EINTR) return -1;
    }
}

ssize_t wsp_writev_nosigpipe(int fd, const struct iovec *vectors, int count) {
    sigset_t pipe_only, old, pending;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    sigpending(&pending);
    int was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    ssize_t n = writev(fd, vectors, count);
    int saved = errno;
    if (n < 0 && saved == EPIPE && !was_pending) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_only, NULL, &zero) < 0 && errno == EINTR) {}
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved;
    return n;
}

#include <malloc.h>
int wsp_malloc_trim(void) { return malloc_trim(0); }
void wsp_raise_malloc_thresholds(size_t bytes) {
    void *volatile block = malloc(bytes);  // volatile: the pair is not optimized away
    free(block);
}

static struct termios wsp_saved_modes;
static volatile sig_atomic_t wsp_terminal_fd = -1;     // saved: restore these modes on it
static volatile sig_atomic_t wsp_terminal_is_raw = 0;  // ours are in force
static volatile sig_atomic_t wsp_terminal_in_edit = 0;

static void wsp_write_all(int fd, const char *bytes, size_t count) {
    while (count > 0) {
        ssize_t n = write(fd, bytes, count);
        if (n > 0) { bytes += n; count -= (size_t)n; }
        else if (n < 0 && errno == EINTR) continue;
        else return;
    }
}

int wsp_terminal_raw(int fd) {
    if (wsp_terminal_fd < 0) {
        if (tcgetattr(fd, &wsp_saved_modes) != 0) return -1;
        wsp_terminal_fd = fd;
    }
    struct termios raw = wsp_saved_modes;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG | IEXTEN);
    raw.c_iflag &= ~(tcflag_t)(IXON | ICRNL | INLCR | IGNCR);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(fd, TCSADRAIN, &raw) != 0) return -1;
    wsp_terminal_is_raw = 1;
    static const char on[] = "\x1b[?2004h";
    wsp_write_all(STDOUT_FILENO, on, sizeof on - 1);
    return 0;
}

void wsp_terminal_editing(int editing) { wsp_terminal_in_edit = editing; }

void wsp_terminal_restore(void) {
    int saved_errno = errno;
    if (wsp_terminal_is_raw && wsp_terminal_fd >= 0) {
        int fd = wsp_terminal_fd;
        wsp_terminal_is_raw = 0;
        if (wsp_terminal_in_edit) {
            wsp_terminal_in_edit = 0;
            wsp_write_all(STDOUT_FILENO, "\r\n", 2);
        }
        static const char reset[] = "\x1b[?2004l\x1b[?25h\x1b[0m";
        wsp_write_all(STDOUT_FILENO, reset, sizeof reset - 1);
        tcsetattr(fd, TCSAFLUSH, &wsp_saved_modes);
        tcflush(fd, TCIFLUSH);
    }
    errno = saved_errno;
}

int wsp_terminal_columns(int fd) {
    struct winsize size;
    if (ioctl(fd, TIOCGWINSZ, &size) != 0) return 0;
    return size.ws_col;
}

int wsp_terminal_rows(int fd) {
    struct winsize size;
    if (ioctl(fd, TIOCGWINSZ, &size) != 0) return 0;
    return size.ws_row;
}

int wsp_terminal_in_foreground(int fd) {
    pid_t group = tcgetpgrp(fd);
    return group >= 0 && group == getpgrp();
}

static volatile sig_atomic_t wsp_continued = 0;
static volatile sig_atomic_t wsp_stop_wake_fd = -1;

static void wsp_on_continue(int signum) {
    (void)signum;
    int saved_errno = errno;
    if (wsp_terminal_fd >= 0) {
        wsp_continued = 1;
        if (wsp_stop_wake_fd >= 0) wsp_eventfd_signal(wsp_stop_wake_fd);
    }
    errno = saved_errno;
}

static void wsp_on_stop(int signum) {
    int saved_errno = errno;
    wsp_terminal_restore();
    wsp_raise_default(signum);  // stopped here until SIGCONT
    wsp_signal(signum, wsp_on_stop);  // this handler again for the next time
    errno = saved_errno;
}

void wsp_terminal_watch_stops(int wake_fd) {
    wsp_stop_wake_fd = wake_fd;
    wsp_signal(SIGCONT, wsp_on_continue);
    wsp_signal(SIGTSTP, wsp_on_stop);
}

int wsp_terminal_take_continued(void) {
    int continued = wsp_continued;
    wsp_continued = 0;
    return continued;
}

#include <locale.h>
#include <stdio.h>
#include <regex.h>
#include <stdlib.h>
struct wsp_regex { regex_t compiled; };

/* The C locale for compiling and matching (regexec must see the locale regcomp saw). */
static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void make_c_locale(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }
static locale_t enter_c_locale(void) {
    pthread_once(&c_locale_once, make_c_locale);
    return c_locale ? uselocale(c_locale) : (locale_t)0;
}
static void leave_c_locale(locale_t previous) { if (previous) uselocale(previous); }

wsp_regex *wsp_regex_compile(const char *pattern, char *error, size_t capacity) {
    wsp_regex *regex = malloc(sizeof *regex);
    if (!regex) {
        snprintf(error, capacity, "out of memory");
        return NULL;
    }
    locale_t previous = enter_c_locale();
    int status = regcomp(&regex->compiled, pattern, REG_EXTENDED | REG_NOSUB);
    if (status != 0) regerror(status, &regex->compiled, error, capacity);
    leave_c_locale(previous);
    if (status != 0) {
        free(regex);
        return NULL;
    }
    return regex;
}

int wsp_regex_matches(const wsp_regex *regex, const void *text, size_t length) {
    static const char empty[1] = "";
    regmatch_t range[1] = {{.rm_so = 0, .rm_eo = (regoff_t)length}};
    locale_t previous = enter_c_locale();
    int status = regexec(&regex->compiled, text ? text : empty, 1, range, REG_STARTEND);
    leave_c_locale(previous);
    return status == 0 ? 1 : status == REG_NOMATCH ? 0 : -1;
}

void wsp_regex_free(wsp_regex *regex) {
    if (!regex) return;
    regfree(&regex->compiled);
    free(regex);
}
