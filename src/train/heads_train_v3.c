/* heads_train_v3.c - the Needle 3 embedding and confidence heads over cached
 * cells: forward, backward, losses, the fit and the checkpoint (see
 * heads_train_v3.h). */
#include "train/heads_train_v3.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/params.h"
#include "train/heads_fit.h"

/* ------------------------------------------------------------------ parameters */

int nd_head3_alloc(nd_head3 *h, int R, int k, int q, int d, int out, needle_error *err)
{
    memset(h, 0, sizeof *h);
    if (R <= 0 || k <= 0 || q <= 0 || d <= 0 || out <= 0 || R > 1024 || k > 64 || q > 64 || d > 65536 || out > 65536)
        return nd_errorf(err, NEEDLE_EINVAL, "heads: bad Needle 3 head shape R=%d k=%d q=%d d=%d out=%d", R, k, q, d,
                         out);
    h->R = R, h->k = k, h->q = q, h->d = d, h->out = out;
    size_t rk = (size_t)R * k, qd = (size_t)q * d;
    h->n = rk * d + rk + qd + (size_t)q * rk + (size_t)out * qd + (size_t)out + 2;
    h->flat = calloc(h->n, sizeof(float));
    if (!h->flat) return nd_errorf(err, NEEDLE_ENOMEM, "heads: out of memory");
    h->probes = h->flat;
    h->gain = h->probes + rk * d;
    h->query = h->gain + rk;
    h->row_bias = h->query + qd;
    h->W = h->row_bias + (size_t)q * rk;
    h->bias = h->W + (size_t)out * qd;
    h->log_temp = h->bias + out;
    h->logit_bias = h->log_temp + 1;
    return 0;
}

void nd_head3_free(nd_head3 *h)
{
    free(h->flat);
    memset(h, 0, sizeof *h);
}

/* ------------------------------------------------------------------ forward / backward */

static float dotf(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static void softmax(float *v, int n)
{
    float mx = -INFINITY, sum = 0.0f;
    for (int i = 0; i < n; i++) mx = v[i] > mx ? v[i] : mx;
    for (int i = 0; i < n; i++) sum += v[i] = expf(v[i] - mx);
    for (int i = 0; i < n; i++) v[i] /= sum;
}

void nd_head3_rec_free(nd_head3_rec *rec)
{
    free(rec->a);
    memset(rec, 0, sizeof *rec);
}

int nd_head3_forward(const nd_head3 *h, const nd_cells *c, nd_head3_rec *rec, float *y)
{
    memset(rec, 0, sizeof *rec);
    int R = h->R, k = h->k, q = h->q, d = h->d, RK = R * k;
    if (c->n <= 0 || c->n % R) return -1;
    int T = c->n / R;
    size_t total = (size_t)RK * T + 2 * (size_t)RK * d + RK + (size_t)q * RK + (size_t)q * d;
    rec->a = malloc(sizeof(float) * total);
    if (!rec->a) return -1;
    rec->T = T;
    rec->nrm = rec->a + (size_t)RK * T;
    rec->rinv = rec->nrm + (size_t)RK * d;
    rec->rows = rec->rinv + RK;
    rec->w = rec->rows + (size_t)RK * d;
    rec->pooled = rec->w + (size_t)q * RK;
    float inv_sqrt_d = 1.0f / sqrtf((float)d);
    for (int r = 0; r < R; r++)
        for (int p = 0; p < k; p++) {
            int j = r * k + p;
            float *a = rec->a + (size_t)j * T, *nrm = rec->nrm + (size_t)j * d, *row = rec->rows + (size_t)j * d;
            const float *probe = h->probes + (size_t)j * d;
            for (int t = 0; t < T; t++) a[t] = dotf(c->x + ((size_t)t * R + r) * d, probe, d) * inv_sqrt_d;
            softmax(a, T);
            memset(nrm, 0, sizeof(float) * (size_t)d);
            for (int t = 0; t < T; t++) {
                const float *x = c->x + ((size_t)t * R + r) * d;
                for (int i = 0; i < d; i++) nrm[i] += a[t] * x[i];
            }
            double ss = 0.0;
            for (int i = 0; i < d; i++) ss += (double)nrm[i] * nrm[i];
            float ri = (float)(1.0 / sqrt(ss / d + 1e-6)); /* rmsunit, epsilon 1e-6 */
            rec->rinv[j] = ri;
            for (int i = 0; i < d; i++) {
                nrm[i] *= ri;
                row[i] = nrm[i] * h->gain[j];
            }
        }
    for (int i = 0; i < q; i++) {
        float *w = rec->w + (size_t)i * RK, *out = rec->pooled + (size_t)i * d;
        const float *U = h->query + (size_t)i * d;
        for (int j = 0; j < RK; j++) w[j] = dotf(rec->rows + (size_t)j * d, U, d) * inv_sqrt_d + h->row_bias[(size_t)i * RK + j];
        softmax(w, RK);
        memset(out, 0, sizeof(float) * (size_t)d);
        for (int j = 0; j < RK; j++)
            for (int e = 0; e < d; e++) out[e] += w[j] * rec->rows[(size_t)j * d + e];
    }
    size_t qd = (size_t)q * d;
    for (int o = 0; o < h->out; o++) y[o] = dotf(h->W + (size_t)o * qd, rec->pooled, (int)qd) + h->bias[o];
    return 0;
}

void nd_head3_backward(const nd_head3 *h, const nd_cells *c, const nd_head3_rec *rec, const float *dy, float *grad)
{
    int R = h->R, k = h->k, q = h->q, d = h->d, RK = R * k, T = rec->T;
    size_t qd = (size_t)q * d;
    float inv_sqrt_d = 1.0f / sqrtf((float)d);
    /* the gradient vector has the parameters' layout */
    float *g_probes = grad, *g_gain = g_probes + (size_t)RK * d, *g_query = g_gain + RK;
    float *g_rb = g_query + qd, *g_W = g_rb + (size_t)q * RK, *g_bias = g_W + (size_t)h->out * qd;
    float *dpooled = calloc(qd + (size_t)RK * d + (size_t)RK + (size_t)d + (size_t)T, sizeof(float));
    if (!dpooled) return;
    float *drows = dpooled + qd, *dw = drows + (size_t)RK * d, *dS = dw + RK, *da = dS + d;
    /* y = W pooled + b */
    for (int o = 0; o < h->out; o++) {
        if (dy[o] == 0.0f) continue;
        const float *Wo = h->W + (size_t)o * qd;
        float *gWo = g_W + (size_t)o * qd;
        for (size_t e = 0; e < qd; e++) {
            gWo[e] += dy[o] * rec->pooled[e];
            dpooled[e] += dy[o] * Wo[e];
        }
        g_bias[o] += dy[o];
    }
    /* pooled_i = sum_j w_ij rows_j, w_i = softmax(rows . U_i / sqrt(d) + beta_i) */
    for (int i = 0; i < q; i++) {
        const float *w = rec->w + (size_t)i * RK, *dp = dpooled + (size_t)i * d, *U = h->query + (size_t)i * d;
        float *gU = g_query + (size_t)i * d;
        float sum = 0.0f;
        for (int j = 0; j < RK; j++) {
            dw[j] = dotf(dp, rec->rows + (size_t)j * d, d);
            sum += w[j] * dw[j];
        }
        for (int j = 0; j < RK; j++) {
            float du = w[j] * (dw[j] - sum);
            g_rb[(size_t)i * RK + j] += du;
            const float *row = rec->rows + (size_t)j * d;
            float *dr = drows + (size_t)j * d, s = du * inv_sqrt_d;
            for (int e = 0; e < d; e++) {
                gU[e] += s * row[e];
                dr[e] += w[j] * dp[e] + s * U[e];
            }
        }
    }
    /* rows_j = rmsunit(S_j) g_j, S_j = sum_t a_t C[t][r], a = softmax_t(C[t][r] . P_j / sqrt(d)) */
    for (int r = 0; r < R; r++)
        for (int p = 0; p < k; p++) {
            int j = r * k + p;
            const float *dr = drows + (size_t)j * d, *nrm = rec->nrm + (size_t)j * d, *a = rec->a + (size_t)j * T;
            g_gain[j] += dotf(dr, nrm, d);
            float g = h->gain[j], dn_n = 0.0f;
            for (int e = 0; e < d; e++) dn_n += g * dr[e] * nrm[e];
            for (int e = 0; e < d; e++) dS[e] = rec->rinv[j] * (g * dr[e] - nrm[e] * dn_n / (float)d);
            float sa = 0.0f;
            for (int t = 0; t < T; t++) {
                da[t] = dotf(dS, c->x + ((size_t)t * R + r) * d, d);
                sa += a[t] * da[t];
            }
            float *gp = g_probes + (size_t)j * d;
            for (int t = 0; t < T; t++) {
                float ds = a[t] * (da[t] - sa) * inv_sqrt_d;
                if (ds == 0.0f) continue;
                const float *x = c->x + ((size_t)t * R + r) * d;
                for (int e = 0; e < d; e++) gp[e] += ds * x[e];
            }
        }
    free(dpooled);
}

/* ------------------------------------------------------------------ losses */

static double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }
static double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }

double nd_conf3_loss(const nd_head3 *h, const nd_cells *cells, const int *y, const int *idx, int n, float *grad,
                     float *logits)
{
    double total = 0.0;
    for (int b = 0; b < n; b++) {
        int e = idx[b];
        nd_head3_rec rec;
        float z;
        if (nd_head3_forward(h, &cells[e], &rec, &z)) {
            nd_head3_rec_free(&rec);
            return NAN;
        }
        if (logits) logits[b] = z;
        total += softplus(z) - (y[e] ? z : 0.0);
        if (grad) {
            float dz = (float)((sigmoid(z) - (y[e] ? 1.0 : 0.0)) / n);
            nd_head3_backward(h, &cells[e], &rec, &dz, grad);
        }
        nd_head3_rec_free(&rec);
    }
    return n > 0 ? total / n : 0.0;
}

/* e = y / sqrt(|y|^2 + 1e-12) with what the backward needs. */
typedef struct emb3 {
    nd_head3_rec rec;
    float *y, *e;
    float norm;
} emb3;

static int emb3_forward(const nd_head3 *h, const nd_cells *c, emb3 *r)
{
    r->y = malloc(sizeof(float) * 2 * (size_t)h->out);
    if (!r->y) return -1;
    r->e = r->y + h->out;
    if (nd_head3_forward(h, c, &r->rec, r->y)) return -1;
    double ss = 0.0;
    for (int o = 0; o < h->out; o++) ss += (double)r->y[o] * r->y[o];
    r->norm = (float)sqrt(ss + 1e-12);
    for (int o = 0; o < h->out; o++) r->e[o] = r->y[o] / r->norm;
    return 0;
}

static void emb3_backward(const nd_head3 *h, const nd_cells *c, const emb3 *r, const float *de, float *grad)
{
    float *dy = malloc(sizeof(float) * (size_t)h->out);
    if (!dy) return;
    float ed = dotf(r->e, de, h->out);
    for (int o = 0; o < h->out; o++) dy[o] = (de[o] - r->e[o] * ed) / r->norm;
    nd_head3_backward(h, c, &r->rec, dy, grad);
    free(dy);
}

static void emb3_free(emb3 *r)
{
    nd_head3_rec_free(&r->rec);
    free(r->y);
    r->y = r->e = NULL;
}

double nd_embed3_loss(const nd_head3 *h, const nd_cells *queries, const nd_cells *tools, const int *tool_of,
                      const int *idx, int n, float *grad, int *top1)
{
    if (top1) *top1 = 0;
    if (n <= 0) return 0.0;
    int *cand = malloc(sizeof(int) * (size_t)n), *target = malloc(sizeof(int) * (size_t)n);
    emb3 *qe = calloc((size_t)n, sizeof *qe), *te = calloc((size_t)n, sizeof *te);
    float *dq = calloc((size_t)n * h->out, sizeof(float)), *dt = calloc((size_t)n * h->out, sizeof(float));
    int nc = 0, ok = cand && target && qe && te && dq && dt;
    for (int b = 0; ok && b < n; b++) {
        int t = tool_of[idx[b]], j = 0;
        while (j < nc && cand[j] != t) j++;
        if (j == nc) cand[nc++] = t;
        target[b] = j;
    }
    for (int b = 0; ok && b < n; b++) ok = emb3_forward(h, &queries[idx[b]], &qe[b]) == 0;
    for (int j = 0; ok && j < nc; j++) ok = emb3_forward(h, &tools[cand[j]], &te[j]) == 0;
    double tau = exp(*h->log_temp), beta = *h->logit_bias, total = 0.0, dlt = 0.0, dbeta = 0.0;
    for (int b = 0; ok && b < n; b++) {
        int best = 0;
        double best_s = -INFINITY;
        for (int j = 0; j < nc; j++) {
            double s = 0.0;
            for (int o = 0; o < h->out; o++) s += (double)qe[b].e[o] * te[j].e[o];
            if (s > best_s) best_s = s, best = j;
            double z = j == target[b] ? 1.0 : -1.0, logit = tau * s + beta;
            total += softplus(-z * logit);
            if (!grad) continue;
            double g = -z * sigmoid(-z * logit) / n; /* dL/dlogit */
            dlt += g * tau * s;
            dbeta += g;
            for (int o = 0; o < h->out; o++) {
                dq[(size_t)b * h->out + o] += (float)(g * tau * te[j].e[o]);
                dt[(size_t)j * h->out + o] += (float)(g * tau * qe[b].e[o]);
            }
        }
        if (top1 && best == target[b]) (*top1)++;
    }
    if (ok && grad) {
        for (int b = 0; b < n; b++) emb3_backward(h, &queries[idx[b]], &qe[b], dq + (size_t)b * h->out, grad);
        for (int j = 0; j < nc; j++) emb3_backward(h, &tools[cand[j]], &te[j], dt + (size_t)j * h->out, grad);
        grad[h->n - 2] += (float)dlt;
        grad[h->n - 1] += (float)dbeta;
    }
    for (int b = 0; qe && b < n; b++) emb3_free(&qe[b]);
    for (int j = 0; te && j < n; j++) emb3_free(&te[j]);
    free(cand);
    free(target);
    free(qe);
    free(te);
    free(dq);
    free(dt);
    return ok ? total / n : NAN;
}

/* ------------------------------------------------------------------ init and checkpoint */

/* From the model's head when it has one of this shape, else the reference's
 * initialisation: N(0, 0.02) probes, query and kernel, gain 1, row bias and
 * proj bias 0, log_temp log 10, logit bias -10. */
static void init_head3(nd_head3 *h, const nd_head_weights *w, nd_rng *rng)
{
    size_t rk = (size_t)h->R * h->k, qd = (size_t)h->q * h->d;
    *h->log_temp = (float)log(10.0);
    *h->logit_bias = -10.0f;
    if (w->present && w->num_probes == h->k && w->num_queries == h->q && w->out_dim == h->out &&
        w->layer_probes.rows == (int)rk && w->layer_probes.cols == h->d && w->query.rows == h->q &&
        w->pool_proj.rows == h->out && w->pool_proj.cols == (int)qd && w->gain && w->row_bias) {
        nd_matrix_dequant_rows(&w->layer_probes, 0, (int)rk, h->probes);
        memcpy(h->gain, w->gain, sizeof(float) * rk);
        nd_matrix_dequant_rows(&w->query, 0, h->q, h->query);
        memcpy(h->row_bias, w->row_bias, sizeof(float) * (size_t)h->q * rk);
        nd_matrix_dequant_rows(&w->pool_proj, 0, h->out, h->W);
        if (w->bias) memcpy(h->bias, w->bias, sizeof(float) * (size_t)h->out);
        *h->log_temp = w->log_temp;
        *h->logit_bias = w->temp_bias;
        return;
    }
    nd_rng_fill_normal(rng, h->probes, rk * h->d, 0.0f, 0.02f);
    for (size_t j = 0; j < rk; j++) h->gain[j] = 1.0f;
    nd_rng_fill_normal(rng, h->query, qd, 0.0f, 0.02f);
    nd_rng_fill_normal(rng, h->W, (size_t)h->out * qd, 0.0f, 0.02f);
}

/* The head tensors of one head, in the reference's layout and names. */
enum { H3_TENSORS = 8 };

static int head_tensors(const nd_head3 *h, const char *key, int embedding, float *kernel, char (*names)[64],
                        nd_st_out_tensor *t)
{
    static const char *const leaf[H3_TENSORS] = {"probes", "gain", "query", "row_bias", "proj/kernel", "proj/bias",
                                                 "log_temp", "bias"};
    size_t qd = (size_t)h->q * h->d;
    for (size_t i = 0; i < qd; i++)
        for (int o = 0; o < h->out; o++) kernel[i * (size_t)h->out + (size_t)o] = h->W[(size_t)o * qd + i];
    int n = 0;
    for (int i = 0; i < H3_TENSORS; i++) {
        if (embedding ? i == 5 : i >= 6) continue; /* the embedding head has no proj bias; only it has the two scalars */
        snprintf(names[n], 64, "%s/%s", key, leaf[i]);
        nd_st_out_tensor *o = &t[n];
        *o = (nd_st_out_tensor){.name = names[n], .dtype = ND_ST_F32};
        switch (i) {
        case 0: o->ndim = 3, o->shape[0] = h->R, o->shape[1] = h->k, o->shape[2] = h->d, o->data = h->probes; break;
        case 1: o->ndim = 2, o->shape[0] = h->R, o->shape[1] = h->k, o->data = h->gain; break;
        case 2: o->ndim = 2, o->shape[0] = h->q, o->shape[1] = h->d, o->data = h->query; break;
        case 3:
            o->ndim = 3, o->shape[0] = h->q, o->shape[1] = h->R, o->shape[2] = h->k, o->data = h->row_bias;
            break;
        case 4: o->ndim = 2, o->shape[0] = (int64_t)qd, o->shape[1] = h->out, o->data = kernel; break;
        case 5: o->ndim = 1, o->shape[0] = h->out, o->data = h->bias; break;
        case 6: o->ndim = 0, o->data = h->log_temp; break;
        default: o->ndim = 0, o->data = h->logit_bias; break;
        }
        n++;
    }
    return n;
}

static int write_checkpoint3(const char *in_path, const char *out_path, const nd_head3 *emb, const nd_head3 *conf,
                             needle_error *err)
{
    nd_safetensors st;
    int rc = nd_st_open(in_path, &st, err);
    if (rc) return rc;
    char(*names)[64] = calloc(2 * H3_TENSORS, sizeof *names);
    nd_st_out_tensor *t = calloc(st.count + 2 * H3_TENSORS, sizeof *t);
    float *ke = malloc(sizeof(float) * (size_t)emb->q * emb->d * (size_t)emb->out);
    float *kc = malloc(sizeof(float) * (size_t)conf->q * conf->d * (size_t)conf->out);
    if (!names || !t || !ke || !kc) {
        rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", out_path);
        goto out;
    }
    size_t n = 0;
    for (size_t i = 0; i < st.count; i++) {
        const nd_st_tensor *s = &st.tensors[i];
        /* the two trained heads are written below; the router and the body pass through */
        if (!strncmp(s->name, "embedding_head/", 15) || !strncmp(s->name, "confidence_head/", 16)) continue;
        t[n] = (nd_st_out_tensor){.name = s->name, .dtype = s->dtype, .ndim = s->ndim, .data = s->data};
        memcpy(t[n].shape, s->shape, sizeof s->shape);
        n++;
    }
    int ne = head_tensors(emb, "embedding_head", 1, ke, names, t + n);
    n += (size_t)ne;
    n += (size_t)head_tensors(conf, "confidence_head", 0, kc, names + ne, t + n);
    rc = nd_st_write(out_path, t, n, (const char *const *)st.meta_keys, (const char *const *)st.meta_values,
                     st.meta_count, err);
out:
    free(names);
    free(t);
    free(ke);
    free(kc);
    nd_st_close(&st);
    return rc;
}

/* ------------------------------------------------------------------ the fit */

/* One Needle 3 head's batch loss for nd_head_fit_adam; kind 0 confidence, 1 embedding. */
typedef struct head3_batch {
    nd_head3 *h;
    int kind;
    const nd_cells *a, *b;
    const int *lab;
} head3_batch;

static double head3_batch_loss(void *ctx, const int *rows, int m, float *g)
{
    head3_batch *hb = ctx;
    nd_head3 *h = hb->h;
    double loss = hb->kind == 0 ? nd_conf3_loss(h, hb->a, hb->lab, rows, m, g, NULL)
                                : nd_embed3_loss(h, hb->a, hb->b, hb->lab, rows, m, g, NULL);
    /* what the exporter writes as zeros / what the confidence loss does not read stays put */
    if (hb->kind == 1) memset(g + (h->bias - h->flat), 0, sizeof(float) * (size_t)h->out);
    else g[h->n - 2] = g[h->n - 1] = 0.0f;
    return loss;
}

static int train3(nd_head3 *h, int kind, const nd_cells *a, const nd_cells *b, const int *lab, const int *idx, int n,
                  const nd_heads_train_options *o, nd_rng *rng, needle_error *err)
{
    head3_batch hb = {.h = h, .kind = kind, .a = a, .b = b, .lab = lab};
    nd_head_fit f = {.flat = h->flat,
                     .n = h->n,
                     .min_batch = kind == 1 ? 2 : 1,
                     .name = kind ? "embedding" : "confidence",
                     .batch_loss = head3_batch_loss,
                     .ctx = &hb};
    return nd_head_fit_adam(&f, idx, n, o, rng, o->log, err);
}

int nd_heads3_fit(const nd_weights *w, const nd_heads_data *D, const nd_heads_train_options *o, nd_rng *rng,
                  const char *in_path, const char *out_path, nd_heads_report *rep, needle_error *err)
{
    const nd_config *c = &w->cfg;
    int R = c->num_layers + 1, d = c->d_model;
    nd_head3 emb, conf;
    memset(&emb, 0, sizeof emb);
    memset(&conf, 0, sizeof conf);
    int rc = nd_head3_alloc(&emb, R, (int)nd_dim_value(c, ND_DIM_HK, ND_HEAD_INDEX_CONTRASTIVE),
                            (int)nd_dim_value(c, ND_DIM_HQ, ND_HEAD_INDEX_CONTRASTIVE), d, c->contrastive_dim, err);
    if (!rc)
        rc = nd_head3_alloc(&conf, R, (int)nd_dim_value(c, ND_DIM_HK, ND_HEAD_INDEX_CONFIDENCE),
                            (int)nd_dim_value(c, ND_DIM_HQ, ND_HEAD_INDEX_CONFIDENCE), d, 1, err);
    int n = D->ncho > 0 ? D->ncho : 1;
    float *lg = malloc(sizeof(float) * (size_t)n);
    double *pb = malloc(sizeof(double) * (size_t)n), *pe = malloc(sizeof(double) * (size_t)n);
    int *yh = malloc(sizeof(int) * (size_t)n);
    if (!rc && (!lg || !pb || !pe || !yh)) rc = nd_errorf(err, NEEDLE_ENOMEM, "heads: out of memory");
    if (rc) goto out;
    init_head3(&emb, &w->contrastive, rng);
    init_head3(&conf, &w->confidence, rng);
    if (D->nct > 0) {
        rep->conf_loss_before = nd_conf3_loss(&conf, D->ccells, D->label, D->conf_tr, D->nct, NULL, NULL);
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 1) {
                if ((rc = train3(&conf, 0, D->ccells, NULL, D->label, D->conf_tr, D->nct, o, rng, err)) != 0) goto out;
                rep->conf_loss_after = nd_conf3_loss(&conf, D->ccells, D->label, D->conf_tr, D->nct, NULL, NULL);
            }
            double held = D->ncho ? nd_conf3_loss(&conf, D->ccells, D->label, D->conf_ho, D->ncho, NULL, lg) : NAN;
            for (int k = 0; k < D->ncho; k++) {
                yh[k] = D->label[D->conf_ho[k]];
                pb[k] = sigmoid(lg[k]);
                pe[k] = D->geo[D->conf_ho[k]] < pb[k] ? D->geo[D->conf_ho[k]] : pb[k]; /* NaN geo (no call): pb */
            }
            *(pass ? &rep->held_loss_after : &rep->held_loss_before) = held;
            *(pass ? &rep->ece_after : &rep->ece_before) = nd_ece(pb, yh, D->ncho, 10);
            *(pass ? &rep->env_ece_after : &rep->env_ece_before) = nd_ece(pe, yh, D->ncho, 10);
        }
    }
    if (D->nkt >= 2) {
        int top = 0;
        rep->con_loss_before = nd_embed3_loss(&emb, D->qcells, D->tcells, D->tool_of, D->con_tr, D->nkt, NULL, NULL);
        if (D->nkho) nd_embed3_loss(&emb, D->qcells, D->tcells, D->tool_of, D->con_ho, D->nkho, NULL, &top);
        rep->con_top1_before = D->nkho ? (double)top / D->nkho : NAN;
        if ((rc = train3(&emb, 1, D->qcells, D->tcells, D->tool_of, D->con_tr, D->nkt, o, rng, err)) != 0) goto out;
        rep->con_loss_after = nd_embed3_loss(&emb, D->qcells, D->tcells, D->tool_of, D->con_tr, D->nkt, NULL, NULL);
        if (D->nkho) nd_embed3_loss(&emb, D->qcells, D->tcells, D->tool_of, D->con_ho, D->nkho, NULL, &top);
        rep->con_top1_after = D->nkho ? (double)top / D->nkho : NAN;
    }
    rc = write_checkpoint3(in_path, out_path, &emb, &conf, err);
out:
    free(lg);
    free(pb);
    free(pe);
    free(yh);
    nd_head3_free(&emb);
    nd_head3_free(&conf);
    return rc;
}
