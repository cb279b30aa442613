/* init.c - reference initialisation (SPEC section 3, SPEC-needle3 1.2) in
 * checkpoint layout: every parameter of model/params.def a checkpoint of the
 * config's generation holds, filled by its table initialiser, and the
 * checkpoint writer (Needle 3: the reference's names, config JSON and
 * metadata). */
#include "model/init.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
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
        if (!nd_param_in_ckpt(p, c)) continue;
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
        nd_param_ckpt_name_cfg(inst[i].p, c, inst[i].index, p->name, sizeof p->name);
        p->ndim = nd_param_ckpt_shape(inst[i].p, c, inst[i].p->scope == ND_SCOPE_HEAD ? inst[i].index : -1, p->shape);
        p->numel = 1;
        for (int dd = 0; dd < p->ndim; dd++) p->numel *= (size_t)p->shape[dd]; /* bounded by nd_config_derive's limits */
        total += p->numel;
    }
    out->count = ns;
    out->total = total;
    out->seed = seed;
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
        nd_param_init_fill_cfg(inst[i].p, c, p->name, p->data, p->ndim, p->shape, seed);
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
    int rc;
    if (nd_config_generation(c) == 3) {
        /* the reference's checkpoint metadata (its load_checkpoint wants format_version 2) */
        char *ref = nd_config_to_reference_json(c);
        if (!ref) {
            free(t);
            free(cfg);
            return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path);
        }
        char run[160];
        snprintf(run, sizeof run, "{\"generator\": \"needle init\", \"init_seed\": %llu}", (unsigned long long)ps->seed);
        const char *keys[4] = {"format_version", "config", "step", "run"};
        const char *vals[4] = {"2", ref, "0", run};
        rc = nd_st_write(path, t, ps->count, keys, vals, 4, err);
        free(ref);
    } else {
        const char *keys[2] = {"format", "config"};
        const char *vals[2] = {"needle-checkpoint", cfg};
        rc = nd_st_write(path, t, ps->count, keys, vals, 2, err);
    }
    free(t);
    free(cfg);
    return rc;
}

/* A float as Python's json.dumps writes it: "100000.0", "0.5", "1e-06". */
static void put_py_float(nd_buf *b, double v)
{
    if (v == floor(v) && fabs(v) < 1e16) {
        nd_buf_printf(b, "%.1f", v);
        return;
    }
    char s[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(s, sizeof s, "%.*g", p, v);
        if (strtod(s, NULL) == v) break;
    }
    nd_buf_puts(b, s);
}

static void put_int_list(nd_buf *b, const char *key, const int *v, int n)
{
    nd_buf_printf(b, ", \"%s\": [", key);
    for (int i = 0; i < n; i++) nd_buf_printf(b, "%s%d", i ? ", " : "", v[i]);
    nd_buf_putc(b, ']');
}

char *nd_config_to_reference_json(const nd_config *c)
{
    nd_buf b;
    nd_buf_init(&b);
    nd_buf_printf(&b,
                  "{\"vocab_size\": %d, \"d_model\": %d, \"num_heads\": %d, \"num_kv_heads\": %d, \"num_layers\": %d, "
                  "\"qk_head_dim\": %d, \"v_head_dim\": %d, \"max_seq_len\": %d, \"pad_token_id\": %d, "
                  "\"embedding_dim\": %d",
                  c->vocab_size, c->d_model, c->num_heads, c->num_kv_heads, c->num_layers, c->qk_dim, c->v_dim,
                  c->max_seq_len, c->pad_token_id, c->contrastive_dim);
    for (int h = 0; h < ND_NUM_HEAD_KINDS; h++)
        nd_buf_printf(&b, ", \"%s_probes\": %lld, \"%s_queries\": %lld", nd_param_heads[h].name3,
                      (long long)nd_dim_value(c, ND_DIM_HK, h), nd_param_heads[h].name3,
                      (long long)nd_dim_value(c, ND_DIM_HQ, h));
    nd_buf_puts(&b, ", \"rope_theta\": ");
    put_py_float(&b, (double)c->rope_theta);
    nd_buf_puts(&b, ", \"dtype\": \"float32\", \"flash\": false");
    put_int_list(&b, "engram_orders", c->engram_orders, c->num_orders);
    nd_buf_printf(&b, ", \"engram_heads\": %d, \"engram_slots\": %d, \"engram_seed_heads\": %d", c->engram_heads,
                  c->engram_slots, c->engram_seed_heads);
    put_int_list(&b, "engram_layers", c->engram_layers, c->num_sites);
    int global[64], ng = 0;
    for (int l = 0; l < 64 && l < c->num_layers; l++)
        if (c->global_mask >> l & 1ull) global[ng++] = l;
    put_int_list(&b, "global_layers", global, ng);
    nd_buf_printf(&b,
                  ", \"sliding_window\": %d, \"ladder_depths\": [], \"ladder_sample\": false, \"ladder_widths\": []",
                  c->sliding_window);
    put_int_list(&b, "ladder_order", c->ladder_order, c->num_ladder_order);
    nd_buf_printf(&b,
                  ", \"mhc_lanes\": %d, \"qkv_conv_taps\": %d, \"out_vocab\": %d, \"kv_window\": %d, "
                  "\"kv_bits\": %d, \"act_bits\": %d, \"weight_bits\": ",
                  c->mhc_lanes, c->qkv_conv_taps, c->out_vocab, c->kv_window, c->kv_bits, c->act_bits);
    nd_json_write_string(&b, c->weight_bits, strlen(c->weight_bits), 1);
    nd_buf_puts(&b, ", \"remat\": false, \"scan_unroll\": 1}");
    if (b.oom) {
        nd_buf_free(&b);
        return NULL;
    }
    return nd_buf_take(&b);
}
