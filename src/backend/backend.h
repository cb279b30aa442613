/* backend.h - the compute backend: a table of the operations the forward pass
 * needs, and a registry to pick one.
 *
 * The forward pass (src/model/forward.c) calls only these ops, so a new
 * backend (CUDA, ...) is a new table.  The CPU backend is the reference: every
 * other backend is tested against it op by op.  All pointers are host float
 * arrays; matrices are nd_matrix ([out, in] row-major, F32 or CQ-quantised).
 *
 * Ops that parallelise take the pool; they split work by fixed-size slices so
 * that results do not depend on the thread count.  Ops that need scratch take
 * a `work` array whose size the matching *_work_floats function gives. */
#ifndef ND_BACKEND_H
#define ND_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/matrix.h"
#include "core/threadpool.h"
#include "needle.h"

/* One attention call: T queries of one sequence at absolute positions
 * pos0..pos0+T-1 over the keys in a cache (earlier positions) plus the chunk's
 * own keys.  Key position k is visible from query q iff k <= q and
 * (q - k < window or k < sinks). */
/* int8 KV cache: values per scale (the budget of SPEC section 5 assumes 32). */
#define ND_KV_GROUP 32

typedef struct nd_attn_args {
    int T, pos0;
    int num_heads, num_kv_heads, head_dim;
    int window, sinks;
    const float *q;       /* [T, num_heads*head_dim], already normed and rotated */
    const float *k_chunk; /* [T, num_kv_heads*head_dim] */
    const float *v_chunk;
    /* the cache, kv_bits 32: floats [cache_slots, num_kv_heads*head_dim];
     * kv_bits 8: int8 codes of the same shape with one float scale per
     * ND_KV_GROUP values (k_scale/v_scale [cache_slots, KV/ND_KV_GROUP]) */
    int kv_bits;
    const float *k_cache;
    const float *v_cache;
    const int8_t *k_cache8, *v_cache8;
    const float *k_scale, *v_scale;
    const int *cache_pos; /* [cache_slots]: absolute position held by each slot, -1 = empty */
    int cache_slots;
    float *out; /* [T, num_heads*head_dim] */
} nd_attn_args;

typedef struct nd_backend {
    const char *name;
    const char *description;

    /* y[t, r] = sum_c W[r, c] * x[t, c] for t < T, r < W.rows; x rows ldx apart,
     * y rows ldy apart.  CQ matrices are used without dequantising them. */
    void (*matmul)(nd_threadpool *pool, const nd_matrix *w, const float *x, int T, int ldx, float *y, int ldy,
                   float *work);
    size_t (*matmul_work_floats)(const nd_matrix *w, int T, int threads);
    /* The same for n matrices with the same number of columns reading the
     * same x (q/k/v/gate; the three mHC maps): the input is prepared once
     * and all rows run as one parallel job.  work: the largest single size. */
    void (*matmul_multi)(nd_threadpool *pool, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                         float *const *y, const int *ldy, float *work);

    /* out[i, :] = row rows[i] of W, dequantised (cols floats each). */
    void (*gather_rows)(const nd_matrix *w, const int *rows, int n, float *out);

    /* ZCRMS: out = (1 + scale) * x / sqrt(mean(x^2) + 1e-6); scale NULL gives
     * rmsunit.  out may equal x. */
    void (*rmsnorm)(const float *x, int n, const float *scale, float *out);

    /* Rotate-half RoPE on `heads` vectors of head_dim in place; cs holds
     * cos[head_dim/2] then sin[head_dim/2] for the position. */
    void (*rope)(float *x, int heads, int head_dim, const float *cs);

    /* Orthonormal Walsh-Hadamard transform (Sylvester order) in place, n a
     * power of two. */
    void (*hadamard)(float *x, int n);

    void (*attention)(nd_threadpool *pool, const nd_attn_args *a, float *work);
    size_t (*attention_work_floats)(const nd_attn_args *a, int threads);

    /* In place: m (n x n, index i*n+j) holds log-weights; after `iters` rounds
     * of row then column log-normalisation it holds exp() of the result. */
    void (*sinkhorn)(float *m, int n, int iters);

    /* int8 KV cache entry: q = round(x / scale), scale = max|x| / 127 per
     * ND_KV_GROUP values; n a multiple of ND_KV_GROUP. */
    void (*quantize_kv)(const float *x, int n, int8_t *q, float *scale);
} nd_backend;

/* The CPU backend (always built in). */
const nd_backend *nd_backend_cpu(void);

/* Every backend built into this library; returns how many (<= max). */
int nd_backend_list(const nd_backend **out, int max);

/* Pick a backend: `name` if given, else NEEDLE_BACKEND from the environment,
 * else the best available.  *why (may be NULL) gets a short static reason.
 * Unknown names are NEEDLE_EBACKEND. */
int nd_backend_select(const char *name, const nd_backend **out, const char **why, needle_error *err);

#endif
