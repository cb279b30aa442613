/* cpu_monarch.c - Needle 3's Monarch Hadamard MLP (SPEC-needle3 5.3 item 4)
 * on the CPU: the three Kronecker-factored products are done as two small
 * matrix products each (W_a^T Z W_b on z viewed as a x b), never as a WHT,
 * because trained factors are arbitrary matrices. */
#include <string.h>

#include "backend/cpu/cpu_ops.h"

/* y = z K with K = Wa (x) Wb: y[k*b + l] = sum_i sum_j Z[i][j] Wa[i][k] Wb[j][l].
 * m: scratch of a*b floats.  Each output value is 0 + the products added in
 * order of i (or j); blocks of KRON_BLOCK outputs are summed in a local array
 * the compiler keeps in vector registers (each lane's arithmetic is exactly
 * the scalar loop's, so the bits do not change). */
#define KRON_BLOCK 8

static void kron_rows(const float *restrict z, int zstride, int zstep, const float *restrict w, int rows, int n,
                      int cols, float *restrict out)
{
    /* out[r][l] = sum_j z[r*zstride + j*zstep] * w[j][l], r < rows, j < n, l < cols (cols % KRON_BLOCK == 0) */
    for (int r = 0; r < rows; r++) {
        for (int l0 = 0; l0 < cols; l0 += KRON_BLOCK) {
            float acc[KRON_BLOCK] = {0};
            for (int j = 0; j < n; j++) {
                float zj = z[(size_t)r * zstride + (size_t)j * zstep];
                const float *wj = w + (size_t)j * cols + l0;
                for (int l = 0; l < KRON_BLOCK; l++) acc[l] += zj * wj[l];
            }
            for (int l = 0; l < KRON_BLOCK; l++) out[(size_t)r * cols + l0 + l] = acc[l];
        }
    }
}

static void kron_apply(const float *z, const float *wa, const float *wb, int a, int b, float *m, float *y)
{
    if (b % KRON_BLOCK == 0) {
        kron_rows(z, b, 1, wb, a, b, b, m);  /* m = Z Wb: row i, sum over j of Z[i][j] Wb[j] */
        kron_rows(wa, 1, a, m, a, a, b, y);  /* y = Wa^T m: row k, sum over i of Wa[i][k] m[i] */
        return;
    }
    /* m = Z Wb (a x b) */
    for (int i = 0; i < a; i++) {
        float *mi = m + (size_t)i * b;
        for (int l = 0; l < b; l++) mi[l] = 0.0f;
        for (int j = 0; j < b; j++) {
            float zij = z[(size_t)i * b + j];
            const float *wj = wb + (size_t)j * b;
            for (int l = 0; l < b; l++) mi[l] += zij * wj[l];
        }
    }
    /* y = Wa^T m */
    for (int k = 0; k < a; k++) {
        float *yk = y + (size_t)k * b;
        for (int l = 0; l < b; l++) yk[l] = 0.0f;
        for (int i = 0; i < a; i++) {
            float w = wa[(size_t)i * a + k];
            const float *mi = m + (size_t)i * b;
            for (int l = 0; l < b; l++) yk[l] += w * mi[l];
        }
    }
}

void nd_cpu_monarch_mlp(const nd_monarch_mlp_args *a)
{
    int d = a->d, N = a->hada_n, A = a->a, B = a->b_dim, rank = a->rank;
    float *x = a->z, *y = a->z + N, *m = a->z + 2 * N, *sm = a->z + 3 * N;
    /* c = 1 + softmax(x cond_v) cond_u lives in y between steps, so compute
     * it into m's tail first: m is only needed inside kron_apply. */
    for (int t = 0; t < a->T; t++) {
        float *bt = a->b + (size_t)t * d;
        nd_cpu_rmsnorm(bt, d, a->norm, x);
        for (int i = d; i < N; i++) x[i] = 0.0f;
        /* the rank-`rank` softmax gate weights */
        float mx = -INFINITY;
        for (int r = 0; r < rank; r++) {
            float s = 0.0f;
            for (int i = 0; i < d; i++) s += x[i] * a->cond_v[(size_t)i * rank + r];
            sm[r] = s;
            if (s > mx) mx = s;
        }
        float sum = 0.0f;
        for (int r = 0; r < rank; r++) sum += sm[r] = expf(sm[r] - mx);
        for (int r = 0; r < rank; r++) sm[r] /= sum;
        /* z = ((d1 x) K1)[p1] */
        for (int i = 0; i < N; i++) x[i] *= a->d1[i];
        kron_apply(x, a->w1a, a->w1b, A, B, m, y);
        for (int i = 0; i < N; i++) x[i] = y[(int)a->p1[i]];
        /* z = (silu(d2 c z + b2) K2)[p2] */
        for (int i = 0; i < N; i++) {
            float c = 1.0f;
            for (int r = 0; r < rank; r++) c += sm[r] * a->cond_u[(size_t)r * N + i];
            x[i] = nd_siluf(a->d2[i] * c * x[i] + a->b2[i]);
        }
        kron_apply(x, a->w2a, a->w2b, A, B, m, y);
        for (int i = 0; i < N; i++) x[i] = y[(int)a->p2[i]];
        /* b += (d4 ((d3 z) K3))[0:d] */
        for (int i = 0; i < N; i++) x[i] *= a->d3[i];
        kron_apply(x, a->w3a, a->w3b, A, B, m, y);
        for (int i = 0; i < d; i++) bt[i] += a->d4[i] * y[i];
    }
}
