/* heads.c - probe-attention pooling over the prompt's cells, then a linear map. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h" /* nd_cpu_dot */
#include "core/error.h"
#include "model/formulas.h" /* nd_probe_pool */
#include "model/heads.h"

int nd_head_pool(const nd_head_weights *h, int d, const float *cells, int n_cells, float *pooled, needle_error *err)
{
    if (!h->present) return nd_errorf(err, NEEDLE_EUNSUPPORTED, "heads: this model file has no such head");
    if (n_cells <= 0) return nd_errorf(err, NEEDLE_EINVAL, "heads: no cells to pool");
    float *wts = malloc(sizeof(float) * (size_t)n_cells);
    if (!wts) return nd_errorf(err, NEEDLE_ENOMEM, "heads: out of memory");
    for (int k = 0; k < h->num_probes; k++)
        nd_probe_pool(cells, n_cells, d, h->probes + (size_t)k * d, nd_cpu_dot, wts, pooled + (size_t)k * d);
    free(wts);
    return 0;
}

/* pooled -> proj (+ bias) into out[out_dim]. */
static int head_apply(const nd_model *m, const nd_head_weights *h, const float *cells, int n_cells, float *out,
                      needle_error *err)
{
    int d = m->weights.cfg.d_model;
    if (!h->present) return nd_errorf(err, NEEDLE_EUNSUPPORTED, "heads: this model file has no such head");
    size_t pd = (size_t)h->num_probes * d;
    if (h->proj.cols != (int)pd || h->proj.rows != h->out_dim)
        return nd_errorf(err, NEEDLE_EFORMAT, "heads: projection is [%d,%d], expected [%d,%zu]", h->proj.rows,
                         h->proj.cols, h->out_dim, pd);
    size_t wk = m->be->matmul_work_floats(&h->proj, 1, nd_threadpool_threads(m->pool));
    float *pooled = malloc(sizeof(float) * (pd + wk + 16));
    if (!pooled) return nd_errorf(err, NEEDLE_ENOMEM, "heads: out of memory");
    int rc = nd_head_pool(h, d, cells, n_cells, pooled, err);
    if (rc == 0) {
        m->be->matmul(m->pool, &h->proj, pooled, 1, (int)pd, out, h->out_dim, pooled + pd);
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
    for (int i = 0; i < h->out_dim; i++) emb[i] *= inv;
    return 0;
}
