/* cpu_cq_int_neon.h - what the two AArch64 integer CQ kernels share
 * (cpu_cq_int_neon.c, cpu_cq_int_dotprod_neon.c): 16 stored codes of 2, 3
 * or 4 bits (2*sb bytes) to 16 byte indices, for TBL lookups.
 *
 *   - the 2*sb bytes (at most 8) go into the low half of a vector;
 *   - TBL puts the two bytes holding code 8h+j into halfword j of vector h;
 *   - USHL by minus the code's bit offset shifts it to the bottom;
 *   - UZP1 keeps the low byte of each halfword; AND keeps the code's bits.
 * Included only by files compiled for AArch64. */
#ifndef ND_CPU_CQ_INT_NEON_H
#define ND_CPU_CQ_INT_NEON_H

#include <arm_neon.h>
#include <string.h>

typedef struct nd_neon_unpack {
    uint8x16_t ctrl[2];
    int16x8_t shift[2];
    uint8x16_t mask;
} nd_neon_unpack;

static inline void nd_neon_unpack_init(nd_neon_unpack *u, int sb)
{
    uint8_t ctrl[32];
    int16_t sh[16];
    for (int i = 0; i < 16; i++) {
        int bit = sb * i, byte = bit / 8;
        ctrl[2 * i] = (uint8_t)byte;
        ctrl[2 * i + 1] = (uint8_t)(byte + 1); /* past the 2*sb bytes: a zero byte */
        sh[i] = (int16_t)-(bit % 8);
    }
    u->ctrl[0] = vld1q_u8(ctrl), u->ctrl[1] = vld1q_u8(ctrl + 16);
    u->shift[0] = vld1q_s16(sh), u->shift[1] = vld1q_s16(sh + 8);
    u->mask = vdupq_n_u8((uint8_t)((1u << sb) - 1));
}

/* the 16 codes at p (2*sb bytes; sb a constant after inlining) */
static inline uint8x16_t nd_neon_codes16(const uint8_t *p, int sb, const nd_neon_unpack *u)
{
    uint64_t bits = 0;
    memcpy(&bits, p, (size_t)(2 * sb));
    uint8x16_t b = vcombine_u8(vcreate_u8(bits), vdup_n_u8(0));
    uint16x8_t w0 = vshlq_u16(vreinterpretq_u16_u8(vqtbl1q_u8(b, u->ctrl[0])), u->shift[0]);
    uint16x8_t w1 = vshlq_u16(vreinterpretq_u16_u8(vqtbl1q_u8(b, u->ctrl[1])), u->shift[1]);
    return vandq_u8(vuzp1q_u8(vreinterpretq_u8_u16(w0), vreinterpretq_u8_u16(w1)), u->mask);
}

#endif
