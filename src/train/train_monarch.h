/* train_monarch.h - forward/backward of Needle 3's Monarch Hadamard MLP
 * (SPEC-needle3 5.3 item 4) for the trainer, float32, rows of tokens.
 *
 * On the normed input h (length d) of each row:
 *   sm = softmax(h cond_v)                     (rank R = ND_MLP_GATE_RANK)
 *   c  = 1 + sm cond_u                         (length Nh)
 *   x1 = ((d1 * pad(h)) K1)[p1]
 *   x2 = (silu(d2 * c * x1 + b2) K2)[p2]
 *   y3 = (d3 * x2) K3;  out = (d4 * y3)[0:d]
 * with K_s = W_sa (x) W_sb applied as W_sa^T Z W_sb on the a x b view Z of the
 * row (two small products, a^2 b + a b^2 MACs), y[p] meaning y_i = y[p_i].
 * The forward saves sm [N,R], x1 and x2 [N,Nh] and y3[0:d] [N,d]; the
 * backward recomputes the rest.  Conventions as train_ops.h: gradients are
 * accumulated; with a pool each block of rows sums its parameter gradients
 * privately and the blocks are added in order (bit-identical for any thread
 * count). */
#ifndef ND_TRAIN_MONARCH_H
#define ND_TRAIN_MONARCH_H

#include "core/threadpool.h"

typedef struct nd_monarch_params {
    int d, Nh, a, b, rank;
    const float *d1, *d2, *b2, *d3, *d4;  /* [Nh] */
    const float *w1a, *w2a, *w3a;         /* [a, a] */
    const float *w1b, *w2b, *w3b;         /* [b, b] */
    const float *cond_v, *cond_u;         /* [d, R], [R, Nh] */
    const float *p1, *p2;                 /* [Nh] permutations (exact integers) */
} nd_monarch_params;

/* The parameter gradients, same shapes (all NULL, or all set). */
typedef struct nd_monarch_grads {
    float *d1, *d2, *b2, *d3, *d4, *w1a, *w2a, *w3a, *w1b, *w2b, *w3b, *cond_v, *cond_u;
} nd_monarch_grads;

void nd_monarch_fwd(nd_threadpool *pool, const nd_monarch_params *p, float *out, float *sm, float *x1, float *x2,
                    float *y3, const float *h, int N);
/* dh may be NULL; g may be NULL (no parameter gradients). */
void nd_monarch_bwd(nd_threadpool *pool, const nd_monarch_params *p, const nd_monarch_grads *g, float *dh,
                    const float *dout, const float *h, const float *sm, const float *x1, const float *x2,
                    const float *y3, int N);

#endif
