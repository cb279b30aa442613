/* params.h - the model's parameters as data: one descriptor per line of
 * model/params.def, and the helpers every consumer uses to walk them
 * (checkpoint names and shapes, engine shapes, .cact grouping, init).
 *
 * Adding a parameter is one line in params.def (docs/model-definition.md).
 */
#ifndef ND_PARAMS_H
#define ND_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"

/* One role per parameter, used by the engine, the trainer, the .cact layout
 * and LoRA merging alike. */
typedef enum {
#define ND_PARAM(ROLE, field, SCOPE, KIND, ...) ND_P_##ROLE,
#include "model/params.def"
#undef ND_PARAM
    ND_P_COUNT
} nd_param_role;

typedef enum { ND_SCOPE_GLOBAL, ND_SCOPE_LAYER, ND_SCOPE_SITE, ND_SCOPE_HEAD } nd_param_scope;
typedef enum { ND_KIND_MATRIX, ND_KIND_VECTOR, ND_KIND_SCALAR } nd_param_kind;

/* Symbolic dimensions: a shape is a list of these, valued for a config
 * (and, for head dimensions, a head) by nd_dim_value. */
typedef enum {
    ND_DIM_NONE = 0,
    ND_DIM_ONE,       /* 1 */
    ND_DIM_V,         /* vocab_size */
    ND_DIM_D,         /* d_model */
    /* attention widths: Needle 3 gives q/k and v their own head widths (qk,
     * vd); in Needle 2 both are head_dim, so Q = O = A and KD = VD = KV */
    ND_DIM_Q,         /* queries: num_heads * qk */
    ND_DIM_KD,        /* keys: num_kv_heads * qk */
    ND_DIM_VD,        /* values: num_kv_heads * vd */
    ND_DIM_O,         /* attention output (gate width): num_heads * vd */
    ND_DIM_QK,        /* qk (the q/k norm width) */
    ND_DIM_NH,        /* hada_n */
    ND_DIM_N,         /* mhc_lanes */
    ND_DIM_NN,        /* mhc_lanes^2 */
    ND_DIM_ND,        /* mhc_lanes * d_model */
    ND_DIM_TE,        /* num_tables */
    ND_DIM_SLOTS,     /* engram_slots */
    ND_DIM_SUB,       /* engram_sub */
    ND_DIM_TE_SLOTS,  /* num_tables * engram_slots */
    ND_DIM_TE_SUB,    /* num_tables * engram_sub */
    ND_DIM_CONV_TAPS, /* the engram convolution's 4 taps */
    ND_DIM_PROBES,    /* a head's probe count P */
    ND_DIM_PD,        /* P * d_model */
    ND_DIM_HEAD_OUT,  /* a head's output width */
    /* Needle 3 */
    ND_DIM_TAPS,      /* qkv_conv_taps */
    ND_DIM_HA,        /* Monarch factor a */
    ND_DIM_HB,        /* Monarch factor b */
    ND_DIM_RANK,      /* the MLP gate's rank (8) */
    ND_DIM_L1,        /* num_layers + 1 (the head rows) */
    ND_DIM_HK,        /* a v3 head's probes per row k */
    ND_DIM_HQ,        /* a v3 head's queries q */
    ND_DIM_L1K,       /* (L+1) * k */
    ND_DIM_HQD,       /* q * d_model */
    ND_DIM_THREE      /* 3 (the router's calibration) */
} nd_dim;

#define ND_MLP_GATE_RANK 8

typedef enum {
    ND_INIT_CONST = 0,       /* every element = init_value */
    ND_INIT_NORMAL,          /* N(0, init_value) */
    ND_INIT_NORMAL_RESIDUAL, /* N(0, init_value / sqrt(2 L)): residual-writing projections */
    ND_INIT_EYE,             /* init_value * I on the trailing (n, n) axes */
    ND_INIT_FIRST_ROW,       /* first row init_value, the rest 0 (taps start as identity) */
    ND_INIT_WALSH,           /* the normalised Walsh matrix H_n / sqrt(n) on the trailing (n, n) axes */
    ND_INIT_PERMUTATION,     /* numpy RandomState(init_value).permutation(n), as floats */
    ND_INIT_VALUES           /* the listed init_values, in order (the router's calibration row) */
} nd_init_kind;

/* LoRA targets (SPEC 9), numbered from 1 so that 0 means "not a target". */
enum { ND_LORA_Q = 1, ND_LORA_K, ND_LORA_V, ND_LORA_GATE, ND_LORA_OUT };
#define ND_LORA_TARGETS 5

/* Model generations (the .gens column). */
enum { ND_GEN_2 = 1 << 0, ND_GEN_3 = 1 << 1 };

/* The probe heads: index in nd_param_heads[], code in the .cact manifest
 * (code = index + 1, the order the reference writes them).  Needle 3 calls
 * code 1 the embedding head and adds the router (code 3). */
enum { ND_HEAD_INDEX_CONTRASTIVE = 0, ND_HEAD_INDEX_CONFIDENCE = 1, ND_HEAD_INDEX_ROUTER = 2, ND_NUM_HEAD_KINDS = 3 };
enum { ND_HEAD_CONTRASTIVE = 1, ND_HEAD_CONFIDENCE = 2, ND_HEAD_ROUTER = 3 };
/* Head kinds a generation has: v2 the first two, v3 all three. */
int nd_head_kinds(const nd_config *c);

#define ND_PARAM_CK_DIMS 3

typedef struct nd_param_desc {
    nd_param_role role;
    const char *field_name; /* the struct field, for messages */
    nd_param_scope scope;
    nd_param_kind kind;
    size_t offset; /* of the field in the scope's struct */
    const char *ckpt;
    nd_dim ck[ND_PARAM_CK_DIMS]; /* checkpoint shape, without the leading L of LAYER scope */
    nd_dim rows, cols;           /* MATRIX */
    int transpose;               /* checkpoint kernel [in, out] = [cols, rows] */
    const char *cact_name;
    int cq, stacked, no_cact;
    nd_init_kind init;
    double init_value;
    int lora;
    unsigned heads;
    int gather;
    unsigned gens;
    unsigned cact_heads; /* HEAD only: heads whose .cact group has it (mask; 0 = every head) */
    int fp32;            /* stored as FP32 in .cact (the MLP permutations) */
    int ckpt_optional;   /* a checkpoint may omit it (the reference's does): read when present, else its
                          * initialiser; `needle init` does not write it */
    int init3;           /* Needle 3 initialises it to init_value3 instead of init_value */
    double init_value3;
    double init_values[4]; /* ND_INIT_VALUES */
} nd_param_desc;

typedef struct nd_head_kind {
    int code;         /* ND_HEAD_* (the .cact manifest value) */
    const char *name; /* "%s" in the table's names */
    size_t offset;    /* of its nd_head_weights in nd_weights */
    int num_probes;   /* v2 probe count */
    const char *name3; /* its name in Needle 3 */
} nd_head_kind;

extern const nd_param_desc nd_params[ND_P_COUNT];
extern const nd_head_kind nd_param_heads[ND_NUM_HEAD_KINDS];

/* The generation of a config (2 until a Needle 3 config exists). */
int nd_config_generation(const nd_config *c);
/* Does the config's generation have parameter p? */
int nd_param_in_config(const nd_param_desc *p, const nd_config *c);
/* Does head `head` (index) carry parameter p in a checkpoint? */
int nd_param_in_head_ckpt(const nd_param_desc *p, int head);

/* The value of a symbolic dimension (head: index, or -1 outside heads). */
int64_t nd_dim_value(const nd_config *c, nd_dim dim, int head);
/* The same with a head's actual probe count and output width (from a file);
 * for v3 heads num_probes is k (probes per row), num_queries q. */
int64_t nd_dim_value_sized(const nd_config *c, nd_dim dim, int num_probes, int out_dim);
int64_t nd_dim_value_head(const nd_config *c, nd_dim dim, int num_probes, int num_queries, int out_dim);
/* Is p in head kind `head`'s .cact group? */
int nd_param_in_head_cact(const nd_param_desc *p, int head);
/* The head's output width under c. */
int nd_head_out_dim(const nd_config *c, int head);

/* Checkpoint name for one instance (site index or head index; ignored for
 * GLOBAL / LAYER) in a Needle 2 checkpoint: the table's `.`-joined path. */
void nd_param_ckpt_name(const nd_param_desc *p, int instance, char *out, size_t n);
/* The name in a checkpoint of config c's generation: Needle 3 checkpoints
 * join the same path with `/` and call head 1 "embedding"
 * (embedding_head/proj/kernel; SPEC-needle3 1.1). */
void nd_param_ckpt_name_cfg(const nd_param_desc *p, const nd_config *c, int instance, char *out, size_t n);
/* Is p one of the tensors a checkpoint of c's generation holds (the
 * generation has it and it is not optional there)? */
int nd_param_in_ckpt(const nd_param_desc *p, const nd_config *c);
/* Checkpoint shape (LAYER: leading L axis included); returns ndim.  A
 * Needle 3 head scalar (log_temp) is () as the reference writes it. */
int nd_param_ckpt_shape(const nd_param_desc *p, const nd_config *c, int head, int64_t shape[4]);
/* Elements of one instance in the engine: rows*cols, the vector length, or 1. */
int64_t nd_param_elems(const nd_param_desc *p, const nd_config *c, int head);

/* Where the weight of one instance lives: `base` is the nd_weights,
 * nd_layer_weights, nd_site_weights or nd_head_weights of the scope. */
static inline void *nd_param_field(const nd_param_desc *p, void *base) { return (char *)base + p->offset; }
static inline const void *nd_param_field_c(const nd_param_desc *p, const void *base)
{
    return (const char *)base + p->offset;
}

struct nd_weights;
/* The struct that holds instance `index` of p in w: w itself (GLOBAL),
 * w->layers[index], w->sites[index], or the nd_head_weights of head kind
 * `index` (nd_param_heads order). */
void *nd_param_base(struct nd_weights *w, const nd_param_desc *p, int index);
const void *nd_param_base_c(const struct nd_weights *w, const nd_param_desc *p, int index);
/* How many instances of p's scope w has (1 for GLOBAL; heads: kinds). */
int nd_param_instances(const struct nd_weights *w, const nd_param_desc *p);

/* Reference initialisation of one checkpoint-layout tensor (SPEC 3): NORMAL
 * kinds draw from the stream (seed, FNV-1a of the checkpoint name), so the
 * result does not depend on tensor order.  num_layers sizes the residual std. */
/* numpy's legacy RandomState(seed).permutation(n), as floats (the Needle 3
 * exporter's MLP permutations use seeds 11 and 13). */
void nd_legacy_permutation(uint32_t seed, float *out, size_t n);

void nd_param_init_fill(const nd_param_desc *p, const char *name, float *data, int ndim, const int64_t *shape,
                        int num_layers, uint64_t seed);
/* The same for config c's generation (Needle 3's own constants: d3 1,
 * log_temp log 10). */
void nd_param_init_fill_cfg(const nd_param_desc *p, const nd_config *c, const char *name, float *data, int ndim,
                            const int64_t *shape, uint64_t seed);

#endif
