/* adamw.c - AdamW as optax.chain(clip_by_global_norm, adamw) computes it. */
#include "train/adamw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

int nd_adamw_init(nd_adamw *o, size_t n, needle_error *err)
{
    memset(o, 0, sizeof *o);
    o->b1 = 0.9;
    o->b2 = 0.999;
    o->eps = 1e-8;
    o->weight_decay = 1e-4;
    o->clip_norm = 1.0;
    o->n = n;
    o->m = calloc(n ? n : 1, sizeof(float));
    o->v = calloc(n ? n : 1, sizeof(float));
    if (!o->m || !o->v) {
        nd_adamw_free(o);
        return nd_errorf(err, NEEDLE_ENOMEM, "adamw: cannot allocate moments for %zu parameters", n);
    }
    return 0;
}

void nd_adamw_free(nd_adamw *o)
{
    free(o->m);
    free(o->v);
    o->m = o->v = NULL;
}

double nd_grad_norm(const float *g, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)g[i] * g[i];
    return sqrt(s);
}

double nd_adamw_step(nd_adamw *o, float *w, const float *g, double lr)
{
    double norm = nd_grad_norm(g, o->n);
    /* optax clip_by_global_norm: scale by clip/norm only when norm > clip */
    double clip = (o->clip_norm > 0 && norm > o->clip_norm) ? o->clip_norm / norm : 1.0;
    o->step++;
    double bc1 = 1.0 - pow(o->b1, (double)o->step), bc2 = 1.0 - pow(o->b2, (double)o->step);
    float b1 = (float)o->b1, b2 = (float)o->b2;
    for (size_t i = 0; i < o->n; i++) {
        float gi = (float)(g[i] * clip);
        o->m[i] = b1 * o->m[i] + (1.0f - b1) * gi;
        o->v[i] = b2 * o->v[i] + (1.0f - b2) * gi * gi;
        double mh = o->m[i] / bc1, vh = o->v[i] / bc2;
        w[i] -= (float)(lr * (mh / (sqrt(vh) + o->eps) + o->weight_decay * w[i]));
    }
    return norm;
}
