/* model.c - an nd_model: weights + backend + thread pool, shared by sessions. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/formulas.h"
#include "model/model.h"
#include "model/params.h"

/* Every matrix the forward pass and the heads read (model/params.def), for
 * the float path. */
static int list_matrices(nd_weights *w, nd_matrix **out, int max)
{
    int n = 0;
    for (int i = 0; i < ND_P_COUNT; i++) {
        const nd_param_desc *p = &nd_params[i];
        if (p->kind != ND_KIND_MATRIX || !nd_param_in_config(p, &w->cfg)) continue;
        int count = nd_param_instances(w, p);
        for (int k = 0; k < count; k++) {
            void *base = nd_param_base(w, p, k);
            if (p->scope == ND_SCOPE_HEAD && !((nd_head_weights *)base)->present) continue;
            if (n < max) out[n] = nd_param_field(p, base);
            n++;
        }
    }
    return n;
}

/* Replace every CQ matrix of the model's weight view by a dequantised F32 copy. */
static int dequantize_all(nd_model *m, needle_error *err)
{
    nd_weights *w = &m->weights;
    int n = list_matrices(w, NULL, 0);
    nd_matrix **mats = calloc((size_t)n, sizeof *mats);
    if (!mats) return nd_errorf(err, NEEDLE_ENOMEM, "model: out of memory");
    list_matrices(w, mats, n);
    size_t total = 0;
    for (int i = 0; i < n; i++)
        if (mats[i]->kind == ND_MAT_CQ) total += (size_t)mats[i]->rows * (size_t)mats[i]->cols;
    if (total == 0) { free(mats); return 0; }
    m->dequant_block = malloc(total * sizeof(float));
    if (!m->dequant_block) {
        free(mats);
        return nd_errorf(err, NEEDLE_ENOMEM, "model: out of memory dequantising %zu weights", total);
    }
    float *p = m->dequant_block;
    for (int i = 0; i < n; i++) {
        nd_matrix *mt = mats[i];
        if (mt->kind != ND_MAT_CQ) continue;
        for (int r = 0; r < mt->rows; r++) m->be->ops.gather_rows(m->be, mt, &r, 1, p + (size_t)r * (size_t)mt->cols);
        nd_matrix f = {.kind = ND_MAT_F32, .rows = mt->rows, .cols = mt->cols, .f32 = p};
        *mt = f;
        p += (size_t)mt->rows * (size_t)mt->cols;
    }
    free(mats);
    return 0;
}

/* A matrix must be exactly [rows, cols] and internally consistent, or the
 * kernels would read outside it. */
static int check_matrix(const nd_matrix *m, int rows, int cols, const char *name, int index, needle_error *err)
{
    if (m->rows != rows || m->cols != cols)
        return nd_errorf(err, NEEDLE_EFORMAT, "model: %s[%d] is [%d,%d], expected [%d,%d]", name, index, m->rows,
                         m->cols, rows, cols);
    if (m->kind == ND_MAT_F32) {
        if (!m->f32) return nd_errorf(err, NEEDLE_EFORMAT, "model: %s[%d] has no data", name, index);
        return 0;
    }
    if (m->kind != ND_MAT_CQ || !m->cq_idx || !m->cq_norms || !m->codebook ||
        !(m->cq_bits == 2 || m->cq_bits == 3 || m->cq_bits == 4 || m->cq_bits == ND_CQ_TERNARY) ||
        m->cols_pad != (cols + ND_CQ_GROUP - 1) / ND_CQ_GROUP * ND_CQ_GROUP)
        return nd_errorf(err, NEEDLE_EFORMAT, "model: %s[%d] is not a consistent CQ matrix", name, index);
    return 0;
}

/* Everything the forward pass indexes, checked once against the config. */
static int check_weights(const nd_weights *w, needle_error *err)
{
    const nd_config *c = &w->cfg;
    int d = c->d_model, n = c->mhc_lanes, rc;
    if (d <= 0 || c->vocab_size <= 0 || c->num_layers <= 0 || c->head_dim <= 0 || c->head_dim % 2 ||
        c->num_kv_heads <= 0 || c->num_heads % c->num_kv_heads || n <= 0 || n > ND_MAX_LANES || c->hada_n < d ||
        (c->hada_n & (c->hada_n - 1)) || c->num_sites < 0 || c->num_sites > ND_MAX_SITES || c->num_orders < 1 ||
        c->num_orders > ND_MAX_ORDERS || c->engram_heads_eff < 1 || c->engram_slots < 1 || c->conv_dilation < 1)
        return nd_errorf(err, NEEDLE_EFORMAT, "model: unsupported geometry (d %d, heads %d/%d, lanes %d)", d,
                         c->num_heads, c->num_kv_heads, n);
    for (int i = 0; i < c->num_orders; i++)
        if (c->engram_orders[i] < 1 || c->engram_orders[i] > 8 || c->engram_orders[i] > c->conv_dilation)
            return nd_errorf(err, NEEDLE_EFORMAT, "model: engram order %d out of range", c->engram_orders[i]);
    if (!w->layers) return nd_errorf(err, NEEDLE_EFORMAT, "model: missing layers");
    /* every parameter of model/params.def: matrices exactly their shape, vectors present */
    for (int i = 0; i < ND_P_COUNT; i++) {
        const nd_param_desc *p = &nd_params[i];
        if (!nd_param_in_config(p, c)) continue;
        int count = nd_param_instances(w, p);
        for (int k = 0; k < count; k++) {
            const void *base = nd_param_base_c(w, p, k);
            const nd_head_weights *h = p->scope == ND_SCOPE_HEAD ? base : NULL;
            if (h && !h->present) continue;
            if (h && (h->num_probes < 1 || h->out_dim < 1))
                return nd_errorf(err, NEEDLE_EFORMAT, "model: head %d is inconsistent", k);
            const void *f = nd_param_field_c(p, base);
            if (p->kind == ND_KIND_MATRIX) {
                int hp = h ? h->num_probes : 0, hq = h ? h->num_queries : 0, ho = h ? h->out_dim : 0;
                int rows = (int)nd_dim_value_head(c, p->rows, hp, hq, ho);
                int cols = (int)nd_dim_value_head(c, p->cols, hp, hq, ho);
                if ((rc = check_matrix(f, rows, cols, p->field_name, k, err))) return rc;
            } else if (p->kind == ND_KIND_VECTOR && !*(const float *const *)f &&
                       (!h || nd_param_in_head_ckpt(p, k))) { /* a head may lack what its checkpoint lacks */
                return nd_errorf(err, NEEDLE_EFORMAT, "model: %s[%d] is missing", p->field_name, k);
            }
        }
    }
    for (int i = 0; i < c->num_sites; i++)
        if (c->engram_layers[i] < 0 || c->engram_layers[i] >= c->num_layers)
            return nd_errorf(err, NEEDLE_EFORMAT, "model: engram site %d is invalid", i);
    return 0;
}

int nd_model_create(const nd_weights *w, const nd_model_options *opt, nd_model **out, needle_error *err)
{
    nd_model_options defaults = {0};
    if (!opt) opt = &defaults;
    *out = NULL;
    int rc = check_weights(w, err);
    if (rc) return rc;
    nd_model *m = calloc(1, sizeof *m);
    if (!m) return nd_errorf(err, NEEDLE_ENOMEM, "model: out of memory");
    m->weights = *w;
    if (opt->acts != NEEDLE_ACTS_A8 && opt->acts != NEEDLE_ACTS_FLOAT) {
        free(m);
        return nd_errorf(err, NEEDLE_EINVAL, "model: acts %d (supported: NEEDLE_ACTS_A8, NEEDLE_ACTS_FLOAT)", opt->acts);
    }
    m->acts = opt->acts;
    const nd_backend_entry *be_entry = NULL;
    rc = nd_backend_select(opt->backend, &be_entry, &m->backend_why, err);
    if (rc) { free(m); return rc; }
    /* the model's own layer array, so the float path can swap matrices
     * without touching the loaded weights */
    m->layers_copy = malloc(sizeof(nd_layer_weights) * (size_t)w->cfg.num_layers);
    if (!m->layers_copy) { free(m); return nd_errorf(err, NEEDLE_ENOMEM, "model: out of memory"); }
    memcpy(m->layers_copy, w->layers, sizeof(nd_layer_weights) * (size_t)w->cfg.num_layers);
    m->weights.layers = m->layers_copy;
    m->default_window = w->file_kv_window > 0 ? w->file_kv_window : nd_config_effective_window(&w->cfg);
    if ((rc = nd_threadpool_create(opt->threads, &m->pool, err)) != 0) { nd_model_free(m); return rc; }
    if ((rc = nd_backend_create(be_entry, m->pool, &m->be, err)) != 0) { nd_model_free(m); return rc; }
    if (opt->layers > 0) {
        if ((rc = nd_weights_ladder(m->be, &m->weights, opt->layers, &m->ladder_block, err)) != 0) {
            nd_model_free(m);
            return rc;
        }
        if (w->file_kv_window <= 0 || opt->layers != w->cfg.num_layers)
            m->default_window = nd_config_effective_window(&m->weights.cfg); /* the rung's own budget */
    }
    if (opt->dequantize && (rc = dequantize_all(m, err)) != 0) { nd_model_free(m); return rc; }
    *out = m;
    return 0;
}

int nd_model_open(const char *path, const nd_model_options *opt, nd_model **out, needle_error *err)
{
    nd_weights w;
    memset(&w, 0, sizeof w);
    int rc = nd_weights_load_lazy_heads(path, &w, err); /* heads widened when first run */
    if (rc) return rc;
    rc = nd_model_create(&w, opt, out, err);
    if (rc) { nd_weights_free(&w); return rc; }
    (*out)->loaded = w;
    (*out)->owns_loaded = 1;
    return 0;
}

void nd_model_free(nd_model *m)
{
    if (!m) return;
    nd_backend_free(m->be);
    nd_threadpool_free(m->pool);
    free(m->dequant_block);
    free(m->ladder_block);
    free(m->layers_copy);
    if (m->owns_loaded) nd_weights_free(&m->loaded);
    free(m);
}
