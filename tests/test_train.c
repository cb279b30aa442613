/* test_train.c - the training forward against the golden logits, the
 * schedule, AdamW, LoRA save/load and a short overfitting run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/json.h"
#include "io/safetensors.h"
#include "text/tokenizer.h"
#include "train/adamw.h"
#include "train/data.h"
#include "train/schedule.h"
#include "train/train_ckpt.h"
#include "train/train_model.h"

#define GOLDEN "tests/golden/"

static void test_golden_logits(void)
{
    nd_train_model m;
    needle_error err;
    int ignored = -1;
    int rc = nd_train_model_load(&m, GOLDEN "tiny.safetensors", &ignored, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc) return;
    CHECK(ignored == 0);
    char *text = NULL;
    size_t len = 0;
    nd_json *doc = NULL;
    CHECK(nd_read_file(GOLDEN "tiny.json", &text, &len, &err) == 0);
    CHECK(text && nd_json_parse(text, len, "tiny.json", &doc, &err) == 0);
    const nd_json *cases = doc ? nd_json_get(doc, "cases") : NULL;
    CHECK(cases && cases->count == 2);
    int V = m.cfg.vocab_size;
    float *lg = malloc(sizeof(float) * (size_t)V);
    for (size_t c = 0; cases && c < cases->count; c++) {
        const nd_json *cs = &cases->items[c];
        const nd_json *ids_j = nd_json_get(cs, "ids"), *pos = nd_json_get(cs, "positions");
        const nd_json *ref = nd_json_get(cs, "logits_f32");
        int T = (int)ids_j->count;
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)T);
        for (int t = 0; t < T; t++) ids[t] = (int32_t)ids_j->items[t].num;
        rc = nd_train_forward(&m, ids, 1, T, &err);
        CHECKF(rc == 0, "%s", err.message);
        const nd_json *at = nd_json_get(ref, "at_positions"), *am = nd_json_get(ref, "argmax"),
                      *lse = nd_json_get(ref, "logsumexp");
        double maxd = 0, maxl = 0;
        int argmax_bad = 0;
        for (int t = 0; t < T; t++) {
            nd_train_logits_row(&m, t, lg);
            int best = 0;
            double mx = lg[0], s = 0;
            for (int v = 1; v < V; v++)
                if (lg[v] > lg[best]) best = v;
            mx = lg[best];
            for (int v = 0; v < V; v++) s += exp((double)lg[v] - mx);
            maxl = fmax(maxl, fabs(mx + log(s) - lse->items[t].num));
            if (best != (int)am->items[t].num) argmax_bad++;
            for (size_t p = 0; p < pos->count; p++)
                if ((int)pos->items[p].num == t)
                    for (int v = 0; v < V; v++) maxd = fmax(maxd, fabs(lg[v] - at->items[p].items[v].num));
        }
        CHECKF(maxd < 1e-4, "case %zu: logits differ by %g", c, maxd);
        CHECKF(maxl < 1e-4, "case %zu: logsumexp differs by %g", c, maxl);
        CHECKF(argmax_bad == 0, "case %zu: %d argmax differ", c, argmax_bad);
        printf("  golden case %zu: max |logit diff| %.3g, max |lse diff| %.3g\n", c, maxd, maxl);
        free(ids);
    }
    free(lg);
    nd_json_free(doc);
    free(text);
    nd_train_model_free(&m);
}

static void test_schedule(void)
{
    /* T = 100: warmup 5 steps */
    CHECK(nd_schedule_warmup(100) == 5);
    CHECK(nd_schedule_warmup(10) == 1);  /* max(1, 0) */
    CHECK(nd_schedule_warmup(1) == 0);   /* min(.., T-1) */
    CHECK(nd_schedule_warmup(2) == 1);
    CHECK(fabs(nd_schedule_lr(1e-4, 0, 100)) < 1e-20);
    CHECK(fabs(nd_schedule_lr(1e-4, 1, 100) - 2e-5) < 1e-12);
    CHECK(fabs(nd_schedule_lr(1e-4, 5, 100) - 1e-4) < 1e-12);
    /* halfway through the decay: peak/2 */
    CHECK(fabs(nd_schedule_lr(1e-4, 52, 100) - 1e-4 * 0.5 * (1 + cos(M_PI * 47 / 95.0))) <
          1e-12);
    CHECK(nd_schedule_lr(1e-4, 100, 100) == 0.0);
    for (int s = 6; s < 100; s++) CHECK(nd_schedule_lr(1e-4, s, 100) < nd_schedule_lr(1e-4, s - 1, 100));
}

static void test_adamw(void)
{
    nd_adamw o;
    CHECK(nd_adamw_init(&o, 3, NULL) == 0);
    float w[3] = {1.0f, -2.0f, 0.5f};
    float g[3] = {0.3f, -0.4f, 0.0f}; /* norm 0.5: not clipped */
    double n = nd_adamw_step(&o, w, g, 0.1);
    CHECK(fabs(n - 0.5) < 1e-7);
    /* first step: mhat = g, vhat = g^2 -> update lr*(sign(g) + wd*w) (eps aside) */
    CHECKF(fabs(w[0] - (1.0 - 0.1 * (0.3 / (0.3 + 1e-8) + 1e-4 * 1.0))) < 1e-6, "w0 %g", w[0]);
    CHECKF(fabs(w[1] - (-2.0 - 0.1 * (-1.0 + 1e-4 * -2.0))) < 1e-6, "w1 %g", w[1]);
    CHECKF(fabs(w[2] - (0.5 - 0.1 * 1e-4 * 0.5)) < 1e-7, "w2 %g", w[2]); /* decay only */
    /* clipping: a gradient of norm 10 is scaled to norm 1 before the moments */
    nd_adamw o2;
    CHECK(nd_adamw_init(&o2, 2, NULL) == 0);
    float w2[2] = {0, 0}, g2[2] = {6.0f, 8.0f};
    CHECK(fabs(nd_adamw_step(&o2, w2, g2, 1.0) - 10.0) < 1e-6);
    CHECKF(fabs(o2.m[0] - 0.1 * 0.6) < 1e-7 && fabs(o2.m[1] - 0.1 * 0.8) < 1e-7, "m %g %g", o2.m[0], o2.m[1]);
    nd_adamw_free(&o);
    nd_adamw_free(&o2);
}

/* LoRA with a few AdamW steps drives the loss of one fixed batch down, and
 * the adapter saved as safetensors has the SPEC names and shapes. */
static void test_lora_overfit_and_save(void)
{
    nd_train_model m;
    needle_error err;
    int rc = nd_train_model_load(&m, GOLDEN "tiny.safetensors", NULL, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc) return;
    CHECK(nd_train_lora_create(&m, 8, 16.0f, 0, &err) == 0);
    enum { B = 2, T = 16 };
    int32_t ids[B * T], tg[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = 100 + (i * 37) % 500;
    for (int i = 0; i < B * T; i++) tg[i] = (i % T) < T - 1 && (i % T) >= 4 ? ids[i + 1] : -1;
    nd_adamw opt;
    CHECK(nd_adamw_init(&opt, m.n_lora, NULL) == 0);
    int n;
    double first = 0, last = 0;
    for (int step = 0; step < 12; step++) {
        double l = nd_train_step_grad(&m, ids, tg, B, T, 1, &n) / n;
        if (step == 0) first = l;
        last = l;
        nd_adamw_step(&opt, m.lora, m.lora_grads, 1e-2);
    }
    CHECKF(last < first - 0.5, "loss %g -> %g", first, last);
    const char *path = "build-tmp-test-lora.safetensors";
    CHECK(nd_train_save_lora(&m, path, &err) == 0);
    nd_safetensors st;
    CHECK(nd_st_open(path, &st, &err) == 0);
    const nd_st_tensor *a = nd_st_find(&st, "stack.layers.block.self_attn.k_proj.kernel.lora_A");
    const nd_st_tensor *b = nd_st_find(&st, "stack.layers.block.self_attn.out_proj.kernel.lora_B");
    CHECK(a && a->ndim == 3 && a->shape[0] == 4 && a->shape[1] == 128 && a->shape[2] == 8);
    CHECK(b && b->ndim == 3 && b->shape[0] == 4 && b->shape[1] == 8 && b->shape[2] == 128);
    CHECK(nd_st_meta(&st, "rank") && !strcmp(nd_st_meta(&st, "rank"), "8"));
    CHECK(nd_st_meta(&st, "alpha") && !strcmp(nd_st_meta(&st, "alpha"), "16"));
    nd_st_close(&st);
    remove(path);
    nd_adamw_free(&opt);
    nd_train_model_free(&m);
}

/* A checkpoint written by --full reads back to the same forward. */
static void test_full_roundtrip(void)
{
    nd_train_model m, m2;
    needle_error err;
    CHECK(nd_train_model_load(&m, GOLDEN "tiny.safetensors", NULL, &err) == 0);
    const char *path = "build-tmp-test-full.safetensors";
    CHECKF(nd_train_save_full(&m, path, &err) == 0, "%s", err.message);
    CHECKF(nd_train_model_load(&m2, path, NULL, &err) == 0, "%s", err.message);
    CHECK(m.n_params == m2.n_params && memcmp(m.params, m2.params, sizeof(float) * m.n_params) == 0);
    remove(path);
    nd_train_model_free(&m);
    nd_train_model_free(&m2);
}

static void test_load_rejects_bad_files(void)
{
    nd_train_model m;
    needle_error err;
    CHECK(nd_train_model_load(&m, "tests/golden/does-not-exist.safetensors", NULL, &err) != 0);
    /* a file that is neither a checkpoint nor a .cact (a .cact loads dequantised: test_finetune_workflow) */
    CHECK(nd_train_model_load(&m, GOLDEN "tiny.json", NULL, &err) != 0);
}

static void test_data_loader(void)
{
    const char *path = "build-tmp-test-data.jsonl";
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    /* row 1: values; row 2: JSON strings (as the published datasets); row 3 malformed; row 4 no query */
    fputs("{\"query\":\"hi\",\"tools\":[{\"name\":\"f\"}],\"answers\":[{\"name\":\"f\",\"arguments\":{}}]}\n", f);
    fputs("{\"query\":\"yo\",\"tools\":\"[{\\\"name\\\": \\\"f\\\"}]\",\"answers\":\"[]\",\"reasoning\":\"r\"}\n", f);
    fputs("{\"query\": \n\n", f);
    fputs("{\"tools\":[],\"answers\":[]}\n", f);
    fclose(f);
    nd_tokenizer *tok = NULL;
    needle_error err;
    CHECK(nd_tokenizer_load_spm(GOLDEN "tok8k.model", &tok, &err) == 0);
    nd_dataset ds;
    FILE *sink = fopen("/dev/null", "w");
    CHECKF(nd_dataset_load_jsonl(path, tok, 1024, sink, &ds, &err) == 0, "%s", err.message);
    if (sink) fclose(sink);
    CHECK(ds.n == 2 && ds.malformed == 2 && ds.lines == 4);
    for (int i = 0; i < ds.n; i++) {
        nd_example *ex = &ds.ex[i];
        CHECK(ex->ids[0] == 2 && ex->ids[ex->len - 1] == 1); /* BOS ... EOS */
        CHECK(ex->mask[0] == 0 && ex->mask[ex->len - 1] == 1);
    }
    /* the batch: padded with PAD, a target wherever the NEXT token is in the loss */
    int idx[1] = {0};
    int T = nd_bucket_len(ds.max_len_seen, 1024);
    CHECK(T == 128);
    int32_t *ids = malloc(sizeof(int32_t) * 2 * T), *tg = malloc(sizeof(int32_t) * 2 * T);
    long real = nd_make_batch(&ds, idx, 1, 2, T, 0, ids, tg);
    nd_example *ex = &ds.ex[0];
    CHECK(real == ex->len);
    CHECK(tg[ex->len - 2] == 1 && tg[ex->len - 1] == -1 && tg[0] == -1 && ids[T] == 0 && tg[T + 5] == -1);
    int n_tg = 0, n_mask = 0;
    for (int t = 0; t < T; t++) n_tg += tg[t] >= 0;
    for (int t = 0; t < ex->len; t++) n_mask += ex->mask[t];
    CHECK(n_tg == n_mask);
    CHECK(nd_bucket_len(129, 1024) == 256 && nd_bucket_len(5000, 1024) == 1024 && nd_bucket_len(3, 64) == 64);
    free(ids);
    free(tg);
    nd_dataset_free(&ds);
    nd_tokenizer_free(tok);
    remove(path);
}

int main(void)
{
    RUN(test_data_loader);
    RUN(test_golden_logits);
    RUN(test_schedule);
    RUN(test_adamw);
    RUN(test_lora_overfit_and_save);
    RUN(test_full_roundtrip);
    RUN(test_load_rejects_bad_files);
    return check_summary();
}
