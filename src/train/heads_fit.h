/* heads_fit.h - the minibatch Adam loop both heads trainers share (Needle 2
 * in heads_train.c, Needle 3 in heads_train_v3.c): each epoch shuffles the
 * training rows, walks them in batches, asks the head for its loss and
 * gradient, and takes one Adam step (AdamW with no decay and no clipping). */
#ifndef NEEDLE_TRAIN_HEADS_FIT_H
#define NEEDLE_TRAIN_HEADS_FIT_H

#include <stddef.h>
#include <stdio.h>

#include "core/rng.h"
#include "needle.h"
#include "train/heads_train.h"

typedef struct nd_head_fit {
    float *flat;      /* every trained value, one block */
    size_t n;         /* how many */
    int min_batch;    /* smaller batches are skipped (a contrastive batch needs a negative) */
    const char *name; /* for the log lines */
    /* the mean loss over rows[0..m) and its gradient added into g (zeroed
     * before), with whatever must not move already zeroed in g */
    double (*batch_loss)(void *ctx, const int *rows, int m, float *g);
    void (*after_step)(void *ctx); /* NULL, or a clamp applied after each step */
    void *ctx;
} nd_head_fit;

/* Train over idx[0..n) for o->epochs epochs of o->batch rows at rate o->lr. */
int nd_head_fit_adam(const nd_head_fit *f, const int *idx, int n, const nd_heads_train_options *o, nd_rng *rng,
                     FILE *log, needle_error *err);

#endif
