/* cpu_matmul.c - y = W x for F32 and CQ-quantised matrices, and row gathers.
 *
 * F32: plain dot products, four rows at a time so each activation load feeds
 * four rows.
 *
 * CQ (SPEC section 8): a weight row is w = (cb[code] * norm) H128 per
 * 128-group, and H128 is orthonormal and symmetric, so
 *     w . x = sum_g norm_g * (cb[codes_g] . (H128 x_g)).
 * Each 128-group of the activation is rotated once per call; after that a row
 * is a codebook lookup-and-add over its packed codes.  For one or two tokens
 * the codes are decoded straight into the dot product; for a batch (prefill)
 * each row is decoded once into a small float buffer and reused across the T
 * tokens.
 *
 * Work is split into tasks of ND_CPU_ROWS_PER_TASK rows; every output element
 * is computed by one thread with the same instruction sequence, so results
 * are identical for any thread count. */
#include "backend/cpu/cpu_isa_names.h" /* first: this copy's kernel names (compiled once per ISA) */
#include <math.h>
#include <string.h>

#if defined(__AVX2__) || defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

#include "backend/cpu/cpu_cq_int.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_simd.h" /* ndv for the 4-wide (NEON, SIMD128) paths */
#include "core/fp16.h"

/* ---------------------------------------------------------------- dots */

#if defined(__AVX512F__)
static inline float hsum512(__m512 v) { return _mm512_reduce_add_ps(v); }
#endif
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
static inline float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#endif

float nd_cpu_dot(const float *a, const float *b, int n)
{
    int i = 0;
    float s = 0.0f;
#if defined(__AVX512F__)
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), a1);
    }
    for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), a0);
    s = hsum512(_mm512_add_ps(a0, a1));
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), a1);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), a0);
    s = hsum256(_mm256_add_ps(a0, a1));
#else
    float p[8] = {0};
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) p[k] += a[i + k] * b[i + k];
    s = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
#endif
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* out[k] = w[k] . x for four rows sharing one activation. */
static void dot4(const float *w0, const float *w1, const float *w2, const float *w3, const float *x, int n,
                 float out[4])
{
    int i = 0;
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#if defined(__AVX512F__)
    __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps(), c3 = _mm512_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        __m512 xv = _mm512_loadu_ps(x + i);
        c0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + i), xv, c0);
        c1 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + i), xv, c1);
        c2 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + i), xv, c2);
        c3 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + i), xv, c3);
    }
    s0 = hsum512(c0), s1 = hsum512(c1), s2 = hsum512(c2), s3 = hsum512(c3);
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 c0 = _mm256_setzero_ps(), c1 = _mm256_setzero_ps(), c2 = _mm256_setzero_ps(), c3 = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        __m256 xv = _mm256_loadu_ps(x + i);
        c0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + i), xv, c0);
        c1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + i), xv, c1);
        c2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + i), xv, c2);
        c3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + i), xv, c3);
    }
    s0 = hsum256(c0), s1 = hsum256(c1), s2 = hsum256(c2), s3 = hsum256(c3);
#elif ND_VW == 4 /* NEON, WebAssembly SIMD128: the same, four lanes wide (cpu_simd.h) */
    ndv c0 = ndv_zero(), c1 = c0, c2 = c0, c3 = c0;
    for (; i + 4 <= n; i += 4) {
        ndv xv = ndv_load(x + i);
        c0 = ndv_fma(ndv_load(w0 + i), xv, c0), c1 = ndv_fma(ndv_load(w1 + i), xv, c1);
        c2 = ndv_fma(ndv_load(w2 + i), xv, c2), c3 = ndv_fma(ndv_load(w3 + i), xv, c3);
    }
    s0 = ndv_hsum(c0), s1 = ndv_hsum(c1), s2 = ndv_hsum(c2), s3 = ndv_hsum(c3);
#endif
    for (; i < n; i++) {
        s0 += w0[i] * x[i];
        s1 += w1[i] * x[i];
        s2 += w2[i] * x[i];
        s3 += w3[i] * x[i];
    }
    out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}

/* ---------------------------------------------------------------- CQ codes */

int nd_cpu_cq_storage_bits(const nd_matrix *w) { return w->cq_bits == ND_CQ_TERNARY ? 2 : w->cq_bits; }

static inline size_t cq_row_bytes(const nd_matrix *w)
{
    return (size_t)w->cols_pad * (size_t)nd_cpu_cq_storage_bits(w) / 8;
}

static inline float cq_norm(const nd_matrix *w, int r, int g)
{
    const uint8_t *p = w->cq_norms + ((size_t)r * (size_t)(w->cols_pad / ND_CQ_GROUP) + (size_t)g) * 2;
#if defined(__F16C__)
    return _cvtsh_ss((unsigned short)(p[0] | (p[1] << 8))); /* exact, like the portable conversion */
#else
    return nd_half_to_float((uint16_t)(p[0] | (p[1] << 8)));
#endif
}

static void cq_codebook16(const nd_matrix *w, float cb[16])
{
    int n = 1 << nd_cpu_cq_storage_bits(w);
    for (int i = 0; i < 16; i++) cb[i] = i < n ? w->codebook[i] : 0.0f;
}

/* Sixteen codes starting at a 16-code boundary of a row: 2*sb bytes. */
static inline uint64_t load_code_bits(const uint8_t *p, int sb)
{
    uint64_t v = 0;
    switch (sb) { /* constant sizes so the copies become plain loads */
    case 2: { uint32_t t; memcpy(&t, p, 4); v = t; break; }
    case 3: { uint32_t t; uint16_t u; memcpy(&t, p, 4); memcpy(&u, p + 4, 2); v = t | ((uint64_t)u << 32); break; }
    default: memcpy(&v, p, 8); break;
    }
    return v;
}

#if defined(__AVX512F__)
static inline __m512 cq_values16(uint64_t bits, int sb, __m512i shifts, __m512i mask, __m512 cb)
{
    uint32_t lo = (uint32_t)bits, hi = (uint32_t)(bits >> (8 * sb));
    __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32((int)lo)), _mm256_set1_epi32((int)hi), 1);
    __m512i codes = _mm512_and_si512(_mm512_srlv_epi32(v, shifts), mask);
    return _mm512_permutexvar_ps(codes, cb);
}
#endif

/* Decode one group in the rotated domain: out[i] = cb[code_i] * norm. */
static inline __attribute__((always_inline)) void cq_decode_group_sb(const nd_matrix *w, int r, int g, int sb,
                                                                   const float cb[16], float *out)
{
    const uint8_t *p = w->cq_idx + (size_t)r * cq_row_bytes(w) + (size_t)g * 16u * (size_t)sb;
    float norm = cq_norm(w, r, g);
#if defined(__AVX512F__)
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
    __m512i shifts = _mm512_mullo_epi32(lane, _mm512_set1_epi32(sb));
    __m512i mask = _mm512_set1_epi32((1 << sb) - 1);
    __m512 cbv = _mm512_loadu_ps(cb), nv = _mm512_set1_ps(norm);
    for (int k = 0; k < 8; k++)
        _mm512_storeu_ps(out + 16 * k,
                         _mm512_mul_ps(cq_values16(load_code_bits(p + 2 * sb * k, sb), sb, shifts, mask, cbv), nv));
#else
    for (int k = 0; k < 8; k++) {
        uint64_t bits = load_code_bits(p + 2 * sb * k, sb);
        unsigned m = (1u << sb) - 1;
        for (int i = 0; i < 16; i++) out[16 * k + i] = cb[(bits >> (i * sb)) & m] * norm;
    }
#endif
}

void nd_cpu_cq_decode_group(const nd_matrix *w, int r, int g, float *out)
{
    float cb[16];
    cq_codebook16(w, cb);
    switch (nd_cpu_cq_storage_bits(w)) {
    case 2: cq_decode_group_sb(w, r, g, 2, cb, out); break;
    case 3: cq_decode_group_sb(w, r, g, 3, cb, out); break;
    default: cq_decode_group_sb(w, r, g, 4, cb, out); break;
    }
}

void nd_cpu_cq_decode_row_rotated(const nd_matrix *w, int r, float *out)
{
    for (int g = 0; g < w->cols_pad / ND_CQ_GROUP; g++) nd_cpu_cq_decode_group(w, r, g, out + g * ND_CQ_GROUP);
}

/* Fused lookup-and-add: row r of W against one rotated activation. */
static inline __attribute__((always_inline)) float cq_row_dot_sb(const nd_matrix *w, int r, const float *xr, int sb,
                                                               const float cb[16])
{
    const uint8_t *p = w->cq_idx + (size_t)r * cq_row_bytes(w);
    int groups = w->cols_pad / ND_CQ_GROUP;
#if defined(__AVX512F__)
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
    __m512i shifts = _mm512_mullo_epi32(lane, _mm512_set1_epi32(sb));
    __m512i mask = _mm512_set1_epi32((1 << sb) - 1);
    __m512 cbv = _mm512_loadu_ps(cb), total = _mm512_setzero_ps();
    for (int g = 0; g < groups; g++) {
        const uint8_t *pg = p + (size_t)g * 16u * (size_t)sb;
        const float *xg = xr + g * ND_CQ_GROUP;
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        for (int k = 0; k < 8; k += 2) {
            a0 = _mm512_fmadd_ps(cq_values16(load_code_bits(pg + 2 * sb * k, sb), sb, shifts, mask, cbv),
                                 _mm512_loadu_ps(xg + 16 * k), a0);
            a1 = _mm512_fmadd_ps(cq_values16(load_code_bits(pg + 2 * sb * (k + 1), sb), sb, shifts, mask, cbv),
                                 _mm512_loadu_ps(xg + 16 * (k + 1)), a1);
        }
        total = _mm512_fmadd_ps(_mm512_add_ps(a0, a1), _mm512_set1_ps(cq_norm(w, r, g)), total);
    }
    return hsum512(total);
#else
    float total = 0.0f;
    unsigned m = (1u << sb) - 1;
    for (int g = 0; g < groups; g++) {
        const uint8_t *pg = p + (size_t)g * 16u * (size_t)sb;
        const float *xg = xr + g * ND_CQ_GROUP;
        float acc[16] = {0};
        for (int k = 0; k < 8; k++) {
            uint64_t bits = load_code_bits(pg + 2 * sb * k, sb);
            for (int i = 0; i < 16; i++) acc[i] += cb[(bits >> (i * sb)) & m] * xg[16 * k + i];
        }
        float s = 0.0f;
        for (int i = 0; i < 16; i++) s += acc[i];
        total += s * cq_norm(w, r, g);
    }
    return total;
#endif
}

/* ---------------------------------------------------------------- 4-bit fast path
 *
 * A 128-group of 4-bit codes is 64 bytes: one AVX-512 register, where 32-bit
 * lane j holds codes 8j..8j+7 (code 8j+k in bits 4k..4k+3).  vpermps only
 * reads the low 4 bits of each index lane, so shifting the register right by
 * 4k and permuting the 16-entry codebook yields the values of codes
 * 8j+k for j = 0..15 with no masking: three instructions per 16 weights.  The
 * values come out in a permuted order, so the rotated activation is stored in
 * the same order ("P4 layout", set once per call by rotate_task) and the dot
 * product pairs the right terms.  AVX2 does the same per 64 codes with two
 * 8-entry permutes and a blend; the portable build uses the natural order. */

#define P4_PREFETCH_BYTES 768

/* P4 position of natural index i within a group. */
static inline int p4_pos(int i)
{
#if defined(__AVX512F__)
    return (i % 8) * 16 + i / 8;
#elif defined(__AVX2__) && defined(__FMA__)
    return (i / 64) * 64 + (i % 8) * 8 + (i % 64) / 8;
#else
    return i;
#endif
}

#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
/* codes in the low 4 bits of each lane (higher bits ignored) -> codebook values */
static inline __m256 p4_lookup8(__m256i idx, __m256 cb_lo, __m256 cb_hi)
{
    __m256 lo = _mm256_permutevar8x32_ps(cb_lo, idx), hi = _mm256_permutevar8x32_ps(cb_hi, idx);
    return _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28))); /* bit 3 -> sign */
}
#endif

/* Row r of a 4-bit CQ matrix . x (x rotated, P4 layout). */
static float p4_row_dot(const nd_matrix *w, int r, const float *x, const float cb[16])
{
    int groups = w->cols_pad / ND_CQ_GROUP;
    const uint8_t *p = w->cq_idx + (size_t)r * (size_t)groups * 64u;
#if defined(__AVX512F__)
    __m512 cbv = _mm512_loadu_ps(cb), total = _mm512_setzero_ps();
    for (int g = 0; g < groups; g++) {
        /* the codes stream from memory (the model is bigger than the caches):
         * ask for the line a few groups ahead, across page boundaries too */
        __builtin_prefetch(p + (size_t)g * 64u + P4_PREFETCH_BYTES);
        __m512i c = _mm512_loadu_si512((const void *)(p + (size_t)g * 64u));
        const float *xg = x + g * ND_CQ_GROUP;
        __m512 a0 = _mm512_mul_ps(_mm512_permutexvar_ps(c, cbv), _mm512_loadu_ps(xg));
        __m512 a1 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(c, 4), cbv), _mm512_loadu_ps(xg + 16));
        a0 = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(c, 8), cbv), _mm512_loadu_ps(xg + 32), a0);
        a1 = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(c, 12), cbv), _mm512_loadu_ps(xg + 48), a1);
        a0 = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(c, 16), cbv), _mm512_loadu_ps(xg + 64), a0);
        a1 = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(c, 20), cbv), _mm512_loadu_ps(xg + 80), a1);
        a0 = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(c, 24), cbv), _mm512_loadu_ps(xg + 96), a0);
        a1 = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(c, 28), cbv), _mm512_loadu_ps(xg + 112), a1);
        total = _mm512_fmadd_ps(_mm512_add_ps(a0, a1), _mm512_set1_ps(cq_norm(w, r, g)), total);
    }
    return hsum512(total);
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 lo = _mm256_loadu_ps(cb), hi = _mm256_loadu_ps(cb + 8), total = _mm256_setzero_ps();
    for (int g = 0; g < groups; g++) {
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        __builtin_prefetch(p + (size_t)g * 64u + P4_PREFETCH_BYTES);
        for (int h = 0; h < 2; h++) {
            __m256i c = _mm256_loadu_si256((const __m256i *)(p + (size_t)g * 64u + 32u * (unsigned)h));
            const float *xh = x + g * ND_CQ_GROUP + h * 64;
            for (int k = 0; k < 8; k += 2) {
                a0 = _mm256_fmadd_ps(p4_lookup8(_mm256_srli_epi32(c, 4 * k), lo, hi), _mm256_loadu_ps(xh + 8 * k), a0);
                a1 = _mm256_fmadd_ps(p4_lookup8(_mm256_srli_epi32(c, 4 * k + 4), lo, hi), _mm256_loadu_ps(xh + 8 * k + 8),
                                     a1);
            }
        }
        total = _mm256_fmadd_ps(_mm256_add_ps(a0, a1), _mm256_set1_ps(cq_norm(w, r, g)), total);
    }
    return hsum256(total);
#else
    float total = 0.0f;
    for (int g = 0; g < groups; g++) {
        const uint8_t *pg = p + (size_t)g * 64u;
        const float *xg = x + g * ND_CQ_GROUP;
        float acc[8] = {0};
        for (int i = 0; i < ND_CQ_GROUP; i += 2) {
            acc[(i / 2) % 8] += cb[pg[i / 2] & 15] * xg[i] + cb[pg[i / 2] >> 4] * xg[i + 1];
        }
        float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        total += s * cq_norm(w, r, g);
    }
    return total;
#endif
}

/* Row r of a 4-bit CQ matrix decoded (rotated domain, times the norms) in P4 order. */
static void p4_decode_row(const nd_matrix *w, int r, const float cb[16], float *out)
{
    int groups = w->cols_pad / ND_CQ_GROUP;
    const uint8_t *p = w->cq_idx + (size_t)r * (size_t)groups * 64u;
    for (int g = 0; g < groups; g++) {
        float norm = cq_norm(w, r, g), *og = out + g * ND_CQ_GROUP;
        const uint8_t *pg = p + (size_t)g * 64u;
#if defined(__AVX512F__)
        __m512 cbv = _mm512_mul_ps(_mm512_loadu_ps(cb), _mm512_set1_ps(norm));
        __m512i c = _mm512_loadu_si512((const void *)pg);
        for (int k = 0; k < 8; k++)
            _mm512_storeu_ps(og + 16 * k, _mm512_permutexvar_ps(_mm512_srlv_epi32(c, _mm512_set1_epi32(4 * k)), cbv));
#elif defined(__AVX2__) && defined(__FMA__)
        __m256 nv = _mm256_set1_ps(norm);
        __m256 lo = _mm256_mul_ps(_mm256_loadu_ps(cb), nv), hi = _mm256_mul_ps(_mm256_loadu_ps(cb + 8), nv);
        for (int h = 0; h < 2; h++) {
            __m256i c = _mm256_loadu_si256((const __m256i *)(pg + 32 * h));
            for (int k = 0; k < 8; k++)
                _mm256_storeu_ps(og + h * 64 + 8 * k,
                                 p4_lookup8(_mm256_srlv_epi32(c, _mm256_set1_epi32(4 * k)), lo, hi));
        }
#else
        for (int i = 0; i < ND_CQ_GROUP; i++) og[i] = cb[(pg[i / 2] >> (4 * (i & 1))) & 15] * norm;
#endif
    }
}

/* ---------------------------------------------------------------- tasks */

#define MULTI_MAX 4

/* One job: up to MULTI_MAX matrices sharing the same input (q, k, v and
 * gate all read the same normed activation), so the input is rotated once
 * and all rows go out as one batch of tasks. */
typedef struct matmul_job {
    int n_mats;
    const nd_matrix *w[MULTI_MAX];
    float *y[MULTI_MAX];
    int ldy[MULTI_MAX];
    int first_task[MULTI_MAX + 1];
    float cb[MULTI_MAX][16];
    const float *x;  /* the activations as given */
    const float *xr; /* the rotated activations (CQ), cols_pad apart */
    const float *xp; /* the same in P4 order, for 4-bit matrices */
    int T, ldx;
    float *decode; /* CQ batch path: per-thread buffers of 4 rows * cols_pad */
} matmul_job;

#if defined(__AVX512F__)
/* Four rows times four tokens: 16 accumulators, so every load feeds four
 * multiply-adds (the prefill hot loop).  n is a multiple of 16. */
static void tile4x4(const float *const w[4], const float *x, int ldx, int n, float out[4][4])
{
    /* written out by hand: the compiler must keep all 16 sums in registers */
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00, c13 = c00;
    __m512 c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00, c32 = c00, c33 = c00;
    const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * (size_t)ldx, *x3 = x + 3 * (size_t)ldx;
    for (int i = 0; i < n; i += 16) {
        __m512 a0 = _mm512_loadu_ps(x0 + i), a1 = _mm512_loadu_ps(x1 + i), a2 = _mm512_loadu_ps(x2 + i),
               a3 = _mm512_loadu_ps(x3 + i);
        __m512 wv = _mm512_loadu_ps(w[0] + i);
        c00 = _mm512_fmadd_ps(wv, a0, c00), c01 = _mm512_fmadd_ps(wv, a1, c01);
        c02 = _mm512_fmadd_ps(wv, a2, c02), c03 = _mm512_fmadd_ps(wv, a3, c03);
        wv = _mm512_loadu_ps(w[1] + i);
        c10 = _mm512_fmadd_ps(wv, a0, c10), c11 = _mm512_fmadd_ps(wv, a1, c11);
        c12 = _mm512_fmadd_ps(wv, a2, c12), c13 = _mm512_fmadd_ps(wv, a3, c13);
        wv = _mm512_loadu_ps(w[2] + i);
        c20 = _mm512_fmadd_ps(wv, a0, c20), c21 = _mm512_fmadd_ps(wv, a1, c21);
        c22 = _mm512_fmadd_ps(wv, a2, c22), c23 = _mm512_fmadd_ps(wv, a3, c23);
        wv = _mm512_loadu_ps(w[3] + i);
        c30 = _mm512_fmadd_ps(wv, a0, c30), c31 = _mm512_fmadd_ps(wv, a1, c31);
        c32 = _mm512_fmadd_ps(wv, a2, c32), c33 = _mm512_fmadd_ps(wv, a3, c33);
    }
    out[0][0] = hsum512(c00), out[0][1] = hsum512(c01), out[0][2] = hsum512(c02), out[0][3] = hsum512(c03);
    out[1][0] = hsum512(c10), out[1][1] = hsum512(c11), out[1][2] = hsum512(c12), out[1][3] = hsum512(c13);
    out[2][0] = hsum512(c20), out[2][1] = hsum512(c21), out[2][2] = hsum512(c22), out[2][3] = hsum512(c23);
    out[3][0] = hsum512(c30), out[3][1] = hsum512(c31), out[3][2] = hsum512(c32), out[3][3] = hsum512(c33);
}
#endif

/* Apply four rows (given as float pointers) to every token. */
static void rows4_all_tokens(const float *x, int ldx, int T, const float *w0, const float *w1, const float *w2,
                             const float *w3, int n, float *y, int ldy, int r, int nr)
{
    int t = 0;
#if defined(__AVX512F__)
    if (n % 16 == 0) {
        const float *w[4] = {w0, w1, w2, w3};
        for (; t + 4 <= T; t += 4) {
            float out[4][4];
            tile4x4(w, x + (size_t)t * (size_t)ldx, ldx, n, out);
            for (int b = 0; b < 4; b++) {
                float *yt = y + (size_t)(t + b) * (size_t)ldy + r;
                for (int k = 0; k < nr; k++) yt[k] = out[k][b];
            }
        }
    }
#endif
    for (; t < T; t++) {
        float out[4];
        dot4(w0, w1, w2, w3, x + (size_t)t * (size_t)ldx, n, out);
        float *yt = y + (size_t)t * (size_t)ldy + r;
        for (int k = 0; k < nr; k++) yt[k] = out[k];
    }
}

static void f32_rows(const matmul_job *j, int mi, int r0, int r1)
{
    const nd_matrix *w = j->w[mi];
    for (int r = r0; r < r1; r += 4) {
        int nr = r1 - r < 4 ? r1 - r : 4;
        const float *rw[4];
        for (int k = 0; k < 4; k++) rw[k] = w->f32 + (size_t)(r + (k < nr ? k : 0)) * (size_t)w->cols;
        rows4_all_tokens(j->x, j->ldx, j->T, rw[0], rw[1], rw[2], rw[3], w->cols, j->y[mi], j->ldy[mi], r, nr);
    }
}

static void cq_rows(const matmul_job *j, int mi, int r0, int r1, int thread)
{
    const nd_matrix *w = j->w[mi];
    const float *cb = j->cb[mi];
    int sb = nd_cpu_cq_storage_bits(w);
    if (sb == 4) {
        if (j->T <= 2) {
            for (int t = 0; t < j->T; t++) {
                const float *xt = j->xp + (size_t)t * (size_t)w->cols_pad;
                float *yt = j->y[mi] + (size_t)t * (size_t)j->ldy[mi];
                for (int r = r0; r < r1; r++) yt[r] = p4_row_dot(w, r, xt, cb);
            }
            return;
        }
        float *buf = j->decode + (size_t)thread * 4u * (size_t)w->cols_pad;
        for (int r = r0; r < r1; r += 4) {
            int nr = r1 - r < 4 ? r1 - r : 4;
            for (int k = 0; k < nr; k++) p4_decode_row(w, r + k, cb, buf + (size_t)k * (size_t)w->cols_pad);
            const float *rw[4];
            for (int k = 0; k < 4; k++) rw[k] = buf + (size_t)(k < nr ? k : 0) * (size_t)w->cols_pad;
            rows4_all_tokens(j->xp, w->cols_pad, j->T, rw[0], rw[1], rw[2], rw[3], w->cols_pad, j->y[mi], j->ldy[mi],
                             r, nr);
        }
        return;
    }
    if (j->T <= 2) { /* decode: codes straight into the dot product */
        for (int t = 0; t < j->T; t++) {
            const float *xt = j->xr + (size_t)t * (size_t)w->cols_pad;
            float *yt = j->y[mi] + (size_t)t * (size_t)j->ldy[mi];
            for (int r = r0; r < r1; r++) {
                switch (sb) {
                case 2: yt[r] = cq_row_dot_sb(w, r, xt, 2, cb); break;
                case 3: yt[r] = cq_row_dot_sb(w, r, xt, 3, cb); break;
                default: yt[r] = cq_row_dot_sb(w, r, xt, 4, cb); break;
                }
            }
        }
        return;
    }
    /* batch: decode four rows once, reuse them for every token */
    float *buf = j->decode + (size_t)thread * 4u * (size_t)w->cols_pad;
    for (int r = r0; r < r1; r += 4) {
        int nr = r1 - r < 4 ? r1 - r : 4;
        for (int k = 0; k < nr; k++) nd_cpu_cq_decode_row_rotated(w, r + k, buf + (size_t)k * (size_t)w->cols_pad);
        const float *rw[4];
        for (int k = 0; k < 4; k++) rw[k] = buf + (size_t)(k < nr ? k : 0) * (size_t)w->cols_pad;
        rows4_all_tokens(j->xr, w->cols_pad, j->T, rw[0], rw[1], rw[2], rw[3], w->cols_pad, j->y[mi], j->ldy[mi], r,
                         nr);
    }
}

static void matmul_task(void *ctx, int task, int thread)
{
    const matmul_job *j = ctx;
    int mi = 0;
    while (task >= j->first_task[mi + 1]) mi++;
    const nd_matrix *w = j->w[mi];
    int r0 = (task - j->first_task[mi]) * ND_CPU_ROWS_PER_TASK, r1 = r0 + ND_CPU_ROWS_PER_TASK;
    if (r1 > w->rows) r1 = w->rows;
    if (w->kind == ND_MAT_F32) f32_rows(j, mi, r0, r1);
    else cq_rows(j, mi, r0, r1, thread);
}

typedef struct rotate_job {
    const float *x;
    int ldx, cols, cols_pad;
    float *xr; /* natural order, or NULL when no matrix needs it */
    float *xp; /* P4 order, or NULL */
} rotate_job;

#if defined(__AVX512F__)
/* The P4 order of a rotated group, from its natural order, in registers.
 * Natural index i = 8j + k sits in register i / 16, lane i % 16; P4 puts it
 * in register k, lane j (p4_pos).  With i's bits b6..b0, a register number
 * is (b6 b5 b4) and a lane (b3 b2 b1 b0) before, (b2 b1 b0) and
 * (b6 b5 b4 b3) after: three stages each swap one register bit with one
 * lane bit (two-source permutes of register pairs), and the last stage's
 * indices also put the lane bits in their final order. */
typedef struct p4_transpose {
    __m512i lo[3], hi[3]; /* per stage: the indices for the pair's lower and upper register */
} p4_transpose;

static void p4_transpose_init(p4_transpose *pt)
{
    for (int s = 0; s < 3; s++) {
        int32_t lo[16], hi[16];
        for (int m = 0; m < 16; m++) {
            /* the last stage writes lane m from the lane that holds b6 b5 b4 b3 = m */
            int l = s < 2 ? m : ((m & 1) << 3) | (((m >> 3) & 1) << 2) | (((m >> 2) & 1) << 1) | ((m >> 1) & 1);
            int bit = (l >> s) & 1;
            lo[m] = bit ? 16 + (l ^ (1 << s)) : l;
            hi[m] = bit ? 16 + l : (l | (1 << s));
        }
        pt->lo[s] = _mm512_loadu_si512(lo);
        pt->hi[s] = _mm512_loadu_si512(hi);
    }
}

static void p4_store_group(const p4_transpose *pt, const float *grp, float *dp)
{
    __m512 v[8];
    for (int r = 0; r < 8; r++) v[r] = _mm512_loadu_ps(grp + 16 * r);
    for (int s = 0; s < 3; s++)
        for (int r = 0; r < 8; r++) {
            if ((r >> s) & 1) continue;
            __m512 a = v[r], b = v[r | (1 << s)];
            v[r] = _mm512_permutex2var_ps(a, pt->lo[s], b);
            v[r | (1 << s)] = _mm512_permutex2var_ps(a, pt->hi[s], b);
        }
    for (int r = 0; r < 8; r++) _mm512_storeu_ps(dp + 16 * r, v[r]);
}
#endif

static void rotate_task(void *ctx, int t, int thread)
{
    (void)thread;
    const rotate_job *j = ctx;
    const float *src = j->x + (size_t)t * (size_t)j->ldx;
#if defined(__AVX512F__)
    p4_transpose pt;
    if (j->xp) p4_transpose_init(&pt);
#endif
    for (int g = 0; g < j->cols_pad; g += ND_CQ_GROUP) {
        float grp[ND_CQ_GROUP];
        int take = j->cols - g < ND_CQ_GROUP ? j->cols - g : ND_CQ_GROUP;
        memcpy(grp, src + g, sizeof(float) * (size_t)take);
        memset(grp + take, 0, sizeof(float) * (size_t)(ND_CQ_GROUP - take));
        nd_cpu_hadamard(grp, ND_CQ_GROUP);
        if (j->xr) memcpy(j->xr + (size_t)t * (size_t)j->cols_pad + g, grp, sizeof grp);
        if (j->xp) {
            float *dp = j->xp + (size_t)t * (size_t)j->cols_pad + g;
#if defined(__AVX512F__)
            p4_store_group(&pt, grp, dp);
#else
            for (int i = 0; i < ND_CQ_GROUP; i++) dp[p4_pos(i)] = grp[i];
#endif
        }
    }
}

size_t nd_cpu_matmul_work_floats(const nd_matrix *w, int T, int threads)
{
    if (w->kind != ND_MAT_CQ) return 0;
    /* natural and P4 rotated activations, then four decoded rows per thread */
    return 2u * (size_t)T * (size_t)w->cols_pad + (size_t)threads * 4u * (size_t)w->cols_pad;
}

void nd_cpu_matmul_multi(nd_threadpool *pool, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                         float *const *y, const int *ldy, float *work)
{
    if (T <= 0 || n <= 0) return;
    if (n > MULTI_MAX) { /* more than fit in one job: split */
        nd_cpu_matmul_multi(pool, MULTI_MAX, w, x, T, ldx, y, ldy, work);
        nd_cpu_matmul_multi(pool, n - MULTI_MAX, w + MULTI_MAX, x, T, ldx, y + MULTI_MAX, ldy + MULTI_MAX, work);
        return;
    }
    matmul_job j = {.n_mats = n, .x = x, .T = T, .ldx = ldx};
    size_t macs = 0;
    int any_cq = 0, any_p4 = 0, any_other = 0, cols_pad = 0;
    j.first_task[0] = 0;
    for (int i = 0; i < n; i++) {
        j.w[i] = w[i];
        j.y[i] = y[i];
        j.ldy[i] = ldy[i];
        j.first_task[i + 1] = j.first_task[i] + (w[i]->rows + ND_CPU_ROWS_PER_TASK - 1) / ND_CPU_ROWS_PER_TASK;
        macs += (size_t)w[i]->rows * (size_t)w[i]->cols * (size_t)T;
        if (w[i]->kind == ND_MAT_CQ) {
            any_cq = 1;
            cols_pad = w[i]->cols_pad;
            if (nd_cpu_cq_storage_bits(w[i]) == 4) any_p4 = 1;
            else any_other = 1;
            cq_codebook16(w[i], j.cb[i]);
        }
    }
    if (macs < ND_CPU_PARALLEL_MIN_WORK) pool = NULL;
    if (any_cq) { /* every matrix has the same cols, so the same padding */
        size_t act = (size_t)T * (size_t)cols_pad;
        rotate_job rj = {.x = x, .ldx = ldx, .cols = w[0]->cols, .cols_pad = cols_pad,
                         .xr = any_other ? work : NULL, .xp = any_p4 ? work + act : NULL};
        nd_threadpool_run(act * 8u < ND_CPU_PARALLEL_MIN_WORK ? NULL : pool, T, rotate_task, &rj);
        j.xr = work;
        j.xp = work + act;
        j.decode = work + 2 * act;
    }
    nd_threadpool_run(pool, j.first_task[n], matmul_task, &j);
}

void nd_cpu_matmul(nd_threadpool *pool, const nd_matrix *w, const float *x, int T, int ldx, float *y, int ldy,
                   float *work)
{
    nd_cpu_matmul_multi(pool, 1, &w, x, T, ldx, &y, &ldy, work);
}

/* Rows of W, dequantised: the embedding lookup and the engram tables. */
void nd_cpu_gather_rows(const nd_matrix *w, const int *rows, int n, float *out)
{
    for (int i = 0; i < n; i++) {
        float *o = out + (size_t)i * (size_t)w->cols;
        if (w->kind == ND_MAT_F32) {
            memcpy(o, w->f32 + (size_t)rows[i] * (size_t)w->cols, sizeof(float) * (size_t)w->cols);
            continue;
        }
        /* CQ: decode in the rotated domain one 128-group at a time, then
         * undo the rotation (H128 is its own inverse). */
        float grp[ND_CQ_GROUP];
        int groups = w->cols_pad / ND_CQ_GROUP;
        for (int g = 0; g < groups; g++) {
            nd_cpu_cq_decode_group(w, rows[i], g, grp);
            nd_cpu_hadamard(grp, ND_CQ_GROUP);
            int c0 = g * ND_CQ_GROUP, take = w->cols - c0 < ND_CQ_GROUP ? w->cols - c0 : ND_CQ_GROUP;
            memcpy(o + c0, grp, sizeof(float) * (size_t)take);
        }
    }
}

/* ---------------------------------------------------------------- A8 activations
 *
 * matmul_a8: every token row is quantised once (quant/act_quant.h, nd_cpu_act_quant).  CQ
 * matrices take the int8 codes, rotated per group into exact int16 sums
 * (cpu_cq_int.h), through the integer kernel chosen for this CPU, for any
 * number of tokens: the kernels are blocked GEMMs (each decoded weight
 * vector serves a block of tokens, cpu_cq_int.h), and a token's result does
 * not depend on the batch it came in (decode, prefill, any chunking give the
 * same bits).  Float matrices (the dequantised path) take the fake-quantised
 * floats through the ordinary matmul.  Work: [T*(MULTI_MAX+1) per-token
 * scales, padded to 16 floats][T*cols_pad int16 rotated codes][cols int8 codes][T*cols
 * fake-quantised floats, only when a float matrix is among them]. */

/* Prefill (T >= A8_BATCH_T): fixed tasks of A8_ROWS_PER_TASK_BATCH rows, so
 * each task's weights stay in the cache while every token of the chunk
 * passes over them.  Decode: a range job over units of A8_UNIT_ROWS rows
 * (nd_threadpool_run_ranges), claimed in shrinking chunks so the threads
 * finish within a unit of each other, and each claim is one kernel call per
 * matrix it touches (a call builds its decoding tables once).  A row's
 * arithmetic is the same in any task or chunk, so results do not depend on
 * the thread count or on which thread took what. */
#define A8_ROWS_PER_TASK_BATCH ND_CPU_ROWS_PER_TASK
#define A8_UNIT_ROWS ND_CPU_ROWS_PER_TASK
#define A8_BATCH_T 8

typedef struct a8_job {
    const nd_cq_int_kernel *k;
    int n, unit_rows;
    nd_cq_int_args args[MULTI_MAX];
    int16_t cbq[MULTI_MAX][16], cbq_lo[MULTI_MAX][16];
    int first_unit[MULTI_MAX + 1];
    void (*extra)(void *ctx); /* decode: one more piece of work, unit 0 of the job (or NULL) */
    void *extra_ctx;
    int tblocks, tblock; /* prefill: each unit's tokens in tblocks blocks of tblock (1 block: all) */
} a8_job;

/* Units [u0, u1) of the matrices' rows, one kernel call per matrix they
 * touch, for the tokens [t0, t0 + nt) (nt <= 0: every token).  A token's
 * result does not depend on the block it runs in, so splitting the tokens
 * changes no bit. */
static void a8_units(const a8_job *j, int u0, int u1, int t0, int nt)
{
    for (int mi = 0; mi < j->n && u0 < u1; mi++) {
        if (u0 >= j->first_unit[mi + 1]) continue;
        int end = u1 < j->first_unit[mi + 1] ? u1 : j->first_unit[mi + 1];
        nd_cq_int_args a = j->args[mi];
        a.r0 = (u0 - j->first_unit[mi]) * j->unit_rows;
        a.r1 = (end - j->first_unit[mi]) * j->unit_rows;
        if (a.r1 > a.w->rows) a.r1 = a.w->rows;
        if (nt > 0) {
            a.T = a.T - t0 < nt ? a.T - t0 : nt;
            a.z += (size_t)t0 * (size_t)a.ldz;
            a.tscale += t0;
            a.y += (size_t)t0 * (size_t)a.ldy;
        }
        j->k->gemm(&a);
        u0 = end;
    }
}

/* decode: units [u0, u1) (unit 0 is `extra` when there is one) */
static void a8_range(void *ctx, int u0, int u1, int thread)
{
    (void)thread;
    const a8_job *j = ctx;
    if (j->extra) {
        if (u0 == 0) j->extra(j->extra_ctx), u0 = 1;
        u0--, u1--;
    }
    a8_units(j, u0, u1, 0, 0);
}

/* prefill: task = (unit, block of tokens) */
static void a8_task(void *ctx, int task, int thread)
{
    (void)thread;
    const a8_job *j = ctx;
    int u = task / j->tblocks;
    a8_units(j, u, u + 1, task % j->tblocks * j->tblock, j->tblocks > 1 ? j->tblock : 0);
}

typedef struct a8_quant_job {
    const float *x;
    int ldx, cols, cols_pad;
    float *scale, *xq; /* xq: fake-quantised rows, or NULL */
    int16_t *z;        /* rotated codes, or NULL */
    int8_t *codes;     /* per-thread rows of cols_pad codes */
    const nd_cq_int_kernel *k; /* lays z out its way */
} a8_quant_job;

static void a8_quant_task(void *ctx, int t, int thread)
{
    const a8_quant_job *q = ctx;
    int8_t *codes = q->codes + (size_t)thread * (size_t)q->cols_pad;
    const float *xt = q->x + (size_t)t * (size_t)q->ldx;
    /* this ISA's copy of the one quantiser (quant/act_quant.h) */
    q->scale[t] = nd_cpu_act_quant(xt, q->cols, codes, q->xq ? q->xq + (size_t)t * (size_t)q->cols : NULL);
    if (q->z) {
        int16_t *zt = q->z + (size_t)t * (size_t)q->cols_pad;
        nd_cq_int_rotate_inline(codes, q->cols, q->cols_pad, zt);
        if (q->k->order_z) q->k->order_z(zt, q->cols_pad);
    }
}

/* The scales take whole cache lines, so the rotated codes after them start on
 * a 64-byte boundary (the work block is one): each 64-byte vector load of
 * them then reads one cache line, not two (an AVX-512 GEMM over codes 16
 * bytes off the line ran 10-15% slower). */
static size_t a8_scale_floats(int T) { return ((size_t)T * (MULTI_MAX + 1) + 15) & ~(size_t)15; }

static size_t a8_head_floats(int T, int cols, int cols_pad, int threads, int any_f32)
{
    size_t f = a8_scale_floats(T) + ((size_t)T * (size_t)cols_pad + 1) / 2 +
               ((size_t)threads * (size_t)cols_pad + 3) / 4 + (any_f32 ? (size_t)T * (size_t)cols : 0);
    return (f + 15) & ~(size_t)15;
}

size_t nd_cpu_matmul_a8_work_floats(const nd_matrix *w, int T, int threads)
{
    if (w->kind == ND_MAT_CQ) return a8_head_floats(T, w->cols, w->cols_pad, threads, 0);
    /* a float matrix may share its call with CQ ones: their padded codes too */
    int pad = (w->cols + ND_CQ_GROUP - 1) / ND_CQ_GROUP * ND_CQ_GROUP;
    return a8_head_floats(T, w->cols, pad, threads, 1) + nd_cpu_matmul_work_floats(w, T, threads);
}

void nd_cpu_matmul_a8_with(nd_threadpool *pool, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                           float *const *y, const int *ldy, float *work, void (*extra)(void *), void *extra_ctx)
{
    if (T <= 0 || n <= 0) {
        if (extra) extra(extra_ctx);
        return;
    }
    if (n > MULTI_MAX) {
        nd_cpu_matmul_a8_with(pool, MULTI_MAX, w, x, T, ldx, y, ldy, work, extra, extra_ctx);
        nd_cpu_matmul_a8(pool, n - MULTI_MAX, w + MULTI_MAX, x, T, ldx, y + MULTI_MAX, ldy + MULTI_MAX, work);
        return;
    }
    int cols = w[0]->cols, cols_pad = cols, any_cq = 0, any_f32 = 0;
    for (int i = 0; i < n; i++) {
        if (w[i]->kind == ND_MAT_CQ) cols_pad = w[i]->cols_pad, any_cq = 1;
        else any_f32 = 1;
    }
    int threads = nd_threadpool_threads(pool);
    float *scale = work;
    int16_t *z = (int16_t *)(scale + a8_scale_floats(T));
    int8_t *codes = (int8_t *)(z + (size_t)T * (size_t)cols_pad);
    float *xq = any_f32 ? work + a8_head_floats(T, cols, cols_pad, threads, 0) : NULL;
    float *rest = work + a8_head_floats(T, cols, cols_pad, threads, any_f32);
    const nd_cq_int_kernel *kernel = nd_cpu_cq_int_kernel();
    a8_quant_job qj = {.x = x, .ldx = ldx, .cols = cols, .cols_pad = cols_pad, .scale = scale, .xq = xq,
                       .z = any_cq ? z : NULL, .codes = codes, .k = kernel};
    nd_threadpool_run((size_t)T * (size_t)cols_pad * 16u < ND_CPU_PARALLEL_MIN_WORK ? NULL : pool, T, a8_quant_task, &qj);
    int batch = T >= A8_BATCH_T;
    a8_job j = {.k = kernel, .unit_rows = batch ? A8_ROWS_PER_TASK_BATCH : A8_UNIT_ROWS};
    size_t macs = 0;
    j.first_unit[0] = 0;
    for (int i = 0; i < n; i++) {
        if (w[i]->kind != ND_MAT_CQ) { /* the float path on the fake-quantised rows */
            nd_cpu_matmul_multi(pool, 1, &w[i], xq, T, cols, &y[i], &ldy[i], rest);
            continue;
        }
        int m = j.n++;
        float cbs = nd_cq_int_codebook(w[i], j.cbq[m], j.cbq_lo[m]);
        float *ts = scale + (size_t)T * (size_t)(m + 1); /* scale[0..T) holds s_t */
        for (int t = 0; t < T; t++) ts[t] = scale[t] * cbs / sqrtf((float)ND_CQ_GROUP);
        nd_cq_int_args a = {.w = w[i], .cbq = j.cbq[m], .cbq_lo = j.cbq_lo[m], .z = z, .ldz = cols_pad, .T = T, .tscale = ts, .y = y[i],
                            .ldy = ldy[i]};
        j.args[m] = a;
        j.first_unit[m + 1] = j.first_unit[m] + (w[i]->rows + j.unit_rows - 1) / j.unit_rows;
        macs += (size_t)w[i]->rows * (size_t)cols * (size_t)T;
    }
    if (macs < ND_CPU_PARALLEL_MIN_WORK || j.n == 0) pool = NULL;
    if (batch) {
        if (extra) extra(extra_ctx); /* (decode only: not expected here) */
        /* few rows (the mHC maps: 4 + 4 + 16) would be too few tasks to keep
         * every thread busy: then the tokens are split as well, in blocks of
         * A8_BATCH_T so each task still reuses its decoded weights */
        j.tblocks = 1, j.tblock = T;
        if (pool && j.first_unit[j.n] < 2 * threads) {
            j.tblocks = (T + A8_BATCH_T - 1) / A8_BATCH_T;
            j.tblock = A8_BATCH_T;
        }
        nd_threadpool_run(pool, j.first_unit[j.n] * j.tblocks, a8_task, &j);
        return;
    }
    /* without a pool: one range, i.e. one kernel call per matrix, and extra on this thread */
    j.extra = extra, j.extra_ctx = extra_ctx;
    nd_threadpool_run_ranges(pool, j.first_unit[j.n] + (extra != NULL), 1, a8_range, &j);
}

void nd_cpu_matmul_a8(nd_threadpool *pool, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                      float *const *y, const int *ldy, float *work)
{
    nd_cpu_matmul_a8_with(pool, n, w, x, T, ldx, y, ldy, work, NULL, NULL);
}
