/* cpu_ops.c - small CPU kernels: norms, RoPE, Walsh-Hadamard, Sinkhorn, KV quantisation. */
#include "backend/cpu/cpu_isa_names.h" /* first: this copy's kernel names (compiled once per ISA) */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_simd.h"
#include "quant/hadamard.h"

void nd_cpu_rmsnorm(const float *x, int n, const float *scale, float *out)
{
    /* the mean square of up to 2048 floats: vector lanes each sum a short
     * strided run in float, the lanes are added in double so no digits are
     * lost at the end */
    int i = 0;
    ndv acc0 = ndv_zero(), acc1 = ndv_zero();
    for (; i + 2 * ND_VW <= n; i += 2 * ND_VW) {
        ndv a = ndv_load(x + i), b = ndv_load(x + i + ND_VW);
        acc0 = ndv_fma(a, a, acc0), acc1 = ndv_fma(b, b, acc1);
    }
    float lanes[ND_VW];
    ndv_store(lanes, ndv_add(acc0, acc1));
    double ss = 0.0;
    for (int k = 0; k < ND_VW; k++) ss += (double)lanes[k];
    for (; i < n; i++) ss += (double)x[i] * (double)x[i];
    float inv = (float)(1.0 / sqrt(ss / (double)n + 1e-6));
    ndv iv = ndv_set1(inv), one = ndv_set1(1.0f);
    i = 0;
    if (scale) {
        for (; i + ND_VW <= n; i += ND_VW)
            ndv_store(out + i, ndv_mul(ndv_add(one, ndv_load(scale + i)), ndv_mul(ndv_load(x + i), iv)));
        for (; i < n; i++) out[i] = (1.0f + scale[i]) * (x[i] * inv);
    } else {
        for (; i + ND_VW <= n; i += ND_VW) ndv_store(out + i, ndv_mul(ndv_load(x + i), iv));
        for (; i < n; i++) out[i] = x[i] * inv;
    }
}

void nd_cpu_rope(float *x, int heads, int head_dim, const float *cs)
{
    int half = head_dim / 2;
    const float *c = cs, *s = cs + half;
    for (int h = 0; h < heads; h++) {
        float *v = x + (size_t)h * (size_t)head_dim;
        for (int i = 0; i < half; i++) {
            float x1 = v[i], x2 = v[i + half];
            v[i] = x1 * c[i] - x2 * s[i];
            v[i + half] = x2 * c[i] + x1 * s[i];
        }
    }
}

/* The one fast Walsh-Hadamard transform lives in quant/hadamard.c. */
void nd_cpu_hadamard(float *x, int n) { nd_hadamard(x, n); }

void nd_cpu_sinkhorn(float *m, int n, int iters)
{
    for (int it = 0; it < iters; it++) {
        for (int i = 0; i < n; i++) { /* rows: logsumexp over j */
            float *row = m + (size_t)i * (size_t)n, mx = row[0];
            for (int j = 1; j < n; j++) mx = fmaxf(mx, row[j]);
            float s = 0.0f;
            for (int j = 0; j < n; j++) s += expf(row[j] - mx);
            float lse = mx + logf(s);
            for (int j = 0; j < n; j++) row[j] -= lse;
        }
        for (int j = 0; j < n; j++) { /* columns: logsumexp over i */
            float mx = m[j];
            for (int i = 1; i < n; i++) mx = fmaxf(mx, m[(size_t)i * (size_t)n + (size_t)j]);
            float s = 0.0f;
            for (int i = 0; i < n; i++) s += expf(m[(size_t)i * (size_t)n + (size_t)j] - mx);
            float lse = mx + logf(s);
            for (int i = 0; i < n; i++) m[(size_t)i * (size_t)n + (size_t)j] -= lse;
        }
    }
    for (int i = 0; i < n * n; i++) m[i] = expf(m[i]);
}

void nd_cpu_quantize_kv(const float *x, int n, int8_t *q, float *scale)
{
    for (int g = 0; g < n / ND_KV_GROUP; g++) {
        const float *xg = x + g * ND_KV_GROUP;
        float mx = 0.0f;
        /* a compare, not fmaxf, and rintf, not lrintf: the same values (mx
         * starts at 0, so a NaN never wins either way; |x * inv| <= 127), but
         * both inline instead of calling libm per element */
        for (int i = 0; i < ND_KV_GROUP; i++) {
            float a = fabsf(xg[i]);
            mx = a > mx ? a : mx;
        }
        float sc = mx / 127.0f, inv = mx > 0.0f ? 127.0f / mx : 0.0f;
        scale[g] = sc;
        for (int i = 0; i < ND_KV_GROUP; i++) q[g * ND_KV_GROUP + i] = (int8_t)(int)rintf(xg[i] * inv);
    }
}
