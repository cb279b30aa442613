/* weights_safetensors.c - nd_weights from a full-precision checkpoint.
 *
 * Tensors are found by their checkpoint path (SPEC section 3) and checked
 * against the shapes the config implies.  F32 data already in the engine's
 * layout (embeddings, norm scales, engram tables) is used in place from the
 * mapping; kernels ([in, out] in the file) are transposed to [out, in] and,
 * like F16/BF16 data, land in one owned float block.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"
#include "io/safetensors.h"
#include "model/params.h"
#include "model/weights.h"

typedef struct loader {
    nd_safetensors st;
    nd_weights *w;
    const char *path;
    float *arena; /* becomes w->owned */
    size_t used, cap;
    needle_error *err;
} loader;

/* The tensor `name` with exactly this shape and a float dtype, or an error. */
static int need(loader *L, const char *name, int ndim, const int64_t *shape, const nd_st_tensor **out)
{
    const nd_st_tensor *t = nd_st_find(&L->st, name);
    if (!t) return nd_errorf(L->err, NEEDLE_EFORMAT, "%s: tensor \"%s\" is missing", L->path, name);
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == shape[i];
    if (!ok) {
        char got[96], want[96];
        nd_st_shape_text(got, sizeof got, t->ndim, t->shape);
        nd_st_shape_text(want, sizeof want, ndim, shape);
        return nd_errorf(L->err, NEEDLE_EFORMAT, "%s: tensor \"%s\" has shape %s, expected %s", L->path, name, got,
                         want);
    }
    if (!nd_st_is_float(t->dtype))
        return nd_errorf(L->err, NEEDLE_EFORMAT, "%s: tensor \"%s\" has dtype %s, expected F32, F16 or BF16", L->path,
                         name, nd_st_dtype_name(t->dtype));
    *out = t;
    return 0;
}

/* NaN or Inf weights would only surface later as NaN logits (and invalid
 * JSON): refuse them at load, naming the tensor and the element. */
static int refuse_nonfinite(loader *L, const nd_st_tensor *t)
{
    for (size_t i = 0; i < t->numel; i++) {
        float v = nd_st_get_f32(t, i);
        if (!isfinite(v))
            return nd_errorf(L->err, NEEDLE_EFORMAT, "%s: tensor \"%s\" holds %s at element %zu", L->path, t->name,
                             isnan(v) ? "NaN" : "Inf", i);
    }
    return 0;
}

#define TRY(x)                 \
    do {                       \
        int rc_ = (x);         \
        if (rc_) return rc_;   \
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

/* A parameter the checkpoint does not carry (the MLP permutations, the
 * router's calibration, the embedding head's absent bias): its initialiser's
 * values, in the arena. */
static int fill_init(loader *L, const nd_param_desc *p, int index)
{
    nd_weights *w = L->w;
    const nd_config *c = &w->cfg;
    int head = p->scope == ND_SCOPE_HEAD ? index : -1;
    char name[160];
    int64_t shape[4];
    nd_param_ckpt_name_cfg(p, c, index, name, sizeof name);
    int ndim = nd_param_ckpt_shape(p, c, head, shape);
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    float *v = take(L, n);
    if (!v) return nd_errorf(L->err, NEEDLE_ENOMEM, "%s: arena exhausted at \"%s\"", L->path, name);
    nd_param_init_fill_cfg(p, c, name, v, ndim, shape, 0);
    int layers = p->scope == ND_SCOPE_LAYER ? c->num_layers : 1;
    size_t per = (size_t)nd_param_elems(p, c, head);
    for (int l = 0; l < layers; l++) {
        void *f = nd_param_field(p, nd_param_base(w, p, p->scope == ND_SCOPE_LAYER ? l : index));
        if (p->kind == ND_KIND_SCALAR) *(float *)f = v[(size_t)l * per];
        else if (p->kind == ND_KIND_VECTOR) *(const float **)f = v + (size_t)l * per;
        else return nd_errorf(L->err, NEEDLE_EFORMAT, "%s: tensor \"%s\" is missing", L->path, name);
    }
    return 0;
}

/* One parameter of model/params.def for instance `index` (site or head;
 * every layer at once for LAYER scope): found by checkpoint name, checked
 * against the shape the config implies, and bound into the weights. */
static int load_param(loader *L, const nd_param_desc *p, int index)
{
    nd_weights *w = L->w;
    const nd_config *c = &w->cfg;
    int head = p->scope == ND_SCOPE_HEAD ? index : -1;
    char name[160];
    int64_t shape[4];
    nd_param_ckpt_name_cfg(p, c, index, name, sizeof name);
    int ndim = nd_param_ckpt_shape(p, c, head, shape);
    const nd_st_tensor *t = nd_st_find(&L->st, name);
    if (!t && p->ckpt_optional) return fill_init(L, p, index);
    /* a one-element tensor outside the layers may be written as () or (1,) */
    if (t && p->kind == ND_KIND_SCALAR && p->scope != ND_SCOPE_LAYER && t->numel == 1 && t->ndim <= 1) {
        ndim = t->ndim;
        shape[0] = 1;
    }
    TRY(need(L, name, ndim, shape, &t));
    TRY(refuse_nonfinite(L, t));
    int layers = p->scope == ND_SCOPE_LAYER ? c->num_layers : 1;
    size_t per = (size_t)nd_param_elems(p, c, head);
    for (int l = 0; l < layers; l++) {
        void *f = nd_param_field(p, nd_param_base(w, p, p->scope == ND_SCOPE_LAYER ? l : index));
        size_t off = (size_t)l * per;
        if (p->kind == ND_KIND_SCALAR) {
            *(float *)f = nd_st_get_f32(t, off);
        } else if (p->kind == ND_KIND_VECTOR) {
            TRY(vec(L, t, off, per, (const float **)f));
        } else {
            int rows = (int)nd_dim_value(c, p->rows, head), cols = (int)nd_dim_value(c, p->cols, head);
            nd_matrix *m = f;
            if (p->transpose) {
                TRY(transposed(L, t, off, cols, rows, m));
            } else {
                const float *data;
                TRY(vec(L, t, off, per, &data));
                *m = (nd_matrix){.kind = ND_MAT_F32, .rows = rows, .cols = cols, .f32 = data};
            }
        }
    }
    return 0;
}

/* A head is present when its first parameter is; then each parameter its
 * checkpoint carries is required, and the others read as their init
 * constant (the contrastive head has no bias: the engine reads zeros). */
static int load_head(loader *L, int k)
{
    nd_weights *w = L->w;
    nd_head_weights *h = (nd_head_weights *)(void *)((char *)w + nd_param_heads[k].offset);
    int first = 1;
    for (int i = 0; i < ND_P_COUNT; i++) {
        const nd_param_desc *p = &nd_params[i];
        if (p->scope != ND_SCOPE_HEAD || !nd_param_in_config(p, &w->cfg)) continue;
        if (first) {
            char name[160];
            nd_param_ckpt_name_cfg(p, &w->cfg, k, name, sizeof name);
            if (!nd_st_find(&L->st, name)) return 0;
            h->present = 1;
            h->num_probes = (int)nd_dim_value(&w->cfg, nd_config_generation(&w->cfg) == 3 ? ND_DIM_HK : ND_DIM_PROBES, k);
            h->num_queries = (int)nd_dim_value(&w->cfg, ND_DIM_HQ, k);
            h->out_dim = nd_head_out_dim(&w->cfg, k);
            first = 0;
        }
        if (nd_param_in_head_ckpt(p, k)) TRY(load_param(L, p, k));
        else TRY(fill_init(L, p, k));
    }
    return 0;
}

/* A Needle 3 config with width rungs (ladder_widths) splits the MLP
 * permutations in halves the reader does not draw: refuse it by name rather
 * than run other permutations than the model was trained with. */
static int refuse_width_ladder(loader *L, const char *cfg)
{
    nd_json *root = NULL;
    needle_error ignored;
    if (nd_json_parse(cfg, strlen(cfg), L->path, &root, &ignored)) return 0; /* nd_config_from_json judged it */
    const nd_json *v = nd_json_get(root, "ladder_widths");
    int wide = v && v->type == ND_JSON_ARRAY && v->count > 0;
    nd_json_free(root);
    if (wide)
        return nd_errorf(L->err, NEEDLE_EUNSUPPORTED,
                         "%s: __metadata__.config has ladder_widths (width rungs, split MLP permutations): not supported",
                         L->path);
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
        TRY(refuse_width_ladder(L, cfg));
    } else {
        nd_config_defaults(&w->cfg);
        TRY(nd_config_derive(&w->cfg, L->path, L->err));
    }
    /* Upper bound of what may be copied: every float tensor once, plus the
     * contrastive head's zero bias.  malloc only commits what is touched. */
    size_t cap = (size_t)w->cfg.contrastive_dim + 16;
    for (size_t i = 0; i < L->st.count; i++) cap += L->st.tensors[i].numel;
    /* ... and the parameters a checkpoint may leave to their initialiser */
    for (int i = 0; i < ND_P_COUNT; i++)
        if (nd_params[i].ckpt_optional && nd_param_in_config(&nd_params[i], &w->cfg))
            cap += (size_t)nd_param_elems(&nd_params[i], &w->cfg, nd_params[i].scope == ND_SCOPE_HEAD ? 0 : -1) *
                   (nd_params[i].scope == ND_SCOPE_LAYER ? (size_t)w->cfg.num_layers : 1) * ND_NUM_HEAD_KINDS;
    L->arena = malloc(cap * sizeof(float));
    L->cap = cap;
    w->layers = calloc((size_t)w->cfg.num_layers, sizeof *w->layers);
    if (!L->arena || !w->layers) return nd_errorf(L->err, NEEDLE_ENOMEM, "%s: out of memory", L->path);
    w->owned = L->arena;

    for (int s = 0; s < w->cfg.num_sites; s++) w->sites[s].layer = w->cfg.engram_layers[s];
    for (int i = 0; i < ND_P_COUNT; i++) {
        const nd_param_desc *p = &nd_params[i];
        if (!nd_param_in_config(p, &w->cfg)) continue;
        if (p->scope == ND_SCOPE_SITE)
            for (int s = 0; s < w->cfg.num_sites; s++) TRY(load_param(L, p, s));
        else if (p->scope != ND_SCOPE_HEAD) TRY(load_param(L, p, 0));
    }
    for (int k = 0; k < nd_head_kinds(&w->cfg); k++) TRY(load_head(L, k));
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
