/* cpu_cq_int_avx512.c - the integer CQ kernel on AVX-512 VNNI (see
 * cpu_cq_int.h).  Compiled with the AVX-512 flags whatever the baseline, and
 * only called after nd_cpu_cq_int_kernel checked the CPU.
 *
 * The codes of a 128-group are decoded four times 32 at a time, in "nibble
 * order": pass n (0..3) puts code 4k+n in word k (k = 0..31), so every pass
 * is one shift of the same register of packed codes:
 *   - 4 bits: the group's 64 bytes; word k holds codes 4k..4k+3, pass n
 *     shifts it right by 4n;
 *   - 2 bits: word k takes packed word k/2 (VPERMW), shifted right by 8 in
 *     odd k, so it starts at code 4k; pass n shifts by 2n more;
 *   - 3 bits: word k is the 16 bits from bit 12k, joined from two packed
 *     words (two VPERMW and two variable shifts); pass n shifts by 3n.
 * VPERMW then looks the low 5 bits up in a 32-entry table holding the
 * codebook repeated, so the neighbour codes' bits above the code select the
 * same entry (no mask needed); once for each codebook term.  The rotated
 * activations come in the same order (order_z, once per token), so
 * VPDPWSSD multiplies each looked-up weight by its own activation and adds
 * pairs into the 16 int32 lanes: 4 per group, 8 products per lane, exact
 * (cpu_cq_int.h).  Up to four tokens share each decoded vector.  (The
 * natural order took a byte shuffle and a variable shift per 32 codes; this
 * order takes one shift, which matters most to decode, where a decoded
 * vector serves one token.) */
#include "backend/cpu/cpu_cq_int.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#include <immintrin.h>

typedef struct decoder {
    __m512i table, table_lo;
    __m512i pick0, pick1;   /* 2 and 3 bits: which packed word(s) word k starts in */
    __m512i shift0, shift1; /* and the variable shifts that align them */
    __mmask64 mask;         /* the group's bytes */
} decoder;

static void decoder_init(decoder *d, int sb, const int16_t cbq[16], const int16_t cbq_lo[16])
{
    int16_t tab[32], tab_lo[32];
    uint16_t p0[32], p1[32], s0[32], s1[32];
    for (int k = 0; k < 32; k++) {
        tab[k] = cbq[k & ((1 << sb) - 1)], tab_lo[k] = cbq_lo[k & ((1 << sb) - 1)];
        int bit = sb * 4 * k; /* where code 4k starts */
        p0[k] = (uint16_t)(bit / 16), p1[k] = (uint16_t)(bit / 16 + 1);
        s0[k] = (uint16_t)(bit % 16), s1[k] = (uint16_t)(16 - bit % 16); /* 16: VPSLLVW gives 0 */
    }
    d->table = _mm512_loadu_si512(tab);
    d->table_lo = _mm512_loadu_si512(tab_lo);
    d->pick0 = _mm512_loadu_si512(p0);
    d->pick1 = _mm512_loadu_si512(p1);
    d->shift0 = _mm512_loadu_si512(s0);
    d->shift1 = _mm512_loadu_si512(s1);
    d->mask = sb == 4 ? ~(__mmask64)0 : ((__mmask64)1 << (16 * sb)) - 1;
}

/* Word k of the result starts with code 4k of the group at pg (bits above
 * it are the next codes). */
static inline __m512i group_words(const uint8_t *pg, const decoder *d, int sb)
{
    if (sb == 4) return _mm512_loadu_si512(pg);
    __m512i packed = _mm512_maskz_loadu_epi8(d->mask, pg);
    __m512i w = _mm512_srlv_epi16(_mm512_permutexvar_epi16(d->pick0, packed), d->shift0);
    if (sb == 2) return w; /* 8 codes per packed word: code 4k never straddles two */
    return _mm512_or_si512(w, _mm512_sllv_epi16(_mm512_permutexvar_epi16(d->pick1, packed), d->shift1));
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
            const __m512i words = group_words(pg, d, sb);
            /* unrolled: the passes' shifts become immediates and the sums stay in their
             * registers (rolled, GCC copied all eight sums twice per pass) */
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) { /* pass q: codes 4k+q */
                __m512i idx = _mm512_srli_epi16(words, (unsigned)(sb * q));
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

/* The rotated activations of each group in nibble order: z'[32n + k] =
 * z[4k + n].  Index i = 32m + l of the group sits in register m = (b6 b5),
 * lane l = (b4..b0); it goes to register (b1 b0), lane (b6 b5 b4 b3 b2).
 * Two stages of two-source permutes each swap one register bit with one
 * lane bit; the second stage's indices also put the lane bits in order. */
static void order_z(int16_t *z, int cols_pad)
{
    uint16_t lo[2][32], hi[2][32];
    for (int s = 0; s < 2; s++)
        for (int m = 0; m < 32; m++) {
            int l = s == 0 ? m : ((m >> 2 & 1) << 4) | ((m >> 1 & 1) << 3) | ((m & 1) << 2) | ((m >> 4 & 1) << 1) | (m >> 3 & 1);
            int bit = (l >> s) & 1;
            lo[s][m] = (uint16_t)(bit ? 32 + (l ^ (1 << s)) : l);
            hi[s][m] = (uint16_t)(bit ? 32 + l : (l | (1 << s)));
        }
    __m512i ilo[2] = {_mm512_loadu_si512(lo[0]), _mm512_loadu_si512(lo[1])};
    __m512i ihi[2] = {_mm512_loadu_si512(hi[0]), _mm512_loadu_si512(hi[1])};
    for (int g = 0; g < cols_pad; g += ND_CQ_GROUP) {
        __m512i v[4];
        for (int m = 0; m < 4; m++) v[m] = _mm512_loadu_si512(z + g + 32 * m);
        for (int s = 0; s < 2; s++)
            for (int m = 0; m < 4; m++) {
                if ((m >> s) & 1) continue;
                __m512i a = v[m], b = v[m | (1 << s)];
                v[m] = _mm512_permutex2var_epi16(a, ilo[s], b);
                v[m | (1 << s)] = _mm512_permutex2var_epi16(a, ihi[s], b);
            }
        for (int m = 0; m < 4; m++) _mm512_storeu_si512(z + g + 32 * m, v[m]);
    }
}

static const nd_cq_int_kernel kernel = {"avx512vnni", gemm_avx512, order_z};
const nd_cq_int_kernel *nd_cq_int_kernel_avx512(void) { return &kernel; }
#else
const nd_cq_int_kernel *nd_cq_int_kernel_avx512(void) { return 0; }
#endif
