/* threadpool.h - a persistent pool of worker threads for data-parallel loops.
 *
 * A job is `n_tasks` independent tasks; task i is always the same slice of
 * work (e.g. rows [16i, 16i+16)) whatever the thread count, and each task is
 * computed by exactly one thread with the same code, so results are bit for
 * bit independent of how many threads run.  Workers spin briefly between jobs
 * (a decode step issues dozens of small jobs back to back) and then sleep.
 *
 * nd_threadpool_run_ranges is the same for jobs of many small units (rows):
 * threads claim runs of units of shrinking size instead of one task at a time.
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

/* fn(ctx, begin, end, thread): units [begin, end) of a range job. */
typedef void (*nd_range_fn)(void *ctx, int begin, int end, int thread);

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

/* Run fn over the units [0, n_units) in chunks and return when all are done.
 * Threads claim chunks by guided self-scheduling: a claim takes
 * remaining / (2 * threads) units, at least min_grain (and at most what is
 * left), so chunks start large (few claims) and shrink towards the end, and
 * the threads finish within about one small chunk of each other whatever
 * the machine does to them.  Which thread runs which units varies from run
 * to run, so fn must compute each unit the same way whatever the range it
 * comes in (then results do not depend on the thread count).  A NULL pool,
 * a one-thread pool or n_units <= min_grain runs fn(ctx, 0, n_units, 0) on
 * the calling thread. */
void nd_threadpool_run_ranges(nd_threadpool *p, int n_units, int min_grain, nd_range_fn fn, void *ctx);

#endif
