/* model.h - the Needle forward pass (SPEC section 4) over a KV-cached session.
 *
 * nd_model: the weights, the backend and the thread pool; read-only once
 * created, shared by any number of sessions.
 * nd_state: one session: the KV cache of every layer (a ring of window +
 * sinks slots, so memory is bounded however long the session runs), the
 * engram history, and all scratch activations, allocated once at creation.
 * Evaluating tokens allocates nothing.
 *
 * A session is fed chunks of tokens at consecutive absolute positions:
 * prefill is one call with T tokens, decoding is calls with one token; both
 * run the same code.  Key position k is visible from query q iff k <= q and
 * (q - k < window or k < sinks). */
#ifndef ND_MODEL_H
#define ND_MODEL_H

#include <stdint.h>

#include "backend/backend.h"
#include "core/threadpool.h"
#include "model/weights.h"
#include "needle.h"

typedef struct nd_model_options {
    int threads;         /* <= 0: NEEDLE_THREADS or every core */
    const char *backend; /* NULL: NEEDLE_BACKEND or the default */
    int dequantize;      /* 1: CQ matrices are dequantised to F32 at load (the float path) */
    int layers;          /* Needle 3: run ladder rung `layers` of an unsliced file (0 = every layer) */
    int acts;            /* NEEDLE_ACTS_A8 (0, default) or NEEDLE_ACTS_FLOAT: see nd_model.acts */
} nd_model_options;

typedef struct nd_model {
    nd_weights weights;   /* what the forward pass reads (a copy of the loaded struct,
                             with F32 matrices swapped in when dequantised) */
    nd_weights loaded;    /* owned by the model when opened from a path */
    int owns_loaded;
    nd_layer_weights *layers_copy; /* the copy's own layer array */
    float *dequant_block;          /* the F32 matrices of the float path */
    float *ladder_block;           /* a ladder rung's head rows (model/ladder.c) */
    nd_backend *be;       /* the backend instance every op of the forward pass goes through */
    const char *backend_why;
    nd_threadpool *pool;
    int default_window; /* the .cact header's kv_window, else the config's effective window */
    int acts;           /* NEEDLE_ACTS_A8: the A8 points of deploy_numerics.md (Needle 2: engram.e,
                           attn.in, attn.out, logits.in through the backend's matmul_a8; Needle 3
                           adds mhc.nx there and q per head through act_quant, and its default
                           int8 KV cache quantises k and v per head and position);
                           NEEDLE_ACTS_FLOAT: every activation stays float32 */
} nd_model;

/* Borrow loaded weights (they must outlive the model). */
int nd_model_create(const nd_weights *w, const nd_model_options *opt, nd_model **out, needle_error *err);
/* Load a .cact or .safetensors file and own it. */
int nd_model_open(const char *path, const nd_model_options *opt, nd_model **out, needle_error *err);
void nd_model_free(nd_model *m);

/* The ladder (model/ladder.c): the bisection order of L layers into order[L]
 * (returns L, or -1 out of memory), and restricting a weight view whose
 * `layers` array the caller owns to rung N (head rows copied into *owned;
 * be may be NULL: matrices are then dequantised by nd_matrix_dequant_rows). */
int nd_ladder_order(int L, int *order);
int nd_weights_ladder(const nd_backend *be, nd_weights *w, int N, float **owned, needle_error *err);

typedef struct nd_state nd_state;

typedef struct nd_state_options {
    int window;    /* key window; 0 = the model's default */
    int sinks;     /* number of leading positions always visible; 0 = none */
    int max_chunk; /* tokens per internal step (scratch size); 0 = 64 */
    int kv_bits;   /* KV cache storage: 32 = float (exact, what the float golden
                      logits need); 8 = int8 (4x less memory): Needle 2 with a
                      scale per 32 values, Needle 3 the reference's KV_BITS 8
                      (k and v fake-quantised per position and KV head, one
                      scale each); 0 = the model's default: 8 under A8
                      activations (Needle 2: when head_dim is a multiple of
                      32), else 32 */
} nd_state_options;

int nd_state_create(const nd_model *m, const nd_state_options *opt, nd_state **out, needle_error *err);
void nd_state_free(nd_state *s);
/* Forget every token (the cache is emptied; nothing is freed). */
void nd_state_reset(nd_state *s);
/* Change the sink count; only allowed while the session is empty, and at
 * most the count given at creation (which reserves the cache slots). */
int nd_state_set_sinks(nd_state *s, int sinks, needle_error *err);
/* The next absolute position (= tokens evaluated so far). */
int nd_state_position(const nd_state *s);
int nd_state_window(const nd_state *s);
int nd_state_sinks(const nd_state *s);
/* The KV cache storage the session uses: 32 (float) or 8 (int8). */
int nd_state_kv_bits(const nd_state *s);
/* Bytes of memory held by the session (cache + scratch). */
size_t nd_state_bytes(const nd_state *s);

/* Evaluate T tokens at positions position()..position()+T-1.
 * want: NULL = logits for the last token only; else want[t] != 0 selects
 *   token t.  logits receives one row of vocab_size floats per selected token,
 *   in order (may be NULL when nothing is wanted).
 * cells: NULL, or [T, num_layers+1, d_model] floats: x0 then the lane mean
 *   after each layer (what the heads read). */
int nd_state_eval(nd_state *s, const int *tokens, int T, const uint8_t *want, float *logits, float *cells,
                  needle_error *err);

#endif
