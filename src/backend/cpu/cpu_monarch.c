/* cpu_monarch.c - Needle 3's Monarch Hadamard MLP (SPEC-needle3 5.3 item 4)
 * on the CPU: the three Kronecker-factored products are done as two small
 * matrix products each (W_a^T Z W_b on z viewed as a x b), never as a WHT,
 * because trained factors are arbitrary matrices.  Compiled once per ISA
 * (cpu_monarch_avx2.c, cpu_monarch_avx512.c): every copy computes the same
 * bits (each output's products and sums in the same order, no fused
 * multiply-add), the wider ones only do more outputs per instruction. */
#include "backend/cpu/cpu_isa_names.h" /* first: this copy's kernel names (compiled once per ISA) */
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_simd.h"

/* y = z K with K = Wa (x) Wb: y[k*b + l] = sum_i sum_j Z[i][j] Wa[i][k] Wb[j][l].
 * m: scratch of a*b floats.  Each output value is 0 + the products added in
 * order of i (or j); blocks of KRON_BLOCK outputs are summed in a local array
 * the compiler keeps in vector registers (each lane's arithmetic is exactly
 * the scalar loop's, so the bits do not change).  Columns l of m and y depend
 * only on the same columns of Wb and m, so a block of columns is a task of
 * its own: decode splits a token's products over the pool that way, one job
 * per product, with each output's arithmetic unchanged. */
#define KRON_BLOCK 8

/* out[r*ldo + l] = sum_j z[r*zstride + j*zstep] * w[j*ldw + l]  (r < rows, j < n, l < cols, cols % KRON_BLOCK == 0) */
static void kron_cols_scalar(const float *restrict z, int zstride, int zstep, const float *restrict w, int ldw,
                             int rows, int n, int cols, float *restrict out, int ldo)
{
    for (int r = 0; r < rows; r++) {
        for (int l0 = 0; l0 < cols; l0 += KRON_BLOCK) {
            float acc[KRON_BLOCK] = {0};
            for (int j = 0; j < n; j++) {
                float zj = z[(size_t)r * zstride + (size_t)j * zstep];
                const float *wj = w + (size_t)j * ldw + l0;
                for (int l = 0; l < KRON_BLOCK; l++) acc[l] += zj * wj[l];
            }
            for (int l = 0; l < KRON_BLOCK; l++) out[(size_t)r * ldo + l0 + l] = acc[l];
        }
    }
}

#if ND_VW >= 4
/* A tile of RB rows x CV vectors of columns of kron_cols (RB <= 4 and CV <= 2,
 * constants once inlined, so the RB*CV sums stay in registers): each weight
 * vector is loaded once for RB rows, and the RB*CV independent sums keep
 * both arithmetic ports busy.  Each lane is 0 + z*w + z*w ... in order of j,
 * a product rounded before its add, exactly as kron_cols_scalar. */
static inline __attribute__((always_inline)) void kron_tile(const float *restrict z, int zstride, int zstep,
                                                           const float *restrict w, int ldw, int n,
                                                           float *restrict out, int ldo, const int RB, const int CV)
{
    ndv acc[4][2];
    for (int r = 0; r < RB; r++)
        for (int c = 0; c < CV; c++) acc[r][c] = ndv_zero();
    for (int j = 0; j < n; j++) {
        const float *wj = w + (size_t)j * ldw;
        ndv wv[2];
        for (int c = 0; c < CV; c++) wv[c] = ndv_load(wj + c * ND_VW);
        for (int r = 0; r < RB; r++) {
            ndv zb = ndv_set1(z[(size_t)r * zstride + (size_t)j * zstep]);
            for (int c = 0; c < CV; c++) acc[r][c] = ndv_add(acc[r][c], ndv_mul(zb, wv[c]));
        }
    }
    for (int r = 0; r < RB; r++)
        for (int c = 0; c < CV; c++) ndv_store(out + (size_t)r * ldo + c * ND_VW, acc[r][c]);
}

/* Rows r0 .. r0+RB-1 of kron_cols, every column (cols % ND_VW == 0). */
static inline __attribute__((always_inline)) void kron_row_block(const float *z, int zstride, int zstep,
                                                                const float *w, int ldw, int n, int cols,
                                                                float *out, int ldo, const int RB)
{
    int l0 = 0;
    for (; l0 + 2 * ND_VW <= cols; l0 += 2 * ND_VW) kron_tile(z, zstride, zstep, w + l0, ldw, n, out + l0, ldo, RB, 2);
    if (l0 < cols) kron_tile(z, zstride, zstep, w + l0, ldw, n, out + l0, ldo, RB, 1);
}
#endif

static void kron_cols(const float *restrict z, int zstride, int zstep, const float *restrict w, int ldw, int rows,
                      int n, int cols, float *restrict out, int ldo)
{
#if ND_VW >= 4
    if (cols % ND_VW == 0) {
        int r = 0;
        for (; r + 4 <= rows; r += 4)
            kron_row_block(z + (size_t)r * zstride, zstride, zstep, w, ldw, n, cols, out + (size_t)r * ldo, ldo, 4);
        for (; r < rows; r++)
            kron_row_block(z + (size_t)r * zstride, zstride, zstep, w, ldw, n, cols, out + (size_t)r * ldo, ldo, 1);
        return;
    }
#endif
    kron_cols_scalar(z, zstride, zstep, w, ldw, rows, n, cols, out, ldo);
}

/* columns [l0, l1) of m = Z Wb, then of y = Wa^T m (b % KRON_BLOCK == 0) */
static void kron_block_cols(const float *z, const float *wa, const float *wb, int a, int b, float *m, float *y, int l0,
                            int l1)
{
    kron_cols(z, b, 1, wb + l0, b, a, b, l1 - l0, m + l0, b); /* m[i] = sum over j of Z[i][j] Wb[j] */
    kron_cols(wa, 1, a, m + l0, b, a, a, l1 - l0, y + l0, b); /* y[k] = sum over i of Wa[i][k] m[i] */
}

static void kron_apply(const float *z, const float *wa, const float *wb, int a, int b, float *m, float *y)
{
    if (b % KRON_BLOCK == 0) {
        kron_block_cols(z, wa, wb, a, b, m, y, 0, b);
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

typedef struct kron_job {
    const float *z, *wa, *wb;
    int a, b, cols; /* cols: columns per task */
    float *m, *y;
    void (*extra)(void *ctx); /* one more task, unrelated to the product (or NULL) */
    void *extra_ctx;
} kron_job;

static void kron_task(void *ctx, int task, int thread)
{
    (void)thread;
    const kron_job *j = ctx;
    if (task == j->b / j->cols) {
        j->extra(j->extra_ctx);
        return;
    }
    kron_block_cols(j->z, j->wa, j->wb, j->a, j->b, j->m, j->y, task * j->cols, (task + 1) * j->cols);
}

/* kron_apply, its column blocks over the pool when there is one worth using */
static void kron_run(nd_threadpool *pool, const float *z, const float *wa, const float *wb, int a, int b, float *m,
                     float *y, void (*extra)(void *), void *extra_ctx)
{
    if (!pool || b % KRON_BLOCK != 0 || b / KRON_BLOCK < 2) {
        kron_apply(z, wa, wb, a, b, m, y);
        if (extra) extra(extra_ctx);
        return;
    }
    /* a whole vector of columns per task where the ISA's vectors are wider than a block */
    int cols = ND_VW > KRON_BLOCK && b % ND_VW == 0 && b / ND_VW >= 2 ? ND_VW : KRON_BLOCK;
    kron_job j = {.z = z, .wa = wa, .wb = wb, .a = a, .b = b, .cols = cols, .m = m, .y = y, .extra = extra,
                  .extra_ctx = extra_ctx};
    nd_threadpool_run(pool, b / cols + (extra != NULL), kron_task, &j);
}

/* x[i] = silu(d2[i] c[i] y[p1[i]] + b2[i]) for i in [i0, i1), with the
 * rank gate c[i] = 1 + sum over r of sm[r] cond_u[r][i] (in order of r, as
 * before); y is only read, so blocks of i are independent: any split gives
 * the same values. */
static void gate_silu(const nd_monarch_mlp_args *a, const float *sm, const float *y, float *x, int i0, int i1)
{
    int rank = a->rank, N = a->hada_n;
    for (; i0 + KRON_BLOCK <= i1; i0 += KRON_BLOCK) {
        float acc[KRON_BLOCK];
        for (int l = 0; l < KRON_BLOCK; l++) acc[l] = 1.0f;
        for (int r = 0; r < rank; r++) {
            const float *u = a->cond_u + (size_t)r * N + i0;
            for (int l = 0; l < KRON_BLOCK; l++) acc[l] += sm[r] * u[l];
        }
        for (int l = 0; l < KRON_BLOCK; l++) {
            int i = i0 + l;
            x[i] = nd_siluf(a->d2[i] * acc[l] * y[(int)a->p1[i]] + a->b2[i]);
        }
    }
    for (; i0 < i1; i0++) {
        float c = 1.0f;
        for (int r = 0; r < rank; r++) c += sm[r] * a->cond_u[(size_t)r * N + i0];
        x[i0] = nd_siluf(a->d2[i0] * c * y[(int)a->p1[i0]] + a->b2[i0]);
    }
}

typedef struct gate_silu_job {
    const nd_monarch_mlp_args *a;
    const float *sm, *y;
    float *x;
} gate_silu_job;

#define GATE_SILU_UNIT 64 /* values per unit of the range job */

static void gate_silu_range(void *ctx, int u0, int u1, int thread)
{
    (void)thread;
    const gate_silu_job *j = ctx;
    int end = u1 * GATE_SILU_UNIT < j->a->hada_n ? u1 * GATE_SILU_UNIT : j->a->hada_n;
    gate_silu(j->a, j->sm, j->y, j->x, u0 * GATE_SILU_UNIT, end);
}

static void gate_silu_run(nd_threadpool *pool, const nd_monarch_mlp_args *a, const float *sm, const float *y, float *x)
{
    gate_silu_job j = {.a = a, .sm = sm, .y = y, .x = x};
    nd_threadpool_run_ranges(pool, (a->hada_n + GATE_SILU_UNIT - 1) / GATE_SILU_UNIT, 2, gate_silu_range, &j);
}

static void monarch_mlp(nd_threadpool *pool, const nd_monarch_mlp_args *a, void (*extra)(void *), void *extra_ctx)
{
    int d = a->d, N = a->hada_n, A = a->a, B = a->b_dim, rank = a->rank;
    float *x = a->z, *y = a->z + N, *m = a->z + 2 * N, *sm = a->z + 3 * N;
    /* scratch: x, y and m (N floats each), then the rank gate weights sm */
    for (int t = 0; t < a->T; t++) {
        float *bt = a->b + (size_t)t * d;
        nd_cpu_rmsnorm(bt, d, a->norm, x);
        for (int i = d; i < N; i++) x[i] = 0.0f;
        /* the rank-`rank` softmax gate weights */
        float mx = -INFINITY;
        if (rank % KRON_BLOCK == 0) /* sm[r] = sum over i of x[i] cond_v[i][r], KRON_BLOCK r at once */
            kron_cols(x, 0, 1, a->cond_v, rank, 1, d, rank, sm, rank);
        else
            for (int r = 0; r < rank; r++) {
                float s = 0.0f;
                for (int i = 0; i < d; i++) s += x[i] * a->cond_v[(size_t)i * rank + r];
                sm[r] = s;
            }
        for (int r = 0; r < rank; r++)
            if (sm[r] > mx) mx = sm[r];
        float sum = 0.0f;
        for (int r = 0; r < rank; r++) sum += sm[r] = expf(sm[r] - mx);
        for (int r = 0; r < rank; r++) sm[r] /= sum;
        /* z = ((d1 x) K1)[p1] */
        for (int i = 0; i < N; i++) x[i] *= a->d1[i];
        kron_run(pool, x, a->w1a, a->w1b, A, B, m, y, t == 0 ? extra : NULL, extra_ctx);
        /* z = (silu(d2 c z + b2) K2)[p2], z = y[p1]: the gate and SiLU by blocks of
         * values, over the pool in decode (its expf per value is most of the
         * MLP's element-wise work) */
        gate_silu_run(pool, a, sm, y, x);
        kron_run(pool, x, a->w2a, a->w2b, A, B, m, y, NULL, NULL);
        for (int i = 0; i < N; i++) x[i] = y[(int)a->p2[i]];
        /* b += (d4 ((d3 z) K3))[0:d] */
        for (int i = 0; i < N; i++) x[i] *= a->d3[i];
        kron_run(pool, x, a->w3a, a->w3b, A, B, m, y, NULL, NULL);
        for (int i = 0; i < d; i++) bt[i] += a->d4[i] * y[i];
    }
}

void nd_cpu_monarch_mlp(const nd_monarch_mlp_args *a) { monarch_mlp(NULL, a, NULL, NULL); }

void nd_cpu_monarch_mlp_pooled(nd_threadpool *pool, const nd_monarch_mlp_args *a, void (*extra)(void *),
                               void *extra_ctx)
{
    monarch_mlp(pool, a, extra, extra_ctx);
}
