/* cpu_isa.h - one table of the CPU kernels per instruction set.
 *
 * The kernel files are compiled once per ISA (see cpu_isa_names.h); each copy
 * fills one nd_cpu_kernels (cpu_kernel_table.c and its *_avx2.c / *_avx512.c
 * wrappers).  nd_cpu_kernels_active() is the table chosen once per process by
 * nd_cpu_isa_choose (core/cpu_features.c: the one place that decides), and
 * the plain kernel names of cpu_ops.h (nd_cpu_dot...) call through it.
 *
 * A new ISA-specific kernel (e.g. an int8 CQ dot) gets a field here (after
 * the existing ones), is defined in its own *_avx512.c / *_avx2.c file, and
 * is listed in cpu_kernel_table.c under `#if ND_CPU_ISA_NUM ==
 * ND_ISA_NUM_avx512` (cpu_isa_names.h) for the paths that have it; a path without it leaves the field NULL and callers
 * test `nd_cpu_kernels_active()->field`.  No other code checks CPU features:
 * the choice of path stays in one place. */
#ifndef ND_CPU_ISA_H
#define ND_CPU_ISA_H

#include "backend/cpu/cpu_ops.h"
#include "core/cpu_features.h"

/* x86-64 builds carry AVX2 and AVX-512 copies besides the baseline (the
 * Makefile compiles *_avx2.c / *_avx512.c only there). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ND_CPU_X86_COPIES 1
#else
#define ND_CPU_X86_COPIES 0
#endif
#if defined(__aarch64__)
#define ND_ISA_BASELINE ND_ISA_NEON
#else
#define ND_ISA_BASELINE ND_ISA_PORTABLE
#endif

typedef struct nd_cpu_kernels {
    nd_cpu_isa isa;
    float (*dot)(const float *a, const float *b, int n);
    void (*matmul)(nd_threadpool *pool, const nd_matrix *w, const float *x, int T, int ldx, float *y, int ldy,
                   float *work);
    size_t (*matmul_work_floats)(const nd_matrix *w, int T, int threads);
    void (*matmul_multi)(nd_threadpool *pool, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                         float *const *y, const int *ldy, float *work);
    void (*matmul_a8)(nd_threadpool *pool, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                      float *const *y, const int *ldy, float *work);
    size_t (*matmul_a8_work_floats)(const nd_matrix *w, int T, int threads);
    int (*cq_storage_bits)(const nd_matrix *w);
    void (*cq_decode_row_rotated)(const nd_matrix *w, int r, float *out);
    void (*cq_decode_group)(const nd_matrix *w, int r, int g, float *out);
    void (*gather_rows)(const nd_matrix *w, const int *rows, int n, float *out);
    void (*rmsnorm)(const float *x, int n, const float *scale, float *out);
    void (*rope)(float *x, int heads, int head_dim, const float *cs);
    void (*hadamard)(float *x, int n);
    void (*attention)(nd_threadpool *pool, const nd_attn_args *a, float *work);
    size_t (*attention_work_floats)(const nd_attn_args *a, int threads);
    void (*sinkhorn)(float *m, int n, int iters);
    void (*quantize_kv)(const float *x, int n, int8_t *q, float *scale);
    void (*copy)(void *dst, const void *src, size_t bytes);
    void (*zero)(void *dst, size_t bytes);
    void (*scale)(float *x, int n, float a);
    void (*axpy)(float *y, float a, const float *x, int n);
    void (*sigmoid_gate)(float *x, const float *g, size_t n);
    void (*hada_mlp)(const nd_hada_mlp_args *a);
    void (*mhc_pre)(const nd_mhc_args *a);
    void (*mhc_mix)(const nd_mhc_args *a);
    void (*mhc_res)(const nd_mhc_args *a, int t, float *P);
    void (*mhc_mix_res)(const nd_mhc_args *a, const float *P);
    void (*engram_taps)(const float *taps, int ntaps, const float *const *src, int d, float *out);
    void (*engram_gate)(const float *u, const float *k, const float *v, int d, float *b, float *un, float *kn);
    void (*lane_mean)(const float *X, int T, int n, int d, float *out, size_t ld);
    void (*head_pool)(const float *probes, int num_probes, int d, const float *cells, int n_cells, float *pooled,
                      float *wts);
    float (*act_quant)(const float *x, int n, int8_t *codes, float *xq);
    void (*matmul_a8_with)(nd_threadpool *pool, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                           float *const *y, const int *ldy, float *work, void (*extra)(void *), void *extra_ctx);
    void (*monarch_mlp)(const nd_monarch_mlp_args *a);
    void (*monarch_mlp_pooled)(nd_threadpool *pool, const nd_monarch_mlp_args *a, void (*extra)(void *),
                               void *extra_ctx);
} nd_cpu_kernels;

/* The tables built into this binary (only those nd_cpu_isa_built says). */
extern const nd_cpu_kernels nd_cpu_kernels_portable, nd_cpu_kernels_avx2, nd_cpu_kernels_avx512, nd_cpu_kernels_neon;

/* The table of isa, or NULL when this binary has none. */
const nd_cpu_kernels *nd_cpu_kernels_for(nd_cpu_isa isa);
/* The table in use: the path nd_cpu_isa_choose picked (the baseline's when
 * the choice failed: the CPU backend's probe then refuses to run, with the
 * reason, so only tests calling kernels directly ever see that fallback). */
const nd_cpu_kernels *nd_cpu_kernels_active(void);

#endif
