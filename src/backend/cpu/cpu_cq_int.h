/* cpu_cq_int.h - CQ matrices times int8 activations in integer arithmetic
 * (the A8 deploy numerics: quant/act_quant.h).
 *
 * A token's A8 codes c (per-vector scale s) are rotated per 128-group with the
 * UNNORMALISED Walsh-Hadamard matrix: z = H c, exact integers with
 * |z| <= 127 * 128 = 16256, so int16.  A CQ row is w = (cb[code] * norm) H128
 * per group and H128 = H / sqrt(128), so
 *     w . (s c) = s / sqrt(128) * sum_g norm_g * (cb[codes_g] . z_g).
 * The codebook is held as two int16 terms, cb = cb_scale * (hi + lo / 2^14)
 * with hi = rint(cb / cb_scale), cb_scale = max|cb| / ND_CQ_INT_CB_MAX, and lo
 * the rounded remainder (|lo| <= 2^13): one term alone would move weights by
 * up to 3e-5 of the largest entry, enough to flip A8 codes of later layers
 * away from rounding ties; with both the codebook is exact to ~1e-9.  Each
 * int32 lane of a kernel accumulates at most 8 products of a group
 * (8 * 16383 * 16256 < 2^31) before it is converted to float and multiplied
 * by the group's norm, so the integer part is exact; kernels differ only in
 * float summation order.
 *
 * Kernels: portable C (cpu_cq_int.c), AVX2 (cpu_cq_int_avx2.c: byte
 * shuffles for the lookup, VPMADDWD), AVX-512 VNNI (cpu_cq_int_avx512.c:
 * VPERMW lookup, VPDPWSSD), AArch64 NEON (cpu_cq_int_neon.c: TBL lookup,
 * SMLAL) and NEON with the dot-product extension (cpu_cq_int_dotprod_neon.c:
 * int16 split into int8 halves, SDOT), WebAssembly SIMD128
 * (cpu_cq_int_simd128.c: swizzle lookup, i32x4.dot_i16x8).  The NEON and
 * SIMD128 kernels reduce each group's integer sums exactly to int64 and
 * finish with nd_cq_int_group_acc, as the portable kernel does: they give
 * the portable kernel's bits.  nd_cpu_cq_int_kernel() picks one at run time
 * from the kernel path (nd_cpu_isa_choose) and nd_cpu_features_detect; it
 * is the only place that chooses. */
#ifndef ND_CPU_CQ_INT_H
#define ND_CPU_CQ_INT_H

#include <stddef.h>
#include <stdint.h>

#include "core/fp16.h"
#include "core/matrix.h"

#if defined(__AVX512BW__)
#include <immintrin.h>
#endif

#define ND_CQ_INT_CB_MAX 16383

/* One call: rows [r0, r1) of w against T tokens. */
typedef struct nd_cq_int_args {
    const nd_matrix *w;
    const int16_t *cbq;   /* 16 int16 by stored code (zero past 2^storage_bits): the hi term */
    const int16_t *cbq_lo; /* the lo term, same layout */
    const int16_t *z;     /* T rows of w->cols_pad, ldz apart: H c per group */
    int ldz, T, r0, r1;
    const float *tscale;  /* [T]: s_t * cb_scale / sqrt(128) */
    float *y;             /* y[t * ldy + r] = tscale[t] * sum_g norm_g * ((hi + lo / 2^14) . z)_g */
    int ldy;
} nd_cq_int_args;

typedef struct nd_cq_int_kernel {
    const char *name; /* "portable", "avx2", "avx512vnni", "neon", "neon_dotprod", "simd128" */
    void (*gemm)(const nd_cq_int_args *a);
    /* NULL, or how this kernel wants a token's rotated activations laid out
     * within each group: applied in place to nd_cq_int_rotate's output (one
     * token's cols_pad values) before gemm reads them */
    void (*order_z)(int16_t *z, int cols_pad);
} nd_cq_int_kernel;

/* The kernel this machine runs best (chosen once per process), and why
 * (one line, for `needle info`). */
const nd_cq_int_kernel *nd_cpu_cq_int_kernel(void);
const char *nd_cpu_cq_int_kernel_reason(void);
/* Every kernel this build contains that the CPU can run, best last; returns
 * the count (for the tests, which hold each against the portable one). */
int nd_cpu_cq_int_kernels(const nd_cq_int_kernel **out, int max);

/* The kernels themselves (NULL-returning stubs where the ISA was not built). */
const nd_cq_int_kernel *nd_cq_int_kernel_portable(void);
const nd_cq_int_kernel *nd_cq_int_kernel_avx2(void);
const nd_cq_int_kernel *nd_cq_int_kernel_avx512(void);
const nd_cq_int_kernel *nd_cq_int_kernel_neon(void);
const nd_cq_int_kernel *nd_cq_int_kernel_neon_dotprod(void);
const nd_cq_int_kernel *nd_cq_int_kernel_simd128(void);

/* The int16 codebook terms of w by stored code (16 entries each,
 * zero-padded); returns cb_scale. */
float nd_cq_int_codebook(const nd_matrix *w, int16_t hi[16], int16_t lo[16]);
#define ND_CQ_INT_LO_SCALE (1.0f / 16384.0f)
/* z[0..cols_pad) = H c per 128-group (unnormalised), codes past cols zero. */
void nd_cq_int_rotate(const int8_t *codes, int cols, int cols_pad, int16_t *z);

/* The same, inline, so a file compiled per ISA (cpu_matmul.c: the A8
 * matmul's per-token rotation) gets it in that ISA's vectors.  Integer adds:
 * every copy gives the same values. */
/* One butterfly stage of width h (a constant after inlining, so the wide
 * stages become plain vector adds and subtracts). */
static inline __attribute__((always_inline)) void nd_cq_int_rotate_stage(int16_t *v, const int h)
{
    for (int i = 0; i < ND_CQ_GROUP; i += 2 * h)
        for (int j = i; j < i + h; j++) {
            int a = v[j], b = v[j + h];
            v[j] = (int16_t)(a + b);
            v[j + h] = (int16_t)(a - b);
        }
}

#if defined(__AVX512BW__)
/* One butterfly stage of span h < 32 inside 32 int16 lanes: lane i without bit h
 * gets x[i] + x[i+h], lane i with it x[i-h] - x[i]. */
static inline __m512i nd_cq_int_bfly32(__m512i x, __m512i partner, __mmask32 upper)
{
    __m512i y = _mm512_permutexvar_epi16(partner, x);
    return _mm512_mask_blend_epi16(upper, _mm512_add_epi16(x, y), _mm512_sub_epi16(y, x));
}
#endif

static inline void nd_cq_int_rotate_inline(const int8_t *codes, int cols, int cols_pad, int16_t *z)
{
    int g = 0;
#if defined(__AVX512BW__)
    /* whole groups in four registers of 32 lanes: the butterflies of spans 1..16
     * by lane permutes, 32 and 64 between registers (the same sums: exact
     * integers, and the stages of a Walsh-Hadamard transform commute) */
    int16_t idx[5][32];
    for (int s = 0; s < 5; s++)
        for (int i = 0; i < 32; i++) idx[s][i] = (int16_t)(i ^ (1 << s));
    const __mmask32 upper[5] = {0xAAAAAAAAu, 0xCCCCCCCCu, 0xF0F0F0F0u, 0xFF00FF00u, 0xFFFF0000u};
    __m512i part[5];
    for (int s = 0; s < 5; s++) part[s] = _mm512_loadu_si512(idx[s]);
    for (; g + ND_CQ_GROUP <= cols; g += ND_CQ_GROUP) {
        __m512i v[4];
        for (int q = 0; q < 4; q++) {
            v[q] = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(codes + g + 32 * q)));
            for (int s = 0; s < 5; s++) v[q] = nd_cq_int_bfly32(v[q], part[s], upper[s]);
        }
        __m512i a0 = _mm512_add_epi16(v[0], v[1]), a1 = _mm512_sub_epi16(v[0], v[1]);
        __m512i a2 = _mm512_add_epi16(v[2], v[3]), a3 = _mm512_sub_epi16(v[2], v[3]);
        _mm512_storeu_si512(z + g, _mm512_add_epi16(a0, a2));
        _mm512_storeu_si512(z + g + 32, _mm512_add_epi16(a1, a3));
        _mm512_storeu_si512(z + g + 64, _mm512_sub_epi16(a0, a2));
        _mm512_storeu_si512(z + g + 96, _mm512_sub_epi16(a1, a3));
    }
#endif
    for (; g < cols_pad; g += ND_CQ_GROUP) {
        int16_t *v = z + g;
        int take = cols - g < ND_CQ_GROUP ? cols - g : ND_CQ_GROUP;
        for (int i = 0; i < ND_CQ_GROUP; i++) v[i] = (int16_t)(i < take ? codes[g + i] : 0);
        /* Sylvester order, like nd_hadamard; every partial sum fits int16 */
        nd_cq_int_rotate_stage(v, 1), nd_cq_int_rotate_stage(v, 2), nd_cq_int_rotate_stage(v, 4);
        nd_cq_int_rotate_stage(v, 8), nd_cq_int_rotate_stage(v, 16), nd_cq_int_rotate_stage(v, 32);
        nd_cq_int_rotate_stage(v, 64);
    }
}

/* One group's exact integer sums (hi term s, lo term sl) times the group's
 * norm, added to a token's float accumulator.  Every kernel that gives the
 * portable kernel's bits goes through this one expression, so a compiler
 * that fuses multiply-adds (clang's default) fuses it the same way in each. */
static inline float nd_cq_int_group_acc(float acc, int64_t s, int64_t sl, float norm)
{
    return acc + ((float)s + (float)sl * ND_CQ_INT_LO_SCALE) * norm;
}

/* FP16 norm of row r, group g (shared by the kernels). */
static inline float nd_cq_int_norm(const nd_matrix *w, int r, int g)
{
    const uint8_t *p = w->cq_norms + ((size_t)r * (size_t)(w->cols_pad / ND_CQ_GROUP) + (size_t)g) * 2;
    return nd_half_to_float((uint16_t)(p[0] | (p[1] << 8)));
}

/* Bytes of one packed row, and bits per stored code. */
static inline int nd_cq_int_sb(const nd_matrix *w) { return w->cq_bits == ND_CQ_TERNARY ? 2 : w->cq_bits; }
static inline size_t nd_cq_int_row_bytes(const nd_matrix *w) { return (size_t)w->cols_pad * (size_t)nd_cq_int_sb(w) / 8; }

#endif
