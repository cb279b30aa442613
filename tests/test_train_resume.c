/* test_train_resume.c - per-batch length buckets, resumable training state
 * (a run stopped and resumed ends bit-identical to an uninterrupted one) and
 * the loss plot. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/file.h"
#include "text/tokenizer.h"
#include "train/data.h"
#include "train/train_ckpt.h"
#include "train/trainer.h"

#define GOLDEN "tests/golden/"
#define DATA "build-tmp-test-resume.jsonl"
#define STATE "build-tmp-test-resume.state"
#define PLOT "build-tmp-test-resume.svg"

static void test_bucket_len_min(void)
{
    CHECK(nd_bucket_len_min(1, 16, 1024) == 16);
    CHECK(nd_bucket_len_min(17, 16, 1024) == 32);
    CHECK(nd_bucket_len_min(64, 16, 1024) == 64);
    CHECK(nd_bucket_len_min(65, 16, 100) == 100);
    CHECK(nd_bucket_len(100, 1024) == 128 && nd_bucket_len(129, 1024) == 256);
}

/* The same rows padded to a shorter length give the same loss and gradients,
 * and a smaller batch reuses the planned memory (no reallocation). */
static void test_shorter_batches_reuse_plan(void)
{
    nd_train_model m;
    needle_error err;
    int rc = nd_train_model_load(&m, GOLDEN "tiny.safetensors", NULL, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc) return;
    CHECK(nd_train_lora_create(&m, 4, 8.0f, 3, &err) == 0);
    for (size_t i = 0; i < m.n_lora; i++) m.lora[i] += 0.01f * (float)((i * 7919) % 13) - 0.06f; /* B != 0 */
    CHECK(nd_train_plan(&m, 3, 64, &err) == 0);
    const void *act = m.act;
    enum { B = 3 };
    int lens[B] = {20, 9, 27};
    double loss[2];
    float *g[2];
    for (int pass = 0; pass < 2; pass++) {
        int T = pass ? 32 : 64;
        int32_t ids[B * 64], tg[B * 64];
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                ids[b * T + t] = t < lens[b] ? 100 + (b * 31 + t * 17) % 3000 : 0;
                tg[b * T + t] = t + 1 < lens[b] && t >= 3 ? 100 + (b * 31 + (t + 1) * 17) % 3000 : -1;
            }
        int n = 0;
        loss[pass] = nd_train_step_grad(&m, ids, tg, B, T, 1, &n);
        g[pass] = malloc(sizeof(float) * m.n_lora);
        memcpy(g[pass], m.lora_grads, sizeof(float) * m.n_lora);
    }
    CHECK(m.act == act);
    CHECKF(fabs(loss[0] - loss[1]) < 1e-5 * fabs(loss[0]), "loss %.9g at T=64, %.9g at T=32", loss[0], loss[1]);
    double gmax = 0, dmax = 0;
    for (size_t i = 0; i < m.n_lora; i++) {
        gmax = fmax(gmax, fabs(g[0][i]));
        dmax = fmax(dmax, fabs(g[0][i] - g[1][i]));
    }
    CHECKF(gmax > 0 && dmax < 1e-4 * gmax, "gradients differ by %g (max %g)", dmax, gmax);
    /* and growing again still works */
    CHECK(nd_train_plan(&m, 4, 128, &err) == 0);
    free(g[0]);
    free(g[1]);
    nd_train_model_free(&m);
}

#define ROWS 10
#define MAX_LEN 64

/* 10 rows of varied length (1..12 one-letter words, about 40..52 tokens): 1 validation row and
 * 9 train rows, so 3 batches an epoch (4, 4, 1: the last one ragged), 6 steps in 2 epochs.  Every row fits MAX_LEN, so the whole-run bucket is 64
 * tokens and the per-batch buckets 48 or 64: as discriminating as longer rows (the property is
 * bit-exactness, which does not depend on length) at half the tokens, so the test stays cheap
 * under qemu-aarch64 (tools/test_cross.sh). */
static int write_data(void)
{
    FILE *f = fopen(DATA, "w");
    if (!f) return -1;
    for (int i = 0; i < ROWS; i++) {
        fprintf(f, "{\"query\":\"");
        for (int k = 0; k < 1 + (i * 7) % 12; k++) fprintf(f, "%c ", (char)('a' + (i + k) % 11));
        fprintf(f, "\",\"tools\":[{\"name\":\"f%d\",\"parameters\":{}}],\"answers\":[{\"name\":\"f%d\",\"arguments\":"
                   "{\"x\":%d}}]}\n", i % 3, i % 3, i);
    }
    fclose(f);
    return 0;
}

typedef struct run_out {
    float *weights;
    size_t n;
    nd_trainer_result res;
    int rc;
} run_out;

/* 1 while the negative checks run: their refusals are printed as expected, not as failures */
static int expect_refusal;

static void run(nd_tokenizer *tok, const nd_dataset *ds, int full, const nd_trainer_opts *o, run_out *out)
{
    memset(out, 0, sizeof *out);
    nd_train_model m;
    needle_error err;
    out->rc = nd_train_model_load(&m, GOLDEN "tiny.safetensors", NULL, &err);
    if (!out->rc) out->rc = full ? nd_train_enable_full(&m, &err) : nd_train_lora_create(&m, 4, 8.0f, o->seed, &err);
    if (!out->rc) out->rc = nd_trainer_run(&m, ds, nd_tokenizer_pad(tok), o, &out->res, &err);
    if (out->rc) {
        printf(expect_refusal ? "  refused, as this check expects: %s\n" : "  run failed: %s\n", err.message);
    } else {
        out->n = full ? m.n_params : m.n_lora;
        out->weights = malloc(sizeof(float) * out->n);
        memcpy(out->weights, full ? m.params : m.lora, sizeof(float) * out->n);
    }
    nd_train_model_free(&m);
}

static void base_opts(nd_trainer_opts *o)
{
    nd_trainer_opts_default(o);
    o->epochs = 2;
    o->batch_size = 4;
    o->lr = 3e-3;
    o->seed = 5;
    o->bucket = ND_BUCKET_BATCH;
    o->bucket_window = 2;
    o->max_len = MAX_LEN;
}

/* Stopped after each step in `stops` (ascending) and resumed each time, the last resumed run going
 * to the end: the same bytes as one run.  Each leg resumes from the state the previous leg saved,
 * so one chain of 6 steps checks every stop point (a resume that lost anything at any of them
 * would change the final bytes) and also that a resumed run's own state resumes exactly. */
static void check_resume(nd_tokenizer *tok, const nd_dataset *ds, int full, int bucket, const int *stops, int n_stops,
                         const run_out *ref)
{
    for (int i = 0; i <= n_stops; i++) {
        nd_trainer_opts o;
        base_opts(&o);
        o.bucket = bucket;
        if (i > 0) o.resume_path = STATE;
        if (i < n_stops) {
            o.save_every = stops[i];
            o.save_path = STATE;
            o.stop_after = stops[i];
        } else {
            o.plot_path = PLOT;
        }
        run_out a;
        run(tok, ds, full, &o, &a);
        if (i < n_stops) {
            CHECKF(a.rc == 0 && a.res.stopped && a.res.steps == stops[i], "%s bucket %d: stop at %d",
                   full ? "full" : "lora", bucket, stops[i]);
            /* the weights at the stop differ from the end result: resuming has work to do */
            CHECK(a.weights && ref->weights && memcmp(a.weights, ref->weights, sizeof(float) * a.n) != 0);
        } else {
            CHECK(a.rc == 0 && !a.res.stopped && a.res.steps == ref->res.steps);
            CHECKF(a.weights && ref->weights && a.n == ref->n && !memcmp(a.weights, ref->weights, sizeof(float) * a.n),
                   "%s bucket %d: resumed after %d stops, weights differ from the uninterrupted run",
                   full ? "full" : "lora", bucket, n_stops);
        }
        free(a.weights);
        if (a.rc) return;
    }
}

static void test_resume_bit_identical(void)
{
    nd_tokenizer *tok = NULL;
    needle_error err;
    CHECK(write_data() == 0);
    CHECK(nd_tokenizer_load_spm(GOLDEN "tok8k.model", &tok, &err) == 0);
    nd_dataset ds;
    CHECK(nd_dataset_load_jsonl(DATA, tok, MAX_LEN, NULL, &ds, &err) == 0);
    CHECK(ds.n == ROWS); /* no row was skipped as too long */
    if (!tok || ds.n != ROWS) return;
    static const int lora_stops[] = {2, 3, 5}; /* mid-epoch, the end of the first epoch, one step before the end */
    static const int full_stops[] = {2};
    long padded[2] = {0, 0};
    for (int full = 0; full < 2; full++)
        for (int bucket = 0; bucket < 2; bucket++) {
            nd_trainer_opts o;
            base_opts(&o);
            o.bucket = bucket;
            run_out ref;
            run(tok, &ds, full, &o, &ref);
            CHECK(ref.rc == 0 && ref.res.steps == 6); /* 9 train rows / 4 = 3 batches, 2 epochs */
            padded[bucket] = ref.res.padded_tokens;
            /* per-batch buckets pad less than one bucket for the whole run (global comes first) */
            if (bucket == ND_BUCKET_BATCH)
                CHECKF(padded[bucket] < padded[ND_BUCKET_GLOBAL] && padded[ND_BUCKET_GLOBAL] == 6 * 4 * MAX_LEN,
                       "padded tokens: %ld per batch, %ld global", padded[bucket], padded[ND_BUCKET_GLOBAL]);
            if (full) check_resume(tok, &ds, full, bucket, full_stops, 1, &ref);
            else check_resume(tok, &ds, full, bucket, lora_stops, 3, &ref);
            free(ref.weights);
        }
    /* the plot of the last resumed run: both series present */
    char *svg = NULL;
    size_t len = 0;
    CHECK(nd_read_file(PLOT, &svg, &len, &err) == 0);
    CHECK(svg && strstr(svg, "<svg") && strstr(svg, "</svg>") && strstr(svg, "<polyline") && strstr(svg, "<circle"));
    free(svg);

    /* a state refuses other options, other data and damaged files */
    nd_trainer_opts o;
    base_opts(&o);
    o.save_every = 2;
    o.save_path = STATE;
    o.stop_after = 2;
    run_out a;
    run(tok, &ds, 0, &o, &a);
    free(a.weights);
    nd_trainer_opts r;
    base_opts(&r);
    r.resume_path = STATE;
    r.batch_size = 5;
    expect_refusal = 1;
    run(tok, &ds, 0, &r, &a);
    CHECK(a.rc == NEEDLE_EINVAL);
    base_opts(&r);
    r.resume_path = STATE;
    run(tok, &ds, 1, &r, &a); /* a LoRA state for a full run */
    CHECK(a.rc != 0);
    free(a.weights);
    nd_dataset fewer = ds;
    fewer.n = ds.n - 1;
    run(tok, &fewer, 0, &r, &a);
    CHECK(a.rc == NEEDLE_EINVAL);
    char *bytes = NULL;
    CHECK(nd_read_file(STATE, &bytes, &len, &err) == 0);
    for (size_t cut = 0; bytes && cut < len; cut += len / 9 + 1) {
        FILE *f = fopen(STATE ".cut", "wb");
        fwrite(bytes, 1, cut, f);
        fclose(f);
        r.resume_path = STATE ".cut";
        run(tok, &ds, 0, &r, &a);
        CHECKF(a.rc != 0, "a state cut at %zu of %zu bytes was accepted", cut, len);
        free(a.weights);
    }
    free(bytes);
    expect_refusal = 0;
    remove(STATE ".cut");
    remove(STATE);
    remove(PLOT);
    remove(DATA);
    nd_dataset_free(&ds);
    nd_tokenizer_free(tok);
}

int main(void)
{
    RUN(test_bucket_len_min);
    RUN(test_shorter_batches_reuse_plan);
    RUN(test_resume_bit_identical);
    return check_summary();
}
