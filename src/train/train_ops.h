/* train_ops.h - forward/backward pairs of every op of the Needle model, float32.
 *
 * Conventions (llm.c style): every tensor is a dense row-major float array,
 * N rows of tokens.  A forward writes its output (and whatever the backward
 * needs, e.g. reciprocal norms).  A backward ACCUMULATES (+=) into every
 * gradient it produces, so ops compose without the caller zeroing between
 * them; a NULL gradient pointer means "not needed" and skips that work.
 * Kernels are in the checkpoint layout [in, out].  `pool` may be NULL (serial);
 * with a pool every row is computed by one task in a fixed order, so results
 * are bit-identical whatever the thread count.
 */
#ifndef ND_TRAIN_OPS_H
#define ND_TRAIN_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "core/threadpool.h"

#include "core/formulas.h" /* ND_NORM_EPS, ND_SINKHORN_ITERS, ND_MAX_LANES, ... */

/* y[N,out] = x[N,in] @ W[in,out]; accumulate=1 adds into y. */
void nd_op_matmul_fwd(nd_threadpool *pool, float *y, const float *x, const float *W, int N, int in, int out,
                      int accumulate);
/* dx[N,in] += dy @ W^T (dx may be NULL); dW[in,out] += x^T @ dy (dW may be NULL). */
void nd_op_matmul_bwd(nd_threadpool *pool, float *dx, float *dW, const float *dy, const float *x, const float *W,
                      int N, int in, int out);

/* ZCRMS over rows of width m: y = (1+s) * x / sqrt(mean(x^2)+eps); scale NULL
 * gives rmsunit.  rinv[N] keeps 1/sqrt(mean+eps).  `groups` > 1 normalises
 * each row as `groups` independent pieces of width m/groups sharing one scale
 * of width m/groups (the per-head q/k norms); rinv then holds N*groups values. */
void nd_op_zcrms_fwd(float *y, float *rinv, const float *x, const float *scale, int N, int m, int groups);
void nd_op_zcrms_bwd(float *dx, float *dscale, const float *dy, const float *x, const float *rinv,
                     const float *scale, int N, int m, int groups);

/* Rotate-half RoPE over rows of `heads` heads of width hd; row r is at
 * position r % T.  cos/sin tables are [T, hd/2] (nd_op_rope_tables). */
void nd_op_rope_tables(float *cos_t, float *sin_t, int T, int hd, float theta);
void nd_op_rope_fwd(float *y, const float *x, const float *cos_t, const float *sin_t, int N, int T, int heads,
                    int hd);
void nd_op_rope_bwd(float *dx, const float *dy, const float *cos_t, const float *sin_t, int N, int T, int heads,
                    int hd);

/* Causal GQA attention over B sequences of length T.  q [N,H*hd], k
 * [N,KVH*hd], v [N,KVH*vd], o [N,H*vd] (Needle 3 splits the q/k and v head
 * widths; v2 passes vd = hd); scores scale by 1/sqrt(hd).  window > 0 is a
 * local (sliding window) layer: query t sees keys t-window < s <= t; 0 sees
 * every s <= t.  probs [B,H,T,T] is saved for the backward (masked entries
 * are written as 0). */
void nd_op_attention_fwd(nd_threadpool *pool, float *o, float *probs, const float *q, const float *k,
                         const float *v, int B, int T, int H, int KVH, int hd, int vd, int window);
void nd_op_attention_bwd(nd_threadpool *pool, float *dq, float *dk, float *dv, const float *dout,
                         const float *probs, const float *q, const float *k, const float *v, int B, int T, int H,
                         int KVH, int hd, int vd, int window);

/* y = x * sigmoid(g) elementwise over n values. */
void nd_op_sigmoid_gate_fwd(float *y, const float *x, const float *g, size_t n);
void nd_op_sigmoid_gate_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g, size_t n);

/* Hadamard MLP (SPEC 4): out[N,d] = (d3 * (silu(d2 * ((d1*pad(h)) Hn)) Hn))[:d].
 * z1 = (d1*pad(h)) Hn and z2 = silu(d2*z1) Hn, both [N,Nh], are saved. */
void nd_op_fwht(float *x, int n);
void nd_op_hada_mlp_fwd(float *out, float *z1, float *z2, const float *h, const float *d1, const float *d2,
                        const float *d3, int N, int d, int Nh);
void nd_op_hada_mlp_bwd(float *dh, float *dd1, float *dd2, float *dd3, const float *dout, const float *h,
                        const float *z1, const float *z2, const float *d1, const float *d2, const float *d3, int N,
                        int d, int Nh);

/* Engram hash rows: idx/ok [N, T_e] for B sequences of length T.  Table
 * k = oi*heads + hd hashes with seed oi*seed_stride + hd (Needle 3's
 * engram_seed_heads; seed_stride = heads gives the v2 seed k). */
void nd_op_engram_index(int32_t *idx, float *ok, const int32_t *ids, int B, int T, const int *orders,
                        int num_orders, int heads, int seed_stride, int slots);
/* e[N, Te*sub] = concat_k table_k[idx] * ok; tables [Te, slots, sub]. */
void nd_op_engram_gather_fwd(float *e, const float *tables, const int32_t *idx, const float *ok, int N, int Te,
                             int slots, int sub);
void nd_op_engram_gather_bwd(float *dtables, const float *de, const int32_t *idx, const float *ok, int N, int Te,
                             int slots, int sub);
/* Dilated taps conv: y_t = sum_j taps_j * v_{t-jD} [t >= jD], per sequence. */
void nd_op_taps_fwd(float *y, const float *v, const float *taps, int B, int T, int d, int D);
void nd_op_taps_bwd(float *dv, float *dtaps, const float *dy, const float *v, const float *taps, int B, int T,
                    int d, int D);
/* Needle 3's causal depthwise convolution of q, k, v along time, per
 * sequence: y_t[c] = sum_{j<ntaps, t-j>=0} taps[j][c] x_{t-j}[c]; taps
 * [ntaps, w], x/y [N, w]. */
void nd_op_causal_conv_fwd(float *y, const float *x, const float *taps, int ntaps, int B, int T, int w);
void nd_op_causal_conv_bwd(float *dx, float *dtaps, const float *dy, const float *x, const float *taps, int ntaps,
                           int B, int T, int w);
/* Engram gate: b = u + g * vc, g = sigmoid(<rmsunit(u), rmsunit(k)>/sqrt(d));
 * saves g[N], ru[N], rk[N] (reciprocal norms). */
void nd_op_engram_gate_fwd(float *b, float *g, float *ru, float *rk, const float *u, const float *k,
                           const float *vc, int N, int d);
void nd_op_engram_gate_bwd(float *du, float *dk, float *dvc, const float *db, const float *g, const float *ru,
                           const float *rk, const float *u, const float *k, const float *vc, int N, int d);

/* Log-space Sinkhorn, ND_SINKHORN_ITERS iterations of (row, column)
 * normalisation, then exp.  R, P are n*n (index i*n+j).  The backward
 * recomputes the iterations and differentiates through every one. */
void nd_op_sinkhorn_fwd(float *P, const float *R, int n);
void nd_op_sinkhorn_bwd(float *dR, const float *dP, const float *R, int n);
/* The same for `count` tokens (R, P, dP, dR: count x n*n), four at a time;
 * each token's bits are those of the single-token call. */
void nd_op_sinkhorn_fwd_batch(float *P, const float *R, int n, int count);
void nd_op_sinkhorn_bwd_batch(float *dR, const float *dP, const float *R, int n, int count);

/* Tied-embedding logits + softmax cross-entropy.  For every row i with
 * target[i] >= 0: loss_i = logsumexp(f_i E^T) - (f_i E^T)[target].  Returns
 * the SUM of loss_i; with df/dE non-NULL adds the gradient of
 * (sum of w_i loss_i) * grad_scale, w_i = weight[i] (all 1 when weight is
 * NULL; the returned loss is never weighted).  f [N,d], E [V,d]. */
double nd_op_logits_ce(nd_threadpool *pool, float *df, float *dE, const float *f, const float *E,
                       const int32_t *target, const float *weight, int N, int d, int V, float grad_scale);

#endif
