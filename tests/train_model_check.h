/* train_model_check.h - the whole-model checks shared by the trainer's
 * gradient tests (test_train_grad.c for Needle 2, test_train_grad_v3.c for
 * Needle 3): the model's loss as a function for check_grad, the LoRA
 * gradient check over every target, and "a step gives the same bits with
 * any number of threads".  Include after check.h and grad_check.h.
 */
#ifndef ND_TEST_TRAIN_MODEL_CHECK_H
#define ND_TEST_TRAIN_MODEL_CHECK_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/threadpool.h"
#include "model/config.h"
#include "train/train_model.h"

/* The small batch the whole-model gradient checks differentiate. */
enum { MB = 2, MT = 9 };
typedef struct { nd_train_model *m; int32_t *ids, *tg; } model_ctx;

/* Mean loss per target of the batch (no gradient): the check_grad loss. */
static double model_loss(void *c_)
{
    model_ctx *c = c_;
    int n;
    return nd_train_step_grad(c->m, c->ids, c->tg, MB, MT, 0, &n) / n;
}

/* Every LoRA target's A and B gradient (taken from one step on the batch in
 * c) against finite differences of the loss. */
static void check_lora_grads(model_ctx *c, const char *label_a, const char *label_b)
{
    nd_train_model *m = c->m;
    int n = 0;
    double loss = nd_train_step_grad(m, c->ids, c->tg, MB, MT, 1, &n);
    CHECK(isfinite(loss));
    float *g = malloc(sizeof(float) * m->n_lora);
    memcpy(g, m->lora_grads, sizeof(float) * m->n_lora);
    for (int t = 0; t < ND_LORA_TARGETS; t++) {
        int in, out;
        nd_train_lora_dims(m, t, &in, &out);
        size_t na = (size_t)m->cfg.num_layers * in * 4, nb = (size_t)m->cfg.num_layers * 4 * out;
        check_grad(label_a, model_loss, c, m->lora + m->lora_a_off[t], g + m->lora_a_off[t], na, 1e-2f, 3e-2);
        check_grad(label_b, model_loss, c, m->lora + m->lora_b_off[t], g + m->lora_b_off[t], nb, 1e-2f, 3e-2);
    }
    free(g);
}

/* A whole training step (forward, backward, every gradient) of a model made
 * with make_config gives the same loss and gradient bits with no pool and
 * with each thread count from 1 + thread_step up to max_threads: every
 * parallel loop works on fixed blocks and reduces them in block order. */
static void check_step_bit_identical_across_threads(void (*make_config)(nd_config *), const int32_t *ids,
                                                    const int32_t *tg, int B, int T, int max_threads,
                                                    int thread_step)
{
    float *ref = NULL;
    double ref_loss = 0.0;
    for (int threads = 1; threads <= max_threads; threads += thread_step) {
        nd_config cfg;
        make_config(&cfg);
        nd_train_model m;
        needle_error err;
        CHECK(nd_train_model_create(&m, &cfg, &err) == 0);
        nd_train_model_init_reference(&m, 21);
        CHECK(nd_train_enable_full(&m, &err) == 0);
        nd_threadpool *pool = NULL;
        if (threads > 1) CHECK(nd_threadpool_create(threads, &pool, &err) == 0);
        m.pool = pool;
        int n = 0;
        double loss = nd_train_step_grad(&m, ids, tg, B, T, 1, &n);
        CHECK(isfinite(loss) && n > 0);
        if (!ref) {
            ref = malloc(sizeof(float) * m.n_params);
            memcpy(ref, m.grads, sizeof(float) * m.n_params);
            ref_loss = loss;
        } else {
            CHECKF(loss == ref_loss, "%d threads: loss %.17g vs %.17g", threads, loss, ref_loss);
            CHECKF(!memcmp(ref, m.grads, sizeof(float) * m.n_params), "%d threads: gradients differ", threads);
        }
        nd_train_model_free(&m);
        nd_threadpool_free(pool);
    }
    free(ref);
}

#endif
