/* posix_spawn on helper threads (wsp_spawner): glibc's posix_spawn (CLONE_VFORK) holds the
 * calling thread until the child has exec'd, 1-2 ms on a loaded machine, so an event loop
 * that spawned itself stopped serving every other connection for that long, one spawn after
 * another. Jobs go to a few threads; results come back through an eventfd the loop watches. */
#include "CWSPipeShims.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct job {
    struct job *next;
    unsigned long long id;
    char *path;
    char **argv, **envp;
    int in, out, err, exe;
    pid_t pid;
    int error;
};

struct wsp_spawner {
    pthread_mutex_t lock;
    pthread_cond_t ready;
    struct job *queue, *queue_tail, *done;
    int fd, stopping, threads;
    pthread_t thread[8];
};

static char **copy_strings(char *const strings[]) {
    size_t n = 0;
    while (strings[n]) n++;
    char **copy = calloc(n + 1, sizeof *copy);
    if (!copy) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (!(copy[i] = strdup(strings[i]))) {
            for (size_t j = 0; j < i; j++) free(copy[j]);
            free(copy);
            return NULL;
        }
    }
    return copy;
}

static void free_strings(char **strings) {
    if (!strings) return;
    for (size_t i = 0; strings[i]; i++) free(strings[i]);
    free(strings);
}

/* The child's ends are closed here once spawned (or not): ours stay with the caller. */
static void finish_job(struct job *job) {
    close(job->in);
    close(job->out);
    close(job->err);
    if (job->exe >= 0) close(job->exe);
    free(job->path);
    free_strings(job->argv);
    free_strings(job->envp);
    job->path = NULL;
    job->argv = job->envp = NULL;
}

static void *work(void *argument) {
    struct wsp_spawner *s = argument;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->queue && !s->stopping) pthread_cond_wait(&s->ready, &s->lock);
        if (!s->queue) break;
        struct job *job = s->queue;
        s->queue = job->next;
        if (!s->queue) s->queue_tail = NULL;
        pthread_mutex_unlock(&s->lock);
        job->error = wsp_spawn(job->path, job->argv, job->envp, job->in, job->out, job->err, job->exe, &job->pid);
        finish_job(job);
        pthread_mutex_lock(&s->lock);
        job->next = s->done;
        s->done = job;
        wsp_eventfd_signal(s->fd);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

wsp_spawner *wsp_spawner_new(int threads) {
    struct wsp_spawner *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (threads < 1) threads = 1;
    if (threads > 8) threads = 8;
    s->fd = wsp_eventfd();
    if (s->fd < 0) { free(s); return NULL; }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->ready, NULL);
    /* The threads must not take the process's signals (SIGINT, SIGTERM are the loop's). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (int i = 0; i < threads; i++) {
        pthread_attr_t attributes;
        pthread_attr_init(&attributes);
        pthread_attr_setstacksize(&attributes, 64 * 1024);
        if (pthread_create(&s->thread[s->threads], &attributes, work, s) == 0) s->threads++;
        pthread_attr_destroy(&attributes);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (s->threads == 0) {
        close(s->fd);
        free(s);
        return NULL;
    }
    return s;
}

int wsp_spawner_fd(const wsp_spawner *s) { return s->fd; }

int wsp_spawner_submit(wsp_spawner *s, unsigned long long id, const char *path, char *const argv[], char *const envp[],
                       int in, int out, int err, int exe) {
    struct job *job = calloc(1, sizeof *job);
    if (!job) return ENOMEM;
    job->id = id;
    job->in = in;
    job->out = out;
    job->err = err;
    job->exe = exe;
    job->path = strdup(path);
    job->argv = copy_strings(argv);
    job->envp = copy_strings(envp);
    if (!job->path || !job->argv || !job->envp) {
        free(job->path);
        free_strings(job->argv);
        free_strings(job->envp);
        free(job);
        return ENOMEM;
    }
    pthread_mutex_lock(&s->lock);
    if (s->queue_tail) s->queue_tail->next = job; else s->queue = job;
    s->queue_tail = job;
    pthread_cond_signal(&s->ready);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

int wsp_spawner_take(wsp_spawner *s, unsigned long long *id, pid_t *pid, int *error) {
    pthread_mutex_lock(&s->lock);
    struct job *job = s->done;
    if (job) s->done = job->next;
    pthread_mutex_unlock(&s->lock);
    if (!job) return 0;
    *id = job->id;
    *pid = job->pid;
    *error = job->error;
    free(job);
    return 1;
}

void wsp_spawner_free(wsp_spawner *s) {
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_broadcast(&s->ready);
    pthread_mutex_unlock(&s->lock);
    /* Jobs still queued are spawned first: their children are reaped by nobody's loop then,
     * but a spawner is freed only with its server, after every child ended. */
    for (int i = 0; i < s->threads; i++) pthread_join(s->thread[i], NULL);
    while (s->done) {
        struct job *job = s->done;
        s->done = job->next;
        free(job);
    }
    close(s->fd);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->ready);
    free(s);
}
