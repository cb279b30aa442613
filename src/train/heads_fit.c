/* heads_fit.c - the heads' shared minibatch Adam loop (heads_fit.h). */
#include "train/heads_fit.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "train/adamw.h"

int nd_head_fit_adam(const nd_head_fit *f, const int *idx, int n, const nd_heads_train_options *o, nd_rng *rng,
                     FILE *log, needle_error *err)
{
    /* the one AdamW (train/adamw.c) as plain Adam: no weight decay, no clipping */
    nd_adamw ad;
    int rc = nd_adamw_init(&ad, f->n, err);
    if (rc) return rc;
    ad.weight_decay = 0.0;
    ad.clip_norm = 0.0;
    float *g = malloc(sizeof(float) * f->n);
    int *perm = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!g || !perm) rc = nd_errorf(err, NEEDLE_ENOMEM, "heads: out of memory");
    for (int ep = 0; !rc && ep < o->epochs; ep++) {
        memcpy(perm, idx, sizeof(int) * (size_t)n);
        nd_rng_shuffle_int(rng, perm, (size_t)n);
        double sum = 0.0;
        int batches = 0;
        for (int s = 0; s < n; s += o->batch) {
            int m = n - s < o->batch ? n - s : o->batch;
            if (m < f->min_batch) continue;
            memset(g, 0, sizeof(float) * f->n);
            sum += f->batch_loss(f->ctx, perm + s, m, g);
            nd_adamw_step(&ad, f->flat, g, o->lr);
            if (f->after_step) f->after_step(f->ctx);
            batches++;
        }
        if (log && (ep == 0 || ep + 1 == o->epochs || (ep + 1) % 10 == 0))
            fprintf(log, "  %s epoch %d: mean batch loss %.4f\n", f->name, ep + 1, batches ? sum / batches : 0.0);
    }
    nd_adamw_free(&ad);
    free(g);
    free(perm);
    return rc;
}
