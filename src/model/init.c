/* init.c - reference initialisation (SPEC section 3) in checkpoint layout. */
#include "model/init.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "io/safetensors.h"

typedef enum {
    FILL_NORMAL,  /* N(0, std) */
    FILL_CONST,   /* every element = value */
    FILL_EYE,     /* value * I on the trailing (n, n) axes: mHC b_res */
    FILL_TAPS     /* first row 1, the rest 0: engram taps start as identity */
} fill_kind;

typedef struct spec {
    const char *name;
    int ndim;
    int64_t shape[ND_PARAM_MAX_DIMS];
    fill_kind fill;
    double value; /* std for FILL_NORMAL, the constant otherwise */
} spec;

/* FNV-1a of the name: the per-tensor RNG stream id. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void fill(nd_param *p, const spec *s, uint64_t seed)
{
    switch (s->fill) {
    case FILL_NORMAL: {
        nd_rng r;
        nd_rng_seed_stream(&r, seed, name_hash(p->name));
        nd_rng_fill_normal(&r, p->data, p->numel, 0.0f, (float)s->value);
        break;
    }
    case FILL_CONST:
        for (size_t i = 0; i < p->numel; i++) p->data[i] = (float)s->value;
        break;
    case FILL_EYE: {
        int64_t n = p->shape[p->ndim - 1];
        memset(p->data, 0, p->numel * sizeof(float));
        for (size_t m = 0; m < p->numel; m += (size_t)(n * n))
            for (int64_t i = 0; i < n; i++) p->data[m + (size_t)(i * n + i)] = (float)s->value;
        break;
    }
    case FILL_TAPS: {
        size_t row = (size_t)p->shape[p->ndim - 1];
        memset(p->data, 0, p->numel * sizeof(float));
        for (size_t i = 0; i < row; i++) p->data[i] = 1.0f;
        break;
    }
    }
}

#define MAX_SPECS (40 + 4 * ND_MAX_SITES)

/* The parameter list of SPEC section 3 for config c.  Names point into
 * `names` for the per-site ones. */
static size_t build_specs(const nd_config *c, spec *out, char names[][48])
{
    const int64_t V = c->vocab_size, d = c->d_model, A = c->attn_dim, KV = c->kv_dim, hd = c->head_dim;
    const int64_t L = c->num_layers, Nh = c->hada_n, n = c->mhc_lanes, Te = c->num_tables, slots = c->engram_slots;
    const int64_t sub = c->engram_sub, C = c->contrastive_dim;
    const double k_std = 0.02, res_std = 0.02 / sqrt(2.0 * (double)L); /* residual-writing projections */
    size_t k = 0;
#define ADD(nm, fk, val, nd, ...) out[k++] = (spec){nm, nd, {__VA_ARGS__}, fk, val}
    ADD("embedding.embedding", FILL_NORMAL, k_std, 2, V, d);
    ADD("stack.layers.block.ZCRMSNorm_0.scale", FILL_CONST, 0.0, 2, L, d);
    ADD("stack.layers.block.self_attn.q_proj.kernel", FILL_NORMAL, k_std, 3, L, d, A);
    ADD("stack.layers.block.self_attn.gate_proj.kernel", FILL_NORMAL, k_std, 3, L, d, A);
    ADD("stack.layers.block.self_attn.k_proj.kernel", FILL_NORMAL, k_std, 3, L, d, KV);
    ADD("stack.layers.block.self_attn.v_proj.kernel", FILL_NORMAL, k_std, 3, L, d, KV);
    ADD("stack.layers.block.self_attn.out_proj.kernel", FILL_NORMAL, res_std, 3, L, A, d);
    ADD("stack.layers.block.self_attn.q_norm.scale", FILL_CONST, 0.0, 2, L, hd);
    ADD("stack.layers.block.self_attn.k_norm.scale", FILL_CONST, 0.0, 2, L, hd);
    ADD("stack.layers.block.post_attn_norm.scale", FILL_CONST, 0.0, 2, L, d);
    ADD("stack.layers.block.pre_hada_norm.scale", FILL_CONST, 0.0, 2, L, d);
    ADD("stack.layers.block.attn_gate", FILL_CONST, 0.0, 1, L);
    ADD("stack.layers.block.hadamard_mlp.d1", FILL_CONST, 1.0, 2, L, Nh);
    ADD("stack.layers.block.hadamard_mlp.d2", FILL_CONST, 1.0, 2, L, Nh);
    ADD("stack.layers.block.hadamard_mlp.d3", FILL_CONST, 0.02, 2, L, Nh);
    ADD("stack.mhc_phi_pre", FILL_NORMAL, k_std, 3, L, n * d, n);
    ADD("stack.mhc_phi_post", FILL_NORMAL, k_std, 3, L, n * d, n);
    ADD("stack.mhc_phi_res", FILL_NORMAL, k_std, 3, L, n * d, n * n);
    ADD("stack.mhc_b_pre", FILL_CONST, 0.0, 2, L, n);
    ADD("stack.mhc_b_post", FILL_CONST, 0.0, 2, L, n);
    ADD("stack.mhc_b_res", FILL_EYE, 4.0, 3, L, n, n);
    ADD("stack.mhc_a_pre", FILL_CONST, 0.01, 1, L);
    ADD("stack.mhc_a_post", FILL_CONST, 0.01, 1, L);
    ADD("stack.mhc_a_res", FILL_CONST, 0.01, 1, L);
    ADD("stack.final_norm.scale", FILL_CONST, 0.0, 1, d);
    for (int s = 0; s < c->num_sites; s++) {
        char *nm = names[4 * s];
        snprintf(nm, 48, "engrams_%d.embedding", s);
        ADD(nm, FILL_NORMAL, k_std, 3, Te, slots, sub);
        nm = names[4 * s + 1];
        snprintf(nm, 48, "engrams_%d.key_proj.kernel", s);
        ADD(nm, FILL_NORMAL, k_std, 2, Te * sub, d);
        nm = names[4 * s + 2];
        snprintf(nm, 48, "engrams_%d.value_proj.kernel", s);
        ADD(nm, FILL_NORMAL, res_std, 2, Te * sub, d);
        nm = names[4 * s + 3];
        snprintf(nm, 48, "engrams_%d.taps", s);
        ADD(nm, FILL_TAPS, 0.0, 2, 4, d);
    }
    ADD("contrastive_head.probes", FILL_NORMAL, k_std, 2, 4, d);
    ADD("contrastive_head.proj.kernel", FILL_NORMAL, k_std, 2, 4 * d, C);
    ADD("contrastive_head.log_temp", FILL_CONST, 0.0, 1, 1); /* (1,) as in the golden checkpoint */
    ADD("confidence_head.probes", FILL_NORMAL, k_std, 2, 8, d);
    ADD("confidence_head.proj.kernel", FILL_NORMAL, k_std, 2, 8 * d, 1);
    ADD("confidence_head.proj.bias", FILL_CONST, 0.0, 1, 1);
#undef ADD
    return k;
}

int nd_init_params(const nd_config *c, uint64_t seed, nd_param_set *out, needle_error *err)
{
    memset(out, 0, sizeof *out);
    spec specs[MAX_SPECS];
    char names[4 * ND_MAX_SITES][48];
    size_t ns = build_specs(c, specs, names);
    out->params = calloc(ns, sizeof *out->params);
    if (!out->params) return nd_errorf(err, NEEDLE_ENOMEM, "init: out of memory");
    size_t total = 0;
    for (size_t i = 0; i < ns; i++) {
        nd_param *p = &out->params[i];
        snprintf(p->name, sizeof p->name, "%s", specs[i].name);
        p->ndim = specs[i].ndim;
        p->numel = 1;
        for (int dd = 0; dd < p->ndim; dd++) {
            p->shape[dd] = specs[i].shape[dd];
            p->numel *= (size_t)p->shape[dd]; /* bounded by nd_config_derive's limits */
        }
        total += p->numel;
    }
    out->count = ns;
    out->total = total;
    out->block = malloc(total * sizeof(float));
    if (!out->block) {
        nd_param_set_free(out);
        return nd_errorf(err, NEEDLE_ENOMEM, "init: cannot allocate %zu parameters", total);
    }
    size_t at = 0;
    for (size_t i = 0; i < ns; i++) {
        out->params[i].data = out->block + at;
        at += out->params[i].numel;
        fill(&out->params[i], &specs[i], seed);
    }
    return 0;
}

void nd_param_set_free(nd_param_set *ps)
{
    if (!ps) return;
    free(ps->params);
    free(ps->block);
    memset(ps, 0, sizeof *ps);
}

const nd_param *nd_param_find(const nd_param_set *ps, const char *name)
{
    for (size_t i = 0; i < ps->count; i++)
        if (strcmp(ps->params[i].name, name) == 0) return &ps->params[i];
    return NULL;
}

int nd_param_set_write(const nd_param_set *ps, const nd_config *c, const char *path, needle_error *err)
{
    nd_st_out_tensor *t = calloc(ps->count ? ps->count : 1, sizeof *t);
    char *cfg = nd_config_to_json(c);
    if (!t || !cfg) {
        free(t);
        free(cfg);
        return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path);
    }
    for (size_t i = 0; i < ps->count; i++) {
        t[i].name = ps->params[i].name;
        t[i].dtype = ND_ST_F32;
        t[i].ndim = ps->params[i].ndim;
        for (int d = 0; d < t[i].ndim; d++) t[i].shape[d] = ps->params[i].shape[d];
        t[i].data = ps->params[i].data;
    }
    const char *keys[2] = {"format", "config"};
    const char *vals[2] = {"needle-checkpoint", cfg};
    int rc = nd_st_write(path, t, ps->count, keys, vals, 2, err);
    free(t);
    free(cfg);
    return rc;
}
