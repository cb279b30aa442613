/* heads.c - probe-attention pooling over the prompt's cells, then a linear map. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/heads.h"
#include "model/params.h"

int nd_head_pool(const nd_model *m, const nd_head_weights *h, const float *cells, int n_cells, float *pooled,
                 needle_error *err)
{
    if (!h->present) return nd_errorf(err, NEEDLE_EUNSUPPORTED, "heads: this model file has no such head");
    if (n_cells <= 0) return nd_errorf(err, NEEDLE_EINVAL, "heads: no cells to pool");
    nd_weights_heads_ready(&m->weights);
    float *wts = malloc(sizeof(float) * (size_t)n_cells);
    if (!wts) return nd_errorf(err, NEEDLE_ENOMEM, "heads: out of memory");
    m->be->ops.head_pool(m->be, h->probes, h->num_probes, m->weights.cfg.d_model, cells, n_cells, pooled, wts);
    free(wts);
    return 0;
}

/* A float copy of a (possibly CQ) matrix, rows*cols floats at out. */
static void matrix_floats(const nd_model *m, const nd_matrix *w, float *out)
{
    for (int r = 0; r < w->rows; r++) m->be->ops.gather_rows(m->be, w, &r, 1, out + (size_t)r * (size_t)w->cols);
}

/* Needle 3 (SPEC-needle3 5.3 item 7): per-row probe pooling, query pooling
 * over all (row, probe) results, then proj (+ bias) into out[out_dim]. */
static int head_apply_v3(const nd_model *m, const nd_head_weights *h, const float *cells, int n_cells, float *out,
                         needle_error *err)
{
    const nd_config *c = &m->weights.cfg;
    int d = c->d_model, R = c->num_layers + 1, k = h->num_probes, q = h->num_queries;
    if (n_cells <= 0 || n_cells % R) return nd_errorf(err, NEEDLE_EINVAL, "heads: %d cells are not whole tokens", n_cells);
    int T = n_cells / R;
    size_t pd = (size_t)q * d, wk = m->be->ops.matmul_work_floats(m->be, &h->pool_proj, 1);
    size_t work = nd_probe_head_work_floats(T, R, k, q, d);
    size_t total = (size_t)R * k * d + (size_t)q * d + pd + work + wk + 16;
    float *buf = malloc(sizeof(float) * total);
    if (!buf) return nd_errorf(err, NEEDLE_ENOMEM, "heads: out of memory");
    float *probes = buf, *query = probes + (size_t)R * k * d, *pooled = query + (size_t)q * d, *scratch = pooled + pd;
    matrix_floats(m, &h->layer_probes, probes);
    matrix_floats(m, &h->query, query);
    nd_probe_head_args a = {.T = T, .R = R, .d = d, .k = k, .q = q, .cells = cells, .probes = probes,
                            .gain = h->gain, .query = query, .row_bias = h->row_bias, .pooled = pooled,
                            .work = scratch};
    m->be->ops.probe_head(m->be, &a);
    m->be->ops.matmul(m->be, &h->pool_proj, pooled, 1, (int)pd, out, h->out_dim, scratch + work);
    if (h->bias)
        for (int i = 0; i < h->out_dim; i++) out[i] += h->bias[i];
    free(buf);
    return 0;
}

/* pooled -> proj (+ bias) into out[out_dim]. */
static int head_apply(const nd_model *m, const nd_head_weights *h, const float *cells, int n_cells, float *out,
                      needle_error *err)
{
    int d = m->weights.cfg.d_model;
    if (!h->present) return nd_errorf(err, NEEDLE_EUNSUPPORTED, "heads: this model file has no such head");
    nd_weights_heads_ready(&m->weights); /* a .cact's head floats are widened on first use */
    if (nd_config_generation(&m->weights.cfg) == 3) return head_apply_v3(m, h, cells, n_cells, out, err);
    size_t pd = (size_t)h->num_probes * d;
    if (h->proj.cols != (int)pd || h->proj.rows != h->out_dim)
        return nd_errorf(err, NEEDLE_EFORMAT, "heads: projection is [%d,%d], expected [%d,%zu]", h->proj.rows,
                         h->proj.cols, h->out_dim, pd);
    size_t wk = m->be->ops.matmul_work_floats(m->be, &h->proj, 1);
    float *pooled = malloc(sizeof(float) * (pd + wk + 16));
    if (!pooled) return nd_errorf(err, NEEDLE_ENOMEM, "heads: out of memory");
    int rc = nd_head_pool(m, h, cells, n_cells, pooled, err);
    if (rc == 0) {
        m->be->ops.matmul(m->be, &h->proj, pooled, 1, (int)pd, out, h->out_dim, pooled + pd);
        if (h->bias)
            for (int i = 0; i < h->out_dim; i++) out[i] += h->bias[i];
    }
    free(pooled);
    return rc;
}

int nd_head_confidence(const nd_model *m, const float *cells, int n_cells, float *logit, needle_error *err)
{
    return head_apply(m, &m->weights.confidence, cells, n_cells, logit, err);
}

int nd_head_contrastive(const nd_model *m, const float *cells, int n_cells, float *emb, needle_error *err)
{
    const nd_head_weights *h = &m->weights.contrastive;
    int rc = head_apply(m, h, cells, n_cells, emb, err);
    if (rc) return rc;
    double ss = 0.0;
    for (int i = 0; i < h->out_dim; i++) ss += (double)emb[i] * emb[i];
    float inv = ss > 0.0 ? (float)(1.0 / sqrt(ss)) : 0.0f;
    if (nd_config_generation(&m->weights.cfg) == 3) inv = (float)(1.0 / sqrt(ss + 1e-12)); /* the v3 head's rule */
    for (int i = 0; i < h->out_dim; i++) emb[i] *= inv;
    return 0;
}

int nd_head_router(const nd_model *m, const float *cells, int n_cells, float logits[3], needle_error *err)
{
    const nd_head_weights *h = &m->weights.router;
    if (h->present && h->out_dim != 3)
        return nd_errorf(err, NEEDLE_EFORMAT, "heads: the router head has %d outputs, expected 3", h->out_dim);
    return head_apply(m, h, cells, n_cells, logits, err);
}
