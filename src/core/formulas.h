/* formulas.h - the model's formulas and constants (SPEC section 4), in one
 * place that both forwards include: the engine's incremental forward
 * (model/forward.c, and the CPU backend's ops under it: it lives in core so
 * that the backend layer may include it) and the trainer's batched forward
 * (train/train_model.c, train/train_ops.c).  Each definition here is the engine's, bit for bit, so
 * the engine's outputs (and the goldens) do not move; tests/test_parity.c
 * checks that the two forwards agree.
 */
#ifndef ND_FORMULAS_H
#define ND_FORMULAS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* ---- constants ---- */

/* The most mHC lanes either forward supports (stack arrays are sized by it). */
#define ND_MAX_LANES 16
/* Log-space Sinkhorn iterations (row then column normalisation each). */
#define ND_SINKHORN_ITERS 20
/* The epsilon of ZCRMS / rmsunit: x / sqrt(mean(x^2) + eps). */
#define ND_NORM_EPS 1e-6f
/* The engram value convolution: taps at dilation D = max(orders). */
#define ND_ENGRAM_TAPS 4
/* The longest engram order. */
#define ND_ENGRAM_MAX_ORDER 8

/* ---- activations ---- */

static inline float nd_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float nd_silu(float x) { return x / (1.0f + expf(-x)); }

/* ---- RoPE ----
 * Rotate-half, absolute positions from 0, f_i = theta^(-2i/hd), i < hd/2.
 * ONE rounding rule, the float32 reference's: the frequency is rounded to
 * float, the angle pos * f_i is a float product, and cos/sin of that float
 * angle are rounded to float. */
static inline float nd_rope_freq(float theta, int hd, int i)
{
    return (float)pow((double)theta, -2.0 * i / (double)hd);
}

static inline void nd_rope_cos_sin(float freq, int pos, float *c, float *s)
{
    float ang = (float)pos * freq;
    *c = (float)cos((double)ang);
    *s = (float)sin((double)ang);
}

/* cs[0..hd/2) = cos, cs[hd/2..hd) = sin at one position (the engine's layout). */
static inline void nd_rope_row(float theta, int hd, int pos, float *cs)
{
    int half = hd / 2;
    for (int i = 0; i < half; i++) nd_rope_cos_sin(nd_rope_freq(theta, hd, i), pos, cs + i, cs + half + i);
}

/* ---- engram hash (SPEC section 4) ----
 * Table k (order o) at token t: acc = 0x9E3779B9 * (k+1); for j < o:
 * acc = (acc ^ tok[t-j]) * 0x01000193 (tok = 0 before position 0);
 * acc ^= acc >> 15; row = acc mod slots, valid iff t >= o-1. */
static inline uint32_t nd_engram_hash(int table, int order, const int *toks_back /* toks_back[j] = tok[t-j] */)
{
    uint32_t acc = 0x9E3779B9u * (uint32_t)(table + 1);
    for (int j = 0; j < order; j++) acc = (acc ^ (uint32_t)toks_back[j]) * 0x01000193u;
    acc ^= acc >> 15;
    return acc;
}

static inline int nd_engram_valid(int pos, int order) { return pos >= order - 1; }

/* ---- mHC lanes (SPEC section 4) ----
 * Layer l's home lane is l mod n; the pre weights p_i = sigmoid(... + b_pre_i
 * + (+4 home, -4 other)), the post weights q_i = 2 sigmoid(... + b_post_i +
 * (0 home, -4 other)). */
static inline int nd_mhc_home_lane(int layer, int lanes) { return layer % lanes; }
static inline float nd_mhc_pre_bias(int lane, int home) { return lane == home ? 4.0f : -4.0f; }
static inline float nd_mhc_post_bias(int lane, int home) { return lane == home ? 0.0f : -4.0f; }

/* ---- probe-attention pooling of the heads (SPEC section 4) ----
 * For one probe: w_c = softmax over cells of <cell_c, probe> / sqrt(d);
 * out = sum_c w_c cell_c.  wts (n_cells floats) receives the weights (the
 * trainer's backward needs them).  `dot` is the caller's dot-product kernel. */
typedef float (*nd_dot_fn)(const float *a, const float *b, int n);

static inline void nd_probe_pool(const float *cells, int n_cells, int d, const float *probe, nd_dot_fn dot, float *wts,
                                 float *out)
{
    float inv_sqrt_d = 1.0f / sqrtf((float)d), mx = -INFINITY;
    for (int c = 0; c < n_cells; c++) {
        wts[c] = dot(cells + (size_t)c * d, probe, d) * inv_sqrt_d;
        if (wts[c] > mx) mx = wts[c];
    }
    double sum = 0.0;
    for (int c = 0; c < n_cells; c++) sum += (wts[c] = expf(wts[c] - mx));
    for (int i = 0; i < d; i++) out[i] = 0.0f;
    for (int c = 0; c < n_cells; c++) {
        wts[c] = (float)(wts[c] / sum);
        const float *cell = cells + (size_t)c * d;
        for (int i = 0; i < d; i++) out[i] += wts[c] * cell[i];
    }
}

#endif
