/* train_ops.c - forward/backward of every Needle op in float32 (see train_ops.h). */
#include "train/train_ops.h"

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

static float dot(const float *a, const float *b, int n)
{
    v8 acc = splat8(0.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) acc += ld8(a + i) * ld8(b + i);
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static void axpy(float *y, float a, const float *x, int n)
{
    v8 av = splat8(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) st8(y + i, ld8(y + i) + av * ld8(x + i));
    for (; i < n; i++) y[i] += a * x[i];
}

static inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* ---- matmul ---------------------------------------------------------------
 * One kernel: y[rows,out] (+)= x[rows,in] @ W[in,out], 4 rows x 16 columns of
 * accumulators in registers, k in order (so every output is the same sum
 * whatever the blocking of rows into tasks). */
static void gemm_rows(float *y, const float *x, const float *W, int rows, int in, int out, int accumulate)
{
    int r = 0;
    for (; r + 4 <= rows; r += 4) {
        const float *x0 = x + (size_t)r * in, *x1 = x0 + in, *x2 = x1 + in, *x3 = x2 + in;
        float *y0 = y + (size_t)r * out, *y1 = y0 + out, *y2 = y1 + out, *y3 = y2 + out;
        int j = 0;
        for (; j + 16 <= out; j += 16) {
            v8 a00 = splat8(0), a01 = splat8(0), a10 = splat8(0), a11 = splat8(0);
            v8 a20 = splat8(0), a21 = splat8(0), a30 = splat8(0), a31 = splat8(0);
            if (accumulate) {
                a00 = ld8(y0 + j); a01 = ld8(y0 + j + 8); a10 = ld8(y1 + j); a11 = ld8(y1 + j + 8);
                a20 = ld8(y2 + j); a21 = ld8(y2 + j + 8); a30 = ld8(y3 + j); a31 = ld8(y3 + j + 8);
            }
            const float *w = W + j;
            for (int k = 0; k < in; k++, w += out) {
                v8 w0 = ld8(w), w1 = ld8(w + 8);
                v8 b0 = splat8(x0[k]), b1 = splat8(x1[k]), b2 = splat8(x2[k]), b3 = splat8(x3[k]);
                a00 += b0 * w0; a01 += b0 * w1; a10 += b1 * w0; a11 += b1 * w1;
                a20 += b2 * w0; a21 += b2 * w1; a30 += b3 * w0; a31 += b3 * w1;
            }
            st8(y0 + j, a00); st8(y0 + j + 8, a01); st8(y1 + j, a10); st8(y1 + j + 8, a11);
            st8(y2 + j, a20); st8(y2 + j + 8, a21); st8(y3 + j, a30); st8(y3 + j + 8, a31);
        }
        for (; j < out; j++) {
            float s[4] = {0, 0, 0, 0};
            if (accumulate) { s[0] = y0[j]; s[1] = y1[j]; s[2] = y2[j]; s[3] = y3[j]; }
            for (int k = 0; k < in; k++) {
                float wk = W[(size_t)k * out + j];
                s[0] += x0[k] * wk; s[1] += x1[k] * wk; s[2] += x2[k] * wk; s[3] += x3[k] * wk;
            }
            y0[j] = s[0]; y1[j] = s[1]; y2[j] = s[2]; y3[j] = s[3];
        }
    }
    for (; r < rows; r++) {
        const float *xr = x + (size_t)r * in;
        float *yr = y + (size_t)r * out;
        if (!accumulate) memset(yr, 0, sizeof(float) * (size_t)out);
        for (int k = 0; k < in; k++) axpy(yr, xr[k], W + (size_t)k * out, out);
    }
}

/* Rows are blocked in 4s inside a task, so a row's sum order depends only on
 * its index modulo 4 - tasks are multiples of 4 rows, hence thread-independent. */
#define GEMM_TASK_ROWS 16

typedef struct {
    float *y;
    const float *x, *W;
    int rows, in, out, accumulate;
} gemm_job;

static void gemm_task(void *ctx, int task, int thread)
{
    (void)thread;
    gemm_job *j = ctx;
    int r0 = task * GEMM_TASK_ROWS;
    int n = j->rows - r0 < GEMM_TASK_ROWS ? j->rows - r0 : GEMM_TASK_ROWS;
    gemm_rows(j->y + (size_t)r0 * j->out, j->x + (size_t)r0 * j->in, j->W, n, j->in, j->out, j->accumulate);
}

static void gemm(nd_threadpool *pool, float *y, const float *x, const float *W, int rows, int in, int out,
                 int accumulate)
{
    gemm_job j = {y, x, W, rows, in, out, accumulate};
    nd_threadpool_run(pool, (rows + GEMM_TASK_ROWS - 1) / GEMM_TASK_ROWS, gemm_task, &j);
}

/* ---- dW += x^T dy without a transpose -------------------------------------
 * dW[in,out] += sum_i x[i,:]^T dy[i,:].  The same 4 x 16 register block as
 * gemm_rows, but the 4 "rows" are 4 adjacent input features read with the
 * stride of x: no N x in transpose is materialised (that copy was serial and
 * cache-hostile, 17% of a training step).  The sum over i runs in order, so
 * every dW entry is the same sum as gemm(x^T, dy) gave - bit-identical. */
static void gemm_tn_rows(float *dW, const float *x, const float *dy, int k0, int k1, int N, int in, int out)
{
    int k = k0;
    for (; k + 4 <= k1; k += 4) {
        float *y0 = dW + (size_t)k * out, *y1 = y0 + out, *y2 = y1 + out, *y3 = y2 + out;
        int j = 0;
        for (; j + 16 <= out; j += 16) {
            v8 a00 = ld8(y0 + j), a01 = ld8(y0 + j + 8), a10 = ld8(y1 + j), a11 = ld8(y1 + j + 8);
            v8 a20 = ld8(y2 + j), a21 = ld8(y2 + j + 8), a30 = ld8(y3 + j), a31 = ld8(y3 + j + 8);
            const float *xi = x + k, *w = dy + j;
            for (int i = 0; i < N; i++, xi += in, w += out) {
                v8 w0 = ld8(w), w1 = ld8(w + 8);
                v8 b0 = splat8(xi[0]), b1 = splat8(xi[1]), b2 = splat8(xi[2]), b3 = splat8(xi[3]);
                a00 += b0 * w0; a01 += b0 * w1; a10 += b1 * w0; a11 += b1 * w1;
                a20 += b2 * w0; a21 += b2 * w1; a30 += b3 * w0; a31 += b3 * w1;
            }
            st8(y0 + j, a00); st8(y0 + j + 8, a01); st8(y1 + j, a10); st8(y1 + j + 8, a11);
            st8(y2 + j, a20); st8(y2 + j + 8, a21); st8(y3 + j, a30); st8(y3 + j + 8, a31);
        }
        for (; j < out; j++) {
            float s0 = y0[j], s1 = y1[j], s2 = y2[j], s3 = y3[j];
            const float *xi = x + k;
            for (int i = 0; i < N; i++, xi += in) {
                float wk = dy[(size_t)i * out + j];
                s0 += xi[0] * wk; s1 += xi[1] * wk; s2 += xi[2] * wk; s3 += xi[3] * wk;
            }
            y0[j] = s0; y1[j] = s1; y2[j] = s2; y3[j] = s3;
        }
    }
    for (; k < k1; k++) {
        float *yr = dW + (size_t)k * out;
        for (int i = 0; i < N; i++) axpy(yr, x[(size_t)i * in + k], dy + (size_t)i * out, out);
    }
}

typedef struct {
    float *dW;
    const float *x, *dy;
    int N, in, out;
} gemm_tn_job;

static void gemm_tn_task(void *ctx, int task, int thread)
{
    (void)thread;
    gemm_tn_job *j = ctx;
    int k0 = task * GEMM_TASK_ROWS, k1 = k0 + GEMM_TASK_ROWS < j->in ? k0 + GEMM_TASK_ROWS : j->in;
    gemm_tn_rows(j->dW, j->x, j->dy, k0, k1, j->N, j->in, j->out);
}

static void gemm_tn(nd_threadpool *pool, float *dW, const float *x, const float *dy, int N, int in, int out)
{
    gemm_tn_job j = {dW, x, dy, N, in, out};
    nd_threadpool_run(pool, (in + GEMM_TASK_ROWS - 1) / GEMM_TASK_ROWS, gemm_tn_task, &j);
}

/* Transpose a[rows,cols] into t[cols,rows] in 8 x 8 tiles (cache-friendly). */
static void transpose_into(float *t, const float *a, int rows, int cols)
{
    for (int r0 = 0; r0 < rows; r0 += 8)
        for (int c0 = 0; c0 < cols; c0 += 8) {
            int r1 = r0 + 8 < rows ? r0 + 8 : rows, c1 = c0 + 8 < cols ? c0 + 8 : cols;
            for (int r = r0; r < r1; r++)
                for (int c = c0; c < c1; c++) t[(size_t)c * rows + r] = a[(size_t)r * cols + c];
        }
}

static float *transpose_new(const float *a, int rows, int cols)
{
    float *t = malloc(sizeof(float) * (size_t)rows * (size_t)cols);
    if (t) transpose_into(t, a, rows, cols);
    return t;
}

void nd_op_matmul_fwd(nd_threadpool *pool, float *y, const float *x, const float *W, int N, int in, int out,
                      int accumulate)
{
    gemm(pool, y, x, W, N, in, out, accumulate);
}

void nd_op_matmul_bwd(nd_threadpool *pool, float *dx, float *dW, const float *dy, const float *x, const float *W,
                      int N, int in, int out)
{
    if (dx) {
        /* dx += dy W^T: transpose W once (in*out, small next to N*in*out) so
         * the streaming kernel applies */
        float *wt = transpose_new(W, in, out);
        if (wt) {
            gemm(pool, dx, dy, wt, N, out, in, 1);
            free(wt);
        } else {
            for (int i = 0; i < N; i++)
                for (int k = 0; k < in; k++)
                    dx[(size_t)i * in + k] += dot(dy + (size_t)i * out, W + (size_t)k * out, out);
        }
    }
    if (dW) gemm_tn(pool, dW, x, dy, N, in, out);
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
        /* f_i = theta^(-2i/hd), computed in double so tables are exact to float */
        double f = pow((double)theta, -2.0 * i / (double)hd);
        for (int t = 0; t < T; t++) {
            cos_t[(size_t)t * half + i] = (float)cos((double)t * f);
            sin_t[(size_t)t * half + i] = (float)sin((double)t * f);
        }
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

/* ---- attention ------------------------------------------------------------ */
typedef struct {
    float *o, *probs, *dq, *dk, *dv;
    const float *q, *k, *v, *dout, *cprobs;
    int B, T, H, KVH, hd;
} attn_job;

static void attn_fwd_task(void *ctx, int task, int thread)
{
    (void)thread;
    attn_job *j = ctx;
    int b = task / j->H, h = task % j->H, T = j->T, hd = j->hd;
    int g = h / (j->H / j->KVH);
    int qs = j->H * hd, ks = j->KVH * hd;
    float scale = 1.0f / sqrtf((float)hd);
    for (int t = 0; t < T; t++) {
        const float *qt = j->q + ((size_t)b * T + t) * qs + (size_t)h * hd;
        float *p = j->probs + (((size_t)b * j->H + h) * T + t) * T;
        float mx = -INFINITY;
        for (int s = 0; s <= t; s++) {
            p[s] = dot(qt, j->k + ((size_t)b * T + s) * ks + (size_t)g * hd, hd) * scale;
            if (p[s] > mx) mx = p[s];
        }
        float sum = 0.0f;
        for (int s = 0; s <= t; s++) { p[s] = expf(p[s] - mx); sum += p[s]; }
        float inv = 1.0f / sum;
        float *ot = j->o + ((size_t)b * T + t) * qs + (size_t)h * hd;
        memset(ot, 0, sizeof(float) * (size_t)hd);
        for (int s = 0; s <= t; s++) {
            p[s] *= inv;
            axpy(ot, p[s], j->v + ((size_t)b * T + s) * ks + (size_t)g * hd, hd);
        }
        for (int s = t + 1; s < T; s++) p[s] = 0.0f;
    }
}

void nd_op_attention_fwd(nd_threadpool *pool, float *o, float *probs, const float *q, const float *k,
                         const float *v, int B, int T, int H, int KVH, int hd)
{
    attn_job j = {.o = o, .probs = probs, .q = q, .k = k, .v = v, .B = B, .T = T, .H = H, .KVH = KVH, .hd = hd};
    nd_threadpool_run(pool, B * H, attn_fwd_task, &j);
}

/* One task per (sequence, KV head): the query heads sharing a KV head all add
 * into its dk/dv, so they run in one task in a fixed order. */
static void attn_bwd_task(void *ctx, int task, int thread)
{
    (void)thread;
    attn_job *j = ctx;
    int b = task / j->KVH, g = task % j->KVH, T = j->T, hd = j->hd;
    int rep = j->H / j->KVH, qs = j->H * hd, ks = j->KVH * hd;
    float scale = 1.0f / sqrtf((float)hd);
    float *dp = malloc(sizeof(float) * (size_t)T);
    if (!dp) return; /* cannot happen for sane T; leaves gradients untouched */
    for (int h = g * rep; h < (g + 1) * rep; h++) {
        for (int t = 0; t < T; t++) {
            const float *p = j->cprobs + (((size_t)b * j->H + h) * T + t) * T;
            const float *dot_ = j->dout + ((size_t)b * T + t) * qs + (size_t)h * hd;
            const float *qt = j->q + ((size_t)b * T + t) * qs + (size_t)h * hd;
            float *dqt = j->dq ? j->dq + ((size_t)b * T + t) * qs + (size_t)h * hd : NULL;
            float sdp = 0.0f;
            for (int s = 0; s <= t; s++) {
                dp[s] = dot(dot_, j->v + ((size_t)b * T + s) * ks + (size_t)g * hd, hd);
                sdp += p[s] * dp[s];
                if (j->dv) axpy(j->dv + ((size_t)b * T + s) * ks + (size_t)g * hd, p[s], dot_, hd);
            }
            for (int s = 0; s <= t; s++) {
                float ds = p[s] * (dp[s] - sdp) * scale;
                if (dqt) axpy(dqt, ds, j->k + ((size_t)b * T + s) * ks + (size_t)g * hd, hd);
                if (j->dk) axpy(j->dk + ((size_t)b * T + s) * ks + (size_t)g * hd, ds, qt, hd);
            }
        }
    }
    free(dp);
}

void nd_op_attention_bwd(nd_threadpool *pool, float *dq, float *dk, float *dv, const float *dout,
                         const float *probs, const float *q, const float *k, const float *v, int B, int T, int H,
                         int KVH, int hd)
{
    attn_job j = {.dq = dq, .dk = dk, .dv = dv, .q = q, .k = k, .v = v, .dout = dout, .cprobs = probs,
                  .B = B, .T = T, .H = H, .KVH = KVH, .hd = hd};
    nd_threadpool_run(pool, B * KVH, attn_bwd_task, &j);
}

/* ---- sigmoid gate --------------------------------------------------------- */
void nd_op_sigmoid_gate_fwd(float *y, const float *x, const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i] * sigmoidf(g[i]);
}

void nd_op_sigmoid_gate_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float s = sigmoidf(g[i]);
        if (dx) dx[i] += dy[i] * s;
        if (dg) dg[i] += dy[i] * x[i] * s * (1.0f - s);
    }
}

/* ---- Hadamard MLP --------------------------------------------------------- */
void nd_op_fwht(float *x, int n)
{
    for (int len = 1; len < n; len <<= 1)
        for (int i = 0; i < n; i += len << 1)
            for (int j = i; j < i + len; j++) {
                float a = x[j], b = x[j + len];
                x[j] = a + b;
                x[j + len] = a - b;
            }
    float s = 1.0f / sqrtf((float)n);
    for (int i = 0; i < n; i++) x[i] *= s;
}

static inline float siluf(float x) { return x * sigmoidf(x); }

void nd_op_hada_mlp_fwd(float *out, float *z1, float *z2, const float *h, const float *d1, const float *d2,
                        const float *d3, int N, int d, int Nh)
{
    for (int r = 0; r < N; r++) {
        float *a = z1 + (size_t)r * Nh, *c = z2 + (size_t)r * Nh;
        const float *hr = h + (size_t)r * d;
        for (int i = 0; i < Nh; i++) a[i] = i < d ? d1[i] * hr[i] : 0.0f;
        nd_op_fwht(a, Nh);
        for (int i = 0; i < Nh; i++) c[i] = siluf(d2[i] * a[i]);
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
            float w = d2[i] * a[i], s = sigmoidf(w);
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
                        int num_orders, int heads, int slots)
{
    int Te = num_orders * heads;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t row = (size_t)b * T + t;
            for (int oi = 0; oi < num_orders; oi++)
                for (int hh = 0; hh < heads; hh++) {
                    int k = oi * heads + hh, o = orders[oi];
                    uint32_t acc = 0x9E3779B9u * (uint32_t)(k + 1);
                    for (int j = 0; j < o; j++) {
                        uint32_t tok = t - j >= 0 ? (uint32_t)ids[row - (size_t)j] : 0u;
                        acc = (acc ^ tok) * 0x01000193u;
                    }
                    acc ^= acc >> 15;
                    idx[row * Te + k] = (int32_t)(acc % (uint32_t)slots);
                    ok[row * Te + k] = t >= o - 1 ? 1.0f : 0.0f;
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
        float gg = sigmoidf(dot(ur, kr, d) * a * c * sd);
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

/* ---- Sinkhorn ------------------------------------------------------------- */
/* M <- M - logsumexp along rows (axis 1) or columns (axis 0). */
static void lse_normalise(float *M, int n, int rows)
{
    for (int a = 0; a < n; a++) {
        float mx = -INFINITY, s = 0.0f;
        for (int b = 0; b < n; b++) {
            float v = rows ? M[a * n + b] : M[b * n + a];
            if (v > mx) mx = v;
        }
        for (int b = 0; b < n; b++) s += expf((rows ? M[a * n + b] : M[b * n + a]) - mx);
        float l = mx + logf(s);
        for (int b = 0; b < n; b++) {
            if (rows) M[a * n + b] -= l;
            else M[b * n + a] -= l;
        }
    }
}

void nd_op_sinkhorn_fwd(float *P, const float *R, int n)
{
    float M[ND_MAX_LANES * ND_MAX_LANES];
    memcpy(M, R, sizeof(float) * (size_t)(n * n));
    for (int it = 0; it < ND_SINKHORN_ITERS; it++) {
        lse_normalise(M, n, 1);
        lse_normalise(M, n, 0);
    }
    for (int i = 0; i < n * n; i++) P[i] = expf(M[i]);
}

void nd_op_sinkhorn_bwd(float *dR, const float *dP, const float *R, int n)
{
    /* keep every intermediate: stage s holds M after s normalisations */
    enum { STAGES = 2 * ND_SINKHORN_ITERS + 1 };
    float M[STAGES][ND_MAX_LANES * ND_MAX_LANES];
    int nn = n * n;
    memcpy(M[0], R, sizeof(float) * (size_t)nn);
    for (int s = 1; s < STAGES; s++) {
        memcpy(M[s], M[s - 1], sizeof(float) * (size_t)nn);
        lse_normalise(M[s], n, (s % 2) == 1);
    }
    float g[ND_MAX_LANES * ND_MAX_LANES];
    for (int i = 0; i < nn; i++) g[i] = dP[i] * expf(M[STAGES - 1][i]);
    /* y = x - lse(x) along an axis: dx = dy - softmax(x) * sum(dy), softmax(x) = exp(y) */
    for (int s = STAGES - 1; s >= 1; s--) {
        int rows = (s % 2) == 1;
        for (int a = 0; a < n; a++) {
            float sum = 0.0f;
            for (int b = 0; b < n; b++) sum += rows ? g[a * n + b] : g[b * n + a];
            for (int b = 0; b < n; b++) {
                int at = rows ? a * n + b : b * n + a;
                g[at] -= expf(M[s][at]) * sum;
            }
        }
    }
    for (int i = 0; i < nn; i++) dR[i] += g[i];
}

/* ---- tied logits + cross-entropy ----------------------------------------- */
#define CE_CHUNK 256

typedef struct {
    float *df, *dE, *dl;
    double *loss;
    const float *f, *E;
    const int32_t *target, *rows; /* rows: the chunk's row numbers */
    int n_rows, d, V;
    float grad_scale;
} ce_job;

static void ce_row_task(void *ctx, int task, int thread)
{
    (void)thread;
    ce_job *j = ctx;
    int r = j->rows[task];
    const float *fr = j->f + (size_t)r * j->d;
    float *l = j->dl + (size_t)task * j->V;
    float mx = -INFINITY;
    for (int v = 0; v < j->V; v++) {
        l[v] = dot(fr, j->E + (size_t)v * j->d, j->d);
        if (l[v] > mx) mx = l[v];
    }
    double s = 0.0;
    for (int v = 0; v < j->V; v++) s += exp((double)(l[v] - mx));
    double lse = (double)mx + log(s);
    int tg = j->target[r];
    j->loss[task] = lse - (double)l[tg];
    if (!j->df && !j->dE) return;
    for (int v = 0; v < j->V; v++)
        l[v] = (float)(exp((double)l[v] - lse) - (v == tg ? 1.0 : 0.0)) * j->grad_scale;
}

double nd_op_logits_ce(nd_threadpool *pool, float *df, float *dE, const float *f, const float *E,
                       const int32_t *target, int N, int d, int V, float grad_scale)
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
        ce_job j = {df, dE, dl, loss, f, E, target, rows, n, d, V, grad_scale};
        nd_threadpool_run(pool, n, ce_row_task, &j);
        if (df || dE) /* the chunk's rows packed, so both gradients are GEMMs */
            for (int i = 0; i < n; i++) {
                memcpy(fs + (size_t)i * d, f + (size_t)rows[i] * d, sizeof(float) * (size_t)d);
                if (df) memcpy(dfs + (size_t)i * d, df + (size_t)rows[i] * d, sizeof(float) * (size_t)d);
            }
        if (df) { /* df += G E: the same in-order sum over v as a per-row axpy loop */
            gemm(pool, dfs, dl, E, n, V, d, 1);
            for (int i = 0; i < n; i++) memcpy(df + (size_t)rows[i] * d, dfs + (size_t)i * d, sizeof(float) * (size_t)d);
        }
        if (dE) gemm_tn(pool, dE, dl, fs, n, V, d); /* dE += G^T F, in row order */
        for (int i = 0; i < n; i++) total += loss[i];
    }
    free(dl); free(loss); free(rows); free(fs); free(dfs);
    return total;
}
