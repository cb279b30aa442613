/* test_backend_ops.c - every op of every backend built in and present,
 * against the CPU op on the same inputs; and the backend selection rules.
 *
 * Tolerances (max |backend - cpu| over max(1, max |cpu|), i.e. relative to
 * the output's scale):
 *   matmul F32: 2e-5 (cuBLAS sums in another order than the CPU dots)
 *   matmul CQ:  5e-5 (the GPU dequantises and runs sgemm; the CPU rotates x
 *               and looks codes up: the same products in another order)
 *   gather_rows, rmsnorm, rope, hadamard: 1e-6 (same arithmetic, same order)
 *   attention:  2e-5 (float and int8 caches); sinkhorn: 1e-5 (expf/logf ulps)
 *   quantize_kv: codes equal, scales within 1e-6 relative.
 * A backend that is compiled in but has no device here (CUDA on a machine
 * without a GPU) is reported as NOT RUN and counts neither as pass nor fail. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_backend.h"
#include "check.h"
#include "quant/cq.h"

static const nd_backend *be; /* the backend under test */

/* ---------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float frand(void) /* uniform in [-1, 1) */
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f;
}
static float *frand_array(size_t n, float scale)
{
    float *p = malloc(n * sizeof(float));
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

/* A CQ matrix made the way the exporter makes one, owning its buffers. */
typedef struct cq_owned {
    nd_matrix m;
    uint8_t *idx, *norms;
    float cb[16];
} cq_owned;

static void cq_make(cq_owned *c, int rows, int cols, int bits)
{
    memset(c, 0, sizeof *c);
    int sb = nd_cq_storage_bits(bits), pad = nd_cq_cols_pad(cols), groups = pad / ND_CQ_GROUP;
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
    (void)sb;
    c->m = (nd_matrix){.kind = ND_MAT_CQ, .rows = rows, .cols = cols, .cq_bits = bits, .cols_pad = pad,
                       .cq_idx = c->idx, .cq_norms = c->norms, .codebook = c->cb};
}
static void cq_free(cq_owned *c) { free(c->idx), free(c->norms); }

/* y = W x through a backend, with a generous scratch for its host paths. */
static void run_matmul(const nd_backend *b, const nd_matrix *w, const float *x, int T, int ldx, float *y, int ldy)
{
    size_t wf = b->matmul_work_floats(w, T, 1);
    float *work = malloc((wf + 16) * sizeof(float));
    b->matmul(NULL, w, x, T, ldx, y, ldy, work);
    free(work);
}

static void check_matmul(const nd_matrix *w, int T, double tol, const char *what)
{
    int ldx = w->cols + 3, ldy = w->rows + 5;
    float *x = frand_array((size_t)T * ldx, 1.0f);
    float *y = calloc((size_t)T * ldy, sizeof(float)), *ref = calloc((size_t)T * ldy, sizeof(float));
    run_matmul(nd_backend_cpu(), w, x, T, ldx, ref, ldy);
    run_matmul(be, w, x, T, ldx, y, ldy);
    double e = rel_err(y, ref, (size_t)T * ldy); /* the gaps between rows must stay untouched (0) */
    CHECKF(e <= tol, "%s %s rows %d cols %d T %d: rel err %.3g > %.3g", be->name, what, w->rows, w->cols, T, e, tol);
    free(x), free(y), free(ref);
}

/* ---------------------------------------------------------------- ops */

static void test_table_complete(void)
{
    const nd_backend *all[8];
    int n = nd_backend_list(all, 8);
    CHECK(n >= 1 && all[0] == nd_backend_cpu());
    for (int i = 0; i < n; i++) {
        const nd_backend *b = all[i];
        CHECKF(b->name && b->description && b->matmul && b->matmul_work_floats && b->matmul_multi && b->gather_rows &&
                   b->rmsnorm && b->rope && b->hadamard && b->attention && b->attention_work_floats && b->sinkhorn &&
                   b->quantize_kv,
               "backend %s has a missing op", b->name);
    }
}

static void test_matmul_f32(void)
{
    int shapes[][2] = {{300, 200}, {8192, 128}, {7, 513}, {512, 2048}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        float *wf = frand_array((size_t)shapes[s][0] * shapes[s][1], 0.05f);
        nd_matrix w = {.kind = ND_MAT_F32, .rows = shapes[s][0], .cols = shapes[s][1], .f32 = wf};
        int Ts[] = {1, 2, 17};
        for (int i = 0; i < 3; i++) check_matmul(&w, Ts[i], 2e-5, "f32");
        free(wf);
    }
}

static void test_matmul_cq(void)
{
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
}

/* The device keeps weights by address: new contents at the same address
 * (a model freed and another mapped there) must not be served stale. */
static void test_matmul_weights_change_in_place(void)
{
    int rows = 256, cols = 256;
    float *wf = frand_array((size_t)rows * cols, 0.05f);
    nd_matrix w = {.kind = ND_MAT_F32, .rows = rows, .cols = cols, .f32 = wf};
    check_matmul(&w, 4, 2e-5, "f32 before");
    for (size_t i = 0; i < (size_t)rows * cols; i++) wf[i] = frand() * 0.05f;
    check_matmul(&w, 4, 2e-5, "f32 after rewrite in place");
    free(wf);
}

static void test_matmul_multi(void)
{
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
        size_t a = be->matmul_work_floats(mats[i], T, 1), b = nd_cpu_matmul_work_floats(mats[i], T, 1);
        wf = a > wf ? a : wf, wf = b > wf ? b : wf;
        y[i] = calloc((size_t)T * ldy[i], sizeof(float));
        ref[i] = calloc((size_t)T * ldy[i], sizeof(float));
    }
    float *work = malloc((wf + 16) * sizeof(float));
    nd_cpu_matmul_multi(NULL, 3, mats, x, T, ldx, ref, ldy, work);
    be->matmul_multi(NULL, 3, mats, x, T, ldx, y, ldy, work);
    for (int i = 0; i < 3; i++) {
        double e = rel_err(y[i], ref[i], (size_t)T * ldy[i]);
        CHECKF(e <= 5e-5, "%s matmul_multi matrix %d: rel err %.3g", be->name, i, e);
        free(y[i]), free(ref[i]);
    }
    free(work), free(x), free(w0f), free(w1f);
    cq_free(&c);
}

static void test_gather_rows(void)
{
    int rows[] = {0, 5, 4095, 17, 17, 2048};
    int n = (int)(sizeof rows / sizeof rows[0]), cols = 200;
    float *wf = frand_array((size_t)4096 * cols, 1.0f);
    nd_matrix w = {.kind = ND_MAT_F32, .rows = 4096, .cols = cols, .f32 = wf};
    float *y = malloc(sizeof(float) * (size_t)n * cols), *ref = malloc(sizeof(float) * (size_t)n * cols);
    nd_cpu_gather_rows(&w, rows, n, ref);
    be->gather_rows(&w, rows, n, y);
    CHECKF(rel_err(y, ref, (size_t)n * cols) <= 1e-6, "%s gather f32", be->name);
    int bits[] = {2, 3, 4, ND_CQ_TERNARY};
    for (int b = 0; b < 4; b++) {
        cq_owned c;
        cq_make(&c, 4096, cols, bits[b]);
        nd_cpu_gather_rows(&c.m, rows, n, ref);
        be->gather_rows(&c.m, rows, n, y);
        double e = rel_err(y, ref, (size_t)n * cols);
        CHECKF(e <= 1e-6, "%s gather CQ %s: rel err %.3g", be->name, nd_cq_bits_name(bits[b]), e);
        cq_free(&c);
    }
    free(wf), free(y), free(ref);
}

static void test_rmsnorm(void)
{
    int sizes[] = {64, 512, 2048, 333};
    for (int s = 0; s < 4; s++) {
        int n = sizes[s];
        float *x = frand_array((size_t)n, 3.0f), *sc = frand_array((size_t)n, 0.5f);
        float *y = malloc(sizeof(float) * n), *ref = malloc(sizeof(float) * n);
        for (int with = 0; with < 2; with++) {
            nd_cpu_rmsnorm(x, n, with ? sc : NULL, ref);
            be->rmsnorm(x, n, with ? sc : NULL, y);
            double e = rel_err(y, ref, (size_t)n);
            CHECKF(e <= 1e-6, "%s rmsnorm n=%d scale=%d: %.3g", be->name, n, with, e);
        }
        memcpy(y, x, sizeof(float) * n); /* in place (out == x) */
        be->rmsnorm(y, n, sc, y);
        nd_cpu_rmsnorm(x, n, sc, ref);
        CHECKF(rel_err(y, ref, (size_t)n) <= 1e-6, "%s rmsnorm in place", be->name);
        free(x), free(sc), free(y), free(ref);
    }
}

static void test_rope(void)
{
    int heads = 8, hd = 64;
    float *x = frand_array((size_t)heads * hd, 2.0f), *cs = malloc(sizeof(float) * hd);
    for (int i = 0; i < hd / 2; i++) {
        float ang = 37.0f * powf(100000.0f, -2.0f * (float)i / (float)hd);
        cs[i] = cosf(ang), cs[hd / 2 + i] = sinf(ang);
    }
    float *y = malloc(sizeof(float) * heads * hd);
    memcpy(y, x, sizeof(float) * heads * hd);
    nd_cpu_rope(x, heads, hd, cs);
    be->rope(y, heads, hd, cs);
    CHECKF(rel_err(y, x, (size_t)heads * hd) <= 1e-6, "%s rope", be->name);
    free(x), free(cs), free(y);
}

static void test_hadamard(void)
{
    for (int n = 2; n <= 8192; n *= 4) {
        float *x = frand_array((size_t)n, 1.0f), *y = malloc(sizeof(float) * n);
        memcpy(y, x, sizeof(float) * n);
        nd_cpu_hadamard(x, n);
        be->hadamard(y, n);
        double e = rel_err(y, x, (size_t)n);
        CHECKF(e <= 1e-6, "%s hadamard n=%d: %.3g", be->name, n, e);
        free(x), free(y);
    }
}

static void test_sinkhorn(void)
{
    for (int n = 2; n <= 8; n *= 2) {
        float *m = frand_array((size_t)n * n, 4.0f), *y = malloc(sizeof(float) * n * n);
        memcpy(y, m, sizeof(float) * n * n);
        nd_cpu_sinkhorn(m, n, 20);
        be->sinkhorn(y, n, 20);
        double e = rel_err(y, m, (size_t)n * n);
        CHECKF(e <= 1e-5, "%s sinkhorn n=%d: %.3g", be->name, n, e);
        free(m), free(y);
    }
}

static void test_quantize_kv(void)
{
    int n = 256;
    float *x = frand_array((size_t)n, 3.0f);
    x[5] = 0.0f;
    for (int i = 64; i < 96; i++) x[i] = 0.0f; /* an all-zero group: scale 0 */
    int8_t q[256], qr[256];
    float s[8], sr[8];
    nd_cpu_quantize_kv(x, n, qr, sr);
    be->quantize_kv(x, n, q, s);
    CHECKF(!memcmp(q, qr, sizeof q), "%s quantize_kv codes differ", be->name);
    CHECKF(rel_err(s, sr, 8) <= 1e-6, "%s quantize_kv scales", be->name);
    free(x);
}

/* One attention case: a cache of `slots` (some empty), T chunk queries. */
static void attention_case(int T, int pos0, int window, int sinks, int kv_bits)
{
    int H = 8, KVH = 4, hd = 64, KV = KVH * hd, slots = 12, groups = KV / ND_KV_GROUP;
    float *q = frand_array((size_t)T * H * hd, 1.0f), *kc = frand_array((size_t)T * KV, 1.0f);
    float *vc = frand_array((size_t)T * KV, 1.0f), *kf = frand_array((size_t)slots * KV, 1.0f);
    float *vf = frand_array((size_t)slots * KV, 1.0f);
    int8_t *k8 = malloc((size_t)slots * KV), *v8 = malloc((size_t)slots * KV);
    float *ks = malloc(sizeof(float) * slots * groups), *vs = malloc(sizeof(float) * slots * groups);
    for (int s = 0; s < slots; s++) {
        nd_cpu_quantize_kv(kf + (size_t)s * KV, KV, k8 + (size_t)s * KV, ks + (size_t)s * groups);
        nd_cpu_quantize_kv(vf + (size_t)s * KV, KV, v8 + (size_t)s * KV, vs + (size_t)s * groups);
    }
    int pos[12];
    for (int s = 0; s < slots; s++) pos[s] = s < pos0 ? (s * 7) % pos0 : -1; /* shuffled, the rest empty */
    float *out = calloc((size_t)T * H * hd, sizeof(float)), *ref = calloc((size_t)T * H * hd, sizeof(float));
    nd_attn_args a = {.T = T, .pos0 = pos0, .num_heads = H, .num_kv_heads = KVH, .head_dim = hd,
                      .window = window, .sinks = sinks, .q = q, .k_chunk = kc, .v_chunk = vc, .kv_bits = kv_bits,
                      .k_cache = kf, .v_cache = vf, .k_cache8 = k8, .v_cache8 = v8, .k_scale = ks, .v_scale = vs,
                      .cache_pos = pos, .cache_slots = slots, .out = ref};
    size_t wf = nd_cpu_attention_work_floats(&a, 1), wb = be->attention_work_floats(&a, 1);
    float *work = malloc(sizeof(float) * ((wf > wb ? wf : wb) + 16));
    nd_cpu_attention(NULL, &a, work);
    a.out = out;
    be->attention(NULL, &a, work);
    double e = rel_err(out, ref, (size_t)T * H * hd);
    CHECKF(e <= 2e-5, "%s attention T=%d pos0=%d window=%d sinks=%d kv_bits=%d: %.3g", be->name, T, pos0, window,
           sinks, kv_bits, e);
    free(q), free(kc), free(vc), free(kf), free(vf), free(k8), free(v8), free(ks), free(vs), free(out), free(ref),
        free(work);
}

static void test_attention(void)
{
    for (int bits = 8; bits <= 32; bits += 24) {
        attention_case(5, 9, 1 << 30, 0, bits); /* full causal */
        attention_case(5, 9, 6, 2, bits);       /* window 6, two sinks */
        attention_case(1, 10, 4, 0, bits);      /* one decode step */
        attention_case(7, 0, 3, 1, bits);       /* no cache yet */
    }
}

/* ---------------------------------------------------------------- selection */

static void test_select_rules(void)
{
    const nd_backend *b = NULL;
    const char *why = NULL;
    needle_error err = {0};
    CHECK(nd_backend_select("cpu", &b, &why, &err) == 0 && b == nd_backend_cpu() && why && *why);
    CHECK(nd_backend_select("no-such-backend", &b, &why, &err) == NEEDLE_EBACKEND && b == NULL);
    int rc = nd_backend_select("cuda", &b, &why, &err);
    if (nd_backend_cuda()) {
        CHECK(rc == 0 && b == nd_backend_cuda());
    } else { /* explicit: an error naming the reason, never a silent CPU */
        CHECKF(rc == NEEDLE_EBACKEND && b == NULL, "rc %d", rc);
        CHECKF(strstr(err.message, "cuda") && strstr(err.message, nd_backend_cuda_unavailable_reason()), "message: %s",
               err.message);
    }
    /* automatic: CUDA when usable, else the CPU */
    unsetenv("NEEDLE_BACKEND");
    CHECK(nd_backend_select(NULL, &b, &why, &err) == 0 && why && *why);
    CHECK(b == (nd_backend_cuda() ? nd_backend_cuda() : nd_backend_cpu()));
    setenv("NEEDLE_BACKEND", "cuda", 1);
    rc = nd_backend_select(NULL, &b, &why, &err);
    CHECK(nd_backend_cuda() ? rc == 0 : rc == NEEDLE_EBACKEND);
    unsetenv("NEEDLE_BACKEND");
    char line[300];
    CHECK(nd_backend_cuda_describe(line, sizeof line) > 0 && line[0]);
}

int main(void)
{
    /* every op of the CUDA table on the device, not only the big ones */
    setenv("NEEDLE_CUDA_OFFLOAD", "all", 1);
    RUN(test_table_complete);
    RUN(test_select_rules);
    const nd_backend *all[8];
    int n = nd_backend_list(all, 8), others = 0;
    for (int i = 0; i < n; i++) {
        if (all[i] == nd_backend_cpu()) continue; /* the reference itself: tests/test_ops.c */
        be = all[i];
        others++;
        char line[300];
        if (!strcmp(be->name, "cuda")) nd_backend_cuda_describe(line, sizeof line), printf("# cuda: %s\n", line);
        printf("# backend %s against the CPU\n", be->name);
        RUN(test_matmul_f32);
        RUN(test_matmul_cq);
        RUN(test_matmul_weights_change_in_place);
        RUN(test_matmul_multi);
        RUN(test_gather_rows);
        RUN(test_rmsnorm);
        RUN(test_rope);
        RUN(test_hadamard);
        RUN(test_sinkhorn);
        RUN(test_quantize_kv);
        RUN(test_attention);
    }
    if (!nd_backend_cuda())
        printf("# CUDA NOT RUN (not counted as a pass): %s\n", nd_backend_cuda_unavailable_reason());
    if (!others) printf("# no backend besides the CPU is present: no op comparison ran\n");
    return check_summary();
}
