/* init.c - reference initialisation (SPEC section 3) in checkpoint layout:
 * every parameter of model/params.def, filled by its table initialiser. */
#include "model/init.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/params.h"

/* Every checkpoint tensor of config c, in model/params.def order: the
 * instance index (site or head) of each, or -1 once. */
typedef struct instance {
    const nd_param_desc *p;
    int index;
} instance;

static size_t list_instances(const nd_config *c, instance *out)
{
    size_t k = 0;
    for (int i = 0; i < ND_P_COUNT; i++) {
        const nd_param_desc *p = &nd_params[i];
        if (!nd_param_in_config(p, c)) continue;
        int n = p->scope == ND_SCOPE_SITE ? c->num_sites : p->scope == ND_SCOPE_HEAD ? nd_head_kinds(c) : 1;
        for (int j = 0; j < n; j++) {
            if (p->scope == ND_SCOPE_HEAD && !nd_param_in_head_ckpt(p, j)) continue;
            if (out) out[k] = (instance){p, j};
            k++;
        }
    }
    return k;
}

int nd_init_params(const nd_config *c, uint64_t seed, nd_param_set *out, needle_error *err)
{
    memset(out, 0, sizeof *out);
    size_t ns = list_instances(c, NULL);
    instance *inst = calloc(ns, sizeof *inst);
    out->params = calloc(ns, sizeof *out->params);
    if (!inst || !out->params) {
        free(inst);
        nd_param_set_free(out);
        return nd_errorf(err, NEEDLE_ENOMEM, "init: out of memory");
    }
    list_instances(c, inst);
    size_t total = 0;
    for (size_t i = 0; i < ns; i++) {
        nd_param *p = &out->params[i];
        nd_param_ckpt_name(inst[i].p, inst[i].index, p->name, sizeof p->name);
        p->ndim = nd_param_ckpt_shape(inst[i].p, c, inst[i].p->scope == ND_SCOPE_HEAD ? inst[i].index : -1, p->shape);
        p->numel = 1;
        for (int dd = 0; dd < p->ndim; dd++) p->numel *= (size_t)p->shape[dd]; /* bounded by nd_config_derive's limits */
        total += p->numel;
    }
    out->count = ns;
    out->total = total;
    out->block = malloc(total * sizeof(float));
    if (!out->block) {
        free(inst);
        nd_param_set_free(out);
        return nd_errorf(err, NEEDLE_ENOMEM, "init: cannot allocate %zu parameters", total);
    }
    size_t at = 0;
    for (size_t i = 0; i < ns; i++) {
        nd_param *p = &out->params[i];
        p->data = out->block + at;
        at += p->numel;
        nd_param_init_fill(inst[i].p, p->name, p->data, p->ndim, p->shape, c->num_layers, seed);
    }
    free(inst);
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
