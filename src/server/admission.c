/* admission.c - at most `parallel` decodes at once, at most `queue` requests
 * waiting behind them; anything more is turned away at once (503), so a burst
 * costs the server a small, fixed amount of memory and latency.  A waiting
 * request checks every 50 ms whether its client has hung up, and gives its
 * place up if so (the work it would have done is cancelled). */
#include <errno.h>
#include <time.h>

#include "server/server_internal.h"

void nd_admission_init(nd_admission *a, int parallel, int queue)
{
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    a->parallel = parallel > 0 ? parallel : 1;
    a->queue = queue >= 0 ? queue : 0;
    a->active = a->waiting = 0;
    a->admitted = a->rejected = a->cancelled = 0;
}

void nd_admission_destroy(nd_admission *a)
{
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
}

int nd_admission_enter(nd_admission *a, nd_gone_fn gone, void *gone_ctx)
{
    pthread_mutex_lock(&a->mu);
    if (a->active < a->parallel && a->waiting == 0) {
        a->active++;
        a->admitted++;
        pthread_mutex_unlock(&a->mu);
        return ND_ADMIT_OK;
    }
    if (a->waiting >= a->queue) {
        a->rejected++;
        pthread_mutex_unlock(&a->mu);
        return ND_ADMIT_FULL;
    }
    a->waiting++;
    for (;;) {
        if (a->active < a->parallel) {
            a->waiting--;
            a->active++;
            a->admitted++;
            pthread_mutex_unlock(&a->mu);
            return ND_ADMIT_OK;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 50 * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        int rc = pthread_cond_timedwait(&a->cv, &a->mu, &until);
        if (rc == ETIMEDOUT && gone && gone(gone_ctx)) {
            a->waiting--;
            a->cancelled++;
            pthread_cond_signal(&a->cv); /* pass a possible wake-up on */
            pthread_mutex_unlock(&a->mu);
            return ND_ADMIT_GONE;
        }
    }
}

void nd_admission_leave(nd_admission *a)
{
    pthread_mutex_lock(&a->mu);
    a->active--;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

void nd_admission_count_cancel(nd_admission *a)
{
    pthread_mutex_lock(&a->mu);
    a->cancelled++;
    pthread_mutex_unlock(&a->mu);
}
