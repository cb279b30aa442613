/* config.c - model configuration: defaults, JSON in/out, derivation, presets. */
#include "model/config.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "core/formulas.h"

/* Limits that keep every tensor's element count and every int index used by
 * the engine far from overflow, whatever a (possibly hostile) file says. */
#define MAX_DIM (1 << 16)        /* d_model, attn_dim, contrastive_dim */
#define MAX_VOCAB (1 << 22)
#define MAX_LAYERS 1024
#define MAX_SLOTS (1 << 24)
#define MAX_SEQ (1 << 22)
#define MAX_LANES ND_MAX_LANES /* the lane cap both forwards share */
#define MAX_ORDER ND_ENGRAM_MAX_ORDER
#define MAX_ELEMS (1ll << 31)    /* any one matrix: rows*cols < 2^31 */

void nd_config_defaults(nd_config *c)
{
    memset(c, 0, sizeof *c);
    c->vocab_size = 8192;
    c->d_model = 512;
    c->attn_dim = 0;
    c->num_heads = 8;
    c->num_kv_heads = 4;
    c->num_layers = 12;
    c->max_seq_len = 2048;
    c->rope_theta = 100000.0f;
    c->engram_orders[0] = 2;
    c->engram_orders[1] = 3;
    c->num_orders = 2;
    c->engram_heads = 0;
    c->engram_slots = 8192;
    c->engram_layers[0] = 2;
    c->engram_layers[1] = 15;
    c->num_sites = 2;
    c->mhc_lanes = 4;
    c->kv_window = 0;
    c->kv_bits = 8;
    c->act_bits = 8;
    c->contrastive_dim = 128;
    c->pad_token_id = 0;
    c->weight_bits[0] = '\0';
    /* SPEC's default sites (2,15) do not fit its default 12 layers, so the
     * defaults alone do not validate; fill what derives regardless */
    (void)nd_config_derive(c, "defaults", NULL);
}

static int bad(needle_error *err, const char *where, const char *what)
{
    return nd_errorf(err, NEEDLE_EFORMAT, "%s: config: %s", where, what);
}

int nd_config_derive(nd_config *c, const char *where, needle_error *err)
{
    char msg[200];
    if (!where) where = "config";
    if (c->attn_dim == 0) c->attn_dim = c->d_model; /* 0 means "= d_model" */
#define RANGE(field, lo, hi)                                                                           \
    if (c->field < (lo) || c->field > (hi)) {                                                          \
        snprintf(msg, sizeof msg, #field " = %d is outside [%d, %d]", c->field, (int)(lo), (int)(hi)); \
        return bad(err, where, msg);                                                                   \
    }
    RANGE(vocab_size, 1, MAX_VOCAB);
    RANGE(d_model, 1, MAX_DIM);
    RANGE(attn_dim, 1, MAX_DIM);
    RANGE(num_heads, 1, MAX_DIM);
    RANGE(num_kv_heads, 1, MAX_DIM);
    RANGE(num_layers, 1, MAX_LAYERS);
    RANGE(max_seq_len, 1, MAX_SEQ);
    RANGE(engram_heads, 0, MAX_DIM);
    RANGE(engram_slots, 1, MAX_SLOTS);
    RANGE(mhc_lanes, 1, MAX_LANES);
    RANGE(kv_window, 0, c->max_seq_len); /* a larger window only allocates cache no position can use */
    RANGE(kv_bits, 1, 32);
    RANGE(act_bits, 1, 32);
    RANGE(contrastive_dim, 1, MAX_DIM);
    RANGE(pad_token_id, 0, c->vocab_size - 1);
    RANGE(num_orders, 1, ND_MAX_ORDERS);
    RANGE(num_sites, 0, ND_MAX_SITES);
#undef RANGE
#define RANGE3(field, lo, hi)                                                                          \
    if (c->field < (lo) || c->field > (hi)) {                                                          \
        snprintf(msg, sizeof msg, #field " = %d is outside [%d, %d]", c->field, (int)(lo), (int)(hi)); \
        return bad(err, where, msg);                                                                   \
    }
    if (!(c->rope_theta > 0.0f) || !isfinite(c->rope_theta)) return bad(err, where, "rope_theta must be positive");
    if (c->attn_dim % c->num_heads) {
        snprintf(msg, sizeof msg, "attn_dim %d is not divisible by num_heads %d", c->attn_dim, c->num_heads);
        return bad(err, where, msg);
    }
    if (c->num_heads % c->num_kv_heads) {
        snprintf(msg, sizeof msg, "num_heads %d is not divisible by num_kv_heads %d", c->num_heads, c->num_kv_heads);
        return bad(err, where, msg);
    }
    if (c->generation == 0) c->generation = 2;
    if (c->generation != 2 && c->generation != 3) return bad(err, where, "generation must be 2 or 3");
    if (c->generation == 3) {
        RANGE3(qk_head_dim, 2, MAX_DIM);
        RANGE3(v_head_dim, 1, MAX_DIM);
        RANGE3(out_vocab, 0, c->vocab_size);
        RANGE3(sliding_window, 0, MAX_SEQ);
        RANGE3(qkv_conv_taps, 0, 64);
        RANGE3(engram_seed_heads, 0, MAX_DIM);
        RANGE3(num_layers, 1, ND_MAX_LAYERS_V3);
        RANGE3(head_probes[0], 0, 4096);
        RANGE3(head_probes[1], 0, 4096);
        RANGE3(head_probes[2], 0, 4096);
        RANGE3(head_queries[0], 0, 4096);
        RANGE3(head_queries[1], 0, 4096);
        RANGE3(head_queries[2], 0, 4096);
        if (c->num_ladder_order) { /* a permutation of the layers */
            unsigned long long seen = 0;
            for (int i = 0; i < c->num_ladder_order; i++) {
                int l = c->ladder_order[i];
                if (c->num_ladder_order != c->num_layers || l < 0 || l >= c->num_layers || (seen >> l & 1ull))
                    return bad(err, where, "ladder_order is not a permutation of the layers");
                seen |= 1ull << l;
            }
        }
        c->attn_dim = c->num_heads * c->qk_head_dim;
    }
    c->head_dim = c->attn_dim / c->num_heads;
    if (c->head_dim % 2) {
        snprintf(msg, sizeof msg, "head_dim %d must be even (rotate-half RoPE)", c->head_dim);
        return bad(err, where, msg);
    }
#undef RANGE3
    c->qk_dim = c->head_dim;
    c->v_dim = c->generation == 3 ? c->v_head_dim : c->head_dim;
    c->kv_dim = c->num_kv_heads * c->head_dim;
    c->hada_n = 1;
    while (c->hada_n < c->d_model) c->hada_n *= 2;
    {
        int bitlen = 0; /* of hada_n - 1 */
        for (int v = c->hada_n - 1; v > 0; v >>= 1) bitlen++;
        c->hada_a = 1 << (bitlen / 2);
        c->hada_b = c->hada_n / c->hada_a;
    }
    c->conv_dilation = 0;
    for (int i = 0; i < c->num_orders; i++) {
        if (c->engram_orders[i] < 1 || c->engram_orders[i] > MAX_ORDER) {
            snprintf(msg, sizeof msg, "engram_orders[%d] = %d is outside [1, %d]", i, c->engram_orders[i], MAX_ORDER);
            return bad(err, where, msg);
        }
        if (c->engram_orders[i] > c->conv_dilation) c->conv_dilation = c->engram_orders[i];
    }
    int he = c->engram_heads;
    if (he == 0) {
        he = c->d_model / (c->num_orders * 128);
        if (he < 1) he = 1;
    }
    c->engram_heads_eff = he;
    c->num_tables = c->num_orders * he;
    c->engram_sub = c->d_model / c->num_tables;
    if (c->engram_sub < 1) {
        snprintf(msg, sizeof msg, "d_model %d is too small for %d engram tables", c->d_model, c->num_tables);
        return bad(err, where, msg);
    }
    long long n = c->mhc_lanes;
    if ((long long)c->vocab_size * c->d_model >= MAX_ELEMS ||
        (long long)c->num_tables * c->engram_slots * c->engram_sub >= MAX_ELEMS ||
        n * n * n * c->d_model >= MAX_ELEMS || (long long)c->attn_dim * c->d_model >= MAX_ELEMS ||
        (long long)c->contrastive_dim * 4 * c->d_model >= MAX_ELEMS)
        return bad(err, where, "a weight matrix would exceed 2^31 elements");
    if (strlen(c->weight_bits) >= sizeof c->weight_bits) return bad(err, where, "weight_bits too long");
    /* last, so every derived field is filled even when only the sites are off
     * (SPEC's defaults: sites (2,15) with 12 layers) */
    for (int i = 0; i < c->num_sites; i++) {
        if (c->engram_layers[i] < 0 || c->engram_layers[i] >= c->num_layers) {
            snprintf(msg, sizeof msg, "engram_layers[%d] = %d is not a layer (num_layers %d)", i, c->engram_layers[i],
                     c->num_layers);
            return bad(err, where, msg);
        }
        for (int j = 0; j < i; j++)
            if (c->engram_layers[j] == c->engram_layers[i]) {
                snprintf(msg, sizeof msg, "engram_layers lists layer %d twice", c->engram_layers[i]);
                return bad(err, where, msg);
            }
    }
    return 0;
}

/* ---------------------------------------------------------------- JSON in */

static int get_int(const nd_json *v, const char *key, int *out, const char *where, needle_error *err)
{
    if (!v || v->type != ND_JSON_NUMBER || v->num != floor(v->num) || fabs(v->num) > 2147483647.0)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: config key \"%s\" must be an integer (byte %zu)", where, key,
                         v ? v->offset : 0);
    *out = (int)v->num;
    return 0;
}

static int get_int_list(const nd_json *v, const char *key, int *out, int *count, int max, const char *where,
                        needle_error *err)
{
    if (!v || v->type != ND_JSON_ARRAY || v->count > (size_t)max)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: config key \"%s\" must be an array of at most %d integers (byte %zu)",
                         where, key, max, v ? v->offset : 0);
    for (size_t i = 0; i < v->count; i++) {
        int rc = get_int(&v->items[i], key, &out[i], where, err);
        if (rc) return rc;
    }
    *count = (int)v->count;
    return 0;
}

/* Apply one member; returns 1 when the key is not a config field. */
static int apply_member(nd_config *c, const char *key, const nd_json *v, const char *where, needle_error *err)
{
    static const struct {
        const char *name;
        size_t off;
    } ints[] = {
#define F(x) {#x, offsetof(nd_config, x)}
        F(vocab_size), F(d_model),     F(attn_dim), F(num_heads), F(num_kv_heads),   F(num_layers),
        F(max_seq_len), F(engram_heads), F(engram_slots), F(mhc_lanes), F(kv_window), F(kv_bits),
        F(act_bits),   F(contrastive_dim), F(pad_token_id),
        /* Needle 3 (a config with qk_head_dim is a Needle 3 config) */
        F(qk_head_dim), F(v_head_dim), F(out_vocab), F(sliding_window), F(qkv_conv_taps), F(engram_seed_heads),
        {"embedding_dim", offsetof(nd_config, contrastive_dim)},
        {"embedding_probes", offsetof(nd_config, head_probes)},
        {"confidence_probes", offsetof(nd_config, head_probes) + sizeof(int)},
        {"router_probes", offsetof(nd_config, head_probes) + 2 * sizeof(int)},
        {"embedding_queries", offsetof(nd_config, head_queries)},
        {"confidence_queries", offsetof(nd_config, head_queries) + sizeof(int)},
        {"router_queries", offsetof(nd_config, head_queries) + 2 * sizeof(int)},
#undef F
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (strcmp(key, ints[i].name) == 0) {
            int rc = get_int(v, key, (int *)((char *)c + ints[i].off), where, err);
            if (rc == 0 && strcmp(key, "qk_head_dim") == 0 && c->qk_head_dim > 0) c->generation = 3;
            return rc;
        }
    if (strcmp(key, "global_layers") == 0) {
        int layers[64], n = 0;
        int rc = get_int_list(v, key, layers, &n, 64, where, err);
        if (rc) return rc;
        c->global_mask = 0;
        for (int i = 0; i < n; i++) {
            if (layers[i] < 0 || layers[i] >= 64)
                return nd_errorf(err, NEEDLE_EFORMAT, "%s: config key \"global_layers\": layer %d outside [0, 63]",
                                 where, layers[i]);
            c->global_mask |= 1ull << layers[i];
        }
        return 0;
    }
    if (strcmp(key, "rope_theta") == 0) {
        if (v->type != ND_JSON_NUMBER)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: config key \"rope_theta\" must be a number (byte %zu)", where,
                             v->offset);
        c->rope_theta = (float)v->num;
        return 0;
    }
    if (strcmp(key, "ladder_order") == 0)
        return get_int_list(v, key, c->ladder_order, &c->num_ladder_order, ND_MAX_LAYERS_V3, where, err);
    if (strcmp(key, "engram_orders") == 0)
        return get_int_list(v, key, c->engram_orders, &c->num_orders, ND_MAX_ORDERS, where, err);
    if (strcmp(key, "engram_layers") == 0)
        return get_int_list(v, key, c->engram_layers, &c->num_sites, ND_MAX_SITES, where, err);
    if (strcmp(key, "weight_bits") == 0) {
        if (v->type == ND_JSON_NULL) {
            c->weight_bits[0] = '\0';
            return 0;
        }
        if (v->type != ND_JSON_STRING || v->len >= sizeof c->weight_bits || strlen(v->str) != v->len)
            return nd_errorf(err, NEEDLE_EFORMAT, "%s: config key \"weight_bits\" must be a string under %zu bytes (byte %zu)",
                             where, sizeof c->weight_bits, v->offset);
        memcpy(c->weight_bits, v->str, v->len + 1);
        return 0;
    }
    return 1;
}

int nd_config_from_json(nd_config *c, const char *json, size_t len, const char *where, needle_error *err)
{
    if (!where) where = "config";
    nd_config_defaults(c);
    c->attn_dim = 0; /* absent means "= d_model", whatever d_model the JSON gives */
    nd_json *root = NULL;
    int rc = nd_json_parse(json, len, where, &root, err);
    if (rc) return rc;
    if (root->type != ND_JSON_OBJECT) {
        nd_json_free(root);
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: config is not a JSON object", where);
    }
    for (size_t i = 0; i < root->count && rc == 0; i++) {
        rc = apply_member(c, root->keys[i], &root->items[i], where, err);
        if (rc == 1) rc = 0; /* unknown keys (dtype, flash, remat, ...) are ignored */
    }
    nd_json_free(root);
    if (rc) return rc;
    return nd_config_derive(c, where, err);
}

/* ---------------------------------------------------------------- JSON out */

char *nd_config_to_json(const nd_config *c)
{
    nd_buf b;
    nd_buf_init(&b);
    nd_buf_printf(&b,
                  "{\"vocab_size\":%d,\"d_model\":%d,\"attn_dim\":%d,\"num_heads\":%d,\"num_kv_heads\":%d,"
                  "\"num_layers\":%d,\"max_seq_len\":%d,\"pad_token_id\":%d,\"contrastive_dim\":%d,",
                  c->vocab_size, c->d_model, c->attn_dim, c->num_heads, c->num_kv_heads, c->num_layers,
                  c->max_seq_len, c->pad_token_id, c->contrastive_dim);
    /* rope_theta: shortest decimal that reads back as the same float */
    char theta[32];
    for (int p = 1; p <= 9; p++) {
        snprintf(theta, sizeof theta, "%.*g", p, (double)c->rope_theta);
        if ((float)strtod(theta, NULL) == c->rope_theta) break;
    }
    nd_buf_printf(&b, "\"rope_theta\":%s%s,\"engram_orders\":[", theta, strpbrk(theta, ".e") ? "" : ".0");
    for (int i = 0; i < c->num_orders; i++) nd_buf_printf(&b, "%s%d", i ? "," : "", c->engram_orders[i]);
    nd_buf_printf(&b, "],\"engram_heads\":%d,\"engram_slots\":%d,\"engram_layers\":[", c->engram_heads,
                  c->engram_slots);
    for (int i = 0; i < c->num_sites; i++) nd_buf_printf(&b, "%s%d", i ? "," : "", c->engram_layers[i]);
    nd_buf_printf(&b, "],\"mhc_lanes\":%d,\"kv_window\":%d,\"kv_bits\":%d,\"act_bits\":%d,\"weight_bits\":",
                  c->mhc_lanes, c->kv_window, c->kv_bits, c->act_bits);
    nd_json_write_string(&b, c->weight_bits, strlen(c->weight_bits), 1);
    if (c->generation == 3) {
        nd_buf_printf(&b,
                      ",\"qk_head_dim\":%d,\"v_head_dim\":%d,\"out_vocab\":%d,\"sliding_window\":%d,"
                      "\"qkv_conv_taps\":%d,\"engram_seed_heads\":%d,\"embedding_dim\":%d,",
                      c->qk_head_dim, c->v_head_dim, c->out_vocab, c->sliding_window, c->qkv_conv_taps,
                      c->engram_seed_heads, c->contrastive_dim);
        static const char *const head_names[3] = {"embedding", "confidence", "router"};
        for (int h = 0; h < 3; h++)
            if (c->head_probes[h] > 0 || c->head_queries[h] > 0)
                nd_buf_printf(&b, "\"%s_probes\":%d,\"%s_queries\":%d,", head_names[h],
                              c->head_probes[h] > 0 ? c->head_probes[h] : 4, head_names[h],
                              c->head_queries[h] > 0 ? c->head_queries[h] : 4);
        nd_buf_puts(&b, "\"global_layers\":[");
        int first = 1;
        for (int l = 0; l < 64; l++)
            if (c->global_mask >> l & 1ull) nd_buf_printf(&b, "%s%d", first ? "" : ",", l), first = 0;
        nd_buf_putc(&b, ']');
    }
    nd_buf_putc(&b, '}');
    if (b.oom) {
        nd_buf_free(&b);
        return NULL;
    }
    return nd_buf_take(&b);
}

/* ---------------------------------------------------------------- window */

int nd_config_layer_is_global(const nd_config *c, int layer)
{
    if (c->generation != 3 || c->sliding_window == 0) return 1;
    return layer >= 0 && layer < 64 && (c->global_mask >> layer & 1ull) != 0;
}

int nd_config_logit_width(const nd_config *c)
{
    return c->generation == 3 && c->out_vocab > 0 ? c->out_vocab : c->vocab_size;
}

/* SPEC-needle3 5.4: local layers and sites take their fixed share of the
 * budget, the global layers split the rest. */
static int budget_window_v3(const nd_config *c)
{
    const long long B = ND_KV_BUDGET_BYTES;
    long long Kd = (long long)c->num_kv_heads * c->qk_dim, Vd = (long long)c->num_kv_heads * c->v_dim;
    long long d = c->d_model, L = c->num_layers, S = c->num_sites;
    long long per_layer = Kd + Vd + (Kd / 32 + Vd / 32) * 4, per_site = d + (d / 32) * 4;
    if (c->sliding_window > 0) {
        long long G = 0;
        for (int l = 0; l < c->num_layers; l++) G += nd_config_layer_is_global(c, l);
        long long local = c->sliding_window < c->max_seq_len ? c->sliding_window : c->max_seq_len;
        long long fixed = ((L - G) * per_layer + S * per_site) * local;
        if (G == 0) return fixed <= B ? c->max_seq_len : (int)(local > 160 ? local : 160);
        long long rest = B - fixed, w = rest < 0 ? 0 : (rest / (G * per_layer)) / 32 * 32;
        if (w > c->max_seq_len) w = c->max_seq_len;
        return (int)(w > 160 ? w : 160);
    }
    long long per_pos = L * per_layer + S * per_site;
    long long w = (B / per_pos) / 32 * 32;
    if (w < 160) w = 160;
    if (w > c->max_seq_len) w = c->max_seq_len;
    return (int)w;
}

int nd_config_budget_window(const nd_config *c)
{
    if (c->generation == 3) return budget_window_v3(c);
    long long kv = c->kv_dim, d = c->d_model;
    long long per_pos = (long long)c->num_layers * (2 * kv + 2 * (kv / 32) * 4) + (long long)c->num_sites * (d + (d / 32) * 4);
    if (per_pos <= 0) return c->max_seq_len;
    long long w = (ND_KV_BUDGET_BYTES / per_pos) / 32 * 32;
    if (w < 160) w = 160;
    if (w > c->max_seq_len) w = c->max_seq_len;
    return (int)w;
}

int nd_config_effective_window(const nd_config *c)
{
    return c->kv_window > 0 ? c->kv_window : nd_config_budget_window(c);
}

/* ---------------------------------------------------------------- presets */

int nd_config_preset(nd_config *c, const char *name, needle_error *err)
{
    nd_config_defaults(c);
    if (name && strcmp(name, "base") == 0) {
        c->num_layers = 27; /* the released geometry */
    } else if (name && strcmp(name, "tiny") == 0) {
        /* tests/golden/tiny.safetensors */
        c->d_model = 128;
        c->attn_dim = 128;
        c->num_heads = 4;
        c->num_kv_heads = 2;
        c->num_layers = 4;
        c->max_seq_len = 512;
        c->engram_slots = 1024;
        c->engram_layers[0] = 1;
        c->engram_layers[1] = 3;
        c->num_sites = 2;
    } else if (name && strcmp(name, "needle3-tiny") == 0) {
        /* the geometry of tests/golden/needle3/n3_tiny.safetensors */
        c->generation = 3;
        c->d_model = 128;
        c->num_heads = 4;
        c->num_kv_heads = 2;
        c->num_layers = 5;
        c->qk_head_dim = 16;
        c->v_head_dim = 32;
        c->max_seq_len = 256;
        c->contrastive_dim = 32;
        c->engram_slots = 512;
        c->engram_layers[0] = 1;
        c->engram_layers[1] = 2;
        c->num_sites = 2;
        c->global_mask = 1ull << 2 | 1ull << 4;
        c->sliding_window = 8;
        c->qkv_conv_taps = 3;
        c->attn_dim = c->num_heads * c->qk_head_dim;
    } else if (name && strcmp(name, "needle3") == 0) {
        /* SPEC-needle3 1.1: the reference's default TransformerConfig */
        c->generation = 3;
        c->vocab_size = 16384;
        c->d_model = 768;
        c->num_heads = 12;
        c->num_kv_heads = 2;
        c->num_layers = 20;
        c->qk_head_dim = 48;
        c->v_head_dim = 64;
        c->max_seq_len = 4096;
        c->contrastive_dim = 128;
        c->engram_slots = 18432;
        static const int sites[5] = {3, 7, 11, 15, 19};
        for (int i = 0; i < 5; i++) c->engram_layers[i] = sites[i];
        c->num_sites = 5;
        c->global_mask = 1ull << 4 | 1ull << 9 | 1ull << 14 | 1ull << 19;
        c->sliding_window = 1024;
        c->qkv_conv_taps = 3;
        c->attn_dim = c->num_heads * c->qk_head_dim;
    } else {
        return nd_errorf(err, NEEDLE_EINVAL, "unknown preset \"%s\" (base, tiny, needle3, needle3-tiny)", name ? name : "(null)");
    }
    return nd_config_derive(c, name, err);
}

int nd_config_set(nd_config *c, const char *assignment, needle_error *err)
{
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return nd_errorf(err, NEEDLE_EINVAL, "--set \"%s\": expected key=value", assignment);
    char key[64];
    size_t kn = (size_t)(eq - assignment);
    if (kn >= sizeof key) return nd_errorf(err, NEEDLE_EINVAL, "--set \"%s\": key too long", assignment);
    memcpy(key, assignment, kn);
    key[kn] = '\0';
    const char *val = eq + 1;
    int is_list = strcmp(key, "engram_orders") == 0 || strcmp(key, "engram_layers") == 0 ||
                  strcmp(key, "global_layers") == 0 || strcmp(key, "ladder_order") == 0;
    nd_json *v = NULL;
    nd_buf text;
    nd_buf_init(&text);
    if (strcmp(key, "weight_bits") == 0 && val[0] != '"') {
        /* a bits map like default=4,embedding=3 is taken literally */
        nd_buf_putc(&text, '"');
        nd_buf_puts(&text, val);
        nd_buf_putc(&text, '"');
    } else if (is_list && val[0] != '[') {
        nd_buf_printf(&text, "[%s]", val); /* allow 2,15 for [2,15] */
    } else {
        nd_buf_puts(&text, val);
    }
    int rc = text.oom ? NEEDLE_ENOMEM : nd_json_parse(text.data, text.len, key, &v, err);
    nd_buf_free(&text);
    if (rc) return nd_errorf(err, NEEDLE_EINVAL, "--set %s: value \"%s\" is not valid", key, val);
    nd_config saved = *c;
    rc = apply_member(c, key, v, "--set", err);
    /* attention width equal to the residual width is SPEC's automatic case
     * (attn_dim 0): keep it following d_model unless set explicitly */
    if (rc == 0 && strcmp(key, "d_model") == 0 && saved.attn_dim == saved.d_model) c->attn_dim = c->d_model;
    nd_json_free(v);
    if (rc == 1) return nd_errorf(err, NEEDLE_EINVAL, "--set: unknown config key \"%s\"", key);
    if (rc) {
        *c = saved; /* leave the config as it was */
        return rc;
    }
    /* Refresh derived fields, but do not judge consistency yet: overrides come
     * one at a time (num_layers=2 then engram_layers=0,1 passes through an
     * inconsistent state).  Callers run nd_config_derive after the last one. */
    (void)nd_config_derive(c, "--set", NULL);
    return 0;
}
