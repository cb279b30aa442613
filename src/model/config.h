/* config.h - the model configuration (SPEC section 2) and what derives from it. */
#ifndef ND_CONFIG_H
#define ND_CONFIG_H

#include "needle.h"

#define ND_MAX_ORDERS 4
#define ND_MAX_SITES 16 /* Needle 3 files hold up to 16 engram sites; Needle 2 headers 4 */
#define ND_MAX_SITES_V2 4
#define ND_MAX_LAYERS_V3 64 /* the v3 header's 64-bit global-layer mask */

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

    /* Needle 3 (SPEC-needle3.md section 5.1); a Needle 2 config leaves them 0 */
    int generation;        /* 2 or 3 (0 is read as 2) */
    int qk_head_dim;       /* v3: q/k head width (v2: head_dim) */
    int v_head_dim;        /* v3: v head width (v2: head_dim) */
    int out_vocab;         /* v3: logits cover E[0:out_vocab]; 0 = vocab_size */
    int sliding_window;    /* v3: local layers see q - k < sliding_window; 0 = every layer global */
    unsigned long long global_mask; /* v3: bit l set = layer l is global */
    int qkv_conv_taps;     /* v3: causal depthwise conv taps on q, k, v (0 = none) */
    int engram_seed_heads; /* v3: engram seed stride (0 = engram_heads_eff) */
    /* v3: each probe head's probes per row k and queries q, in head order
     * (embedding, confidence, router); 0 = the reference's default 4 */
    int head_probes[3], head_queries[3];
    /* v3: the layer order ladder rungs take (a sliced rung's checkpoint carries
     * its parent's); none (0) = the bisection order of num_layers */
    int ladder_order[ND_MAX_LAYERS_V3], num_ladder_order;

    /* derived by nd_config_derive */
    int head_dim;         /* hd = A / H */
    int kv_dim;           /* KV = num_kv_heads * hd */
    int hada_n;           /* N_h: next power of two >= d */
    int engram_heads_eff; /* h_e: engram_heads, or max(1, d / (num_orders*128)) */
    int num_tables;       /* T_e = num_orders * h_e */
    int engram_sub;       /* sub = d / (num_orders * h_e) */
    int conv_dilation;    /* D = max(orders) */
    int qk_dim, v_dim;    /* q/k and v head widths: head_dim in v2, qk_head_dim / v_head_dim in v3 */
    int hada_a, hada_b;   /* v3 Monarch factors: a = 2^floor(bitlen(N_h-1)/2), b = N_h / a */
} nd_config;

/* Layer l is global (full causal attention) in a v3 config iff sliding_window
 * is 0 or bit l of global_mask is set; in a v2 config every layer is. */
int nd_config_layer_is_global(const nd_config *c, int layer);
/* The logits' meaningful width: out_vocab when set, else vocab_size (logit
 * rows are always vocab_size wide; columns past out_vocab hold -inf). */
int nd_config_logit_width(const nd_config *c);

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

/* The KV memory the reference sizes its window to (SPEC section 5: 12,058,624
 * bytes, 11.5 MiB); `needle bench` holds peak RSS to file + this + 1 MiB. */
#define ND_KV_BUDGET_BYTES 12058624LL

/* SPEC section 5 budget window (kv_window == 0 case): for base geometry 704;
 * a v3 config gets SPEC-needle3 5.4's (3456 for the v3 defaults). */
int nd_config_budget_window(const nd_config *c);
/* The effective window: kv_window if non-zero, else the budget window. */
int nd_config_effective_window(const nd_config *c);

/* Presets for `needle init`: "base" (released geometry) and "tiny" (golden geometry). */
int nd_config_preset(nd_config *c, const char *name, needle_error *err);
/* Apply one "key=value" override (value JSON-ish: 4, 1e5, [2,3], "text").
 * Checks the key and value type only: call nd_config_derive after the last one. */
int nd_config_set(nd_config *c, const char *assignment, needle_error *err);

#endif
