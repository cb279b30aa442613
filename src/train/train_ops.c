/* train_ops.c - forward/backward of every Needle op in float32 (see train_ops.h). */
#include "train/train_ops.h"

#include "quant/hadamard.h"
#include "train/gemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- small vector helpers ------------------------------------------------
 * GCC/clang vector extensions make the hot loops SIMD at -O2 without
 * -ffast-math; every reduction uses a fixed lane layout, so results do not
 * depend on threads or alignment. */
typedef float v8 __attribute__((vector_size(32)));
/* Without -march=native (NATIVE=0) passing a 32-byte vector by value "changes
 * the ABI"; every helper here is static, so no ABI is crossed. */
#pragma GCC diagnostic ignored "-Wpsabi"

static inline v8 ld8(const float *p) { v8 v; memcpy(&v, p, sizeof v); return v; }
static inline void st8(float *p, v8 v) { memcpy(p, &v, sizeof v); }
static inline v8 splat8(float x) { v8 v = {x, x, x, x, x, x, x, x}; return v; }

/* ---- exp and log four at a time ------------------------------------------
 * The Sinkhorn (thousands of exp and log per token, forward and backward) and
 * the attention softmax called libm once per value.  These run four values
 * in the lanes of a 128-bit vector (SSE2 on the x86-64 baseline, NEON,
 * SIMD128; 256-bit vectors split in halves on the baseline measured slower),
 * accurate to a few units in the last place; the engine (backend/cpu) keeps
 * libm's, and the tests hold the two together. */
typedef float skv __attribute__((vector_size(16)));
typedef int32_t ski __attribute__((vector_size(16)));
static inline skv sk_splat(float x) { skv v = {x, x, x, x}; return v; }
static inline skv sk_ld(const float *p) { skv v; memcpy(&v, p, sizeof v); return v; }
/* per lane: `when` (all ones or zero, as a comparison gives) ? a : b */
static inline skv sk_select(ski when, skv a, skv b) { return (skv)((when & (ski)a) | (~when & (ski)b)); }

/* exp(x) for x <= 0 (every argument here is a log-probability or x - max):
 * x = k ln2 + r with |r| <= ln2/2, exp(r) by its degree-6 Taylor polynomial
 * (relative error ~2e-7), times 2^k built in the exponent bits; arguments
 * below -87 give ~1e-38, not 0 (a weight that small does not matter). */
static inline skv exp_nonpos4(skv x)
{
    ski low = x < sk_splat(-87.0f);
    x = sk_select(low, sk_splat(-87.0f), x);
    /* k = round(x / ln2): adding 1.5 * 2^23 rounds to an integer in round-to-nearest */
    skv k = (x * sk_splat(1.44269504088896341f) + sk_splat(12582912.0f)) - sk_splat(12582912.0f);
    skv r = x - k * sk_splat(0.693359375f) + k * sk_splat(2.12194440e-4f); /* ln2 in two parts */
    skv p = sk_splat(1.0f / 720.0f);
    p = p * r + sk_splat(1.0f / 120.0f);
    p = p * r + sk_splat(1.0f / 24.0f);
    p = p * r + sk_splat(1.0f / 6.0f);
    p = p * r + sk_splat(0.5f);
    p = p * r + sk_splat(1.0f);
    p = p * r + sk_splat(1.0f);
    ski e = (__builtin_convertvector(k, ski) + 127) << 23;
    return p * (skv)e;
}

/* log(x) for finite x > 0 (a sum of exps, >= 1 here): x = m 2^e with m in
 * [sqrt(1/2), sqrt(2)), log m = 2 atanh(z), z = (m - 1) / (m + 1), |z| <= 0.172,
 * by its series to z^11 (relative error below 1e-8 of log m). */
static inline skv log_pos4(skv x)
{
    ski bits = (ski)x;
    ski e = ((bits >> 23) & 255) - 127;
    skv m = (skv)((bits & 0x007fffff) | 0x3f800000); /* [1, 2) */
    ski big = m > sk_splat(1.41421356f);
    m = sk_select(big, m * sk_splat(0.5f), m);
    e -= big; /* big is -1 where m was halved */
    skv z = (m - sk_splat(1.0f)) / (m + sk_splat(1.0f)), z2 = z * z;
    skv t = sk_splat(1.0f / 11.0f);
    t = t * z2 + sk_splat(1.0f / 9.0f);
    t = t * z2 + sk_splat(1.0f / 7.0f);
    t = t * z2 + sk_splat(1.0f / 5.0f);
    t = t * z2 + sk_splat(1.0f / 3.0f);
    t = t * z2 + sk_splat(1.0f);
    return sk_splat(2.0f) * z * t + __builtin_convertvector(e, skv) * sk_splat(0.693147180559945f);
}

/* p[i] = exp(p[i] - mx) for i < n (every p[i] <= mx) */
static void exp_shifted(float *p, int n, float mx)
{
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        skv v = exp_nonpos4(sk_ld(p + i) - sk_splat(mx));
        memcpy(p + i, &v, sizeof v);
    }
    if (i < n) {
        float t[4] = {0};
        memcpy(t, p + i, sizeof(float) * (size_t)(n - i));
        skv v = exp_nonpos4(sk_ld(t) - sk_splat(mx));
        memcpy(t, &v, sizeof v);
        memcpy(p + i, t, sizeof(float) * (size_t)(n - i));
    }
}

/* p[i] *= scale for i < n; returns the largest (-inf for n = 0), a NaN never
 * winning: the same value as a running scalar compare, in any lane order */
static float scale_and_max(float *p, int n, float scale)
{
    skv m = sk_splat(-INFINITY);
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        skv v = sk_ld(p + i) * sk_splat(scale);
        memcpy(p + i, &v, sizeof v);
        ski up = v > m;
        m = sk_select(up, v, m);
    }
    float mx = -INFINITY;
    for (int k = 0; k < 4; k++) mx = m[k] > mx ? m[k] : mx;
    for (; i < n; i++) {
        p[i] *= scale;
        if (p[i] > mx) mx = p[i];
    }
    return mx;
}

static float dot(const float *a, const float *b, int n)
{
    v8 acc = splat8(0.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) acc += ld8(a + i) * ld8(b + i);
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* y += a * b elementwise */
static void axpy_mul(float *y, const float *a, const float *b, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8) st8(y + i, ld8(y + i) + ld8(a + i) * ld8(b + i));
    for (; i < n; i++) y[i] += a[i] * b[i];
}

static void axpy(float *y, float a, const float *x, int n)
{
    v8 av = splat8(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) st8(y + i, ld8(y + i) + av * ld8(x + i));
    for (; i < n; i++) y[i] += a * x[i];
}


/* ---- matmul ---------------------------------------------------------------
 * All three products are the packed GEMM of gemm.c, each operand read through
 * its strides (no transposed copies).  If its buffers cannot be allocated the
 * plain loops below give the same values (in a different rounding order). */
static void gemm_fallback(float *C, int ldc, nd_gemm_operand A, nd_gemm_operand B, int M, int N, int K, int acc)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = acc ? C[(size_t)i * ldc + j] : 0.0f;
            for (int k = 0; k < K; k++) s += A.p[i * A.row + k * A.col] * B.p[k * B.row + j * B.col];
            C[(size_t)i * ldc + j] = s;
        }
}

static void gemm(nd_threadpool *pool, float *C, int ldc, nd_gemm_operand A, nd_gemm_operand B, int M, int N, int K,
                 int accumulate)
{
    if (nd_gemm(pool, C, ldc, A, B, M, N, K, accumulate)) gemm_fallback(C, ldc, A, B, M, N, K, accumulate);
}

void nd_op_matmul_fwd(nd_threadpool *pool, float *y, const float *x, const float *W, int N, int in, int out,
                      int accumulate)
{
    gemm(pool, y, out, nd_gemm_rowmajor(x, in), nd_gemm_rowmajor(W, out), N, out, in, accumulate);
}

void nd_op_matmul_bwd(nd_threadpool *pool, float *dx, float *dW, const float *dy, const float *x, const float *W,
                      int N, int in, int out)
{
    if (dx) /* dx[N,in] += dy[N,out] W^T */
        gemm(pool, dx, in, nd_gemm_rowmajor(dy, out), nd_gemm_transposed(W, out), N, in, out, 1);
    if (dW) /* dW[in,out] += x^T dy, summed over tokens in order */
        gemm(pool, dW, out, nd_gemm_transposed(x, in), nd_gemm_rowmajor(dy, out), in, out, N, 1);
}

/* ---- ZCRMS / rmsunit ------------------------------------------------------ */
void nd_op_zcrms_fwd(float *y, float *rinv, const float *x, const float *scale, int N, int m, int groups)
{
    int w = m / groups;
    for (int r = 0; r < N * groups; r++) {
        const float *xr = x + (size_t)r * w;
        float *yr = y + (size_t)r * w;
        float ms = dot(xr, xr, w) / (float)w;
        float ri = 1.0f / sqrtf(ms + ND_NORM_EPS);
        rinv[r] = ri;
        for (int i = 0; i < w; i++) yr[i] = (scale ? 1.0f + scale[i] : 1.0f) * xr[i] * ri;
    }
}

void nd_op_zcrms_bwd(float *dx, float *dscale, const float *dy, const float *x, const float *rinv,
                     const float *scale, int N, int m, int groups)
{
    int w = m / groups;
    for (int r = 0; r < N * groups; r++) {
        const float *xr = x + (size_t)r * w, *dyr = dy + (size_t)r * w;
        float ri = rinv[r];
        /* with xn = x*ri and g = dy*(1+s): dx = ri * (g - xn * mean(g*xn)) */
        float gx = 0.0f;
        for (int i = 0; i < w; i++) {
            float g = dyr[i] * (scale ? 1.0f + scale[i] : 1.0f);
            gx += g * xr[i] * ri;
            if (dscale) dscale[i] += dyr[i] * xr[i] * ri;
        }
        gx /= (float)w;
        if (dx) {
            float *dxr = dx + (size_t)r * w;
            for (int i = 0; i < w; i++) {
                float g = dyr[i] * (scale ? 1.0f + scale[i] : 1.0f);
                dxr[i] += ri * (g - xr[i] * ri * gx);
            }
        }
    }
}

/* ---- RoPE ----------------------------------------------------------------- */
void nd_op_rope_tables(float *cos_t, float *sin_t, int T, int hd, float theta)
{
    int half = hd / 2;
    for (int i = 0; i < half; i++) {
        float f = nd_rope_freq(theta, hd, i); /* the engine's rounding (core/formulas.h) */
        for (int t = 0; t < T; t++) nd_rope_cos_sin(f, t, &cos_t[(size_t)t * half + i], &sin_t[(size_t)t * half + i]);
    }
}

void nd_op_rope_fwd(float *y, const float *x, const float *cos_t, const float *sin_t, int N, int T, int heads,
                    int hd)
{
    int half = hd / 2;
    for (int r = 0; r < N; r++) {
        const float *c = cos_t + (size_t)(r % T) * half, *s = sin_t + (size_t)(r % T) * half;
        for (int h = 0; h < heads; h++) {
            const float *xr = x + ((size_t)r * heads + h) * hd;
            float *yr = y + ((size_t)r * heads + h) * hd;
            for (int i = 0; i < half; i++) {
                float x1 = xr[i], x2 = xr[i + half];
                yr[i] = x1 * c[i] - x2 * s[i];
                yr[i + half] = x2 * c[i] + x1 * s[i];
            }
        }
    }
}

void nd_op_rope_bwd(float *dx, const float *dy, const float *cos_t, const float *sin_t, int N, int T, int heads,
                    int hd)
{
    int half = hd / 2;
    for (int r = 0; r < N; r++) {
        const float *c = cos_t + (size_t)(r % T) * half, *s = sin_t + (size_t)(r % T) * half;
        for (int h = 0; h < heads; h++) {
            const float *g = dy + ((size_t)r * heads + h) * hd;
            float *dxr = dx + ((size_t)r * heads + h) * hd;
            for (int i = 0; i < half; i++) {
                dxr[i] += g[i] * c[i] + g[i + half] * s[i];
                dxr[i + half] += -g[i] * s[i] + g[i + half] * c[i];
            }
        }
    }
}

/* ---- attention ------------------------------------------------------------
 * Per (sequence, head) the products are small GEMMs (T x T x hd) run serially
 * inside the task: S = Q K^T, O = P V; backward dP = dO V^T, dQ = dS K,
 * dK = dS^T Q, dV = P^T dO.  The causal upper triangle is computed and then
 * masked (P is 0 there, so it adds nothing to O or the gradients). */
typedef struct {
    float *o, *probs, *dq, *dk, *dv;
    const float *q, *k, *v, *dout, *cprobs;
    int B, T, H, KVH, hd, vd, window;
    float *scratch; /* per thread: scratch_floats, the GEMM's gemm_floats first */
    size_t scratch_floats, gemm_floats;
} attn_job;

/* The first key position query t sees: 0, or t - window + 1 under a sliding window. */
static int attn_first(const attn_job *j, int t) { return j->window > 0 && t >= j->window ? t - j->window + 1 : 0; }

static void attn_fwd_task(void *ctx, int task, int thread)
{
    attn_job *j = ctx;
    int b = task / j->H, h = task % j->H, T = j->T, hd = j->hd, vd = j->vd;
    int g = h / (j->H / j->KVH);
    int qs = j->H * hd, ks = j->KVH * hd, vs = j->KVH * vd, os = j->H * vd;
    float scale = 1.0f / sqrtf((float)hd);
    float *scr = j->scratch + (size_t)thread * j->scratch_floats;
    float *S = j->probs + ((size_t)b * j->H + h) * T * T;
    const float *qh = j->q + (size_t)b * T * qs + (size_t)h * hd;
    const float *kg = j->k + (size_t)b * T * ks + (size_t)g * hd, *vg = j->v + (size_t)b * T * vs + (size_t)g * vd;
    nd_gemm_serial(S, T, nd_gemm_strided(qh, qs, 1), nd_gemm_strided(kg, 1, ks), T, T, hd, 0, scr);
    for (int t = 0; t < T; t++) {
        float *p = S + (size_t)t * T;
        int s0 = attn_first(j, t);
        float mx = scale_and_max(p + s0, t - s0 + 1, scale);
        float sum = 0.0f;
        exp_shifted(p + s0, t - s0 + 1, mx);
        for (int s = s0; s <= t; s++) sum += p[s];
        float inv = 1.0f / sum;
        for (int s = s0; s <= t; s++) p[s] *= inv;
        for (int s = 0; s < s0; s++) p[s] = 0.0f;
        for (int s = t + 1; s < T; s++) p[s] = 0.0f;
    }
    nd_gemm_serial(j->o + (size_t)b * T * os + (size_t)h * vd, os, nd_gemm_strided(S, T, 1),
                   nd_gemm_strided(vg, vs, 1), T, vd, T, 0, scr);
}

static int attn_scratch(attn_job *j, nd_threadpool *pool, int extra)
{
    int big = j->T > j->hd ? j->T : j->hd;
    if (j->vd > big) big = j->vd;
    j->gemm_floats = nd_gemm_scratch_floats(big, big);
    j->scratch_floats = j->gemm_floats + (size_t)extra;
    int threads = pool ? nd_threadpool_threads(pool) : 1;
    j->scratch = malloc(sizeof(float) * j->scratch_floats * (size_t)threads);
    return j->scratch ? 0 : -1;
}

void nd_op_attention_fwd(nd_threadpool *pool, float *o, float *probs, const float *q, const float *k,
                         const float *v, int B, int T, int H, int KVH, int hd, int vd, int window)
{
    attn_job j = {.o = o, .probs = probs, .q = q, .k = k, .v = v, .B = B, .T = T, .H = H, .KVH = KVH, .hd = hd,
                  .vd = vd, .window = window};
    if (attn_scratch(&j, pool, 0)) return; /* out of memory: o left as it was */
    nd_threadpool_run(pool, B * H, attn_fwd_task, &j);
    free(j.scratch);
}

/* One task per (sequence, KV head): the query heads sharing a KV head all add
 * into its dk/dv, so they run in one task in a fixed order. */
static void attn_bwd_task(void *ctx, int task, int thread)
{
    attn_job *j = ctx;
    int b = task / j->KVH, g = task % j->KVH, T = j->T, hd = j->hd, vd = j->vd;
    int rep = j->H / j->KVH, qs = j->H * hd, ks = j->KVH * hd, vs = j->KVH * vd, os = j->H * vd;
    float scale = 1.0f / sqrtf((float)hd);
    float *scr = j->scratch + (size_t)thread * j->scratch_floats;
    float *dS = scr + j->gemm_floats; /* [T, T] */
    const float *kg = j->k + (size_t)b * T * ks + (size_t)g * hd, *vg = j->v + (size_t)b * T * vs + (size_t)g * vd;
    for (int h = g * rep; h < (g + 1) * rep; h++) {
        const float *P = j->cprobs + ((size_t)b * j->H + h) * T * T;
        const float *dO = j->dout + (size_t)b * T * os + (size_t)h * vd;
        const float *qh = j->q + (size_t)b * T * qs + (size_t)h * hd;
        /* dP = dO V^T, turned in place into dS */
        nd_gemm_serial(dS, T, nd_gemm_strided(dO, os, 1), nd_gemm_strided(vg, 1, vs), T, T, vd, 0, scr);
        for (int t = 0; t < T; t++) {
            const float *p = P + (size_t)t * T;
            float *ds = dS + (size_t)t * T;
            int s0 = attn_first(j, t);
            float sdp = 0.0f;
            for (int s = s0; s <= t; s++) sdp += p[s] * ds[s];
            for (int s = s0; s <= t; s++) ds[s] = p[s] * (ds[s] - sdp) * scale;
            for (int s = 0; s < s0; s++) ds[s] = 0.0f;
            for (int s = t + 1; s < T; s++) ds[s] = 0.0f;
        }
        if (j->dv) /* dV += P^T dO */
            nd_gemm_serial(j->dv + (size_t)b * T * vs + (size_t)g * vd, vs, nd_gemm_strided(P, 1, T),
                           nd_gemm_strided(dO, os, 1), T, vd, T, 1, scr);
        if (j->dq) /* dQ += dS K */
            nd_gemm_serial(j->dq + (size_t)b * T * qs + (size_t)h * hd, qs, nd_gemm_strided(dS, T, 1),
                           nd_gemm_strided(kg, ks, 1), T, hd, T, 1, scr);
        if (j->dk) /* dK += dS^T Q */
            nd_gemm_serial(j->dk + (size_t)b * T * ks + (size_t)g * hd, ks, nd_gemm_strided(dS, 1, T),
                           nd_gemm_strided(qh, qs, 1), T, hd, T, 1, scr);
    }
}

void nd_op_attention_bwd(nd_threadpool *pool, float *dq, float *dk, float *dv, const float *dout,
                         const float *probs, const float *q, const float *k, const float *v, int B, int T, int H,
                         int KVH, int hd, int vd, int window)
{
    attn_job j = {.dq = dq, .dk = dk, .dv = dv, .q = q, .k = k, .v = v, .dout = dout, .cprobs = probs,
                  .B = B, .T = T, .H = H, .KVH = KVH, .hd = hd, .vd = vd, .window = window};
    if (attn_scratch(&j, pool, T * T)) return; /* out of memory: gradients left untouched */
    nd_threadpool_run(pool, B * KVH, attn_bwd_task, &j);
    free(j.scratch);
}

/* ---- sigmoid gate --------------------------------------------------------- */
void nd_op_sigmoid_gate_fwd(float *y, const float *x, const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i] * nd_sigmoid(g[i]);
}

void nd_op_sigmoid_gate_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float s = nd_sigmoid(g[i]);
        if (dx) dx[i] += dy[i] * s;
        if (dg) dg[i] += dy[i] * x[i] * s * (1.0f - s);
    }
}

/* ---- Hadamard MLP --------------------------------------------------------- */
void nd_op_fwht(float *x, int n) { nd_hadamard(x, n); }

void nd_op_hada_mlp_fwd(float *out, float *z1, float *z2, const float *h, const float *d1, const float *d2,
                        const float *d3, int N, int d, int Nh)
{
    for (int r = 0; r < N; r++) {
        float *a = z1 + (size_t)r * Nh, *c = z2 + (size_t)r * Nh;
        const float *hr = h + (size_t)r * d;
        for (int i = 0; i < Nh; i++) a[i] = i < d ? d1[i] * hr[i] : 0.0f;
        nd_op_fwht(a, Nh);
        for (int i = 0; i < Nh; i++) c[i] = nd_silu(d2[i] * a[i]);
        nd_op_fwht(c, Nh);
        for (int i = 0; i < d; i++) out[(size_t)r * d + i] = d3[i] * c[i];
    }
}

void nd_op_hada_mlp_bwd(float *dh, float *dd1, float *dd2, float *dd3, const float *dout, const float *h,
                        const float *z1, const float *z2, const float *d1, const float *d2, const float *d3, int N,
                        int d, int Nh)
{
    float *t = malloc(sizeof(float) * (size_t)Nh);
    if (!t) return;
    for (int r = 0; r < N; r++) {
        const float *a = z1 + (size_t)r * Nh, *c = z2 + (size_t)r * Nh, *g = dout + (size_t)r * d;
        const float *hr = h + (size_t)r * d;
        /* out = (d3*c)[:d]: the gradient beyond d is zero */
        for (int i = 0; i < Nh; i++) {
            t[i] = i < d ? g[i] * d3[i] : 0.0f;
            if (dd3 && i < d) dd3[i] += g[i] * c[i];
        }
        nd_op_fwht(t, Nh); /* Hn is symmetric: its transpose is itself */
        for (int i = 0; i < Nh; i++) {
            float w = d2[i] * a[i], s = nd_sigmoid(w);
            float dw = t[i] * s * (1.0f + w * (1.0f - s));
            if (dd2) dd2[i] += dw * a[i];
            t[i] = dw * d2[i];
        }
        nd_op_fwht(t, Nh);
        for (int i = 0; i < d; i++) {
            if (dd1) dd1[i] += t[i] * hr[i];
            if (dh) dh[(size_t)r * d + i] += t[i] * d1[i];
        }
    }
    free(t);
}

/* ---- engram --------------------------------------------------------------- */
void nd_op_engram_index(int32_t *idx, float *ok, const int32_t *ids, int B, int T, const int *orders,
                        int num_orders, int heads, int seed_stride, int slots)
{
    int Te = num_orders * heads;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t row = (size_t)b * T + t;
            for (int oi = 0; oi < num_orders; oi++)
                for (int hh = 0; hh < heads; hh++) {
                    int k = oi * heads + hh, o = orders[oi];
                    int back[ND_ENGRAM_MAX_ORDER];
                    for (int j = 0; j < o; j++) back[j] = t - j >= 0 ? ids[row - (size_t)j] : 0;
                    int seed = oi * seed_stride + hh;
                    idx[row * Te + k] = (int32_t)(nd_engram_hash(seed, o, back) % (uint32_t)slots);
                    ok[row * Te + k] = nd_engram_valid(t, o) ? 1.0f : 0.0f;
                }
        }
}

void nd_op_engram_gather_fwd(float *e, const float *tables, const int32_t *idx, const float *ok, int N, int Te,
                             int slots, int sub)
{
    for (int r = 0; r < N; r++)
        for (int k = 0; k < Te; k++) {
            const float *src = tables + ((size_t)k * slots + (size_t)idx[(size_t)r * Te + k]) * sub;
            float m = ok[(size_t)r * Te + k];
            float *dst = e + ((size_t)r * Te + k) * sub;
            for (int i = 0; i < sub; i++) dst[i] = src[i] * m;
        }
}

void nd_op_engram_gather_bwd(float *dtables, const float *de, const int32_t *idx, const float *ok, int N, int Te,
                             int slots, int sub)
{
    for (int r = 0; r < N; r++)
        for (int k = 0; k < Te; k++) {
            float m = ok[(size_t)r * Te + k];
            if (m == 0.0f) continue;
            float *dst = dtables + ((size_t)k * slots + (size_t)idx[(size_t)r * Te + k]) * sub;
            axpy(dst, m, de + ((size_t)r * Te + k) * sub, sub);
        }
}

void nd_op_taps_fwd(float *y, const float *v, const float *taps, int B, int T, int d, int D)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *yr = y + ((size_t)b * T + t) * d;
            memset(yr, 0, sizeof(float) * (size_t)d);
            for (int j = 0; j < 4; j++) {
                if (t - j * D < 0) break;
                const float *vr = v + ((size_t)b * T + t - j * D) * d, *tp = taps + (size_t)j * d;
                for (int i = 0; i < d; i++) yr[i] += tp[i] * vr[i];
            }
        }
}

void nd_op_taps_bwd(float *dv, float *dtaps, const float *dy, const float *v, const float *taps, int B, int T,
                    int d, int D)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *g = dy + ((size_t)b * T + t) * d;
            for (int j = 0; j < 4; j++) {
                if (t - j * D < 0) break;
                size_t src = ((size_t)b * T + t - j * D) * d;
                for (int i = 0; i < d; i++) {
                    if (dv) dv[src + i] += taps[(size_t)j * d + i] * g[i];
                    if (dtaps) dtaps[(size_t)j * d + i] += g[i] * v[src + i];
                }
            }
        }
}

void nd_op_causal_conv_fwd(float *y, const float *x, const float *taps, int ntaps, int B, int T, int w)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *yr = y + ((size_t)b * T + t) * w;
            memset(yr, 0, sizeof(float) * (size_t)w);
            for (int j = 0; j < ntaps && t - j >= 0; j++)
                for (int i = 0; i < w; i++) yr[i] += taps[(size_t)j * w + i] * x[((size_t)b * T + t - j) * w + i];
        }
}

void nd_op_causal_conv_bwd(float *dx, float *dtaps, const float *dy, const float *x, const float *taps, int ntaps,
                           int B, int T, int w)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *g = dy + ((size_t)b * T + t) * w;
            for (int j = 0; j < ntaps && t - j >= 0; j++) {
                size_t src = ((size_t)b * T + t - j) * w;
                const float *tp = taps + (size_t)j * w;
                if (dx) axpy_mul(dx + src, tp, g, w);
                if (dtaps) axpy_mul((float *)dtaps + (size_t)j * w, g, x + src, w);
            }
        }
}

void nd_op_engram_gate_fwd(float *b, float *g, float *ru, float *rk, const float *u, const float *k,
                           const float *vc, int N, int d)
{
    float sd = 1.0f / sqrtf((float)d);
    for (int r = 0; r < N; r++) {
        const float *ur = u + (size_t)r * d, *kr = k + (size_t)r * d, *vr = vc + (size_t)r * d;
        float a = 1.0f / sqrtf(dot(ur, ur, d) / (float)d + ND_NORM_EPS);
        float c = 1.0f / sqrtf(dot(kr, kr, d) / (float)d + ND_NORM_EPS);
        ru[r] = a;
        rk[r] = c;
        float gg = nd_sigmoid(dot(ur, kr, d) * a * c * sd);
        g[r] = gg;
        for (int i = 0; i < d; i++) b[(size_t)r * d + i] = ur[i] + gg * vr[i];
    }
}

void nd_op_engram_gate_bwd(float *du, float *dk, float *dvc, const float *db, const float *g, const float *ru,
                           const float *rk, const float *u, const float *k, const float *vc, int N, int d)
{
    float sd = 1.0f / sqrtf((float)d);
    for (int r = 0; r < N; r++) {
        const float *ur = u + (size_t)r * d, *kr = k + (size_t)r * d, *vr = vc + (size_t)r * d;
        const float *gr = db + (size_t)r * d;
        float gg = g[r], a = ru[r], c = rk[r];
        float dz = dot(gr, vr, d) * gg * (1.0f - gg) * sd; /* d loss / d <un, kn> */
        float uk = dot(ur, kr, d) * a * c;                /* <un, kn> */
        /* d<un,kn>/du = a*(kn - un*<un,kn>/d) (rmsunit backward with dy = kn) */
        for (int i = 0; i < d; i++) {
            float un = ur[i] * a, kn = kr[i] * c;
            if (du) du[(size_t)r * d + i] += gr[i] + dz * a * (kn - un * uk / (float)d);
            if (dk) dk[(size_t)r * d + i] += dz * c * (un - kn * uk / (float)d);
            if (dvc) dvc[(size_t)r * d + i] += gg * gr[i];
        }
    }
}

/* ---- Sinkhorn -------------------------------------------------------------
 * 20 row/column log-normalisations of an n x n matrix for every token of
 * every layer, forward and again in the backward pass: thousands of exp and
 * log per token, which libm's scalar calls made an eighth of a fine-tuning
 * step.  Here they take the four-lane exp and log above. */
/* Up to four tokens' matrices side by side: M[i] holds entry i (row-major
 * n x n) of each token in its own lane, so every operation below is one
 * token's scalar arithmetic done for four at once, and a token's result does
 * not depend on which tokens share its block. */
#define SK_LANES 4

static void sk_load(skv *M, const float *R, int nn, int count)
{
    for (int i = 0; i < nn; i++) {
        float lane[SK_LANES] = {0};
        for (int k = 0; k < count; k++) lane[k] = R[(size_t)k * (size_t)nn + (size_t)i];
        M[i] = sk_ld(lane);
    }
}

static void sk_store(float *P, const skv *M, int nn, int count)
{
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < count; k++) P[(size_t)k * (size_t)nn + (size_t)i] = M[i][k];
}

/* M <- M - logsumexp along rows (axis 1) or columns (axis 0); E (NULL or nn
 * vectors) receives exp of the result, the normalised probabilities. */
static void lse_normalise(skv *M, int n, int rows, skv *E)
{
    for (int a = 0; a < n; a++) {
        skv mx = sk_splat(-INFINITY), s = sk_splat(0.0f);
        for (int b = 0; b < n; b++) {
            skv v = M[rows ? a * n + b : b * n + a];
            ski up = v > mx;
            mx = sk_select(up, v, mx);
        }
        for (int b = 0; b < n; b++) s += exp_nonpos4(M[rows ? a * n + b : b * n + a] - mx);
        skv l = mx + log_pos4(s);
        for (int b = 0; b < n; b++) M[rows ? a * n + b : b * n + a] -= l;
    }
    if (E)
        for (int i = 0; i < n * n; i++) E[i] = exp_nonpos4(M[i]);
}

void nd_op_sinkhorn_fwd_batch(float *P, const float *R, int n, int count)
{
    int nn = n * n;
    skv M[ND_MAX_LANES * ND_MAX_LANES];
    for (int k0 = 0; k0 < count; k0 += SK_LANES) {
        int c = count - k0 < SK_LANES ? count - k0 : SK_LANES;
        sk_load(M, R + (size_t)k0 * (size_t)nn, nn, c);
        for (int it = 0; it < ND_SINKHORN_ITERS; it++) {
            lse_normalise(M, n, 1, NULL);
            lse_normalise(M, n, 0, NULL);
        }
        for (int i = 0; i < nn; i++) M[i] = exp_nonpos4(M[i]);
        sk_store(P + (size_t)k0 * (size_t)nn, M, nn, c);
    }
}

/* M0 normalised `stages` times (rows first, then columns, alternating) into M;
 * E (NULL or STAGES x nn) receives every stage's probabilities. */
static void sk_stages(skv *M, const skv *M0, int n, int stages, skv *E)
{
    int nn = n * n;
    memcpy(M, M0, sizeof(skv) * (size_t)nn);
    for (int s = 1; s <= stages; s++) lse_normalise(M, n, (s % 2) == 1, E ? E + (size_t)s * (size_t)nn : NULL);
}

enum { SK_STAGES = 2 * ND_SINKHORN_ITERS + 1, SK_SMALL = 16 };

/* The backward of one block of tokens, g = dP in, dR in g out.  Es(s) is stage
 * s's probabilities (exp of M after s normalisations). */
static void sk_backward(skv *g, int n, const skv *E, const skv *M0, skv *M, skv *one)
{
    int nn = n * n;
    /* y = x - lse(x) along an axis: dx = dy - softmax(x) * sum(dy), softmax(x) = exp(y) */
    for (int s = SK_STAGES - 1; s >= 1; s--) {
        const skv *Es;
        if (E) Es = E + (size_t)s * (size_t)nn;
        else { /* recomputed from the block's R */
            sk_stages(M, M0, n, s, NULL);
            for (int i = 0; i < nn; i++) one[i] = exp_nonpos4(M[i]);
            Es = one;
        }
        if (s == SK_STAGES - 1)
            for (int i = 0; i < nn; i++) g[i] *= Es[i]; /* through the final exp */
        int rows = (s % 2) == 1;
        for (int a = 0; a < n; a++) {
            skv sum = sk_splat(0.0f);
            for (int b = 0; b < n; b++) sum += g[rows ? a * n + b : b * n + a];
            for (int b = 0; b < n; b++) {
                int at = rows ? a * n + b : b * n + a;
                g[at] -= Es[at] * sum;
            }
        }
    }
}

static void sk_add_grad(float *dR, const skv *g, int nn, int c)
{
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < c; k++) dR[(size_t)k * (size_t)nn + (size_t)i] += g[i][k];
}

/* Up to 4 lanes (every model's 4): every stage's probabilities kept (10 KB). */
static __attribute__((noinline)) void sk_bwd_small(float *dR, const float *dP, const float *R, int n, int count)
{
    int nn = n * n;
    skv E[SK_STAGES * SK_SMALL], M0[SK_SMALL], M[SK_SMALL], g[SK_SMALL];
    for (int k0 = 0; k0 < count; k0 += SK_LANES) {
        int c = count - k0 < SK_LANES ? count - k0 : SK_LANES;
        sk_load(M0, R + (size_t)k0 * (size_t)nn, nn, c);
        sk_stages(M, M0, n, SK_STAGES - 1, E);
        sk_load(g, dP + (size_t)k0 * (size_t)nn, nn, c);
        sk_backward(g, n, E, M0, M, NULL);
        sk_add_grad(dR + (size_t)k0 * (size_t)nn, g, nn, c);
    }
}

/* More lanes: each stage recomputed when the backward reaches it (quadratic
 * in the iterations, but a bounded stack: no model uses this). */
static __attribute__((noinline)) void sk_bwd_large(float *dR, const float *dP, const float *R, int n, int count)
{
    int nn = n * n;
    skv M0[ND_MAX_LANES * ND_MAX_LANES], M[ND_MAX_LANES * ND_MAX_LANES], g[ND_MAX_LANES * ND_MAX_LANES];
    skv one[ND_MAX_LANES * ND_MAX_LANES];
    for (int k0 = 0; k0 < count; k0 += SK_LANES) {
        int c = count - k0 < SK_LANES ? count - k0 : SK_LANES;
        sk_load(M0, R + (size_t)k0 * (size_t)nn, nn, c);
        sk_load(g, dP + (size_t)k0 * (size_t)nn, nn, c);
        sk_backward(g, n, NULL, M0, M, one);
        sk_add_grad(dR + (size_t)k0 * (size_t)nn, g, nn, c);
    }
}

void nd_op_sinkhorn_bwd_batch(float *dR, const float *dP, const float *R, int n, int count)
{
    if (n * n <= SK_SMALL) sk_bwd_small(dR, dP, R, n, count);
    else sk_bwd_large(dR, dP, R, n, count);
}

void nd_op_sinkhorn_fwd(float *P, const float *R, int n) { nd_op_sinkhorn_fwd_batch(P, R, n, 1); }
void nd_op_sinkhorn_bwd(float *dR, const float *dP, const float *R, int n) { nd_op_sinkhorn_bwd_batch(dR, dP, R, n, 1); }

/* ---- tied logits + cross-entropy -----------------------------------------
 * Only rows with a target are scored.  They are packed CE_CHUNK at a time so
 * the logits (F E^T) and both gradients (G E and G^T F) are GEMMs; the
 * softmax of each row is one task. */
#define CE_CHUNK 512

typedef struct {
    float *dl; /* [n_rows, V]: the logits, then d loss / d logits */
    double *loss;
    const int32_t *target, *rows; /* rows: the chunk's row numbers */
    const float *weight;          /* per row (NULL: 1) */
    int V, want_grad;
    float grad_scale;
} ce_job;

static void ce_row_task(void *ctx, int task, int thread)
{
    (void)thread;
    ce_job *j = ctx;
    float *l = j->dl + (size_t)task * j->V;
    float mx = -INFINITY;
    for (int v = 0; v < j->V; v++)
        if (l[v] > mx) mx = l[v];
    double s = 0.0;
    for (int v = 0; v < j->V; v++) s += exp((double)(l[v] - mx));
    double lse = (double)mx + log(s);
    int tg = j->target[j->rows[task]];
    j->loss[task] = lse - (double)l[tg];
    if (!j->want_grad) return;
    float scale = j->grad_scale * (j->weight ? j->weight[j->rows[task]] : 1.0f);
    for (int v = 0; v < j->V; v++)
        l[v] = (float)(exp((double)l[v] - lse) - (v == tg ? 1.0 : 0.0)) * scale;
}

double nd_op_logits_ce(nd_threadpool *pool, float *df, float *dE, const float *f, const float *E,
                       const int32_t *target, const float *weight, int N, int d, int V, float grad_scale)
{
    float *dl = malloc(sizeof(float) * (size_t)CE_CHUNK * (size_t)V);
    double *loss = malloc(sizeof(double) * CE_CHUNK);
    int32_t *rows = malloc(sizeof(int32_t) * CE_CHUNK);
    float *fs = malloc(sizeof(float) * (size_t)CE_CHUNK * (size_t)d);
    float *dfs = malloc(sizeof(float) * (size_t)CE_CHUNK * (size_t)d);
    double total = 0.0;
    if (!dl || !loss || !rows || !fs || !dfs) {
        free(dl); free(loss); free(rows); free(fs); free(dfs);
        return NAN;
    }
    int r = 0;
    while (r < N) {
        int n = 0;
        for (; r < N && n < CE_CHUNK; r++)
            if (target[r] >= 0 && target[r] < V) rows[n++] = r;
        if (!n) continue;
        for (int i = 0; i < n; i++) memcpy(fs + (size_t)i * d, f + (size_t)rows[i] * d, sizeof(float) * (size_t)d);
        gemm(pool, dl, V, nd_gemm_rowmajor(fs, d), nd_gemm_transposed(E, d), n, V, d, 0); /* logits = F E^T */
        ce_job j = {dl, loss, target, rows, weight, V, df || dE, grad_scale};
        nd_threadpool_run(pool, n, ce_row_task, &j);
        if (df) { /* df += G E */
            gemm(pool, dfs, d, nd_gemm_rowmajor(dl, V), nd_gemm_rowmajor(E, d), n, d, V, 0);
            for (int i = 0; i < n; i++) {
                float *dst = df + (size_t)rows[i] * d;
                for (int c = 0; c < d; c++) dst[c] += dfs[(size_t)i * d + c];
            }
        }
        if (dE) /* dE += G^T F */
            gemm(pool, dE, d, nd_gemm_transposed(dl, V), nd_gemm_rowmajor(fs, d), V, d, n, 1);
        for (int i = 0; i < n; i++) total += loss[i];
    }
    free(dl); free(loss); free(rows); free(fs); free(dfs);
    return total;
}
