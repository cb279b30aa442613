/* params.c - the descriptor array generated from params.def, and the
 * helpers that value its symbolic shapes and names for a config. */
#include "model/params.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/rng.h"
#include "core/formulas.h"
#include "model/weights.h"

#define ND_OFFSET_GLOBAL(f) offsetof(nd_weights, f)
#define ND_OFFSET_LAYER(f) offsetof(nd_layer_weights, f)
#define ND_OFFSET_SITE(f) offsetof(nd_site_weights, f)
#define ND_OFFSET_HEAD(f) offsetof(nd_head_weights, f)

const nd_param_desc nd_params[ND_P_COUNT] = {
#define ND_PARAM(ROLE, field, SCOPE, KIND, ...)                                                                     \
    [ND_P_##ROLE] = {.role = ND_P_##ROLE, .field_name = #field, .scope = ND_SCOPE_##SCOPE, .kind = ND_KIND_##KIND, \
                     .offset = ND_OFFSET_##SCOPE(field), __VA_ARGS__},
#include "model/params.def"
#undef ND_PARAM
};

const nd_head_kind nd_param_heads[ND_NUM_HEAD_KINDS] = {
    [ND_HEAD_INDEX_CONTRASTIVE] = {ND_HEAD_CONTRASTIVE, "contrastive", offsetof(nd_weights, contrastive), 4},
    [ND_HEAD_INDEX_CONFIDENCE] = {ND_HEAD_CONFIDENCE, "confidence", offsetof(nd_weights, confidence), 8},
};

int nd_config_generation(const nd_config *c)
{
    (void)c; /* every config this tree reads is Needle 2; a Needle 3 config will say so here */
    return 2;
}

int nd_param_in_config(const nd_param_desc *p, const nd_config *c)
{
    unsigned gen = nd_config_generation(c) == 3 ? ND_GEN_3 : ND_GEN_2;
    return p->gens == 0 || (p->gens & gen) != 0;
}

int nd_param_in_head_ckpt(const nd_param_desc *p, int head) { return p->heads == 0 || (p->heads >> head & 1u); }

int nd_head_out_dim(const nd_config *c, int head)
{
    return head == ND_HEAD_INDEX_CONTRASTIVE ? c->contrastive_dim : 1;
}

int64_t nd_dim_value(const nd_config *c, nd_dim dim, int head)
{
    int64_t d = c->d_model, n = c->mhc_lanes;
    int64_t P = head >= 0 && head < ND_NUM_HEAD_KINDS ? nd_param_heads[head].num_probes : 0;
    switch (dim) {
    case ND_DIM_NONE: return 0;
    case ND_DIM_ONE: return 1;
    case ND_DIM_V: return c->vocab_size;
    case ND_DIM_D: return d;
    case ND_DIM_Q:
    case ND_DIM_O: return (int64_t)c->num_heads * c->head_dim;
    case ND_DIM_KD:
    case ND_DIM_VD: return c->kv_dim;
    case ND_DIM_QK: return c->head_dim;
    case ND_DIM_NH: return c->hada_n;
    case ND_DIM_N: return n;
    case ND_DIM_NN: return n * n;
    case ND_DIM_ND: return n * d;
    case ND_DIM_TE: return c->num_tables;
    case ND_DIM_SLOTS: return c->engram_slots;
    case ND_DIM_SUB: return c->engram_sub;
    case ND_DIM_TE_SLOTS: return (int64_t)c->num_tables * c->engram_slots;
    case ND_DIM_TE_SUB: return (int64_t)c->num_tables * c->engram_sub;
    case ND_DIM_CONV_TAPS: return ND_ENGRAM_TAPS;
    case ND_DIM_PROBES: return P;
    case ND_DIM_PD: return P * d;
    case ND_DIM_HEAD_OUT: return head >= 0 ? nd_head_out_dim(c, head) : 0;
    }
    return 0;
}

int64_t nd_dim_value_sized(const nd_config *c, nd_dim dim, int num_probes, int out_dim)
{
    if (dim == ND_DIM_PROBES) return num_probes;
    if (dim == ND_DIM_PD) return (int64_t)num_probes * c->d_model;
    if (dim == ND_DIM_HEAD_OUT) return out_dim;
    return nd_dim_value(c, dim, -1);
}

void *nd_param_base(nd_weights *w, const nd_param_desc *p, int index)
{
    switch (p->scope) {
    case ND_SCOPE_LAYER: return &w->layers[index];
    case ND_SCOPE_SITE: return &w->sites[index];
    case ND_SCOPE_HEAD: return (char *)w + nd_param_heads[index].offset;
    case ND_SCOPE_GLOBAL: break;
    }
    return w;
}

const void *nd_param_base_c(const nd_weights *w, const nd_param_desc *p, int index)
{
    return nd_param_base((nd_weights *)(uintptr_t)w, p, index);
}

int nd_param_instances(const nd_weights *w, const nd_param_desc *p)
{
    switch (p->scope) {
    case ND_SCOPE_LAYER: return w->cfg.num_layers;
    case ND_SCOPE_SITE: return w->cfg.num_sites;
    case ND_SCOPE_HEAD: return ND_NUM_HEAD_KINDS;
    case ND_SCOPE_GLOBAL: break;
    }
    return 1;
}

void nd_param_ckpt_name(const nd_param_desc *p, int instance, char *out, size_t n)
{
    if (p->scope == ND_SCOPE_SITE) snprintf(out, n, p->ckpt, instance);
    else if (p->scope == ND_SCOPE_HEAD) snprintf(out, n, p->ckpt, nd_param_heads[instance].name);
    else snprintf(out, n, "%s", p->ckpt);
}

int nd_param_ckpt_shape(const nd_param_desc *p, const nd_config *c, int head, int64_t shape[4])
{
    int k = 0;
    if (p->scope == ND_SCOPE_LAYER) shape[k++] = c->num_layers;
    for (int i = 0; i < ND_PARAM_CK_DIMS && p->ck[i] != ND_DIM_NONE; i++) shape[k++] = nd_dim_value(c, p->ck[i], head);
    return k;
}

int64_t nd_param_elems(const nd_param_desc *p, const nd_config *c, int head)
{
    int64_t e = 1;
    if (p->kind == ND_KIND_MATRIX) return nd_dim_value(c, p->rows, head) * nd_dim_value(c, p->cols, head);
    for (int i = 0; i < ND_PARAM_CK_DIMS && p->ck[i] != ND_DIM_NONE; i++) e *= nd_dim_value(c, p->ck[i], head);
    return e;
}

/* FNV-1a of the name: the per-tensor RNG stream id. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

void nd_param_init_fill(const nd_param_desc *p, const char *name, float *data, int ndim, const int64_t *shape,
                        int num_layers, uint64_t seed)
{
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= (size_t)shape[i];
    double v = p->init_value;
    switch (p->init) {
    case ND_INIT_NORMAL:
    case ND_INIT_NORMAL_RESIDUAL: {
        if (p->init == ND_INIT_NORMAL_RESIDUAL) v = v / sqrt(2.0 * (double)num_layers);
        nd_rng r;
        nd_rng_seed_stream(&r, seed, name_hash(name));
        nd_rng_fill_normal(&r, data, numel, 0.0f, (float)v);
        break;
    }
    case ND_INIT_CONST:
        for (size_t i = 0; i < numel; i++) data[i] = (float)v;
        break;
    case ND_INIT_EYE: {
        int64_t n = shape[ndim - 1];
        memset(data, 0, numel * sizeof(float));
        for (size_t m = 0; m < numel; m += (size_t)(n * n))
            for (int64_t i = 0; i < n; i++) data[m + (size_t)(i * n + i)] = (float)v;
        break;
    }
    case ND_INIT_FIRST_ROW: {
        size_t row = (size_t)shape[ndim - 1];
        memset(data, 0, numel * sizeof(float));
        for (size_t i = 0; i < row && i < numel; i++) data[i] = (float)v;
        break;
    }
    }
}
