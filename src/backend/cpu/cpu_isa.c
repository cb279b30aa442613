/* cpu_isa.c - the kernel table in use, and the plain kernel names of
 * cpu_ops.h as one indirect call into it.  The table is looked up once per
 * process; a call costs one pthread_once check and one indirect jump, small
 * next to any kernel (a matmul, a norm over d floats). */
#include "backend/cpu/cpu_isa.h"

#include <pthread.h>

const nd_cpu_kernels *nd_cpu_kernels_for(nd_cpu_isa isa)
{
    if (!nd_cpu_isa_built(isa)) return NULL;
    switch (isa) {
#if defined(__aarch64__)
    case ND_ISA_NEON: return &nd_cpu_kernels_neon;
#else
    case ND_ISA_PORTABLE: return &nd_cpu_kernels_portable;
#endif
#if ND_CPU_X86_COPIES
    case ND_ISA_AVX2: return &nd_cpu_kernels_avx2;
    case ND_ISA_AVX512: return &nd_cpu_kernels_avx512;
#endif
    default: return NULL;
    }
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const nd_cpu_kernels *chosen;

static void choose(void)
{
    nd_cpu_isa isa;
    if (nd_cpu_isa_choose(&isa, NULL) == 0) chosen = nd_cpu_kernels_for(isa);
    if (!chosen) chosen = nd_cpu_kernels_for(ND_ISA_BASELINE);
}

const nd_cpu_kernels *nd_cpu_kernels_active(void)
{
    pthread_once(&once, choose);
    return chosen;
}

static inline const nd_cpu_kernels *active(void) { return nd_cpu_kernels_active(); }

float nd_cpu_dot(const float *a, const float *b, int n) { return active()->dot(a, b, n); }
void nd_cpu_matmul(nd_threadpool *pool, const nd_matrix *w, const float *x, int T, int ldx, float *y, int ldy,
                   float *work)
{
    active()->matmul(pool, w, x, T, ldx, y, ldy, work);
}
size_t nd_cpu_matmul_work_floats(const nd_matrix *w, int T, int threads)
{
    return active()->matmul_work_floats(w, T, threads);
}
void nd_cpu_matmul_multi(nd_threadpool *pool, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                         float *const *y, const int *ldy, float *work)
{
    active()->matmul_multi(pool, n, w, x, T, ldx, y, ldy, work);
}
void nd_cpu_matmul_a8(nd_threadpool *pool, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                      float *const *y, const int *ldy, float *work)
{
    active()->matmul_a8(pool, n, w, x, T, ldx, y, ldy, work);
}
void nd_cpu_matmul_a8_with(nd_threadpool *pool, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                           float *const *y, const int *ldy, float *work, void (*extra)(void *), void *extra_ctx)
{
    active()->matmul_a8_with(pool, n, w, x, T, ldx, y, ldy, work, extra, extra_ctx);
}
size_t nd_cpu_matmul_a8_work_floats(const nd_matrix *w, int T, int threads)
{
    return active()->matmul_a8_work_floats(w, T, threads);
}
int nd_cpu_cq_storage_bits(const nd_matrix *w) { return active()->cq_storage_bits(w); }
void nd_cpu_cq_decode_row_rotated(const nd_matrix *w, int r, float *out) { active()->cq_decode_row_rotated(w, r, out); }
void nd_cpu_cq_decode_group(const nd_matrix *w, int r, int g, float *out) { active()->cq_decode_group(w, r, g, out); }
void nd_cpu_gather_rows(const nd_matrix *w, const int *rows, int n, float *out)
{
    active()->gather_rows(w, rows, n, out);
}
void nd_cpu_rmsnorm(const float *x, int n, const float *scale, float *out) { active()->rmsnorm(x, n, scale, out); }
void nd_cpu_rope(float *x, int heads, int head_dim, const float *cs) { active()->rope(x, heads, head_dim, cs); }
void nd_cpu_hadamard(float *x, int n) { active()->hadamard(x, n); }
void nd_cpu_attention(nd_threadpool *pool, const nd_attn_args *a, float *work) { active()->attention(pool, a, work); }
size_t nd_cpu_attention_work_floats(const nd_attn_args *a, int threads)
{
    return active()->attention_work_floats(a, threads);
}
void nd_cpu_sinkhorn(float *m, int n, int iters) { active()->sinkhorn(m, n, iters); }
void nd_cpu_quantize_kv(const float *x, int n, int8_t *q, float *scale) { active()->quantize_kv(x, n, q, scale); }
float nd_cpu_act_quant(const float *x, int n, int8_t *codes, float *xq) { return active()->act_quant(x, n, codes, xq); }
void nd_cpu_copy(void *dst, const void *src, size_t bytes) { active()->copy(dst, src, bytes); }
void nd_cpu_zero(void *dst, size_t bytes) { active()->zero(dst, bytes); }
void nd_cpu_scale(float *x, int n, float a) { active()->scale(x, n, a); }
void nd_cpu_axpy(float *y, float a, const float *x, int n) { active()->axpy(y, a, x, n); }
void nd_cpu_sigmoid_gate(float *x, const float *g, size_t n) { active()->sigmoid_gate(x, g, n); }
void nd_cpu_hada_mlp(const nd_hada_mlp_args *a) { active()->hada_mlp(a); }
void nd_cpu_mhc_pre(const nd_mhc_args *a) { active()->mhc_pre(a); }
void nd_cpu_mhc_mix(const nd_mhc_args *a) { active()->mhc_mix(a); }
void nd_cpu_mhc_res(const nd_mhc_args *a, int t, float *P) { active()->mhc_res(a, t, P); }
void nd_cpu_mhc_mix_res(const nd_mhc_args *a, const float *P) { active()->mhc_mix_res(a, P); }
void nd_cpu_engram_taps(const float *taps, int ntaps, const float *const *src, int d, float *out)
{
    active()->engram_taps(taps, ntaps, src, d, out);
}
void nd_cpu_engram_gate(const float *u, const float *k, const float *v, int d, float *b, float *un, float *kn)
{
    active()->engram_gate(u, k, v, d, b, un, kn);
}
void nd_cpu_lane_mean(const float *X, int T, int n, int d, float *out, size_t ld)
{
    active()->lane_mean(X, T, n, d, out, ld);
}
void nd_cpu_head_pool(const float *probes, int num_probes, int d, const float *cells, int n_cells, float *pooled,
                      float *wts)
{
    active()->head_pool(probes, num_probes, d, cells, n_cells, pooled, wts);
}
void nd_cpu_monarch_mlp(const nd_monarch_mlp_args *a) { active()->monarch_mlp(a); }
void nd_cpu_monarch_mlp_pooled(nd_threadpool *pool, const nd_monarch_mlp_args *a, void (*extra)(void *),
                               void *extra_ctx)
{
    active()->monarch_mlp_pooled(pool, a, extra, extra_ctx);
}
