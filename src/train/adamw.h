/* adamw.h - AdamW with global-norm clipping (SPEC 9).
 *
 * Decoupled weight decay applies to EVERY trainable tensor (norm scales,
 * gates and LoRA factors included), as optax.adamw does by default with no
 * mask - the reference fine-tuner uses that default, so we match it. */
#ifndef ND_ADAMW_H
#define ND_ADAMW_H

#include <stddef.h>

#include "needle.h"

typedef struct nd_adamw {
    double b1, b2, eps, weight_decay, clip_norm;
    size_t n;
    float *m, *v; /* first and second moments, n each */
    long step;    /* optimizer steps taken */
} nd_adamw;

/* Defaults b1 .9, b2 .999, eps 1e-8, wd 1e-4, clip 1.0; moments zeroed. */
int nd_adamw_init(nd_adamw *o, size_t n, needle_error *err);
void nd_adamw_free(nd_adamw *o);

/* The global L2 norm of g (n floats), summed in double. */
double nd_grad_norm(const float *g, size_t n);

/* One update of w (n floats) with gradient g at learning rate lr: clip g to
 * global norm clip_norm, then Adam moments with bias correction, then
 * w -= lr * (mhat / (sqrt(vhat) + eps) + wd * w).  Returns the pre-clip norm. */
double nd_adamw_step(nd_adamw *o, float *w, const float *g, double lr);

#endif
