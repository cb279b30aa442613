/* threadpool.h - a persistent pool of worker threads for data-parallel loops.
 *
 * A job is `n_tasks` independent tasks; task i is always the same slice of
 * work (e.g. rows [16i, 16i+16)) whatever the thread count, and each task is
 * computed by exactly one thread with the same code, so results are bit for
 * bit independent of how many threads run.  Workers spin briefly between jobs
 * (a decode step issues dozens of small jobs back to back) and then sleep.
 *
 * nd_threadpool_run may be called from several threads: jobs are serialised
 * by a lock, so one pool can serve several sessions.  A task must not call
 * nd_threadpool_run on the same pool. */
#ifndef ND_THREADPOOL_H
#define ND_THREADPOOL_H

#include "needle.h"

typedef struct nd_threadpool nd_threadpool;

/* fn(ctx, task, thread): thread is in [0, nd_threadpool_threads()) and lets a
 * task use per-thread scratch. */
typedef void (*nd_task_fn)(void *ctx, int task, int thread);

/* The default thread count: NEEDLE_THREADS if set to a positive number, else
 * every online core. */
int nd_threads_default(void);

/* n_threads <= 0 means nd_threads_default().  The caller's thread counts as
 * one, so n_threads == 1 starts no thread at all. */
int nd_threadpool_create(int n_threads, nd_threadpool **out, needle_error *err);
void nd_threadpool_free(nd_threadpool *p);
int nd_threadpool_threads(const nd_threadpool *p);

/* Run fn for every task in [0, n_tasks) and return when all are done.  A NULL
 * pool runs everything on the calling thread. */
void nd_threadpool_run(nd_threadpool *p, int n_tasks, nd_task_fn fn, void *ctx);

#endif
