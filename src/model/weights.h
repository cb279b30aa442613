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

typedef struct nd_layer_weights {
    const float *norm_in, *q_norm, *k_norm, *post_attn_norm, *pre_hada_norm; /* d, hd, hd, d, d */
    const float *d1, *d2, *d3;                                               /* N_h each */
    float attn_gate;
    nd_matrix q_proj, k_proj, v_proj, gate_proj, out_proj; /* [A,d] [KV,d] [KV,d] [A,d] [d,A] */
    float a_pre, a_post, a_res;
    const float *b_pre, *b_post, *b_res;  /* n, n, n*n (b_res[i*n+j]) */
    nd_matrix phi_pre, phi_post, phi_res; /* [n, n*d], [n, n*d], [n*n, n*d] (row i*n+j) */
} nd_layer_weights;

typedef struct nd_site_weights {
    int layer;
    nd_matrix tables;               /* [T_e*slots, sub]: row k*slots + idx */
    nd_matrix key_proj, value_proj; /* [d, T_e*sub] */
    const float *taps;              /* [4, d] */
} nd_site_weights;

typedef struct nd_head_weights {
    int present;
    int num_probes, out_dim;
    const float *probes; /* [P, d] */
    nd_matrix proj;      /* [out, P*d] */
    const float *bias;   /* out (zeros for the contrastive head) */
    float log_temp;      /* contrastive only (0 when unknown, e.g. from .cact) */
} nd_head_weights;

typedef struct nd_weights {
    nd_config cfg;
    nd_matrix embedding; /* [V, d] */
    nd_layer_weights *layers; /* num_layers */
    nd_site_weights sites[ND_MAX_SITES]; /* num_sites, in cfg.engram_layers order */
    const float *final_norm; /* d */
    nd_head_weights contrastive, confidence;
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
} nd_weights;

/* Load from a full-precision checkpoint (.safetensors; F32/F16/BF16 tensors). */
int nd_weights_load_safetensors(const char *path, nd_weights *w, needle_error *err);
/* Load from a .cact deploy file: quantised matrices stay quantised, in the mapping. */
int nd_weights_load_cact(const char *path, nd_weights *w, needle_error *err);
/* Either, chosen by the file's first bytes. */
int nd_weights_load(const char *path, nd_weights *w, needle_error *err);
void nd_weights_free(nd_weights *w);

/* Dequantise rows [r0, r0+n) of a matrix into out (n*cols floats).  Works for
 * both kinds (F32 copies). */
void nd_matrix_dequant_rows(const nd_matrix *m, int r0, int n, float *out);

#endif
