/* act_quant.h - the A8 activation quantiser of the reference's deploy
 * numerics (deploy_numerics.md section 1), the one definition every A8 point
 * of every generation uses.
 *
 * One scale per vector: s = max|x| / 127 (a float32 division; s = 1 for an
 * all-zero vector), codes c_i = rint(x_i / s) (round half to even in the
 * default rounding mode, a float32 division, not a multiplication by 1/s),
 * clipped to [-128, 127] (the clip never binds).  The fake-quantised vector
 * is c_i * s; a matrix-vector product over it is s * (W c). */
#ifndef ND_ACT_QUANT_H
#define ND_ACT_QUANT_H

#include <math.h>
#include <stdint.h>

/* The scale of a vector whose largest magnitude is amax. */
static inline float nd_act_scale(float amax) { return amax > 0.0f ? amax / 127.0f : 1.0f; }

/* One code: x / s rounded half to even (like jnp.round), clipped to int8. */
static inline float nd_act_code(float x, float s)
{
    float c = rintf(x / s);
    return c < -128.0f ? -128.0f : c > 127.0f ? 127.0f : c;
}

/* Quantise x[0..n) into codes[0..n); returns the scale. */
float nd_act_quant_i8(const float *x, int n, int8_t *codes);

/* x[i] <- c_i * s in place (the value the reference's forward carries on);
 * returns s.  codes may be NULL. */
float nd_act_fake_quant(float *x, int n, int8_t *codes);

#endif
