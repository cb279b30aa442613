/* weights_safetensors.c - nd_weights from a full-precision checkpoint.
 *
 * Tensors are found by their checkpoint path (SPEC section 3) and checked
 * against the shapes the config implies.  F32 data already in the engine's
 * layout (embeddings, norm scales, engram tables) is used in place from the
 * mapping; kernels ([in, out] in the file) are transposed to [out, in] and,
 * like F16/BF16 data, land in one owned float block.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/weights.h"

typedef struct loader {
    nd_safetensors st;
    nd_weights *w;
    const char *path;
    float *arena; /* becomes w->owned */
    size_t used, cap;
    needle_error *err;
} loader;

static void shape_text(char *out, size_t n, int ndim, const int64_t *shape)
{
    size_t k = (size_t)snprintf(out, n, "(");
    for (int i = 0; i < ndim && k < n; i++) k += (size_t)snprintf(out + k, n - k, i ? ",%lld" : "%lld", (long long)shape[i]);
    if (k < n) snprintf(out + k, n - k, ")");
}

/* The tensor `name` with exactly this shape and a float dtype, or an error. */
static int need(loader *L, const char *name, int ndim, const int64_t *shape, const nd_st_tensor **out)
{
    const nd_st_tensor *t = nd_st_find(&L->st, name);
    if (!t) return nd_errorf(L->err, NEEDLE_EFORMAT, "%s: tensor \"%s\" is missing", L->path, name);
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == shape[i];
    if (!ok) {
        char got[96], want[96];
        shape_text(got, sizeof got, t->ndim, t->shape);
        shape_text(want, sizeof want, ndim, shape);
        return nd_errorf(L->err, NEEDLE_EFORMAT, "%s: tensor \"%s\" has shape %s, expected %s", L->path, name, got,
                         want);
    }
    if (!nd_st_is_float(t->dtype))
        return nd_errorf(L->err, NEEDLE_EFORMAT, "%s: tensor \"%s\" has dtype %s, expected F32, F16 or BF16", L->path,
                         name, nd_st_dtype_name(t->dtype));
    *out = t;
    return 0;
}

#define SHAPE(...) (const int64_t[]){__VA_ARGS__}
#define NEED(name, nd, ...)                                          \
    do {                                                             \
        int rc_ = need(L, name, nd, SHAPE(__VA_ARGS__), &t);         \
        if (rc_) return rc_;                                         \
    } while (0)

static float *take(loader *L, size_t n)
{
    /* the capacity is an upper bound computed before loading (see load) */
    if (n > L->cap - L->used) return NULL;
    float *p = L->arena + L->used;
    L->used += n;
    return p;
}

/* count floats starting at element `off`: in place when F32 and aligned,
 * else converted into the arena. */
static const float *view(loader *L, const nd_st_tensor *t, size_t off, size_t count)
{
    const uint8_t *p = t->data + off * nd_st_dtype_size(t->dtype);
    if (t->dtype == ND_ST_F32 && ((uintptr_t)p % sizeof(float)) == 0) return (const float *)(const void *)p;
    float *dst = take(L, count);
    if (!dst) return NULL;
    for (size_t i = 0; i < count; i++) dst[i] = nd_st_get_f32(t, off + i);
    return dst;
}

/* The [in, out] block at element `off` as an [out, in] F32 matrix. */
static int transposed(loader *L, const nd_st_tensor *t, size_t off, int in, int out, nd_matrix *m)
{
    float *dst = take(L, (size_t)in * (size_t)out);
    if (!dst) return nd_errorf(L->err, NEEDLE_ENOMEM, "%s: arena exhausted at tensor \"%s\"", L->path, t->name);
    for (size_t i = 0; i < (size_t)in; i++)
        for (size_t o = 0; o < (size_t)out; o++) dst[o * (size_t)in + i] = nd_st_get_f32(t, off + i * (size_t)out + o);
    memset(m, 0, sizeof *m);
    m->kind = ND_MAT_F32;
    m->rows = out;
    m->cols = in;
    m->f32 = dst;
    return 0;
}

static int vec(loader *L, const nd_st_tensor *t, size_t off, size_t count, const float **out)
{
    *out = view(L, t, off, count);
    if (!*out) return nd_errorf(L->err, NEEDLE_ENOMEM, "%s: arena exhausted at tensor \"%s\"", L->path, t->name);
    return 0;
}

#define TRY(x)                 \
    do {                       \
        int rc_ = (x);         \
        if (rc_) return rc_;   \
    } while (0)

static int load_layers(loader *L)
{
    const nd_config *c = &L->w->cfg;
    const int64_t nl = c->num_layers, d = c->d_model, A = c->attn_dim, KV = c->kv_dim, hd = c->head_dim;
    const int64_t Nh = c->hada_n, n = c->mhc_lanes;
    const nd_st_tensor *t;
    nd_layer_weights *ly = L->w->layers;
    static const char *const P = "stack.layers.block.";
    char name[160];

    /* per-layer vectors: (L, len) slices */
    static const struct {
        const char *leaf;
        size_t field; /* offset of the const float* in nd_layer_weights */
        int len;      /* 0: d, 1: hd, 2: N_h */
    } vecs[] = {
        {"ZCRMSNorm_0.scale", offsetof(nd_layer_weights, norm_in), 0},
        {"self_attn.q_norm.scale", offsetof(nd_layer_weights, q_norm), 1},
        {"self_attn.k_norm.scale", offsetof(nd_layer_weights, k_norm), 1},
        {"post_attn_norm.scale", offsetof(nd_layer_weights, post_attn_norm), 0},
        {"pre_hada_norm.scale", offsetof(nd_layer_weights, pre_hada_norm), 0},
        {"hadamard_mlp.d1", offsetof(nd_layer_weights, d1), 2},
        {"hadamard_mlp.d2", offsetof(nd_layer_weights, d2), 2},
        {"hadamard_mlp.d3", offsetof(nd_layer_weights, d3), 2},
    };
    for (size_t k = 0; k < sizeof vecs / sizeof vecs[0]; k++) {
        int64_t len = vecs[k].len == 0 ? d : vecs[k].len == 1 ? hd : Nh;
        snprintf(name, sizeof name, "%s%s", P, vecs[k].leaf);
        NEED(name, 2, nl, len);
        for (int64_t l = 0; l < nl; l++)
            TRY(vec(L, t, (size_t)(l * len), (size_t)len, (const float **)(void *)((char *)&ly[l] + vecs[k].field)));
    }

    /* attention kernels: (L, in, out) -> per layer [out, in] */
    static const struct {
        const char *leaf;
        size_t field;
        int in_a, out_a; /* 1: uses A, 2: uses KV, 0: d */
    } kernels[] = {
        {"self_attn.q_proj.kernel", offsetof(nd_layer_weights, q_proj), 0, 1},
        {"self_attn.k_proj.kernel", offsetof(nd_layer_weights, k_proj), 0, 2},
        {"self_attn.v_proj.kernel", offsetof(nd_layer_weights, v_proj), 0, 2},
        {"self_attn.gate_proj.kernel", offsetof(nd_layer_weights, gate_proj), 0, 1},
        {"self_attn.out_proj.kernel", offsetof(nd_layer_weights, out_proj), 1, 0},
    };
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
        int64_t in = kernels[k].in_a == 1 ? A : d;
        int64_t out = kernels[k].out_a == 1 ? A : kernels[k].out_a == 2 ? KV : d;
        snprintf(name, sizeof name, "%s%s", P, kernels[k].leaf);
        NEED(name, 3, nl, in, out);
        for (int64_t l = 0; l < nl; l++)
            TRY(transposed(L, t, (size_t)(l * in * out), (int)in, (int)out,
                           (nd_matrix *)(void *)((char *)&ly[l] + kernels[k].field)));
    }

    snprintf(name, sizeof name, "%sattn_gate", P);
    NEED(name, 1, nl);
    for (int64_t l = 0; l < nl; l++) ly[l].attn_gate = nd_st_get_f32(t, (size_t)l);

    /* mHC: scalars (L,), biases (L,n) / (L,n,n), projections (L, n*d, out) */
    NEED("stack.mhc_a_pre", 1, nl);
    for (int64_t l = 0; l < nl; l++) ly[l].a_pre = nd_st_get_f32(t, (size_t)l);
    NEED("stack.mhc_a_post", 1, nl);
    for (int64_t l = 0; l < nl; l++) ly[l].a_post = nd_st_get_f32(t, (size_t)l);
    NEED("stack.mhc_a_res", 1, nl);
    for (int64_t l = 0; l < nl; l++) ly[l].a_res = nd_st_get_f32(t, (size_t)l);
    NEED("stack.mhc_b_pre", 2, nl, n);
    for (int64_t l = 0; l < nl; l++) TRY(vec(L, t, (size_t)(l * n), (size_t)n, &ly[l].b_pre));
    NEED("stack.mhc_b_post", 2, nl, n);
    for (int64_t l = 0; l < nl; l++) TRY(vec(L, t, (size_t)(l * n), (size_t)n, &ly[l].b_post));
    NEED("stack.mhc_b_res", 3, nl, n, n);
    for (int64_t l = 0; l < nl; l++) TRY(vec(L, t, (size_t)(l * n * n), (size_t)(n * n), &ly[l].b_res));
    NEED("stack.mhc_phi_pre", 3, nl, n * d, n);
    for (int64_t l = 0; l < nl; l++) TRY(transposed(L, t, (size_t)(l * n * d * n), (int)(n * d), (int)n, &ly[l].phi_pre));
    NEED("stack.mhc_phi_post", 3, nl, n * d, n);
    for (int64_t l = 0; l < nl; l++)
        TRY(transposed(L, t, (size_t)(l * n * d * n), (int)(n * d), (int)n, &ly[l].phi_post));
    NEED("stack.mhc_phi_res", 3, nl, n * d, n * n);
    for (int64_t l = 0; l < nl; l++)
        TRY(transposed(L, t, (size_t)(l * n * d * n * n), (int)(n * d), (int)(n * n), &ly[l].phi_res));
    return 0;
}

static int load_sites(loader *L)
{
    const nd_config *c = &L->w->cfg;
    const int64_t d = c->d_model, Te = c->num_tables, slots = c->engram_slots, sub = c->engram_sub;
    const nd_st_tensor *t;
    char name[96];
    for (int s = 0; s < c->num_sites; s++) {
        nd_site_weights *site = &L->w->sites[s];
        site->layer = c->engram_layers[s];
        snprintf(name, sizeof name, "engrams_%d.embedding", s);
        NEED(name, 3, Te, slots, sub);
        const float *tab;
        TRY(vec(L, t, 0, (size_t)(Te * slots * sub), &tab));
        site->tables = (nd_matrix){.kind = ND_MAT_F32, .rows = (int)(Te * slots), .cols = (int)sub, .f32 = tab};
        snprintf(name, sizeof name, "engrams_%d.key_proj.kernel", s);
        NEED(name, 2, Te * sub, d);
        TRY(transposed(L, t, 0, (int)(Te * sub), (int)d, &site->key_proj));
        snprintf(name, sizeof name, "engrams_%d.value_proj.kernel", s);
        NEED(name, 2, Te * sub, d);
        TRY(transposed(L, t, 0, (int)(Te * sub), (int)d, &site->value_proj));
        snprintf(name, sizeof name, "engrams_%d.taps", s);
        NEED(name, 2, 4, d);
        TRY(vec(L, t, 0, (size_t)(4 * d), &site->taps));
    }
    return 0;
}

/* Optional heads: present when "<head>.probes" is; then every part is required. */
static int load_heads(loader *L)
{
    const nd_config *c = &L->w->cfg;
    const int64_t d = c->d_model, C = c->contrastive_dim;
    const nd_st_tensor *t;
    nd_head_weights *h = &L->w->contrastive;
    if (nd_st_find(&L->st, "contrastive_head.probes")) {
        h->present = 1;
        h->num_probes = 4;
        h->out_dim = (int)C;
        NEED("contrastive_head.probes", 2, 4, d);
        TRY(vec(L, t, 0, (size_t)(4 * d), &h->probes));
        NEED("contrastive_head.proj.kernel", 2, 4 * d, C);
        TRY(transposed(L, t, 0, (int)(4 * d), (int)C, &h->proj));
        t = nd_st_find(&L->st, "contrastive_head.log_temp");
        if (t && t->ndim == 0) NEED("contrastive_head.log_temp", 0, 0);
        else NEED("contrastive_head.log_temp", 1, 1);
        h->log_temp = nd_st_get_f32(t, 0);
        float *zeros = take(L, (size_t)C); /* the model has no bias: the engine reads zeros */
        if (!zeros) return nd_errorf(L->err, NEEDLE_ENOMEM, "%s: arena exhausted", L->path);
        memset(zeros, 0, sizeof(float) * (size_t)C);
        h->bias = zeros;
    }
    h = &L->w->confidence;
    if (nd_st_find(&L->st, "confidence_head.probes")) {
        h->present = 1;
        h->num_probes = 8;
        h->out_dim = 1;
        NEED("confidence_head.probes", 2, 8, d);
        TRY(vec(L, t, 0, (size_t)(8 * d), &h->probes));
        NEED("confidence_head.proj.kernel", 2, 8 * d, 1);
        TRY(transposed(L, t, 0, (int)(8 * d), 1, &h->proj));
        NEED("confidence_head.proj.bias", 1, 1);
        TRY(vec(L, t, 0, 1, &h->bias));
    }
    return 0;
}

static int load(loader *L)
{
    nd_weights *w = L->w;
    const char *cfg = nd_st_meta(&L->st, "config");
    if (cfg) {
        char where[300];
        snprintf(where, sizeof where, "%s: __metadata__.config", L->path);
        TRY(nd_config_from_json(&w->cfg, cfg, strlen(cfg), where, L->err));
    } else {
        nd_config_defaults(&w->cfg);
        TRY(nd_config_derive(&w->cfg, L->path, L->err));
    }
    /* Upper bound of what may be copied: every float tensor once, plus the
     * contrastive head's zero bias.  malloc only commits what is touched. */
    size_t cap = (size_t)w->cfg.contrastive_dim + 16;
    for (size_t i = 0; i < L->st.count; i++) cap += L->st.tensors[i].numel;
    L->arena = malloc(cap * sizeof(float));
    L->cap = cap;
    w->layers = calloc((size_t)w->cfg.num_layers, sizeof *w->layers);
    if (!L->arena || !w->layers) return nd_errorf(L->err, NEEDLE_ENOMEM, "%s: out of memory", L->path);
    w->owned = L->arena;

    const nd_st_tensor *t;
    const int64_t V = w->cfg.vocab_size, d = w->cfg.d_model;
    NEED("embedding.embedding", 2, V, d);
    const float *emb;
    TRY(vec(L, t, 0, (size_t)(V * d), &emb));
    w->embedding = (nd_matrix){.kind = ND_MAT_F32, .rows = (int)V, .cols = (int)d, .f32 = emb};
    NEED("stack.final_norm.scale", 1, d);
    TRY(vec(L, t, 0, (size_t)d, &w->final_norm));
    TRY(load_layers(L));
    TRY(load_sites(L));
    TRY(load_heads(L));
    return 0;
}

int nd_weights_load_safetensors(const char *path, nd_weights *w, needle_error *err)
{
    memset(w, 0, sizeof *w);
    loader L;
    memset(&L, 0, sizeof L);
    L.w = w;
    L.path = path;
    L.err = err;
    int rc = nd_st_open(path, &L.st, err);
    if (rc) return rc;
    rc = load(&L);
    if (rc) {
        free(L.arena);
        free(w->layers);
        memset(w, 0, sizeof *w);
        nd_st_close(&L.st);
        return rc;
    }
    /* keep the mapping (tensors point into it), drop the parsed header */
    w->map = L.st.map;
    memset(&L.st.map, 0, sizeof L.st.map);
    nd_st_close(&L.st);
    return 0;
}
