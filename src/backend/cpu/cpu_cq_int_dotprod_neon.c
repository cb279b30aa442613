/* cpu_cq_int_dotprod_neon.c - the integer CQ kernel on AArch64 NEON with the
 * Armv8.2 dot-product extension (SDOT; see cpu_cq_int.h).  The Makefile
 * compiles this file with -march=armv8.2-a+dotprod for AArch64 only, and
 * nd_cpu_cq_int_kernel calls it only when the CPU reports HWCAP_ASIMDDP.
 *
 * SDOT multiplies int8 by int8, four products into each int32 lane; the
 * operands here are int16, so both are split into int8 halves:
 *   z  = 256 zh + zl,  zl in [-128, 127], zh in [-63, 64]   (|z| <= 16384)
 *   cb = 256 ch + cl,  cl in [-128, 127], ch in [-64, 64]   (|cb| <= 16383)
 *   cb . z = 65536 (ch . zh) + 256 (ch . zl + cl . zh) + cl . zl
 * per codebook term (the lo term the same way), each dot an SDOT over 16
 * values; per group a lane holds at most 64 products of at most 2^14, so the
 * int32 lanes and their sums are exact, and the group's sum is put together
 * in int64 and finished by nd_cq_int_group_acc, as the portable kernel does:
 * the result has the portable kernel's bits.  The codebook halves are four
 * 16-entry TBL tables indexed by the codes directly (cpu_cq_int_neon.h).
 *
 * The activations' halves are split once per block of rows and groups into
 * a small buffer on the stack (ZS_GROUPS groups of up to two tokens), and
 * the rows of a block are finished group by group, in the same order as the
 * portable kernel, from per-row float accumulators. */
#include "backend/cpu/cpu_cq_int.h"

#if defined(__aarch64__) && defined(__ARM_NEON) && defined(__ARM_FEATURE_DOTPROD)
#include "backend/cpu/cpu_cq_int_neon.h"

#define ZS_GROUPS 8  /* groups of split activations held at once: 2 tokens x 8 x 256 bytes */
#define ROWS_BLOCK 32 /* rows sharing one split */

typedef struct tables {
    int8x16_t ch, cl, lh, ll; /* hi term high/low halves, lo term high/low halves, by code */
} tables;

static void tables_init(tables *t, const int16_t cbq[16], const int16_t cbq_lo[16])
{
    int8_t ch[16], cl[16], lh[16], ll[16];
    for (int k = 0; k < 16; k++) {
        int v = cbq[k], u = cbq_lo[k];
        cl[k] = (int8_t)(uint8_t)(v & 0xff), ch[k] = (int8_t)((v - cl[k]) / 256);
        ll[k] = (int8_t)(uint8_t)(u & 0xff), lh[k] = (int8_t)((u - ll[k]) / 256);
    }
    t->ch = vld1q_s8(ch), t->cl = vld1q_s8(cl), t->lh = vld1q_s8(lh), t->ll = vld1q_s8(ll);
}

/* 16 int16 activations -> their int8 halves: zl the low byte (signed), zh
 * the high byte plus one where zl is negative */
static inline void split16(const int16_t *z, int8_t *zh, int8_t *zl)
{
    int8x16_t a = vreinterpretq_s8_s16(vld1q_s16(z)), b = vreinterpretq_s8_s16(vld1q_s16(z + 8));
    int8x16_t lo = vuzp1q_s8(a, b), hi = vuzp2q_s8(a, b);
    vst1q_s8(zl, lo);
    vst1q_s8(zh, vsubq_s8(hi, vshrq_n_s8(lo, 7)));
}

/* a token's three SDOT accumulators per codebook term */
typedef struct dots {
    int32x4_t hh, hm, hl, lh, lm, ll;
} dots;

static inline void dots_zero(dots *d)
{
    d->hh = d->hm = d->hl = d->lh = d->lm = d->ll = vdupq_n_s32(0);
}

static inline void dot16(dots *d, int8x16_t ch, int8x16_t cl, int8x16_t lh, int8x16_t ll, const int8_t *zs)
{
    int8x16_t zh = vld1q_s8(zs), zl = vld1q_s8(zs + 16);
    d->hh = vdotq_s32(d->hh, ch, zh);
    d->hm = vdotq_s32(vdotq_s32(d->hm, ch, zl), cl, zh);
    d->hl = vdotq_s32(d->hl, cl, zl);
    d->lh = vdotq_s32(d->lh, lh, zh);
    d->lm = vdotq_s32(vdotq_s32(d->lm, lh, zl), ll, zh);
    d->ll = vdotq_s32(d->ll, ll, zl);
}

/* 65536 hh + 256 hm + hl, exact */
static inline int64_t combine(int32x4_t hh, int32x4_t hm, int32x4_t hl)
{
    return (int64_t)vaddvq_s32(hh) * 65536 + (int64_t)vaddvq_s32(hm) * 256 + (int64_t)vaddvq_s32(hl);
}

/* Rows [r0, r1) against tokens t0 and (NT = 2) t0 + 1. */
static inline __attribute__((always_inline)) void rows_nt(const nd_cq_int_args *a, int t0, const int NT,
                                                         const tables *tb, const nd_neon_unpack *un, int sb)
{
    const nd_matrix *w = a->w;
    int groups = w->cols_pad / ND_CQ_GROUP;
    size_t rb = nd_cq_int_row_bytes(w);
    /* per token, per 16 activations: 16 high halves then 16 low halves */
    int8_t zs[2][ZS_GROUPS * ND_CQ_GROUP * 2] __attribute__((aligned(16)));
    float acc[ROWS_BLOCK][2];
    for (int rb0 = a->r0; rb0 < a->r1; rb0 += ROWS_BLOCK) {
        int rb1 = rb0 + ROWS_BLOCK < a->r1 ? rb0 + ROWS_BLOCK : a->r1;
        for (int i = 0; i < ROWS_BLOCK; i++) acc[i][0] = acc[i][1] = 0.0f;
        for (int g0 = 0; g0 < groups; g0 += ZS_GROUPS) {
            int g1 = g0 + ZS_GROUPS < groups ? g0 + ZS_GROUPS : groups;
            for (int k = 0; k < NT; k++) {
                const int16_t *z = a->z + (size_t)(t0 + k) * (size_t)a->ldz + (size_t)g0 * ND_CQ_GROUP;
                for (int c = 0; c < (g1 - g0) * ND_CQ_GROUP / 16; c++) split16(z + 16 * c, zs[k] + 32 * c, zs[k] + 32 * c + 16);
            }
            for (int r = rb0; r < rb1; r++) {
                const uint8_t *p = w->cq_idx + (size_t)r * rb;
                for (int g = g0; g < g1; g++) {
                    const uint8_t *pg = p + (size_t)g * 16u * (size_t)sb;
                    const int8_t *zg0 = zs[0] + (size_t)(g - g0) * ND_CQ_GROUP * 2, *zg1 = zs[1] + (size_t)(g - g0) * ND_CQ_GROUP * 2;
                    dots d0, d1;
                    dots_zero(&d0);
                    dots_zero(&d1);
                    for (int q = 0; q < 8; q++) {
                        uint8x16_t idx = nd_neon_codes16(pg + 2 * sb * q, sb, un);
                        int8x16_t ch = vqtbl1q_s8(tb->ch, idx), cl = vqtbl1q_s8(tb->cl, idx);
                        int8x16_t lh = vqtbl1q_s8(tb->lh, idx), ll = vqtbl1q_s8(tb->ll, idx);
                        dot16(&d0, ch, cl, lh, ll, zg0 + 32 * q);
                        if (NT > 1) dot16(&d1, ch, cl, lh, ll, zg1 + 32 * q);
                    }
                    float norm = nd_cq_int_norm(w, r, g);
                    float *ar = acc[r - rb0];
                    ar[0] = nd_cq_int_group_acc(ar[0], combine(d0.hh, d0.hm, d0.hl), combine(d0.lh, d0.lm, d0.ll), norm);
                    if (NT > 1)
                        ar[1] = nd_cq_int_group_acc(ar[1], combine(d1.hh, d1.hm, d1.hl), combine(d1.lh, d1.lm, d1.ll), norm);
                }
            }
        }
        for (int r = rb0; r < rb1; r++) {
            a->y[(size_t)t0 * (size_t)a->ldy + (size_t)r] = acc[r - rb0][0] * a->tscale[t0];
            if (NT > 1) a->y[(size_t)(t0 + 1) * (size_t)a->ldy + (size_t)r] = acc[r - rb0][1] * a->tscale[t0 + 1];
        }
    }
}

static inline __attribute__((always_inline)) void gemm_sb(const nd_cq_int_args *a, int sb)
{
    tables tb;
    nd_neon_unpack un;
    tables_init(&tb, a->cbq, a->cbq_lo);
    nd_neon_unpack_init(&un, sb);
    int t = 0;
    for (; t + 2 <= a->T; t += 2) rows_nt(a, t, 2, &tb, &un, sb);
    if (t < a->T) rows_nt(a, t, 1, &tb, &un, sb);
}

static void gemm_neon_dotprod(const nd_cq_int_args *a)
{
    switch (nd_cq_int_sb(a->w)) {
    case 2: gemm_sb(a, 2); break;
    case 3: gemm_sb(a, 3); break;
    default: gemm_sb(a, 4); break;
    }
}

static const nd_cq_int_kernel kernel = {"neon_dotprod", gemm_neon_dotprod, NULL};
const nd_cq_int_kernel *nd_cq_int_kernel_neon_dotprod(void) { return &kernel; }
#else
const nd_cq_int_kernel *nd_cq_int_kernel_neon_dotprod(void) { return 0; }
#endif
