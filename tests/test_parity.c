/* test_parity.c - the engine and the trainer compute the same model.
 *
 * Two orchestrations of one definition: the engine's incremental forward
 * (model/forward.c: a KV-cached prefill of a prefix, then token-by-token
 * decode) and the trainer's batched forward (train/train_model.c).  On random
 * small configurations - 1..ND_MAX_LANES mHC lanes, 0..3 engram sites,
 * sequences up to max_seq_len, windows off - both read the same float
 * weights (the trainer's parameters, written as a checkpoint and loaded by the
 * engine through model/params.def) and must give the same logits at every
 * position, within 1e-4 relative to the row's largest logit.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/rng.h"
#include "core/formulas.h"
#include "model/model.h"
#include "train/train_ckpt.h"
#include "train/train_model.h"
#include "train/train_ops.h"

#define CKPT "build-tmp-test-parity.safetensors"
#define TOLERANCE 1e-4

static nd_rng rng;
static double worst; /* the largest relative error seen, for the summary line */

static int pick(int lo, int hi) { return lo + (int)nd_rng_below(&rng, (uint64_t)(hi - lo + 1)); }

/* A random small geometry with the given lanes and sites. */
static void random_config(nd_config *c, int lanes, int sites)
{
    nd_config_defaults(c);
    static const int widths[] = {16, 24, 32, 48};
    c->vocab_size = pick(40, 96);
    c->d_model = widths[pick(0, 3)];
    c->num_heads = pick(0, 1) ? 4 : 2;
    c->num_kv_heads = c->num_heads / (pick(0, 1) ? 2 : 1);
    c->attn_dim = c->num_heads * 2 * pick(2, 6); /* even head_dim 4..12 */
    c->num_layers = pick(sites > 0 ? sites : 1, 4);
    c->max_seq_len = pick(12, 64);
    c->rope_theta = pick(0, 1) ? 10000.0f : 100000.0f;
    c->num_orders = pick(1, 3);
    for (int i = 0; i < c->num_orders; i++) c->engram_orders[i] = i + pick(1, 2);
    c->engram_heads = pick(1, 2);
    c->engram_slots = pick(8, 32);
    c->num_sites = sites;
    for (int s = 0, l = 0; s < sites; s++) { /* distinct, increasing layers */
        l = pick(l, c->num_layers - (sites - s));
        c->engram_layers[s] = l++;
    }
    c->mhc_lanes = lanes;
    c->contrastive_dim = 8;
    c->kv_window = 0;
    needle_error err;
    int rc = nd_config_derive(c, "parity", &err);
    CHECKF(rc == 0, "%s", err.message);
}

/* Reference init, then every parameter moved off its special value and the
 * mHC mixing made sensitive (a_* near 0.5, b_res far from 4 I), so that
 * every path of both forwards matters. */
static void random_weights(nd_train_model *m)
{
    nd_train_model_init_reference(m, nd_rng_next(&rng));
    for (size_t i = 0; i < m->n_params; i++) m->params[i] += (float)nd_rng_normal(&rng) * 0.2f;
    int L = m->cfg.num_layers, n = m->cfg.mhc_lanes;
    for (int l = 0; l < L; l++) {
        nd_train_param(m, ND_P_A_PRE)[l] = 0.5f + (float)nd_rng_normal(&rng) * 0.2f;
        nd_train_param(m, ND_P_A_POST)[l] = 0.5f + (float)nd_rng_normal(&rng) * 0.2f;
        nd_train_param(m, ND_P_A_RES)[l] = 0.5f + (float)nd_rng_normal(&rng) * 0.2f;
        for (int i = 0; i < n * n; i++) nd_train_param(m, ND_P_B_RES)[l * n * n + i] = (float)nd_rng_normal(&rng) * 0.5f;
    }
}

/* Largest |a-b| over the row, relative to the row's largest |b| (at least 1). */
static double row_error(const float *a, const float *b, int V)
{
    double diff = 0.0, scale = 1.0;
    for (int v = 0; v < V; v++) {
        double e = fabs((double)a[v] - (double)b[v]);
        if (!(e <= diff)) diff = e; /* a NaN counts as the largest error */
        if (fabs((double)b[v]) > scale) scale = fabs((double)b[v]);
    }
    return diff / scale;
}

/* One configuration: returns the largest relative error over every position. */
static double run_case(int lanes, int sites, int full_length)
{
    nd_config cfg;
    random_config(&cfg, lanes, sites);
    needle_error err;
    nd_train_model tm;
    if (nd_train_model_create(&tm, &cfg, &err)) {
        CHECKF(0, "trainer: %s", err.message);
        return INFINITY;
    }
    random_weights(&tm);
    int T = full_length ? cfg.max_seq_len : pick(2, cfg.max_seq_len), V = cfg.vocab_size;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)T);
    int *eids = malloc(sizeof(int) * (size_t)T);
    for (int t = 0; t < T; t++) eids[t] = ids[t] = (int32_t)nd_rng_below(&rng, (uint64_t)V);
    float *ref = malloc(sizeof(float) * (size_t)T * V), *got = malloc(sizeof(float) * (size_t)T * V);
    double e = INFINITY;

    /* the trainer: one batched forward over the whole sequence */
    CHECKF(nd_train_forward(&tm, ids, 1, T, &err) == 0, "trainer forward: %s", err.message);
    for (int t = 0; t < T; t++) nd_train_logits_row(&tm, t, ref + (size_t)t * V);

    /* the engine: the same weights through a checkpoint, a prefill of a
     * random prefix (every position's logits), then one token at a time */
    CHECKF(nd_train_save_full(&tm, CKPT, &err) == 0, "save: %s", err.message);
    nd_model *em = NULL;
    nd_state *st = NULL;
    nd_model_options mo = {.threads = 1, .acts = NEEDLE_ACTS_FLOAT}; /* the trainer's forward is float */
    nd_state_options so = {.window = cfg.max_seq_len, .sinks = 0, .max_chunk = pick(1, 16)};
    if (nd_model_open(CKPT, &mo, &em, &err) == 0 && nd_state_create(em, &so, &st, &err) == 0) {
        int prefix = pick(1, T);
        uint8_t *want = malloc((size_t)T);
        memset(want, 1, (size_t)T);
        int rc = nd_state_eval(st, eids, prefix, want, got, NULL, &err);
        for (int t = prefix; t < T && rc == 0; t++) rc = nd_state_eval(st, eids + t, 1, want, got + (size_t)t * V, NULL, &err);
        CHECKF(rc == 0, "engine eval: %s", err.message);
        e = 0.0;
        for (int t = 0; t < T; t++) {
            double r = row_error(got + (size_t)t * V, ref + (size_t)t * V, V);
            if (!(r <= e)) e = r;
        }
        CHECKF(e <= TOLERANCE,
               "lanes %d sites %d (d %d, heads %d/%d, hd %d, layers %d, orders %d, T %d, prefix %d): relative error %.3g",
               lanes, sites, cfg.d_model, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.num_layers, cfg.num_orders,
               T, prefix, e);
        free(want);
    } else {
        CHECKF(0, "engine: %s", err.message);
    }
    nd_state_free(st);
    nd_model_free(em);
    remove(CKPT);
    nd_train_model_free(&tm);
    free(ids);
    free(eids);
    free(ref);
    free(got);
    if (e > worst || e != e) worst = e;
    return e;
}

/* Every lane count 1..ND_MAX_LANES, every site count 0..3, on random configs. */
static void test_engine_matches_trainer(void)
{
    for (int lanes = 1; lanes <= ND_MAX_LANES; lanes++)
        for (int sites = 0; sites <= 3; sites++)
            for (int k = 0; k < 2; k++) run_case(lanes, sites, 0);
}

/* The longest sequence the config allows, with RoPE at every position it has. */
static void test_full_length(void)
{
    for (int k = 0; k < 4; k++) run_case(pick(1, ND_MAX_LANES), pick(0, 3), 1);
}

/* Both forwards accept exactly the same lane counts: the one cap. */
static void test_lane_cap(void)
{
    nd_config c;
    random_config(&c, ND_MAX_LANES, 0);
    nd_train_model tm;
    needle_error err;
    CHECKF(nd_train_model_create(&tm, &c, &err) == 0, "%s lanes: %s", "max", err.message);
    nd_train_model_free(&tm);
    c.mhc_lanes = ND_MAX_LANES + 1;
    CHECK(nd_config_derive(&c, "parity", &err) != 0); /* the config refuses more lanes */
    CHECK(nd_train_model_create(&tm, &c, &err) != 0); /* and so does the trainer */
}

/* The trainer's RoPE tables are the engine's, bit for bit, at every position. */
static void test_rope_tables_agree(void)
{
    enum { T = 4096, HD = 32 };
    float *ct = malloc(sizeof(float) * T * HD / 2), *sn = malloc(sizeof(float) * T * HD / 2), cs[HD];
    nd_op_rope_tables(ct, sn, T, HD, 100000.0f);
    int same = 1;
    for (int t = 0; t < T && same; t++) {
        nd_rope_row(100000.0f, HD, t, cs);
        for (int i = 0; i < HD / 2; i++)
            same &= ct[(size_t)t * HD / 2 + i] == cs[i] && sn[(size_t)t * HD / 2 + i] == cs[HD / 2 + i];
    }
    CHECK(same);
    free(ct);
    free(sn);
}

int main(void)
{
    nd_rng_seed(&rng, 20261203);
    RUN(test_lane_cap);
    RUN(test_rope_tables_agree);
    RUN(test_engine_matches_trainer);
    RUN(test_full_length);
    printf("largest relative logit error: %.3g (tolerance %g)\n", worst, TOLERANCE);
    return check_summary();
}
