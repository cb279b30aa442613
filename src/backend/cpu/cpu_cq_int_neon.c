/* cpu_cq_int_neon.c - the integer CQ kernel on AArch64 NEON without the
 * dot-product extension (see cpu_cq_int.h; cpu_cq_int_dotprod_neon.c is the
 * one with it).  Compiled for AArch64 only (the Makefile leaves *_neon.c out
 * of other builds).
 *
 * 16 codes at a time (cpu_cq_int_neon.h) index two 16-byte TBL tables per
 * codebook term (the int16 entries' low and high bytes); ZIP1/ZIP2 make the
 * 16 int16 values.  SMLAL/SMLAL2 multiply by 16 int16 activations into int32
 * lanes: the hi term over four accumulators (8 products a lane per group:
 * 8 * 16383 * 16256 < 2^31), the lo term (|lo| <= 8192) over two (16
 * products).  Each group's lanes are summed exactly into int64 (SADDLV) and
 * finished by nd_cq_int_group_acc in group order, as the portable kernel
 * does, so the result has the portable kernel's bits.  Two tokens share each
 * decoded vector. */
#include "backend/cpu/cpu_cq_int.h"

#if defined(__aarch64__) && defined(__ARM_NEON)
#include "backend/cpu/cpu_cq_int_neon.h"

typedef struct tables {
    uint8x16_t hl, hh, ll, lh; /* hi term low/high bytes, lo term low/high bytes, by code */
} tables;

static void tables_init(tables *t, const int16_t cbq[16], const int16_t cbq_lo[16])
{
    uint8_t hl[16], hh[16], ll[16], lh[16];
    for (int k = 0; k < 16; k++) {
        uint16_t v = (uint16_t)cbq[k], u = (uint16_t)cbq_lo[k];
        hl[k] = (uint8_t)(v & 0xff), hh[k] = (uint8_t)(v >> 8);
        ll[k] = (uint8_t)(u & 0xff), lh[k] = (uint8_t)(u >> 8);
    }
    t->hl = vld1q_u8(hl), t->hh = vld1q_u8(hh), t->ll = vld1q_u8(ll), t->lh = vld1q_u8(lh);
}

/* one token's products with the 16 values v (hi term) and u (lo term) */
static inline void mac16(int32x4_t h[4], int32x4_t l[2], int16x8_t v0, int16x8_t v1, int16x8_t u0, int16x8_t u1,
                         const int16_t *z)
{
    int16x8_t z0 = vld1q_s16(z), z1 = vld1q_s16(z + 8);
    h[0] = vmlal_s16(h[0], vget_low_s16(v0), vget_low_s16(z0));
    h[1] = vmlal_high_s16(h[1], v0, z0);
    h[2] = vmlal_s16(h[2], vget_low_s16(v1), vget_low_s16(z1));
    h[3] = vmlal_high_s16(h[3], v1, z1);
    l[0] = vmlal_s16(l[0], vget_low_s16(u0), vget_low_s16(z0));
    l[1] = vmlal_high_s16(l[1], u0, z0);
    l[0] = vmlal_s16(l[0], vget_low_s16(u1), vget_low_s16(z1));
    l[1] = vmlal_high_s16(l[1], u1, z1);
}

static inline int64_t sum4(const int32x4_t h[4])
{
    return vaddlvq_s32(h[0]) + vaddlvq_s32(h[1]) + vaddlvq_s32(h[2]) + vaddlvq_s32(h[3]);
}

/* Rows [r0, r1) against tokens t0 and (NT = 2) t0 + 1. */
static inline __attribute__((always_inline)) void rows_nt(const nd_cq_int_args *a, int t0, const int NT,
                                                         const tables *tb, const nd_neon_unpack *un, int sb)
{
    const nd_matrix *w = a->w;
    int groups = w->cols_pad / ND_CQ_GROUP;
    size_t rb = nd_cq_int_row_bytes(w);
    const int16_t *z0 = a->z + (size_t)t0 * (size_t)a->ldz, *z1 = z0 + (NT > 1 ? (size_t)a->ldz : 0);
    for (int r = a->r0; r < a->r1; r++) {
        const uint8_t *p = w->cq_idx + (size_t)r * rb;
        float acc0 = 0.0f, acc1 = 0.0f;
        for (int g = 0; g < groups; g++) {
            const uint8_t *pg = p + (size_t)g * 16u * (size_t)sb;
            const int16_t *zg0 = z0 + (size_t)g * ND_CQ_GROUP, *zg1 = z1 + (size_t)g * ND_CQ_GROUP;
            int32x4_t h0[4], l0[2], h1[4], l1[2];
            for (int i = 0; i < 4; i++) h0[i] = h1[i] = vdupq_n_s32(0);
            l0[0] = l0[1] = l1[0] = l1[1] = vdupq_n_s32(0);
            for (int q = 0; q < 8; q++) {
                uint8x16_t idx = nd_neon_codes16(pg + 2 * sb * q, sb, un);
                uint8x16_t vl = vqtbl1q_u8(tb->hl, idx), vh = vqtbl1q_u8(tb->hh, idx);
                uint8x16_t ul = vqtbl1q_u8(tb->ll, idx), uh = vqtbl1q_u8(tb->lh, idx);
                int16x8_t v0 = vreinterpretq_s16_u8(vzip1q_u8(vl, vh)), v1 = vreinterpretq_s16_u8(vzip2q_u8(vl, vh));
                int16x8_t u0 = vreinterpretq_s16_u8(vzip1q_u8(ul, uh)), u1 = vreinterpretq_s16_u8(vzip2q_u8(ul, uh));
                mac16(h0, l0, v0, v1, u0, u1, zg0 + 16 * q);
                if (NT > 1) mac16(h1, l1, v0, v1, u0, u1, zg1 + 16 * q);
            }
            float norm = nd_cq_int_norm(w, r, g);
            acc0 = nd_cq_int_group_acc(acc0, sum4(h0), vaddlvq_s32(l0[0]) + vaddlvq_s32(l0[1]), norm);
            if (NT > 1) acc1 = nd_cq_int_group_acc(acc1, sum4(h1), vaddlvq_s32(l1[0]) + vaddlvq_s32(l1[1]), norm);
        }
        a->y[(size_t)t0 * (size_t)a->ldy + (size_t)r] = acc0 * a->tscale[t0];
        if (NT > 1) a->y[(size_t)(t0 + 1) * (size_t)a->ldy + (size_t)r] = acc1 * a->tscale[t0 + 1];
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

static void gemm_neon(const nd_cq_int_args *a)
{
    switch (nd_cq_int_sb(a->w)) {
    case 2: gemm_sb(a, 2); break;
    case 3: gemm_sb(a, 3); break;
    default: gemm_sb(a, 4); break;
    }
}

static const nd_cq_int_kernel kernel = {"neon", gemm_neon, NULL};
const nd_cq_int_kernel *nd_cq_int_kernel_neon(void) { return &kernel; }
#else
const nd_cq_int_kernel *nd_cq_int_kernel_neon(void) { return 0; }
#endif
