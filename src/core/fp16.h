/* fp16.h - IEEE half and bfloat16 conversions (round to nearest even). */
#ifndef ND_FP16_H
#define ND_FP16_H

#include <stdint.h>
#include <string.h>

static inline float nd_f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t nd_bits_from_f32(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float nd_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0) {
        if (man == 0) return nd_f32_from_bits(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (exp == 31) return nd_f32_from_bits(sign | 0x7f800000u | (man << 13));
    return nd_f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

/* float32 -> half, round to nearest even, overflow to inf, NaN kept quiet. */
static inline uint16_t nd_float_to_half(float f)
{
    uint32_t x = nd_bits_from_f32(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t exp = (x >> 23) & 0xff, man = x & 0x7fffff;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000;
        int shift = 14 - e;
        uint32_t half_man = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half_man & 1))) half_man++;
        return (uint16_t)(sign | half_man);
    }
    uint32_t h = sign | ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* carry may roll into exponent: correct */
    return (uint16_t)h;
}

static inline float nd_bf16_to_float(uint16_t b) { return nd_f32_from_bits((uint32_t)b << 16); }

#endif
