/* trainer.c - the fine-tuning loop (SPEC 9), with per-batch length buckets,
 * resumable state and the loss plot. */
#include "train/trainer.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/number.h"
#include "core/rng.h"
#include "train/adamw.h"
#include "train/plot_svg.h"
#include "train/qat.h"
#include "train/schedule.h"
#include "train/train_ckpt.h"

void nd_trainer_opts_default(nd_trainer_opts *o)
{
    memset(o, 0, sizeof *o);
    o->epochs = 3;
    o->batch_size = 16;
    o->max_len = 1024;
    o->log_every = 10;
    o->lr = 1e-4;
    o->val_split = 0.1;
    o->bucket = ND_BUCKET_GLOBAL;
    o->bucket_window = 50;
}

void nd_trainer_describe(const nd_trainer_opts *o, const nd_train_model *m, char *out, size_t size)
{
    /* %.17g round-trips a double exactly, so equal text means equal options */
    char qat[16] = "none"; /* the training numerics (train/qat.h): a resumed run must keep them */
    if (m->qat && m->qat->bits) snprintf(qat, sizeof qat, "W%d", m->qat->bits);
    else if (m->qat) snprintf(qat, sizeof qat, "map");
    snprintf(out, size,
             "mode=%s;rank=%d;alpha=%.17g;epochs=%d;batch=%d;max_len=%d;lr=%.17g;val_split=%.17g;seed=%" PRIu64
             ";bucket=%s;bucket_window=%d;qat=%s",
             m->lora ? "lora" : "full", m->lora ? m->lora_rank : 0,
             m->lora ? (double)(m->lora_scale * (float)m->lora_rank) : 0.0, o->epochs, o->batch_size, o->max_len,
             o->lr, o->val_split, o->seed, o->bucket == ND_BUCKET_BATCH ? "batch" : "global",
             o->bucket == ND_BUCKET_BATCH ? o->bucket_window : 0, qat);
    if (o->decision_weight > 0 && o->decision_weight != 1.0) { /* absent when plain: older states still match */
        size_t used = strlen(out);
        if (used < size) snprintf(out + used, size - used, ";decision=%.17g", o->decision_weight);
    }
}

int nd_trainer_parse_description(const char *s, nd_trainer_opts *o, int *full, int *rank, double *alpha,
                                 needle_error *err)
{
    char buf[1024];
    if (strlen(s) >= sizeof buf) return nd_errorf(err, NEEDLE_EFORMAT, "training options: line too long");
    strcpy(buf, s);
    for (char *tok = strtok(buf, ";"); tok; tok = strtok(NULL, ";")) {
        char *eq = strchr(tok, '=');
        if (!eq) return nd_errorf(err, NEEDLE_EFORMAT, "training options: '%s' is not key=value", tok);
        *eq = '\0';
        const char *k = tok, *v = eq + 1;
        int rc = 0;
        if (!strcmp(k, "mode")) *full = !strcmp(v, "full");
        else if (!strcmp(k, "rank")) rc = nd_parse_int(v, 0, 4096, "training options: rank", rank, err);
        else if (!strcmp(k, "alpha")) rc = nd_parse_double(v, 0, 1e6, "training options: alpha", alpha, err);
        else if (!strcmp(k, "epochs")) rc = nd_parse_int(v, 1, 1000000, "training options: epochs", &o->epochs, err);
        else if (!strcmp(k, "batch")) rc = nd_parse_int(v, 1, 65536, "training options: batch", &o->batch_size, err);
        else if (!strcmp(k, "max_len")) rc = nd_parse_int(v, 2, 1 << 20, "training options: max_len", &o->max_len, err);
        else if (!strcmp(k, "lr")) rc = nd_parse_double(v, 1e-12, 10, "training options: lr", &o->lr, err);
        else if (!strcmp(k, "val_split"))
            rc = nd_parse_double(v, 0, 0.99, "training options: val_split", &o->val_split, err);
        else if (!strcmp(k, "seed")) rc = nd_parse_u64(v, "training options: seed", &o->seed, err);
        else if (!strcmp(k, "decision"))
            rc = nd_parse_double(v, 0, 1000, "training options: decision", &o->decision_weight, err);
        else if (!strcmp(k, "bucket")) o->bucket = !strcmp(v, "batch") ? ND_BUCKET_BATCH : ND_BUCKET_GLOBAL;
        else if (!strcmp(k, "bucket_window"))
            rc = nd_parse_int(v, 0, 1 << 20, "training options: bucket_window", &o->bucket_window, err);
        /* unknown keys: written by a newer build, ignored */
        if (rc) return rc;
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The trainable slab: LoRA factors, or every parameter up to the heads. */
static void trainable(nd_train_model *m, float **w, float **g, size_t *n)
{
    if (m->lora) {
        *w = m->lora;
        *g = m->lora_grads;
        *n = m->n_lora;
        return;
    }
    *w = m->params;
    *g = m->grads;
    *n = nd_train_full_trainable(m);
    float *master = nd_qat_master(m, n); /* full QAT: the optimiser moves the float master weights */
    if (master) *w = master;
}

/* ---- the batches of one epoch ---------------------------------------------- */
typedef struct epoch_plan {
    int *rows;  /* the rows in visiting order; batch b is rows[start[b] .. start[b]+count[b]) */
    int *start, *count, *len; /* per batch: first row, rows, padded length T */
    int n_batches;
} epoch_plan;

static void plan_free(epoch_plan *p)
{
    free(p->rows); free(p->start); free(p->count); free(p->len);
    memset(p, 0, sizeof *p);
}

typedef struct { int len, pos, row; } sort_key;

static int by_len_then_pos(const void *a, const void *b)
{
    const sort_key *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos); /* ties keep the shuffled order: deterministic */
}

static int longest_of(const nd_dataset *ds, const int *rows, int n)
{
    int L = 0;
    for (int i = 0; i < n; i++) L = ds->ex[rows[i]].len > L ? ds->ex[rows[i]].len : L;
    return L;
}

/* Cut rows[0..n) into batches of B.  GLOBAL: in order, every batch padded to
 * T_global.  BATCH: sort within windows, pad each batch to its own bucket,
 * shuffle the batch order with the stream (seed, shuffle_stream). */
static int plan_epoch(epoch_plan *p, const nd_dataset *ds, const int *rows, int n, int B, int T_global,
                      const nd_trainer_opts *o, uint64_t shuffle_stream)
{
    memset(p, 0, sizeof *p);
    int nb = (n + B - 1) / B;
    p->rows = malloc(sizeof(int) * (size_t)(n ? n : 1));
    p->start = malloc(sizeof(int) * (size_t)(nb ? nb : 1));
    p->count = malloc(sizeof(int) * (size_t)(nb ? nb : 1));
    p->len = malloc(sizeof(int) * (size_t)(nb ? nb : 1));
    if (!p->rows || !p->start || !p->count || !p->len) { plan_free(p); return NEEDLE_ENOMEM; }
    memcpy(p->rows, rows, sizeof(int) * (size_t)n);
    p->n_batches = nb;
    int batch_mode = o->bucket == ND_BUCKET_BATCH;
    if (batch_mode && o->bucket_window > 0) {
        size_t win = (size_t)o->bucket_window * (size_t)B;
        sort_key *k = malloc(sizeof *k * (size_t)(n ? n : 1));
        if (!k) { plan_free(p); return NEEDLE_ENOMEM; }
        for (int i = 0; i < n; i++) k[i] = (sort_key){ds->ex[rows[i]].len, i, rows[i]};
        for (size_t w0 = 0; w0 < (size_t)n; w0 += win) {
            size_t wn = (size_t)n - w0 < win ? (size_t)n - w0 : win;
            qsort(k + w0, wn, sizeof *k, by_len_then_pos);
        }
        for (int i = 0; i < n; i++) p->rows[i] = k[i].row;
        free(k);
    }
    int *order = malloc(sizeof(int) * (size_t)(nb ? nb : 1));
    if (!order) { plan_free(p); return NEEDLE_ENOMEM; }
    for (int b = 0; b < nb; b++) order[b] = b;
    if (batch_mode && o->bucket_window > 0) {
        /* sorted windows would otherwise visit short batches, then long ones */
        nd_rng r;
        nd_rng_seed_stream(&r, o->seed, shuffle_stream);
        nd_rng_shuffle_int(&r, order, (size_t)nb);
    }
    int cap = o->max_len;
    for (int b = 0; b < nb; b++) {
        int s = order[b] * B, c = n - s < B ? n - s : B;
        p->start[b] = s;
        p->count[b] = c;
        p->len[b] = batch_mode ? nd_bucket_len_min(longest_of(ds, p->rows + s, c), ND_BUCKET_MIN_LEN, cap) : T_global;
        if (p->len[b] > T_global) p->len[b] = T_global;
    }
    free(order);
    return 0;
}

/* Token-weighted mean loss over rows idx[0..n). */
static double eval_loss(nd_train_model *m, const nd_dataset *ds, const int *idx, int n, int B, int T, int pad,
                        const nd_trainer_opts *o, int32_t *ids, int32_t *tg)
{
    epoch_plan p;
    /* validation order does not change the (token-weighted) mean, so it is
     * always sorted when buckets are per batch: the least padding */
    nd_trainer_opts vo = *o;
    if (vo.bucket == ND_BUCKET_BATCH) vo.bucket_window = (n + B - 1) / B + 1;
    if (plan_epoch(&p, ds, idx, n, B, T, &vo, 0)) return NAN;
    double sum = 0.0;
    long count = 0;
    for (int b = 0; b < p.n_batches; b++) {
        int k = p.count[b], Tb = p.len[b], Bb = o->bucket == ND_BUCKET_BATCH ? k : B;
        nd_make_batch(ds, p.rows + p.start[b], k, Bb, Tb, pad, ids, tg);
        int c = 0;
        sum += nd_train_step_grad(m, ids, tg, Bb, Tb, 0, &c);
        count += c;
    }
    plan_free(&p);
    return count ? sum / (double)count : NAN;
}

/* ---- the best weights and early stopping ------------------------------------- */
typedef struct best_keeper {
    float *w;    /* a copy of the trainable weights at the best validation (keep_best only) */
    double loss; /* INFINITY before the first validation */
    int step, since;
} best_keeper;

/* Note a validation loss; returns 1 when patience has run out. */
static int note_validation(best_keeper *k, const float *w, size_t nw, double v, int step, int patience)
{
    if (v < k->loss) {
        k->loss = v;
        k->step = step;
        k->since = 0;
        if (k->w) memcpy(k->w, w, nw * sizeof *w);
        return 0;
    }
    k->since++;
    return patience > 0 && k->since >= patience;
}

/* "1h02m", "3m12s", "45s" */
static void format_duration(char *out, size_t n, double s)
{
    long t = s > 0 && s < 1e9 ? (long)(s + 0.5) : 0;
    if (t >= 3600) snprintf(out, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(out, n, "%ldm%02lds", t / 60, t % 60);
    else snprintf(out, n, "%lds", t);
}

/* ---- the run ------------------------------------------------------------------ */
typedef struct run_ctx {
    nd_train_model *m;
    const nd_dataset *ds;
    const nd_trainer_opts *o;
    nd_adamw opt;
    nd_train_state st; /* the position and history, saved as they are */
    int total;
} run_ctx;

static int save_state(run_ctx *c, needle_error *err)
{
    int rc = nd_train_state_save(c->o->save_path, c->m, &c->opt, &c->st, err);
    if (!rc && c->o->progress) {
        fprintf(c->o->progress, "  saved the training state at step %d to %s\n", c->st.step, c->o->save_path);
        fflush(c->o->progress);
    }
    return rc;
}

static int write_plot(run_ctx *c, needle_error *err)
{
    if (!c->o->plot_path) return 0;
    return nd_plot_loss_svg(c->o->plot_path, c->st.train_loss, c->st.n_train_loss, c->st.val_loss, c->st.val_step,
                            c->st.n_val_loss, err);
}

/* Check that a resumed state fits this run and take its position. */
static int adopt_state(run_ctx *c, nd_train_state *loaded, const char *desc, int n, needle_error *err)
{
    const char *path = c->o->resume_path;
    if (strcmp(loaded->opts, desc) != 0)
        return nd_errorf(err, NEEDLE_EINVAL, "%s: saved with options \"%s\", this run has \"%s\"", path,
                         loaded->opts, desc);
    if (loaded->data_hash != nd_dataset_fingerprint(c->ds) || loaded->n_order != n)
        return nd_errorf(err, NEEDLE_EINVAL, "%s: saved for other training data (%d rows; this run has %d)", path,
                         loaded->n_order, n);
    for (int i = 0; i < n; i++)
        if (loaded->order[i] < 0 || loaded->order[i] >= n)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: row order entry %d is %d, outside 0..%d", path, i,
                             loaded->order[i], n - 1);
    if (loaded->step < 0 || loaded->step > c->total || loaded->epoch < 0 || loaded->epoch > c->o->epochs ||
        loaded->n_train_loss != loaded->step || loaded->n_val_loss > c->o->epochs)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: position step %d epoch %d does not fit a run of %d steps", path,
                         loaded->step, loaded->epoch, c->total);
    return 0;
}

int nd_trainer_run(nd_train_model *m, const nd_dataset *ds, int pad_id, const nd_trainer_opts *o,
                   nd_trainer_result *res, needle_error *err)
{
    memset(res, 0, sizeof *res);
    if (!m->lora && !m->grads)
        return nd_errorf(err, NEEDLE_ESTATE, "trainer: neither LoRA nor full training is enabled");
    /* !(x >= lo) rather than x < lo: NaN fails every comparison and must be refused too */
    if (!isfinite(o->lr) || !(o->lr > 0))
        return nd_errorf(err, NEEDLE_EINVAL, "trainer: learning rate %g is not a positive finite number", o->lr);
    if (o->epochs < 1 || o->batch_size < 1 || !(o->val_split >= 0) || !(o->val_split < 1) || o->bucket_window < 0 ||
        (o->bucket != ND_BUCKET_GLOBAL && o->bucket != ND_BUCKET_BATCH) || o->save_every < 0 ||
        (o->save_every > 0 && !o->save_path))
        return nd_errorf(err, NEEDLE_EINVAL, "trainer: bad options (epochs %d, batch %d, val split %g)", o->epochs,
                         o->batch_size, o->val_split);
    int n = ds->n;
    run_ctx c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.ds = ds;
    c.o = o;
    int *order = malloc(sizeof(int) * (size_t)n);
    if (!order) return nd_errorf(err, NEEDLE_ENOMEM, "trainer: out of memory");
    for (int i = 0; i < n; i++) order[i] = i;
    nd_rng rng;
    nd_rng_seed(&rng, o->seed);
    nd_rng_shuffle_int(&rng, order, (size_t)n);
    int n_val = (int)floor(n * o->val_split);
    if (o->val_tail > 0) { /* a validation file given apart: its rows come last, in order */
        n_val = o->val_tail < n ? o->val_tail : n - 1;
        for (int i = 0; i < n; i++) order[i] = i < n_val ? n - n_val + i : i - n_val;
        nd_rng_shuffle_int(&rng, order + n_val, (size_t)(n - n_val));
    }
    if (n - n_val < 1) n_val = n - 1;
    int *val = order, *train = order + n_val, n_train = n - n_val;
    int longest = 0;
    for (int i = 0; i < n; i++) longest = ds->ex[i].len > longest ? ds->ex[i].len : longest;
    int T = nd_bucket_len(longest, o->max_len < m->cfg.max_seq_len ? o->max_len : m->cfg.max_seq_len);
    if (longest > T) { /* the loader skips such rows; a batch must never cut one */
        free(order);
        return nd_errorf(err, NEEDLE_ELIMIT,
                         "trainer: a row of %d tokens is longer than the %d the model takes (max_seq_len %d, --max-len "
                         "%d); load the data with that limit so it is skipped",
                         longest, T, m->cfg.max_seq_len, o->max_len);
    }
    int B = o->batch_size < n_train ? o->batch_size : n_train;
    int steps_per_epoch = (n_train + B - 1) / B;
    /* in 64 bits: a huge --epochs must be an error, not a signed overflow */
    int64_t total64 = (int64_t)steps_per_epoch * o->epochs;
    if (total64 > (1 << 30)) {
        free(order);
        return nd_errorf(err, NEEDLE_ELIMIT, "trainer: %d epochs x %d steps = %lld steps, more than the %d allowed",
                         o->epochs, steps_per_epoch, (long long)total64, 1 << 30);
    }
    int total = (int)total64;
    c.total = total;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)B * T), *tg = malloc(sizeof(int32_t) * (size_t)B * T);
    float *w, *g;
    size_t nw;
    trainable(m, &w, &g, &nw);
    char desc[512];
    nd_trainer_describe(o, m, desc, sizeof desc);
    best_keeper best = {NULL, INFINITY, 0, 0};
    int rc = (!ids || !tg) ? nd_errorf(err, NEEDLE_ENOMEM, "trainer: out of memory") : 0;
    if (!rc && o->keep_best && n_val && !(best.w = malloc(sizeof(float) * (nw ? nw : 1))))
        rc = nd_errorf(err, NEEDLE_ENOMEM, "trainer: out of memory for the best weights");
    if (!rc) rc = nd_adamw_init(&c.opt, nw, err);
    if (!rc) rc = nd_train_state_init(&c.st, n, total, o->epochs, err);
    /* the largest batch first: smaller per-batch buckets then reuse its memory */
    if (!rc) rc = nd_train_plan(m, B, T, err);
    int start_epoch = 0, start_batch = 0;
    if (!rc && o->resume_path) {
        nd_train_state loaded;
        rc = nd_train_state_load(o->resume_path, m, &c.opt, &loaded, err);
        if (!rc) {
            rc = adopt_state(&c, &loaded, desc, n, err);
            if (!rc) {
                nd_train_state_copy(&c.st, &loaded);
                for (int i = 0; i < n; i++) order[i] = c.st.order[i];
                start_epoch = c.st.epoch;
                start_batch = c.st.batch;
            }
            nd_train_state_free(&loaded);
        }
    }
    if (rc) {
        nd_adamw_free(&c.opt);
        nd_train_state_free(&c.st);
        free(order); free(ids); free(tg); free(best.w);
        return rc;
    }
    snprintf(c.st.opts, sizeof c.st.opts, "%s", desc);
    c.st.data_hash = nd_dataset_fingerprint(ds);
    res->n_train = n_train;
    res->n_val = n_val;
    res->seq_len = T;
    if (o->progress) {
        fprintf(o->progress, "  %d train rows, %d validation rows, batch %d x %d%s, %d steps, %zu trainable params\n",
                n_train, n_val, B, T, o->bucket == ND_BUCKET_BATCH ? " (largest; each batch padded to its own bucket)" : "",
                total, nw);
        if (o->resume_path)
            fprintf(o->progress, "  resumed from %s at step %d (epoch %d, batch %d)\n", o->resume_path, c.st.step,
                    start_epoch + 1, start_batch);
    }
    double t0 = now_s(), tw = t0;
    long tokens = 0, tokens_win = 0;
    int step = c.st.step, step0 = c.st.step;
    res->best_val_loss = NAN;
    res->first_loss = c.st.n_train_loss ? c.st.train_loss[0] : 0.0;
    for (int ep = start_epoch; ep < o->epochs && !rc && !res->stopped && !res->early_stopped; ep++) {
        int resuming = ep == start_epoch && o->resume_path;
        if (!resuming) {
            /* the epoch's shuffle: the saved order already has it when resuming mid-epoch */
            nd_rng er;
            nd_rng_seed_stream(&er, o->seed, 1000 + (uint64_t)ep);
            nd_rng_shuffle_int(&er, train, (size_t)n_train);
            c.st.ep_sum = 0;
            c.st.ep_steps = 0;
        }
        epoch_plan p;
        if (plan_epoch(&p, ds, train, n_train, B, T, o, 2000 + (uint64_t)ep)) {
            rc = nd_errorf(err, NEEDLE_ENOMEM, "trainer: out of memory");
            break;
        }
        for (int bi = resuming ? start_batch : 0; bi < p.n_batches; bi++, step++) {
            int k = p.count[bi], Tb = p.len[bi], Bb = o->bucket == ND_BUCKET_BATCH ? k : B;
            long real = nd_make_batch(ds, p.rows + p.start[bi], k, Bb, Tb, pad_id, ids, tg);
            int cnt = 0;
            double loss = nd_train_step_grad(m, ids, tg, Bb, Tb, 1, &cnt);
            if (!isfinite(loss)) {
                rc = nd_errorf(err, NEEDLE_EFORMAT,
                               "trainer: the loss at step %d is %g (not finite): training stopped, nothing "
                               "written (try a lower --lr)", step + 1, loss);
                break;
            }
            loss = cnt ? loss / cnt : 0.0;
            nd_adamw_step(&c.opt, w, g, nd_schedule_lr(o->lr, step, total));
            if (!m->lora) nd_train_restore_constants(m);
            nd_qat_master_moved(m);
            tokens += real;
            tokens_win += real;
            res->real_tokens += real;
            res->padded_tokens += (long)Bb * Tb;
            c.st.ep_sum += loss;
            c.st.ep_steps++;
            if (step == 0) res->first_loss = loss;
            res->last_loss = loss;
            c.st.train_loss[c.st.n_train_loss++] = (float)loss;
            c.st.step = step + 1;
            c.st.epoch = ep;
            c.st.batch = bi + 1;
            for (int i = 0; i < n; i++) c.st.order[i] = order[i];
            if (o->progress && ((step + 1) % (o->log_every > 0 ? o->log_every : 1) == 0 || step == 0 ||
                                step + 1 == total)) {
                double t = now_s();
                char eta[32];
                format_duration(eta, sizeof eta, (t - t0) / (step + 1 - step0) * (total - step - 1));
                fprintf(o->progress, "  step %7d/%d  loss %.4f  %.0f tok/s  eta %s\n", step + 1, total, loss,
                        tokens_win / (t - tw > 1e-9 ? t - tw : 1e-9), eta);
                fflush(o->progress);
                tw = t;
                tokens_win = 0;
            }
            if (o->save_every > 0 && (step + 1) % o->save_every == 0 && (rc = save_state(&c, err))) break;
            if (n_val && o->eval_every > 0 && (step + 1) % o->eval_every == 0 && step + 1 < total &&
                bi + 1 < p.n_batches) { /* the epoch's end validates anyway */
                double v = eval_loss(m, ds, val, n_val, B, T, pad_id, o, ids, tg);
                int out_of_patience = note_validation(&best, w, nw, v, step + 1, o->patience);
                if (o->progress) {
                    fprintf(o->progress, "  step %7d/%d  val loss %.4f%s\n", step + 1, total, v,
                            best.step == step + 1 ? "  (best)" : "");
                    fflush(o->progress);
                }
                res->last_val_loss = v;
                if (out_of_patience) {
                    res->early_stopped = 1;
                    step++;
                    break;
                }
            }
            if (o->stop_after > 0 && step + 1 >= o->stop_after && step + 1 < total) {
                res->stopped = 1;
                step++;
                break;
            }
        }
        plan_free(&p);
        if (rc || res->stopped || res->early_stopped) break;
        res->last_val_loss = n_val ? eval_loss(m, ds, val, n_val, B, T, pad_id, o, ids, tg) : NAN;
        int out_of_patience = n_val && note_validation(&best, w, nw, res->last_val_loss, step, o->patience);
        if (n_val) {
            c.st.val_loss[c.st.n_val_loss] = (float)res->last_val_loss;
            c.st.val_step[c.st.n_val_loss++] = step;
        }
        /* the next epoch starts from its first batch */
        c.st.epoch = ep + 1;
        c.st.batch = 0;
        if (o->progress) {
            fprintf(o->progress, "  epoch %d/%d  train loss %.4f", ep + 1, o->epochs,
                    c.st.ep_sum / (c.st.ep_steps ? c.st.ep_steps : 1));
            if (n_val) fprintf(o->progress, "  val loss %.4f%s", res->last_val_loss, best.step == step ? "  (best)" : "");
            fprintf(o->progress, "\n");
            fflush(o->progress);
        }
        if (!rc) rc = write_plot(&c, err);
        if (out_of_patience) res->early_stopped = 1;
    }
    if (!rc && res->early_stopped && o->progress)
        fprintf(o->progress, "  stopped early: %d validations without a better loss than %.4f (step %d)\n", best.since,
                best.loss, best.step);
    if (!rc && best.loss < INFINITY) {
        res->best_val_loss = best.loss;
        res->best_step = best.step;
        if (best.w && best.step != step) { /* the last weights are not the best: return the best */
            memcpy(w, best.w, sizeof(float) * nw);
            if (o->progress)
                fprintf(o->progress, "  kept the weights of step %d (val loss %.4f), not the last step's\n", best.step,
                        best.loss);
        }
    }
    free(best.w);
    if (!rc) rc = write_plot(&c, err);
    /* the last update can overflow even when every loss was finite: never hand back NaN weights */
    for (size_t i = 0; !rc && i < nw; i++)
        if (!isfinite(w[i]))
            rc = nd_errorf(err, NEEDLE_EFORMAT,
                           "trainer: weight %zu is not finite after %d steps: training stopped, nothing written "
                           "(try a lower --lr)", i, step);
    res->steps = step;
    res->seconds = now_s() - t0;
    res->tokens_per_s = tokens / (res->seconds > 1e-9 ? res->seconds : 1e-9);
    nd_adamw_free(&c.opt);
    nd_train_state_free(&c.st);
    free(order); free(ids); free(tg);
    return rc;
}
