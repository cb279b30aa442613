/* test_backend_ops.c - every op of the backend table, for every backend
 * built in and usable here, against a plain reference written in this file
 * (double accumulation, textbook loops, explicit dequantisation, a dense
 * Hadamard matrix); and the registry's selection rules.
 *
 * The CPU backend is always tested; a device backend (CUDA) is tested the
 * same way when present, with NEEDLE_CUDA_OFFLOAD=all so every kernel runs
 * on the device.  A backend compiled in without a device here is reported as
 * NOT RUN and counts neither as pass nor fail.  test_table_covers_every_op
 * fails when an op is added to nd_op without a case here.
 *
 * Tolerances: max |op - ref| / max(1, max |ref|):
 *   matmul F32 2e-5, CQ 5e-5 (float dots vs double), attention 2e-5,
 *   hadamard 1e-5 (log n butterfly stages), sinkhorn 1e-5, layer ops 2e-5
 *   (expf and float sums vs double), rmsnorm / rope / gather / copy 1e-6;
 *   quantize_kv: codes within 1 (a rounding tie), scales 1e-6. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "check.h"
#include "core/threadpool.h"
#include "quant/cq.h"

static nd_backend *be; /* the instance under test */
static int covered[ND_OP_COUNT];
#define COVER(op) (covered[op] = 1)

/* ---------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float frand(void) /* uniform in [-1, 1) */
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f;
}
static float *frand_array(size_t n, float scale)
{
    float *p = malloc(n * sizeof(float) + 64);
    for (size_t i = 0; i < n; i++) p[i] = frand() * scale;
    return p;
}

/* max |a - b| / max(1, max |b|) */
static double rel_err(const float *a, const float *b, size_t n)
{
    double d = 0.0, m = 1.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        if (!(e <= d)) d = e; /* NaN counts as the worst */
        if (fabs((double)b[i]) > m) m = fabs((double)b[i]);
    }
    return d / m;
}
#define EXPECT_CLOSE(got, ref, n, tol, ...)                                                                          \
    do {                                                                                                             \
        char what_[200];                                                                                             \
        snprintf(what_, sizeof what_, __VA_ARGS__);                                                                  \
        double e_ = rel_err((got), (ref), (n));                                                                      \
        CHECKF(e_ <= (tol), "%s %s: rel err %.3g > %.3g", be->name, what_, e_, (double)(tol));                      \
    } while (0)

static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }

/* A CQ matrix made the way the exporter makes one, owning its buffers. */
typedef struct cq_owned {
    nd_matrix m;
    uint8_t *idx, *norms;
    float cb[16];
} cq_owned;

static void cq_make(cq_owned *c, int rows, int cols, int bits)
{
    memset(c, 0, sizeof *c);
    int pad = nd_cq_cols_pad(cols), groups = pad / ND_CQ_GROUP;
    size_t rb = nd_cq_row_bytes(cols, bits);
    c->idx = malloc(rb * (size_t)rows);
    c->norms = malloc((size_t)rows * (size_t)groups * 2);
    float *row = frand_array((size_t)cols, 0.1f);
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < cols; i++) row[i] = frand() * 0.1f;
        uint16_t nrm[64];
        nd_cq_quantize_row(row, cols, bits, nd_cq_codebooks, c->idx + rb * (size_t)r, nrm);
        for (int g = 0; g < groups; g++) {
            c->norms[((size_t)r * groups + g) * 2] = (uint8_t)(nrm[g] & 0xFF);
            c->norms[((size_t)r * groups + g) * 2 + 1] = (uint8_t)(nrm[g] >> 8);
        }
    }
    free(row);
    nd_cq_codebook_by_code(bits, nd_cq_codebooks, c->cb);
    c->m = (nd_matrix){.kind = ND_MAT_CQ, .rows = rows, .cols = cols, .cq_bits = bits, .cols_pad = pad,
                       .cq_idx = c->idx, .cq_norms = c->norms, .codebook = c->cb};
}
static void cq_free(cq_owned *c) { free(c->idx), free(c->norms); }

/* ---------------------------------------------------------------- references */

/* row r of W as floats: F32 as is, CQ through the quant layer's dequantiser */
static void ref_row(const nd_matrix *w, int r, float *out)
{
    if (w->kind == ND_MAT_F32) {
        memcpy(out, w->f32 + (size_t)r * w->cols, sizeof(float) * (size_t)w->cols);
        return;
    }
    int sb = nd_cq_storage_bits(w->cq_bits);
    nd_cq_dequant_row(w->cq_idx + nd_cq_row_bytes(w->cols, w->cq_bits) * (size_t)r,
                      w->cq_norms + (size_t)r * (w->cols_pad / ND_CQ_GROUP) * 2, w->cols, sb, w->codebook, out);
}

static void ref_matmul(const nd_matrix *w, const float *x, int T, int ldx, float *y, int ldy)
{
    float *row = malloc(sizeof(float) * (size_t)w->cols);
    for (int r = 0; r < w->rows; r++) {
        ref_row(w, r, row);
        for (int t = 0; t < T; t++) {
            double acc = 0.0;
            for (int c = 0; c < w->cols; c++) acc += (double)row[c] * x[(size_t)t * ldx + c];
            y[(size_t)t * ldy + r] = (float)acc;
        }
    }
    free(row);
}

static void ref_rmsnorm(const float *x, int n, const float *scale, float *out)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    double inv = 1.0 / sqrt(ss / n + 1e-6);
    for (int i = 0; i < n; i++) out[i] = (float)((scale ? 1.0 + scale[i] : 1.0) * x[i] * inv);
}

/* dense Sylvester Hadamard: H[i][j] = (-1)^popcount(i & j) / sqrt(n) */
static void ref_hadamard(float *x, int n)
{
    double *y = calloc((size_t)n, sizeof(double));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) y[i] += (__builtin_popcount((unsigned)(i & j)) & 1 ? -1.0 : 1.0) * x[j];
    for (int i = 0; i < n; i++) x[i] = (float)(y[i] / sqrt((double)n));
    free(y);
}

static void ref_sinkhorn(float *m, int n, int iters)
{
    double a[256];
    for (int i = 0; i < n * n; i++) a[i] = m[i];
    for (int it = 0; it < iters; it++) {
        for (int i = 0; i < n; i++) {
            double s = 0.0;
            for (int j = 0; j < n; j++) s += exp(a[i * n + j]);
            for (int j = 0; j < n; j++) a[i * n + j] -= log(s);
        }
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int i = 0; i < n; i++) s += exp(a[i * n + j]);
            for (int i = 0; i < n; i++) a[i * n + j] -= log(s);
        }
    }
    for (int i = 0; i < n * n; i++) m[i] = (float)exp(a[i]);
}

/* ---------------------------------------------------------------- weight ops */

static void check_matmul(const nd_matrix *w, int T, double tol, const char *what)
{
    int ldx = w->cols + 3, ldy = w->rows + 5;
    float *x = frand_array((size_t)T * ldx, 1.0f);
    float *y = calloc((size_t)T * ldy, sizeof(float)), *ref = calloc((size_t)T * ldy, sizeof(float));
    ref_matmul(w, x, T, ldx, ref, ldy);
    float *work = malloc((be->ops.matmul_work_floats(be, w, T) + 16) * sizeof(float));
    be->ops.matmul(be, w, x, T, ldx, y, ldy, work);
    /* the gaps between rows must stay untouched (0) */
    EXPECT_CLOSE(y, ref, (size_t)T * ldy, tol, "matmul %s rows %d cols %d T %d", what, w->rows, w->cols, T);
    free(x), free(y), free(ref), free(work);
}

static void test_matmul(void)
{
    COVER(ND_OP_MATMUL);
    int shapes[][2] = {{300, 200}, {8192, 128}, {7, 513}, {512, 2048}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        float *wf = frand_array((size_t)shapes[s][0] * shapes[s][1], 0.05f);
        nd_matrix w = {.kind = ND_MAT_F32, .rows = shapes[s][0], .cols = shapes[s][1], .f32 = wf};
        int Ts[] = {1, 2, 17};
        for (int i = 0; i < 3; i++) check_matmul(&w, Ts[i], 2e-5, "f32");
        free(wf);
    }
    int bits[] = {2, 3, 4, ND_CQ_TERNARY};
    for (int b = 0; b < 4; b++) {
        cq_owned c;
        cq_make(&c, 150, 200, bits[b]); /* 200 columns: a padded last group */
        for (int T = 1; T <= 9; T += 4) check_matmul(&c.m, T, 5e-5, nd_cq_bits_name(bits[b]));
        cq_free(&c);
    }
    cq_owned big;
    cq_make(&big, 512, 512, 4);
    check_matmul(&big.m, 1, 5e-5, "4-bit 512x512");
    check_matmul(&big.m, 64, 5e-5, "4-bit 512x512");
    cq_free(&big);
    /* a device keeps weights by address: new contents at the same address
     * (a model freed and another mapped there) must not be served stale */
    float *wf = frand_array((size_t)256 * 256, 0.05f);
    nd_matrix w = {.kind = ND_MAT_F32, .rows = 256, .cols = 256, .f32 = wf};
    check_matmul(&w, 4, 2e-5, "f32 before");
    for (size_t i = 0; i < (size_t)256 * 256; i++) wf[i] = frand() * 0.05f;
    check_matmul(&w, 4, 2e-5, "f32 after rewrite in place");
    free(wf);
}

static void test_matmul_multi(void)
{
    COVER(ND_OP_MATMUL_MULTI);
    int cols = 384;
    float *w0f = frand_array((size_t)100 * cols, 0.05f), *w1f = frand_array((size_t)33 * cols, 0.05f);
    nd_matrix w0 = {.kind = ND_MAT_F32, .rows = 100, .cols = cols, .f32 = w0f};
    nd_matrix w1 = {.kind = ND_MAT_F32, .rows = 33, .cols = cols, .f32 = w1f};
    cq_owned c;
    cq_make(&c, 64, cols, 3);
    const nd_matrix *mats[3] = {&w0, &c.m, &w1};
    int T = 5, ldx = cols + 1, ldy[3] = {100, 70, 40};
    float *x = frand_array((size_t)T * ldx, 1.0f);
    float *y[3], *ref[3];
    size_t wf = 0;
    for (int i = 0; i < 3; i++) {
        size_t a = be->ops.matmul_work_floats(be, mats[i], T);
        wf = a > wf ? a : wf;
        y[i] = calloc((size_t)T * ldy[i], sizeof(float));
        ref[i] = calloc((size_t)T * ldy[i], sizeof(float));
        ref_matmul(mats[i], x, T, ldx, ref[i], ldy[i]);
    }
    float *work = malloc((wf + 16) * sizeof(float));
    be->ops.matmul_multi(be, 3, mats, x, T, ldx, y, ldy, work);
    for (int i = 0; i < 3; i++) {
        EXPECT_CLOSE(y[i], ref[i], (size_t)T * ldy[i], 5e-5, "matmul_multi matrix %d", i);
        free(y[i]), free(ref[i]);
    }
    free(work), free(x), free(w0f), free(w1f);
    cq_free(&c);
}

/* The A8 rule written out plainly: s = max|x| / 127 (1 for zeros), x' = rint(x / s) s. */
static void ref_fake_quant(const float *x, int n, float *out)
{
    float amax = 0.0f;
    for (int i = 0; i < n; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    float s = amax > 0.0f ? amax / 127.0f : 1.0f;
    for (int i = 0; i < n; i++) out[i] = rintf(x[i] / s) * s;
}

static void matmul_a8_case(int T)
{
    int cols = 200, ldx = cols + 3;
    float *w0f = frand_array((size_t)70 * cols, 0.05f);
    nd_matrix w0 = {.kind = ND_MAT_F32, .rows = 70, .cols = cols, .f32 = w0f};
    cq_owned c[4];
    int bits[4] = {2, 3, 4, ND_CQ_TERNARY};
    for (int b = 0; b < 4; b++) cq_make(&c[b], 40 + 9 * b, cols, bits[b]);
    const nd_matrix *mats[5] = {&c[0].m, &c[1].m, &w0, &c[2].m, &c[3].m};
    float *x = frand_array((size_t)T * ldx, 1.0f), *xq = malloc(sizeof(float) * (size_t)T * cols);
    for (int i = 0; i < cols; i++) x[2 * ldx + i] = 0.0f; /* an all-zero token */
    for (int t = 0; t < T; t++) ref_fake_quant(x + (size_t)t * ldx, cols, xq + (size_t)t * cols);
    float *y[5], *ref[5];
    int ldy[5];
    size_t wf = 0;
    for (int i = 0; i < 5; i++) {
        size_t a = be->ops.matmul_a8_work_floats(be, mats[i], T);
        wf = a > wf ? a : wf;
        ldy[i] = mats[i]->rows + i;
        y[i] = calloc((size_t)T * ldy[i], sizeof(float));
        ref[i] = calloc((size_t)T * ldy[i], sizeof(float));
        ref_matmul(mats[i], xq, T, cols, ref[i], ldy[i]);
    }
    float *work = malloc((wf + 16) * sizeof(float)), *x_copy = malloc(sizeof(float) * (size_t)T * ldx);
    memcpy(x_copy, x, sizeof(float) * (size_t)T * ldx);
    be->ops.matmul_a8(be, 5, mats, x, T, ldx, y, ldy, work);
    CHECK(!memcmp(x, x_copy, sizeof(float) * (size_t)T * ldx)); /* the input is left alone */
    for (int i = 0; i < 5; i++) {
        /* the integer path holds the codebook as int16: within 1e-4 */
        EXPECT_CLOSE(y[i], ref[i], (size_t)T * ldy[i], 1e-4, "matmul_a8 matrix %d", i);
        free(y[i]), free(ref[i]);
    }
    free(work), free(x), free(x_copy), free(xq), free(w0f);
    for (int b = 0; b < 4; b++) cq_free(&c[b]);
}

static void test_matmul_a8(void)
{
    COVER(ND_OP_MATMUL_A8);
    matmul_a8_case(3); /* decode sizes: the integer kernels */
    matmul_a8_case(9); /* a batch: the blocked integer kernels */
}

static void test_gather_rows(void)
{
    COVER(ND_OP_GATHER_ROWS);
    int rows[] = {0, 5, 4095, 17, 17, 2048};
    int n = (int)(sizeof rows / sizeof rows[0]), cols = 200;
    float *y = malloc(sizeof(float) * (size_t)n * cols), *ref = malloc(sizeof(float) * (size_t)n * cols);
    float *wf = frand_array((size_t)4096 * cols, 1.0f);
    nd_matrix w = {.kind = ND_MAT_F32, .rows = 4096, .cols = cols, .f32 = wf};
    for (int i = 0; i < n; i++) ref_row(&w, rows[i], ref + (size_t)i * cols);
    be->ops.gather_rows(be, &w, rows, n, y);
    EXPECT_CLOSE(y, ref, (size_t)n * cols, 1e-6, "gather f32");
    int bits[] = {2, 3, 4, ND_CQ_TERNARY};
    for (int b = 0; b < 4; b++) {
        cq_owned c;
        cq_make(&c, 4096, cols, bits[b]);
        for (int i = 0; i < n; i++) ref_row(&c.m, rows[i], ref + (size_t)i * cols);
        be->ops.gather_rows(be, &c.m, rows, n, y);
        EXPECT_CLOSE(y, ref, (size_t)n * cols, 1e-6, "gather CQ %s", nd_cq_bits_name(bits[b]));
        cq_free(&c);
    }
    free(wf), free(y), free(ref);
}

/* ---------------------------------------------------------------- small ops */

static void test_rmsnorm(void)
{
    COVER(ND_OP_RMSNORM);
    int sizes[] = {64, 512, 2048, 333};
    for (int s = 0; s < 4; s++) {
        int n = sizes[s], count = 3;
        float *x = frand_array((size_t)n * count, 3.0f), *sc = frand_array((size_t)n, 0.5f);
        float *y = malloc(sizeof(float) * n * count), *ref = malloc(sizeof(float) * n * count);
        for (int with = 0; with < 2; with++) {
            for (int c = 0; c < count; c++) ref_rmsnorm(x + (size_t)c * n, n, with ? sc : NULL, ref + (size_t)c * n);
            be->ops.rmsnorm(be, x, n, count, with ? sc : NULL, y);
            EXPECT_CLOSE(y, ref, (size_t)n * count, 1e-6, "rmsnorm n=%d scale=%d", n, with);
        }
        memcpy(y, x, sizeof(float) * n * count); /* in place (out == x) */
        be->ops.rmsnorm(be, y, n, count, sc, y);
        EXPECT_CLOSE(y, ref, (size_t)n * count, 1e-6, "rmsnorm in place n=%d", n);
        free(x), free(sc), free(y), free(ref);
    }
}

static void test_rope(void)
{
    COVER(ND_OP_ROPE);
    int heads = 8, hd = 64, half = hd / 2;
    float *x = frand_array((size_t)heads * hd, 2.0f), *cs = malloc(sizeof(float) * hd);
    for (int i = 0; i < half; i++) {
        float ang = 37.0f * powf(100000.0f, -2.0f * (float)i / (float)hd);
        cs[i] = cosf(ang), cs[half + i] = sinf(ang);
    }
    float *y = malloc(sizeof(float) * heads * hd), *ref = malloc(sizeof(float) * heads * hd);
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < half; i++) {
            double x1 = x[h * hd + i], x2 = x[h * hd + half + i];
            ref[h * hd + i] = (float)(x1 * cs[i] - x2 * cs[half + i]);
            ref[h * hd + half + i] = (float)(x2 * cs[i] + x1 * cs[half + i]);
        }
    memcpy(y, x, sizeof(float) * heads * hd);
    be->ops.rope(be, y, heads, hd, cs);
    EXPECT_CLOSE(y, ref, (size_t)heads * hd, 1e-6, "rope");
    free(x), free(cs), free(y), free(ref);
}

static void test_hadamard(void)
{
    COVER(ND_OP_HADAMARD);
    for (int n = 2; n <= 8192; n *= 4) {
        float *x = frand_array((size_t)n, 1.0f), *y = malloc(sizeof(float) * n);
        memcpy(y, x, sizeof(float) * n);
        ref_hadamard(x, n);
        be->ops.hadamard(be, y, n);
        EXPECT_CLOSE(y, x, (size_t)n, 1e-5, "hadamard n=%d", n);
        free(x), free(y);
    }
}

static void test_sinkhorn(void)
{
    COVER(ND_OP_SINKHORN);
    for (int n = 2; n <= 16; n *= 2) {
        float *m = frand_array((size_t)n * n, 4.0f), *y = malloc(sizeof(float) * n * n);
        memcpy(y, m, sizeof(float) * n * n);
        ref_sinkhorn(m, n, 20);
        be->ops.sinkhorn(be, y, n, 20);
        EXPECT_CLOSE(y, m, (size_t)n * n, 1e-5, "sinkhorn n=%d", n);
        free(m), free(y);
    }
}

static void test_quantize_kv(void)
{
    COVER(ND_OP_QUANTIZE_KV);
    int n = 256;
    float *x = frand_array((size_t)n, 3.0f);
    x[5] = 0.0f;
    for (int i = 64; i < 96; i++) x[i] = 0.0f; /* an all-zero group: scale 0 */
    int8_t q[256];
    float s[8], sr[8];
    be->ops.quantize_kv(be, x, n, q, s);
    int worst = 0;
    for (int g = 0; g < n / ND_KV_GROUP; g++) {
        double mx = 0.0;
        for (int i = 0; i < ND_KV_GROUP; i++) mx = fmax(mx, fabs(x[g * ND_KV_GROUP + i]));
        sr[g] = (float)(mx / 127.0);
        for (int i = 0; i < ND_KV_GROUP; i++) {
            long want = mx > 0 ? lround(x[g * ND_KV_GROUP + i] * 127.0 / mx) : 0;
            int d = abs((int)(q[g * ND_KV_GROUP + i] - want));
            if (d > worst) worst = d;
        }
    }
    CHECKF(worst <= 1, "%s quantize_kv: a code %d away from round(x/scale)", be->name, worst);
    EXPECT_CLOSE(s, sr, 8, 1e-6, "quantize_kv scales");
    free(x);
}

/* act_quant: per vector s = max|x| / 127 (a float32 division), codes
 * rint(x / s) (half to even), x replaced by c * s; an all-zero vector s = 1 */
static void test_act_quant(void)
{
    COVER(ND_OP_ACT_QUANT);
    int n = 24, count = 5;
    float *x = frand_array((size_t)n * count, 3.0f), y[120];
    for (int i = 0; i < n; i++) x[2 * n + i] = 0.0f; /* an all-zero vector */
    x[3 * n] = 127.0f, x[3 * n + 1] = 2.5f, x[3 * n + 2] = -0.5f, x[3 * n + 3] = 1.5f; /* exact ties */
    for (int i = 4; i < n; i++) x[3 * n + i] = 0.0f;
    memcpy(y, x, sizeof(float) * (size_t)n * count);
    int8_t q[120];
    float s[5];
    be->ops.act_quant(be, y, n, count, q, s);
    int bad = 0;
    for (int v = 0; v < count; v++) {
        float mx = 0.0f;
        for (int i = 0; i < n; i++) mx = fmaxf(mx, fabsf(x[v * n + i]));
        float sr = mx > 0.0f ? mx / 127.0f : 1.0f;
        bad += s[v] != sr;
        for (int i = 0; i < n; i++) {
            float c = rintf(x[v * n + i] / sr);
            bad += q[v * n + i] != (int8_t)c || y[v * n + i] != c * sr;
        }
    }
    CHECKF(bad == 0, "%s act_quant: %d values differ from the quantiser's rule", be->name, bad);
    CHECK(q[3 * n + 1] == 2 && q[3 * n + 2] == 0 && q[3 * n + 3] == 2 && s[2] == 1.0f);
    be->ops.act_quant(be, x, n, 1, NULL, NULL); /* codes and scales optional */
    CHECK(memcmp(x, y, sizeof(float) * (size_t)n) == 0);
    free(x);
}

/* textbook attention with the window/sink mask over cache + chunk */
static void ref_attention(const nd_attn_args *a, const float *kf, const float *vf, float *out)
{
    int H = a->num_heads, KVH = a->num_kv_heads, hd = a->head_dim, KV = KVH * hd, G = H / KVH;
    int vd = a->v_head_dim > 0 ? a->v_head_dim : hd, VW = KVH * vd; /* value width (Needle 3) */
    int nk = a->cache_slots + a->T;
    double *sc = malloc(sizeof(double) * (size_t)nk);
    for (int t = 0; t < a->T; t++)
        for (int h = 0; h < H; h++) {
            int qp = a->pos0 + t, kvh = h / G;
            const float *q = a->q + ((size_t)t * H + h) * hd;
            double mx = -INFINITY;
            for (int k = 0; k < nk; k++) {
                int kp = k < a->cache_slots ? a->cache_pos[k] : a->pos0 + (k - a->cache_slots);
                const float *key = k < a->cache_slots ? kf + (size_t)k * KV + kvh * hd
                                                      : a->k_chunk + (size_t)(k - a->cache_slots) * KV + kvh * hd;
                int vis = kp >= 0 && kp <= qp && (qp - kp < a->window || kp < a->sinks);
                if (!vis) { sc[k] = -INFINITY; continue; }
                double dot = 0.0;
                for (int i = 0; i < hd; i++) dot += (double)q[i] * key[i];
                sc[k] = dot / sqrt((double)hd);
                if (sc[k] > mx) mx = sc[k];
            }
            double sum = 0.0;
            for (int k = 0; k < nk; k++) sum += (sc[k] = sc[k] == -INFINITY ? 0.0 : exp(sc[k] - mx));
            for (int i = 0; i < vd; i++) {
                double acc = 0.0;
                for (int k = 0; k < nk; k++) {
                    const float *val = k < a->cache_slots ? vf + (size_t)k * VW + kvh * vd
                                                          : a->v_chunk + (size_t)(k - a->cache_slots) * VW + kvh * vd;
                    acc += sc[k] * val[i];
                }
                out[((size_t)t * H + h) * vd + i] = (float)(acc / sum);
            }
        }
    free(sc);
}

/* vhd: the value head width (Needle 3; = hd for Needle 2); head_scale: the
 * int8 cache with one scale per head vector (Needle 3) */
static void attention_case_hs(int T, int pos0, int window, int sinks, int kv_bits, int hd, int vhd, int head_scale)
{
    int H = 8, KVH = 4, KV = KVH * hd, VW = KVH * vhd, slots = pos0 + 3 > 12 ? pos0 + 3 : 12;
    int kg = head_scale ? hd : ND_KV_GROUP, vg = head_scale ? vhd : ND_KV_GROUP, groups = KV / kg, vgroups = VW / vg;
    float *q = frand_array((size_t)T * H * hd, 1.0f), *kc = frand_array((size_t)T * KV, 1.0f);
    float *vc = frand_array((size_t)T * VW, 1.0f), *kf = frand_array((size_t)slots * KV, 1.0f);
    float *vf = frand_array((size_t)slots * VW, 1.0f);
    int8_t *k8 = malloc((size_t)slots * KV), *v8 = malloc((size_t)slots * VW);
    float *ks = malloc(sizeof(float) * slots * groups), *vs = malloc(sizeof(float) * slots * vgroups);
    float *kd = malloc(sizeof(float) * slots * KV), *vd = malloc(sizeof(float) * slots * VW);
    for (int s = 0; s < slots; s++) { /* the int8 cache and what it stands for */
        if (head_scale) {
            memcpy(kd + (size_t)s * KV, kf + (size_t)s * KV, sizeof(float) * (size_t)KV);
            memcpy(vd + (size_t)s * VW, vf + (size_t)s * VW, sizeof(float) * (size_t)VW);
            be->host->act_quant(be, kd + (size_t)s * KV, hd, KVH, k8 + (size_t)s * KV, ks + (size_t)s * groups);
            be->host->act_quant(be, vd + (size_t)s * VW, vhd, KVH, v8 + (size_t)s * VW, vs + (size_t)s * vgroups);
            continue;
        }
        be->host->quantize_kv(be, kf + (size_t)s * KV, KV, k8 + (size_t)s * KV, ks + (size_t)s * groups);
        be->host->quantize_kv(be, vf + (size_t)s * VW, VW, v8 + (size_t)s * VW, vs + (size_t)s * vgroups);
    }
    for (size_t i = 0; i < (size_t)slots * KV; i++) kd[i] = kv_bits == 8 ? k8[i] * ks[i / kg] : kf[i];
    for (size_t i = 0; i < (size_t)slots * VW; i++) vd[i] = kv_bits == 8 ? v8[i] * vs[i / vg] : vf[i];
    int *pos = malloc(sizeof(int) * (size_t)slots);
    for (int s = 0; s < slots; s++) pos[s] = s < pos0 ? (s * 7) % pos0 : -1; /* shuffled, the rest empty */
    float *out = calloc((size_t)T * H * vhd, sizeof(float)), *ref = calloc((size_t)T * H * vhd, sizeof(float));
    nd_attn_args a = {.T = T, .pos0 = pos0, .num_heads = H, .num_kv_heads = KVH, .head_dim = hd, .v_head_dim = vhd,
                      .window = window, .sinks = sinks, .q = q, .k_chunk = kc, .v_chunk = vc, .kv_bits = kv_bits,
                      .k_cache = kf, .v_cache = vf, .k_cache8 = k8, .v_cache8 = v8, .k_scale = ks, .v_scale = vs,
                      .cache_pos = pos, .cache_slots = slots, .out = out, .kv_head_scale = head_scale};
    ref_attention(&a, kd, vd, ref);
    float *work = malloc(sizeof(float) * (be->ops.attention_work_floats(be, &a) + 16));
    be->ops.attention(be, &a, work);
    EXPECT_CLOSE(out, ref, (size_t)T * H * vhd, 2e-5,
                 "attention T=%d pos0=%d window=%d sinks=%d kv_bits=%d hd=%d vhd=%d head_scale=%d", T, pos0, window,
                 sinks, kv_bits, hd, vhd, head_scale);
    free(q), free(kc), free(vc), free(kf), free(vf), free(k8), free(v8), free(ks), free(vs), free(kd), free(vd),
        free(out), free(ref), free(work), free(pos);
}

static void attention_case_v(int T, int pos0, int window, int sinks, int kv_bits, int hd, int vhd)
{
    attention_case_hs(T, pos0, window, sinks, kv_bits, hd, vhd, 0);
}

static void attention_case(int T, int pos0, int window, int sinks, int kv_bits)
{
    attention_case_v(T, pos0, window, sinks, kv_bits, 64, 64);
}

static void test_attention(void)
{
    COVER(ND_OP_ATTENTION);
    /* Needle 3: values wider / narrower than keys, and odd widths */
    for (int bits = 8; bits <= 32; bits += 24) {
        attention_case_v(5, 9, 1 << 30, 0, bits, 32, 64);
        attention_case_v(3, 6, 4, 0, bits, 64, 32);
    }
    attention_case_v(5, 9, 8, 0, 32, 16, 24);
    attention_case_v(1, 11, 8, 0, 32, 48, 64);
    /* Needle 3's int8 cache: one scale per head vector, any head width (the
     * widening path, and the in-register path when keys and values agree) */
    attention_case_hs(5, 9, 8, 0, 8, 16, 24, 1);
    attention_case_hs(1, 11, 8, 0, 8, 48, 64, 1);
    attention_case_hs(3, 6, 1 << 30, 0, 8, 16, 32, 1);
    attention_case_hs(5, 9, 6, 2, 8, 16, 16, 1);
    attention_case_hs(1, 10, 4, 0, 8, 48, 48, 1);
    attention_case_hs(4, 8, 1 << 30, 0, 8, 64, 64, 1);
    for (int bits = 8; bits <= 32; bits += 24) {
        attention_case(5, 9, 1 << 30, 0, bits); /* full causal */
        attention_case(5, 9, 6, 2, bits);       /* window 6, two sinks */
        attention_case(1, 10, 4, 0, bits);      /* one decode step */
        attention_case(7, 0, 3, 1, bits);       /* no cache yet */
        /* more cached keys than one block of 16 (the AVX-512 int8 path sums
         * scores 16 keys at a time): full blocks and a short last one */
        attention_case(1, 40, 1 << 30, 0, bits);
        attention_case(5, 37, 1 << 30, 0, bits);
        attention_case(3, 41, 20, 2, bits);
    }
}

/* ---------------------------------------------------------------- layer ops */

static void test_vector_ops(void)
{
    COVER(ND_OP_COPY), COVER(ND_OP_ZERO), COVER(ND_OP_SCALE), COVER(ND_OP_AXPY), COVER(ND_OP_SIGMOID_GATE);
    int n = 301;
    float *x = frand_array((size_t)n, 2.0f), *y = frand_array((size_t)n, 2.0f), *g = frand_array((size_t)n, 4.0f);
    float *got = malloc(sizeof(float) * n), *ref = malloc(sizeof(float) * n);
    be->ops.copy(be, got, x, sizeof(float) * (size_t)n);
    CHECKF(!memcmp(got, x, sizeof(float) * (size_t)n), "%s copy", be->name);
    be->ops.zero(be, got, sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) ref[i] = 0.0f;
    CHECKF(!memcmp(got, ref, sizeof(float) * (size_t)n), "%s zero", be->name);
    memcpy(got, x, sizeof(float) * n);
    be->ops.scale(be, got, n, 1.7f);
    for (int i = 0; i < n; i++) ref[i] = (float)(x[i] * 1.7);
    EXPECT_CLOSE(got, ref, (size_t)n, 1e-6, "scale");
    memcpy(got, y, sizeof(float) * n);
    be->ops.axpy(be, got, -0.6f, x, n);
    for (int i = 0; i < n; i++) ref[i] = (float)(y[i] - 0.6 * x[i]);
    EXPECT_CLOSE(got, ref, (size_t)n, 1e-6, "axpy");
    memcpy(got, x, sizeof(float) * n);
    be->ops.sigmoid_gate(be, got, g, (size_t)n);
    for (int i = 0; i < n; i++) ref[i] = (float)(x[i] * sigmoid_d(g[i]));
    EXPECT_CLOSE(got, ref, (size_t)n, 2e-6, "sigmoid_gate");
    free(x), free(y), free(g), free(got), free(ref);
}

static void test_hada_mlp(void)
{
    COVER(ND_OP_HADA_MLP);
    int T = 3, d = 96, NH = 128;
    float *b = frand_array((size_t)T * d, 2.0f), *norm = frand_array((size_t)d, 0.3f);
    float *d1 = frand_array((size_t)NH, 1.0f), *d2 = frand_array((size_t)NH, 1.0f), *d3 = frand_array((size_t)NH, 1.0f);
    float *got = malloc(sizeof(float) * T * d), *ref = malloc(sizeof(float) * T * d), *z = malloc(sizeof(float) * NH);
    for (int t = 0; t < T; t++) {
        float zz[128];
        ref_rmsnorm(b + t * d, d, norm, zz);
        for (int i = d; i < NH; i++) zz[i] = 0.0f;
        for (int i = 0; i < NH; i++) zz[i] *= d1[i];
        ref_hadamard(zz, NH);
        for (int i = 0; i < NH; i++) zz[i] = (float)(d2[i] * zz[i] * sigmoid_d(d2[i] * zz[i]));
        ref_hadamard(zz, NH);
        for (int i = 0; i < d; i++) ref[t * d + i] = (float)(b[t * d + i] + (double)d3[i] * zz[i]);
    }
    memcpy(got, b, sizeof(float) * T * d);
    nd_hada_mlp_args a = {.T = T, .d = d, .hada_n = NH, .norm = norm, .d1 = d1, .d2 = d2, .d3 = d3, .b = got, .z = z};
    be->ops.hada_mlp(be, &a);
    EXPECT_CLOSE(got, ref, (size_t)T * d, 2e-5, "hada_mlp");
    free(b), free(norm), free(d1), free(d2), free(d3), free(got), free(ref), free(z);
}

static void test_mhc(void)
{
    COVER(ND_OP_MHC_PRE), COVER(ND_OP_MHC_MIX);
    for (int n = 1; n <= 4; n *= 2) {
        int T = 3, d = 40, nd_ = n * d;
        float *X = frand_array((size_t)T * nd_, 2.0f), *pp = frand_array((size_t)T * n, 1.0f);
        float *pq = frand_array((size_t)T * n, 1.0f), *pr = frand_array((size_t)T * n * n, 1.0f);
        float *bp = frand_array((size_t)n, 0.5f), *bq = frand_array((size_t)n, 0.5f), *br = frand_array((size_t)n * n, 0.5f);
        float op[4], oq[4];
        for (int i = 0; i < n; i++) op[i] = i == 0 ? 4.0f : -4.0f, oq[i] = i == 0 ? 0.0f : -4.0f;
        float *y = frand_array((size_t)T * d, 1.0f);
        float *u = malloc(sizeof(float) * T * d), *Xg = malloc(sizeof(float) * T * nd_), *yg = malloc(sizeof(float) * T * d);
        float *scratch = malloc(sizeof(float) * T * nd_), *uref = malloc(sizeof(float) * T * d);
        float *Xref = malloc(sizeof(float) * T * nd_);
        float ap = 0.7f, aq = -0.4f, ar = 0.9f;
        for (int t = 0; t < T; t++) {
            double w[4], q[4];
            float P[16];
            for (int i = 0; i < n; i++) w[i] = sigmoid_d((double)ap * pp[t * n + i] + bp[i] + op[i]);
            for (int i = 0; i < n; i++) q[i] = 2.0 * sigmoid_d((double)aq * pq[t * n + i] + bq[i] + oq[i]);
            for (int k = 0; k < d; k++) {
                double acc = 0.0;
                for (int i = 0; i < n; i++) acc += w[i] * X[t * nd_ + i * d + k];
                uref[t * d + k] = (float)acc;
            }
            for (int ij = 0; ij < n * n; ij++) P[ij] = (float)((double)ar * pr[t * n * n + ij] + br[ij]);
            ref_sinkhorn(P, n, 20);
            for (int i = 0; i < n; i++)
                for (int k = 0; k < d; k++) {
                    double acc = q[i] * ((double)y[t * d + k] - uref[t * d + k]);
                    for (int j = 0; j < n; j++) acc += (double)P[i * n + j] * X[t * nd_ + j * d + k];
                    Xref[t * nd_ + i * d + k] = (float)acc;
                }
        }
        memcpy(Xg, X, sizeof(float) * T * nd_);
        memcpy(yg, y, sizeof(float) * T * d);
        nd_mhc_args a = {.T = T, .n = n, .d = d, .X = Xg, .phi_pre = pp, .phi_post = pq, .phi_res = pr, .a_pre = ap,
                         .a_post = aq, .a_res = ar, .b_pre = bp, .off_pre = op, .b_post = bq, .off_post = oq,
                         .b_res = br, .sinkhorn_iters = 20, .u = u, .y = yg, .scratch = scratch};
        be->ops.mhc_pre(be, &a);
        EXPECT_CLOSE(u, uref, (size_t)T * d, 2e-5, "mhc_pre n=%d", n);
        be->ops.mhc_mix(be, &a);
        EXPECT_CLOSE(Xg, Xref, (size_t)T * nd_, 2e-5, "mhc_mix n=%d", n);
        free(X), free(pp), free(pq), free(pr), free(bp), free(bq), free(br), free(y), free(u), free(Xg), free(yg),
            free(scratch), free(uref), free(Xref);
    }
}

static void test_engram(void)
{
    COVER(ND_OP_ENGRAM_TAPS), COVER(ND_OP_ENGRAM_GATE);
    int d = 72;
    float *taps = frand_array((size_t)4 * d, 1.0f), *rows = frand_array((size_t)4 * d, 1.0f);
    float *got = malloc(sizeof(float) * d), *ref = malloc(sizeof(float) * d);
    for (int avail = 1; avail <= 4; avail++) { /* positions before the sequence end the sum */
        const float *src[4];
        for (int j = 0; j < 4; j++) src[j] = j < avail ? rows + j * d : NULL;
        for (int i = 0; i < d; i++) {
            double acc = 0.0;
            for (int j = 0; j < avail; j++) acc += (double)taps[j * d + i] * rows[j * d + i];
            ref[i] = (float)acc;
        }
        be->ops.engram_taps(be, taps, 4, src, d, 1, got, (size_t)d);
        EXPECT_CLOSE(got, ref, (size_t)d, 1e-6, "engram_taps with %d rows", avail);
    }
    { /* several outputs in one call, ldo apart, each with its own rows */
        int count = 5, ldo = d + 7;
        const float *src[5 * 4];
        float *out = calloc((size_t)count * ldo, sizeof(float));
        for (int r = 0; r < count; r++)
            for (int j = 0; j < 4; j++) src[r * 4 + j] = j <= r ? rows + (size_t)((r + j) % 4) * d : NULL;
        be->ops.engram_taps(be, taps, 4, src, d, count, out, (size_t)ldo);
        for (int r = 0; r < count; r++) {
            for (int i = 0; i < d; i++) {
                double acc = 0.0;
                for (int j = 0; j < 4 && src[r * 4 + j]; j++) acc += (double)taps[j * d + i] * src[r * 4 + j][i];
                ref[i] = (float)acc;
            }
            EXPECT_CLOSE(out + (size_t)r * ldo, ref, (size_t)d, 1e-6, "engram_taps row %d of %d", r, count);
        }
        free(out);
    }
    float *u = frand_array((size_t)d, 2.0f), *k = frand_array((size_t)d, 2.0f), *v = frand_array((size_t)d, 1.0f);
    float *b = frand_array((size_t)d, 1.0f), *un = malloc(sizeof(float) * d), *kn = malloc(sizeof(float) * d);
    float ur[128], kr[128];
    ref_rmsnorm(u, d, NULL, ur);
    ref_rmsnorm(k, d, NULL, kr);
    double dot = 0.0;
    for (int i = 0; i < d; i++) dot += (double)ur[i] * kr[i];
    double gate = sigmoid_d(dot / sqrt((double)d));
    for (int i = 0; i < d; i++) ref[i] = (float)(b[i] + gate * v[i]);
    be->ops.engram_gate(be, u, k, v, d, b, un, kn);
    EXPECT_CLOSE(b, ref, (size_t)d, 2e-6, "engram_gate");
    free(taps), free(rows), free(got), free(ref), free(u), free(k), free(v), free(b), free(un), free(kn);
}

static void test_lane_mean(void)
{
    COVER(ND_OP_LANE_MEAN);
    int T = 3, n = 4, d = 50, ld = 130;
    float *X = frand_array((size_t)T * n * d, 2.0f), *got = calloc((size_t)T * ld, sizeof(float));
    float *ref = calloc((size_t)T * ld, sizeof(float));
    for (int t = 0; t < T; t++)
        for (int k = 0; k < d; k++) {
            double acc = 0.0;
            for (int i = 0; i < n; i++) acc += X[(t * n + i) * d + k];
            ref[t * ld + k] = (float)(acc / n);
        }
    be->ops.lane_mean(be, X, T, n, d, got, (size_t)ld);
    EXPECT_CLOSE(got, ref, (size_t)T * ld, 1e-6, "lane_mean (and the gaps untouched)");
    free(X), free(got), free(ref);
}

static void test_head_pool(void)
{
    COVER(ND_OP_HEAD_POOL);
    int P = 3, d = 64, nc = 37;
    float *probes = frand_array((size_t)P * d, 1.0f), *cells = frand_array((size_t)nc * d, 3.0f);
    float *got = malloc(sizeof(float) * P * d), *ref = malloc(sizeof(float) * P * d), *wts = malloc(sizeof(float) * nc);
    for (int p = 0; p < P; p++) {
        double s[64], mx = -INFINITY, sum = 0.0;
        for (int c = 0; c < nc; c++) {
            double dot = 0.0;
            for (int i = 0; i < d; i++) dot += (double)cells[c * d + i] * probes[p * d + i];
            s[c] = dot / sqrt((double)d);
            if (s[c] > mx) mx = s[c];
        }
        for (int c = 0; c < nc; c++) sum += (s[c] = exp(s[c] - mx));
        for (int i = 0; i < d; i++) {
            double acc = 0.0;
            for (int c = 0; c < nc; c++) acc += s[c] / sum * cells[c * d + i];
            ref[p * d + i] = (float)acc;
        }
    }
    be->ops.head_pool(be, probes, P, d, cells, nc, got, wts);
    EXPECT_CLOSE(got, ref, (size_t)P * d, 2e-5, "head_pool");
    free(probes), free(cells), free(got), free(ref), free(wts);
}

/* Needle 3's Monarch MLP, written straight from SPEC-needle3 5.3 item 4 in
 * double precision: the Kronecker products as full N x N matrices. */
static void test_monarch_mlp(void)
{
    COVER(ND_OP_MONARCH_MLP);
    int T = 2, d = 40, A = 8, B = 8, N = A * B, R = 8;
    float *b = frand_array((size_t)T * d, 2.0f), *norm = frand_array((size_t)d, 0.3f);
    float *dv[5], *w[6];
    for (int i = 0; i < 5; i++) dv[i] = frand_array((size_t)N, 1.0f);
    for (int i = 0; i < 6; i++) w[i] = frand_array((size_t)(i % 2 ? B * B : A * A), 0.5f);
    float *cv = frand_array((size_t)d * R, 0.5f), *cu = frand_array((size_t)R * N, 0.5f);
    float p1[64], p2[64];
    for (int i = 0; i < N; i++) p1[i] = (float)((i * 5 + 3) % N), p2[i] = (float)((i * 7 + 1) % N);
    float *got = malloc(sizeof(float) * T * d), *ref = malloc(sizeof(float) * T * d), *z = malloc(sizeof(float) * (3 * N + R + 16));
    double K[3][64][64];
    for (int s = 0; s < 3; s++) /* K = Wa (x) Wb: K[i*B+j][k*B+l] = Wa[i][k] Wb[j][l] */
        for (int i = 0; i < A; i++)
            for (int j = 0; j < B; j++)
                for (int k = 0; k < A; k++)
                    for (int l = 0; l < B; l++) K[s][i * B + j][k * B + l] = (double)w[2 * s][i * A + k] * w[2 * s + 1][j * B + l];
    for (int t = 0; t < T; t++) {
        float xf[64];
        ref_rmsnorm(b + t * d, d, norm, xf);
        double x[64], y[64], sm[8], mx = -INFINITY, sum = 0.0;
        for (int i = 0; i < N; i++) x[i] = i < d ? xf[i] : 0.0;
        for (int r = 0; r < R; r++) {
            sm[r] = 0.0;
            for (int i = 0; i < d; i++) sm[r] += x[i] * cv[i * R + r];
            mx = fmax(mx, sm[r]);
        }
        for (int r = 0; r < R; r++) sum += (sm[r] = exp(sm[r] - mx));
        for (int s = 0; s < 3; s++) {
            double in[64];
            for (int i = 0; i < N; i++) {
                if (s == 0) in[i] = dv[0][i] * x[i];
                if (s == 1) {
                    double c = 1.0;
                    for (int r = 0; r < R; r++) c += sm[r] / sum * cu[r * N + i];
                    double u = dv[1][i] * c * x[i] + dv[2][i];
                    in[i] = u * sigmoid_d(u);
                }
                if (s == 2) in[i] = dv[3][i] * x[i];
            }
            for (int o = 0; o < N; o++) {
                y[o] = 0.0;
                for (int i = 0; i < N; i++) y[o] += in[i] * K[s][i][o];
            }
            for (int i = 0; i < N; i++) x[i] = s == 0 ? y[(int)p1[i]] : s == 1 ? y[(int)p2[i]] : y[i];
        }
        for (int i = 0; i < d; i++) ref[t * d + i] = (float)(b[t * d + i] + dv[4][i] * x[i]);
    }
    memcpy(got, b, sizeof(float) * T * d);
    nd_monarch_mlp_args a = {.T = T, .d = d, .hada_n = N, .a = A, .b_dim = B, .rank = R, .norm = norm, .d1 = dv[0],
                             .d2 = dv[1], .b2 = dv[2], .d3 = dv[3], .d4 = dv[4], .w1a = w[0], .w1b = w[1],
                             .w2a = w[2], .w2b = w[3], .w3a = w[4], .w3b = w[5], .cond_v = cv, .cond_u = cu,
                             .p1 = p1, .p2 = p2, .b = got, .z = z};
    be->ops.monarch_mlp(be, &a);
    EXPECT_CLOSE(got, ref, (size_t)T * d, 2e-5, "monarch_mlp");
    free(b), free(norm), free(cv), free(cu), free(got), free(ref), free(z);
    for (int i = 0; i < 5; i++) free(dv[i]);
    for (int i = 0; i < 6; i++) free(w[i]);
}

/* Needle 3's probe head pooling (SPEC-needle3 5.3 item 7) in double precision. */
static void test_probe_head(void)
{
    COVER(ND_OP_PROBE_HEAD);
    int T = 9, R = 4, d = 32, k = 3, q = 2, RK = R * k;
    float *cells = frand_array((size_t)T * R * d, 2.0f), *probes = frand_array((size_t)RK * d, 1.0f);
    float *gain = frand_array((size_t)RK, 1.0f), *query = frand_array((size_t)q * d, 1.0f);
    float *bias = frand_array((size_t)q * RK, 0.5f), *got = malloc(sizeof(float) * q * d), *ref = malloc(sizeof(float) * q * d);
    float *work = malloc(sizeof(float) * nd_probe_head_work_floats(T, R, k, q, d));
    double Rv[12][32];
    for (int r = 0; r < R; r++)
        for (int p = 0; p < k; p++) {
            double s[16], mx = -INFINITY, sum = 0.0, acc[32] = {0}, ss = 0.0;
            for (int t = 0; t < T; t++) {
                s[t] = 0.0;
                for (int i = 0; i < d; i++) s[t] += (double)cells[(t * R + r) * d + i] * probes[(r * k + p) * d + i];
                s[t] /= sqrt((double)d);
                mx = fmax(mx, s[t]);
            }
            for (int t = 0; t < T; t++) sum += (s[t] = exp(s[t] - mx));
            for (int t = 0; t < T; t++)
                for (int i = 0; i < d; i++) acc[i] += s[t] / sum * cells[(t * R + r) * d + i];
            for (int i = 0; i < d; i++) ss += acc[i] * acc[i];
            for (int i = 0; i < d; i++) Rv[r * k + p][i] = acc[i] / sqrt(ss / d + 1e-6) * gain[r * k + p];
        }
    for (int i = 0; i < q; i++) {
        double u[12], mx = -INFINITY, sum = 0.0;
        for (int j = 0; j < RK; j++) {
            u[j] = 0.0;
            for (int c = 0; c < d; c++) u[j] += Rv[j][c] * query[i * d + c];
            u[j] = u[j] / sqrt((double)d) + bias[i * RK + j];
            mx = fmax(mx, u[j]);
        }
        for (int j = 0; j < RK; j++) sum += (u[j] = exp(u[j] - mx));
        for (int c = 0; c < d; c++) {
            double acc = 0.0;
            for (int j = 0; j < RK; j++) acc += u[j] / sum * Rv[j][c];
            ref[i * d + c] = (float)acc;
        }
    }
    nd_probe_head_args a = {.T = T, .R = R, .d = d, .k = k, .q = q, .cells = cells, .probes = probes, .gain = gain,
                            .query = query, .row_bias = bias, .pooled = got, .work = work};
    be->ops.probe_head(be, &a);
    EXPECT_CLOSE(got, ref, (size_t)q * d, 2e-5, "probe_head");
    free(cells), free(probes), free(gain), free(query), free(bias), free(got), free(ref), free(work);
}

static void test_buffers(void)
{
    COVER(ND_OP_BUFFERS);
    size_t sizes[] = {1, 64, 1000, 1 << 20};
    for (int i = 0; i < 4; i++) {
        unsigned char *p = nd_backend_alloc(be, sizes[i]);
        CHECKF(p && ((uintptr_t)p & 63) == 0, "%s alloc %zu: %p", be->name, sizes[i], (void *)p);
        if (!p) continue;
        be->ops.zero(be, p, sizes[i]); /* the ops accept it */
        CHECK(p[0] == 0 && p[sizes[i] - 1] == 0);
        nd_backend_release(be, p);
    }
}

/* Every op of nd_op has a case above, and every slot of the table is filled. */
static void test_table_covers_every_op(void)
{
    for (int op = 0; op < ND_OP_COUNT; op++) {
        CHECKF(covered[op], "op %s has no test in test_backend_ops.c", nd_op_names[op]);
        CHECKF(nd_op_names[op] != NULL, "op %d has no name", op);
    }
    const nd_backend_ops *o = &be->ops;
    CHECKF(o->supports_op && o->alloc && o->free && o->matmul && o->matmul_work_floats && o->matmul_multi &&
               o->gather_rows && o->rmsnorm && o->rope && o->hadamard && o->attention && o->attention_work_floats &&
               o->sinkhorn && o->quantize_kv && o->act_quant && o->copy && o->zero && o->scale && o->axpy && o->sigmoid_gate &&
               o->hada_mlp && o->mhc_pre && o->mhc_mix && o->engram_taps && o->engram_gate && o->lane_mean &&
               o->head_pool && o->monarch_mlp && o->probe_head,
           "backend %s has an empty slot", be->name);
    for (int op = 0; op < ND_OP_COUNT; op++)
        if (!be->entry->ops->supports_op(be, (nd_op)op)) printf("# %s: %s runs on the CPU (supports_op = 0)\n", be->name, nd_op_names[op]);
}

/* ---------------------------------------------------------------- selection */

static void test_select_rules(void)
{
    const nd_backend_entry *b = NULL;
    const char *why = NULL;
    needle_error err = {0};
    CHECK(nd_backend_count() >= 1 && !strcmp(nd_backend_at(nd_backend_count() - 1)->name, "cpu"));
    CHECK(nd_backend_select("cpu", &b, &why, &err) == 0 && b == nd_backend_find("cpu") && why && *why);
    CHECK(nd_backend_select("no-such-backend", &b, &why, &err) == NEEDLE_EBACKEND && b == NULL);
    CHECKF(strstr(err.message, "no-such-backend") && strstr(err.message, "cpu"), "message: %s", err.message);
    const nd_backend_entry *cuda = nd_backend_find("cuda");
    const char *no = NULL;
    int rc = nd_backend_select("cuda", &b, &why, &err);
    if (cuda && nd_backend_usable(cuda, &no)) {
        CHECK(rc == 0 && b == cuda);
    } else { /* explicit: an error naming the reason, never a silent CPU */
        CHECKF(rc == NEEDLE_EBACKEND && b == NULL, "rc %d", rc);
        CHECKF(strstr(err.message, "cuda") && (!cuda || strstr(err.message, no)), "message: %s", err.message);
    }
    /* automatic: the first usable backend */
    unsetenv("NEEDLE_BACKEND");
    CHECK(nd_backend_select(NULL, &b, &why, &err) == 0 && why && *why);
    const nd_backend_entry *first = NULL;
    for (int i = 0; i < nd_backend_count() && !first; i++)
        if (nd_backend_usable(nd_backend_at(i), NULL)) first = nd_backend_at(i);
    CHECK(b == first);
    setenv("NEEDLE_BACKEND", "cpu", 1);
    CHECK(nd_backend_select(NULL, &b, &why, &err) == 0 && b == nd_backend_find("cpu"));
    unsetenv("NEEDLE_BACKEND");
}

/* The CPU backend splits a prefill chunk's row ops over its pool (the taps
 * of every token, an engram chunk's table rows, the A8 matmuls of matrices
 * with few rows by tokens as well as rows): 2 and 3 threads give the bits of
 * no pool at all. */
static void test_cpu_pool_splits_same_bits(void)
{
    const nd_backend_entry *cpu = nd_backend_find("cpu");
    needle_error err = {0};
    nd_backend *solo = NULL;
    CHECKF(nd_backend_create(cpu, NULL, &solo, &err) == 0, "cpu: %s", err.message);
    if (!solo) return;
    int d = 72, count = 40, T = 32, cols = 256;
    float *taps = frand_array((size_t)4 * d, 1.0f), *rows = frand_array((size_t)(count + 3) * d, 1.0f);
    const float **src = malloc(sizeof(float *) * (size_t)count * 4);
    for (int r = 0; r < count; r++)
        for (int j = 0; j < 4; j++) src[r * 4 + j] = r - j < 0 ? NULL : rows + (size_t)(r - j + 3) * d;
    int n_rows = 300, *idx = malloc(sizeof(int) * (size_t)n_rows);
    for (int i = 0; i < n_rows; i++) idx[i] = (i * 37) % 512;
    cq_owned table, maps[3];
    cq_make(&table, 512, 128, 2);
    int map_rows[3] = {4, 4, 16}; /* the mHC maps of 4 lanes: too few rows for a task per thread */
    for (int i = 0; i < 3; i++) cq_make(&maps[i], map_rows[i], cols, i == 2 ? 4 : 2);
    const nd_matrix *mats[3] = {&maps[0].m, &maps[1].m, &maps[2].m};
    float *x = frand_array((size_t)T * cols, 1.0f);
    size_t wf = 0;
    for (int i = 0; i < 3; i++) {
        size_t a = solo->ops.matmul_a8_work_floats(solo, mats[i], T) + 4096;
        wf = a > wf ? a : wf;
    }
    float *work = malloc(sizeof(float) * (wf + 16));
    float *t_ref = calloc((size_t)count * d, sizeof(float)), *g_ref = malloc(sizeof(float) * (size_t)n_rows * 128);
    float *m_ref = calloc((size_t)T * 24, sizeof(float));
    float *y_ref[3] = {m_ref, m_ref + (size_t)T * 4, m_ref + (size_t)T * 8};
    int ldy[3] = {4, 4, 16};
    solo->ops.engram_taps(solo, taps, 4, src, d, count, t_ref, (size_t)d);
    solo->ops.gather_rows(solo, &table.m, idx, n_rows, g_ref);
    solo->ops.matmul_a8(solo, 3, mats, x, T, cols, y_ref, ldy, work);
    for (int threads = 2; threads <= 3; threads++) {
        nd_threadpool *pool = NULL;
        nd_backend *pooled = NULL;
        CHECK(nd_threadpool_create(threads, &pool, &err) == 0);
        CHECKF(pool && nd_backend_create(cpu, pool, &pooled, &err) == 0, "cpu pooled: %s", err.message);
        if (!pooled) { nd_threadpool_free(pool); continue; }
        float *t = calloc((size_t)count * d, sizeof(float)), *g = malloc(sizeof(float) * (size_t)n_rows * 128);
        float *m = calloc((size_t)T * 24, sizeof(float));
        float *y[3] = {m, m + (size_t)T * 4, m + (size_t)T * 8};
        pooled->ops.engram_taps(pooled, taps, 4, src, d, count, t, (size_t)d);
        pooled->ops.gather_rows(pooled, &table.m, idx, n_rows, g);
        size_t pwf = 0;
        for (int i = 0; i < 3; i++) {
            size_t a = pooled->ops.matmul_a8_work_floats(pooled, mats[i], T);
            pwf = a > pwf ? a : pwf;
        }
        float *pwork = malloc(sizeof(float) * (pwf + 16));
        pooled->ops.matmul_a8(pooled, 3, mats, x, T, cols, y, ldy, pwork);
        CHECKF(!memcmp(t, t_ref, sizeof(float) * (size_t)count * d), "engram_taps: %d threads differ", threads);
        CHECKF(!memcmp(g, g_ref, sizeof(float) * (size_t)n_rows * 128), "gather_rows: %d threads differ", threads);
        CHECKF(!memcmp(m, m_ref, sizeof(float) * (size_t)T * 24), "matmul_a8 of 4+4+16 rows: %d threads differ",
               threads);
        free(t), free(g), free(m), free(pwork);
        nd_backend_free(pooled);
        nd_threadpool_free(pool);
    }
    free(taps), free(rows), free(src), free(idx), free(x), free(work), free(t_ref), free(g_ref), free(m_ref);
    cq_free(&table);
    for (int i = 0; i < 3; i++) cq_free(&maps[i]);
    nd_backend_free(solo);
}

int main(void)
{
    /* every op of a device table on the device, not only the big ones */
    setenv("NEEDLE_CUDA_OFFLOAD", "all", 1);
    RUN(test_select_rules);
    RUN(test_cpu_pool_splits_same_bits);
    for (int i = 0; i < nd_backend_count(); i++) {
        const nd_backend_entry *e = nd_backend_at(i);
        const char *no = NULL;
        if (!nd_backend_usable(e, &no)) {
            printf("# %s NOT RUN (not counted as a pass): %s\n", e->name, no);
            continue;
        }
        needle_error err = {0};
        if (nd_backend_create(e, NULL, &be, &err)) {
            CHECKF(0, "%s: %s", e->name, err.message);
            continue;
        }
        printf("# backend %s against the reference\n", be->name);
        memset(covered, 0, sizeof covered);
        RUN(test_matmul);
        RUN(test_matmul_multi);
        RUN(test_matmul_a8);
        RUN(test_gather_rows);
        RUN(test_rmsnorm);
        RUN(test_rope);
        RUN(test_hadamard);
        RUN(test_sinkhorn);
        RUN(test_quantize_kv);
        RUN(test_act_quant);
        RUN(test_attention);
        RUN(test_vector_ops);
        RUN(test_hada_mlp);
        RUN(test_mhc);
        RUN(test_engram);
        RUN(test_lane_mean);
        RUN(test_head_pool);
        RUN(test_monarch_mlp);
        RUN(test_probe_head);
        RUN(test_buffers);
        RUN(test_table_covers_every_op);
        nd_backend_free(be);
    }
    return check_summary();
}
