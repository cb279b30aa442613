/* cpu_layer.c - the CPU's per-token layer ops: the attention gate, the
 * Hadamard MLP, mHC pre-mix and mix, the engram taps and gate, lane means,
 * head pooling, and the small vector ops (copy, zero, scale, axpy).
 *
 * These are the host loops forward.c and heads.c used to run themselves,
 * moved here unchanged (same SIMD helpers, same order of operations), so the
 * forward pass goes through the op table and its results keep their bits. */
#include "backend/cpu/cpu_isa_names.h" /* first: this copy's kernel names (compiled once per ISA) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_simd.h"
#include "core/formulas.h" /* nd_probe_pool */

void nd_cpu_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

void nd_cpu_zero(void *dst, size_t bytes) { memset(dst, 0, bytes); }

void nd_cpu_scale(float *x, int n, float a)
{
    for (int i = 0; i < n; i++) x[i] *= a;
}

void nd_cpu_axpy(float *y, float a, const float *x, int n) { nd_simd_axpy(y, a, x, n); }

void nd_cpu_sigmoid_gate(float *x, const float *g, size_t n)
{
    size_t i = 0;
    for (; i + ND_VW <= n; i += ND_VW) ndv_store(x + i, ndv_mul(ndv_load(x + i), ndv_sigmoid(ndv_load(g + i))));
    for (; i < n; i++) x[i] *= nd_sigmoidf(g[i]);
}

void nd_cpu_hada_mlp(const nd_hada_mlp_args *a)
{
    int d = a->d, NH = a->hada_n;
    float *z = a->z;
    for (int t = 0; t < a->T; t++) {
        float *b = a->b + (size_t)t * d;
        nd_cpu_rmsnorm(b, d, a->norm, z);
        for (int i = d; i < NH; i++) z[i] = 0.0f;
        int i = 0;
        for (; i + ND_VW <= NH; i += ND_VW) ndv_store(z + i, ndv_mul(ndv_load(z + i), ndv_load(a->d1 + i)));
        for (; i < NH; i++) z[i] *= a->d1[i];
        nd_cpu_hadamard(z, NH);
        for (i = 0; i + ND_VW <= NH; i += ND_VW) ndv_store(z + i, ndv_silu(ndv_mul(ndv_load(a->d2 + i), ndv_load(z + i))));
        for (; i < NH; i++) z[i] = nd_siluf(a->d2[i] * z[i]);
        nd_cpu_hadamard(z, NH);
        for (i = 0; i + ND_VW <= d; i += ND_VW)
            ndv_store(b + i, ndv_fma(ndv_load(a->d3 + i), ndv_load(z + i), ndv_load(b + i)));
        for (; i < d; i++) b[i] += a->d3[i] * z[i];
    }
}

void nd_cpu_mhc_pre(const nd_mhc_args *a)
{
    int n = a->n, d = a->d;
    for (int t = 0; t < a->T; t++) {
        const float *X = a->X + (size_t)t * n * d;
        float *u = a->u + (size_t)t * d;
        memset(u, 0, sizeof(float) * (size_t)d);
        for (int i = 0; i < n; i++) {
            float p = nd_sigmoidf(a->a_pre * a->phi_pre[t * n + i] + a->b_pre[i] + a->off_pre[i]);
            nd_simd_axpy(u, p, X + (size_t)i * d, d);
        }
    }
}

void nd_cpu_mhc_res(const nd_mhc_args *a, int t, float *P)
{
    int n = a->n;
    for (int ij = 0; ij < n * n; ij++) P[ij] = a->a_res * a->phi_res[t * n * n + ij] + a->b_res[ij];
    nd_cpu_sinkhorn(P, n, a->sinkhorn_iters);
}

void nd_cpu_mhc_mix(const nd_mhc_args *a) { nd_cpu_mhc_mix_res(a, NULL); }

void nd_cpu_mhc_mix_res(const nd_mhc_args *a, const float *Pall)
{
    int n = a->n, d = a->d, nd_ = n * d;
    for (int t = 0; t < a->T; t++) {
        float *X = a->X + (size_t)t * nd_, *u = a->u + (size_t)t * d, *y = a->y + (size_t)t * d;
        nd_simd_axpy(y, -1.0f, u, d);
        float qv[16], Pt[256], *newX = a->scratch + (size_t)t * nd_;
        for (int i = 0; i < n; i++)
            qv[i] = 2.0f * nd_sigmoidf(a->a_post * a->phi_post[t * n + i] + a->b_post[i] + a->off_post[i]);
        const float *P = Pall ? Pall + (size_t)t * n * n : Pt;
        if (!Pall) nd_cpu_mhc_res(a, t, Pt);
        for (int i = 0; i < n; i++) {
            float *xi = newX + i * d;
            memset(xi, 0, sizeof(float) * (size_t)d);
            nd_simd_axpy(xi, qv[i], y, d); /* 0 + q*y: the same bits as q*y */
            for (int j = 0; j < n; j++) nd_simd_axpy(xi, P[i * n + j], X + j * d, d);
        }
        memcpy(X, newX, sizeof(float) * (size_t)nd_);
    }
}

void nd_cpu_engram_taps(const float *taps, int ntaps, const float *const *src, int d, float *out)
{
    memset(out, 0, sizeof(float) * (size_t)d);
    for (int j = 0; j < ntaps; j++) {
        if (!src[j]) break;
        const float *s = src[j], *tap = taps + (size_t)j * d;
        for (int i = 0; i < d; i++) out[i] += tap[i] * s[i];
    }
}

void nd_cpu_engram_gate(const float *u, const float *k, const float *v, int d, float *b, float *un, float *kn)
{
    float inv_sqrt_d = 1.0f / sqrtf((float)d);
    nd_cpu_rmsnorm(u, d, NULL, un);
    nd_cpu_rmsnorm(k, d, NULL, kn);
    float gate = nd_sigmoidf(nd_cpu_dot(un, kn, d) * inv_sqrt_d);
    nd_simd_axpy(b, gate, v, d);
}

void nd_cpu_lane_mean(const float *X, int T, int n, int d, float *out, size_t ld)
{
    for (int t = 0; t < T; t++) {
        const float *x = X + (size_t)t * n * d;
        float *f = out + (size_t)t * ld;
        for (int k = 0; k < d; k++) {
            float acc = 0.0f;
            for (int i = 0; i < n; i++) acc += x[i * d + k];
            f[k] = acc / (float)n;
        }
    }
}

void nd_cpu_head_pool(const float *probes, int num_probes, int d, const float *cells, int n_cells, float *pooled,
                      float *wts)
{
    for (int k = 0; k < num_probes; k++)
        nd_probe_pool(cells, n_cells, d, probes + (size_t)k * d, nd_cpu_dot, wts, pooled + (size_t)k * d);
}
