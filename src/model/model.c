/* model.c - an nd_model: weights + backend + thread pool, shared by sessions. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/model.h"

/* Every matrix the forward pass and the heads read, for the float path. */
static int list_matrices(nd_weights *w, nd_matrix **out, int max)
{
    int n = 0;
#define ADD(mp) do { if (n < max) out[n] = (mp); n++; } while (0)
    ADD(&w->embedding);
    for (int l = 0; l < w->cfg.num_layers; l++) {
        nd_layer_weights *L = &w->layers[l];
        ADD(&L->q_proj); ADD(&L->k_proj); ADD(&L->v_proj); ADD(&L->gate_proj); ADD(&L->out_proj);
        ADD(&L->phi_pre); ADD(&L->phi_post); ADD(&L->phi_res);
    }
    for (int s = 0; s < w->cfg.num_sites; s++) {
        ADD(&w->sites[s].tables); ADD(&w->sites[s].key_proj); ADD(&w->sites[s].value_proj);
    }
    if (w->contrastive.present) ADD(&w->contrastive.proj);
    if (w->confidence.present) ADD(&w->confidence.proj);
#undef ADD
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
    int d = c->d_model, A = c->num_heads * c->head_dim, KV = c->kv_dim, n = c->mhc_lanes, rc;
    if (d <= 0 || c->vocab_size <= 0 || c->num_layers <= 0 || c->head_dim <= 0 || c->head_dim % 2 ||
        c->num_kv_heads <= 0 || c->num_heads % c->num_kv_heads || n <= 0 || n > 16 || c->hada_n < d ||
        (c->hada_n & (c->hada_n - 1)) || c->num_sites < 0 || c->num_sites > ND_MAX_SITES || c->num_orders < 1 ||
        c->num_orders > ND_MAX_ORDERS || c->engram_heads_eff < 1 || c->engram_slots < 1 || c->conv_dilation < 1)
        return nd_errorf(err, NEEDLE_EFORMAT, "model: unsupported geometry (d %d, heads %d/%d, lanes %d)", d,
                         c->num_heads, c->num_kv_heads, n);
    for (int i = 0; i < c->num_orders; i++)
        if (c->engram_orders[i] < 1 || c->engram_orders[i] > 8 || c->engram_orders[i] > c->conv_dilation)
            return nd_errorf(err, NEEDLE_EFORMAT, "model: engram order %d out of range", c->engram_orders[i]);
    if ((rc = check_matrix(&w->embedding, c->vocab_size, d, "embedding", 0, err))) return rc;
    if (!w->final_norm || !w->layers) return nd_errorf(err, NEEDLE_EFORMAT, "model: missing final_norm or layers");
    for (int l = 0; l < c->num_layers; l++) {
        const nd_layer_weights *L = &w->layers[l];
        if ((rc = check_matrix(&L->q_proj, A, d, "q_proj", l, err)) || (rc = check_matrix(&L->k_proj, KV, d, "k_proj", l, err)) ||
            (rc = check_matrix(&L->v_proj, KV, d, "v_proj", l, err)) ||
            (rc = check_matrix(&L->gate_proj, A, d, "gate_proj", l, err)) ||
            (rc = check_matrix(&L->out_proj, d, A, "out_proj", l, err)) ||
            (rc = check_matrix(&L->phi_pre, n, n * d, "mhc_phi_pre", l, err)) ||
            (rc = check_matrix(&L->phi_post, n, n * d, "mhc_phi_post", l, err)) ||
            (rc = check_matrix(&L->phi_res, n * n, n * d, "mhc_phi_res", l, err)))
            return rc;
        if (!L->norm_in || !L->q_norm || !L->k_norm || !L->post_attn_norm || !L->pre_hada_norm || !L->d1 || !L->d2 ||
            !L->d3 || !L->b_pre || !L->b_post || !L->b_res)
            return nd_errorf(err, NEEDLE_EFORMAT, "model: layer %d is missing a vector", l);
    }
    for (int i = 0; i < c->num_sites; i++) {
        const nd_site_weights *S = &w->sites[i];
        int ew = c->num_tables * c->engram_sub;
        if (c->engram_layers[i] < 0 || c->engram_layers[i] >= c->num_layers || !S->taps)
            return nd_errorf(err, NEEDLE_EFORMAT, "model: engram site %d is invalid", i);
        if ((rc = check_matrix(&S->tables, c->num_tables * c->engram_slots, c->engram_sub, "engram.tables", i, err)) ||
            (rc = check_matrix(&S->key_proj, d, ew, "engram.key_proj", i, err)) ||
            (rc = check_matrix(&S->value_proj, d, ew, "engram.value_proj", i, err)))
            return rc;
    }
    const nd_head_weights *heads[2] = {&w->contrastive, &w->confidence};
    for (int i = 0; i < 2; i++) {
        const nd_head_weights *h = heads[i];
        if (!h->present) continue;
        if (h->num_probes < 1 || h->out_dim < 1 || !h->probes ||
            (rc = check_matrix(&h->proj, h->out_dim, h->num_probes * d, i ? "confidence.proj" : "contrastive.proj", 0, err)))
            return rc ? rc : nd_errorf(err, NEEDLE_EFORMAT, "model: head %d is inconsistent", i);
    }
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
    if (opt->dequantize && (rc = dequantize_all(m, err)) != 0) { nd_model_free(m); return rc; }
    *out = m;
    return 0;
}

int nd_model_open(const char *path, const nd_model_options *opt, nd_model **out, needle_error *err)
{
    nd_weights w;
    memset(&w, 0, sizeof w);
    int rc = nd_weights_load(path, &w, err);
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
    free(m->layers_copy);
    if (m->owns_loaded) nd_weights_free(&m->loaded);
    free(m);
}
