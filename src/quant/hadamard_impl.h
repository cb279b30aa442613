/* hadamard_impl.h - the body of nd_hadamard as a static inline function, so a
 * file compiled with other instruction-set flags gets its own copy of it: the
 * CPU backend's cpu_ops.c is compiled once per ISA (cpu_isa_names.h) and its
 * nd_cpu_hadamard takes this, so the AVX2 copy runs the wide stages in 256-bit
 * registers and the AVX-512 copy takes the in-register path below, where the
 * baseline build (x86-64: SSE2) runs them 128 bits at a time.  Every copy does
 * the same butterflies in the same stage order and one final scale, so all
 * give the same bits (hadamard.c). */
#ifndef ND_HADAMARD_IMPL_H
#define ND_HADAMARD_IMPL_H

#include <math.h>
#include <string.h>

#include "quant/hadamard.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
/* One butterfly stage of span len (1, 2, 4 or 8) inside a 16-float register:
 * lane i without bit len gets x[i] + x[i+len], its partner x[i] - x[i+len]. */
static inline __m512 butterfly16(__m512 x, __m512i partner, __mmask16 upper)
{
    __m512 y = _mm512_permutexvar_ps(partner, x);
    return _mm512_mask_blend_ps(upper, _mm512_add_ps(x, y), _mm512_sub_ps(y, x));
}
#endif

/* GCC/clang vector extension for the wide stages on other targets. */
#pragma GCC diagnostic ignored "-Wpsabi" /* static helpers only: no ABI is crossed */
typedef float nd_hv8 __attribute__((vector_size(32)));
static inline nd_hv8 hld8(const float *p) { nd_hv8 v; memcpy(&v, p, sizeof v); return v; }
static inline void hst8(float *p, nd_hv8 v) { memcpy(p, &v, sizeof v); }

static inline void nd_hadamard_inline(float *x, int n)
{
    if (!nd_is_pow2(n)) return;
    /* The butterfly (a, b) -> (a + b, a - b) over strides 1, 2, 4, ... builds
     * exactly the Sylvester recursion H2n = [[Hn, Hn], [Hn, -Hn]]. */
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
    for (; len < n && len < 8; len <<= 1)
        for (int i = 0; i < n; i += len << 1)
            for (int j = i; j < i + len; j++) {
                float a = x[j], b = x[j + len];
                x[j] = a + b;
                x[j + len] = a - b;
            }
    for (; len < n; len <<= 1)
        for (int i = 0; i < n; i += len << 1)
            for (int j = i; j < i + len; j += 8) {
                nd_hv8 a = hld8(x + j), b = hld8(x + j + len);
                hst8(x + j, a + b);
                hst8(x + j + len, a - b);
            }
    /* one scale at the end keeps it orthonormal: 1/sqrt(n) */
    float s = 1.0f / sqrtf((float)n);
    for (int i = 0; i < n; i++) x[i] *= s;
}

#endif
