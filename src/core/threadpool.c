/* threadpool.c - persistent workers claiming tasks with a generation-tagged
 * counter.
 *
 * `claim` packs (generation << 32 | next task index).  A worker takes a task
 * with a compare-and-swap that only succeeds while the generation is still
 * the one it read, so a worker that wakes late can never run a task of the
 * next job with the previous job's function.  The caller works on its own job
 * too and waits only for the tasks to be done, not for every worker to show
 * up: on a busy machine a descheduled worker costs nothing unless it holds a
 * task. */
#include "core/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/cpu_features.h"
#include "core/error.h"

#define SPIN_ITERS 30000  /* a worker polls ~0.1-1 ms for the next job, then sleeps */
#define CALLER_SPIN 4000  /* the caller polls this long, then yields its core */

typedef struct job {
    nd_task_fn fn;
    void *ctx;
    atomic_int n_tasks;
} job;

struct nd_threadpool {
    int n_threads; /* including the caller */
    pthread_t *workers;
    pthread_mutex_t run_lock; /* serialises jobs from different callers */
    pthread_mutex_t wake_lock;
    pthread_cond_t wake_cond;
    job jobs[2];              /* generation g uses jobs[g & 1] */
    _Atomic uint64_t claim;   /* generation << 32 | next task */
    atomic_int done;          /* tasks of the current job finished */
    atomic_int sleepers;
    atomic_int stop;
    unsigned generation;      /* caller side only */
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Take and run tasks of generation `gen` until none is left; returns how many ran. */
static int work_on(nd_threadpool *p, unsigned gen, int thread)
{
    int ran = 0;
    job *j = &p->jobs[gen & 1];
    for (;;) {
        uint64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
        if ((unsigned)(c >> 32) != gen) break;
        unsigned idx = (unsigned)c;
        if ((int)idx >= atomic_load_explicit(&j->n_tasks, memory_order_relaxed)) break;
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1, memory_order_acq_rel, memory_order_relaxed))
            continue;
        j->fn(j->ctx, (int)idx, thread); /* stable: the job cannot end before this task is done */
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
        ran++;
    }
    return ran;
}

typedef struct worker_arg {
    nd_threadpool *pool;
    int thread;
} worker_arg;

static void *worker_main(void *argp)
{
    worker_arg *arg = argp;
    nd_threadpool *p = arg->pool;
    int thread = arg->thread;
    free(arg);
    unsigned seen = 0;
    for (;;) {
        unsigned g = seen;
        for (int i = 0; i < SPIN_ITERS && g == seen; i++) {
            g = (unsigned)(atomic_load_explicit(&p->claim, memory_order_acquire) >> 32);
            if (atomic_load_explicit(&p->stop, memory_order_relaxed)) return NULL;
            if (g == seen) cpu_relax();
        }
        if (g == seen) {
            pthread_mutex_lock(&p->wake_lock);
            atomic_fetch_add(&p->sleepers, 1);
            while ((g = (unsigned)(atomic_load(&p->claim) >> 32)) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake_cond, &p->wake_lock);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->wake_lock);
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        work_on(p, g, thread);
    }
}

int nd_threads_default(void)
{
    const char *env = getenv("NEEDLE_THREADS");
    if (env && *env) {
        char *end;
        long n = strtol(env, &end, 10);
        if (*end == '\0' && n >= 1 && n <= 256) return (int)n;
    }
    return nd_cpu_count();
}

int nd_threadpool_create(int n_threads, nd_threadpool **out, needle_error *err)
{
    *out = NULL;
    if (n_threads <= 0) n_threads = nd_threads_default();
    if (n_threads > 256) n_threads = 256;
    nd_threadpool *p = calloc(1, sizeof *p);
    if (!p) return nd_errorf(err, NEEDLE_ENOMEM, "threadpool: out of memory");
    p->n_threads = 1; /* counts started threads until all are up */
    pthread_mutex_init(&p->run_lock, NULL);
    pthread_mutex_init(&p->wake_lock, NULL);
    pthread_cond_init(&p->wake_cond, NULL);
    atomic_init(&p->claim, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->jobs[0].n_tasks, 0);
    atomic_init(&p->jobs[1].n_tasks, 0);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof(pthread_t));
        if (!p->workers) { nd_threadpool_free(p); return nd_errorf(err, NEEDLE_ENOMEM, "threadpool: out of memory"); }
        for (int i = 1; i < n_threads; i++) {
            worker_arg *a = malloc(sizeof *a);
            if (a) { a->pool = p; a->thread = i; }
            if (!a || pthread_create(&p->workers[i - 1], NULL, worker_main, a) != 0) {
                free(a);
                nd_threadpool_free(p); /* joins the p->n_threads - 1 started so far */
                return nd_errorf(err, NEEDLE_ENOMEM, "threadpool: cannot start thread %d", i);
            }
            p->n_threads = i + 1;
        }
    }
    *out = p;
    return 0;
}

void nd_threadpool_free(nd_threadpool *p)
{
    if (!p) return;
    if (p->workers) {
        pthread_mutex_lock(&p->wake_lock);
        atomic_store(&p->stop, 1);
        pthread_cond_broadcast(&p->wake_cond);
        pthread_mutex_unlock(&p->wake_lock);
        for (int i = 1; i < p->n_threads; i++) pthread_join(p->workers[i - 1], NULL);
        free(p->workers);
    }
    pthread_cond_destroy(&p->wake_cond);
    pthread_mutex_destroy(&p->wake_lock);
    pthread_mutex_destroy(&p->run_lock);
    free(p);
}

int nd_threadpool_threads(const nd_threadpool *p) { return p ? p->n_threads : 1; }

void nd_threadpool_run(nd_threadpool *p, int n_tasks, nd_task_fn fn, void *ctx)
{
    if (n_tasks <= 0) return;
    if (!p || p->n_threads == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return;
    }
    pthread_mutex_lock(&p->run_lock);
    unsigned gen = ++p->generation;
    if (gen == 0) gen = ++p->generation; /* 0 means "no job yet" to a fresh worker */
    job *j = &p->jobs[gen & 1];
    j->fn = fn;
    j->ctx = ctx;
    atomic_store_explicit(&j->n_tasks, n_tasks, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store(&p->claim, (uint64_t)gen << 32); /* publish (seq_cst, pairs with the sleepers check) */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->wake_lock);
        pthread_cond_broadcast(&p->wake_cond);
        pthread_mutex_unlock(&p->wake_lock);
    }
    work_on(p, gen, 0);
    /* wait for tasks other threads still hold; yield if that takes long (a
     * descheduled worker needs this core back) */
    for (int spins = 0; atomic_load_explicit(&p->done, memory_order_acquire) < n_tasks; spins++) {
        if (spins < CALLER_SPIN) cpu_relax();
        else sched_yield();
    }
    pthread_mutex_unlock(&p->run_lock);
}
