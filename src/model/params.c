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
    [ND_HEAD_INDEX_CONTRASTIVE] = {ND_HEAD_CONTRASTIVE, "contrastive", offsetof(nd_weights, contrastive), 4,
                                   "embedding"},
    [ND_HEAD_INDEX_CONFIDENCE] = {ND_HEAD_CONFIDENCE, "confidence", offsetof(nd_weights, confidence), 8,
                                  "confidence"},
    [ND_HEAD_INDEX_ROUTER] = {ND_HEAD_ROUTER, "router", offsetof(nd_weights, router), 4, "router"},
};

int nd_config_generation(const nd_config *c) { return c->generation == 3 ? 3 : 2; }

int nd_head_kinds(const nd_config *c) { return nd_config_generation(c) == 3 ? 3 : 2; }

int nd_param_in_head_cact(const nd_param_desc *p, int head)
{
    return p->cact_heads == 0 || (p->cact_heads >> head & 1u);
}

int nd_param_in_config(const nd_param_desc *p, const nd_config *c)
{
    unsigned gen = nd_config_generation(c) == 3 ? ND_GEN_3 : ND_GEN_2;
    if (p->ck[0] == ND_DIM_TAPS && c->qkv_conv_taps == 0) return 0; /* no q/k/v convolution */
    return p->gens == 0 || (p->gens & gen) != 0;
}

int nd_param_in_head_ckpt(const nd_param_desc *p, int head) { return p->heads == 0 || (p->heads >> head & 1u); }

int nd_head_out_dim(const nd_config *c, int head)
{
    return head == ND_HEAD_INDEX_CONTRASTIVE ? c->contrastive_dim : head == ND_HEAD_INDEX_ROUTER ? 3 : 1;
}

/* v3 defaults for a head's probes per row and queries (SPEC-needle3 1.1) */
#define ND_V3_HEAD_K 4
#define ND_V3_HEAD_Q 4

/* a head's probes per row k and queries q: the config's {embedding,
 * confidence,router}_{probes,queries}, else the defaults */
static int v3_head_k(const nd_config *c, int head)
{
    return head < ND_NUM_HEAD_KINDS && c->head_probes[head] > 0 ? c->head_probes[head] : ND_V3_HEAD_K;
}

static int v3_head_q(const nd_config *c, int head)
{
    return head < ND_NUM_HEAD_KINDS && c->head_queries[head] > 0 ? c->head_queries[head] : ND_V3_HEAD_Q;
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
    case ND_DIM_Q: return (int64_t)c->num_heads * c->qk_dim;
    case ND_DIM_O: return (int64_t)c->num_heads * c->v_dim;
    case ND_DIM_KD: return (int64_t)c->num_kv_heads * c->qk_dim;
    case ND_DIM_VD: return (int64_t)c->num_kv_heads * c->v_dim;
    case ND_DIM_QK: return c->qk_dim;
    case ND_DIM_TAPS: return c->qkv_conv_taps;
    case ND_DIM_HA: return c->hada_a;
    case ND_DIM_HB: return c->hada_b;
    case ND_DIM_RANK: return ND_MLP_GATE_RANK;
    case ND_DIM_L1: return (int64_t)c->num_layers + 1;
    case ND_DIM_HK: return head >= 0 ? v3_head_k(c, head) : 0;
    case ND_DIM_HQ: return head >= 0 ? v3_head_q(c, head) : 0;
    case ND_DIM_L1K: return head >= 0 ? ((int64_t)c->num_layers + 1) * v3_head_k(c, head) : 0;
    case ND_DIM_HQD: return head >= 0 ? (int64_t)v3_head_q(c, head) * d : 0;
    case ND_DIM_THREE: return 3;
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
    return nd_dim_value_head(c, dim, num_probes, 0, out_dim);
}

int64_t nd_dim_value_head(const nd_config *c, nd_dim dim, int num_probes, int num_queries, int out_dim)
{
    switch (dim) {
    case ND_DIM_PROBES:
    case ND_DIM_HK: return num_probes;
    case ND_DIM_PD: return (int64_t)num_probes * c->d_model;
    case ND_DIM_HEAD_OUT: return out_dim;
    case ND_DIM_HQ: return num_queries;
    case ND_DIM_L1K: return ((int64_t)c->num_layers + 1) * num_probes;
    case ND_DIM_HQD: return (int64_t)num_queries * c->d_model;
    default: return nd_dim_value(c, dim, -1);
    }
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
    case ND_SCOPE_HEAD: return nd_head_kinds(&w->cfg);
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

void nd_param_ckpt_name_cfg(const nd_param_desc *p, const nd_config *c, int instance, char *out, size_t n)
{
    if (nd_config_generation(c) != 3 || n == 0) {
        nd_param_ckpt_name(p, instance, out, n);
        return;
    }
    if (p->scope == ND_SCOPE_SITE) snprintf(out, n, p->ckpt, instance);
    else if (p->scope == ND_SCOPE_HEAD) snprintf(out, n, p->ckpt, nd_param_heads[instance].name3);
    else snprintf(out, n, "%s", p->ckpt);
    /* the table's paths are `.`-joined; no segment holds a '.' of its own */
    for (char *s = out; *s; s++)
        if (*s == '.') *s = '/';
}

int nd_param_in_ckpt(const nd_param_desc *p, const nd_config *c)
{
    return nd_param_in_config(p, c) && !p->ckpt_optional;
}

int nd_param_ckpt_shape(const nd_param_desc *p, const nd_config *c, int head, int64_t shape[4])
{
    int k = 0;
    /* flax scalars outside the stacked layers (log_temp, bias) are () in a v3 checkpoint */
    if (p->kind == ND_KIND_SCALAR && p->scope == ND_SCOPE_HEAD && nd_config_generation(c) == 3) return 0;
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

/* MT19937 seeded with init_genrand(seed), then the Fisher-Yates shuffle with
 * masked rejection sampling that numpy's legacy RandomState.permutation does
 * (as restated in the Needle 3 golden README), so `needle init` writes the
 * permutations the reference exporter writes. */
typedef struct mt19937 {
    uint32_t s[624];
    int i;
} mt19937;

static void mt_seed(mt19937 *m, uint32_t seed)
{
    m->s[0] = seed;
    for (int i = 1; i < 624; i++) m->s[i] = 1812433253u * (m->s[i - 1] ^ (m->s[i - 1] >> 30)) + (uint32_t)i;
    m->i = 624;
}

static uint32_t mt_next(mt19937 *m)
{
    if (m->i >= 624) {
        for (int k = 0; k < 624; k++) {
            uint32_t y = (m->s[k] & 0x80000000u) | (m->s[(k + 1) % 624] & 0x7fffffffu);
            m->s[k] = m->s[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        m->i = 0;
    }
    uint32_t y = m->s[m->i++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

void nd_legacy_permutation(uint32_t seed, float *out, size_t n)
{
    mt19937 m;
    mt_seed(&m, seed);
    for (size_t i = 0; i < n; i++) out[i] = (float)i;
    for (size_t i = n; i-- > 1;) {
        uint32_t mask = (uint32_t)i;
        mask |= mask >> 1, mask |= mask >> 2, mask |= mask >> 4, mask |= mask >> 8, mask |= mask >> 16;
        uint32_t j;
        do j = mt_next(&m) & mask;
        while (j > i);
        float t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
}

static void init_fill(const nd_param_desc *p, double v, const char *name, float *data, int ndim, const int64_t *shape,
                      int num_layers, uint64_t seed)
{
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= (size_t)shape[i];
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
    case ND_INIT_WALSH: {
        int64_t n = shape[ndim - 1];
        float inv = (float)(1.0 / sqrt((double)n));
        for (size_t m = 0; m < numel; m += (size_t)(n * n))
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < n; j++) /* Sylvester order: the sign is the parity of popcount(i & j) */
                    data[m + (size_t)(i * n + j)] = __builtin_parityll((unsigned long long)(i & j)) ? -inv : inv;
        break;
    }
    case ND_INIT_PERMUTATION:
        nd_legacy_permutation((uint32_t)v, data, numel);
        break;
    case ND_INIT_VALUES: {
        size_t nv = sizeof p->init_values / sizeof p->init_values[0];
        for (size_t i = 0; i < numel; i++) data[i] = (float)p->init_values[i % nv];
        break;
    }
    case ND_INIT_FIRST_ROW: {
        /* the first row of every trailing (taps, width) block: a LAYER tensor
         * (L, taps, width) starts each layer's convolution as the identity */
        size_t row = (size_t)shape[ndim - 1], block = ndim >= 2 ? row * (size_t)shape[ndim - 2] : row;
        memset(data, 0, numel * sizeof(float));
        for (size_t m = 0; m < numel; m += block)
            for (size_t i = 0; i < row && m + i < numel; i++) data[m + i] = (float)v;
        break;
    }
    }
}

void nd_param_init_fill(const nd_param_desc *p, const char *name, float *data, int ndim, const int64_t *shape,
                        int num_layers, uint64_t seed)
{
    init_fill(p, p->init_value, name, data, ndim, shape, num_layers, seed);
}

void nd_param_init_fill_cfg(const nd_param_desc *p, const nd_config *c, const char *name, float *data, int ndim,
                            const int64_t *shape, uint64_t seed)
{
    double v = p->init3 && nd_config_generation(c) == 3 ? p->init_value3 : p->init_value;
    init_fill(p, v, name, data, ndim, shape, c->num_layers, seed);
}
