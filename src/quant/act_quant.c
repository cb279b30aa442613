/* act_quant.c - the A8 activation quantiser (see act_quant.h). */
#include "quant/act_quant.h"

#include <math.h>

float nd_act_quant_i8(const float *x, int n, int8_t *codes)
{
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        amax = a > amax ? a : amax;
    }
    float s = amax > 0.0f ? amax / 127.0f : 1.0f;
    for (int i = 0; i < n; i++) {
        float c = rintf(x[i] / s); /* half to even, like jnp.round */
        c = c < -128.0f ? -128.0f : c > 127.0f ? 127.0f : c;
        codes[i] = (int8_t)c;
    }
    return s;
}

float nd_act_fake_quant(float *x, int n, int8_t *codes)
{
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        amax = a > amax ? a : amax;
    }
    float s = amax > 0.0f ? amax / 127.0f : 1.0f;
    for (int i = 0; i < n; i++) {
        float c = rintf(x[i] / s);
        c = c < -128.0f ? -128.0f : c > 127.0f ? 127.0f : c;
        if (codes) codes[i] = (int8_t)c;
        x[i] = c * s;
    }
    return s;
}
