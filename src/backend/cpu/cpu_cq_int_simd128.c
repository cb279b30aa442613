/* cpu_cq_int_simd128.c - the integer CQ kernel on WebAssembly SIMD128 (see
 * cpu_cq_int.h).  Compiled to it only in the WebAssembly build (-msimd128,
 * make wasm); elsewhere the getter says the kernel is not built in.
 *
 * 16 codes at a time: a swizzle puts the two bytes holding code 8h+j into
 * halfword j of vector h, a multiply by 2^(8 - bit offset) and a shift
 * right by 8 bring the code to the bottom (SIMD128 has no per-lane shift),
 * a narrow and a mask make 16 byte indices.  Two 16-entry swizzle tables per
 * codebook term give the int16 entries' low and high bytes, interleaved by
 * a shuffle.  i32x4.dot_i16x8_s multiplies by 8 int16 activations and adds
 * pairs: the hi term over four accumulators (8 products a lane per group:
 * 8 * 16383 * 16256 < 2^31), the lo term (|lo| <= 8192) over two.  Each
 * group's lanes are summed exactly in int64 and finished by
 * nd_cq_int_group_acc in group order, as the portable kernel does: the
 * result has the portable kernel's bits.  Two tokens share each decoded
 * vector. */
#include "backend/cpu/cpu_cq_int.h"

#if defined(__wasm_simd128__)
#include <string.h>
#include <wasm_simd128.h>

typedef struct decoder {
    v128_t ctrl[2], mul[2], mask;
    v128_t hl, hh, ll, lh; /* hi term low/high bytes, lo term low/high bytes, by code */
} decoder;

static void decoder_init(decoder *d, int sb, const int16_t cbq[16], const int16_t cbq_lo[16])
{
    uint8_t ctrl[32], hl[16], hh[16], ll[16], lh[16];
    uint16_t mul[16];
    for (int i = 0; i < 16; i++) {
        int bit = sb * i, byte = bit / 8;
        ctrl[2 * i] = (uint8_t)byte;
        ctrl[2 * i + 1] = (uint8_t)(byte + 1); /* past the 2*sb bytes: a zero byte */
        mul[i] = (uint16_t)(1u << (8 - bit % 8));
    }
    for (int k = 0; k < 16; k++) {
        uint16_t v = (uint16_t)cbq[k], u = (uint16_t)cbq_lo[k];
        hl[k] = (uint8_t)(v & 0xff), hh[k] = (uint8_t)(v >> 8);
        ll[k] = (uint8_t)(u & 0xff), lh[k] = (uint8_t)(u >> 8);
    }
    d->ctrl[0] = wasm_v128_load(ctrl), d->ctrl[1] = wasm_v128_load(ctrl + 16);
    d->mul[0] = wasm_v128_load(mul), d->mul[1] = wasm_v128_load(mul + 8);
    d->mask = wasm_i8x16_splat((int8_t)((1u << sb) - 1));
    d->hl = wasm_v128_load(hl), d->hh = wasm_v128_load(hh), d->ll = wasm_v128_load(ll), d->lh = wasm_v128_load(lh);
}

/* the 16 codes at p (2*sb bytes; sb a constant after inlining) */
static inline v128_t codes16(const uint8_t *p, int sb, const decoder *d)
{
    uint64_t bits = 0;
    memcpy(&bits, p, (size_t)(2 * sb));
    v128_t b = wasm_u64x2_make(bits, 0);
    v128_t w0 = wasm_u16x8_shr(wasm_i16x8_mul(wasm_i8x16_swizzle(b, d->ctrl[0]), d->mul[0]), 8);
    v128_t w1 = wasm_u16x8_shr(wasm_i16x8_mul(wasm_i8x16_swizzle(b, d->ctrl[1]), d->mul[1]), 8);
    return wasm_v128_and(wasm_u8x16_narrow_i16x8(w0, w1), d->mask);
}

/* low bytes a, high bytes b -> the int16 values of codes 0..7 (lo) and 8..15 (hi) */
static inline v128_t zip_lo(v128_t a, v128_t b)
{
    return wasm_i8x16_shuffle(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
}
static inline v128_t zip_hi(v128_t a, v128_t b)
{
    return wasm_i8x16_shuffle(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
}

/* one token's products with 16 values v (hi term) and u (lo term) */
static inline void mac16(v128_t h[4], v128_t l[2], int q, v128_t v0, v128_t v1, v128_t u0, v128_t u1, const int16_t *z)
{
    v128_t z0 = wasm_v128_load(z), z1 = wasm_v128_load(z + 8);
    int i = (q & 1) * 2; /* 4 dots of 2 products per accumulator per group */
    h[i] = wasm_i32x4_add(h[i], wasm_i32x4_dot_i16x8(v0, z0));
    h[i + 1] = wasm_i32x4_add(h[i + 1], wasm_i32x4_dot_i16x8(v1, z1));
    l[0] = wasm_i32x4_add(l[0], wasm_i32x4_dot_i16x8(u0, z0));
    l[1] = wasm_i32x4_add(l[1], wasm_i32x4_dot_i16x8(u1, z1));
}

static inline int64_t lanes(v128_t v)
{
    return (int64_t)wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1) + wasm_i32x4_extract_lane(v, 2) +
           wasm_i32x4_extract_lane(v, 3);
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
        float acc0 = 0.0f, acc1 = 0.0f;
        for (int g = 0; g < groups; g++) {
            const uint8_t *pg = p + (size_t)g * 16u * (size_t)sb;
            const int16_t *zg0 = z0 + (size_t)g * ND_CQ_GROUP, *zg1 = z1 + (size_t)g * ND_CQ_GROUP;
            v128_t h0[4], l0[2], h1[4], l1[2];
            for (int i = 0; i < 4; i++) h0[i] = h1[i] = wasm_i32x4_splat(0);
            l0[0] = l0[1] = l1[0] = l1[1] = wasm_i32x4_splat(0);
            for (int q = 0; q < 8; q++) {
                v128_t idx = codes16(pg + 2 * sb * q, sb, d);
                v128_t vl = wasm_i8x16_swizzle(d->hl, idx), vh = wasm_i8x16_swizzle(d->hh, idx);
                v128_t ul = wasm_i8x16_swizzle(d->ll, idx), uh = wasm_i8x16_swizzle(d->lh, idx);
                v128_t v0 = zip_lo(vl, vh), v1 = zip_hi(vl, vh), u0 = zip_lo(ul, uh), u1 = zip_hi(ul, uh);
                mac16(h0, l0, q, v0, v1, u0, u1, zg0 + 16 * q);
                if (NT > 1) mac16(h1, l1, q, v0, v1, u0, u1, zg1 + 16 * q);
            }
            float norm = nd_cq_int_norm(w, r, g);
            acc0 = nd_cq_int_group_acc(acc0, lanes(h0[0]) + lanes(h0[1]) + lanes(h0[2]) + lanes(h0[3]),
                                       lanes(l0[0]) + lanes(l0[1]), norm);
            if (NT > 1)
                acc1 = nd_cq_int_group_acc(acc1, lanes(h1[0]) + lanes(h1[1]) + lanes(h1[2]) + lanes(h1[3]),
                                           lanes(l1[0]) + lanes(l1[1]), norm);
        }
        a->y[(size_t)t0 * (size_t)a->ldy + (size_t)r] = acc0 * a->tscale[t0];
        if (NT > 1) a->y[(size_t)(t0 + 1) * (size_t)a->ldy + (size_t)r] = acc1 * a->tscale[t0 + 1];
    }
}

static inline __attribute__((always_inline)) void gemm_sb(const nd_cq_int_args *a, int sb)
{
    decoder d;
    decoder_init(&d, sb, a->cbq, a->cbq_lo);
    int t = 0;
    for (; t + 2 <= a->T; t += 2) rows_nt(a, t, 2, &d, sb);
    if (t < a->T) rows_nt(a, t, 1, &d, sb);
}

static void gemm_simd128(const nd_cq_int_args *a)
{
    switch (nd_cq_int_sb(a->w)) {
    case 2: gemm_sb(a, 2); break;
    case 3: gemm_sb(a, 3); break;
    default: gemm_sb(a, 4); break;
    }
}

static const nd_cq_int_kernel kernel = {"simd128", gemm_simd128, NULL};
const nd_cq_int_kernel *nd_cq_int_kernel_simd128(void) { return &kernel; }
#else
const nd_cq_int_kernel *nd_cq_int_kernel_simd128(void) { return 0; }
#endif
