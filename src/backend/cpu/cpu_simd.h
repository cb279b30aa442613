/* cpu_simd.h - one small vector type for the CPU kernels, so each kernel is
 * written once and compiles to AVX-512 (16 floats), AVX2+FMA (8 floats),
 * NEON or WebAssembly SIMD128 (4 floats) or plain C (1 float) depending on
 * the flags the file is compiled with (an x86-64 build compiles the kernels
 * once per ISA and picks one at run time: cpu_isa.h).
 *
 * Results differ between these widths (summation order), but every build is
 * deterministic: a given binary computes the same bits whatever the thread
 * count, because each output is computed by one thread with one sequence of
 * instructions. */
#ifndef ND_CPU_SIMD_H
#define ND_CPU_SIMD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#elif defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#define ND_SIMD_NEON 1
#elif defined(__wasm_simd128__)
#include <wasm_simd128.h>
#define ND_SIMD_WASM 1
#endif

#if defined(__AVX512F__)
#define ND_VW 16
typedef __m512 ndv;
static inline ndv ndv_zero(void) { return _mm512_setzero_ps(); }
static inline ndv ndv_set1(float x) { return _mm512_set1_ps(x); }
static inline ndv ndv_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void ndv_store(float *p, ndv v) { _mm512_storeu_ps(p, v); }
static inline ndv ndv_add(ndv a, ndv b) { return _mm512_add_ps(a, b); }
static inline ndv ndv_sub(ndv a, ndv b) { return _mm512_sub_ps(a, b); }
static inline ndv ndv_mul(ndv a, ndv b) { return _mm512_mul_ps(a, b); }
static inline ndv ndv_fma(ndv a, ndv b, ndv c) { return _mm512_fmadd_ps(a, b, c); }
static inline ndv ndv_max(ndv a, ndv b) { return _mm512_max_ps(a, b); }
static inline float ndv_hsum(ndv v) { return _mm512_reduce_add_ps(v); }
static inline float ndv_hmax(ndv v) { return _mm512_reduce_max_ps(v); }
/* 2^n for integral-valued n in [-126, 127] */
static inline ndv ndv_pow2i(ndv n)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
}
static inline ndv ndv_round(ndv x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
/* ND_VW int8 values widened to float (the int8 KV cache) */
static inline ndv ndv_load_i8(const int8_t *p)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
#elif defined(__AVX2__) && defined(__FMA__)
#define ND_VW 8
typedef __m256 ndv;
static inline ndv ndv_zero(void) { return _mm256_setzero_ps(); }
static inline ndv ndv_set1(float x) { return _mm256_set1_ps(x); }
static inline ndv ndv_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void ndv_store(float *p, ndv v) { _mm256_storeu_ps(p, v); }
static inline ndv ndv_add(ndv a, ndv b) { return _mm256_add_ps(a, b); }
static inline ndv ndv_sub(ndv a, ndv b) { return _mm256_sub_ps(a, b); }
static inline ndv ndv_mul(ndv a, ndv b) { return _mm256_mul_ps(a, b); }
static inline ndv ndv_fma(ndv a, ndv b, ndv c) { return _mm256_fmadd_ps(a, b, c); }
static inline ndv ndv_max(ndv a, ndv b) { return _mm256_max_ps(a, b); }
static inline float ndv_hsum(ndv v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float ndv_hmax(ndv v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline ndv ndv_pow2i(ndv n)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}
static inline ndv ndv_round(ndv x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline ndv ndv_load_i8(const int8_t *p)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}
#elif defined(ND_SIMD_NEON)
#define ND_VW 4
typedef float32x4_t ndv;
static inline ndv ndv_zero(void) { return vdupq_n_f32(0.0f); }
static inline ndv ndv_set1(float x) { return vdupq_n_f32(x); }
static inline ndv ndv_load(const float *p) { return vld1q_f32(p); }
static inline void ndv_store(float *p, ndv v) { vst1q_f32(p, v); }
static inline ndv ndv_add(ndv a, ndv b) { return vaddq_f32(a, b); }
static inline ndv ndv_sub(ndv a, ndv b) { return vsubq_f32(a, b); }
static inline ndv ndv_mul(ndv a, ndv b) { return vmulq_f32(a, b); }
static inline ndv ndv_fma(ndv a, ndv b, ndv c) { return vfmaq_f32(c, a, b); }
static inline ndv ndv_max(ndv a, ndv b) { return vmaxq_f32(a, b); }
static inline float ndv_hsum(ndv v) { return vaddvq_f32(v); }
static inline float ndv_hmax(ndv v) { return vmaxvq_f32(v); }
static inline ndv ndv_pow2i(ndv n)
{
    return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23));
}
static inline ndv ndv_round(ndv x) { return vrndnq_f32(x); }
static inline ndv ndv_load_i8(const int8_t *p)
{
    int32_t w;
    memcpy(&w, p, 4);
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(w))))));
}
#elif defined(ND_SIMD_WASM)
/* WebAssembly SIMD128 has no fused multiply-add: ndv_fma is a multiply and an add */
#define ND_VW 4
typedef v128_t ndv;
static inline ndv ndv_zero(void) { return wasm_f32x4_splat(0.0f); }
static inline ndv ndv_set1(float x) { return wasm_f32x4_splat(x); }
static inline ndv ndv_load(const float *p) { return wasm_v128_load(p); }
static inline void ndv_store(float *p, ndv v) { wasm_v128_store(p, v); }
static inline ndv ndv_add(ndv a, ndv b) { return wasm_f32x4_add(a, b); }
static inline ndv ndv_sub(ndv a, ndv b) { return wasm_f32x4_sub(a, b); }
static inline ndv ndv_mul(ndv a, ndv b) { return wasm_f32x4_mul(a, b); }
static inline ndv ndv_fma(ndv a, ndv b, ndv c) { return wasm_f32x4_add(wasm_f32x4_mul(a, b), c); }
static inline ndv ndv_max(ndv a, ndv b) { return wasm_f32x4_pmax(a, b); }
static inline float ndv_hsum(ndv v)
{
    return (wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1)) +
           (wasm_f32x4_extract_lane(v, 2) + wasm_f32x4_extract_lane(v, 3));
}
static inline float ndv_hmax(ndv v)
{
    float a = wasm_f32x4_extract_lane(v, 0), b = wasm_f32x4_extract_lane(v, 1);
    float c = wasm_f32x4_extract_lane(v, 2), d = wasm_f32x4_extract_lane(v, 3);
    a = a > b ? a : b, c = c > d ? c : d;
    return a > c ? a : c;
}
static inline ndv ndv_pow2i(ndv n)
{
    return wasm_i32x4_shl(wasm_i32x4_add(wasm_i32x4_trunc_sat_f32x4(n), wasm_i32x4_splat(127)), 23);
}
static inline ndv ndv_round(ndv x) { return wasm_f32x4_nearest(x); }
static inline ndv ndv_load_i8(const int8_t *p)
{
    return wasm_f32x4_make((float)p[0], (float)p[1], (float)p[2], (float)p[3]);
}
#else
#define ND_VW 1
typedef float ndv;
static inline ndv ndv_zero(void) { return 0.0f; }
static inline ndv ndv_set1(float x) { return x; }
static inline ndv ndv_load(const float *p) { return *p; }
static inline void ndv_store(float *p, ndv v) { *p = v; }
static inline ndv ndv_add(ndv a, ndv b) { return a + b; }
static inline ndv ndv_sub(ndv a, ndv b) { return a - b; }
static inline ndv ndv_mul(ndv a, ndv b) { return a * b; }
static inline ndv ndv_fma(ndv a, ndv b, ndv c) { return a * b + c; }
static inline ndv ndv_max(ndv a, ndv b) { return a > b ? a : b; }
static inline ndv ndv_load_i8(const int8_t *p) { return (float)*p; }
static inline float ndv_hsum(ndv v) { return v; }
static inline float ndv_hmax(ndv v) { return v; }
static inline ndv ndv_pow2i(ndv n)
{
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
static inline ndv ndv_round(ndv x) { return nearbyintf(x); }
#endif

/* exp(x) for x <= 0 (softmax weights), relative error ~2e-7: x = n ln2 + r,
 * |r| <= ln2/2, exp(r) by a degree-6 polynomial, times 2^n.  Inputs below
 * -87 give ~0 (a softmax weight that small does not matter). */
static inline ndv ndv_exp_neg(ndv x)
{
    x = ndv_max(x, ndv_set1(-87.0f));
    ndv n = ndv_round(ndv_mul(x, ndv_set1(1.44269504088896341f)));
    ndv r = ndv_fma(n, ndv_set1(-0.693359375f), x); /* ln2 split in two for an exact first step */
    r = ndv_fma(n, ndv_set1(2.12194440e-4f), r);
    ndv p = ndv_set1(1.0f / 720.0f);
    p = ndv_fma(p, r, ndv_set1(1.0f / 120.0f));
    p = ndv_fma(p, r, ndv_set1(1.0f / 24.0f));
    p = ndv_fma(p, r, ndv_set1(1.0f / 6.0f));
    p = ndv_fma(p, r, ndv_set1(0.5f));
    p = ndv_fma(p, r, ndv_set1(1.0f));
    p = ndv_fma(p, r, ndv_set1(1.0f));
    return ndv_mul(p, ndv_pow2i(n));
}

static inline ndv ndv_min(ndv a, ndv b)
{
#if ND_VW == 16
    return _mm512_min_ps(a, b);
#elif ND_VW == 8
    return _mm256_min_ps(a, b);
#elif defined(ND_SIMD_NEON)
    return vminq_f32(a, b);
#elif defined(ND_SIMD_WASM)
    return wasm_f32x4_pmin(a, b);
#else
    return a < b ? a : b;
#endif
}
static inline ndv ndv_div(ndv a, ndv b)
{
#if ND_VW == 16
    return _mm512_div_ps(a, b);
#elif ND_VW == 8
    return _mm256_div_ps(a, b);
#elif defined(ND_SIMD_NEON)
    return vdivq_f32(a, b);
#elif defined(ND_SIMD_WASM)
    return wasm_f32x4_div(a, b);
#else
    return a / b;
#endif
}

/* exp(x) for any x: clamped to [-87, 88] (results saturate near 0 / 1.6e38). */
static inline ndv ndv_exp(ndv x) { return ndv_exp_neg(ndv_min(x, ndv_set1(88.0f))); }

/* x * sigmoid(x) and sigmoid(x), elementwise */
static inline ndv ndv_silu(ndv x) { return ndv_div(x, ndv_add(ndv_set1(1.0f), ndv_exp(ndv_sub(ndv_zero(), x)))); }
static inline ndv ndv_sigmoid(ndv x) { return ndv_div(ndv_set1(1.0f), ndv_add(ndv_set1(1.0f), ndv_exp(ndv_sub(ndv_zero(), x)))); }

/* y += a * x over n floats */
static inline void nd_simd_axpy(float *y, float a, const float *x, int n)
{
    int i = 0;
    ndv av = ndv_set1(a);
    for (; i + ND_VW <= n; i += ND_VW) ndv_store(y + i, ndv_fma(av, ndv_load(x + i), ndv_load(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

/* a . b over n floats (any n). */
static inline float nd_simd_dot(const float *a, const float *b, int n)
{
    int i = 0;
    ndv acc = ndv_zero();
    for (; i + ND_VW <= n; i += ND_VW) acc = ndv_fma(ndv_load(a + i), ndv_load(b + i), acc);
    float s = ndv_hsum(acc);
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

#endif
