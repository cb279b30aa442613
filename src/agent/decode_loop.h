/* decode_loop.h - one assistant turn token by token (decode_loop.c), for
 * session.c: evaluating the pending tokens into the KV state, and the loop
 * that forces the fixed parts, samples the reasoning and decodes the call
 * list under the grammar's token mask.  Internal to src/agent/. */
#ifndef ND_DECODE_LOOP_H
#define ND_DECODE_LOOP_H

#include <time.h>

#include "agent/session.h"
#include "core/buf.h"

static inline double nd_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* What one turn produced (nd_decode_turn fills it; the caller inits the bufs). */
typedef struct nd_turn_result {
    int fail_code;
    char fail_msg[256];
    nd_buf reasoning, calls;
    double logp_sum;
    int logp_n;
    int generated;
    int loop_breaks; /* steps where the repeat guard banned a looping token */
    int repeat_cuts; /* call lists ended at a repeated array item or call */
    double p_call;   /* the probability the model gave, at the list's first token, to a list with a call
                        (against an empty one); NAN when the turn wrote no list or the
                        session never leans (lean_call.h) */
    long bent_at;    /* offset in calls where the schema first bent a value the model wanted (range_guard.h); -1: never */
    double t_decode, t_mask;
} nd_turn_result;

/* dst += src; NEEDLE_ENOMEM possible. */
int nd_ids_append(nd_ids *dst, const nd_ids *src, needle_error *err);

/* Evaluate every pending token; s->logits receives the last one's row.  While
 * *cells_ok, the cells are kept for the confidence head (cleared when they
 * would pass the memory cap). */
int nd_eval_pending(needle_session *s, int *cells_ok, needle_error *err);

/* Decode one assistant turn of at most max_new tokens into r.  Returns an
 * error code for failures of the machinery (memory); a turn the model could
 * not finish is r->fail_code with r->fail_msg. */
int nd_decode_turn(needle_session *s, int max_new, int *cells_ok, nd_turn_result *r, needle_error *err);

#endif
