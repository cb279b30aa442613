/* train_par.c - row blocks of the row-wise training ops on the pool (see train_par.h). */
#include "train/train_par.h"

#include <stdlib.h>
#include <string.h>

#include "train/train_ops.h"

typedef struct {
    nd_rows_fn fn;
    void *ctx;
    int N;
    float *partials; /* n_blocks x grad_n, or NULL */
    size_t grad_n;
} rows_job;

static void rows_task(void *c, int task, int thread)
{
    (void)thread;
    rows_job *j = c;
    int r0 = task * ND_PAR_ROWS, r1 = r0 + ND_PAR_ROWS < j->N ? r0 + ND_PAR_ROWS : j->N;
    j->fn(j->ctx, r0, r1, j->partials ? j->partials + (size_t)task * j->grad_n : NULL);
}

void nd_par_rows(nd_threadpool *pool, int N, nd_rows_fn fn, void *ctx, float *grad, size_t grad_n)
{
    if (N <= 0) return;
    int blocks = (N + ND_PAR_ROWS - 1) / ND_PAR_ROWS;
    rows_job j = {fn, ctx, N, NULL, grad_n};
    if (grad && grad_n) {
        j.partials = calloc((size_t)blocks * grad_n, sizeof(float));
        if (!j.partials) { /* no memory for partials: every block adds straight into grad, serially */
            for (int b = 0; b < blocks; b++) fn(ctx, b * ND_PAR_ROWS, b + 1 < blocks ? (b + 1) * ND_PAR_ROWS : N, grad);
            return;
        }
    }
    nd_threadpool_run(pool, blocks, rows_task, &j);
    if (j.partials) {
        for (int b = 0; b < blocks; b++)
            for (size_t i = 0; i < grad_n; i++) grad[i] += j.partials[(size_t)b * grad_n + i];
        free(j.partials);
    }
}

/* One argument pack serves every wrapper: each reads the fields it needs. */
typedef struct {
    float *o0, *o1, *o2, *o3;
    const float *i0, *i1, *i2, *i3, *i4, *i5, *i6;
    int m, groups, d, Nh;
} args;

/* ---- ZCRMS ---- */
static void zcrms_fwd_rows(void *c, int r0, int r1, float *partial)
{
    (void)partial;
    args *a = c;
    size_t m = (size_t)a->m;
    nd_op_zcrms_fwd(a->o0 + r0 * m, a->o1 + (size_t)r0 * a->groups, a->i0 + r0 * m, a->i1, r1 - r0, a->m, a->groups);
}

void nd_par_zcrms_fwd(nd_threadpool *pool, float *y, float *rinv, const float *x, const float *scale, int N, int m,
                      int groups)
{
    args a = {.o0 = y, .o1 = rinv, .i0 = x, .i1 = scale, .m = m, .groups = groups};
    nd_par_rows(pool, N, zcrms_fwd_rows, &a, NULL, 0);
}

static void zcrms_bwd_rows(void *c, int r0, int r1, float *partial)
{
    args *a = c;
    size_t m = (size_t)a->m;
    nd_op_zcrms_bwd(a->o0 ? a->o0 + r0 * m : NULL, partial, a->i0 + r0 * m, a->i1 + r0 * m,
                    a->i2 + (size_t)r0 * a->groups, a->i3, r1 - r0, a->m, a->groups);
}

void nd_par_zcrms_bwd(nd_threadpool *pool, float *dx, float *dscale, const float *dy, const float *x,
                      const float *rinv, const float *scale, int N, int m, int groups)
{
    args a = {.o0 = dx, .i0 = dy, .i1 = x, .i2 = rinv, .i3 = scale, .m = m, .groups = groups};
    nd_par_rows(pool, N, zcrms_bwd_rows, &a, dscale, (size_t)(m / groups));
}

/* ---- Hadamard MLP ---- */
static void hada_fwd_rows(void *c, int r0, int r1, float *partial)
{
    (void)partial;
    args *a = c;
    size_t d = (size_t)a->d, Nh = (size_t)a->Nh;
    nd_op_hada_mlp_fwd(a->o0 + r0 * d, a->o1 + r0 * Nh, a->o2 + r0 * Nh, a->i0 + r0 * d, a->i1, a->i2, a->i3,
                       r1 - r0, a->d, a->Nh);
}

void nd_par_hada_mlp_fwd(nd_threadpool *pool, float *out, float *z1, float *z2, const float *h, const float *d1,
                         const float *d2, const float *d3, int N, int d, int Nh)
{
    args a = {.o0 = out, .o1 = z1, .o2 = z2, .i0 = h, .i1 = d1, .i2 = d2, .i3 = d3, .d = d, .Nh = Nh};
    nd_par_rows(pool, N, hada_fwd_rows, &a, NULL, 0);
}

static void hada_bwd_rows(void *c, int r0, int r1, float *partial)
{
    args *a = c;
    size_t d = (size_t)a->d, Nh = (size_t)a->Nh;
    /* the partial holds dd1 | dd2 | dd3, Nh each */
    nd_op_hada_mlp_bwd(a->o0 ? a->o0 + r0 * d : NULL, partial, partial ? partial + Nh : NULL,
                       partial ? partial + 2 * Nh : NULL, a->i0 + r0 * d, a->i1 + r0 * d, a->i2 + r0 * Nh,
                       a->i3 + r0 * Nh, a->i4, a->i5, a->i6, r1 - r0, a->d, a->Nh);
}

void nd_par_hada_mlp_bwd(nd_threadpool *pool, float *dh, float *dd1, float *dd2, float *dd3, const float *dout,
                         const float *h, const float *z1, const float *z2, const float *d1, const float *d2,
                         const float *d3, int N, int d, int Nh)
{
    args a = {.o0 = dh, .i0 = dout, .i1 = h, .i2 = z1, .i3 = z2, .i4 = d1, .i5 = d2, .i6 = d3, .d = d, .Nh = Nh};
    if (!dd1) {
        nd_par_rows(pool, N, hada_bwd_rows, &a, NULL, 0);
        return;
    }
    float *g = calloc(3 * (size_t)Nh, sizeof(float));
    if (!g) { /* no memory for the gathered gradients: serial */
        free(g);
        nd_op_hada_mlp_bwd(dh, dd1, dd2, dd3, dout, h, z1, z2, d1, d2, d3, N, d, Nh);
        return;
    }
    nd_par_rows(pool, N, hada_bwd_rows, &a, g, 3 * (size_t)Nh);
    for (int i = 0; i < Nh; i++) {
        dd1[i] += g[i];
        dd2[i] += g[Nh + i];
        dd3[i] += g[2 * Nh + i];
    }
    free(g);
}

/* ---- sigmoid gate ---- */
static void gate_fwd_rows(void *c, int r0, int r1, float *partial)
{
    (void)partial;
    args *a = c;
    size_t w = (size_t)a->m;
    nd_op_sigmoid_gate_fwd(a->o0 + r0 * w, a->i0 + r0 * w, a->i1 + r0 * w, (size_t)(r1 - r0) * w);
}

void nd_par_sigmoid_gate_fwd(nd_threadpool *pool, float *y, const float *x, const float *g, int N, int w)
{
    args a = {.o0 = y, .i0 = x, .i1 = g, .m = w};
    nd_par_rows(pool, N, gate_fwd_rows, &a, NULL, 0);
}

static void gate_bwd_rows(void *c, int r0, int r1, float *partial)
{
    (void)partial;
    args *a = c;
    size_t w = (size_t)a->m;
    nd_op_sigmoid_gate_bwd(a->o0 ? a->o0 + r0 * w : NULL, a->o1 ? a->o1 + r0 * w : NULL, a->i0 + r0 * w,
                           a->i1 + r0 * w, a->i2 + r0 * w, (size_t)(r1 - r0) * w);
}

void nd_par_sigmoid_gate_bwd(nd_threadpool *pool, float *dx, float *dg, const float *dy, const float *x,
                             const float *g, int N, int w)
{
    args a = {.o0 = dx, .o1 = dg, .i0 = dy, .i1 = x, .i2 = g, .m = w};
    nd_par_rows(pool, N, gate_bwd_rows, &a, NULL, 0);
}

/* ---- engram gate ---- */
static void egate_fwd_rows(void *c, int r0, int r1, float *partial)
{
    (void)partial;
    args *a = c;
    size_t d = (size_t)a->d;
    nd_op_engram_gate_fwd(a->o0 + r0 * d, a->o1 + r0, a->o2 + r0, a->o3 + r0, a->i0 + r0 * d, a->i1 + r0 * d,
                          a->i2 + r0 * d, r1 - r0, a->d);
}

void nd_par_engram_gate_fwd(nd_threadpool *pool, float *b, float *g, float *ru, float *rk, const float *u,
                            const float *k, const float *vc, int N, int d)
{
    args a = {.o0 = b, .o1 = g, .o2 = ru, .o3 = rk, .i0 = u, .i1 = k, .i2 = vc, .d = d};
    nd_par_rows(pool, N, egate_fwd_rows, &a, NULL, 0);
}

static void egate_bwd_rows(void *c, int r0, int r1, float *partial)
{
    (void)partial;
    args *a = c;
    size_t d = (size_t)a->d;
    nd_op_engram_gate_bwd(a->o0 ? a->o0 + r0 * d : NULL, a->o1 ? a->o1 + r0 * d : NULL,
                          a->o2 ? a->o2 + r0 * d : NULL, a->i0 + r0 * d, a->i1 + r0, a->i2 + r0, a->i3 + r0,
                          a->i4 + r0 * d, a->i5 + r0 * d, a->i6 + r0 * d, r1 - r0, a->d);
}

void nd_par_engram_gate_bwd(nd_threadpool *pool, float *du, float *dk, float *dvc, const float *db, const float *g,
                            const float *ru, const float *rk, const float *u, const float *k, const float *vc, int N,
                            int d)
{
    args a = {.o0 = du, .o1 = dk, .o2 = dvc, .i0 = db, .i1 = g, .i2 = ru, .i3 = rk, .i4 = u, .i5 = k, .i6 = vc,
              .d = d};
    nd_par_rows(pool, N, egate_bwd_rows, &a, NULL, 0);
}
