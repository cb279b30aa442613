/* cpu_ops.h - the CPU backend's kernels, exposed so tests can hold each one
 * against a naive reference (tests/test_ops.c).  The op table in
 * cpu_backend.c wraps these; nothing outside src/backend/cpu/ includes this
 * header (tools/check_layers.sh). */
#ifndef ND_CPU_OPS_H
#define ND_CPU_OPS_H

#include <math.h>
#include <stddef.h>

#include "backend/backend.h"

/* Rows of W one matmul task covers: fixed, so results never depend on the
 * thread count. */
#define ND_CPU_ROWS_PER_TASK 16

/* Below this many multiply-adds a job runs on the calling thread: waking
 * workers costs more than it saves.  The tasks are the same either way, so
 * results do not change. */
#define ND_CPU_PARALLEL_MIN_WORK (1u << 17)

float nd_cpu_dot(const float *a, const float *b, int n);

void nd_cpu_matmul(nd_threadpool *pool, const nd_matrix *w, const float *x, int T, int ldx, float *y, int ldy,
                   float *work);
size_t nd_cpu_matmul_work_floats(const nd_matrix *w, int T, int threads);
void nd_cpu_matmul_multi(nd_threadpool *pool, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                         float *const *y, const int *ldy, float *work);
/* y_i = W_i fq(x) with the A8 fake-quantiser fq (backend.h: matmul_a8). */
void nd_cpu_matmul_a8(nd_threadpool *pool, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                      float *const *y, const int *ldy, float *work);
/* the same; extra(extra_ctx), when given, runs once, as one more piece of the
 * decode job's work when there is a job (else on the calling thread) */
void nd_cpu_matmul_a8_with(nd_threadpool *pool, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                           float *const *y, const int *ldy, float *work, void (*extra)(void *), void *extra_ctx);
size_t nd_cpu_matmul_a8_work_floats(const nd_matrix *w, int T, int threads);

/* CQ helpers: 16-entry zero-padded codebook by stored code; bits per stored code. */
int nd_cpu_cq_storage_bits(const nd_matrix *w);
/* Decode row r of a CQ matrix in the ROTATED domain: out[c] = cb[code] * norm
 * for c < cols_pad (no inverse Hadamard). */
void nd_cpu_cq_decode_row_rotated(const nd_matrix *w, int r, float *out);
/* The same for one 128-group g of row r (128 floats). */
void nd_cpu_cq_decode_group(const nd_matrix *w, int r, int g, float *out);

void nd_cpu_gather_rows(const nd_matrix *w, const int *rows, int n, float *out);
void nd_cpu_rmsnorm(const float *x, int n, const float *scale, float *out);
void nd_cpu_rope(float *x, int heads, int head_dim, const float *cs);
void nd_cpu_hadamard(float *x, int n);
void nd_cpu_attention(nd_threadpool *pool, const nd_attn_args *a, float *work);
size_t nd_cpu_attention_work_floats(const nd_attn_args *a, int threads);
void nd_cpu_sinkhorn(float *m, int n, int iters);
void nd_cpu_quantize_kv(const float *x, int n, int8_t *q, float *scale);
/* The A8 quantiser (quant/act_quant.h) per ISA: returns the scale s; codes[i] = c_i
 * and xq[i] = c_i * s when given (either may be NULL; xq may be x: in place). */
float nd_cpu_act_quant(const float *x, int n, int8_t *codes, float *xq);

/* the per-token layer ops (cpu_layer.c) */
void nd_cpu_copy(void *dst, const void *src, size_t bytes);
void nd_cpu_zero(void *dst, size_t bytes);
void nd_cpu_scale(float *x, int n, float a);
void nd_cpu_axpy(float *y, float a, const float *x, int n);
void nd_cpu_sigmoid_gate(float *x, const float *g, size_t n);
void nd_cpu_hada_mlp(const nd_hada_mlp_args *a);
void nd_cpu_mhc_pre(const nd_mhc_args *a);
void nd_cpu_mhc_mix(const nd_mhc_args *a);
/* mhc_mix in two steps: token t's doubly stochastic P (n x n: the residual map's logits through
 * Sinkhorn), and the mix given every token's P ([T, n, n]; NULL: computed here) */
void nd_cpu_mhc_res(const nd_mhc_args *a, int t, float *P);
void nd_cpu_mhc_mix_res(const nd_mhc_args *a, const float *P);
void nd_cpu_engram_taps(const float *taps, int ntaps, const float *const *src, int d, float *out);
void nd_cpu_engram_gate(const float *u, const float *k, const float *v, int d, float *b, float *un, float *kn);
void nd_cpu_lane_mean(const float *X, int T, int n, int d, float *out, size_t ld);
void nd_cpu_head_pool(const float *probes, int num_probes, int d, const float *cells, int n_cells, float *pooled,
                      float *wts);

/* Needle 3 (cpu_monarch.c, cpu_probe_head.c) */
void nd_cpu_monarch_mlp(const nd_monarch_mlp_args *a);
/* the same, each token's three Kronecker products split by column blocks over the pool (decode);
 * extra(extra_ctx), when given, runs once as one more task of the first product's job */
void nd_cpu_monarch_mlp_pooled(nd_threadpool *pool, const nd_monarch_mlp_args *a, void (*extra)(void *),
                               void *extra_ctx);
void nd_cpu_probe_head(const nd_probe_head_args *a);

static inline float nd_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float nd_siluf(float x) { return x / (1.0f + expf(-x)); }

#endif
