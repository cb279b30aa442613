/* config.h - the model configuration (SPEC section 2) and what derives from it. */
#ifndef ND_CONFIG_H
#define ND_CONFIG_H

#include "needle.h"

#define ND_MAX_ORDERS 4
#define ND_MAX_SITES 4

typedef struct nd_config {
    /* fields as in the checkpoint's config JSON */
    int vocab_size, d_model, attn_dim, num_heads, num_kv_heads, num_layers, max_seq_len;
    float rope_theta;
    int engram_orders[ND_MAX_ORDERS], num_orders;
    int engram_heads; /* as written (0 = automatic); see engram_heads_eff */
    int engram_slots;
    int engram_layers[ND_MAX_SITES], num_sites;
    int mhc_lanes, kv_window, kv_bits, act_bits, contrastive_dim, pad_token_id;
    char weight_bits[256];

    /* derived by nd_config_derive */
    int head_dim;         /* hd = A / H */
    int kv_dim;           /* KV = num_kv_heads * hd */
    int hada_n;           /* N_h: next power of two >= d */
    int engram_heads_eff; /* h_e: engram_heads, or max(1, d / (num_orders*128)) */
    int num_tables;       /* T_e = num_orders * h_e */
    int engram_sub;       /* sub = d / (num_orders * h_e) */
    int conv_dilation;    /* D = max(orders) */
} nd_config;

/* SPEC section 2 defaults (num_layers 12), derived fields filled. */
void nd_config_defaults(nd_config *c);

/* Parse the config JSON (unknown keys ignored, missing keys keep defaults),
 * then derive and validate.  `where` names the source in messages. */
int nd_config_from_json(nd_config *c, const char *json, size_t len, const char *where, needle_error *err);

/* Fill derived fields and check consistency (positive sizes, H divisible by KV
 * heads, A divisible by H, sites < L, orders in 1..8, ...). */
int nd_config_derive(nd_config *c, const char *where, needle_error *err);

/* The full config as compact JSON (all fields), heap string. */
char *nd_config_to_json(const nd_config *c);

/* SPEC section 5 budget window (kv_window == 0 case): for base geometry 704. */
int nd_config_budget_window(const nd_config *c);
/* The effective window: kv_window if non-zero, else the budget window. */
int nd_config_effective_window(const nd_config *c);

/* Presets for `needle init`: "base" (released geometry) and "tiny" (golden geometry). */
int nd_config_preset(nd_config *c, const char *name, needle_error *err);
/* Apply one "key=value" override (value JSON-ish: 4, 1e5, [2,3], "text").
 * Checks the key and value type only: call nd_config_derive after the last one. */
int nd_config_set(nd_config *c, const char *assignment, needle_error *err);

#endif
