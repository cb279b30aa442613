/* cpu_ops.h - the CPU backend's kernels, exposed so tests can hold each one
 * against a naive reference (tests/test_ops.c).  The op table in
 * cpu_backend.c points at these. */
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

static inline float nd_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float nd_siluf(float x) { return x / (1.0f + expf(-x)); }

#endif
