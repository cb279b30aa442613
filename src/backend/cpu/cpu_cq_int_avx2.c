/* cpu_cq_int_avx2.c - the integer CQ kernel on AVX2 (see cpu_cq_int.h).
 * Compiled with the AVX2 flags whatever the baseline, and only called after
 * nd_cpu_cq_int_kernel checked the CPU.
 *
 * AVX2 has neither VPERMW nor 16-bit variable shifts, so 16 codes become 16
 * int16 values like this:
 *   - the 2*sb bytes broadcast, VPSHUFB puts the two bytes holding code
 *     8L+j into word j of lane L;
 *   - VPMULLW by 2^(8-offset) and a shift right by 8 move the code to the
 *     low byte (a multiply is a per-lane left shift);
 *   - the code, with 0x80 in the high byte, indexes two 16-entry VPSHUFB
 *     tables: the low and the high bytes of the int16 codebook (twice: the
 *     codebook's two terms).
 * VPMADDWD then multiplies by 16 int16 activations and adds pairs; a group's
 * 8 vectors alternate between two accumulators, so a lane adds at most 8
 * products of a group (exact, cpu_cq_int.h). */
#include "backend/cpu/cpu_cq_int.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#include <string.h>

typedef struct decoder {
    __m256i ctrl, mul, tlo, thi, ulo, uhi, mask; /* t: the hi term's bytes, u: the lo term's */
} decoder;

static void decoder_init(decoder *d, int sb, const int16_t cbq[16], const int16_t cbq_lo[16])
{
    uint8_t ctrl[32], lo[32], hi[32], lo2[32], hi2[32];
    uint16_t mul[16], mask[16];
    for (int L = 0; L < 2; L++)
        for (int j = 0; j < 8; j++) {
            int rel = sb * j, byte = sb * L + rel / 8, s = rel % 8;
            ctrl[16 * L + 2 * j] = (uint8_t)byte;
            ctrl[16 * L + 2 * j + 1] = s + sb > 8 ? (uint8_t)(byte + 1) : 0x80;
            mul[8 * L + j] = (uint16_t)(1u << (8 - s));
            mask[8 * L + j] = (uint16_t)((1u << sb) - 1);
        }
    for (int k = 0; k < 32; k++) {
        uint16_t v = (uint16_t)cbq[k & 15];
        lo[k] = (uint8_t)(v & 0xff);
        hi[k] = (uint8_t)(v >> 8);
        uint16_t u = (uint16_t)cbq_lo[k & 15];
        lo2[k] = (uint8_t)(u & 0xff);
        hi2[k] = (uint8_t)(u >> 8);
    }
    d->ctrl = _mm256_loadu_si256((const __m256i *)ctrl);
    d->mul = _mm256_loadu_si256((const __m256i *)mul);
    d->tlo = _mm256_loadu_si256((const __m256i *)lo);
    d->thi = _mm256_loadu_si256((const __m256i *)hi);
    d->ulo = _mm256_loadu_si256((const __m256i *)lo2);
    d->uhi = _mm256_loadu_si256((const __m256i *)hi2);
    d->mask = _mm256_loadu_si256((const __m256i *)mask);
}

/* 16 codes -> both codebook terms (*lo_term) */
static inline __m256i decode16(const uint8_t *p, int sb, const decoder *d, __m256i *lo_term)
{
    uint64_t bits = 0;
    memcpy(&bits, p, (size_t)(2 * sb));
    __m256i w = _mm256_shuffle_epi8(_mm256_set1_epi64x((long long)bits), d->ctrl);
    w = _mm256_srli_epi16(_mm256_mullo_epi16(w, d->mul), 8);
    __m256i idx = _mm256_or_si256(_mm256_and_si256(w, d->mask), _mm256_set1_epi16((short)0x8000));
    __m256i lo = _mm256_shuffle_epi8(d->tlo, idx), hi = _mm256_shuffle_epi8(d->thi, idx);
    *lo_term = _mm256_or_si256(_mm256_shuffle_epi8(d->ulo, idx), _mm256_slli_epi16(_mm256_shuffle_epi8(d->uhi, idx), 8));
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 8));
}

static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float norm_at(const nd_matrix *w, int r, int g, int groups)
{
    const uint8_t *p = w->cq_norms + ((size_t)r * (size_t)groups + (size_t)g) * 2;
    return _cvtsh_ss((unsigned short)(p[0] | (p[1] << 8)));
}

/* Rows [r0, r1) against tokens t0 and (NT = 2) t0 + 1. */
static inline __attribute__((always_inline)) void rows_nt(const nd_cq_int_args *a, int t0, const int NT,
                                                         const decoder *d, int sb)
{
    const nd_matrix *w = a->w;
    int groups = w->cols_pad / ND_CQ_GROUP;
    size_t rb = nd_cq_int_row_bytes(w);
    const int16_t *z0 = a->z + (size_t)t0 * (size_t)a->ldz, *z1 = z0 + (NT > 1 ? (size_t)a->ldz : 0);
    for (int r = a->r0; r < a->r1; r++) {
        const uint8_t *p = w->cq_idx + (size_t)r * rb;
        __m256 f0 = _mm256_setzero_ps(), f1 = f0, e0 = f0, e1 = f0;
        for (int g = 0; g < groups; g++) {
            const uint8_t *pg = p + (size_t)g * 16u * (size_t)sb;
            /* per token: hi term even/odd vectors, lo term even/odd vectors */
            __m256i a0 = _mm256_setzero_si256(), a1 = a0, b0 = a0, b1 = a0, la0 = a0, la1 = a0, lb0 = a0, lb1 = a0;
            size_t zo = (size_t)g * ND_CQ_GROUP;
            /* unrolled, so the sums stay in registers (as in cpu_cq_int_avx512.c) */
#pragma GCC unroll 4
            for (int q = 0; q < 8; q += 2) {
                __m256i u0, u1;
                __m256i v0 = decode16(pg + 2 * sb * q, sb, d, &u0), v1 = decode16(pg + 2 * sb * (q + 1), sb, d, &u1);
                __m256i z00 = _mm256_loadu_si256((const __m256i *)(z0 + zo + 16 * q));
                __m256i z01 = _mm256_loadu_si256((const __m256i *)(z0 + zo + 16 * q + 16));
                a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(v0, z00)), a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(v1, z01));
                la0 = _mm256_add_epi32(la0, _mm256_madd_epi16(u0, z00)), la1 = _mm256_add_epi32(la1, _mm256_madd_epi16(u1, z01));
                if (NT > 1) {
                    __m256i z10 = _mm256_loadu_si256((const __m256i *)(z1 + zo + 16 * q));
                    __m256i z11 = _mm256_loadu_si256((const __m256i *)(z1 + zo + 16 * q + 16));
                    b0 = _mm256_add_epi32(b0, _mm256_madd_epi16(v0, z10)), b1 = _mm256_add_epi32(b1, _mm256_madd_epi16(v1, z11));
                    lb0 = _mm256_add_epi32(lb0, _mm256_madd_epi16(u0, z10)), lb1 = _mm256_add_epi32(lb1, _mm256_madd_epi16(u1, z11));
                }
            }
            __m256 nv = _mm256_set1_ps(norm_at(w, r, g, groups));
            f0 = _mm256_fmadd_ps(_mm256_add_ps(_mm256_cvtepi32_ps(a0), _mm256_cvtepi32_ps(a1)), nv, f0);
            e0 = _mm256_fmadd_ps(_mm256_add_ps(_mm256_cvtepi32_ps(la0), _mm256_cvtepi32_ps(la1)), nv, e0);
            if (NT > 1) {
                f1 = _mm256_fmadd_ps(_mm256_add_ps(_mm256_cvtepi32_ps(b0), _mm256_cvtepi32_ps(b1)), nv, f1);
                e1 = _mm256_fmadd_ps(_mm256_add_ps(_mm256_cvtepi32_ps(lb0), _mm256_cvtepi32_ps(lb1)), nv, e1);
            }
        }
        const __m256 ls = _mm256_set1_ps(ND_CQ_INT_LO_SCALE);
        a->y[(size_t)t0 * (size_t)a->ldy + (size_t)r] = hsum8(_mm256_fmadd_ps(e0, ls, f0)) * a->tscale[t0];
        if (NT > 1) a->y[(size_t)(t0 + 1) * (size_t)a->ldy + (size_t)r] = hsum8(_mm256_fmadd_ps(e1, ls, f1)) * a->tscale[t0 + 1];
    }
}

/* ---- prefill: the blocked GEMM
 *
 * The AVX2 lookup costs more than the multiply-adds it feeds, so a batch of
 * tokens does not decode per pair of tokens: tokens go in blocks of GEMM_TB
 * (their rotated codes stay in L1), and for each row and block the row is
 * decoded once into int16 buffers (both codebook terms), then multiplied
 * into the block two tokens at a time from those buffers.  A token sees
 * exactly the instruction sequence of rows_nt (the same values in the same
 * lanes and accumulators, the same float steps in the same order), so its
 * result is bit for bit what decode gives it alone. */
#define GEMM_TB 16
#define GEMM_MAX_COLS 2048 /* longer rows go through rows_nt */

static inline __attribute__((always_inline)) void decode_row(const uint8_t *p, int groups, const decoder *d, int sb,
                                                            int16_t *vb, int16_t *ub)
{
    for (int g = 0; g < groups; g++) {
        const uint8_t *pg = p + (size_t)g * 16u * (size_t)sb;
        for (int q = 0; q < 8; q++) {
            __m256i u, v = decode16(pg + 2 * sb * q, sb, d, &u);
            _mm256_storeu_si256((__m256i *)(vb + g * ND_CQ_GROUP + 16 * q), v);
            _mm256_storeu_si256((__m256i *)(ub + g * ND_CQ_GROUP + 16 * q), u);
        }
    }
}

/* One decoded row against token t0 and (NT = 2) t0 + 1: rows_nt's arithmetic. */
static inline __attribute__((always_inline)) void row_tokens(const nd_cq_int_args *a, int r, const int16_t *vb,
                                                            const int16_t *ub, int t0, const int NT)
{
    const nd_matrix *w = a->w;
    int groups = w->cols_pad / ND_CQ_GROUP;
    const int16_t *z0 = a->z + (size_t)t0 * (size_t)a->ldz, *z1 = z0 + (NT > 1 ? (size_t)a->ldz : 0);
    __m256 f0 = _mm256_setzero_ps(), f1 = f0, e0 = f0, e1 = f0;
    for (int g = 0; g < groups; g++) {
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, b0 = a0, b1 = a0, la0 = a0, la1 = a0, lb0 = a0, lb1 = a0;
        size_t zo = (size_t)g * ND_CQ_GROUP;
#pragma GCC unroll 4
        for (int q = 0; q < 8; q += 2) {
            __m256i v0 = _mm256_loadu_si256((const __m256i *)(vb + zo + 16 * q));
            __m256i v1 = _mm256_loadu_si256((const __m256i *)(vb + zo + 16 * q + 16));
            __m256i u0 = _mm256_loadu_si256((const __m256i *)(ub + zo + 16 * q));
            __m256i u1 = _mm256_loadu_si256((const __m256i *)(ub + zo + 16 * q + 16));
            __m256i z00 = _mm256_loadu_si256((const __m256i *)(z0 + zo + 16 * q));
            __m256i z01 = _mm256_loadu_si256((const __m256i *)(z0 + zo + 16 * q + 16));
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(v0, z00)), a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(v1, z01));
            la0 = _mm256_add_epi32(la0, _mm256_madd_epi16(u0, z00)), la1 = _mm256_add_epi32(la1, _mm256_madd_epi16(u1, z01));
            if (NT > 1) {
                __m256i z10 = _mm256_loadu_si256((const __m256i *)(z1 + zo + 16 * q));
                __m256i z11 = _mm256_loadu_si256((const __m256i *)(z1 + zo + 16 * q + 16));
                b0 = _mm256_add_epi32(b0, _mm256_madd_epi16(v0, z10)), b1 = _mm256_add_epi32(b1, _mm256_madd_epi16(v1, z11));
                lb0 = _mm256_add_epi32(lb0, _mm256_madd_epi16(u0, z10)), lb1 = _mm256_add_epi32(lb1, _mm256_madd_epi16(u1, z11));
            }
        }
        __m256 nv = _mm256_set1_ps(norm_at(w, r, g, groups));
        f0 = _mm256_fmadd_ps(_mm256_add_ps(_mm256_cvtepi32_ps(a0), _mm256_cvtepi32_ps(a1)), nv, f0);
        e0 = _mm256_fmadd_ps(_mm256_add_ps(_mm256_cvtepi32_ps(la0), _mm256_cvtepi32_ps(la1)), nv, e0);
        if (NT > 1) {
            f1 = _mm256_fmadd_ps(_mm256_add_ps(_mm256_cvtepi32_ps(b0), _mm256_cvtepi32_ps(b1)), nv, f1);
            e1 = _mm256_fmadd_ps(_mm256_add_ps(_mm256_cvtepi32_ps(lb0), _mm256_cvtepi32_ps(lb1)), nv, e1);
        }
    }
    const __m256 ls = _mm256_set1_ps(ND_CQ_INT_LO_SCALE);
    a->y[(size_t)t0 * (size_t)a->ldy + (size_t)r] = hsum8(_mm256_fmadd_ps(e0, ls, f0)) * a->tscale[t0];
    if (NT > 1) a->y[(size_t)(t0 + 1) * (size_t)a->ldy + (size_t)r] = hsum8(_mm256_fmadd_ps(e1, ls, f1)) * a->tscale[t0 + 1];
}

static inline __attribute__((always_inline)) void gemm_blocked(const nd_cq_int_args *a, const decoder *d, int sb)
{
    const nd_matrix *w = a->w;
    int groups = w->cols_pad / ND_CQ_GROUP;
    size_t rb = nd_cq_int_row_bytes(w);
    int16_t vb[GEMM_MAX_COLS] __attribute__((aligned(32))), ub[GEMM_MAX_COLS] __attribute__((aligned(32)));
    for (int t0 = 0; t0 < a->T; t0 += GEMM_TB) {
        int t1 = a->T - t0 < GEMM_TB ? a->T : t0 + GEMM_TB;
        for (int r = a->r0; r < a->r1; r++) {
            decode_row(w->cq_idx + (size_t)r * rb, groups, d, sb, vb, ub);
            int t = t0;
            for (; t + 2 <= t1; t += 2) row_tokens(a, r, vb, ub, t, 2);
            if (t < t1) row_tokens(a, r, vb, ub, t, 1);
        }
    }
}

static inline __attribute__((always_inline)) void gemm_sb(const nd_cq_int_args *a, int sb)
{
    decoder d;
    decoder_init(&d, sb, a->cbq, a->cbq_lo);
    if (a->T >= 4 && a->w->cols_pad <= GEMM_MAX_COLS) { /* prefill */
        gemm_blocked(a, &d, sb);
        return;
    }
    int t = 0;
    for (; t + 2 <= a->T; t += 2) rows_nt(a, t, 2, &d, sb);
    if (t < a->T) rows_nt(a, t, 1, &d, sb);
}

static void gemm_avx2(const nd_cq_int_args *a)
{
    switch (nd_cq_int_sb(a->w)) {
    case 2: gemm_sb(a, 2); break;
    case 3: gemm_sb(a, 3); break;
    default: gemm_sb(a, 4); break;
    }
}

static const nd_cq_int_kernel kernel = {"avx2", gemm_avx2, NULL};
const nd_cq_int_kernel *nd_cq_int_kernel_avx2(void) { return &kernel; }
#else
const nd_cq_int_kernel *nd_cq_int_kernel_avx2(void) { return 0; }
#endif
