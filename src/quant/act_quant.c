/* act_quant.c - the A8 activation quantiser (see act_quant.h). */
#include "quant/act_quant.h"

static float scale_of(const float *x, int n)
{
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        amax = a > amax ? a : amax;
    }
    return nd_act_scale(amax);
}

float nd_act_quant_i8(const float *x, int n, int8_t *codes)
{
    float s = scale_of(x, n);
    for (int i = 0; i < n; i++) codes[i] = (int8_t)nd_act_code(x[i], s);
    return s;
}

float nd_act_fake_quant(float *x, int n, int8_t *codes)
{
    float s = scale_of(x, n);
    for (int i = 0; i < n; i++) {
        float c = nd_act_code(x[i], s);
        if (codes) codes[i] = (int8_t)c;
        x[i] = c * s;
    }
    return s;
}
