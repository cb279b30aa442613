/* cpu_probe_head.c - a Needle 3 probe head's pooling (SPEC-needle3 5.3
 * item 7) on the CPU: per cell row r and probe p, attention over the
 * tokens; then per query, attention over all (r, p) results. */
#include <string.h>

#include "backend/cpu/cpu_ops.h"

/* softmax in place over n values */
static void softmax(float *v, int n)
{
    float mx = -INFINITY, sum = 0.0f;
    for (int i = 0; i < n; i++) mx = v[i] > mx ? v[i] : mx;
    for (int i = 0; i < n; i++) sum += v[i] = expf(v[i] - mx);
    for (int i = 0; i < n; i++) v[i] /= sum;
}

void nd_cpu_probe_head(const nd_probe_head_args *a)
{
    int T = a->T, R = a->R, d = a->d, k = a->k, q = a->q, RK = R * k;
    float inv_sqrt_d = 1.0f / sqrtf((float)d);
    float *wt = a->work;        /* [T] */
    float *u = wt + T;          /* [RK] */
    /* pooled rows R_rp are built in the output's space one query at a time
     * would need them again per query: keep them in scratch after the
     * weights (work is sized by nd_probe_head_work_floats plus RK*d). */
    float *rows = u + RK + (size_t)q * RK + 64; /* [RK, d] */
    for (int r = 0; r < R; r++)
        for (int p = 0; p < k; p++) {
            const float *probe = a->probes + (size_t)(r * k + p) * d;
            for (int t = 0; t < T; t++) wt[t] = nd_cpu_dot(a->cells + ((size_t)t * R + r) * d, probe, d) * inv_sqrt_d;
            softmax(wt, T);
            float *out = rows + (size_t)(r * k + p) * d;
            memset(out, 0, sizeof(float) * (size_t)d);
            for (int t = 0; t < T; t++) {
                const float *c = a->cells + ((size_t)t * R + r) * d;
                for (int i = 0; i < d; i++) out[i] += wt[t] * c[i];
            }
            nd_cpu_rmsnorm(out, d, NULL, out);
            float g = a->gain[r * k + p];
            for (int i = 0; i < d; i++) out[i] *= g;
        }
    for (int i = 0; i < q; i++) {
        const float *U = a->query + (size_t)i * d;
        for (int j = 0; j < RK; j++) u[j] = nd_cpu_dot(rows + (size_t)j * d, U, d) * inv_sqrt_d + a->row_bias[(size_t)i * RK + j];
        softmax(u, RK);
        float *out = a->pooled + (size_t)i * d;
        memset(out, 0, sizeof(float) * (size_t)d);
        for (int j = 0; j < RK; j++) {
            const float *rj = rows + (size_t)j * d;
            for (int c = 0; c < d; c++) out[c] += u[j] * rj[c];
        }
    }
}
