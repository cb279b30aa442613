/* train_model.c - parameter table, activation plan, batched forward + backward. */
#include "train/train_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "train/qat.h"
#include "train/train_monarch.h"
#include "train/train_ops.h"
#include "train/train_par.h"

/* ---- activation plan ------------------------------------------------------ */
struct nd_train_act {
    int B, T;
    size_t floats;
    float *slab;
    float *X; /* (L+1) * N * n*d: the lanes entering each layer, then the final lanes */
    /* one layer of forward scratch */
    float *xh, *xh_r, *hp, *hq, *hr, *p, *qv, *P, *u;
    float *e, *ek, *ev, *evc, *eg, *eru, *erk, *b;
    float *h1, *h1_r, *q, *k, *v, *gp, *qn, *qn_r, *kn, *kn_r, *qr, *kr, *probs, *o, *og, *att, *a2, *a2_r;
    float *b2, *h3, *h3_r, *z1, *z2, *b3, *y, *xa[ND_LORA_TARGETS];
    /* Needle 3: raw q/k/v before the causal conv (taps > 0), the Monarch gate
     * weights and its last product before d4 */
    float *q0, *k0, *v0, *msm, *y3;
    float *mean, *f, *f_r;
    /* backward scratch */
    float *dXa, *dXb, *dxh, *dhp, *dhq, *dhr, *dy, *du, *db, *db2, *dh1, *dq, *dk, *dv, *dgp, *dqn, *dkn;
    float *dqr, *dkr, *do_, *dog, *datt, *da2, *dh3, *de, *dek, *dev, *devc, *dlr, *dmean, *df;
    float *dq0, *dk0, *dv0;
    float *eok, *rope_cos, *rope_sin;
    int32_t *eidx, *ids;
};

/* Assign (or just count, when slab is NULL) every buffer of the plan. */
static size_t plan_layout(nd_train_act *a, const nd_train_model *m, int B, int T, float *slab)
{
    const nd_config *c = &m->cfg;
    size_t N = (size_t)B * T, d = (size_t)c->d_model, n = (size_t)c->mhc_lanes, nd = n * d;
    size_t A = (size_t)c->attn_dim, KV = (size_t)c->kv_dim, Nh = (size_t)c->hada_n;
    size_t TS = (size_t)c->num_tables * (size_t)c->engram_sub, r = (size_t)(m->lora_rank > 0 ? m->lora_rank : 0);
    size_t H = (size_t)c->num_heads, KVH = (size_t)c->num_kv_heads, hd = (size_t)c->head_dim;
    /* v and the attention output have their own head width (Needle 3; = hd in v2) */
    size_t VD = KVH * (size_t)c->v_dim, O = H * (size_t)c->v_dim;
    size_t conv = nd_config_generation(c) == 3 && c->qkv_conv_taps > 0 ? 1 : 0;
    size_t v3 = nd_config_generation(c) == 3 ? 1 : 0;
    size_t off = 0;
#define TAKE(field, count)                                          \
    do {                                                            \
        if (slab) a->field = slab + off;                            \
        off += ((size_t)(count) + 15) & ~(size_t)15; /* 64 B */     \
    } while (0)
    TAKE(X, (size_t)(c->num_layers + 1) * N * nd);
    TAKE(xh, N * nd); TAKE(xh_r, N); TAKE(hp, N * n); TAKE(hq, N * n); TAKE(hr, N * n * n);
    TAKE(p, N * n); TAKE(qv, N * n); TAKE(P, N * n * n); TAKE(u, N * d);
    TAKE(e, N * TS); TAKE(ek, N * d); TAKE(ev, N * d); TAKE(evc, N * d); TAKE(eg, N); TAKE(eru, N); TAKE(erk, N);
    TAKE(b, N * d); TAKE(h1, N * d); TAKE(h1_r, N);
    TAKE(q, N * A); TAKE(k, N * KV); TAKE(v, N * VD); TAKE(gp, N * O);
    TAKE(q0, conv * N * A); TAKE(k0, conv * N * KV); TAKE(v0, conv * N * VD);
    TAKE(dq0, conv * N * A); TAKE(dk0, conv * N * KV); TAKE(dv0, conv * N * VD);
    TAKE(msm, v3 * N * ND_MLP_GATE_RANK); TAKE(y3, v3 * N * d);
    TAKE(qn, N * A); TAKE(qn_r, N * H); TAKE(kn, N * KV); TAKE(kn_r, N * KVH); TAKE(qr, N * A); TAKE(kr, N * KV);
    TAKE(probs, (size_t)B * H * T * T); TAKE(o, N * O); TAKE(og, N * O); TAKE(att, N * d);
    TAKE(a2, N * d); TAKE(a2_r, N); TAKE(b2, N * d); TAKE(h3, N * d); TAKE(h3_r, N);
    TAKE(z1, N * Nh); TAKE(z2, N * Nh); TAKE(b3, N * d); TAKE(y, N * d);
    for (int t = 0; t < ND_LORA_TARGETS; t++) TAKE(xa[t], N * r);
    TAKE(mean, N * d); TAKE(f, N * d); TAKE(f_r, N);
    TAKE(dXa, N * nd); TAKE(dXb, N * nd); TAKE(dxh, N * nd); TAKE(dhp, N * n); TAKE(dhq, N * n);
    TAKE(dhr, N * n * n); TAKE(dy, N * d); TAKE(du, N * d); TAKE(db, N * d); TAKE(db2, N * d); TAKE(dh1, N * d);
    TAKE(dq, N * A); TAKE(dk, N * KV); TAKE(dv, N * VD); TAKE(dgp, N * O); TAKE(dqn, N * A); TAKE(dkn, N * KV);
    TAKE(dqr, N * A); TAKE(dkr, N * KV); TAKE(do_, N * O); TAKE(dog, N * O); TAKE(datt, N * d); TAKE(da2, N * d);
    TAKE(dh3, N * d); TAKE(de, N * TS); TAKE(dek, N * d); TAKE(dev, N * d); TAKE(devc, N * d);
    TAKE(dlr, N * r); TAKE(dmean, N * d); TAKE(df, N * d);
    TAKE(eok, N * (size_t)c->num_tables);
    TAKE(rope_cos, (size_t)T * hd / 2); TAKE(rope_sin, (size_t)T * hd / 2);
#undef TAKE
    /* the int32 arrays go at the end, in float-sized cells */
    if (slab) a->eidx = (int32_t *)(slab + off);
    off += N * (size_t)c->num_tables;
    if (slab) a->ids = (int32_t *)(slab + off);
    off += N;
    return off;
}

int nd_train_plan(nd_train_model *m, int B, int T, needle_error *err)
{
    if (B <= 0 || T <= 0 || T > m->cfg.max_seq_len)
        return nd_errorf(err, NEEDLE_EINVAL, "train: batch %d x %d outside 1..max_seq_len %d", B, T,
                         m->cfg.max_seq_len);
    if (m->act && m->act->B == B && m->act->T == T) return 0;
    nd_train_act probe;
    size_t need = plan_layout(&probe, m, B, T, NULL);
    if (m->act && need <= m->act->floats) {
        /* A smaller batch (per-batch length buckets): lay the buffers out again
         * inside the slab we have.  Every op writes what it later reads (the
         * backward zeroes its accumulators), so stale contents do not matter. */
        nd_train_act *a = m->act;
        plan_layout(a, m, B, T, a->slab);
        a->B = B;
        a->T = T;
        nd_op_rope_tables(a->rope_cos, a->rope_sin, T, m->cfg.head_dim, m->cfg.rope_theta);
        return 0;
    }
    if (need > ((size_t)1 << 40))
        return nd_errorf(err, NEEDLE_ELIMIT, "train: activations for %d x %d would need %zu floats", B, T, need);
    nd_train_act *a = calloc(1, sizeof *a);
    float *slab = a ? calloc(need, sizeof(float)) : NULL;
    if (!slab) {
        free(a);
        return nd_errorf(err, NEEDLE_ENOMEM, "train: cannot allocate %zu MB of activations for %d x %d",
                         need * 4 >> 20, B, T);
    }
    if (m->act) { free(m->act->slab); free(m->act); }
    plan_layout(a, m, B, T, slab);
    a->slab = slab;
    a->floats = need;
    a->B = B;
    a->T = T;
    nd_op_rope_tables(a->rope_cos, a->rope_sin, T, m->cfg.head_dim, m->cfg.rope_theta);
    m->act = a;
    return 0;
}

/* ---- parameter table ------------------------------------------------------ */
static void add_tensor(nd_train_model *m, const nd_param_desc *p, int instance)
{
    nd_tensor_info *t = &m->tensors[m->n_tensors];
    nd_param_ckpt_name_cfg(p, &m->cfg, instance, t->name, sizeof t->name);
    t->ndim = nd_param_ckpt_shape(p, &m->cfg, p->scope == ND_SCOPE_HEAD ? instance : -1, t->shape);
    size_t count = 1;
    for (int i = 0; i < t->ndim; i++) count *= (size_t)t->shape[i];
    for (int i = t->ndim; i < 4; i++) t->shape[i] = 1;
    t->count = count;
    t->offset = m->n_params;
    m->n_params += (count + 15) & ~(size_t)15;
    t->param = p;
    t->instance = instance;
    /* the heads are carried (not trained) so a --full checkpoint keeps them */
    t->role = p->scope == ND_SCOPE_HEAD ? -1 : (int)p->role;
    if (t->role >= 0) m->role_index[p->role][instance] = m->n_tensors;
    m->n_tensors++;
}

int nd_train_model_create(nd_train_model *m, const nd_config *cfg, needle_error *err)
{
    memset(m, 0, sizeof *m);
    m->decision_token = -1;
    m->cfg = *cfg;
    const nd_config *c = &m->cfg;
    if (c->mhc_lanes < 1 || c->mhc_lanes > ND_MAX_LANES)
        return nd_errorf(err, NEEDLE_EUNSUPPORTED, "train: mhc_lanes %d outside 1..%d", c->mhc_lanes, ND_MAX_LANES);
    if (c->head_dim % 2 || c->hada_n < c->d_model)
        return nd_errorf(err, NEEDLE_EINVAL, "train: head_dim %d must be even", c->head_dim);
    for (int i = 0; i < ND_P_COUNT; i++)
        for (int s = 0; s < ND_MAX_SITES; s++) m->role_index[i][s] = -1;
    /* model/params.def in order (the heads come last, after everything the
     * forward reads: the trainer relies on it) */
    int cap = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < ND_P_COUNT; i++) {
            const nd_param_desc *p = &nd_params[i];
            if (!nd_param_in_config(p, c)) continue;
            int n = p->scope == ND_SCOPE_SITE ? c->num_sites : p->scope == ND_SCOPE_HEAD ? nd_head_kinds(c) : 1;
            for (int k = 0; k < n; k++) {
                if (p->scope == ND_SCOPE_HEAD && !nd_param_in_head_ckpt(p, k)) continue;
                if (pass) add_tensor(m, p, k);
                else cap++;
            }
        }
        if (!pass) {
            m->tensors = calloc((size_t)cap, sizeof *m->tensors);
            if (!m->tensors) return nd_errorf(err, NEEDLE_ENOMEM, "train: out of memory for the tensor table");
        }
    }
    m->params = calloc(m->n_params, sizeof(float));
    if (!m->params) {
        free(m->tensors);
        m->tensors = NULL;
        return nd_errorf(err, NEEDLE_ENOMEM, "train: cannot allocate %zu MB of parameters", m->n_params * 4 >> 20);
    }
    return 0;
}

int nd_train_find(const nd_train_model *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name)) return i;
    return -1;
}

void nd_train_model_free(nd_train_model *m)
{
    if (m->act) { free(m->act->slab); free(m->act); }
    free(m->tensors);
    free(m->params);
    free(m->grads);
    free(m->lora);
    free(m->lora_grads);
    nd_qat_free(m);
    memset(m, 0, sizeof *m);
}

static void fill_normal(float *p, size_t n, double std, nd_rng *r) { nd_rng_fill_normal(r, p, n, 0.0f, (float)std); }

/* The reference initialiser of model/params.def, as `needle init` uses it. */
void nd_train_model_init_reference(nd_train_model *m, uint64_t seed)
{
    for (int i = 0; i < m->n_tensors; i++) {
        nd_tensor_info *t = &m->tensors[i];
        nd_param_init_fill_cfg(t->param, &m->cfg, t->name, m->params + t->offset, t->ndim, t->shape, seed);
    }
}

void nd_train_restore_constants(nd_train_model *m)
{
    for (int i = 0; i < m->n_tensors; i++) {
        nd_tensor_info *t = &m->tensors[i];
        if (t->param->init == ND_INIT_PERMUTATION)
            nd_param_init_fill_cfg(t->param, &m->cfg, t->name, m->params + t->offset, t->ndim, t->shape, 0);
    }
}

size_t nd_train_full_trainable(const nd_train_model *m)
{
    size_t end = m->n_params;
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].role < 0 && m->tensors[i].offset < end) end = m->tensors[i].offset;
    return end;
}

/* ---- LoRA / full ----------------------------------------------------------- */
/* The parameter LoRA target t (0-based) adapts. */
static const nd_param_desc *lora_param(int t)
{
    for (int i = 0; i < ND_P_COUNT; i++)
        if (nd_params[i].lora == t + 1) return &nd_params[i];
    return NULL;
}

const char *nd_train_lora_target_name(int t)
{
    const nd_param_desc *p = t >= 0 && t < ND_LORA_TARGETS ? lora_param(t) : NULL;
    return p ? p->ckpt : "";
}

void nd_train_lora_target_ckpt(const nd_config *c, int t, char *out, size_t n)
{
    const nd_param_desc *p = t >= 0 && t < ND_LORA_TARGETS ? lora_param(t) : NULL;
    if (p) nd_param_ckpt_name_cfg(p, c, 0, out, n);
    else if (n) out[0] = '\0';
}

void nd_train_lora_dims(const nd_train_model *m, int t, int *in, int *out)
{
    const nd_tensor_info *ti = &m->tensors[m->role_index[lora_param(t)->role][0]];
    *in = (int)ti->shape[1];
    *out = (int)ti->shape[2];
}

int nd_train_lora_create(nd_train_model *m, int rank, float alpha, uint64_t seed, needle_error *err)
{
    if (rank <= 0 || rank > 4096) return nd_errorf(err, NEEDLE_EINVAL, "train: LoRA rank %d outside 1..4096", rank);
    size_t L = (size_t)m->cfg.num_layers, total = 0;
    for (int t = 0; t < ND_LORA_TARGETS; t++) {
        int in, out;
        nd_train_lora_dims(m, t, &in, &out);
        m->lora_a_off[t] = total;
        total += L * (size_t)in * rank;
        m->lora_b_off[t] = total;
        total += L * (size_t)rank * out;
    }
    float *w = calloc(total, sizeof(float)), *g = calloc(total, sizeof(float));
    if (!w || !g) {
        free(w); free(g);
        return nd_errorf(err, NEEDLE_ENOMEM, "train: cannot allocate LoRA weights (%zu floats)", total);
    }
    free(m->lora); free(m->lora_grads);
    m->lora = w;
    m->lora_grads = g;
    m->n_lora = total;
    m->lora_rank = rank;
    m->lora_scale = alpha / (float)rank;
    m->lora_seed = seed;
    /* A ~ N(0,1)/r, B = 0 (SPEC 9): the adapter starts as the identity */
    nd_rng r;
    nd_rng_seed_stream(&r, seed, 0x10AA);
    for (int t = 0; t < ND_LORA_TARGETS; t++) {
        int in, out;
        nd_train_lora_dims(m, t, &in, &out);
        fill_normal(w + m->lora_a_off[t], L * (size_t)in * rank, 1.0 / rank, &r);
    }
    if (m->act) { free(m->act->slab); free(m->act); m->act = NULL; } /* plan depends on rank */
    return 0;
}

int nd_train_enable_full(nd_train_model *m, needle_error *err)
{
    if (m->grads) return 0;
    m->grads = calloc(m->n_params, sizeof(float));
    if (!m->grads) return nd_errorf(err, NEEDLE_ENOMEM, "train: cannot allocate gradients (%zu MB)", m->n_params * 4 >> 20);
    m->full = 1;
    return 0;
}

/* ---- forward --------------------------------------------------------------- */
#define PL(role, l, per) (nd_train_param(m, role) + (size_t)(l) * (per))
#define GL(role, l, per) (m->grads ? m->grads + m->tensors[m->role_index[role][0]].offset + (size_t)(l) * (per) : NULL)
#define LORA_ROLE(t) (lora_param(t)->role)

static int site_of_layer(const nd_config *c, int l)
{
    for (int s = 0; s < c->num_sites; s++)
        if (c->engram_layers[s] == l) return s;
    return -1;
}

/* The weight the forward multiplies by: the base kernel, or under QAT the
 * merged and CQ-quantised one (which already holds scale * A B). */
static const float *proj_weight(const nd_train_model *m, int t, int l, size_t per)
{
    return m->qat && m->qat->w ? m->qat->w + m->qat->off[t] + (size_t)l * per : PL(LORA_ROLE(t), l, per);
}

/* y = x W_l (+ scale * (x A_l) B_l); xa keeps scale * x A_l for the backward.
 * Under QAT y = x Q(W_l + scale A_l B_l) and xa is only kept. */
static void proj_fwd(nd_train_model *m, int t, int l, float *y, const float *x, float *xa, int N)
{
    int in, out, r = m->lora_rank;
    nd_train_lora_dims(m, t, &in, &out);
    nd_op_matmul_fwd(m->pool, y, x, proj_weight(m, t, l, (size_t)in * out), N, in, out, 0);
    if (m->lora) {
        const float *A = m->lora + m->lora_a_off[t] + (size_t)l * in * r;
        const float *B = m->lora + m->lora_b_off[t] + (size_t)l * r * out;
        nd_op_matmul_fwd(m->pool, xa, x, A, N, in, r, 0);
        for (size_t i = 0; i < (size_t)N * r; i++) xa[i] *= m->lora_scale;
        if (!m->qat) nd_op_matmul_fwd(m->pool, y, xa, B, N, r, out, 1);
    }
}

static void proj_bwd(nd_train_model *m, int t, int l, float *dx, const float *dy, const float *x, const float *xa,
                     int N)
{
    int in, out, r = m->lora_rank;
    nd_train_lora_dims(m, t, &in, &out);
    size_t per = (size_t)in * out;
    nd_op_matmul_bwd(m->pool, dx, GL(LORA_ROLE(t), l, per), dy, x, proj_weight(m, t, l, per), N, in, out);
    if (m->lora) {
        const float *A = m->lora + m->lora_a_off[t] + (size_t)l * in * r;
        const float *B = m->lora + m->lora_b_off[t] + (size_t)l * r * out;
        float *dA = m->lora_grads + m->lora_a_off[t] + (size_t)l * in * r;
        float *dB = m->lora_grads + m->lora_b_off[t] + (size_t)l * r * out;
        float *dxa = m->act->dlr;
        memset(dxa, 0, sizeof(float) * (size_t)N * r);
        nd_op_matmul_bwd(m->pool, dxa, dB, dy, xa, B, N, r, out);
        for (size_t i = 0; i < (size_t)N * r; i++) dxa[i] *= m->lora_scale;
        /* straight-through: under QAT dx already came through the merged weight */
        nd_op_matmul_bwd(m->pool, m->qat ? NULL : dx, dA, dxa, x, A, N, in, r);
    }
}

/* Needle 3 q/k/v conv taps (0 = none, and always 0 in v2). */
static int conv_taps(const nd_config *c) { return nd_config_generation(c) == 3 ? c->qkv_conv_taps : 0; }

/* The attention window of layer l: 0 for a global layer (every earlier key),
 * else the sliding window of a Needle 3 local layer. */
static int layer_window(const nd_config *c, int l) { return nd_config_layer_is_global(c, l) ? 0 : c->sliding_window; }

/* Layer l's Monarch MLP parameters (Needle 3). */
static void monarch_params(const nd_train_model *m, int l, nd_monarch_params *p)
{
    const nd_config *c = &m->cfg;
    int Nh = c->hada_n, aa = c->hada_a * c->hada_a, bb = c->hada_b * c->hada_b;
    *p = (nd_monarch_params){
        .d = c->d_model, .Nh = Nh, .a = c->hada_a, .b = c->hada_b, .rank = ND_MLP_GATE_RANK,
        .d1 = PL(ND_P_D1, l, Nh), .d2 = PL(ND_P_D2, l, Nh), .b2 = PL(ND_P_B2, l, Nh), .d3 = PL(ND_P_D3, l, Nh),
        .d4 = PL(ND_P_D4, l, Nh), .w1a = PL(ND_P_W1A, l, aa), .w2a = PL(ND_P_W2A, l, aa), .w3a = PL(ND_P_W3A, l, aa),
        .w1b = PL(ND_P_W1B, l, bb), .w2b = PL(ND_P_W2B, l, bb), .w3b = PL(ND_P_W3B, l, bb),
        .cond_v = PL(ND_P_COND_V, l, (size_t)c->d_model * ND_MLP_GATE_RANK),
        .cond_u = PL(ND_P_COND_U, l, (size_t)ND_MLP_GATE_RANK * Nh),
        .p1 = nd_train_param(m, ND_P_HADA_P1), .p2 = nd_train_param(m, ND_P_HADA_P2)};
}

static void monarch_grads(const nd_train_model *m, int l, nd_monarch_grads *g)
{
    const nd_config *c = &m->cfg;
    int Nh = c->hada_n, aa = c->hada_a * c->hada_a, bb = c->hada_b * c->hada_b;
    *g = (nd_monarch_grads){
        .d1 = GL(ND_P_D1, l, Nh), .d2 = GL(ND_P_D2, l, Nh), .b2 = GL(ND_P_B2, l, Nh), .d3 = GL(ND_P_D3, l, Nh),
        .d4 = GL(ND_P_D4, l, Nh), .w1a = GL(ND_P_W1A, l, aa), .w2a = GL(ND_P_W2A, l, aa), .w3a = GL(ND_P_W3A, l, aa),
        .w1b = GL(ND_P_W1B, l, bb), .w2b = GL(ND_P_W2B, l, bb), .w3b = GL(ND_P_W3B, l, bb),
        .cond_v = GL(ND_P_COND_V, l, (size_t)c->d_model * ND_MLP_GATE_RANK),
        .cond_u = GL(ND_P_COND_U, l, (size_t)ND_MLP_GATE_RANK * Nh)};
}

/* Block(b) -> b3 (SPEC 4), everything kept in the act scratch. */
static void block_fwd(nd_train_model *m, int l, int N)
{
    nd_train_act *a = m->act;
    const nd_config *c = &m->cfg;
    int d = c->d_model, A = c->attn_dim, KV = c->kv_dim, hd = c->head_dim, H = c->num_heads, KVH = c->num_kv_heads;
    int Nh = c->hada_n, O = H * c->v_dim, VD = KVH * c->v_dim, taps = conv_taps(c);
    nd_par_zcrms_fwd(m->pool, a->h1, a->h1_r, a->b, PL(ND_P_NORM_IN, l, d), N, d, 1);
    if (m->qat) nd_qat_act_rows(a->h1, N, d, m->qat->act_bits); /* A8 attn.in (feeds q, k, v and gate) */
    proj_fwd(m, 0, l, taps ? a->q0 : a->q, a->h1, a->xa[0], N);
    proj_fwd(m, 1, l, taps ? a->k0 : a->k, a->h1, a->xa[1], N);
    proj_fwd(m, 2, l, taps ? a->v0 : a->v, a->h1, a->xa[2], N);
    proj_fwd(m, 3, l, a->gp, a->h1, a->xa[3], N);
    if (taps) { /* Needle 3: causal depthwise conv of the raw q, k, v along time */
        nd_op_causal_conv_fwd(a->q, a->q0, PL(ND_P_Q_TAPS, l, (size_t)taps * A), taps, a->B, a->T, A);
        nd_op_causal_conv_fwd(a->k, a->k0, PL(ND_P_K_TAPS, l, (size_t)taps * KV), taps, a->B, a->T, KV);
        nd_op_causal_conv_fwd(a->v, a->v0, PL(ND_P_V_TAPS, l, (size_t)taps * VD), taps, a->B, a->T, VD);
    }
    nd_par_zcrms_fwd(m->pool, a->qn, a->qn_r, a->q, PL(ND_P_Q_NORM, l, hd), N, A, H);
    nd_par_zcrms_fwd(m->pool, a->kn, a->kn_r, a->k, PL(ND_P_K_NORM, l, hd), N, KV, KVH);
    nd_op_rope_fwd(a->qr, a->qn, a->rope_cos, a->rope_sin, N, a->T, H, hd);
    nd_op_rope_fwd(a->kr, a->kn, a->rope_cos, a->rope_sin, N, a->T, KVH, hd);
    if (m->qat && nd_config_generation(c) == 3) {
        /* Needle 3 deploy numerics: q per head A8 (the attention kernel's int8
         * query), k and v per head and position A8 (the int8 KV cache, kv_bits 8) */
        if (m->qat->act_bits) nd_qat_act_rows(a->qr, N * H, hd, 8);
        if (c->kv_bits >= 8) {
            nd_qat_act_rows(a->kr, N * KVH, hd, 8);
            nd_qat_act_rows(a->v, N * KVH, c->v_dim, 8);
        }
    }
    nd_op_attention_fwd(m->pool, a->o, a->probs, a->qr, a->kr, a->v, a->B, a->T, H, KVH, hd, c->v_dim,
                        layer_window(c, l));
    nd_par_sigmoid_gate_fwd(m->pool, a->og, a->o, a->gp, N, O);
    if (m->qat) nd_qat_act_rows(a->og, N, O, m->qat->act_bits); /* A8 attn.out */
    proj_fwd(m, 4, l, a->att, a->og, a->xa[4], N);
    nd_par_zcrms_fwd(m->pool, a->a2, a->a2_r, a->att, PL(ND_P_POST_NORM, l, d), N, d, 1);
    float sg = nd_sigmoid(PL(ND_P_ATTN_GATE, l, 1)[0]);
    for (size_t i = 0; i < (size_t)N * d; i++) a->b2[i] = a->b[i] + sg * a->a2[i];
    nd_par_zcrms_fwd(m->pool, a->h3, a->h3_r, a->b2, PL(ND_P_PRE_HADA, l, d), N, d, 1);
    if (nd_config_generation(c) == 3) {
        nd_monarch_params mp;
        monarch_params(m, l, &mp);
        nd_monarch_fwd(m->pool, &mp, a->b3, a->msm, a->z1, a->z2, a->y3, a->h3, N);
    } else {
        nd_par_hada_mlp_fwd(m->pool, a->b3, a->z1, a->z2, a->h3, PL(ND_P_D1, l, Nh), PL(ND_P_D2, l, Nh),
                            PL(ND_P_D3, l, Nh), N, d, Nh);
    }
    for (size_t i = 0; i < (size_t)N * d; i++) a->b3[i] += a->b2[i];
}

/* The mHC lanes of layer l over a block of rows (run by nd_par_rows). */
typedef struct {
    nd_train_model *m;
    int l;
    const float *X; /* lanes entering the layer */
    float *Xn;      /* forward: lanes leaving it */
    const float *dXn;
    float *dX;
} lane_ctx;

/* rows whose Sinkhorn runs as one batch (nd_op_sinkhorn_fwd_batch: four at a time in vector lanes) */
#define SK_BLOCK 8

/* p = sigmoid(pre), q = 2 sigmoid(post), P = Sinkhorn(res), u = sum_i p_i X_i */
static void mhc_pre_rows(void *ctx, int r0, int r1, float *partial)
{
    (void)partial;
    lane_ctx *lc = ctx;
    nd_train_model *m = lc->m;
    nd_train_act *a = m->act;
    int l = lc->l, d = m->cfg.d_model, n = m->cfg.mhc_lanes, nd = n * d, home = nd_mhc_home_lane(l, n);
    float apre = PL(ND_P_A_PRE, l, 1)[0], apost = PL(ND_P_A_POST, l, 1)[0], ares = PL(ND_P_A_RES, l, 1)[0];
    const float *bpre = PL(ND_P_B_PRE, l, n), *bpost = PL(ND_P_B_POST, l, n), *bres = PL(ND_P_B_RES, l, n * n);
    float R[SK_BLOCK * ND_MAX_LANES * ND_MAX_LANES];
    for (int b0 = r0; b0 < r1; b0 += SK_BLOCK) { /* the Sinkhorn of SK_BLOCK rows in one call */
        int count = r1 - b0 < SK_BLOCK ? r1 - b0 : SK_BLOCK;
        for (int r = b0; r < b0 + count; r++) {
            float *p = a->p + (size_t)r * n, *qv = a->qv + (size_t)r * n, *Rr = R + (size_t)(r - b0) * n * n;
            for (int i = 0; i < n; i++) {
                p[i] = nd_sigmoid(apre * a->hp[(size_t)r * n + i] + bpre[i] + nd_mhc_pre_bias(i, home));
                qv[i] = 2.0f * nd_sigmoid(apost * a->hq[(size_t)r * n + i] + bpost[i] + nd_mhc_post_bias(i, home));
            }
            for (int i = 0; i < n * n; i++) Rr[i] = ares * a->hr[(size_t)r * n * n + i] + bres[i];
        }
        nd_op_sinkhorn_fwd_batch(a->P + (size_t)b0 * n * n, R, n, count);
    }
    for (int r = r0; r < r1; r++) {
        const float *p = a->p + (size_t)r * n, *Xr = lc->X + (size_t)r * nd;
        float *u = a->u + (size_t)r * d;
        memset(u, 0, sizeof(float) * (size_t)d);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < d; j++) u[j] += p[i] * Xr[(size_t)i * d + j];
    }
}

/* X'_i = sum_j P_ij X_j + q_i y */
static void mhc_mix_rows(void *ctx, int r0, int r1, float *partial)
{
    (void)partial;
    lane_ctx *lc = ctx;
    nd_train_act *a = lc->m->act;
    int d = lc->m->cfg.d_model, n = lc->m->cfg.mhc_lanes, nd = n * d;
    for (int r = r0; r < r1; r++) {
        const float *Xr = lc->X + (size_t)r * nd, *P = a->P + (size_t)r * n * n, *y = a->y + (size_t)r * d;
        float *Xo = lc->Xn + (size_t)r * nd;
        for (int i = 0; i < n; i++) {
            float *xo = Xo + (size_t)i * d, qi = a->qv[(size_t)r * n + i];
            for (int j = 0; j < d; j++) xo[j] = qi * y[j];
            for (int jj = 0; jj < n; jj++) {
                float pij = P[i * n + jj];
                const float *xs = Xr + (size_t)jj * d;
                for (int j = 0; j < d; j++) xo[j] += pij * xs[j];
            }
        }
    }
}

/* Layer l: X (N, n*d) -> Xn (NULL: recompute the scratch only). */
static void layer_fwd(nd_train_model *m, int l, const float *X, float *Xn)
{
    nd_train_act *a = m->act;
    const nd_config *c = &m->cfg;
    int N = a->B * a->T, d = c->d_model, n = c->mhc_lanes, nd = n * d;
    nd_par_zcrms_fwd(m->pool, a->xh, a->xh_r, X, NULL, N, nd, 1);
    if (m->qat && nd_config_generation(c) == 3) nd_qat_act_rows(a->xh, N, nd, m->qat->act_bits); /* A8 mhc.in (v3) */
    nd_op_matmul_fwd(m->pool, a->hp, a->xh, PL(ND_P_PHI_PRE, l, (size_t)nd * n), N, nd, n, 0);
    nd_op_matmul_fwd(m->pool, a->hq, a->xh, PL(ND_P_PHI_POST, l, (size_t)nd * n), N, nd, n, 0);
    nd_op_matmul_fwd(m->pool, a->hr, a->xh, PL(ND_P_PHI_RES, l, (size_t)nd * n * n), N, nd, n * n, 0);
    lane_ctx lc = {m, l, X, Xn, NULL, NULL};
    nd_par_rows(m->pool, N, mhc_pre_rows, &lc, NULL, 0);
    int s = site_of_layer(c, l);
    if (s >= 0) {
        int TS = c->num_tables * c->engram_sub;
        nd_op_engram_gather_fwd(a->e, nd_train_site_param(m, ND_P_TABLES, s), a->eidx, a->eok, N, c->num_tables,
                                c->engram_slots, c->engram_sub);
        if (m->qat) nd_qat_act_rows(a->e, N, TS, m->qat->act_bits); /* A8 engram.e */
        nd_op_matmul_fwd(m->pool, a->ek, a->e, nd_train_site_param(m, ND_P_KEY_PROJ, s), N, TS, d, 0);
        nd_op_matmul_fwd(m->pool, a->ev, a->e, nd_train_site_param(m, ND_P_VALUE_PROJ, s), N, TS, d, 0);
        nd_op_taps_fwd(a->evc, a->ev, nd_train_site_param(m, ND_P_TAPS, s), a->B, a->T, d, c->conv_dilation);
        nd_par_engram_gate_fwd(m->pool, a->b, a->eg, a->eru, a->erk, a->u, a->ek, a->evc, N, d);
    } else {
        memcpy(a->b, a->u, sizeof(float) * (size_t)N * d);
    }
    block_fwd(m, l, N);
    for (size_t i = 0; i < (size_t)N * d; i++) a->y[i] = a->b3[i] - a->u[i];
    if (Xn) nd_par_rows(m->pool, N, mhc_mix_rows, &lc, NULL, 0);
}

static void forward_all(nd_train_model *m, const int32_t *ids, int B, int T)
{
    nd_train_act *a = m->act;
    const nd_config *c = &m->cfg;
    int N = B * T, d = c->d_model, n = c->mhc_lanes, nd = n * d;
    memcpy(a->ids, ids, sizeof(int32_t) * (size_t)N);
    int stride = nd_config_generation(c) == 3 && c->engram_seed_heads > 0 ? c->engram_seed_heads : c->engram_heads_eff;
    nd_op_engram_index(a->eidx, a->eok, ids, B, T, c->engram_orders, c->num_orders, c->engram_heads_eff, stride,
                       c->engram_slots);
    const float *E = nd_train_param(m, ND_P_EMBEDDING);
    float sd = sqrtf((float)d);
    for (int r = 0; r < N; r++) {
        int id = ids[r] >= 0 && ids[r] < c->vocab_size ? ids[r] : 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < d; j++) a->X[(size_t)r * nd + (size_t)i * d + j] = E[(size_t)id * d + j] * sd;
    }
    for (int l = 0; l < c->num_layers; l++)
        layer_fwd(m, l, a->X + (size_t)l * N * nd, a->X + (size_t)(l + 1) * N * nd);
    const float *XL = a->X + (size_t)c->num_layers * N * nd;
    for (int r = 0; r < N; r++)
        for (int j = 0; j < d; j++) {
            float s = 0.0f;
            for (int i = 0; i < n; i++) s += XL[(size_t)r * nd + (size_t)i * d + j];
            a->mean[(size_t)r * d + j] = s / (float)n;
        }
    nd_par_zcrms_fwd(m->pool, a->f, a->f_r, a->mean, nd_train_param(m, ND_P_FINAL_NORM), N, d, 1);
    if (m->qat) nd_qat_act_rows(a->f, N, d, m->qat->act_bits); /* A8 logits.in */
}

int nd_train_forward(nd_train_model *m, const int32_t *ids, int B, int T, needle_error *err)
{
    int rc = nd_train_plan(m, B, T, err);
    if (rc) return rc;
    nd_qat_refresh(m); /* the merged targets follow the current A, B */
    forward_all(m, ids, B, T);
    return 0;
}

const float *nd_train_hidden(const nd_train_model *m, int row) { return m->act->f + (size_t)row * m->cfg.d_model; }

void nd_train_logits_row(const nd_train_model *m, int row, float *logits)
{
    const float *f = nd_train_hidden(m, row), *E = nd_train_param(m, ND_P_EMBEDDING);
    int d = m->cfg.d_model, Vo = nd_config_logit_width(&m->cfg);
    for (int v = 0; v < m->cfg.vocab_size; v++) {
        float s = 0.0f;
        for (int j = 0; j < d && v < Vo; j++) s += f[j] * E[(size_t)v * d + j];
        logits[v] = v < Vo ? s : -INFINITY; /* Needle 3 out_vocab: only E[0:V_o] scores */
    }
}

/* ---- backward -------------------------------------------------------------- */
#define ZERO(p, count) memset((p), 0, sizeof(float) * (size_t)(count))

/* Given a->dy = d loss / d Block output (b3), leave d loss / d b in a->db. */
static void block_bwd(nd_train_model *m, int l, int N)
{
    nd_train_act *a = m->act;
    const nd_config *c = &m->cfg;
    int d = c->d_model, A = c->attn_dim, KV = c->kv_dim, hd = c->head_dim, H = c->num_heads, KVH = c->num_kv_heads;
    int Nh = c->hada_n, O = H * c->v_dim, VD = KVH * c->v_dim, taps = conv_taps(c);
    size_t Nd = (size_t)N * d;
    /* b3 = b2 + mlp(h3), h3 = zcrms(b2) */
    memcpy(a->db2, a->dy, sizeof(float) * Nd);
    ZERO(a->dh3, Nd);
    if (nd_config_generation(c) == 3) {
        nd_monarch_params mp;
        nd_monarch_grads mg;
        monarch_params(m, l, &mp);
        monarch_grads(m, l, &mg);
        nd_monarch_bwd(m->pool, &mp, m->grads ? &mg : NULL, a->dh3, a->dy, a->h3, a->msm, a->z1, a->z2, a->y3, N);
    } else {
        nd_par_hada_mlp_bwd(m->pool, a->dh3, GL(ND_P_D1, l, Nh), GL(ND_P_D2, l, Nh), GL(ND_P_D3, l, Nh), a->dy, a->h3,
                            a->z1, a->z2, PL(ND_P_D1, l, Nh), PL(ND_P_D2, l, Nh), PL(ND_P_D3, l, Nh), N, d, Nh);
    }
    nd_par_zcrms_bwd(m->pool, a->db2, GL(ND_P_PRE_HADA, l, d), a->dh3, a->b2, a->h3_r, PL(ND_P_PRE_HADA, l, d), N, d, 1);
    /* b2 = b + sigmoid(ag) * a2 */
    float sg = nd_sigmoid(PL(ND_P_ATTN_GATE, l, 1)[0]);
    double dsg = 0.0;
    memcpy(a->db, a->db2, sizeof(float) * Nd);
    for (size_t i = 0; i < Nd; i++) {
        a->da2[i] = sg * a->db2[i];
        dsg += (double)a->db2[i] * a->a2[i];
    }
    if (m->grads) GL(ND_P_ATTN_GATE, l, 1)[0] += (float)dsg * sg * (1.0f - sg);
    ZERO(a->datt, Nd);
    nd_par_zcrms_bwd(m->pool, a->datt, GL(ND_P_POST_NORM, l, d), a->da2, a->att, a->a2_r, PL(ND_P_POST_NORM, l, d), N, d, 1);
    ZERO(a->dog, (size_t)N * O);
    proj_bwd(m, 4, l, a->dog, a->datt, a->og, a->xa[4], N);
    ZERO(a->do_, (size_t)N * O);
    ZERO(a->dgp, (size_t)N * O);
    nd_par_sigmoid_gate_bwd(m->pool, a->do_, a->dgp, a->dog, a->o, a->gp, N, O);
    ZERO(a->dqr, (size_t)N * A);
    ZERO(a->dkr, (size_t)N * KV);
    ZERO(a->dv, (size_t)N * VD);
    nd_op_attention_bwd(m->pool, a->dqr, a->dkr, a->dv, a->do_, a->probs, a->qr, a->kr, a->v, a->B, a->T, H, KVH,
                        hd, c->v_dim, layer_window(c, l));
    ZERO(a->dqn, (size_t)N * A);
    ZERO(a->dkn, (size_t)N * KV);
    nd_op_rope_bwd(a->dqn, a->dqr, a->rope_cos, a->rope_sin, N, a->T, H, hd);
    nd_op_rope_bwd(a->dkn, a->dkr, a->rope_cos, a->rope_sin, N, a->T, KVH, hd);
    ZERO(a->dq, (size_t)N * A);
    ZERO(a->dk, (size_t)N * KV);
    nd_par_zcrms_bwd(m->pool, a->dq, GL(ND_P_Q_NORM, l, hd), a->dqn, a->q, a->qn_r, PL(ND_P_Q_NORM, l, hd), N, A, H);
    nd_par_zcrms_bwd(m->pool, a->dk, GL(ND_P_K_NORM, l, hd), a->dkn, a->k, a->kn_r, PL(ND_P_K_NORM, l, hd), N, KV, KVH);
    const float *dq = a->dq, *dk = a->dk, *dv = a->dv;
    if (taps) { /* back through the causal conv to the raw projections */
        ZERO(a->dq0, (size_t)N * A);
        ZERO(a->dk0, (size_t)N * KV);
        ZERO(a->dv0, (size_t)N * VD);
        nd_op_causal_conv_bwd(a->dq0, GL(ND_P_Q_TAPS, l, (size_t)taps * A), a->dq, a->q0,
                              PL(ND_P_Q_TAPS, l, (size_t)taps * A), taps, a->B, a->T, A);
        nd_op_causal_conv_bwd(a->dk0, GL(ND_P_K_TAPS, l, (size_t)taps * KV), a->dk, a->k0,
                              PL(ND_P_K_TAPS, l, (size_t)taps * KV), taps, a->B, a->T, KV);
        nd_op_causal_conv_bwd(a->dv0, GL(ND_P_V_TAPS, l, (size_t)taps * VD), a->dv, a->v0,
                              PL(ND_P_V_TAPS, l, (size_t)taps * VD), taps, a->B, a->T, VD);
        dq = a->dq0, dk = a->dk0, dv = a->dv0;
    }
    ZERO(a->dh1, Nd);
    proj_bwd(m, 0, l, a->dh1, dq, a->h1, a->xa[0], N);
    proj_bwd(m, 1, l, a->dh1, dk, a->h1, a->xa[1], N);
    proj_bwd(m, 2, l, a->dh1, dv, a->h1, a->xa[2], N);
    proj_bwd(m, 3, l, a->dh1, a->dgp, a->h1, a->xa[3], N);
    nd_par_zcrms_bwd(m->pool, a->db, GL(ND_P_NORM_IN, l, d), a->dh1, a->b, a->h1_r, PL(ND_P_NORM_IN, l, d), N, d, 1);
}

/* Backward of X'_i = sum_j P_ij X_j + q_i y over a block of rows: dX (the P
 * part), dy, and through q = 2 sigmoid(.) and P = Sinkhorn(.) the gradients
 * of the post/res projections (dhq, dhr); partial (when not NULL) collects
 * a_post, a_res, b_post[n], b_res[n*n]. */
static void mhc_mix_bwd_rows(void *ctx, int r0, int r1, float *partial)
{
    lane_ctx *lc = ctx;
    nd_train_model *m = lc->m;
    nd_train_act *a = m->act;
    int l = lc->l, d = m->cfg.d_model, n = m->cfg.mhc_lanes, nd = n * d;
    float apost = PL(ND_P_A_POST, l, 1)[0], ares = PL(ND_P_A_RES, l, 1)[0];
    const float *bres = PL(ND_P_B_RES, l, n * n);
    /* dP of SK_BLOCK rows, their R and dR, for one batched Sinkhorn backward */
    float dPb[SK_BLOCK * ND_MAX_LANES * ND_MAX_LANES], Rb[SK_BLOCK * ND_MAX_LANES * ND_MAX_LANES];
    float dRb[SK_BLOCK * ND_MAX_LANES * ND_MAX_LANES], dq[ND_MAX_LANES];
    double ga_post = 0, ga_res = 0;
    for (int b0 = r0; b0 < r1; b0 += SK_BLOCK) { /* the Sinkhorn backward of SK_BLOCK rows in one call */
        int count = r1 - b0 < SK_BLOCK ? r1 - b0 : SK_BLOCK;
        for (int r = b0; r < b0 + count; r++) {
            float *dP = dPb + (size_t)(r - b0) * n * n, *R = Rb + (size_t)(r - b0) * n * n;
            const float *Xr = lc->X + (size_t)r * nd, *G = lc->dXn + (size_t)r * nd, *P = a->P + (size_t)r * n * n;
            const float *y = a->y + (size_t)r * d;
            float *dXr = lc->dX + (size_t)r * nd, *dy = a->dy + (size_t)r * d;
            memset(dy, 0, sizeof(float) * (size_t)d);
            for (int i = 0; i < n; i++) {
                const float *gi = G + (size_t)i * d;
                float qi = a->qv[(size_t)r * n + i], s = 0.0f;
                for (int j = 0; j < d; j++) { s += gi[j] * y[j]; dy[j] += qi * gi[j]; }
                dq[i] = s;
                for (int jj = 0; jj < n; jj++) {
                    const float *xj = Xr + (size_t)jj * d;
                    float *dxj = dXr + (size_t)jj * d, pij = P[i * n + jj], t = 0.0f;
                    for (int j = 0; j < d; j++) { t += gi[j] * xj[j]; dxj[j] += pij * gi[j]; }
                    dP[i * n + jj] = t;
                }
            }
            /* post: q = 2 sigmoid(z) -> dz = dq * q (1 - q/2) */
            for (int i = 0; i < n; i++) {
                float qi = a->qv[(size_t)r * n + i];
                float dz = dq[i] * qi * (1.0f - 0.5f * qi);
                ga_post += (double)dz * a->hq[(size_t)r * n + i];
                if (partial) partial[2 + i] += dz;
                a->dhq[(size_t)r * n + i] = dz * apost;
            }
            for (int i = 0; i < n * n; i++) R[i] = ares * a->hr[(size_t)r * n * n + i] + bres[i];
        }
        /* res: Sinkhorn backward */
        memset(dRb, 0, sizeof(float) * (size_t)count * n * n);
        nd_op_sinkhorn_bwd_batch(dRb, dPb, Rb, n, count);
        for (int r = b0; r < b0 + count; r++) {
            const float *dR = dRb + (size_t)(r - b0) * n * n;
            for (int i = 0; i < n * n; i++) {
                ga_res += (double)dR[i] * a->hr[(size_t)r * n * n + i];
                if (partial) partial[2 + n + i] += dR[i];
                a->dhr[(size_t)r * n * n + i] = dR[i] * ares;
            }
        }
    }
    if (partial) {
        partial[0] += (float)ga_post;
        partial[1] += (float)ga_res;
    }
}

/* Backward of u = sum_i p_i X_i, p = sigmoid(z): dX (the u part) and dhp;
 * partial (when not NULL) collects a_pre, b_pre[n]. */
static void mhc_pre_bwd_rows(void *ctx, int r0, int r1, float *partial)
{
    lane_ctx *lc = ctx;
    nd_train_model *m = lc->m;
    nd_train_act *a = m->act;
    int l = lc->l, d = m->cfg.d_model, n = m->cfg.mhc_lanes, nd = n * d;
    float apre = PL(ND_P_A_PRE, l, 1)[0];
    double ga_pre = 0;
    for (int r = r0; r < r1; r++) {
        const float *Xr = lc->X + (size_t)r * nd, *du = a->du + (size_t)r * d;
        float *dXr = lc->dX + (size_t)r * nd;
        for (int i = 0; i < n; i++) {
            float pi = a->p[(size_t)r * n + i], t = 0.0f;
            const float *xi = Xr + (size_t)i * d;
            float *dxi = dXr + (size_t)i * d;
            for (int j = 0; j < d; j++) { t += du[j] * xi[j]; dxi[j] += pi * du[j]; }
            float dz = t * pi * (1.0f - pi);
            ga_pre += (double)dz * a->hp[(size_t)r * n + i];
            if (partial) partial[1 + i] += dz;
            a->dhp[(size_t)r * n + i] = dz * apre;
        }
    }
    if (partial) partial[0] += (float)ga_pre;
}

/* dXn = d loss / d (layer output); writes d loss / d X (layer input) into dX. */
static void layer_bwd(nd_train_model *m, int l, const float *X, const float *dXn, float *dX)
{
    nd_train_act *a = m->act;
    const nd_config *c = &m->cfg;
    int N = a->B * a->T, d = c->d_model, n = c->mhc_lanes, nd = n * d;
    layer_fwd(m, l, X, NULL); /* recompute this layer's scratch */
    ZERO(dX, (size_t)N * nd);
    /* per-layer scalar/vector parameter gradients of the lanes, gathered
     * in one buffer: a_post, a_res, b_post[n], b_res[n*n] | a_pre, b_pre[n] */
    size_t n_post = 2 + (size_t)n + (size_t)n * n, n_pre = 1 + (size_t)n;
    float lane_grads[2 + ND_MAX_LANES + ND_MAX_LANES * ND_MAX_LANES + 1 + ND_MAX_LANES] = {0};
    lane_ctx lc = {m, l, X, NULL, dXn, dX};
    nd_par_rows(m->pool, N, mhc_mix_bwd_rows, &lc, m->grads ? lane_grads : NULL, n_post);
    /* y = Block(b) - u */
    block_bwd(m, l, N);
    size_t Nd = (size_t)N * d;
    for (size_t i = 0; i < Nd; i++) a->du[i] = -a->dy[i];
    int s = site_of_layer(c, l);
    if (s >= 0) {
        int TS = c->num_tables * c->engram_sub;
        float *g_tab = m->grads ? m->grads + m->tensors[m->role_index[ND_P_TABLES][s]].offset : NULL;
        float *g_key = m->grads ? m->grads + m->tensors[m->role_index[ND_P_KEY_PROJ][s]].offset : NULL;
        float *g_val = m->grads ? m->grads + m->tensors[m->role_index[ND_P_VALUE_PROJ][s]].offset : NULL;
        float *g_taps = m->grads ? m->grads + m->tensors[m->role_index[ND_P_TAPS][s]].offset : NULL;
        ZERO(a->dek, Nd);
        ZERO(a->devc, Nd);
        nd_par_engram_gate_bwd(m->pool, a->du, a->dek, a->devc, a->db, a->eg, a->eru, a->erk, a->u, a->ek, a->evc, N, d);
        if (m->grads) {
            /* the engram branch only feeds parameters: skip it when they are frozen */
            ZERO(a->dev, Nd);
            nd_op_taps_bwd(a->dev, g_taps, a->devc, a->ev, nd_train_site_param(m, ND_P_TAPS, s), a->B, a->T, d,
                           c->conv_dilation);
            ZERO(a->de, (size_t)N * TS);
            nd_op_matmul_bwd(m->pool, a->de, g_key, a->dek, a->e, nd_train_site_param(m, ND_P_KEY_PROJ, s), N, TS, d);
            nd_op_matmul_bwd(m->pool, a->de, g_val, a->dev, a->e, nd_train_site_param(m, ND_P_VALUE_PROJ, s), N, TS, d);
            nd_op_engram_gather_bwd(g_tab, a->de, a->eidx, a->eok, N, c->num_tables, c->engram_slots,
                                    c->engram_sub);
        }
    } else {
        for (size_t i = 0; i < Nd; i++) a->du[i] += a->db[i];
    }
    nd_par_rows(m->pool, N, mhc_pre_bwd_rows, &lc, m->grads ? lane_grads + n_post : NULL, n_pre);
    if (m->grads) {
        GL(ND_P_A_POST, l, 1)[0] += lane_grads[0];
        GL(ND_P_A_RES, l, 1)[0] += lane_grads[1];
        for (int i = 0; i < n; i++) GL(ND_P_B_POST, l, n)[i] += lane_grads[2 + i];
        for (int i = 0; i < n * n; i++) GL(ND_P_B_RES, l, n * n)[i] += lane_grads[2 + n + i];
        GL(ND_P_A_PRE, l, 1)[0] += lane_grads[n_post];
        for (int i = 0; i < n; i++) GL(ND_P_B_PRE, l, n)[i] += lane_grads[n_post + 1 + i];
    }
    ZERO(a->dxh, (size_t)N * nd);
    nd_op_matmul_bwd(m->pool, a->dxh, GL(ND_P_PHI_PRE, l, (size_t)nd * n), a->dhp, a->xh,
                     PL(ND_P_PHI_PRE, l, (size_t)nd * n), N, nd, n);
    nd_op_matmul_bwd(m->pool, a->dxh, GL(ND_P_PHI_POST, l, (size_t)nd * n), a->dhq, a->xh,
                     PL(ND_P_PHI_POST, l, (size_t)nd * n), N, nd, n);
    nd_op_matmul_bwd(m->pool, a->dxh, GL(ND_P_PHI_RES, l, (size_t)nd * n * n), a->dhr, a->xh,
                     PL(ND_P_PHI_RES, l, (size_t)nd * n * n), N, nd, n * n);
    nd_par_zcrms_bwd(m->pool, dX, NULL, a->dxh, X, a->xh_r, NULL, N, nd, 1);
}

double nd_train_step_grad(nd_train_model *m, const int32_t *ids, const int32_t *targets, int B, int T,
                          int backward, int *n_targets)
{
    if (nd_train_plan(m, B, T, NULL)) return NAN;
    nd_train_act *a = m->act;
    const nd_config *c = &m->cfg;
    /* Needle 3 out_vocab: the logits (and so the targets) cover E[0:V_o] only */
    int N = B * T, d = c->d_model, n = c->mhc_lanes, nd = n * d, V = nd_config_logit_width(c);
    int count = 0;
    for (int i = 0; i < N; i++) count += targets[i] >= 0 && targets[i] < V;
    if (n_targets) *n_targets = count;
    nd_qat_refresh(m);
    forward_all(m, ids, B, T);
    if (!count) return 0.0;
    float *dE = m->grads ? m->grads + m->tensors[m->role_index[ND_P_EMBEDDING][0]].offset : NULL;
    if (!backward)
        return nd_op_logits_ce(m->pool, NULL, NULL, a->f, nd_train_param(m, ND_P_EMBEDDING), targets, NULL, N, d, V, 0);
    if (m->grads) ZERO(m->grads, m->n_params);
    if (m->lora_grads) ZERO(m->lora_grads, m->n_lora);
    ZERO(a->df, (size_t)N * d);
    /* the token after each <tool_call> is the call / no-call decision: weighted when asked */
    float *weight = NULL;
    if (m->decision_token >= 0 && m->decision_weight > 0.0f && m->decision_weight != 1.0f &&
        (weight = malloc(sizeof(float) * (size_t)N)))
        for (int i = 0; i < N; i++) weight[i] = ids[i] == m->decision_token ? m->decision_weight : 1.0f;
    double loss = nd_op_logits_ce(m->pool, a->df, dE, a->f, nd_train_param(m, ND_P_EMBEDDING), targets, weight, N, d,
                                  V, 1.0f / (float)count);
    free(weight);
    ZERO(a->dmean, (size_t)N * d);
    float *g_final = m->grads ? m->grads + m->tensors[m->role_index[ND_P_FINAL_NORM][0]].offset : NULL;
    nd_par_zcrms_bwd(m->pool, a->dmean, g_final, a->df, a->mean, a->f_r, nd_train_param(m, ND_P_FINAL_NORM), N, d, 1);
    float *dXn = a->dXa, *dX = a->dXb;
    for (int r = 0; r < N; r++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < d; j++) dXn[(size_t)r * nd + (size_t)i * d + j] = a->dmean[(size_t)r * d + j] / n;
    for (int l = c->num_layers - 1; l >= 0; l--) {
        layer_bwd(m, l, a->X + (size_t)l * N * nd, dXn, dX);
        float *t = dXn; dXn = dX; dX = t;
    }
    if (dE) {
        float sd = sqrtf((float)d);
        for (int r = 0; r < N; r++) {
            int id = ids[r] >= 0 && ids[r] < c->vocab_size ? ids[r] : 0;
            for (int i = 0; i < n; i++)
                for (int j = 0; j < d; j++) dE[(size_t)id * d + j] += sd * dXn[(size_t)r * nd + (size_t)i * d + j];
        }
    }
    return loss;
}
