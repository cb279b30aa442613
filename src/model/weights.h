/* weights.h - one weight structure for float and CQ-quantised models.
 *
 * Matrices are stored as the .cact file does, [out, in] row-major: row r holds
 * the weights of output r, so y[r] = dot(W[r,:], x).  Checkpoint kernels
 * ([in, out] in safetensors) are transposed on load.  Small vectors (norm
 * scales, mHC biases, taps) are always float32.
 */
#ifndef ND_WEIGHTS_H
#define ND_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/file.h"
#include "core/matrix.h"
#include "model/config.h"

/* The parameter fields of each struct are generated from model/params.def:
 * MATRIX -> nd_matrix, VECTOR -> const float * (float32, in the engine's
 * layout), SCALAR -> float, each under its table name (e.g. q_proj [A, d],
 * norm_in [d], b_res [n*n] with b_res[i*n+j], phi_res [n*n, n*d] row i*n+j). */
#define ND_WEIGHT_FIELD_MATRIX(f) nd_matrix f;
#define ND_WEIGHT_FIELD_VECTOR(f) const float *f;
#define ND_WEIGHT_FIELD_SCALAR(f) float f;
#define ND_FIELD_IF_GLOBAL_GLOBAL(KIND, f) ND_WEIGHT_FIELD_##KIND(f)
#define ND_FIELD_IF_GLOBAL_LAYER(KIND, f)
#define ND_FIELD_IF_GLOBAL_SITE(KIND, f)
#define ND_FIELD_IF_GLOBAL_HEAD(KIND, f)
#define ND_FIELD_IF_LAYER_GLOBAL(KIND, f)
#define ND_FIELD_IF_LAYER_LAYER(KIND, f) ND_WEIGHT_FIELD_##KIND(f)
#define ND_FIELD_IF_LAYER_SITE(KIND, f)
#define ND_FIELD_IF_LAYER_HEAD(KIND, f)
#define ND_FIELD_IF_SITE_GLOBAL(KIND, f)
#define ND_FIELD_IF_SITE_LAYER(KIND, f)
#define ND_FIELD_IF_SITE_SITE(KIND, f) ND_WEIGHT_FIELD_##KIND(f)
#define ND_FIELD_IF_SITE_HEAD(KIND, f)
#define ND_FIELD_IF_HEAD_GLOBAL(KIND, f)
#define ND_FIELD_IF_HEAD_LAYER(KIND, f)
#define ND_FIELD_IF_HEAD_SITE(KIND, f)
#define ND_FIELD_IF_HEAD_HEAD(KIND, f) ND_WEIGHT_FIELD_##KIND(f)

typedef struct nd_layer_weights {
#define ND_PARAM(ROLE, field, SCOPE, KIND, ...) ND_FIELD_IF_LAYER_##SCOPE(KIND, field)
#include "model/params.def"
#undef ND_PARAM
} nd_layer_weights;

typedef struct nd_site_weights {
    int layer; /* the layer the site sits at */
#define ND_PARAM(ROLE, field, SCOPE, KIND, ...) ND_FIELD_IF_SITE_##SCOPE(KIND, field)
#include "model/params.def"
#undef ND_PARAM
} nd_site_weights;

typedef struct nd_head_weights {
    int present;
    int num_probes, out_dim; /* v3: num_probes is k, the probes per row of cells */
    int num_queries;         /* v3: q */
    /* probes [P, d], proj [out, P*d], bias [out] (zeros for the contrastive
     * head), log_temp (contrastive only; 0 when unknown, e.g. from .cact) */
#define ND_PARAM(ROLE, field, SCOPE, KIND, ...) ND_FIELD_IF_HEAD_##SCOPE(KIND, field)
#include "model/params.def"
#undef ND_PARAM
} nd_head_weights;

typedef struct nd_weights {
    nd_config cfg;
    /* embedding [V, d], final_norm [d], ... (params.def, scope GLOBAL) */
#define ND_PARAM(ROLE, field, SCOPE, KIND, ...) ND_FIELD_IF_GLOBAL_##SCOPE(KIND, field)
#include "model/params.def"
#undef ND_PARAM
    nd_layer_weights *layers; /* num_layers */
    nd_site_weights sites[ND_MAX_SITES]; /* num_sites, in cfg.engram_layers order */
    nd_head_weights contrastive, confidence, router; /* v3: contrastive is the embedding head */
    float codebooks[28]; /* cb2[4] | cb3[8] | cb4[16] as in the .cact header */
    float ternary_codebook[4];

    /* .cact only: the tokenizer blob (NULL/0 otherwise) and the header's window */
    const uint8_t *tokenizer_blob;
    size_t tokenizer_blob_size;
    int file_kv_window;

    /* Ownership (nd_weights_free undoes exactly this): every pointer above points
     * into `map` (the mapped file) or into `owned` (ONE malloc'd block holding all
     * converted floats: FP16 vectors widened, checkpoint kernels transposed);
     * `layers` is its own malloc'd array. */
    nd_mapping map;
    void *owned;
    /* .cact loaded for inference (nd_weights_load_lazy_heads): the heads' FP16/FP32
     * tensors are widened on first use (nd_weights_heads_ready), into their own
     * block, which the pointers above already point into; NULL when loaded eagerly */
    struct nd_lazy_heads *lazy_heads;
} nd_weights;

/* Load from a full-precision checkpoint (.safetensors; F32/F16/BF16 tensors). */
int nd_weights_load_safetensors(const char *path, nd_weights *w, needle_error *err);
/* Load from a .cact deploy file: quantised matrices stay quantised, in the mapping. */
int nd_weights_load_cact(const char *path, nd_weights *w, needle_error *err);
/* Either, chosen by the file's first bytes. */
int nd_weights_load(const char *path, nd_weights *w, needle_error *err);
/* The same, except that a .cact's head tensors (FP16/FP32: the contrastive
 * projection alone is 1 MB of floats) are widened only when first needed:
 * whatever reads a head's values calls nd_weights_heads_ready first.  Checked
 * for NaN/Inf at load all the same.  Generation never pays for the heads. */
int nd_weights_load_lazy_heads(const char *path, nd_weights *w, needle_error *err);
/* Widen the heads now if they are still pending (thread-safe; a no-op otherwise). */
void nd_weights_heads_ready(const nd_weights *w);
void nd_weights_free(nd_weights *w);

/* Dequantise rows [r0, r0+n) of a matrix into out (n*cols floats).  Works for
 * both kinds (F32 copies). */
void nd_matrix_dequant_rows(const nd_matrix *m, int r0, int n, float *out);

#endif
