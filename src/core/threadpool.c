/* threadpool.c - persistent workers claiming tasks with a generation-tagged
 * counter.
 *
 * `claim` packs (generation << 32 | next task index).  A worker takes a task
 * with a compare-and-swap that only succeeds while the generation is still
 * the one it read, so a worker that wakes late can never run a task of the
 * next job with the previous job's function.  The caller works on its own job
 * too and waits only for the tasks to be done, not for every worker to show
 * up: on a busy machine a descheduled worker costs nothing unless it holds a
 * task.  A range job uses the same counter over units: a claim adds the size
 * of the chunk it takes (guided self-scheduling, threadpool.h). */
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
    nd_task_fn fn;        /* a task job, or */
    nd_range_fn range_fn; /* a range job */
    void *ctx;
    atomic_int n_tasks;   /* tasks or units */
    atomic_int grain;     /* range jobs: the smallest claim; 0: a task job (one task per claim) */
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

/* Take and run tasks (or chunks of units) of generation `gen` until none is
 * left; returns how many tasks or units ran.  The claim's size is computed
 * from fields read before the compare-and-swap, so they are atomics: only a
 * successful swap proves the job is still this generation's. */
static int work_on(nd_threadpool *p, unsigned gen, int thread)
{
    int ran = 0;
    job *j = &p->jobs[gen & 1];
    for (;;) {
        uint64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
        if ((unsigned)(c >> 32) != gen) break;
        int idx = (int)(unsigned)c, n = atomic_load_explicit(&j->n_tasks, memory_order_relaxed);
        if (idx >= n) break;
        int grain = atomic_load_explicit(&j->grain, memory_order_relaxed), take = 1;
        if (grain > 0) { /* guided: a share of what is left, at least the grain */
            take = (n - idx) / (2 * p->n_threads);
            if (take < grain) take = grain;
            if (take > n - idx) take = n - idx;
        }
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + (uint64_t)take, memory_order_acq_rel,
                                                   memory_order_relaxed))
            continue;
        /* stable: the job cannot end before this claim is done */
        if (grain > 0) j->range_fn(j->ctx, idx, idx + take, thread);
        else j->fn(j->ctx, idx, thread);
        atomic_fetch_add_explicit(&p->done, take, memory_order_release);
        ran += take;
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
    atomic_init(&p->jobs[0].grain, 0);
    atomic_init(&p->jobs[1].grain, 0);
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

/* Publish a job of n units (grain 0: tasks of fn; else chunks of range_fn),
 * work on it, and wait until every unit is done. */
static void run_job(nd_threadpool *p, int n, int grain, nd_task_fn fn, nd_range_fn range_fn, void *ctx)
{
    pthread_mutex_lock(&p->run_lock);
    unsigned gen = ++p->generation;
    if (gen == 0) gen = ++p->generation; /* 0 means "no job yet" to a fresh worker */
    job *j = &p->jobs[gen & 1];
    j->fn = fn;
    j->range_fn = range_fn;
    j->ctx = ctx;
    atomic_store_explicit(&j->n_tasks, n, memory_order_relaxed);
    atomic_store_explicit(&j->grain, grain, memory_order_relaxed);
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
    for (int spins = 0; atomic_load_explicit(&p->done, memory_order_acquire) < n; spins++) {
        if (spins < CALLER_SPIN) cpu_relax();
        else sched_yield();
    }
    pthread_mutex_unlock(&p->run_lock);
}

void nd_threadpool_run(nd_threadpool *p, int n_tasks, nd_task_fn fn, void *ctx)
{
    if (n_tasks <= 0) return;
    if (!p || p->n_threads == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return;
    }
    run_job(p, n_tasks, 0, fn, NULL, ctx);
}

void nd_threadpool_run_ranges(nd_threadpool *p, int n_units, int min_grain, nd_range_fn fn, void *ctx)
{
    if (n_units <= 0) return;
    if (min_grain < 1) min_grain = 1;
    if (!p || p->n_threads == 1 || n_units <= min_grain) {
        fn(ctx, 0, n_units, 0);
        return;
    }
    run_job(p, n_units, min_grain, NULL, fn, ctx);
}
