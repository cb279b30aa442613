/* cpu_ops.c - small CPU kernels: norms, RoPE, Walsh-Hadamard, Sinkhorn, KV quantisation. */
#include <math.h>
#include <string.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_simd.h"

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

#if defined(__AVX512F__)
/* One butterfly stage of span len (1, 2, 4 or 8) inside a 16-float register:
 * lane i without bit len gets x[i] + x[i+len], its partner x[i] - x[i+len],
 * the same two operations as the scalar loop, so the same bits. */
static inline __m512 butterfly16(__m512 x, __m512i partner, __mmask16 upper)
{
    __m512 y = _mm512_permutexvar_ps(partner, x);
    return _mm512_mask_blend_ps(upper, _mm512_add_ps(x, y), _mm512_sub_ps(y, x));
}
#endif

void nd_cpu_hadamard(float *x, int n)
{
    if (n <= 0 || (n & (n - 1))) return;
    /* Butterflies in Sylvester order: H2n = [[Hn, Hn], [Hn, -Hn]]. */
    int len = 1;
#if defined(__AVX512F__)
    if (n >= 16) {
        /* the four stages inside each 16-float block: lane permutes */
        const __m512i p1 = _mm512_setr_epi32(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
        const __m512i p2 = _mm512_setr_epi32(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
        const __m512i p4 = _mm512_setr_epi32(4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
        const __m512i p8 = _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
        for (int i = 0; i < n; i += 16) {
            __m512 v = _mm512_loadu_ps(x + i);
            v = butterfly16(v, p1, 0xAAAA);
            v = butterfly16(v, p2, 0xCCCC);
            v = butterfly16(v, p4, 0xF0F0);
            v = butterfly16(v, p8, 0xFF00);
            _mm512_storeu_ps(x + i, v);
        }
        /* the wide stages are whole-vector adds and subtracts */
        for (len = 16; len < n; len <<= 1)
            for (int i = 0; i < n; i += len << 1)
                for (int j = 0; j < len; j += 16) {
                    __m512 u = _mm512_loadu_ps(x + i + j), v = _mm512_loadu_ps(x + i + j + len);
                    _mm512_storeu_ps(x + i + j, _mm512_add_ps(u, v));
                    _mm512_storeu_ps(x + i + j + len, _mm512_sub_ps(u, v));
                }
    }
#endif
    for (; len < n; len <<= 1) {
        for (int i = 0; i < n; i += len << 1) {
            float *a = x + i, *b = x + i + len;
            for (int j = 0; j < len; j++) {
                float u = a[j], v = b[j];
                a[j] = u + v;
                b[j] = u - v;
            }
        }
    }
    float s = 1.0f / sqrtf((float)n);
    int i = 0;
    for (; i + ND_VW <= n; i += ND_VW) ndv_store(x + i, ndv_mul(ndv_load(x + i), ndv_set1(s)));
    for (; i < n; i++) x[i] *= s;
}

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
        for (int i = 0; i < ND_KV_GROUP; i++) mx = fmaxf(mx, fabsf(xg[i]));
        float sc = mx / 127.0f, inv = mx > 0.0f ? 127.0f / mx : 0.0f;
        scale[g] = sc;
        for (int i = 0; i < ND_KV_GROUP; i++) q[g * ND_KV_GROUP + i] = (int8_t)lrintf(xg[i] * inv);
    }
}
