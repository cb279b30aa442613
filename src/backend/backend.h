/* backend.h - the compute seam: the table of every operation the forward
 * pass and the heads run, a backend instance, and the registry.
 *
 * src/model/forward.c and src/model/heads.c compute only through these ops,
 * so a new backend (CUDA, ...) is a new table; nothing outside src/backend/
 * includes a backend's own folder.  The CPU backend implements every op;
 * tests/test_backend_ops.c holds every op of every usable backend against a
 * plain implementation written in the test.
 *
 * Memory: the ops take pointers the backend gave out.  nd_backend_alloc
 * returns memory the backend owns (the session's KV cache and activations
 * come from it), so a device backend may keep them resident; on the CPU it
 * is host memory.  Weights are nd_matrix values (core/matrix.h) a backend
 * may mirror once, keyed by address.
 *
 * A backend need not implement every op: supports_op says which it does,
 * and an instance's table takes the CPU's op for the rest (the "host" table,
 * which a device backend may also call for work too small for a launch).
 * Ops that parallelise use the instance's thread pool and split work by
 * fixed-size slices, so results do not depend on the thread count.  Ops that
 * need scratch take a `work` array whose size the *_work_floats op gives. */
#ifndef ND_BACKEND_H
#define ND_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/matrix.h"
#include "core/threadpool.h"
#include "needle.h"

/* int8 KV cache: values per scale (the budget of SPEC section 5 assumes 32). */
#define ND_KV_GROUP 32

/* One attention call: T queries of one sequence at absolute positions
 * pos0..pos0+T-1 over the keys in a cache (earlier positions) plus the chunk's
 * own keys.  Key position k is visible from query q iff k <= q and
 * (q - k < window or k < sinks). */
typedef struct nd_attn_args {
    int T, pos0;
    int num_heads, num_kv_heads, head_dim;
    int v_head_dim; /* value / output head width (Needle 3); 0 = head_dim.  Keys and
                     * queries are head_dim wide, values and outputs v_head_dim */
    int window, sinks;
    const float *q;       /* [T, num_heads*head_dim], already normed and rotated */
    const float *k_chunk; /* [T, num_kv_heads*head_dim] */
    const float *v_chunk;
    /* the cache, kv_bits 32: floats [cache_slots, num_kv_heads*head_dim];
     * kv_bits 8: int8 codes of the same shape with one float scale per
     * ND_KV_GROUP values (k_scale/v_scale [cache_slots, KV/ND_KV_GROUP]), or
     * with kv_head_scale one scale per head vector (Needle 3's rule,
     * deploy_numerics.md section 6: k_scale/v_scale [cache_slots, num_kv_heads]) */
    int kv_bits;
    int kv_head_scale;
    const float *k_cache;
    const float *v_cache;
    const int8_t *k_cache8, *v_cache8;
    const float *k_scale, *v_scale;
    const int *cache_pos; /* [cache_slots]: absolute position held by each slot, -1 = empty */
    int cache_slots;
    float *out; /* [T, num_heads*v_head_dim] */
} nd_attn_args;

/* The Hadamard MLP of one layer (SPEC section 4), for hada_mlp. */
typedef struct nd_hada_mlp_args {
    int T, d, hada_n;                /* tokens, model width, Hadamard width (power of two >= d) */
    const float *norm;               /* the MLP norm scale [d] */
    const float *d1, *d2, *d3;       /* [hada_n] */
    float *b;                        /* [T, d]: b += d3 * H(silu(d2 * H(d1 * pad(ZCRMS(b; norm))))) */
    float *z;                        /* scratch [hada_n] */
} nd_hada_mlp_args;

/* The Needle 3 Monarch MLP of one layer (SPEC-needle3 5.3 item 4), for
 * monarch_mlp.  x = ZCRMS(b; norm) padded to N = hada_n = a*b;
 * c = 1 + softmax(x cond_v) cond_u;
 * z = ((d1 x) K1)[p1]; z = (silu(d2 c z + b2) K2)[p2]; z = (d3 z) K3;
 * b += (d4 z)[0:d], with K_s = W_sa (x) W_sb applied as the two small
 * products W_sa^T Z W_sb of z viewed as an a x b matrix, and y = z[p]
 * meaning y_i = z_{p_i}. */
typedef struct nd_monarch_mlp_args {
    int T, d, hada_n, a, b_dim, rank;
    const float *norm;                            /* [d] */
    const float *d1, *d2, *b2, *d3, *d4;          /* [hada_n] */
    const float *w1a, *w1b, *w2a, *w2b, *w3a, *w3b; /* [a, a] and [b, b] row-major */
    const float *cond_v;                          /* [d, rank] */
    const float *cond_u;                          /* [rank, hada_n] */
    const float *p1, *p2;                         /* [hada_n] permutations (exact integers) */
    float *b;                                     /* [T, d] residual, updated */
    float *z;                                     /* scratch [3 * hada_n + rank] */
} nd_monarch_mlp_args;

/* A Needle 3 probe head's pooling (SPEC-needle3 5.3 item 7) over cells
 * C[t][r] (T tokens, R = L+1 rows of d, t-major: cell (t, r) at
 * cells[(t*R + r)*d]):
 *   a = softmax_t(C[t][r] . P[r,p] / sqrt(d)); R_rp = rmsunit(sum_t a_t C[t][r]) * gain[r,p]
 *   u_i[r,p] = R_rp . U_i / sqrt(d) + row_bias[i,r,p]; w_i = softmax over all (r,p)
 *   pooled[i*d ..] = sum_{r,p} w_i[r,p] R_rp            (q*d floats) */
typedef struct nd_probe_head_args {
    int T, R, d, k, q;
    const float *cells;    /* [T, R, d] */
    const float *probes;   /* [R*k, d] float (row r*k+p) */
    const float *gain;     /* [R*k] */
    const float *query;    /* [q, d] float */
    const float *row_bias; /* [q, R*k] */
    float *pooled;         /* [q*d] out */
    float *work;           /* scratch: probe_head_work_floats */
} nd_probe_head_args;

/* mHC lane mixing of one layer for T tokens of n lanes of d (SPEC section 4).
 * A lane's logit is a * phi + b + off, in that order: off holds the home-lane
 * offsets the model defines. */
typedef struct nd_mhc_args {
    int T, n, d;
    float *X;              /* [T, n, d] lanes: read by pre, replaced by mix */
    const float *phi_pre;  /* [T, n] */
    const float *phi_post; /* [T, n] */
    const float *phi_res;  /* [T, n*n] */
    float a_pre, a_post, a_res;
    const float *b_pre, *off_pre;   /* [n] each */
    const float *b_post, *off_post; /* [n] each */
    const float *b_res;             /* [n*n] */
    int sinkhorn_iters;
    float *u;       /* [T, d]: pre writes u = sum_i sigmoid(a_pre phi_pre_i + b_pre_i + off_pre_i) X_i */
    float *y;       /* [T, d]: mix reads y = Block(b) and computes y - u */
    float *scratch; /* [T, n, d] (mix) */
} nd_mhc_args;

typedef struct nd_backend nd_backend;

/* Every op of the table, for supports_op. */
typedef enum nd_op {
    ND_OP_MATMUL, ND_OP_MATMUL_MULTI, ND_OP_GATHER_ROWS, ND_OP_RMSNORM, ND_OP_ROPE, ND_OP_HADAMARD,
    ND_OP_ATTENTION, ND_OP_SINKHORN, ND_OP_QUANTIZE_KV,
    ND_OP_COPY, ND_OP_ZERO, ND_OP_SCALE, ND_OP_AXPY, ND_OP_SIGMOID_GATE, ND_OP_HADA_MLP, ND_OP_MHC_PRE, ND_OP_MHC_MIX,
    ND_OP_ENGRAM_TAPS, ND_OP_ENGRAM_GATE, ND_OP_LANE_MEAN, ND_OP_HEAD_POOL, ND_OP_BUFFERS,
    ND_OP_MONARCH_MLP, ND_OP_PROBE_HEAD,
    ND_OP_MATMUL_A8, ND_OP_ACT_QUANT,
    ND_OP_COUNT
} nd_op;

/* Names for messages and tests ("matmul", ...), indexed by nd_op. */
extern const char *const nd_op_names[ND_OP_COUNT];

typedef struct nd_backend_ops {
    /* 1 when this table implements op (else the instance uses the CPU's). */
    int (*supports_op)(const nd_backend *be, nd_op op);

    /* ND_OP_BUFFERS: memory the backend owns, 64-byte aligned, NULL when out
     * of memory; the ops accept it wherever they take a pointer. */
    void *(*alloc)(const nd_backend *be, size_t bytes);
    void (*free)(const nd_backend *be, void *p);

    /* y[t, r] = sum_c W[r, c] * x[t, c] for t < T, r < W.rows; x rows ldx apart,
     * y rows ldy apart.  CQ matrices are used without dequantising them. */
    void (*matmul)(const nd_backend *be, const nd_matrix *w, const float *x, int T, int ldx, float *y, int ldy,
                   float *work);
    size_t (*matmul_work_floats)(const nd_backend *be, const nd_matrix *w, int T);
    /* The same for n matrices with the same number of columns reading the
     * same x (q/k/v/gate; the three mHC maps): the input is prepared once
     * and all rows run as one parallel job.  work: the largest single size. */
    void (*matmul_multi)(const nd_backend *be, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                         float *const *y, const int *ldy, float *work);
    /* matmul_multi over A8 activations (the deploy numerics, quant/act_quant.h):
     * each row x_t is first replaced by its per-vector int8 fake-quantisation
     * s_t c_t, so y_i[t] = s_t (W_i c_t).  x is not modified.  CQ matrices run
     * in integer arithmetic over the codes (backend/cpu/cpu_cq_int.h).
     * work: matmul_a8_work_floats (the largest single size). */
    void (*matmul_a8)(const nd_backend *be, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                      float *const *y, const int *ldy, float *work);
    size_t (*matmul_a8_work_floats)(const nd_backend *be, const nd_matrix *w, int T);
    /* out[i, :] = row rows[i] of W, dequantised (cols floats each). */
    void (*gather_rows)(const nd_backend *be, const nd_matrix *w, const int *rows, int n, float *out);
    /* ZCRMS: out = (1 + scale) * x / sqrt(mean(x^2) + 1e-6) for `count`
     * vectors of n, consecutive; scale NULL gives rmsunit.  out may equal x. */
    void (*rmsnorm)(const nd_backend *be, const float *x, int n, int count, const float *scale, float *out);
    /* Rotate-half RoPE on `heads` vectors of head_dim in place; cs holds
     * cos[head_dim/2] then sin[head_dim/2] for the position. */
    void (*rope)(const nd_backend *be, float *x, int heads, int head_dim, const float *cs);
    /* Orthonormal Walsh-Hadamard transform (Sylvester order) in place, n a
     * power of two. */
    void (*hadamard)(const nd_backend *be, float *x, int n);
    void (*attention)(const nd_backend *be, const nd_attn_args *a, float *work);
    size_t (*attention_work_floats)(const nd_backend *be, const nd_attn_args *a);
    /* In place: m (n x n, index i*n+j) holds log-weights; after `iters` rounds
     * of row then column log-normalisation it holds exp() of the result. */
    void (*sinkhorn)(const nd_backend *be, float *m, int n, int iters);
    /* int8 KV cache entry: q = round(x / scale), scale = max|x| / 127 per
     * ND_KV_GROUP values; n a multiple of ND_KV_GROUP. */
    void (*quantize_kv)(const nd_backend *be, const float *x, int n, int8_t *q, float *scale);
    /* The A8 fake-quantisation (quant/act_quant.h) of `count` consecutive
     * vectors of n, in place: each becomes c * s; codes [count * n] and
     * scales [count] (either may be NULL) receive c and s.  Needle 3's q, k
     * and v per head (deploy_numerics.md section 4). */
    void (*act_quant)(const nd_backend *be, float *x, int n, int count, int8_t *codes, float *scales);

    /* dst[0..n) = src[0..n) (bytes; e.g. keys into the KV cache) */
    void (*copy)(const nd_backend *be, void *dst, const void *src, size_t bytes);
    /* dst[0..bytes) = 0 */
    void (*zero)(const nd_backend *be, void *dst, size_t bytes);
    /* x[i] *= a */
    void (*scale)(const nd_backend *be, float *x, int n, float a);
    /* y[i] += a * x[i] */
    void (*axpy)(const nd_backend *be, float *y, float a, const float *x, int n);
    /* x[i] *= sigmoid(g[i]) (the attention output gate) */
    void (*sigmoid_gate)(const nd_backend *be, float *x, const float *g, size_t n);
    void (*hada_mlp)(const nd_backend *be, const nd_hada_mlp_args *a);
    /* u (and the lane weights) from X: see nd_mhc_args */
    void (*mhc_pre)(const nd_backend *be, const nd_mhc_args *a);
    /* X'_i = q_i (y - u) + sum_j P_ij X_j with q = 2 sigmoid(a_post phi_post + b_post + off_post),
     * P = Sinkhorn(a_res phi_res + b_res); y is left holding y - u */
    void (*mhc_mix)(const nd_backend *be, const nd_mhc_args *a);
    /* For each of `count` rows r: out[r * ldo ..] = sum_j taps[j] * src[r * ntaps + j]
     * over vectors of d; src[r * ntaps + j] NULL = a position before the
     * sequence (it and every later j contribute nothing).  Also Needle 3's
     * causal depthwise q/k/v convolution (the same sum).  A chunk's rows in
     * one call, so a backend can split them over threads. */
    void (*engram_taps)(const nd_backend *be, const float *taps, int ntaps, const float *const *src, int d, int count,
                        float *out, size_t ldo);
    /* b += sigmoid(rmsunit(u) . rmsunit(k) / sqrt(d)) * v, one token;
     * un, kn: scratch of d floats each */
    void (*engram_gate)(const nd_backend *be, const float *u, const float *k, const float *v, int d, float *b,
                        float *un, float *kn);
    /* out[t] = mean over the n lanes of X[t] ([T, n, d]), out rows ld apart */
    void (*lane_mean)(const nd_backend *be, const float *X, int T, int n, int d, float *out, size_t ld);
    /* Probe-attention pooling (SPEC "Heads"): for each probe k,
     * pooled[k] = sum_c softmax_c(cells_c . probes_k / sqrt(d)) cells_c.
     * wts: scratch of n_cells floats. */
    void (*head_pool)(const nd_backend *be, const float *probes, int num_probes, int d, const float *cells,
                      int n_cells, float *pooled, float *wts);
    /* Needle 3: b += MonarchMLP(ZCRMS(b; norm)) (nd_monarch_mlp_args) */
    void (*monarch_mlp)(const nd_backend *be, const nd_monarch_mlp_args *a);
    /* Needle 3: a probe head's pooling (nd_probe_head_args) */
    void (*probe_head)(const nd_backend *be, const nd_probe_head_args *a);
} nd_backend_ops;

/* Scratch floats probe_head needs (d: the cell width). */
static inline size_t nd_probe_head_work_floats(int T, int R, int k, int q, int d)
{
    return (size_t)T + (size_t)R * (size_t)k * (size_t)(1 + q + d) + 64;
}

/* One line of the registry (src/backend/registry.c): a backend this build
 * contains. */
typedef struct nd_backend_entry {
    const char *name;
    const char *description;
    const nd_backend_ops *ops;
    /* 0 when the backend can run here; else nonzero and `why` says what is
     * missing.  Probed once per process. NULL = always usable. */
    int (*probe)(char *why, size_t size);
    /* One line for `needle info` (device, memory...); NULL = description. */
    int (*describe)(char *buf, size_t size);
    /* Per-instance state (ctx); NULL when the backend keeps none. */
    int (*init)(nd_backend *be, needle_error *err);
    void (*fini)(nd_backend *be);
} nd_backend_entry;

/* An instance: what a model holds and every op receives. */
struct nd_backend {
    const nd_backend_entry *entry;
    const char *name;
    nd_backend_ops ops;         /* resolved: the backend's op where it supports it, else the CPU's */
    const nd_backend_ops *host; /* the CPU table (for small work a device would waste a launch on) */
    nd_threadpool *pool;        /* host threads (borrowed, may be NULL = the calling thread) */
    void *ctx;                  /* the backend's own state */
};

/* The registry: every backend built into this library, best first (the CPU
 * is always there, last). */
int nd_backend_count(void);
const nd_backend_entry *nd_backend_at(int i);
const nd_backend_entry *nd_backend_find(const char *name);
/* 1 when e can run here; else 0 with a static reason in *why (may be NULL). */
int nd_backend_usable(const nd_backend_entry *e, const char **why);

/* Pick a backend: `name` if given, else NEEDLE_BACKEND from the environment,
 * else the first usable one.  *why (may be NULL) gets a short static reason.
 * Unknown or unusable explicit names are NEEDLE_EBACKEND (never a silent
 * fallback). */
int nd_backend_select(const char *name, const nd_backend_entry **out, const char **why, needle_error *err);

/* An instance of e over pool (borrowed; may be NULL). */
int nd_backend_create(const nd_backend_entry *e, nd_threadpool *pool, nd_backend **out, needle_error *err);
void nd_backend_free(nd_backend *be);

/* Memory owned by the instance (see ND_OP_BUFFERS). */
static inline void *nd_backend_alloc(const nd_backend *be, size_t bytes) { return be->ops.alloc(be, bytes); }
static inline void nd_backend_release(const nd_backend *be, void *p) { be->ops.free(be, p); }

#endif
