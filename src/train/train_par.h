/* train_par.h - the trainer's row-wise ops run on the thread pool.
 *
 * Every op of train_ops.h that works row by row is split into fixed blocks of
 * ND_PAR_ROWS rows, one task each.  Parameter gradients (a norm's scale, the
 * Hadamard MLP's diagonals) are summed per block into a private partial and
 * the partials are added in block order afterwards, so results are the same
 * for any thread count (not the same bits as one serial loop: a different, but
 * fixed, summation order).  A NULL pool runs the blocks serially. */
#ifndef ND_TRAIN_PAR_H
#define ND_TRAIN_PAR_H

#include <stddef.h>

#include "core/threadpool.h"

#define ND_PAR_ROWS 32

/* fn handles rows [r0, r1); `partial` is grad_n zeroed floats private to the
 * block, or NULL when no gradient was asked for. */
typedef void (*nd_rows_fn)(void *ctx, int r0, int r1, float *partial);

/* Run fn over N rows; if grad is not NULL, grad[0..grad_n) += the partials in
 * block order.  (Without memory for the partials the blocks run serially and
 * add straight into grad: the same values, rounded in another order.) */
void nd_par_rows(nd_threadpool *pool, int N, nd_rows_fn fn, void *ctx, float *grad, size_t grad_n);

void nd_par_zcrms_fwd(nd_threadpool *pool, float *y, float *rinv, const float *x, const float *scale, int N, int m,
                      int groups);
void nd_par_zcrms_bwd(nd_threadpool *pool, float *dx, float *dscale, const float *dy, const float *x,
                      const float *rinv, const float *scale, int N, int m, int groups);
void nd_par_hada_mlp_fwd(nd_threadpool *pool, float *out, float *z1, float *z2, const float *h, const float *d1,
                         const float *d2, const float *d3, int N, int d, int Nh);
/* dd1, dd2, dd3 are all NULL or all set */
void nd_par_hada_mlp_bwd(nd_threadpool *pool, float *dh, float *dd1, float *dd2, float *dd3, const float *dout,
                         const float *h, const float *z1, const float *z2, const float *d1, const float *d2,
                         const float *d3, int N, int d, int Nh);
/* rows of width w */
void nd_par_sigmoid_gate_fwd(nd_threadpool *pool, float *y, const float *x, const float *g, int N, int w);
void nd_par_sigmoid_gate_bwd(nd_threadpool *pool, float *dx, float *dg, const float *dy, const float *x,
                             const float *g, int N, int w);
void nd_par_engram_gate_fwd(nd_threadpool *pool, float *b, float *g, float *ru, float *rk, const float *u,
                            const float *k, const float *vc, int N, int d);
void nd_par_engram_gate_bwd(nd_threadpool *pool, float *du, float *dk, float *dvc, const float *db, const float *g,
                            const float *ru, const float *rk, const float *u, const float *k, const float *vc, int N,
                            int d);

#endif
