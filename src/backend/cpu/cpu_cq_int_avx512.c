/* cpu_cq_int_avx512.c - the integer CQ kernel on AVX-512 VNNI (see
 * cpu_cq_int.h).  Compiled with the AVX-512 flags whatever the baseline, and
 * only called after nd_cpu_cq_int_kernel checked the CPU.
 *
 * Decoding 32 codes of any width (2, 3, 4 bits; ternary is 2-bit codes) into
 * 32 int16 codebook values, natural order:
 *   - a masked 16-byte load of the 4*sb bytes, broadcast to the four lanes;
 *   - VPSHUFB puts into word j of lane L the two bytes holding code 8L+j;
 *   - VPSRLVW shifts each word by its code's bit offset in its byte;
 *   - VPERMW looks the low 5 bits up in a 32-entry table holding the
 *     codebook repeated, so the neighbour codes' bits above the code select
 *     the same entry (no mask needed); once for each codebook term.
 * Then VPDPWSSD multiplies by 32 int16 activations and adds pairs into the
 * 16 int32 lanes: 4 per group, 8 products per lane, exact (cpu_cq_int.h).
 * Up to four tokens share each decoded vector. */
#include "backend/cpu/cpu_cq_int.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#include <immintrin.h>

typedef struct decoder {
    __m512i ctrl, shift, table, table_lo;
    __mmask16 mask;
} decoder;

static void decoder_init(decoder *d, int sb, const int16_t cbq[16], const int16_t cbq_lo[16])
{
    uint8_t ctrl[64];
    uint16_t sh[32];
    int16_t tab[32], tab_lo[32];
    for (int L = 0; L < 4; L++)
        for (int j = 0; j < 8; j++) {
            int rel = sb * j, byte = sb * L + rel / 8, s = rel % 8;
            ctrl[16 * L + 2 * j] = (uint8_t)byte;
            ctrl[16 * L + 2 * j + 1] = s + sb > 8 ? (uint8_t)(byte + 1) : 0x80; /* 0x80: zero byte */
            sh[8 * L + j] = (uint16_t)s;
        }
    for (int k = 0; k < 32; k++) tab[k] = cbq[k & ((1 << sb) - 1)], tab_lo[k] = cbq_lo[k & ((1 << sb) - 1)];
    d->ctrl = _mm512_loadu_si512(ctrl);
    d->shift = _mm512_loadu_si512(sh);
    d->table = _mm512_loadu_si512(tab);
    d->table_lo = _mm512_loadu_si512(tab_lo);
    d->mask = (__mmask16)((1u << (4 * sb)) - 1);
}

/* the codes of 32 weights, each in the low bits of its word */
static inline __m512i codes32(const uint8_t *p, const decoder *d)
{
    __m512i v = _mm512_broadcast_i32x4(_mm_maskz_loadu_epi8(d->mask, p));
    return _mm512_srlv_epi16(_mm512_shuffle_epi8(v, d->ctrl), d->shift);
}

static inline float norm_at(const nd_matrix *w, int r, int g, int groups)
{
    const uint8_t *p = w->cq_norms + ((size_t)r * (size_t)groups + (size_t)g) * 2;
    return _cvtsh_ss((unsigned short)(p[0] | (p[1] << 8)));
}

/* Rows [r0, r1) against tokens t0 .. t0+NT-1 (NT a constant 1..4 after inlining). */
static inline __attribute__((always_inline)) void rows_nt(const nd_cq_int_args *a, int t0, const int NT,
                                                         const decoder *d, int sb)
{
    const nd_matrix *w = a->w;
    int groups = w->cols_pad / ND_CQ_GROUP;
    size_t rb = nd_cq_int_row_bytes(w);
    const int16_t *z[4];
    for (int k = 0; k < 4; k++) z[k] = a->z + (size_t)(t0 + (k < NT ? k : 0)) * (size_t)a->ldz;
    for (int r = a->r0; r < a->r1; r++) {
        const uint8_t *p = w->cq_idx + (size_t)r * rb;
        __m512 f0 = _mm512_setzero_ps(), f1 = f0, f2 = f0, f3 = f0, e0 = f0, e1 = f0, e2 = f0, e3 = f0;
        for (int g = 0; g < groups; g++) {
            const uint8_t *pg = p + (size_t)g * 16u * (size_t)sb;
            __builtin_prefetch(pg + 1024);
            __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, l0 = c0, l1 = c0, l2 = c0, l3 = c0;
            size_t zo = (size_t)g * ND_CQ_GROUP;
            for (int q = 0; q < 4; q++) {
                __m512i idx = codes32(pg + 4 * sb * q, d);
                __m512i v = _mm512_permutexvar_epi16(idx, d->table), u = _mm512_permutexvar_epi16(idx, d->table_lo);
                __m512i zv = _mm512_loadu_si512(z[0] + zo + 32 * q);
                c0 = _mm512_dpwssd_epi32(c0, v, zv), l0 = _mm512_dpwssd_epi32(l0, u, zv);
                if (NT > 1) {
                    zv = _mm512_loadu_si512(z[1] + zo + 32 * q);
                    c1 = _mm512_dpwssd_epi32(c1, v, zv), l1 = _mm512_dpwssd_epi32(l1, u, zv);
                }
                if (NT > 2) {
                    zv = _mm512_loadu_si512(z[2] + zo + 32 * q);
                    c2 = _mm512_dpwssd_epi32(c2, v, zv), l2 = _mm512_dpwssd_epi32(l2, u, zv);
                }
                if (NT > 3) {
                    zv = _mm512_loadu_si512(z[3] + zo + 32 * q);
                    c3 = _mm512_dpwssd_epi32(c3, v, zv), l3 = _mm512_dpwssd_epi32(l3, u, zv);
                }
            }
            __m512 nv = _mm512_set1_ps(norm_at(w, r, g, groups));
            f0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c0), nv, f0), e0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(l0), nv, e0);
            if (NT > 1) f1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c1), nv, f1), e1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(l1), nv, e1);
            if (NT > 2) f2 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c2), nv, f2), e2 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(l2), nv, e2);
            if (NT > 3) f3 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c3), nv, f3), e3 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(l3), nv, e3);
        }
        const __m512 ls = _mm512_set1_ps(ND_CQ_INT_LO_SCALE);
        float *y = a->y + (size_t)r;
        y[(size_t)t0 * (size_t)a->ldy] = _mm512_reduce_add_ps(_mm512_fmadd_ps(e0, ls, f0)) * a->tscale[t0];
        if (NT > 1) y[(size_t)(t0 + 1) * (size_t)a->ldy] = _mm512_reduce_add_ps(_mm512_fmadd_ps(e1, ls, f1)) * a->tscale[t0 + 1];
        if (NT > 2) y[(size_t)(t0 + 2) * (size_t)a->ldy] = _mm512_reduce_add_ps(_mm512_fmadd_ps(e2, ls, f2)) * a->tscale[t0 + 2];
        if (NT > 3) y[(size_t)(t0 + 3) * (size_t)a->ldy] = _mm512_reduce_add_ps(_mm512_fmadd_ps(e3, ls, f3)) * a->tscale[t0 + 3];
    }
}

static inline __attribute__((always_inline)) void gemm_sb(const nd_cq_int_args *a, int sb)
{
    decoder d;
    decoder_init(&d, sb, a->cbq, a->cbq_lo);
    int t = 0;
    for (; t + 4 <= a->T; t += 4) rows_nt(a, t, 4, &d, sb);
    switch (a->T - t) {
    case 3: rows_nt(a, t, 3, &d, sb); break;
    case 2: rows_nt(a, t, 2, &d, sb); break;
    case 1: rows_nt(a, t, 1, &d, sb); break;
    default: break;
    }
}

static void gemm_avx512(const nd_cq_int_args *a)
{
    switch (nd_cq_int_sb(a->w)) {
    case 2: gemm_sb(a, 2); break;
    case 3: gemm_sb(a, 3); break;
    default: gemm_sb(a, 4); break;
    }
}

static const nd_cq_int_kernel kernel = {"avx512vnni", gemm_avx512};
const nd_cq_int_kernel *nd_cq_int_kernel_avx512(void) { return &kernel; }
#else
const nd_cq_int_kernel *nd_cq_int_kernel_avx512(void) { return 0; }
#endif
