/* test_qat.c - LoRA under deploy numerics (train/qat.h) and the build checks
 * that follow an adapter's recorded scheme (SPEC 12).
 *
 * The forward is held to the reference: with B = 0 the merged weights are
 * the checkpoint's, so the QAT forward of tests/golden/tiny.safetensors at
 * CQ 4 bits must give the reference's logits for tiny_w4.cact (the same
 * weights exported at 4 bits): tiny_a8.json's logits_w4_quant_false with the
 * activations left float, and logits_a8 with A8 (case 1, which has no
 * rounding tie, so the whole row is held to 1e-4).  The gradients are held to
 * the reference's own jax.grad by tests/python/test_qat_oracle.py.
 * The .cact also stores the non-CQ tensors (norm scales, gates, Hadamard
 * diagonals, mHC scalars, taps) as FP16, which the reference's training STE
 * does not round; the test rounds them first so the two sides hold the same
 * numbers.  In one embedding row of this checkpoint (1414) our quantiser
 * picks another 4-bit code for one group than the reference exporter did (the
 * whole row moves by 1.5e-3; every other CQ matrix decodes identically), as
 * float rounding at a decision boundary can.  The test finds such rows by
 * decoding the .cact, allows at most two, and leaves their logit columns out
 * (no case id uses them). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/file.h"
#include "core/fp16.h"
#include "core/json.h"
#include "io/safetensors.h"
#include "model/weights.h"
#include "quant/cq.h"
#include "needle.h"
#include "train/merge.h"
#include "train/qat.h"
#include "train/train_ckpt.h"

#define CKPT "tests/golden/tiny.safetensors"
#define GOLDEN "tests/golden/tiny_a8.json"
#define TOK "tests/golden/tok8k.model"

/* Embedding rows where our CQ differs from the .cact's (code ties): skip[v] = 1. */
static int tie_rows(const nd_train_model *m, unsigned char *skip)
{
    nd_weights w;
    needle_error err;
    if (nd_weights_load("tests/golden/tiny_w4.cact", &w, &err)) return -1;
    const nd_matrix *E = &w.embedding;
    const float *ours = nd_train_param(m, ND_P_EMBEDDING);
    int sb = nd_cq_storage_bits(E->cq_bits), n = 0;
    float *row = malloc(sizeof(float) * (size_t)E->cols_pad);
    for (int r = 0; row && r < E->rows; r++) {
        nd_cq_dequant_row(E->cq_idx + (size_t)r * (size_t)E->cols_pad * sb / 8,
                          E->cq_norms + (size_t)r * (size_t)(E->cols_pad / 128) * 2, E->cols, sb, E->codebook, row);
        double worst = 0;
        for (int c = 0; c < E->cols; c++) worst = fmax(worst, fabs(row[c] - ours[(size_t)r * E->cols + c]));
        if (worst > 1e-6) skip[r] = 1, n++;
    }
    free(row);
    nd_weights_free(&w);
    return n;
}

/* max |ours - golden| over the stored rows of one case (columns in skip left out). */
static double worst_logit_error(nd_train_model *m, const nd_json *c, const char *which, const unsigned char *skip)
{
    const nd_json *ids = nd_json_get(c, "ids"), *pos = nd_json_get(c, "positions");
    const nd_json *rows = nd_json_get(nd_json_get(c, which), "at_positions");
    if (!ids || !pos || !rows) return INFINITY;
    int T = (int)ids->count;
    int32_t *v = malloc(sizeof(int32_t) * (size_t)T);
    float *lg = malloc(sizeof(float) * (size_t)m->cfg.vocab_size);
    for (int i = 0; i < T; i++) v[i] = (int32_t)ids->items[i].num;
    needle_error err;
    double worst = 0.0;
    if (nd_train_forward(m, v, 1, T, &err) != 0) worst = INFINITY;
    for (size_t p = 0; p < pos->count && isfinite(worst); p++) {
        nd_train_logits_row(m, (int)pos->items[p].num, lg);
        const nd_json *row = &rows->items[p];
        if ((int)row->count != m->cfg.vocab_size) { worst = INFINITY; break; }
        for (int k = 0; k < m->cfg.vocab_size; k++)
            if (!skip || !skip[k]) worst = fmax(worst, fabs(lg[k] - row->items[k].num));
    }
    free(v);
    free(lg);
    return worst;
}

/* tiny_a8.json, parsed (NULL after a failed check). */
static nd_json *load_golden(void)
{
    char *text = NULL;
    size_t len = 0;
    needle_error err;
    nd_json *g = NULL;
    if (nd_read_file_max(GOLDEN, (size_t)64 << 20, "golden", &text, &len, &err) ||
        nd_json_parse(text, len, GOLDEN, &g, &err)) {
        CHECKF(0, "%s", err.message);
        g = NULL;
    }
    free(text);
    return g;
}

/* What the .cact holds for the FP16 (non-CQ) tensors: their values rounded to half. */
static void round_fp16_tensors(nd_train_model *m)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].role >= 0 && !m->tensors[i].param->cq)
            for (size_t k = 0; k < m->tensors[i].count; k++) {
                float *w = m->params + m->tensors[i].offset + k;
                *w = nd_half_to_float(nd_float_to_half(*w));
            }
}

/* The golden, and m: the tiny checkpoint as LoRA (rank 4, B = 0) or full, FP16 tensors rounded. */
static nd_json *setup(nd_train_model *m, int lora)
{
    needle_error err;
    nd_json *g = load_golden();
    if (!g) return NULL;
    CHECKF(nd_train_model_load(m, CKPT, NULL, &err) == 0, "%s", err.message);
    CHECK((lora ? nd_train_lora_create(m, 4, 8.0f, 1, &err) : nd_train_enable_full(m, &err)) == 0);
    round_fp16_tensors(m);
    return g;
}

static void test_qat_forward_matches_reference_a8_golden(void)
{
    needle_error err;
    nd_train_model m;
    nd_json *g = setup(&m, 1); /* LoRA with B = 0: the merged weights are the checkpoint's */
    if (!g) return;
    const nd_json *cases = nd_json_get(g, "cases");
    /* full precision first: the A8 logits must not already be what it computes */
    double plain = cases ? worst_logit_error(&m, &cases->items[1], "logits_a8", NULL) : INFINITY;
    CHECK(nd_qat_enable(&m, 4, &err) == 0);
    unsigned char *skip = calloc((size_t)m.cfg.vocab_size, 1);
    int ties = skip ? tie_rows(&m, skip) : -1;
    CHECKF(ties >= 0 && ties <= 2, "%d embedding rows differ from the .cact's", ties);
    const nd_json *ids = cases ? nd_json_get(&cases->items[1], "ids") : NULL;
    for (size_t i = 0; ids && skip && i < ids->count; i++) CHECK(!skip[(int)ids->items[i].num]);
    CHECK(m.qat && m.qat->act_bits == 8 && m.qat->target_bits[0] == 4);
    m.qat->act_bits = 0; /* CQ weights only: the reference's quant=False on the .cact's weights */
    double w4 = cases ? worst_logit_error(&m, &cases->items[1], "logits_w4_quant_false", skip) : INFINITY;
    m.qat->act_bits = 8;
    double a8 = cases ? worst_logit_error(&m, &cases->items[1], "logits_a8", skip) : INFINITY;
    CHECKF(w4 < 1e-4, "CQ W4 forward vs logits_w4_quant_false: %g", w4);
    CHECKF(a8 < 1e-4, "CQ W4 + A8 forward vs logits_a8: %g", a8);
    CHECKF(plain > 100 * a8 && plain > 1e-3, "full precision is %g from logits_a8 (QAT %g)", plain, a8);
    printf("  logits vs reference: W4 %.2g, W4+A8 %.2g (full precision %.2g; %d tie row(s) left out)\n", w4, a8,
           plain, ties);
    free(skip);
    nd_train_model_free(&m);
    nd_json_free(g);
}

/* Full fine-tuning under QAT: the forward is the deploy forward (the same golden as LoRA's),
 * the optimiser's master keeps the float weights, a moved master is re-quantised before the
 * next forward, and freeing the QAT state leaves the master's float weights in m->params. */
static void test_full_qat_master_and_forward(void)
{
    needle_error err;
    nd_train_model m;
    nd_json *g = setup(&m, 0);
    if (!g) return;
    const nd_json *cases = nd_json_get(g, "cases");
    float *before = malloc(sizeof(float) * m.n_params);
    if (!before) { CHECK(0); return; }
    memcpy(before, m.params, sizeof(float) * m.n_params);
    size_t n = 0;
    CHECK(nd_qat_master(&m, &n) == NULL); /* not before it is enabled */
    CHECK(nd_qat_enable(&m, 4, &err) == 0);
    float *master = nd_qat_master(&m, &n);
    CHECK(master && n > 0 && n <= m.n_params && !memcmp(master, before, sizeof(float) * n));
    unsigned char *skip = calloc((size_t)m.cfg.vocab_size, 1);
    int ties = skip ? tie_rows(&m, skip) : -1;
    CHECKF(ties >= 0 && ties <= 2, "%d embedding rows differ from the .cact's", ties);
    double a8 = cases ? worst_logit_error(&m, &cases->items[1], "logits_a8", skip) : INFINITY;
    CHECKF(a8 < 1e-4, "full QAT forward vs logits_a8: %g", a8);
    /* a step of the optimiser moves the master; the next forward sees it quantised. CQ keeps one
     * norm per group, so a row scaled by 2 quantises to twice its old deploy value. */
    const float *E = nd_train_param(&m, ND_P_EMBEDDING);
    size_t e0 = (size_t)(E - m.params);
    int d = m.cfg.d_model;
    float *q_old = malloc(sizeof(float) * (size_t)d);
    if (!q_old) { CHECK(0); return; }
    memcpy(q_old, E, sizeof(float) * (size_t)d);
    int changed = 0;
    for (int c = 0; c < d; c++) changed += q_old[c] != before[e0 + (size_t)c];
    CHECKF(changed > d / 2, "only %d of %d values of a row quantised", changed, d);
    for (int c = 0; master && c < d; c++) master[e0 + (size_t)c] *= 2.0f;
    nd_qat_refresh(&m);
    CHECK(E[0] == q_old[0]); /* the master was not marked moved: nothing re-derived */
    nd_qat_master_moved(&m);
    nd_qat_refresh(&m);
    double worst = 0.0;
    for (int c = 0; c < d; c++) worst = fmax(worst, fabs(E[c] - 2.0 * q_old[c]));
    CHECKF(worst < 1e-3, "scaled row re-quantised %g from twice its old value", worst);
    nd_qat_free(&m); /* the float weights come back */
    CHECK(m.qat == NULL && E[0] == 2.0f * before[e0] && E[d - 1] == 2.0f * before[e0 + (size_t)d - 1]);
    CHECK(!memcmp(m.params + d, before + d, sizeof(float) * (n - (size_t)d)) || e0 != 0);
    free(q_old);
    printf("  full QAT: W4+A8 forward vs reference %.2g; master %zu floats\n", a8, n);
    free(skip);
    free(before);
    nd_train_model_free(&m);
    nd_json_free(g);
}

static void test_a8_quantiser(void)
{
    /* ties round half to even; one scale per row; an all-zero row stays 0 */
    float x[4] = {127.0f, 0.5f, 1.5f, -2.5f}, z[3] = {0, 0, 0};
    nd_qat_act_rows(x, 1, 4, 8);
    CHECK(x[0] == 127.0f && x[1] == 0.0f && x[2] == 2.0f && x[3] == -2.0f);
    nd_qat_act_rows(z, 1, 3, 8);
    CHECK(z[0] == 0 && z[1] == 0 && z[2] == 0);
    int bits, map;
    nd_config c;
    memset(&c, 0, sizeof c);
    CHECK(nd_qat_parse_mode("auto", &c, &bits, &map) == 0 && bits == 4 && !map);
    snprintf(c.weight_bits, sizeof c.weight_bits, "default=4,attn.v_proj=2");
    CHECK(nd_qat_parse_mode(NULL, &c, &bits, &map) == 0 && bits == 0 && map);
    CHECK(nd_qat_parse_mode("none", &c, &bits, &map) == 0 && bits == 0 && !map);
    CHECK(nd_qat_parse_mode("2", &c, &bits, &map) == 0 && bits == 2);
    CHECK(nd_qat_parse_mode("3", &c, &bits, &map) < 0);
}

/* An adapter's metadata, and `build` following it. */
static void test_adapter_scheme_and_build(void)
{
    char dir[] = "/tmp/needle_qat_XXXXXX";
    if (!mkdtemp(dir)) { CHECK(0); return; }
    char qat_path[256], fp_path[256], cact[256];
    snprintf(qat_path, sizeof qat_path, "%s/qat.safetensors", dir);
    snprintf(fp_path, sizeof fp_path, "%s/fp.safetensors", dir);
    snprintf(cact, sizeof cact, "%s/out.cact", dir);
    needle_error err;
    nd_train_model m;
    CHECK(nd_train_model_load(&m, CKPT, NULL, &err) == 0);
    CHECK(nd_train_lora_create(&m, 4, 8.0f, 42, &err) == 0);
    CHECK(nd_train_save_lora(&m, fp_path, &err) == 0);
    CHECK(nd_qat_enable(&m, 2, &err) == 0);
    CHECK(nd_train_save_lora(&m, qat_path, &err) == 0);
    nd_train_model_free(&m);

    nd_safetensors st;
    if (nd_st_open(qat_path, &st, &err) == 0) {
        const char *b = nd_st_meta(&st, "qat_bits"), *mp = nd_st_meta(&st, "qat_bits_map"), *s = nd_st_meta(&st, "seed");
        CHECK(b && !strcmp(b, "2") && mp && !strcmp(mp, "null") && s && !strcmp(s, "42"));
        nd_st_close(&st);
    } else CHECKF(0, "%s", err.message);
    if (nd_st_open(fp_path, &st, &err) == 0) {
        const char *b = nd_st_meta(&st, "qat_bits");
        CHECK(b && !strcmp(b, "null"));
        nd_st_close(&st);
    }

    char scheme[256];
    CHECK(nd_lora_deploy_scheme(qat_path, NULL, NULL, scheme, sizeof scheme, &err) == 0 && !strcmp(scheme, "default=2"));
    CHECK(nd_lora_deploy_scheme(qat_path, "2", NULL, scheme, sizeof scheme, &err) == 0);
    CHECK(nd_lora_deploy_scheme(qat_path, "4", NULL, scheme, sizeof scheme, &err) == NEEDLE_EINVAL &&
          strstr(err.message, "W2") && strstr(err.message, "--bits 4"));
    CHECK(nd_lora_deploy_scheme(qat_path, NULL, "default=4", scheme, sizeof scheme, &err) == NEEDLE_EINVAL);
    CHECK(nd_lora_deploy_scheme(fp_path, "4", NULL, scheme, sizeof scheme, &err) == 0 && scheme[0] == '\0');

    /* needle_build: the adapter's width is what gets written; a different --bits is refused */
    needle_build_options bo;
    memset(&bo, 0, sizeof bo);
    bo.checkpoint_path = CKPT;
    bo.tokenizer_path = TOK;
    bo.lora_path = qat_path;
    bo.out_path = cact;
    bo.quiet = 1;
    bo.bits = "3";
    CHECK(needle_build(&bo, &err) == NEEDLE_EINVAL && access(cact, F_OK) != 0);
    bo.bits = NULL;
    CHECKF(needle_build(&bo, &err) == 0, "%s", err.message);
    needle_model *mod = NULL;
    if (needle_model_open(cact, NULL, NULL, &mod, &err) == 0) {
        CHECK(1);
        needle_model_close(mod);
    } else CHECKF(0, "%s", err.message);
    /* the written file says W2: the first CQ tensor record (the embedding) has bits 2 */
    char *blob = NULL;
    size_t n = 0;
    if (nd_read_file_max(cact, (size_t)64 << 20, "cact", &blob, &n, &err) == 0 && n > 120 + 28 * 4 + 44) {
        const unsigned char *rec = (const unsigned char *)blob + 120 + 28 * 4;
        unsigned bits = rec[40] | rec[41] << 8 | rec[42] << 16 | (unsigned)rec[43] << 24;
        CHECKF(rec[0] == 3 && bits == 2, "dtype %d bits %u", rec[0], bits);
    } else CHECK(0);
    free(blob);
    /* a full-precision adapter leaves the choice to --bits */
    bo.lora_path = fp_path;
    bo.bits = "3";
    CHECKF(needle_build(&bo, &err) == 0, "%s", err.message);
    remove(cact);
    remove(qat_path);
    remove(fp_path);
    rmdir(dir);
}

int main(void)
{
    RUN(test_a8_quantiser);
    RUN(test_qat_forward_matches_reference_a8_golden);
    RUN(test_full_qat_master_and_forward);
    RUN(test_adapter_scheme_and_build);
    return check_summary();
}
