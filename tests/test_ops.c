/* test_ops.c - every CPU backend op against a naive reference written here
 * straight from the SPEC (dense Hadamard matrix, explicit dequantisation,
 * textbook attention with the window/sink mask). */
#include <math.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "check.h"
#include "core/fp16.h"
#include "core/threadpool.h"
#include "quant/hadamard.h"

static uint32_t rng = 2463534242u;
static float frand(void) /* uniform in [-1, 1) */
{
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return (float)((rng >> 8) * (1.0 / 8388608.0)) - 1.0f;
}
static void fill(float *x, size_t n) { for (size_t i = 0; i < n; i++) x[i] = frand(); }

static double maxdiff(const float *a, const float *b, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) w = fmax(w, fabs((double)a[i] - b[i]));
    return w;
}

/* Dense Sylvester entry: H[i][j] = (-1)^popcount(i & j) / sqrt(n). */
static double hada_entry(int i, int j, int n) { return (__builtin_popcount((unsigned)(i & j)) & 1 ? -1.0 : 1.0) / sqrt(n); }

static void test_hadamard(void)
{
    int sizes[] = {1, 2, 8, 128, 512};
    for (int s = 0; s < 5; s++) {
        int n = sizes[s];
        float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n), *ref = malloc(sizeof(float) * n);
        fill(x, n);
        memcpy(y, x, sizeof(float) * n);
        nd_cpu_hadamard(y, n);
        for (int i = 0; i < n; i++) {
            double acc = 0;
            for (int j = 0; j < n; j++) acc += hada_entry(i, j, n) * x[j];
            ref[i] = (float)acc;
        }
        CHECKF(maxdiff(y, ref, n) < 1e-5, "n=%d diff %g", n, maxdiff(y, ref, n));
        nd_cpu_hadamard(y, n); /* involution */
        CHECKF(maxdiff(y, x, n) < 1e-5, "n=%d twice", n);
        free(x), free(y), free(ref);
    }
}

/* The one FWHT (quant/hadamard.c: AVX-512, vector and scalar paths) gives
 * the bits of the plain butterfly loop at every power-of-two size. */
static void test_hadamard_paths_same_bits(void)
{
    enum { MAXN = 4096 };
    float *x = malloc(sizeof(float) * MAXN), *y = malloc(sizeof(float) * MAXN), *z = malloc(sizeof(float) * MAXN);
    fill(x, MAXN);
    for (int n = 1; n <= MAXN; n *= 2) {
        memcpy(y, x, sizeof(float) * n);
        memcpy(z, x, sizeof(float) * n);
        nd_hadamard(y, n);
        for (int h = 1; h < n; h *= 2)
            for (int i = 0; i < n; i += 2 * h)
                for (int j = i; j < i + h; j++) {
                    float a = z[j], b = z[j + h];
                    z[j] = a + b;
                    z[j + h] = a - b;
                }
        float sc = 1.0f / sqrtf((float)n);
        for (int i = 0; i < n; i++) z[i] *= sc;
        CHECKF(!memcmp(y, z, sizeof(float) * n), "n=%d", n);
    }
    free(x), free(y), free(z);
}

static void test_rmsnorm(void)
{
    float x[300], s[300], out[300];
    fill(x, 300), fill(s, 300);
    double ms = 0;
    for (int i = 0; i < 300; i++) ms += (double)x[i] * x[i];
    double inv = 1.0 / sqrt(ms / 300 + 1e-6);
    nd_cpu_rmsnorm(x, 300, s, out);
    for (int i = 0; i < 300; i++) CHECK(fabs(out[i] - (1 + s[i]) * x[i] * inv) < 1e-5);
    nd_cpu_rmsnorm(x, 300, NULL, out);
    for (int i = 0; i < 300; i++) CHECK(fabs(out[i] - x[i] * inv) < 1e-5);
}

static void test_rope(void)
{
    int hd = 16, heads = 3, half = 8, pos = 37;
    float x[48], y[48], cs[16];
    fill(x, 48);
    for (int i = 0; i < half; i++) {
        double ang = pos * pow(10000.0, -2.0 * i / hd);
        cs[i] = (float)cos(ang), cs[half + i] = (float)sin(ang);
    }
    memcpy(y, x, sizeof y);
    nd_cpu_rope(y, heads, hd, cs);
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < half; i++) {
            const float *v = x + h * hd;
            CHECK(fabs(y[h * hd + i] - (v[i] * cs[i] - v[i + half] * cs[half + i])) < 1e-6);
            CHECK(fabs(y[h * hd + half + i] - (v[i + half] * cs[i] + v[i] * cs[half + i])) < 1e-6);
        }
}

static void test_sinkhorn(void)
{
    int n = 4;
    float m[16], ref[16];
    fill(m, 16);
    for (int i = 0; i < 16; i++) m[i] *= 3;
    double r[16];
    for (int i = 0; i < 16; i++) r[i] = m[i];
    for (int it = 0; it < 20; it++) { /* textbook: divide rows then columns by their sums, in linear space */
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int j = 0; j < n; j++) s += exp(r[i * n + j]);
            for (int j = 0; j < n; j++) r[i * n + j] -= log(s);
        }
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int i = 0; i < n; i++) s += exp(r[i * n + j]);
            for (int i = 0; i < n; i++) r[i * n + j] -= log(s);
        }
    }
    for (int i = 0; i < 16; i++) ref[i] = (float)exp(r[i]);
    nd_cpu_sinkhorn(m, n, 20);
    CHECKF(maxdiff(m, ref, 16) < 1e-5, "diff %g", maxdiff(m, ref, 16));
    for (int j = 0; j < n; j++) {
        double s = 0;
        for (int i = 0; i < n; i++) s += m[i * n + j];
        CHECK(fabs(s - 1) < 1e-5); /* columns sum to one after the last step */
    }
}

/* A random CQ matrix built by hand: packed codes + FP16 norms. */
typedef struct cq_owned {
    nd_matrix m;
    uint8_t *idx, *norms;
    float cb[16];
} cq_owned;

static void make_cq(cq_owned *o, int rows, int cols, int bits)
{
    int sb = bits == ND_CQ_TERNARY ? 2 : bits;
    int cols_pad = (cols + 127) / 128 * 128, groups = cols_pad / 128;
    size_t row_bytes = (size_t)cols_pad * sb / 8;
    o->idx = calloc((size_t)rows * row_bytes, 1);
    o->norms = malloc((size_t)rows * groups * 2);
    for (int i = 0; i < (1 << sb); i++) o->cb[i] = frand() * 0.2f;
    if (bits == ND_CQ_TERNARY) o->cb[2] = 0.0f;
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < cols_pad; c++) {
            unsigned code = (rng = rng * 1103515245u + 12345u) >> 16 & ((1u << sb) - 1);
            size_t bit = (size_t)c * sb;
            uint8_t *p = o->idx + r * row_bytes;
            for (int k = 0; k < sb; k++, bit++)
                if (code >> k & 1) p[bit >> 3] |= (uint8_t)(1u << (bit & 7));
        }
        for (int g = 0; g < groups; g++) {
            uint16_t h = nd_float_to_half(0.5f + frand() * 0.4f);
            o->norms[(r * groups + g) * 2] = (uint8_t)h, o->norms[(r * groups + g) * 2 + 1] = (uint8_t)(h >> 8);
        }
    }
    nd_matrix m = {.kind = ND_MAT_CQ, .rows = rows, .cols = cols, .cq_bits = bits, .cols_pad = cols_pad,
                   .cq_idx = o->idx, .cq_norms = o->norms, .codebook = o->cb};
    o->m = m;
}

/* SPEC dequantisation, naively: w_group = (cb[code] * norm) H128 with a dense H. */
static float *naive_dequant(const cq_owned *o)
{
    const nd_matrix *m = &o->m;
    int sb = m->cq_bits == ND_CQ_TERNARY ? 2 : m->cq_bits, groups = m->cols_pad / 128;
    size_t row_bytes = (size_t)m->cols_pad * sb / 8;
    float *w = malloc(sizeof(float) * (size_t)m->rows * m->cols);
    for (int r = 0; r < m->rows; r++)
        for (int g = 0; g < groups; g++) {
            double u[128];
            const uint8_t *nb = o->norms + (r * groups + g) * 2;
            float norm = nd_half_to_float((uint16_t)(nb[0] | nb[1] << 8));
            for (int c = 0; c < 128; c++) {
                unsigned code = 0;
                for (int k = 0; k < sb; k++) {
                    size_t bit = (size_t)(g * 128 + c) * sb + k;
                    code |= (unsigned)(o->idx[r * row_bytes + (bit >> 3)] >> (bit & 7) & 1) << k;
                }
                u[c] = o->cb[code] * norm;
            }
            for (int c = 0; c < 128 && g * 128 + c < m->cols; c++) {
                double acc = 0;
                for (int k = 0; k < 128; k++) acc += u[k] * hada_entry(k, c, 128);
                w[(size_t)r * m->cols + g * 128 + c] = (float)acc;
            }
        }
    return w;
}

static void naive_matmul(const float *w, int rows, int cols, const float *x, int T, float *y)
{
    for (int t = 0; t < T; t++)
        for (int r = 0; r < rows; r++) {
            double acc = 0;
            for (int c = 0; c < cols; c++) acc += (double)w[(size_t)r * cols + c] * x[(size_t)t * cols + c];
            y[(size_t)t * rows + r] = (float)acc;
        }
}

static void check_matmul(const nd_matrix *m, const float *wref, int T, nd_threadpool *pool, const char *what)
{
    float *x = malloc(sizeof(float) * (size_t)T * m->cols);
    float *y = malloc(sizeof(float) * (size_t)T * m->rows), *ref = malloc(sizeof(float) * (size_t)T * m->rows);
    float *y1 = malloc(sizeof(float) * (size_t)T * m->rows);
    fill(x, (size_t)T * m->cols);
    size_t wk = nd_cpu_matmul_work_floats(m, T, nd_threadpool_threads(pool));
    float *work = malloc(sizeof(float) * (wk + 1));
    nd_cpu_matmul(pool, m, x, T, m->cols, y, m->rows, work);
    nd_cpu_matmul(NULL, m, x, T, m->cols, y1, m->rows, work);
    naive_matmul(wref, m->rows, m->cols, x, T, ref);
    double d = maxdiff(y, ref, (size_t)T * m->rows);
    CHECKF(d < 2e-4, "%s rows=%d cols=%d T=%d: diff %g", what, m->rows, m->cols, T, d);
    CHECKF(!memcmp(y, y1, sizeof(float) * (size_t)T * m->rows), "%s: pool vs single thread differ", what);
    free(x), free(y), free(ref), free(y1), free(work);
}

static void test_matmul_f32(void)
{
    nd_threadpool *pool = NULL;
    CHECK(nd_threadpool_create(3, &pool, NULL) == 0);
    int shapes[][2] = {{1, 1}, {5, 7}, {37, 130}, {200, 512}, {64, 33}};
    int Ts[] = {1, 2, 3, 9};
    for (int s = 0; s < 5; s++)
        for (int k = 0; k < 4; k++) {
            int rows = shapes[s][0], cols = shapes[s][1];
            float *w = malloc(sizeof(float) * rows * cols);
            fill(w, (size_t)rows * cols);
            nd_matrix m = {.kind = ND_MAT_F32, .rows = rows, .cols = cols, .f32 = w};
            check_matmul(&m, w, Ts[k], pool, "f32");
            free(w);
        }
    nd_threadpool_free(pool);
}

static void test_matmul_cq(void)
{
    nd_threadpool *pool = NULL;
    CHECK(nd_threadpool_create(2, &pool, NULL) == 0);
    int bits[] = {2, 3, 4, ND_CQ_TERNARY};
    int shapes[][2] = {{3, 64}, {40, 128}, {70, 300}, {260, 512}};
    int Ts[] = {1, 2, 5};
    for (int b = 0; b < 4; b++)
        for (int s = 0; s < 4; s++) {
            cq_owned o;
            make_cq(&o, shapes[s][0], shapes[s][1], bits[b]);
            float *w = naive_dequant(&o);
            for (int k = 0; k < 3; k++) check_matmul(&o.m, w, Ts[k], pool, "cq");
            /* gather_rows dequantises exactly what the matmul multiplies by */
            int rows[3] = {0, o.m.rows - 1, o.m.rows / 2};
            float *g = malloc(sizeof(float) * 3 * o.m.cols);
            nd_cpu_gather_rows(&o.m, rows, 3, g);
            for (int i = 0; i < 3; i++)
                CHECKF(maxdiff(g + i * o.m.cols, w + (size_t)rows[i] * o.m.cols, o.m.cols) < 1e-5, "gather bits %d",
                       bits[b]);
            free(g), free(w), free(o.idx), free(o.norms);
        }
    nd_threadpool_free(pool);
}

static void test_attention(void)
{
    int H = 4, KVH = 2, hd = 8, KV = KVH * hd, A = H * hd;
    int windows[][2] = {{1000, 0}, {6, 4}, {3, 0}, {5, 2}};
    for (int wi = 0; wi < 4; wi++) {
        int W = windows[wi][0], S = windows[wi][1];
        int slots = 12, pos0 = 20, T = 5; /* cache holds some earlier positions */
        int cache_pos[12];
        for (int s = 0; s < slots; s++) cache_pos[s] = s < 4 ? s : (s < 11 ? 9 + s : -1); /* 0..3, 13..19, empty */
        float kc[12 * 16], vc[12 * 16], kq[5 * 16], vq[5 * 16], q[5 * 32], out[5 * 32], ref[5 * 32];
        fill(kc, sizeof kc / 4), fill(vc, sizeof vc / 4), fill(kq, sizeof kq / 4), fill(vq, sizeof vq / 4);
        fill(q, sizeof q / 4);
        nd_attn_args a = {.T = T, .pos0 = pos0, .num_heads = H, .num_kv_heads = KVH, .head_dim = hd, .window = W,
                          .sinks = S, .q = q, .k_chunk = kq, .v_chunk = vq, .kv_bits = 32, .k_cache = kc, .v_cache = vc,
                          .cache_pos = cache_pos, .cache_slots = slots, .out = out};
        float *work = malloc(sizeof(float) * nd_cpu_attention_work_floats(&a, 1));
        nd_cpu_attention(NULL, &a, work);
        free(work);
        /* reference: list all (position, k, v) and apply the SPEC mask */
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                int qp = pos0 + t, kvh = h / (H / KVH);
                double sc[32], mx = -1e30, sum = 0;
                const float *vs[32];
                int n = 0;
                for (int s = 0; s < slots + T; s++) {
                    int p = s < slots ? cache_pos[s] : pos0 + (s - slots);
                    if (p < 0 || p > qp || !(qp - p < W || p < S)) continue;
                    const float *k = s < slots ? kc + s * KV : kq + (s - slots) * KV;
                    vs[n] = (s < slots ? vc + s * KV : vq + (s - slots) * KV) + kvh * hd;
                    double d = 0;
                    for (int i = 0; i < hd; i++) d += (double)q[t * A + h * hd + i] * k[kvh * hd + i];
                    sc[n] = d / sqrt(hd);
                    mx = fmax(mx, sc[n]);
                    n++;
                }
                for (int i = 0; i < n; i++) sum += (sc[i] = exp(sc[i] - mx));
                for (int c = 0; c < hd; c++) {
                    double acc = 0;
                    for (int i = 0; i < n; i++) acc += sc[i] * vs[i][c];
                    ref[t * A + h * hd + c] = (float)(acc / sum);
                }
            }
        CHECKF(maxdiff(out, ref, (size_t)T * A) < 1e-5, "window %d sinks %d: diff %g", W, S,
               maxdiff(out, ref, (size_t)T * A));
    }
}

static void test_quantize_kv(void)
{
    float x[64], back[64], sc[2];
    int8_t q[64];
    fill(x, 64);
    x[5] = 3.0f; /* a large value sets its group's scale */
    nd_cpu_quantize_kv(x, 64, q, sc);
    for (int g = 0; g < 2; g++) {
        float mx = 0;
        for (int i = 0; i < 32; i++) mx = fmaxf(mx, fabsf(x[g * 32 + i]));
        CHECK(fabsf(sc[g] - mx / 127.0f) < 1e-7f);
        for (int i = 0; i < 32; i++) back[g * 32 + i] = q[g * 32 + i] * sc[g];
    }
    for (int i = 0; i < 64; i++) CHECKF(fabsf(back[i] - x[i]) <= sc[i / 32] * 0.5f + 1e-7f, "i=%d", i);
    float z[32] = {0};
    nd_cpu_quantize_kv(z, 32, q, sc);
    CHECK(sc[0] == 0.0f && q[0] == 0 && q[31] == 0);
}

static void add_task(void *ctx, int task, int thread)
{
    (void)thread;
    int *v = ctx;
    v[task] += task + 1;
}

static void test_threadpool(void)
{
    for (int th = 1; th <= 4; th++) {
        nd_threadpool *p = NULL;
        CHECK(nd_threadpool_create(th, &p, NULL) == 0);
        CHECK(nd_threadpool_threads(p) == th);
        int v[1000];
        for (int rep = 0; rep < 200; rep++) { /* many back-to-back jobs: no task lost or run twice */
            memset(v, 0, sizeof v);
            int n = 1 + rep % 1000;
            nd_threadpool_run(p, n, add_task, v);
            int ok = 1;
            for (int i = 0; i < n; i++) ok &= v[i] == i + 1;
            CHECKF(ok, "threads %d rep %d", th, rep);
        }
        nd_threadpool_free(p);
    }
}

typedef struct range_ctx {
    int *v;
    int grain, n;
    atomic_int bad; /* a chunk under the grain that did not end the job */
} range_ctx;

static void add_range(void *ctx, int begin, int end, int thread)
{
    (void)thread;
    range_ctx *r = ctx;
    if (end - begin < r->grain && end != r->n) atomic_store(&r->bad, 1);
    for (int i = begin; i < end; i++) r->v[i] += i + 1;
}

/* range jobs: every unit exactly once, chunks of at least the grain (but the last) */
static void test_threadpool_ranges(void)
{
    for (int th = 1; th <= 4; th++) {
        nd_threadpool *p = NULL;
        CHECK(nd_threadpool_create(th, &p, NULL) == 0);
        int v[1000];
        for (int rep = 0; rep < 300; rep++) {
            memset(v, 0, sizeof v);
            range_ctx r = {.v = v, .grain = 1 + rep % 5, .n = 1 + (rep * 37) % 1000, .bad = 0};
            nd_threadpool_run_ranges(p, r.n, r.grain, add_range, &r);
            if (rep % 7 == 0) nd_threadpool_run(p, 1 + rep % 13, add_task, v + 900); /* mixed with task jobs */
            int ok = 1;
            for (int i = 0; i < r.n && i < 900; i++) ok &= v[i] == i + 1;
            CHECKF(ok && !atomic_load(&r.bad), "threads %d rep %d", th, rep);
        }
        nd_threadpool_free(p);
    }
    int v[10] = {0};
    range_ctx r = {.v = v, .grain = 1, .n = 10, .bad = 0};
    nd_threadpool_run_ranges(NULL, 10, 4, add_range, &r); /* no pool: one call on this thread */
    CHECK(v[0] == 1 && v[9] == 10);
}

int main(void)
{
    RUN(test_hadamard);
    RUN(test_hadamard_paths_same_bits);
    RUN(test_rmsnorm);
    RUN(test_rope);
    RUN(test_sinkhorn);
    RUN(test_matmul_f32);
    RUN(test_matmul_cq);
    RUN(test_attention);
    RUN(test_quantize_kv);
    RUN(test_threadpool);
    RUN(test_threadpool_ranges);
    return check_summary();
}
