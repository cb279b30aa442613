/* test_train_grad_v3.c - the Needle 3 training ops' backward against finite
 * differences (split q/k vs v head widths, local/global attention masks, the
 * causal q/k/v conv, the Monarch MLP with its permutations and softmax gate,
 * the seed-strided engram hash, out_vocab), then the whole v3 model's
 * gradient (full and LoRA) on a tiny geometry with every v3 feature on.
 *
 * Method as test_train_grad.c: for L = sum(w * op(x)) the analytic directional
 * derivative g.v is compared with the central difference along v = g/|g| and
 * three random unit directions; losses are summed in double.  Tolerances (relative to
 * max(|g.v|, 0.1 |g|), plus an absolute floor for the whole model) are in each call.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "grad_check.h"
#include "train_model_check.h"
#include "core/formulas.h"
#include "core/rng.h"
#include "model/config.h"
#include "train/train_model.h"
#include "train/train_monarch.h"
#include "train/train_ops.h"

/* ---- attention: q/k head 6, v head 4, global and sliding window 3 ---- */
enum { AB = 2, AT = 7, AH = 4, AKV = 2, AHD = 6, AVD = 4 };
typedef struct { float *q, *k, *v, *o, *p, *w; int window; } att_ctx;
static double att_loss(void *c_)
{
    att_ctx *c = c_;
    nd_op_attention_fwd(NULL, c->o, c->p, c->q, c->k, c->v, AB, AT, AH, AKV, AHD, AVD, c->window);
    return wsum(c->w, c->o, AB * AT * AH * AVD);
}
static void test_attention_split_heads_and_window(void)
{
    size_t nq = AB * AT * AH * AHD, nk = AB * AT * AKV * AHD, nv = AB * AT * AKV * AVD, no = AB * AT * AH * AVD;
    for (int window = 0; window <= 3; window += 3) {
        att_ctx c = {randn(nq, 1), randn(nk, 1), randn(nv, 1), zeros(no), zeros(AB * AH * AT * AT), randn(no, 1),
                     window};
        att_loss(&c);
        float *dq = zeros(nq), *dk = zeros(nk), *dv = zeros(nv);
        nd_op_attention_bwd(NULL, dq, dk, dv, c.w, c.p, c.q, c.k, c.v, AB, AT, AH, AKV, AHD, AVD, window);
        check_grad(window ? "local attention dq" : "attention dq", att_loss, &c, c.q, dq, nq, 1e-2f, 2e-3);
        check_grad(window ? "local attention dk" : "attention dk", att_loss, &c, c.k, dk, nk, 1e-2f, 2e-3);
        check_grad(window ? "local attention dv" : "attention dv", att_loss, &c, c.v, dv, nv, 1e-2f, 2e-3);
        att_loss(&c);
        /* the mask itself: query t = 5 of head 0 sees keys 3..5 under window 3, 0..5 without */
        const float *P = c.p + (size_t)5 * AT;
        double seen = 0.0;
        for (int s = 0; s < AT; s++) {
            int visible = s <= 5 && (!window || 5 - s < window);
            if (!visible) CHECKF(P[s] == 0.0f, "window %d: key %d has probability %g", window, s, P[s]);
            else seen += P[s];
        }
        CHECKF(fabs(seen - 1.0) < 1e-5, "window %d: visible probabilities sum to %g", window, seen);
        /* the first token's output is its own value (v head width 4) */
        CHECK(fabsf(c.o[0] - c.v[0]) < 1e-6f && fabsf(c.o[3] - c.v[3]) < 1e-6f);
        free(c.q); free(c.k); free(c.v); free(c.o); free(c.p); free(c.w); free(dq); free(dk); free(dv);
    }
}

/* ---- causal depthwise conv of q/k/v ---- */
typedef struct { float *x, *taps, *y, *w; } cv_ctx;
static double cv_loss(void *c_)
{
    cv_ctx *c = c_;
    nd_op_causal_conv_fwd(c->y, c->x, c->taps, 3, 2, 6, 5);
    return wsum(c->w, c->y, 60);
}
static void test_causal_conv(void)
{
    cv_ctx c = {randn(60, 1), randn(15, 1), zeros(60), randn(60, 1)};
    float *dx = zeros(60), *dt = zeros(15);
    nd_op_causal_conv_bwd(dx, dt, c.w, c.x, c.taps, 3, 2, 6, 5);
    check_grad("conv dx", cv_loss, &c, c.x, dx, 60, 1e-2f, 1e-3);
    check_grad("conv dtaps", cv_loss, &c, c.taps, dt, 15, 1e-2f, 1e-3);
    /* by hand: sequence 1, t = 1, channel 2 = taps0*x_1 + taps1*x_0 (no reach into sequence 0) */
    cv_loss(&c);
    size_t r1 = (size_t)(6 + 1) * 5 + 2, r0 = (size_t)6 * 5 + 2;
    CHECK(fabsf(c.y[r1] - (c.taps[2] * c.x[r1] + c.taps[5 + 2] * c.x[r0])) < 1e-6f);
    /* taps [1,0,0] are the identity (the reference's initialisation) */
    float id[15] = {1, 1, 1, 1, 1};
    nd_op_causal_conv_fwd(c.y, c.x, id, 3, 2, 6, 5);
    CHECK(memcmp(c.y, c.x, sizeof(float) * 60) == 0);
    free(c.x); free(c.taps); free(c.y); free(c.w); free(dx); free(dt);
}

/* ---- Monarch MLP: d = 20 padded to Nh = 32 = 4 x 8 ---- */
enum { MN = 5, MD = 20, MNH = 32, MA = 4, MBF = 8, MR = ND_MLP_GATE_RANK };
typedef struct {
    nd_monarch_params p;
    float *h, *out, *sm, *x1, *x2, *y3, *w;
} mon_ctx;
static double mon_loss(void *c_)
{
    mon_ctx *c = c_;
    nd_monarch_fwd(NULL, &c->p, c->out, c->sm, c->x1, c->x2, c->y3, c->h, MN);
    return wsum(c->w, c->out, MN * MD);
}
/* a random permutation of n as exact floats */
static float *perm(int n)
{
    float *p = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) p[i] = (float)i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)nd_rng_below(&rng, (uint32_t)(i + 1));
        float t = p[i]; p[i] = p[j]; p[j] = t;
    }
    return p;
}
static void test_monarch_mlp(void)
{
    float *P[15];
    mon_ctx c = {.p = {.d = MD, .Nh = MNH, .a = MA, .b = MBF, .rank = MR}};
    c.p.d1 = P[0] = randn(MNH, 1); c.p.d2 = P[1] = randn(MNH, 1); c.p.b2 = P[2] = randn(MNH, 0.5f);
    c.p.d3 = P[3] = randn(MNH, 1); c.p.d4 = P[4] = randn(MNH, 1);
    c.p.w1a = P[5] = randn(MA * MA, 0.5f); c.p.w2a = P[6] = randn(MA * MA, 0.5f); c.p.w3a = P[7] = randn(MA * MA, 0.5f);
    c.p.w1b = P[8] = randn(MBF * MBF, 0.4f); c.p.w2b = P[9] = randn(MBF * MBF, 0.4f);
    c.p.w3b = P[10] = randn(MBF * MBF, 0.4f);
    c.p.cond_v = P[11] = randn(MD * MR, 0.5f); c.p.cond_u = P[12] = randn(MR * MNH, 0.5f);
    c.p.p1 = P[13] = perm(MNH); c.p.p2 = P[14] = perm(MNH);
    c.h = randn(MN * MD, 1); c.out = zeros(MN * MD); c.sm = zeros(MN * MR); c.x1 = zeros(MN * MNH);
    c.x2 = zeros(MN * MNH); c.y3 = zeros(MN * MD); c.w = randn(MN * MD, 1);
    mon_loss(&c);
    size_t sizes[13] = {MNH, MNH, MNH, MNH, MNH, MA * MA, MA * MA, MA * MA, MBF * MBF, MBF * MBF, MBF * MBF,
                        MD * MR, MR * MNH};
    float *G[13];
    for (int i = 0; i < 13; i++) G[i] = zeros(sizes[i]);
    nd_monarch_grads g = {G[0], G[1], G[2], G[3], G[4], G[5], G[6], G[7], G[8], G[9], G[10], G[11], G[12]};
    float *dh = zeros(MN * MD);
    nd_monarch_bwd(NULL, &c.p, &g, dh, c.w, c.h, c.sm, c.x1, c.x2, c.y3, MN);
    static const char *names[13] = {"monarch d1", "monarch d2", "monarch b2", "monarch d3", "monarch d4",
                                    "monarch w1a", "monarch w2a", "monarch w3a", "monarch w1b", "monarch w2b",
                                    "monarch w3b", "monarch cond_v", "monarch cond_u"};
    check_grad("monarch dh", mon_loss, &c, c.h, dh, MN * MD, 1e-2f, 2e-3);
    for (int i = 0; i < 13; i++) check_grad(names[i], mon_loss, &c, P[i], G[i], sizes[i], 1e-2f, 2e-3);
    /* the pooled backward equals the serial one bit for bit */
    nd_threadpool *pool = NULL;
    CHECK(nd_threadpool_create(3, &pool, NULL) == 0);
    float *dh2 = zeros(MN * MD), *g2 = zeros(MR * MNH);
    nd_monarch_grads gp = g;
    float *Gs[13];
    for (int i = 0; i < 13; i++) Gs[i] = zeros(sizes[i]);
    gp = (nd_monarch_grads){Gs[0], Gs[1], Gs[2], Gs[3], Gs[4], Gs[5], Gs[6], Gs[7], Gs[8], Gs[9], Gs[10], Gs[11], Gs[12]};
    float *dh1 = zeros(MN * MD);
    float *Gt[13];
    for (int i = 0; i < 13; i++) Gt[i] = zeros(sizes[i]);
    nd_monarch_grads gt = {Gt[0], Gt[1], Gt[2], Gt[3], Gt[4], Gt[5], Gt[6], Gt[7], Gt[8], Gt[9], Gt[10], Gt[11], Gt[12]};
    nd_monarch_bwd(NULL, &c.p, &gp, dh1, c.w, c.h, c.sm, c.x1, c.x2, c.y3, MN);
    nd_monarch_bwd(pool, &c.p, &gt, dh2, c.w, c.h, c.sm, c.x1, c.x2, c.y3, MN);
    CHECK(!memcmp(dh1, dh2, sizeof(float) * MN * MD));
    for (int i = 0; i < 13; i++) CHECKF(!memcmp(Gs[i], Gt[i], sizeof(float) * sizes[i]), "%s pooled", names[i]);
    /* forward against a direct transcription with the Kronecker product as one Nh x Nh matrix */
    mon_loss(&c);
    for (int r = 0; r < MN; r++) {
        const float *h = c.h + r * MD;
        double lg[MR], mx = -1e30, sum = 0, z[MNH], y[MNH], x[MNH];
        for (int k = 0; k < MR; k++) {
            lg[k] = 0;
            for (int i = 0; i < MD; i++) lg[k] += (double)h[i] * c.p.cond_v[i * MR + k];
            mx = fmax(mx, lg[k]);
        }
        for (int k = 0; k < MR; k++) sum += lg[k] = exp(lg[k] - mx);
        const float *wa[3] = {c.p.w1a, c.p.w2a, c.p.w3a}, *wb[3] = {c.p.w1b, c.p.w2b, c.p.w3b};
        for (int i = 0; i < MNH; i++) z[i] = i < MD ? c.p.d1[i] * h[i] : 0.0;
        for (int s = 0; s < 3; s++) {
            for (int col = 0; col < MNH; col++) { /* K[row][col] = Wa[row/b][col/b] Wb[row%b][col%b] */
                y[col] = 0;
                for (int row = 0; row < MNH; row++)
                    y[col] += z[row] * wa[s][(row / MBF) * MA + col / MBF] * wb[s][(row % MBF) * MBF + col % MBF];
            }
            if (s == 0)
                for (int i = 0; i < MNH; i++) {
                    double cc = 1;
                    for (int k = 0; k < MR; k++) cc += lg[k] / sum * c.p.cond_u[k * MNH + i];
                    x[i] = y[(int)c.p.p1[i]];
                    double pre = c.p.d2[i] * cc * x[i] + c.p.b2[i];
                    z[i] = pre / (1 + exp(-pre));
                }
            else if (s == 1)
                for (int i = 0; i < MNH; i++) z[i] = c.p.d3[i] * y[(int)c.p.p2[i]];
        }
        for (int i = 0; i < MD; i++)
            CHECKF(fabs(c.out[r * MD + i] - c.p.d4[i] * y[i]) < 1e-4, "row %d col %d: %g vs %g", r, i,
                   c.out[r * MD + i], c.p.d4[i] * y[i]);
    }
    nd_threadpool_free(pool);
    for (int i = 0; i < 13; i++) { free(G[i]); free(Gs[i]); free(Gt[i]); }
    for (int i = 0; i < 15; i++) free(P[i]);
    free(c.h); free(c.out); free(c.sm); free(c.x1); free(c.x2); free(c.y3); free(c.w);
    free(dh); free(dh1); free(dh2); free(g2);
}

/* ---- seed-strided engram hash ---- */
static void test_engram_seed_stride(void)
{
    int32_t ids[5] = {2, 10, 11, 12, 13}, idx[5 * 4];
    float ok[5 * 4];
    int orders[2] = {2, 3};
    /* 2 orders x 2 tables, seed stride 3: table k = oi*2 + hd hashes with seed oi*3 + hd */
    nd_op_engram_index(idx, ok, ids, 1, 5, orders, 2, 2, 3, 97);
    int t = 4, back[3] = {ids[4], ids[3], ids[2]};
    int seeds[4] = {0, 1, 3, 4};
    for (int k = 0; k < 4; k++) {
        int o = orders[k / 2];
        CHECKF(idx[t * 4 + k] == (int32_t)(nd_engram_hash(seeds[k], o, back) % 97u), "table %d", k);
        CHECK(ok[t * 4 + k] == 1.0f);
    }
    /* by hand for table 2 (order 3, seed 3): acc0 = 0x9E3779B9 * 4 */
    uint32_t acc = 0x9E3779B9u * 4u;
    for (int j = 0; j < 3; j++) acc = (acc ^ (uint32_t)back[j]) * 0x01000193u;
    acc ^= acc >> 15;
    CHECK(idx[t * 4 + 2] == (int32_t)(acc % 97u));
    /* stride = heads is the v2 numbering (seed = table index) */
    nd_op_engram_index(idx, ok, ids, 1, 5, orders, 2, 2, 2, 97);
    CHECK(idx[t * 4 + 2] == (int32_t)(nd_engram_hash(2, 3, back) % 97u));
}

/* ---- whole v3 model ---- */
/* Every v3 feature on: q/k head 8 vs v head 6, 3 layers (local, global,
 * local; window 3), conv taps 3, Monarch d 24 -> Nh 32 = 4 x 8, 2 orders x 2
 * tables with seed stride 3, two engram sites, out_vocab 50 of 64. */
static void tiny_v3(nd_config *c)
{
    nd_config_defaults(c);
    c->generation = 3;
    c->vocab_size = 64; c->out_vocab = 50; c->d_model = 24; c->num_heads = 4; c->num_kv_heads = 2;
    c->qk_head_dim = 8; c->v_head_dim = 6; c->num_layers = 3; c->max_seq_len = 64; c->rope_theta = 10000.0f;
    c->engram_heads = 2; c->engram_seed_heads = 3; c->engram_slots = 13;
    c->engram_layers[0] = 0; c->engram_layers[1] = 2; c->num_sites = 2;
    c->global_mask = 1ull << 1; c->sliding_window = 3; c->qkv_conv_taps = 3;
    c->contrastive_dim = 8;
    needle_error err;
    int rc = nd_config_derive(c, "tiny v3", &err);
    CHECKF(rc == 0, "%s", err.message);
    CHECK(c->hada_n == 32 && c->hada_a == 4 && c->hada_b == 8 && c->num_tables == 4 && c->engram_sub == 6);
}

static int is_permutation(const nd_tensor_info *t) { return t->role == ND_P_HADA_P1 || t->role == ND_P_HADA_P2; }

static void perturb_all(nd_train_model *m)
{
    for (int t = 0; t < m->n_tensors; t++) {
        nd_tensor_info *ti = &m->tensors[t];
        if (is_permutation(ti)) continue; /* stays a permutation */
        for (size_t i = 0; i < ti->count; i++) m->params[ti->offset + i] += (float)nd_rng_normal(&rng) * 0.2f;
    }
    int L = m->cfg.num_layers, n = m->cfg.mhc_lanes;
    for (int l = 0; l < L; l++) {
        nd_train_param(m, ND_P_A_PRE)[l] = 0.5f + (float)nd_rng_normal(&rng) * 0.2f;
        nd_train_param(m, ND_P_A_POST)[l] = 0.5f + (float)nd_rng_normal(&rng) * 0.2f;
        nd_train_param(m, ND_P_A_RES)[l] = 0.5f + (float)nd_rng_normal(&rng) * 0.2f;
        for (int i = 0; i < n * n; i++) nd_train_param(m, ND_P_B_RES)[l * n * n + i] = (float)nd_rng_normal(&rng) * 0.5f;
    }
    /* the Monarch output scale and gate away from their small initial values */
    size_t Nh = (size_t)m->cfg.hada_n;
    for (size_t i = 0; i < (size_t)L * Nh; i++) {
        nd_train_param(m, ND_P_D4)[i] = 0.5f + (float)nd_rng_normal(&rng) * 0.3f;
        nd_train_param(m, ND_P_D3)[i] = 1.0f + (float)nd_rng_normal(&rng) * 0.3f;
    }
}

static void make_batch(int32_t *ids, int32_t *tg)
{
    for (int i = 0; i < MB * MT; i++) ids[i] = 1 + (int32_t)nd_rng_below(&rng, 63);
    /* targets 50..63 are outside out_vocab and must be skipped */
    for (int i = 0; i < MB * MT; i++) tg[i] = (i % MT) >= 2 ? (int32_t)nd_rng_below(&rng, 64) : -1;
}

static void test_v3_model_full_grad(void)
{
    nd_config cfg;
    tiny_v3(&cfg);
    nd_train_model m;
    needle_error err;
    CHECK(nd_train_model_create(&m, &cfg, &err) == 0);
    nd_train_model_init_reference(&m, 7);
    perturb_all(&m);
    CHECK(nd_train_enable_full(&m, &err) == 0);
    int32_t ids[MB * MT], tg[MB * MT];
    make_batch(ids, tg);
    int n = 0, want = 0;
    for (int i = 0; i < MB * MT; i++) want += tg[i] >= 0 && tg[i] < 50;
    double loss = nd_train_step_grad(&m, ids, tg, MB, MT, 1, &n);
    CHECKF(isfinite(loss) && n == want, "loss %g n %d (want %d targets below out_vocab)", loss, n, want);
    model_ctx c = {&m, ids, tg};
    abs_floor = 2e-5; /* float32 forward noise / (2 eps), as test_train_grad.c */
    float *g = malloc(sizeof(float) * m.n_params);
    memcpy(g, m.grads, sizeof(float) * m.n_params);
    int checked = 0;
    for (int t = 0; t < m.n_tensors; t++) {
        nd_tensor_info *ti = &m.tensors[t];
        if (ti->role < 0 || is_permutation(ti)) continue;
        check_grad(ti->name, model_loss, &c, m.params + ti->offset, g + ti->offset, ti->count, 3e-2f,
                   3e-2);
        checked++;
    }
    CHECKF(checked >= 40, "only %d tensors checked", checked);
    /* the permutations and the embedding rows past out_vocab get no gradient from the logits */
    for (int t = 0; t < m.n_tensors; t++)
        if (is_permutation(&m.tensors[t]))
            for (size_t i = 0; i < m.tensors[t].count; i++) CHECK(g[m.tensors[t].offset + i] == 0.0f);
    abs_floor = 0.0;
    free(g);
    nd_train_model_free(&m);
}

static void test_v3_model_lora_grad(void)
{
    nd_config cfg;
    tiny_v3(&cfg);
    nd_train_model m;
    needle_error err;
    CHECK(nd_train_model_create(&m, &cfg, &err) == 0);
    nd_train_model_init_reference(&m, 9);
    perturb_all(&m);
    CHECK(nd_train_lora_create(&m, 4, 8.0f, 3, &err) == 0);
    for (int t = 0; t < ND_LORA_TARGETS; t++) {
        int in, out;
        nd_train_lora_dims(&m, t, &in, &out);
        nd_rng_fill_normal(&rng, m.lora + m.lora_b_off[t], (size_t)cfg.num_layers * 4 * out, 0.0f, 0.1f);
    }
    /* the five targets have the v3 widths: q 32, k 16, v 12, gate 24 (H*vd), out 24 -> 24 */
    int in, out;
    nd_train_lora_dims(&m, 2, &in, &out);
    CHECK(in == 24 && out == 12);
    nd_train_lora_dims(&m, 4, &in, &out);
    CHECK(in == 24 && out == 24);
    int32_t ids[MB * MT], tg[MB * MT];
    make_batch(ids, tg);
    model_ctx c = {&m, ids, tg};
    check_lora_grads(&c, "v3 lora A", "v3 lora B");
    nd_train_model_free(&m);
}

/* A v3 training step gives the same bits with no pool and with 3 threads. */
static void test_v3_step_bit_identical_across_threads(void)
{
    enum { B = 3, T = 40 };
    int32_t ids[B * T], tg[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = 1 + (int32_t)nd_rng_below(&rng, 63);
    for (int i = 0; i < B * T; i++) tg[i] = (i % T) >= 2 ? (int32_t)nd_rng_below(&rng, 50) : -1;
    check_step_bit_identical_across_threads(tiny_v3, ids, tg, B, T, 3, 2);
}

int main(void)
{
    nd_rng_seed(&rng, 4321);
    RUN(test_attention_split_heads_and_window);
    RUN(test_causal_conv);
    RUN(test_monarch_mlp);
    RUN(test_engram_seed_stride);
    RUN(test_v3_model_full_grad);
    RUN(test_v3_model_lora_grad);
    RUN(test_v3_step_bit_identical_across_threads);
    return check_summary();
}
