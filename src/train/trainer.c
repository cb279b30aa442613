/* trainer.c - the fine-tuning loop (SPEC 9). */
#include "train/trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/rng.h"
#include "train/adamw.h"
#include "train/schedule.h"

void nd_trainer_opts_default(nd_trainer_opts *o)
{
    memset(o, 0, sizeof *o);
    o->epochs = 3;
    o->batch_size = 16;
    o->max_len = 1024;
    o->log_every = 10;
    o->lr = 1e-4;
    o->val_split = 0.1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The trainable slab: LoRA factors, or every parameter up to the heads (the
 * table puts the heads last, so the forward's tensors form one prefix). */
static void trainable(nd_train_model *m, float **w, float **g, size_t *n)
{
    if (m->lora) {
        *w = m->lora;
        *g = m->lora_grads;
        *n = m->n_lora;
        return;
    }
    size_t end = m->n_params;
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].role < 0 && m->tensors[i].offset < end) end = m->tensors[i].offset;
    *w = m->params;
    *g = m->grads;
    *n = end;
}

/* Token-weighted mean loss over rows idx[0..n). */
static double eval_loss(nd_train_model *m, const nd_dataset *ds, const int *idx, int n, int B, int T, int pad,
                        int32_t *ids, int32_t *tg)
{
    double sum = 0.0;
    long count = 0;
    for (int i = 0; i < n; i += B) {
        int k = n - i < B ? n - i : B;
        nd_make_batch(ds, idx + i, k, B, T, pad, ids, tg);
        int c = 0;
        sum += nd_train_step_grad(m, ids, tg, B, T, 0, &c);
        count += c;
    }
    return count ? sum / (double)count : NAN;
}

int nd_trainer_run(nd_train_model *m, const nd_dataset *ds, int pad_id, const nd_trainer_opts *o,
                   nd_trainer_result *res, needle_error *err)
{
    memset(res, 0, sizeof *res);
    if (!m->lora && !m->grads)
        return nd_errorf(err, NEEDLE_ESTATE, "trainer: neither LoRA nor full training is enabled");
    if (o->epochs < 1 || o->batch_size < 1 || o->val_split < 0 || o->val_split >= 1)
        return nd_errorf(err, NEEDLE_EINVAL, "trainer: bad options (epochs %d, batch %d, val split %g)", o->epochs,
                         o->batch_size, o->val_split);
    int n = ds->n;
    int *order = malloc(sizeof(int) * (size_t)n);
    if (!order) return nd_errorf(err, NEEDLE_ENOMEM, "trainer: out of memory");
    for (int i = 0; i < n; i++) order[i] = i;
    nd_rng rng;
    nd_rng_seed(&rng, o->seed);
    nd_rng_shuffle_int(&rng, order, (size_t)n);
    int n_val = (int)floor(n * o->val_split);
    if (n - n_val < 1) n_val = n - 1;
    int *val = order, *train = order + n_val, n_train = n - n_val;
    int longest = 0;
    for (int i = 0; i < n; i++) longest = ds->ex[i].len > longest ? ds->ex[i].len : longest;
    int T = nd_bucket_len(longest, o->max_len < m->cfg.max_seq_len ? o->max_len : m->cfg.max_seq_len);
    int B = o->batch_size < n_train ? o->batch_size : n_train;
    int steps_per_epoch = (n_train + B - 1) / B, total = steps_per_epoch * o->epochs;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)B * T), *tg = malloc(sizeof(int32_t) * (size_t)B * T);
    float *w, *g;
    size_t nw;
    trainable(m, &w, &g, &nw);
    nd_adamw opt;
    int rc = (!ids || !tg) ? nd_errorf(err, NEEDLE_ENOMEM, "trainer: out of memory") : 0;
    if (!rc) rc = nd_adamw_init(&opt, nw, err);
    if (!rc) rc = nd_train_plan(m, B, T, err);
    if (rc) {
        free(order); free(ids); free(tg);
        return rc;
    }
    res->n_train = n_train;
    res->n_val = n_val;
    res->seq_len = T;
    if (o->progress)
        fprintf(o->progress, "  %d train rows, %d validation rows, batch %d x %d, %d steps, %zu trainable params\n",
                n_train, n_val, B, T, total, nw);
    double t0 = now_s(), tw = t0;
    long tokens = 0, tokens_win = 0;
    int step = 0;
    for (int ep = 0; ep < o->epochs && !rc; ep++) {
        nd_rng er;
        nd_rng_seed_stream(&er, o->seed, 1000 + (uint64_t)ep);
        nd_rng_shuffle_int(&er, train, (size_t)n_train);
        double ep_sum = 0;
        int ep_steps = 0;
        for (int i = 0; i < n_train; i += B, step++) {
            int k = n_train - i < B ? n_train - i : B;
            long real = nd_make_batch(ds, train + i, k, B, T, pad_id, ids, tg);
            int c = 0;
            double loss = nd_train_step_grad(m, ids, tg, B, T, 1, &c);
            if (!isfinite(loss)) { rc = nd_errorf(err, NEEDLE_ENOMEM, "trainer: step %d failed (loss %g)", step + 1, loss); break; }
            loss = c ? loss / c : 0.0;
            nd_adamw_step(&opt, w, g, nd_schedule_lr(o->lr, step, total));
            tokens += real;
            tokens_win += real;
            ep_sum += loss;
            ep_steps++;
            if (step == 0) res->first_loss = loss;
            res->last_loss = loss;
            if (o->progress && ((step + 1) % (o->log_every > 0 ? o->log_every : 1) == 0 || step == 0 ||
                                step + 1 == total)) {
                double t = now_s();
                fprintf(o->progress, "  step %7d/%d  loss %.4f  %.0f tok/s\n", step + 1, total, loss,
                        tokens_win / (t - tw > 1e-9 ? t - tw : 1e-9));
                fflush(o->progress);
                tw = t;
                tokens_win = 0;
            }
        }
        if (rc) break;
        res->last_val_loss = n_val ? eval_loss(m, ds, val, n_val, B, T, pad_id, ids, tg) : NAN;
        if (o->progress) {
            fprintf(o->progress, "  epoch %d/%d  train loss %.4f", ep + 1, o->epochs, ep_sum / (ep_steps ? ep_steps : 1));
            if (n_val) fprintf(o->progress, "  val loss %.4f", res->last_val_loss);
            fprintf(o->progress, "\n");
            fflush(o->progress);
        }
    }
    res->steps = step;
    res->seconds = now_s() - t0;
    res->tokens_per_s = tokens / (res->seconds > 1e-9 ? res->seconds : 1e-9);
    nd_adamw_free(&opt);
    free(order); free(ids); free(tg);
    return rc;
}
