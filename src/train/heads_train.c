/* heads_train.c - confidence and contrastive heads over cached cells (see heads_train.h). */
#include "train/heads_train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/retrieval.h"
#include "agent/session.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "core/formulas.h"
#include "model/params.h"
#include "train/heads_fit.h"
#include "train/heads_train_v3.h"

/* ------------------------------------------------------------------ parameters */

int nd_head_params_alloc(nd_head_params *h, int P, int d, int out, needle_error *err)
{
    memset(h, 0, sizeof *h);
    if (P <= 0 || d <= 0 || out <= 0 || P > 64 || d > 65536 || out > 65536)
        return nd_errorf(err, NEEDLE_EINVAL, "heads: bad head shape P=%d d=%d out=%d", P, d, out);
    h->P = P;
    h->d = d;
    h->out = out;
    size_t pd = (size_t)P * d;
    h->n = pd + (size_t)out * pd + (size_t)out + 1;
    h->flat = calloc(h->n, sizeof(float));
    if (!h->flat) return nd_errorf(err, NEEDLE_ENOMEM, "heads: out of memory");
    h->probes = h->flat;
    h->W = h->probes + pd;
    h->bias = h->W + (size_t)out * pd;
    h->log_temp = h->bias + out;
    return 0;
}

void nd_head_params_free(nd_head_params *h)
{
    free(h->flat);
    memset(h, 0, sizeof *h);
}

/* ------------------------------------------------------------------ pooling */

/* A plain dot product in index order (the trainer's pooling kernel). */
static float dot_plain(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int j = 0; j < n; j++) s += a[j] * b[j];
    return s;
}

void nd_head_pool_fwd(const nd_head_params *h, const nd_cells *c, float *pooled, float *wts)
{
    for (int k = 0; k < h->P; k++)
        nd_probe_pool(c->x, c->n, h->d, h->probes + (size_t)k * h->d, dot_plain, wts + (size_t)k * c->n,
                      pooled + (size_t)k * h->d);
}

void nd_head_pool_bwd(const nd_head_params *h, const nd_cells *c, const float *pooled, const float *wts,
                      const float *dpooled, float *gprobes)
{
    int d = h->d;
    float inv = 1.0f / sqrtf((float)d);
    for (int k = 0; k < h->P; k++) {
        const float *g = dpooled + (size_t)k * d, *pk = pooled + (size_t)k * d, *w = wts + (size_t)k * c->n;
        float *gp = gprobes + (size_t)k * d;
        float gpool = 0.0f;
        for (int j = 0; j < d; j++) gpool += g[j] * pk[j];
        for (int i = 0; i < c->n; i++) {
            const float *x = c->x + (size_t)i * d;
            float gx = 0.0f;
            for (int j = 0; j < d; j++) gx += g[j] * x[j];
            float ds = w[i] * (gx - gpool) * inv; /* softmax backward, then the 1/sqrt(d) scale */
            if (ds == 0.0f) continue;
            for (int j = 0; j < d; j++) gp[j] += ds * x[j];
        }
    }
}

static float *pool_scratch(const nd_head_params *h, const nd_cells *c, float **wts)
{
    float *pooled = malloc(sizeof(float) * ((size_t)h->P * h->d + (size_t)h->P * (size_t)c->n));
    *wts = pooled ? pooled + (size_t)h->P * h->d : NULL;
    return pooled;
}

/* ------------------------------------------------------------------ confidence */

static double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

double nd_conf_loss(const nd_head_params *h, const nd_cells *cells, const int *y, const int *idx, int n, float *grad,
                    float *logits)
{
    size_t pd = (size_t)h->P * h->d;
    double total = 0.0;
    float *dpooled = grad ? malloc(sizeof(float) * pd) : NULL;
    for (int b = 0; b < n; b++) {
        int e = idx[b];
        float *wts = NULL;
        float *pooled = pool_scratch(h, &cells[e], &wts);
        if (!pooled) continue;
        nd_head_pool_fwd(h, &cells[e], pooled, wts);
        double z = h->bias[0];
        for (size_t j = 0; j < pd; j++) z += (double)h->W[j] * pooled[j];
        if (logits) logits[b] = (float)z;
        total += softplus(z) - (y[e] ? z : 0.0);
        if (grad && dpooled) {
            float dz = (float)((1.0 / (1.0 + exp(-z)) - (y[e] ? 1.0 : 0.0)) / n);
            float *gW = grad + pd, *gb = gW + pd;
            for (size_t j = 0; j < pd; j++) {
                gW[j] += dz * pooled[j];
                dpooled[j] = dz * h->W[j];
            }
            gb[0] += dz;
            nd_head_pool_bwd(h, &cells[e], pooled, wts, dpooled, grad);
        }
        free(pooled);
    }
    free(dpooled);
    return n > 0 ? total / n : 0.0;
}

/* ------------------------------------------------------------------ contrastive */

/* e = normalise(pooled W); keeps pooled, wts and the norm for backward. */
typedef struct emb_rec {
    float *pooled, *wts, *e;
    float norm;
} emb_rec;

static int emb_forward(const nd_head_params *h, const nd_cells *c, emb_rec *r)
{
    size_t pd = (size_t)h->P * h->d;
    r->pooled = pool_scratch(h, c, &r->wts);
    r->e = malloc(sizeof(float) * (size_t)h->out);
    if (!r->pooled || !r->e) return -1;
    nd_head_pool_fwd(h, c, r->pooled, r->wts);
    double ss = 0.0;
    for (int o = 0; o < h->out; o++) {
        const float *w = h->W + (size_t)o * pd;
        double v = 0.0;
        for (size_t j = 0; j < pd; j++) v += (double)w[j] * r->pooled[j];
        r->e[o] = (float)v;
        ss += v * v;
    }
    r->norm = (float)sqrt(ss > 1e-24 ? ss : 1e-24);
    for (int o = 0; o < h->out; o++) r->e[o] /= r->norm;
    return 0;
}

/* de -> grads of W and probes through the normalisation and the pooling. */
static void emb_backward(const nd_head_params *h, const nd_cells *c, const emb_rec *r, const float *de, float *grad)
{
    size_t pd = (size_t)h->P * h->d;
    double edot = 0.0;
    for (int o = 0; o < h->out; o++) edot += (double)r->e[o] * de[o];
    float *dpooled = calloc(pd, sizeof(float));
    if (!dpooled) return;
    float *gW = grad + pd;
    for (int o = 0; o < h->out; o++) {
        float dv = (float)((de[o] - r->e[o] * edot) / r->norm);
        if (dv == 0.0f) continue;
        const float *w = h->W + (size_t)o * pd;
        float *gw = gW + (size_t)o * pd;
        for (size_t j = 0; j < pd; j++) {
            gw[j] += dv * r->pooled[j];
            dpooled[j] += dv * w[j];
        }
    }
    nd_head_pool_bwd(h, c, r->pooled, r->wts, dpooled, grad);
    free(dpooled);
}

static void emb_free(emb_rec *r)
{
    free(r->pooled);
    free(r->e);
}

double nd_contrastive_loss(const nd_head_params *h, const nd_cells *queries, const nd_cells *tools, const int *tool_of,
                           const int *idx, int n, float *grad, int *top1)
{
    if (top1) *top1 = 0;
    if (n <= 0) return 0.0;
    /* the batch's distinct tools are the candidates */
    int *cand = malloc(sizeof(int) * (size_t)n), *target = malloc(sizeof(int) * (size_t)n);
    emb_rec *qe = calloc((size_t)n, sizeof *qe), *te = calloc((size_t)n, sizeof *te);
    double *logit = malloc(sizeof(double) * (size_t)n * n);
    float *dq = calloc((size_t)n * h->out, sizeof(float)), *dt = calloc((size_t)n * h->out, sizeof(float));
    double total = 0.0, dlogtemp = 0.0;
    int nc = 0, ok = cand && target && qe && te && logit && dq && dt;
    for (int b = 0; ok && b < n; b++) {
        int t = tool_of[idx[b]], j = 0;
        while (j < nc && cand[j] != t) j++;
        if (j == nc) cand[nc++] = t;
        target[b] = j;
    }
    for (int b = 0; ok && b < n; b++) ok = emb_forward(h, &queries[idx[b]], &qe[b]) == 0;
    for (int j = 0; ok && j < nc; j++) ok = emb_forward(h, &tools[cand[j]], &te[j]) == 0;
    double tau = exp(*h->log_temp);
    for (int b = 0; ok && b < n; b++) {
        double mx = -INFINITY;
        for (int j = 0; j < nc; j++) {
            double s = 0.0;
            for (int o = 0; o < h->out; o++) s += (double)qe[b].e[o] * te[j].e[o];
            logit[(size_t)b * nc + j] = tau * s;
            if (tau * s > mx) mx = tau * s;
        }
        double z = 0.0;
        int best = 0;
        for (int j = 0; j < nc; j++) {
            z += exp(logit[(size_t)b * nc + j] - mx);
            if (logit[(size_t)b * nc + j] > logit[(size_t)b * nc + best]) best = j;
        }
        if (top1 && best == target[b]) (*top1)++;
        total += -(logit[(size_t)b * nc + target[b]] - mx - log(z));
        if (!grad) continue;
        for (int j = 0; j < nc; j++) {
            double g = (exp(logit[(size_t)b * nc + j] - mx) / z - (j == target[b])) / n;
            dlogtemp += g * logit[(size_t)b * nc + j]; /* d(tau*s)/d(log_temp) = tau*s */
            for (int o = 0; o < h->out; o++) {
                dq[(size_t)b * h->out + o] += (float)(g * tau * te[j].e[o]);
                dt[(size_t)j * h->out + o] += (float)(g * tau * qe[b].e[o]);
            }
        }
    }
    if (ok && grad) {
        for (int b = 0; b < n; b++) emb_backward(h, &queries[idx[b]], &qe[b], dq + (size_t)b * h->out, grad);
        for (int j = 0; j < nc; j++) emb_backward(h, &tools[cand[j]], &te[j], dt + (size_t)j * h->out, grad);
        grad[h->n - 1] += (float)dlogtemp;
    }
    for (int b = 0; qe && b < n; b++) emb_free(&qe[b]);
    for (int j = 0; te && j < n; j++) emb_free(&te[j]);
    free(cand);
    free(target);
    free(qe);
    free(te);
    free(logit);
    free(dq);
    free(dt);
    return ok ? total / n : NAN;
}

/* ------------------------------------------------------------------ calibration */

double nd_ece(const double *p, const int *y, int n, int bins)
{
    if (n <= 0 || bins <= 0) return NAN;
    double ece = 0.0;
    for (int b = 0; b < bins; b++) {
        double lo = (double)b / bins, hi = (double)(b + 1) / bins, sp = 0.0, sy = 0.0;
        int cnt = 0;
        for (int i = 0; i < n; i++) {
            /* [lo, hi), the last bin closed at 1 */
            if (p[i] < lo || (b < bins - 1 ? p[i] >= hi : p[i] > hi)) continue;
            sp += p[i];
            sy += y[i];
            cnt++;
        }
        if (cnt) ece += (double)cnt / n * fabs(sy / cnt - sp / cnt);
    }
    return ece;
}

/* ------------------------------------------------------------------ data */

typedef struct row {
    char *query, *system, *tools; /* tools: compact JSON array */
    nd_json *answers;              /* JSON array */
    char *first_tool;              /* compact JSON of the first call's tool, NULL when none */
} row;

static void row_free(row *r)
{
    free(r->query);
    free(r->system);
    free(r->tools);
    free(r->first_tool);
    nd_json_free(r->answers);
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* A field holding JSON directly, or a string holding JSON text. */
static nd_json *json_field(const nd_json *obj, const char *key, needle_error *err)
{
    const nd_json *v = nd_json_get(obj, key);
    if (!v) return NULL;
    nd_json *out = NULL;
    if (v->type == ND_JSON_STRING) {
        if (nd_json_parse(v->str, v->len, key, &out, err)) return NULL;
        return out;
    }
    nd_buf b;
    nd_buf_init(&b);
    nd_json_write(&b, v, 0);
    if (!b.oom) nd_json_parse(b.data, b.len, key, &out, err);
    nd_buf_free(&b);
    return out;
}

static char *compact(const nd_json *v)
{
    nd_buf b;
    nd_buf_init(&b);
    nd_json_write(&b, v, 1);
    if (b.oom) {
        nd_buf_free(&b);
        return NULL;
    }
    return nd_buf_take(&b);
}

/* 0 when the line became a row; -1 to skip it (reason in err). */
static int parse_row(const char *line, size_t len, const char *where, row *r, needle_error *err)
{
    memset(r, 0, sizeof *r);
    nd_json *j = NULL;
    if (nd_json_parse(line, len, where, &j, err)) return -1;
    int rc = -1;
    const nd_json *q = nd_json_get(j, "query"), *sys = nd_json_get(j, "system");
    nd_json *tools = json_field(j, "tools", err);
    nd_json *ans = json_field(j, "answers", err);
    if (!ans) ans = json_field(j, "function_calls", err);
    if (!q || q->type != ND_JSON_STRING || !tools || tools->type != ND_JSON_ARRAY || !ans || ans->type != ND_JSON_ARRAY) {
        nd_errorf(err, NEEDLE_EFORMAT, "%s: needs a string query, a tools array and an answers array", where);
        goto out;
    }
    if (strlen(q->str) != q->len || (sys && sys->type == ND_JSON_STRING && strlen(sys->str) != sys->len)) {
        /* a \u0000 would silently cut the text */
        nd_errorf(err, NEEDLE_EFORMAT, "%s: \"%s\" contains a NUL character (\\u0000)", where,
                  strlen(q->str) != q->len ? "query" : "system");
        goto out;
    }
    r->query = dup_n(q->str, q->len);
    r->system = sys && sys->type == ND_JSON_STRING && sys->len ? dup_n(sys->str, sys->len) : NULL;
    r->tools = compact(tools);
    if (ans->count > 0) {
        const nd_json *name = nd_json_get(&ans->items[0], "name");
        for (size_t i = 0; name && name->type == ND_JSON_STRING && i < tools->count; i++) {
            const nd_json *tn = nd_json_get(&tools->items[i], "name");
            if (tn && tn->type == ND_JSON_STRING && !strcmp(tn->str, name->str)) {
                r->first_tool = compact(&tools->items[i]);
                break;
            }
        }
    }
    if (!r->query || !r->tools) {
        nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where);
        goto out;
    }
    r->answers = ans;
    ans = NULL;
    rc = 0;
out:
    nd_json_free(ans);
    nd_json_free(tools);
    nd_json_free(j);
    if (rc) row_free(r);
    return rc;
}

static int load_rows(const char *path, int max_rows, row **out, int *n_out, FILE *log, needle_error *err)
{
    char *text = NULL;
    size_t len = 0;
    int rc = nd_read_file_max(path, ND_LIMIT_DATA_BYTES, "JSONL dataset", &text, &len, err);
    if (rc) return rc;
    row *rows = NULL;
    int n = 0, cap = 0, line_no = 0;
    for (char *p = text; p < text + len && (max_rows <= 0 || n < max_rows);) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p));
        size_t ll = nl ? (size_t)(nl - p) : (size_t)(text + len - p);
        line_no++;
        if (ll > 0 && !(ll == 1 && p[0] == '\r')) {
            char where[300];
            snprintf(where, sizeof where, "%s:%d", path, line_no);
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                row *g = realloc(rows, sizeof(row) * (size_t)cap);
                if (!g) {
                    rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path);
                    break;
                }
                rows = g;
            }
            needle_error e = {0};
            if (parse_row(p, ll, where, &rows[n], &e) == 0) n++;
            else if (log) {
                /* the reason already starts with "FILE:LINE: " */
                size_t wl = strlen(where);
                const char *why = strncmp(e.message, where, wl) == 0 && e.message[wl] == ':' ? e.message + wl + 2 : e.message;
                fprintf(log, "%s: skipped: %s\n", where, why);
            }
        }
        p += ll + 1;
    }
    free(text);
    if (!rc && n == 0) rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: no usable row", path);
    if (rc) {
        for (int i = 0; i < n; i++) row_free(&rows[i]);
        free(rows);
        return rc;
    }
    *out = rows;
    *n_out = n;
    return 0;
}

/* ------------------------------------------------------------------ heads in and out of the checkpoint */

static void init_head(nd_head_params *h, const nd_head_weights *w, nd_rng *rng)
{
    size_t pd = (size_t)h->P * h->d;
    if (w->present && w->num_probes == h->P && w->out_dim == h->out && w->proj.cols == (int)pd) {
        memcpy(h->probes, w->probes, sizeof(float) * pd);
        nd_matrix_dequant_rows(&w->proj, 0, h->out, h->W);
        if (w->bias) memcpy(h->bias, w->bias, sizeof(float) * (size_t)h->out);
        *h->log_temp = w->log_temp;
        return;
    }
    /* the reference initialisation: N(0, 0.02) probes and kernel, zero bias and log_temp */
    nd_rng_fill_normal(rng, h->probes, pd, 0.0f, 0.02f);
    nd_rng_fill_normal(rng, h->W, (size_t)h->out * pd, 0.0f, 0.02f);
}

/* Is `name` the checkpoint name of a head tensor of model/params.def? */
static int is_head_tensor(const char *name)
{
    char nm[96];
    for (int i = 0; i < ND_P_COUNT; i++) {
        if (nd_params[i].scope != ND_SCOPE_HEAD) continue;
        for (int k = 0; k < ND_NUM_HEAD_KINDS; k++) {
            nd_param_ckpt_name(&nd_params[i], k, nm, sizeof nm);
            if (!strcmp(nm, name)) return 1;
        }
    }
    return 0;
}

/* A head dimension of model/params.def for a trained head. */
static int64_t head_dim_value(nd_dim dim, const nd_head_params *h)
{
    switch (dim) {
    case ND_DIM_PROBES: return h->P;
    case ND_DIM_D: return h->d;
    case ND_DIM_PD: return (int64_t)h->P * h->d;
    case ND_DIM_HEAD_OUT: return h->out;
    default: return 1;
    }
}

/* Copy the input checkpoint with the head tensors replaced (kernels back to
 * [in, out]): every head line of model/params.def that the head's checkpoint
 * carries, under its table name. */
static int write_checkpoint(const char *in_path, const char *out_path, const nd_head_params *conf,
                            const nd_head_params *con, needle_error *err)
{
    nd_safetensors st;
    int rc = nd_st_open(in_path, &st, err);
    if (rc) return rc;
    const nd_head_params *hp[ND_NUM_HEAD_KINDS] = {[ND_HEAD_INDEX_CONTRASTIVE] = con, [ND_HEAD_INDEX_CONFIDENCE] = conf};
    float *kernel[ND_NUM_HEAD_KINDS] = {0};
    enum { MAX_HEAD_TENSORS = 4 * ND_P_COUNT };
    char(*names)[96] = malloc(MAX_HEAD_TENSORS * sizeof *names);
    nd_st_out_tensor *t = calloc(st.count + MAX_HEAD_TENSORS, sizeof *t);
    int ok = t != NULL && names != NULL;
    for (int k = 0; k < ND_HEAD_INDEX_ROUTER; k++) {
        const nd_head_params *h = hp[k];
        size_t pd = (size_t)h->P * h->d;
        kernel[k] = ok ? malloc(sizeof(float) * pd * (size_t)h->out) : NULL;
        if (!kernel[k]) ok = 0;
        else
            for (size_t i = 0; i < pd; i++)
                for (int o = 0; o < h->out; o++) kernel[k][i * (size_t)h->out + (size_t)o] = h->W[(size_t)o * pd + i];
    }
    if (!ok) {
        rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", out_path);
        goto out;
    }
    size_t n = 0;
    for (size_t i = 0; i < st.count; i++) {
        const nd_st_tensor *s = &st.tensors[i];
        if (is_head_tensor(s->name)) continue;
        t[n].name = s->name;
        t[n].dtype = s->dtype;
        t[n].ndim = s->ndim;
        memcpy(t[n].shape, s->shape, sizeof s->shape);
        t[n].data = s->data;
        n++;
    }
    int used = 0;
    for (int i = 0; i < ND_P_COUNT; i++) {
        const nd_param_desc *p = &nd_params[i];
        if (p->scope != ND_SCOPE_HEAD || (p->gens && !(p->gens & ND_GEN_2))) continue; /* Needle 2 heads only */
        for (int k = 0; k < ND_HEAD_INDEX_ROUTER; k++) {
            if (!nd_param_in_head_ckpt(p, k) || used == MAX_HEAD_TENSORS) continue;
            const nd_head_params *h = hp[k];
            char *nm = names[used++];
            nd_param_ckpt_name(p, k, nm, sizeof names[0]);
            nd_st_out_tensor *o = &t[n++];
            *o = (nd_st_out_tensor){.name = nm, .dtype = ND_ST_F32};
            for (int d = 0; d < ND_PARAM_CK_DIMS && p->ck[d] != ND_DIM_NONE; d++) o->shape[o->ndim++] = head_dim_value(p->ck[d], h);
            switch (p->role) {
            case ND_P_HEAD_PROBES: o->data = h->probes; break;
            case ND_P_HEAD_PROJ: o->data = kernel[k]; break;
            case ND_P_HEAD_BIAS: o->data = h->bias; break;
            case ND_P_HEAD_LOG_TEMP: {
                /* keep the input's own form of the scalar: () or (1,) */
                const nd_st_tensor *lt = nd_st_find(&st, nm);
                if (lt && lt->ndim == 0) o->ndim = 0;
                o->data = h->log_temp;
                break;
            }
            default: n--; break; /* a head line this writer does not know yet */
            }
        }
    }
    rc = nd_st_write(out_path, t, n, (const char *const *)st.meta_keys, (const char *const *)st.meta_values,
                     st.meta_count, err);
out:
    for (int k = 0; k < ND_HEAD_INDEX_ROUTER; k++) free(kernel[k]);
    free(names);
    free(t);
    nd_st_close(&st);
    return rc;
}

/* ------------------------------------------------------------------ the whole run */

static double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }

/* One Needle 2 head's batch loss for nd_head_fit_adam; kind 0 confidence, 1 contrastive. */
typedef struct head_batch {
    nd_head_params *h;
    int kind;
    const nd_cells *a, *b;
    const int *lab;
} head_batch;

static double head_batch_loss(void *ctx, const int *rows, int m, float *g)
{
    head_batch *hb = ctx;
    nd_head_params *h = hb->h;
    if (hb->kind == 1) return nd_contrastive_loss(h, hb->a, hb->b, hb->lab, rows, m, g, NULL);
    double loss = nd_conf_loss(h, hb->a, hb->lab, rows, m, g, NULL);
    g[h->n - 1] = 0.0f; /* the confidence head has no temperature */
    return loss;
}

static void clamp_temperature(void *ctx)
{
    nd_head_params *h = ((head_batch *)ctx)->h;
    if (*h->log_temp > 4.6052f) *h->log_temp = 4.6052f; /* temperature <= 100, as CLIP clamps */
}

/* Train one head over idx; the caller measures. */
static int train_head(nd_head_params *h, int kind, const nd_cells *a, const nd_cells *b, const int *lab, const int *idx,
                      int n, const nd_heads_train_options *o, nd_rng *rng, FILE *log, needle_error *err)
{
    head_batch hb = {.h = h, .kind = kind, .a = a, .b = b, .lab = lab};
    nd_head_fit f = {.flat = h->flat,
                     .n = h->n,
                     .min_batch = kind == 1 ? 2 : 1,
                     .name = kind ? "contrastive" : "confidence",
                     .batch_loss = head_batch_loss,
                     .after_step = clamp_temperature,
                     .ctx = &hb};
    return nd_head_fit_adam(&f, idx, n, o, rng, log, err);
}

int nd_heads_train(const char *model_path, const char *tokenizer_path, const char *data_path, const char *out_path,
                   const nd_heads_train_options *opt_in, nd_heads_report *rep, needle_error *err)
{
    nd_heads_train_options o = opt_in ? *opt_in : (nd_heads_train_options){0};
    if (o.epochs <= 0) o.epochs = 40;
    if (o.lr <= 0) o.lr = 3e-3;
    if (o.batch <= 0) o.batch = 16;
    if (o.holdout <= 0 || o.holdout >= 1) o.holdout = 0.2;
    if (o.max_new_tokens <= 0) o.max_new_tokens = 256;
    size_t budget = (o.max_cell_mb ? o.max_cell_mb : 2048) << 20;
    memset(rep, 0, sizeof *rep);
    FILE *log = o.log;

    needle_model *m = NULL;
    needle_model_options mo = {0};
    int rc = needle_model_open(model_path, tokenizer_path, &mo, &m, err);
    if (rc) return rc;
    row *rows = NULL;
    int n_rows = 0;
    if ((rc = load_rows(data_path, o.max_rows, &rows, &n_rows, log, err)) != 0) {
        needle_model_close(m);
        return rc;
    }
    rep->rows = n_rows;
    const nd_config *c = &m->net->weights.cfg;
    int d = c->d_model;
    nd_rng rng;
    nd_rng_seed(&rng, o.seed);
    nd_head_params conf, con;
    memset(&conf, 0, sizeof conf);
    memset(&con, 0, sizeof con);
    int *order = malloc(sizeof(int) * (size_t)n_rows);
    nd_cells *ccells = calloc((size_t)n_rows, sizeof *ccells), *qcells = calloc((size_t)n_rows, sizeof *qcells);
    nd_cells *tcells = calloc((size_t)n_rows, sizeof *tcells);
    int *label = calloc((size_t)n_rows, sizeof(int)), *tool_of = calloc((size_t)n_rows, sizeof(int));
    double *geo = calloc((size_t)n_rows, sizeof(double));
    char **tool_text = calloc((size_t)n_rows, sizeof(char *));
    int *conf_tr = malloc(sizeof(int) * (size_t)n_rows), *conf_ho = malloc(sizeof(int) * (size_t)n_rows);
    int *con_tr = malloc(sizeof(int) * (size_t)n_rows), *con_ho = malloc(sizeof(int) * (size_t)n_rows);
    double *pb = malloc(sizeof(double) * (size_t)n_rows), *pe = malloc(sizeof(double) * (size_t)n_rows);
    int *yh = malloc(sizeof(int) * (size_t)n_rows);
    float *lg = malloc(sizeof(float) * (size_t)n_rows);
    if (!order || !ccells || !qcells || !tcells || !label || !tool_of || !geo || !tool_text || !conf_tr || !conf_ho ||
        !con_tr || !con_ho || !pb || !pe || !yh || !lg) {
        rc = nd_errorf(err, NEEDLE_ENOMEM, "heads: out of memory");
        goto out;
    }
    int v3 = nd_config_generation(c) == 3; /* Needle 3 heads: heads_train_v3.c */
    nd_weights_heads_ready(&m->net->weights); /* the model's own heads start the training */
    if (!v3) {
        if ((rc = nd_head_params_alloc(&conf, 8, d, 1, err)) != 0) goto out;
        if ((rc = nd_head_params_alloc(&con, 4, d, c->contrastive_dim, err)) != 0) goto out;
        init_head(&conf, &m->net->weights.confidence, &rng);
        init_head(&con, &m->net->weights.contrastive, &rng);
    }

    /* a fixed shuffle decides the held-out rows */
    for (int i = 0; i < n_rows; i++) order[i] = i;
    nd_rng_shuffle_int(&rng, order, (size_t)n_rows);
    int n_held = (int)(n_rows * o.holdout + 0.5);
    if (n_held < 1 && n_rows >= 2) n_held = 1;
    size_t used = 0;
    int n_tools = 0, nct = 0, ncho = 0, nkt = 0, nkho = 0;

    for (int oi = 0; oi < n_rows; oi++) {
        int i = order[oi], held = oi < n_held;
        row *r = &rows[i];
        /* (a) confidence: the agent answers, the answer is judged */
        if (!o.skip_confidence && used < budget) {
            needle_session_options so = {.system = r->system, .tools_json = r->tools,
                                         .max_new_tokens = o.max_new_tokens};
            needle_session *s = NULL;
            needle_error e = {0};
            char *env = NULL;
            if (nd_session_open(m, &so, &s, &e) == 0) {
                s->keep_cells = 1;
                if (nd_session_turn(s, ND_TURN_USER, r->query, 0, &env, &e) == 0) {
                    nd_json *j = NULL;
                    const nd_json *succ = NULL, *calls = NULL;
                    if (nd_json_parse(env, strlen(env), "envelope", &j, &e) == 0) {
                        succ = nd_json_get(j, "success");
                        calls = nd_json_get(j, "function_calls");
                    }
                    size_t floats = s->cells_len;
                    int whole = s->cells_len > 0 && s->cells_len % (size_t)d == 0 &&
                                s->cells_len / (size_t)d == (size_t)s->turn_ids.len * (size_t)(c->num_layers + 1);
                    int answered = succ && succ->type == ND_JSON_TRUE && !isnan(s->last_call_logp_mean);
                    /* Needle 3: a turn that ends without a valid call list (success false) is judged too, by
                     * its envelope's empty call list: right only for a row whose answer is no call. Without
                     * it a weak model gives the head no example at all, and the head should learn that such
                     * turns are not to be trusted. */
                    int judged = answered || (v3 && succ && calls && calls->type == ND_JSON_ARRAY);
                    if (judged && calls && whole) {
                        ccells[i].x = malloc(sizeof(float) * floats);
                        if (ccells[i].x) {
                            memcpy(ccells[i].x, s->cells, sizeof(float) * floats);
                            ccells[i].n = (int)(floats / (size_t)d);
                            used += sizeof(float) * floats;
                            label[i] = nd_json_equal(calls, r->answers);
                            geo[i] = answered ? exp(s->last_call_logp_mean) : NAN; /* no call tokens */
                            if (held) conf_ho[ncho++] = i;
                            else conf_tr[nct++] = i;
                            rep->conf_correct += label[i];
                        }
                    } else {
                        rep->failed_turns++;
                    }
                    nd_json_free(j);
                } else {
                    rep->failed_turns++;
                }
                free(env);
                nd_session_free(s);
            } else {
                rep->failed_turns++;
                if (log) fprintf(log, "needle train-heads: row %d skipped: %s\n", i + 1, e.message);
            }
        }
        /* (b) contrastive: the query and its tool */
        if (!o.skip_contrastive && r->first_tool && used < budget) {
            int t = 0;
            while (t < n_tools && strcmp(tool_text[t], r->first_tool)) t++;
            int ok = 1;
            if (t == n_tools) {
                needle_error e = {0};
                ok = nd_retrieval_cells_text(m->net, m->tok, r->first_tool, &tcells[t].x, &tcells[t].n, &e) == 0;
                if (ok) {
                    tool_text[t] = r->first_tool;
                    n_tools++;
                    used += sizeof(float) * (size_t)tcells[t].n * d;
                }
            }
            needle_error e = {0};
            if (ok && nd_retrieval_cells_text(m->net, m->tok, r->query, &qcells[i].x, &qcells[i].n, &e) == 0) {
                used += sizeof(float) * (size_t)qcells[i].n * d;
                tool_of[i] = t;
                if (held) con_ho[nkho++] = i;
                else con_tr[nkt++] = i;
            }
        }
        if (log && (oi + 1) % 50 == 0) fprintf(log, "needle train-heads: %d/%d rows prepared\n", oi + 1, n_rows);
    }
    if (used >= budget && log) fprintf(log, "needle train-heads: the cell budget is full: later rows were not used\n");
    rep->conf_train = nct;
    rep->conf_held = ncho;
    rep->con_train = nkt;
    rep->con_held = nkho;
    rep->con_tools = n_tools;

    if (v3) {
        nd_heads_data data = {.ccells = ccells, .label = label, .geo = geo, .conf_tr = conf_tr, .conf_ho = conf_ho,
                              .nct = nct, .ncho = ncho, .qcells = qcells, .tcells = tcells, .tool_of = tool_of,
                              .con_tr = con_tr, .con_ho = con_ho, .nkt = nkt, .nkho = nkho};
        rc = nd_heads3_fit(&m->net->weights, &data, &o, &rng, model_path, out_path, rep, err);
        goto out;
    }
    /* confidence: before, train, after */
    if (nct > 0) {
        rep->conf_loss_before = nd_conf_loss(&conf, ccells, label, conf_tr, nct, NULL, NULL);
        rep->held_loss_before = ncho ? nd_conf_loss(&conf, ccells, label, conf_ho, ncho, NULL, lg) : NAN;
        for (int k = 0; k < ncho; k++) {
            yh[k] = label[conf_ho[k]];
            pb[k] = sigmoid(lg[k]);
            pe[k] = geo[conf_ho[k]] < pb[k] ? geo[conf_ho[k]] : pb[k];
        }
        rep->ece_before = nd_ece(pb, yh, ncho, 10);
        rep->env_ece_before = nd_ece(pe, yh, ncho, 10);
        if ((rc = train_head(&conf, 0, ccells, NULL, label, conf_tr, nct, &o, &rng, log, err)) != 0) goto out;
        rep->conf_loss_after = nd_conf_loss(&conf, ccells, label, conf_tr, nct, NULL, NULL);
        rep->held_loss_after = ncho ? nd_conf_loss(&conf, ccells, label, conf_ho, ncho, NULL, lg) : NAN;
        for (int k = 0; k < ncho; k++) {
            pb[k] = sigmoid(lg[k]);
            pe[k] = geo[conf_ho[k]] < pb[k] ? geo[conf_ho[k]] : pb[k];
        }
        rep->ece_after = nd_ece(pb, yh, ncho, 10);
        rep->env_ece_after = nd_ece(pe, yh, ncho, 10);
    }
    /* contrastive: the loss over all training pairs at once; top-1 of held-out queries */
    if (nkt >= 2) {
        int top = 0;
        rep->con_loss_before = nd_contrastive_loss(&con, qcells, tcells, tool_of, con_tr, nkt, NULL, NULL);
        if (nkho) nd_contrastive_loss(&con, qcells, tcells, tool_of, con_ho, nkho, NULL, &top);
        rep->con_top1_before = nkho ? (double)top / nkho : NAN;
        if ((rc = train_head(&con, 1, qcells, tcells, tool_of, con_tr, nkt, &o, &rng, log, err)) != 0) goto out;
        rep->con_loss_after = nd_contrastive_loss(&con, qcells, tcells, tool_of, con_tr, nkt, NULL, NULL);
        if (nkho) nd_contrastive_loss(&con, qcells, tcells, tool_of, con_ho, nkho, NULL, &top);
        rep->con_top1_after = nkho ? (double)top / nkho : NAN;
    }
    rc = write_checkpoint(model_path, out_path, &conf, &con, err);
out:
    for (int i = 0; i < n_rows; i++) {
        if (ccells) free(ccells[i].x);
        if (qcells) free(qcells[i].x);
        if (tcells) free(tcells[i].x);
        row_free(&rows[i]);
    }
    free(rows);
    free(order);
    free(ccells);
    free(qcells);
    free(tcells);
    free(label);
    free(tool_of);
    free(geo);
    free(tool_text);
    free(conf_tr);
    free(conf_ho);
    free(con_tr);
    free(con_ho);
    free(pb);
    free(pe);
    free(yh);
    free(lg);
    nd_head_params_free(&conf);
    nd_head_params_free(&con);
    needle_model_close(m);
    return rc;
}
