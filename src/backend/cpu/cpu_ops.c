/* cpu_ops.c - small CPU kernels: norms, RoPE, Walsh-Hadamard, Sinkhorn, KV and A8 quantisation. */
#include "backend/cpu/cpu_isa_names.h" /* first: this copy's kernel names (compiled once per ISA) */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_simd.h"
#include "quant/act_quant.h"
#include "quant/hadamard_impl.h"

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

/* The one fast Walsh-Hadamard transform (quant/hadamard.c), inlined from its
 * header so this ISA's copy is compiled with this ISA's vectors: the same
 * butterflies in the same order, so the same bits as nd_hadamard. */
void nd_cpu_hadamard(float *x, int n) { nd_hadamard_inline(x, n); }

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
#if defined(__AVX512F__)
    /* a group is two vectors: the same maximum (max_ps keeps the running
     * maximum when a magnitude is NaN, as the compare below does), the same
     * float32 division and product, cvtps rounding half to even under the
     * default rounding mode (as rintf), and the low byte kept (as the cast) */
    if (ND_KV_GROUP == 32) {
        for (int g = 0; g < n / 32; g++) {
            __m512 a = _mm512_loadu_ps(x + 32 * g), b = _mm512_loadu_ps(x + 32 * g + 16);
            float mx = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(b), _mm512_max_ps(_mm512_abs_ps(a), _mm512_setzero_ps())));
            float inv = mx > 0.0f ? 127.0f / mx : 0.0f;
            scale[g] = mx / 127.0f;
            __m512 iv = _mm512_set1_ps(inv);
            _mm_storeu_si128((__m128i *)(q + 32 * g), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(a, iv))));
            _mm_storeu_si128((__m128i *)(q + 32 * g + 16), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(b, iv))));
        }
        return;
    }
#endif
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

/* The A8 quantiser of quant/act_quant.h, compiled per ISA: max |x| and the
 * codes rint(x / s) eight or sixteen at a time on x86 (the baseline build
 * calls libm's rintf per element).  The same values: the maximum of the same
 * magnitudes in any order (the running maximum starts at 0 and keeps itself
 * when a magnitude is not greater, as the scalar compare does), the same
 * float32 division, rounding half to even (the default rounding mode, as
 * rintf), the same clip; the scalar tail is act_quant.c's loop. */
float nd_cpu_act_quant(const float *x, int n, int8_t *codes, float *xq)
{
    float amax = 0.0f;
    int i = 0;
#if defined(__AVX512F__)
    __m512 m16 = _mm512_setzero_ps();
    for (; i + 16 <= n; i += 16) m16 = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + i)), m16);
    amax = _mm512_reduce_max_ps(m16);
#elif defined(__AVX2__)
    const __m256 nosign = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m8 = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) m8 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), nosign), m8);
    float lanes[8];
    _mm256_storeu_ps(lanes, m8);
    for (int k = 0; k < 8; k++) amax = lanes[k] > amax ? lanes[k] : amax;
#endif
    for (; i < n; i++) {
        float a = fabsf(x[i]);
        amax = a > amax ? a : amax;
    }
    float s = nd_act_scale(amax);
    i = 0;
#if defined(__AVX512F__)
    const __m512 sv = _mm512_set1_ps(s), lo = _mm512_set1_ps(-128.0f), hi = _mm512_set1_ps(127.0f);
    for (; i + 16 <= n; i += 16) {
        __m512 c = _mm512_roundscale_ps(_mm512_div_ps(_mm512_loadu_ps(x + i), sv),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        c = _mm512_min_ps(_mm512_max_ps(c, lo), hi);
        if (codes) _mm_storeu_si128((__m128i *)(codes + i), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(c)));
        if (xq) _mm512_storeu_ps(xq + i, _mm512_mul_ps(c, sv));
    }
#elif defined(__AVX2__)
    const __m256 sv = _mm256_set1_ps(s), lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 c = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), sv),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        c = _mm256_min_ps(_mm256_max_ps(c, lo), hi);
        if (codes) {
            __m256i c32 = _mm256_cvtps_epi32(c);
            __m128i c16 = _mm_packs_epi32(_mm256_castsi256_si128(c32), _mm256_extracti128_si256(c32, 1));
            _mm_storel_epi64((__m128i *)(codes + i), _mm_packs_epi16(c16, c16));
        }
        if (xq) _mm256_storeu_ps(xq + i, _mm256_mul_ps(c, sv));
    }
#endif
    for (; i < n; i++) {
        float c = nd_act_code(x[i], s);
        if (codes) codes[i] = (int8_t)c;
        if (xq) xq[i] = c * s;
    }
    return s;
}
