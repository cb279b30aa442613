/* test_cq_int.c - the integer CQ kernels (A8 activations) against the
 * portable kernel and against a plain float reference, every width, odd
 * shapes; the A8 quantiser's rounding rule. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_cq_int.h"
#include "check.h"
#include "core/cpu_features.h"
#include "core/fp16.h"
#include "quant/act_quant.h"
#include "quant/cq.h"

static uint32_t rng = 12345;
static float frand(void) { return (float)((rng = rng * 1103515245u + 12345u) >> 8 & 0xffff) / 32768.0f - 1.0f; }

typedef struct cq_owned {
    nd_matrix m;
    uint8_t *idx, *norms;
    float cb[16];
} cq_owned;

/* A CQ matrix quantised from random floats with the exporter's codebooks. */
static void make_cq(cq_owned *o, int rows, int cols, int bits)
{
    int cols_pad = nd_cq_cols_pad(cols), groups = cols_pad / 128;
    size_t rb = nd_cq_row_bytes(cols, bits);
    o->idx = calloc((size_t)rows * rb + 16, 1);
    o->norms = malloc((size_t)rows * groups * 2);
    float *row = malloc(sizeof(float) * (size_t)cols);
    uint16_t *nh = malloc(sizeof(uint16_t) * (size_t)groups);
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < cols; c++) row[c] = frand() * 0.1f;
        if (nd_cq_quantize_row(row, cols, bits, nd_cq_codebooks, o->idx + (size_t)r * rb, nh) != 0) abort();
        for (int g = 0; g < groups; g++)
            o->norms[(r * groups + g) * 2] = (uint8_t)nh[g], o->norms[(r * groups + g) * 2 + 1] = (uint8_t)(nh[g] >> 8);
    }
    nd_cq_codebook_by_code(bits, nd_cq_codebooks, o->cb);
    nd_matrix m = {.kind = ND_MAT_CQ, .rows = rows, .cols = cols, .cq_bits = bits, .cols_pad = cols_pad,
                   .cq_idx = o->idx, .cq_norms = o->norms, .codebook = o->cb};
    o->m = m;
    free(row);
    free(nh);
}

static void free_cq(cq_owned *o)
{
    free(o->idx);
    free(o->norms);
}

/* Run kernel k on T tokens x [T, cols] (A8-quantised inside), y [T, rows]. */
static void run_kernel(const nd_cq_int_kernel *k, const nd_matrix *w, const float *x, int T, float *y, int r0, int r1)
{
    int16_t cbq[16], lo[16];
    float cbs = nd_cq_int_codebook(w, cbq, lo);
    int16_t *z = malloc(sizeof(int16_t) * (size_t)T * w->cols_pad);
    int8_t *c = malloc((size_t)w->cols);
    float *ts = malloc(sizeof(float) * (size_t)T);
    for (int t = 0; t < T; t++) {
        float s = nd_act_quant_i8(x + (size_t)t * w->cols, w->cols, c);
        nd_cq_int_rotate(c, w->cols, w->cols_pad, z + (size_t)t * w->cols_pad);
        if (k->order_z) k->order_z(z + (size_t)t * w->cols_pad, w->cols_pad);
        ts[t] = s * cbs / sqrtf(128.0f);
    }
    nd_cq_int_args a = {.w = w, .cbq = cbq, .cbq_lo = lo, .z = z, .ldz = w->cols_pad, .T = T, .r0 = r0, .r1 = r1,
                        .tscale = ts, .y = y, .ldy = w->rows};
    k->gemm(&a);
    free(z);
    free(c);
    free(ts);
}

/* The float reference: dequantised W times the fake-quantised x, in double. */
static void reference(const nd_matrix *w, const float *x, int T, double *y, double *mag)
{
    float *row = malloc(sizeof(float) * (size_t)w->cols), *xq = malloc(sizeof(float) * (size_t)w->cols);
    size_t rb = nd_cq_int_row_bytes(w);
    int groups = w->cols_pad / 128;
    for (int t = 0; t < T; t++) {
        memcpy(xq, x + (size_t)t * w->cols, sizeof(float) * (size_t)w->cols);
        nd_act_fake_quant(xq, w->cols, NULL);
        for (int r = 0; r < w->rows; r++) {
            nd_cq_dequant_row(w->cq_idx + (size_t)r * rb, w->cq_norms + (size_t)r * groups * 2, w->cols,
                              nd_cq_int_sb(w), w->codebook, row);
            double s = 0, m = 0;
            for (int i = 0; i < w->cols; i++) s += (double)row[i] * xq[i], m += fabs((double)row[i] * xq[i]);
            y[(size_t)t * w->rows + r] = s;
            mag[(size_t)t * w->rows + r] = m;
        }
    }
    free(row);
    free(xq);
}

static void test_kernels_match(void)
{
    const nd_cq_int_kernel *ks[4];
    int nk = nd_cpu_cq_int_kernels(ks, 4);
    CHECK(nk >= 1 && !strcmp(ks[0]->name, "portable"));
    /* the integer kernel follows the run-time kernel path (NEEDLE_ISA or the best the CPU runs) */
    nd_cpu_isa isa = ND_ISA_PORTABLE;
    const char *why = NULL;
    CHECK(nd_cpu_isa_choose(&isa, &why) == 0);
    nd_cpu_features f;
    nd_cpu_features_detect(&f);
    const char *want = isa == ND_ISA_AVX512 ? "avx512vnni" : isa == ND_ISA_AVX2 ? "avx2" : "portable";
#if defined(__aarch64__)
    /* one path (NEON); the dot-product extension picks the kernel, and both are there to compare */
    want = f.neon_dotprod ? "neon_dotprod" : "neon";
    CHECKF(nk == (f.neon_dotprod ? 3 : 2), "%d integer kernels on AArch64 (dotprod %d)", nk, f.neon_dotprod);
#elif defined(__wasm_simd128__)
    want = "simd128"; /* the WebAssembly build (make test-wasm runs this test in Node) */
    CHECK(nk == 2);
#endif
    CHECKF(!strcmp(nd_cpu_cq_int_kernel()->name, want), "path %s chose the %s integer kernel, expected %s",
           nd_cpu_isa_name(isa), nd_cpu_cq_int_kernel()->name, want);
    if (!getenv("NEEDLE_ISA")) CHECK(nd_cpu_cq_int_kernel() == ks[nk - 1]); /* unforced: the best usable */
    printf("        kernels here:");
    for (int i = 0; i < nk; i++) printf(" %s", ks[i]->name);
    printf(" (chosen %s)\n", nd_cpu_cq_int_kernel()->name);
    const int bits[] = {2, 3, 4, ND_CQ_TERNARY};
    /* 40 x 1100: more rows and groups than the dotprod kernel's blocks (32 rows, 8 groups) */
    const int shapes[][2] = {{1, 1}, {3, 100}, {5, 128}, {7, 129}, {17, 300}, {33, 512}, {2, 1000}, {40, 1100}};
    const int Ts[] = {1, 2, 3, 4, 5, 9};
    for (size_t b = 0; b < 4; b++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
                int rows = shapes[s][0], cols = shapes[s][1], T = Ts[ti];
                cq_owned o;
                make_cq(&o, rows, cols, bits[b]);
                float *x = malloc(sizeof(float) * (size_t)T * cols);
                for (int i = 0; i < T * cols; i++) x[i] = frand() * (1 + (i % 7));
                if (T == 3) /* an extreme token: constant codes put 16256 in one z */
                    for (int i = 0; i < cols; i++) x[cols + i] = 2.5f;
                double *ref = malloc(sizeof(double) * (size_t)T * rows), *mag = malloc(sizeof(double) * (size_t)T * rows);
                reference(&o.m, x, T, ref, mag);
                float *y0 = malloc(sizeof(float) * (size_t)T * rows), *y1 = malloc(sizeof(float) * (size_t)T * rows);
                run_kernel(ks[0], &o.m, x, T, y0, 0, rows);
                for (int i = 0; i < T * rows; i++) {
                    /* the two-term int16 codebook is exact to ~1e-9: float rounding only */
                    double tol = 2e-6 * mag[i] + 1e-7;
                    CHECKF(fabs(y0[i] - ref[i]) <= tol, "portable bits %d %dx%d T %d i %d: %g vs %g", bits[b], rows, cols,
                           T, i, y0[i], ref[i]);
                }
                for (int k = 1; k < nk; k++) {
                    for (int i = 0; i < T * rows; i++) y1[i] = NAN;
                    /* rows split in two calls, as the threads do */
                    run_kernel(ks[k], &o.m, x, T, y1, 0, rows / 2);
                    run_kernel(ks[k], &o.m, x, T, y1, rows / 2, rows);
                    /* the NEON and SIMD128 kernels finish each group as the portable one does: its bits */
                    int exact = !strcmp(ks[k]->name, "neon") || !strcmp(ks[k]->name, "neon_dotprod") ||
                                !strcmp(ks[k]->name, "simd128");
                    for (int i = 0; i < T * rows; i++)
                        if (exact)
                            CHECKF(!memcmp(&y1[i], &y0[i], sizeof(float)), "%s bits %d %dx%d T %d i %d: %.9g vs %.9g (not bit-identical)",
                                   ks[k]->name, bits[b], rows, cols, T, i, y1[i], y0[i]);
                        else
                            CHECKF(fabs(y1[i] - y0[i]) <= 1e-5 * mag[i] + 1e-6, "%s bits %d %dx%d T %d i %d: %g vs %g",
                                   ks[k]->name, bits[b], rows, cols, T, i, y1[i], y0[i]);
                }
                free(x), free(ref), free(mag), free(y0), free(y1);
                free_cq(&o);
            }
}

/* Prefill is the same kernel on a block of tokens: every token's result must
 * be bit for bit what it gets alone (decode) or in any other block. */
static void test_batch_equals_token_by_token(void)
{
    const nd_cq_int_kernel *ks[4];
    int nk = nd_cpu_cq_int_kernels(ks, 4);
    const int bits[] = {2, 3, 4, ND_CQ_TERNARY};
    const int shapes[][2] = {{5, 128}, {19, 300}, {40, 512}};
    const int T = 37;
    for (int k = 0; k < nk; k++)
        for (size_t b = 0; b < 4; b++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                int rows = shapes[s][0], cols = shapes[s][1];
                cq_owned o;
                make_cq(&o, rows, cols, bits[b]);
                float *x = malloc(sizeof(float) * (size_t)T * cols);
                for (int i = 0; i < T * cols; i++) x[i] = frand() * (1 + (i % 5));
                float *yb = malloc(sizeof(float) * (size_t)T * rows), *y1 = malloc(sizeof(float) * (size_t)rows);
                float *yc = malloc(sizeof(float) * (size_t)T * rows);
                run_kernel(ks[k], &o.m, x, T, yb, 0, rows);
                /* chunks of 3 (every remainder path of the micro-kernels), rows split unevenly */
                for (int t0 = 0; t0 < T; t0 += 3) {
                    int n = T - t0 < 3 ? T - t0 : 3;
                    float *tmp = malloc(sizeof(float) * (size_t)n * rows);
                    run_kernel(ks[k], &o.m, x + (size_t)t0 * cols, n, tmp, 0, rows / 3);
                    run_kernel(ks[k], &o.m, x + (size_t)t0 * cols, n, tmp, rows / 3, rows);
                    memcpy(yc + (size_t)t0 * rows, tmp, sizeof(float) * (size_t)n * rows);
                    free(tmp);
                }
                int same = 1, same_c = !memcmp(yb, yc, sizeof(float) * (size_t)T * rows);
                for (int t = 0; t < T; t++) {
                    run_kernel(ks[k], &o.m, x + (size_t)t * cols, 1, y1, 0, rows);
                    if (memcmp(y1, yb + (size_t)t * rows, sizeof(float) * (size_t)rows)) same = 0;
                }
                CHECKF(same && same_c, "%s bits %d %dx%d: a token's result depends on its batch (alone %d, chunks %d)",
                       ks[k]->name, bits[b], rows, cols, same, same_c);
                free(x), free(yb), free(y1), free(yc);
                free_cq(&o);
            }
}

static void test_rotate_is_hadamard(void)
{
    int8_t c[200];
    for (int i = 0; i < 200; i++) c[i] = (int8_t)(i % 2 ? -127 : (i * 37) % 255 - 127);
    int16_t z[256];
    nd_cq_int_rotate(c, 200, 256, z);
    for (int g = 0; g < 2; g++)
        for (int i = 0; i < 128; i++) {
            int s = 0;
            for (int j = 0; j < 128; j++) {
                int col = g * 128 + j, v = col < 200 ? c[col] : 0;
                s += (__builtin_popcount((unsigned)(i & j)) & 1) ? -v : v; /* Sylvester H[i][j] */
            }
            CHECKF(z[g * 128 + i] == s, "group %d i %d: %d vs %d", g, i, z[g * 128 + i], s);
        }
}

/* A kernel that lays the rotated activations out its own way moves every
 * value exactly once: the AVX-512 kernel's nibble order, z'[32n + k] = z[4k + n]. */
static void test_z_order(void)
{
    const nd_cq_int_kernel *ks[4];
    int nk = nd_cpu_cq_int_kernels(ks, 4), ordered = 0;
    for (int k = 0; k < nk; k++) {
        if (!ks[k]->order_z) continue;
        ordered++;
        int16_t z[384], o[384];
        for (int i = 0; i < 384; i++) z[i] = (int16_t)(i * 97 - 16000);
        memcpy(o, z, sizeof z);
        ks[k]->order_z(o, 384);
        int bad = 0;
        for (int g = 0; g < 384; g += 128)
            for (int n = 0; n < 4; n++)
                for (int j = 0; j < 32; j++) bad += o[g + 32 * n + j] != z[g + 4 * j + n];
        CHECKF(!bad, "%s: %d values out of the nibble order", ks[k]->name, bad);
    }
    printf("        kernels with their own activation order: %d\n", ordered);
}

static void test_act_quant_rule(void)
{
    /* ties round half to even; zero vector scale 1; division, not reciprocal */
    const float x[8] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f};
    const int8_t want[8] = {127, 0, 2, 2, 0, -2, -2, 126};
    int8_t c[8];
    CHECK(nd_act_quant_i8(x, 8, c) == 1.0f);
    CHECK(!memcmp(c, want, 8));
    const float zero[4] = {0};
    CHECK(nd_act_quant_i8(zero, 4, c) == 1.0f && c[0] == 0 && c[3] == 0);
    float y[3] = {1e-30f, -3e-31f, 0.0f};
    float s = nd_act_fake_quant(y, 3, c);
    CHECK(s == 1e-30f / 127.0f && c[0] == 127 && c[1] == -38);
}

int main(void)
{
    RUN(test_act_quant_rule);
    RUN(test_rotate_is_hadamard);
    RUN(test_z_order);
    RUN(test_kernels_match);
    RUN(test_batch_equals_token_by_token);
    return check_summary();
}
