/* test_train_grad.c - every training op's backward against finite differences,
 * then the whole model's gradient (full and LoRA) on a tiny random config.
 *
 * Method: for a scalar L = sum(w * op(inputs)) with fixed random w, the
 * analytic directional derivative g.v is compared with the central difference
 * (L(x + eps v) - L(x - eps v)) / (2 eps) along random directions v, and
 * along v = g/|g| (which catches a gradient that is wrong in any component
 * with a large weight).  Losses are summed in double to keep float32 noise
 * below the tolerance.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "grad_check.h"
#include "train_model_check.h"
#include "core/rng.h"
#include "train/train_model.h"
#include "train/train_ops.h"

/* ---- matmul ---- */
typedef struct { int N, in, out; float *x, *W, *y, *w; } mm_ctx;
static double mm_loss(void *c_)
{
    mm_ctx *c = c_;
    nd_op_matmul_fwd(NULL, c->y, c->x, c->W, c->N, c->in, c->out, 0);
    return wsum(c->w, c->y, (size_t)c->N * c->out);
}
static void test_matmul(void)
{
    mm_ctx c = {7, 13, 21, NULL, NULL, NULL, NULL};
    c.x = randn(7 * 13, 1); c.W = randn(13 * 21, 1); c.y = zeros(7 * 21); c.w = randn(7 * 21, 1);
    float *dx = zeros(7 * 13), *dW = zeros(13 * 21);
    nd_op_matmul_bwd(NULL, dx, dW, c.w, c.x, c.W, 7, 13, 21);
    check_grad("matmul dx", mm_loss, &c, c.x, dx, 7 * 13, 1e-2f, 1e-3);
    check_grad("matmul dW", mm_loss, &c, c.W, dW, 13 * 21, 1e-2f, 1e-3);
    /* the blocked kernel against a plain triple loop, and threads-free vs pooled equality */
    nd_op_matmul_fwd(NULL, c.y, c.x, c.W, 7, 13, 21, 0);
    double maxd = 0;
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < 21; j++) {
            double s = 0;
            for (int k = 0; k < 13; k++) s += (double)c.x[i * 13 + k] * c.W[k * 21 + j];
            maxd = fmax(maxd, fabs(s - c.y[i * 21 + j]));
        }
    CHECKF(maxd < 1e-4, "matmul differs from the plain loop by %g", maxd);
    free(c.x); free(c.W); free(c.y); free(c.w); free(dx); free(dW);
}

static void test_matmul_threads_identical(void)
{
    int N = 37, in = 40, out = 33;
    float *x = randn((size_t)N * in, 1), *W = randn((size_t)in * out, 1), *y1 = zeros((size_t)N * out),
          *y2 = zeros((size_t)N * out);
    nd_threadpool *pool = NULL;
    CHECK(nd_threadpool_create(3, &pool, NULL) == 0);
    nd_op_matmul_fwd(NULL, y1, x, W, N, in, out, 0);
    nd_op_matmul_fwd(pool, y2, x, W, N, in, out, 0);
    CHECK(memcmp(y1, y2, sizeof(float) * (size_t)N * out) == 0);
    nd_threadpool_free(pool);
    free(x); free(W); free(y1); free(y2);
}

/* ---- zcrms ---- */
typedef struct { int N, m, groups, use_scale; float *x, *s, *y, *r, *w; } zc_ctx;
static double zc_loss(void *c_)
{
    zc_ctx *c = c_;
    nd_op_zcrms_fwd(c->y, c->r, c->x, c->use_scale ? c->s : NULL, c->N, c->m, c->groups);
    return wsum(c->w, c->y, (size_t)c->N * c->m);
}
static void test_zcrms(void)
{
    for (int variant = 0; variant < 3; variant++) {
        zc_ctx c = {5, 12, variant == 2 ? 3 : 1, variant != 1, NULL, NULL, NULL, NULL, NULL};
        c.x = randn(60, 1); c.s = randn(12, 0.5f); c.y = zeros(60); c.r = zeros(15); c.w = randn(60, 1);
        zc_loss(&c);
        float *dx = zeros(60), *ds = zeros(12);
        nd_op_zcrms_bwd(dx, c.use_scale ? ds : NULL, c.w, c.x, c.r, c.use_scale ? c.s : NULL, 5, 12, c.groups);
        check_grad("zcrms dx", zc_loss, &c, c.x, dx, 60, 1e-3f, 2e-3);
        if (c.use_scale) check_grad("zcrms dscale", zc_loss, &c, c.s, ds, (size_t)(12 / c.groups), 1e-3f, 2e-3);
        free(c.x); free(c.s); free(c.y); free(c.r); free(c.w); free(dx); free(ds);
    }
}

/* ---- rope ---- */
typedef struct { float *x, *y, *w, *cs, *sn; } rope_ctx;
static double rope_loss(void *c_)
{
    rope_ctx *c = c_;
    nd_op_rope_fwd(c->y, c->x, c->cs, c->sn, 6, 3, 2, 8);
    return wsum(c->w, c->y, 6 * 16);
}
static void test_rope(void)
{
    rope_ctx c;
    c.x = randn(96, 1); c.y = zeros(96); c.w = randn(96, 1); c.cs = zeros(12); c.sn = zeros(12);
    nd_op_rope_tables(c.cs, c.sn, 3, 8, 10000.0f);
    float *dx = zeros(96);
    nd_op_rope_bwd(dx, c.w, c.cs, c.sn, 6, 3, 2, 8);
    check_grad("rope dx", rope_loss, &c, c.x, dx, 96, 1e-2f, 1e-3);
    /* position 0 is the identity */
    rope_loss(&c);
    CHECK(fabsf(c.y[0] - c.x[0]) < 1e-7f && fabsf(c.y[5] - c.x[5]) < 1e-7f);
    free(c.x); free(c.y); free(c.w); free(c.cs); free(c.sn); free(dx);
}

/* ---- attention ---- */
enum { AB = 2, AT = 5, AH = 4, AKV = 2, AHD = 4 };
typedef struct { float *q, *k, *v, *o, *p, *w; } att_ctx;
static double att_loss(void *c_)
{
    att_ctx *c = c_;
    nd_op_attention_fwd(NULL, c->o, c->p, c->q, c->k, c->v, AB, AT, AH, AKV, AHD, AHD, 0);
    return wsum(c->w, c->o, AB * AT * AH * AHD);
}
static void test_attention(void)
{
    size_t nq = AB * AT * AH * AHD, nk = AB * AT * AKV * AHD;
    att_ctx c = {randn(nq, 1), randn(nk, 1), randn(nk, 1), zeros(nq), zeros(AB * AH * AT * AT), randn(nq, 1)};
    att_loss(&c);
    float *dq = zeros(nq), *dk = zeros(nk), *dv = zeros(nk);
    nd_op_attention_bwd(NULL, dq, dk, dv, c.w, c.p, c.q, c.k, c.v, AB, AT, AH, AKV, AHD, AHD, 0);
    check_grad("attention dq", att_loss, &c, c.q, dq, nq, 1e-2f, 2e-3);
    check_grad("attention dk", att_loss, &c, c.k, dk, nk, 1e-2f, 2e-3);
    check_grad("attention dv", att_loss, &c, c.v, dv, nk, 1e-2f, 2e-3);
    /* causality: the first token's output is its own value */
    att_loss(&c);
    CHECK(fabsf(c.o[0] - c.v[0]) < 1e-6f);
    free(c.q); free(c.k); free(c.v); free(c.o); free(c.p); free(c.w); free(dq); free(dk); free(dv);
}

/* ---- sigmoid gate ---- */
typedef struct { float *x, *g, *y, *w; } sg_ctx;
static double sg_loss(void *c_)
{
    sg_ctx *c = c_;
    nd_op_sigmoid_gate_fwd(c->y, c->x, c->g, 20);
    return wsum(c->w, c->y, 20);
}
static void test_sigmoid_gate(void)
{
    sg_ctx c = {randn(20, 1), randn(20, 2), zeros(20), randn(20, 1)};
    float *dx = zeros(20), *dg = zeros(20);
    nd_op_sigmoid_gate_bwd(dx, dg, c.w, c.x, c.g, 20);
    check_grad("gate dx", sg_loss, &c, c.x, dx, 20, 1e-2f, 1e-3);
    check_grad("gate dg", sg_loss, &c, c.g, dg, 20, 1e-2f, 1e-3);
    free(c.x); free(c.g); free(c.y); free(c.w); free(dx); free(dg);
}

/* ---- Hadamard MLP (d=6 padded to 8) ---- */
typedef struct { float *h, *d1, *d2, *d3, *out, *z1, *z2, *w; } hm_ctx;
static double hm_loss(void *c_)
{
    hm_ctx *c = c_;
    nd_op_hada_mlp_fwd(c->out, c->z1, c->z2, c->h, c->d1, c->d2, c->d3, 4, 6, 8);
    return wsum(c->w, c->out, 24);
}
static void test_hada_mlp(void)
{
    hm_ctx c = {randn(24, 1), randn(8, 1), randn(8, 1), randn(8, 1), zeros(24), zeros(32), zeros(32), randn(24, 1)};
    hm_loss(&c);
    float *dh = zeros(24), *g1 = zeros(8), *g2 = zeros(8), *g3 = zeros(8);
    nd_op_hada_mlp_bwd(dh, g1, g2, g3, c.w, c.h, c.z1, c.z2, c.d1, c.d2, c.d3, 4, 6, 8);
    check_grad("mlp dh", hm_loss, &c, c.h, dh, 24, 1e-2f, 2e-3);
    check_grad("mlp d1", hm_loss, &c, c.d1, g1, 8, 1e-2f, 2e-3);
    check_grad("mlp d2", hm_loss, &c, c.d2, g2, 8, 1e-2f, 2e-3);
    check_grad("mlp d3", hm_loss, &c, c.d3, g3, 8, 1e-2f, 2e-3);
    /* the fast transform is the orthonormal Sylvester matrix: H e_1 row check and H H = I */
    float x[8] = {0, 1, 0, 0, 0, 0, 0, 0};
    nd_op_fwht(x, 8);
    float r = 1.0f / sqrtf(8.0f);
    CHECK(fabsf(x[0] - r) < 1e-6f && fabsf(x[1] + r) < 1e-6f && fabsf(x[2] - r) < 1e-6f && fabsf(x[3] + r) < 1e-6f);
    nd_op_fwht(x, 8);
    CHECK(fabsf(x[1] - 1.0f) < 1e-6f && fabsf(x[0]) < 1e-6f);
    free(c.h); free(c.d1); free(c.d2); free(c.d3); free(c.out); free(c.z1); free(c.z2); free(c.w);
    free(dh); free(g1); free(g2); free(g3);
}

/* ---- engram pieces ---- */
typedef struct { float *tab, *e, *ok, *w; int32_t *idx; } eg_ctx;
static double eg_loss(void *c_)
{
    eg_ctx *c = c_;
    nd_op_engram_gather_fwd(c->e, c->tab, c->idx, c->ok, 6, 2, 5, 3);
    return wsum(c->w, c->e, 36);
}
static void test_engram_gather_and_hash(void)
{
    int32_t ids[6] = {2, 10, 11, 12, 13, 14}, idx[12];
    float ok[12];
    int orders[2] = {2, 3};
    nd_op_engram_index(idx, ok, ids, 2, 3, orders, 2, 1, 1, 5);
    /* row t=0 of each sequence: order 2 and 3 invalid; t=1: order 2 valid only */
    CHECK(ok[0] == 0 && ok[1] == 0 && ok[2] == 1 && ok[3] == 0 && ok[4] == 1 && ok[5] == 1);
    /* hash by hand for sequence 0, t=1, table 0 (order 2): tokens ids[1], ids[0] */
    uint32_t acc = 0x9E3779B9u;
    acc = (acc ^ 10u) * 0x01000193u;
    acc = (acc ^ 2u) * 0x01000193u;
    acc ^= acc >> 15;
    CHECK(idx[2] == (int32_t)(acc % 5u));
    eg_ctx c = {randn(30, 1), zeros(36), ok, randn(36, 1), idx};
    float *dt = zeros(30);
    nd_op_engram_gather_bwd(dt, c.w, idx, ok, 6, 2, 5, 3);
    check_grad("gather dtables", eg_loss, &c, c.tab, dt, 30, 1e-2f, 1e-3);
    free(c.tab); free(c.e); free(c.w); free(dt);
}

typedef struct { float *v, *taps, *y, *w; } tp_ctx;
static double tp_loss(void *c_)
{
    tp_ctx *c = c_;
    nd_op_taps_fwd(c->y, c->v, c->taps, 2, 9, 3, 2);
    return wsum(c->w, c->y, 54);
}
static void test_taps(void)
{
    tp_ctx c = {randn(54, 1), randn(12, 1), zeros(54), randn(54, 1)};
    float *dv = zeros(54), *dt = zeros(12);
    nd_op_taps_bwd(dv, dt, c.w, c.v, c.taps, 2, 9, 3, 2);
    check_grad("taps dv", tp_loss, &c, c.v, dv, 54, 1e-2f, 1e-3);
    check_grad("taps dtaps", tp_loss, &c, c.taps, dt, 12, 1e-2f, 1e-3);
    free(c.v); free(c.taps); free(c.y); free(c.w); free(dv); free(dt);
}

typedef struct { float *u, *k, *vc, *b, *g, *ru, *rk, *w; } gt_ctx;
static double gt_loss(void *c_)
{
    gt_ctx *c = c_;
    nd_op_engram_gate_fwd(c->b, c->g, c->ru, c->rk, c->u, c->k, c->vc, 4, 16);
    return wsum(c->w, c->b, 64);
}
static void test_engram_gate(void)
{
    gt_ctx c = {randn(64, 1), randn(64, 1), randn(64, 1), zeros(64), zeros(4), zeros(4), zeros(4), randn(64, 1)};
    /* make the gate argument large enough to matter */
    for (int i = 0; i < 64; i++) c.k[i] += c.u[i];
    gt_loss(&c);
    float *du = zeros(64), *dk = zeros(64), *dv = zeros(64);
    nd_op_engram_gate_bwd(du, dk, dv, c.w, c.g, c.ru, c.rk, c.u, c.k, c.vc, 4, 16);
    check_grad("engram gate du", gt_loss, &c, c.u, du, 64, 1e-2f, 2e-3);
    check_grad("engram gate dk", gt_loss, &c, c.k, dk, 64, 1e-2f, 2e-3);
    check_grad("engram gate dvc", gt_loss, &c, c.vc, dv, 64, 1e-2f, 2e-3);
    free(c.u); free(c.k); free(c.vc); free(c.b); free(c.g); free(c.ru); free(c.rk); free(c.w);
    free(du); free(dk); free(dv);
}

/* ---- Sinkhorn ---- */
typedef struct { float *R, *P, *w; } sk_ctx;
static double sk_loss(void *c_)
{
    sk_ctx *c = c_;
    nd_op_sinkhorn_fwd(c->P, c->R, 4);
    return wsum(c->w, c->P, 16);
}
static void test_sinkhorn(void)
{
    sk_ctx c = {randn(16, 1), zeros(16), randn(16, 1)};
    sk_loss(&c);
    /* columns sum to 1 exactly after the last column step; rows nearly */
    for (int j = 0; j < 4; j++) {
        double cs = 0, rs = 0;
        for (int i = 0; i < 4; i++) { cs += c.P[i * 4 + j]; rs += c.P[j * 4 + i]; }
        CHECKF(fabs(cs - 1) < 1e-5 && fabs(rs - 1) < 1e-3, "col %g row %g", cs, rs);
    }
    float *dR = zeros(16);
    nd_op_sinkhorn_bwd(dR, c.w, c.R, 4);
    check_grad("sinkhorn dR", sk_loss, &c, c.R, dR, 16, 1e-2f, 2e-3);
    free(c.R); free(c.P); free(c.w); free(dR);
}

/* More than 4 lanes take the backward that recomputes each stage */
typedef struct { float *R, *P, *w; int n; } skn_ctx;
static double skn_loss(void *c_)
{
    skn_ctx *c = c_;
    nd_op_sinkhorn_fwd(c->P, c->R, c->n);
    return wsum(c->w, c->P, (size_t)(c->n * c->n));
}
static void test_sinkhorn_wide(void)
{
    int n = 6;
    skn_ctx c = {randn(36, 1), zeros(36), randn(36, 1), n};
    float *dR = zeros(36);
    nd_op_sinkhorn_bwd(dR, c.w, c.R, n);
    check_grad("sinkhorn dR, 6 lanes", skn_loss, &c, c.R, dR, 36, 1e-2f, 2e-3);
    free(c.R); free(c.P); free(c.w); free(dR);
}

/* Batches run four tokens side by side: every token gets the bits of its
 * single-token call, whatever block it falls in (11 tokens: two full blocks and a
 * partial one). */
static void test_sinkhorn_batch_is_per_token(void)
{
    enum { N = 11 };
    for (int n = 4; n <= 5; n++) {
        int nn = n * n;
        float *R = randn((size_t)N * nn, 2), *dP = randn((size_t)N * nn, 1);
        float *P = zeros((size_t)N * nn), *dR = zeros((size_t)N * nn), *p1 = zeros(nn), *d1 = zeros(nn);
        nd_op_sinkhorn_fwd_batch(P, R, n, N);
        nd_op_sinkhorn_bwd_batch(dR, dP, R, n, N);
        int same = 1;
        for (int t = 0; t < N; t++) {
            memset(d1, 0, sizeof(float) * (size_t)nn);
            nd_op_sinkhorn_fwd(p1, R + (size_t)t * nn, n);
            nd_op_sinkhorn_bwd(d1, dP + (size_t)t * nn, R + (size_t)t * nn, n);
            same &= !memcmp(p1, P + (size_t)t * nn, sizeof(float) * (size_t)nn);
            same &= !memcmp(d1, dR + (size_t)t * nn, sizeof(float) * (size_t)nn);
        }
        CHECKF(same, "%d lanes: a token's Sinkhorn depends on its batch", n);
        free(R); free(dP); free(P); free(dR); free(p1); free(d1);
    }
}

/* ---- logits + cross-entropy ---- */
typedef struct { float *f, *E; int32_t *tg; } ce_ctx;
static double ce_loss(void *c_)
{
    ce_ctx *c = c_;
    return nd_op_logits_ce(NULL, NULL, NULL, c->f, c->E, c->tg, NULL, 5, 8, 11, 0.0f);
}
static void test_logits_ce(void)
{
    int32_t tg[5] = {3, -1, 0, 10, 7};
    ce_ctx c = {randn(40, 1), randn(88, 1), tg};
    float *df = zeros(40), *dE = zeros(88);
    double l = nd_op_logits_ce(NULL, df, dE, c.f, c.E, tg, NULL, 5, 8, 11, 1.0f);
    /* the loss by hand for row 0 */
    double lg[11], mx = -1e30, s = 0, l0;
    for (int v = 0; v < 11; v++) {
        lg[v] = 0;
        for (int j = 0; j < 8; j++) lg[v] += (double)c.f[j] * c.E[v * 8 + j];
        mx = fmax(mx, lg[v]);
    }
    for (int v = 0; v < 11; v++) s += exp(lg[v] - mx);
    l0 = mx + log(s) - lg[3];
    CHECK(l > l0);
    check_grad("ce df", ce_loss, &c, c.f, df, 40, 1e-2f, 1e-3);
    check_grad("ce dE", ce_loss, &c, c.E, dE, 88, 1e-2f, 1e-3);
    /* row 1 has no target: no gradient */
    CHECK(df[8] == 0.0f && df[15] == 0.0f);
    free(c.f); free(c.E); free(df); free(dE);
}

/* Per-row weights (the fine-tuning decision weight) scale each row's gradient; the returned
 * loss stays the plain sum.  The reference: sum_i w_i * (row i's loss alone). */
static const float ce_w[5] = {4.0f, 7.0f, 1.0f, 0.5f, 2.5f};
static double ce_weighted_loss(void *c_)
{
    ce_ctx *c = c_;
    double s = 0;
    for (int i = 0; i < 5; i++) {
        int32_t one[5] = {-1, -1, -1, -1, -1};
        one[i] = c->tg[i];
        s += ce_w[i] * nd_op_logits_ce(NULL, NULL, NULL, c->f, c->E, one, NULL, 5, 8, 11, 0.0f);
    }
    return s;
}
static void test_logits_ce_weighted(void)
{
    int32_t tg[5] = {3, -1, 0, 10, 7};
    ce_ctx c = {randn(40, 2), randn(88, 2), tg};
    float *df = zeros(40), *dE = zeros(88);
    double plain = nd_op_logits_ce(NULL, NULL, NULL, c.f, c.E, tg, NULL, 5, 8, 11, 0.0f);
    double l = nd_op_logits_ce(NULL, df, dE, c.f, c.E, tg, ce_w, 5, 8, 11, 1.0f);
    CHECKF(l == plain, "weighted call returned %g, plain loss %g", l, plain);
    CHECKF(fabs(ce_weighted_loss(&c) - plain) > 0.1, "weights make no difference to the reference (%g)", plain);
    check_grad("weighted ce df", ce_weighted_loss, &c, c.f, df, 40, 1e-2f, 1e-3);
    check_grad("weighted ce dE", ce_weighted_loss, &c, c.E, dE, 88, 1e-2f, 1e-3);
    free(c.f); free(c.E); free(df); free(dE);
}

/* ---- whole model ---- */
static void tiny_config(nd_config *c)
{
    memset(c, 0, sizeof *c);
    c->vocab_size = 64; c->d_model = 48; c->attn_dim = 48; c->num_heads = 4; c->num_kv_heads = 2;
    c->num_layers = 2; c->max_seq_len = 64; c->rope_theta = 10000.0f;
    c->engram_orders[0] = 2; c->engram_orders[1] = 3; c->num_orders = 2;
    c->engram_heads = 1; c->engram_slots = 16; c->engram_layers[0] = 1; c->num_sites = 1;
    c->mhc_lanes = 4; c->contrastive_dim = 8;
    /* derived (written out here so this test needs no config parser) */
    c->head_dim = 12; c->kv_dim = 24; c->hada_n = 64; c->engram_heads_eff = 1; c->num_tables = 2;
    c->engram_sub = 24; c->conv_dilation = 3;
}

static void perturb_all(nd_train_model *m)
{
    /* move every parameter off its special initial value (zeros, ones) */
    for (size_t i = 0; i < m->n_params; i++) m->params[i] += (float)nd_rng_normal(&rng) * 0.2f;
    /* make the mHC mixing sensitive: a_* near 0.5, B_res far from saturation
     * (4*I makes Sinkhorn almost the identity and its gradients vanish) */
    int L = m->cfg.num_layers, n = m->cfg.mhc_lanes;
    for (int l = 0; l < L; l++) {
        nd_train_param(m, ND_P_A_PRE)[l] = 0.5f + (float)nd_rng_normal(&rng) * 0.2f;
        nd_train_param(m, ND_P_A_POST)[l] = 0.5f + (float)nd_rng_normal(&rng) * 0.2f;
        nd_train_param(m, ND_P_A_RES)[l] = 0.5f + (float)nd_rng_normal(&rng) * 0.2f;
        for (int i = 0; i < n * n; i++) nd_train_param(m, ND_P_B_RES)[l * n * n + i] = (float)nd_rng_normal(&rng) * 0.5f;
    }
}

static void make_batch(int32_t *ids, int32_t *tg)
{
    for (int i = 0; i < MB * MT; i++) ids[i] = (int32_t)nd_rng_below(&rng, 64);
    for (int i = 0; i < MB * MT; i++) tg[i] = (i % MT) >= 3 ? (int32_t)nd_rng_below(&rng, 64) : -1;
}

/* A whole training step (forward, backward, every gradient) gives the same
 * bits with no pool and with 2 or 3 threads: every parallel loop works on
 * fixed blocks and reduces them in block order.  N = 3 x 40 = 120 rows spans
 * several row blocks. */
static void test_step_bit_identical_across_threads(void)
{
    enum { B = 3, T = 40 };
    int32_t ids[B * T], tg[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = (int32_t)nd_rng_below(&rng, 64);
    for (int i = 0; i < B * T; i++) tg[i] = (i % T) >= 2 ? (int32_t)nd_rng_below(&rng, 64) : -1;
    check_step_bit_identical_across_threads(tiny_config, ids, tg, B, T, 3, 1);
}

static void test_model_full_grad(void)
{
    nd_config cfg;
    tiny_config(&cfg);
    nd_train_model m;
    needle_error err;
    CHECK(nd_train_model_create(&m, &cfg, &err) == 0);
    nd_train_model_init_reference(&m, 7);
    perturb_all(&m);
    CHECK(nd_train_enable_full(&m, &err) == 0);
    int32_t ids[MB * MT], tg[MB * MT];
    make_batch(ids, tg);
    int n = 0;
    double loss = nd_train_step_grad(&m, ids, tg, MB, MT, 1, &n);
    CHECKF(isfinite(loss) && n > 0, "loss %g n %d", loss, n);
    model_ctx c = {&m, ids, tg};
    /* a float32 forward through the whole model differs by ~1e-7 in the loss
     * between nearby points: / (2 eps) that is ~1e-5 in the derivative.  The
     * step is 3e-2: with the packed GEMM (sequential k sums of 128-8192 terms)
     * the mHC gradients' finite differences at 1e-2 and 3e-3 miss by an amount
     * that grows as 1/eps (float noise, not curvature), and at 3e-2 they agree. */
    abs_floor = 2e-5;
    float *g = malloc(sizeof(float) * m.n_params);
    memcpy(g, m.grads, sizeof(float) * m.n_params);
    for (int t = 0; t < m.n_tensors; t++) {
        nd_tensor_info *ti = &m.tensors[t];
        if (ti->role < 0) continue;
        check_grad(ti->name, model_loss, &c, m.params + ti->offset, g + ti->offset, ti->count, 3e-2f, 3e-2);
    }
    abs_floor = 0.0;
    free(g);
    nd_train_model_free(&m);
}

static void test_model_lora_grad(void)
{
    nd_config cfg;
    tiny_config(&cfg);
    nd_train_model m;
    needle_error err;
    CHECK(nd_train_model_create(&m, &cfg, &err) == 0);
    nd_train_model_init_reference(&m, 9);
    perturb_all(&m);
    CHECK(nd_train_lora_create(&m, 4, 8.0f, 3, &err) == 0);
    /* B = 0 at init makes dA = 0; give B values so both gradients are exercised */
    for (int t = 0; t < ND_LORA_TARGETS; t++) {
        int in, out;
        nd_train_lora_dims(&m, t, &in, &out);
        nd_rng_fill_normal(&rng, m.lora + m.lora_b_off[t], (size_t)cfg.num_layers * 4 * out, 0.0f, 0.1f);
    }
    int32_t ids[MB * MT], tg[MB * MT];
    make_batch(ids, tg);
    model_ctx c = {&m, ids, tg};
    check_lora_grads(&c, "lora A", "lora B");
    /* the frozen base has no gradient buffer at all */
    CHECK(m.grads == NULL);
    nd_train_model_free(&m);
}

/* With B = 0 the adapter is the identity: the LoRA model's loss equals the base's. */
static void test_lora_identity_at_init(void)
{
    nd_config cfg;
    tiny_config(&cfg);
    nd_train_model m;
    CHECK(nd_train_model_create(&m, &cfg, NULL) == 0);
    nd_train_model_init_reference(&m, 11);
    perturb_all(&m);
    int32_t ids[MB * MT], tg[MB * MT];
    make_batch(ids, tg);
    int n;
    double base = nd_train_step_grad(&m, ids, tg, MB, MT, 0, &n);
    CHECK(nd_train_lora_create(&m, 16, 32.0f, 1, NULL) == 0);
    double with = nd_train_step_grad(&m, ids, tg, MB, MT, 0, &n);
    CHECKF(fabs(base - with) < 1e-6 * fabs(base), "base %g lora %g", base, with);
    CHECKF(fabsf(m.lora_scale - 2.0f) < 1e-7f, "scale %g", m.lora_scale);
    nd_train_model_free(&m);
}

/* Batch rows are independent: the loss of a batch is the sum of its rows' losses. */
static void test_batch_rows_independent(void)
{
    nd_config cfg;
    tiny_config(&cfg);
    nd_train_model m;
    CHECK(nd_train_model_create(&m, &cfg, NULL) == 0);
    nd_train_model_init_reference(&m, 5);
    perturb_all(&m);
    int32_t ids[MB * MT], tg[MB * MT];
    make_batch(ids, tg);
    int n;
    double both = nd_train_step_grad(&m, ids, tg, MB, MT, 0, &n);
    double a = nd_train_step_grad(&m, ids, tg, 1, MT, 0, &n);
    double b = nd_train_step_grad(&m, ids + MT, tg + MT, 1, MT, 0, &n);
    CHECKF(fabs(both - (a + b)) < 1e-4 * fabs(both), "batch %g vs rows %g + %g", both, a, b);
    nd_train_model_free(&m);
}

int main(void)
{
    nd_rng_seed(&rng, 1234);
    RUN(test_matmul);
    RUN(test_matmul_threads_identical);
    RUN(test_zcrms);
    RUN(test_rope);
    RUN(test_attention);
    RUN(test_sigmoid_gate);
    RUN(test_hada_mlp);
    RUN(test_engram_gather_and_hash);
    RUN(test_taps);
    RUN(test_engram_gate);
    RUN(test_sinkhorn);
    RUN(test_sinkhorn_wide);
    RUN(test_sinkhorn_batch_is_per_token);
    RUN(test_logits_ce);
    RUN(test_logits_ce_weighted);
    RUN(test_lora_identity_at_init);
    RUN(test_batch_rows_independent);
    RUN(test_step_bit_identical_across_threads);
    RUN(test_model_full_grad);
    RUN(test_model_lora_grad);
    return check_summary();
}
