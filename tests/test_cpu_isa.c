/* test_cpu_isa.c - the run-time choice of kernel path (issue 21).
 *
 * Every kernel table this binary carries and this CPU runs is held against
 * the baseline table on the same random inputs (F32 and CQ matmuls at decode
 * and prefill sizes, attention, the norm and the MLPs), and each is checked to
 * give the same bits for 1, 2 and 3 threads.  When NEEDLE_ISA is set (make
 * test-isa runs the whole suite once per path), the table in use must be the
 * one forced. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "check.h"
#include "core/fp16.h"
#include "core/threadpool.h"
#include "quant/act_quant.h"
#include "quant/hadamard.h"

static uint32_t rng = 12345u;
static float frand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xFFFFFF) / 8388608.0f - 1.0f;
}
static void fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = frand();
}

static double rel_diff(const float *a, const float *b, size_t n)
{
    double d = 0, s = 1e-6;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
        s = fmax(s, fabs((double)b[i]));
    }
    return d / s;
}

typedef struct cq_owned {
    nd_matrix m;
    uint8_t *idx, *norms;
    float cb[16];
} cq_owned;

static void make_cq(cq_owned *o, int rows, int cols, int bits)
{
    int cols_pad = (cols + 127) / 128 * 128, groups = cols_pad / 128;
    size_t row_bytes = (size_t)cols_pad * (size_t)bits / 8;
    o->idx = malloc((size_t)rows * row_bytes);
    o->norms = malloc((size_t)rows * (size_t)groups * 2);
    for (size_t i = 0; i < (size_t)rows * row_bytes; i++)
        o->idx[i] = (uint8_t)((rng = rng * 1664525u + 1013904223u) >> 24);
    for (int i = 0; i < 16; i++) o->cb[i] = i < (1 << bits) ? frand() * 0.2f : 0.0f;
    for (int i = 0; i < rows * groups; i++) {
        uint16_t h = nd_float_to_half(0.5f + 0.4f * frand());
        o->norms[2 * i] = (uint8_t)h, o->norms[2 * i + 1] = (uint8_t)(h >> 8);
    }
    nd_matrix m = {.kind = ND_MAT_CQ,
                   .rows = rows,
                   .cols = cols,
                   .cq_bits = bits,
                   .cols_pad = cols_pad,
                   .cq_idx = o->idx,
                   .cq_norms = o->norms,
                   .codebook = o->cb};
    o->m = m;
}

/* the tables to compare: built in and runnable here */
static int tables(const nd_cpu_kernels *out[ND_ISA_COUNT])
{
    nd_cpu_features f;
    nd_cpu_features_detect(&f);
    int n = 0;
    for (int i = 0; i < ND_ISA_COUNT; i++)
        if (nd_cpu_isa_built((nd_cpu_isa)i) && nd_cpu_isa_supported(&f, (nd_cpu_isa)i, NULL))
            out[n++] = nd_cpu_kernels_for((nd_cpu_isa)i);
    return n;
}

static void test_choice_follows_environment(void)
{
    nd_cpu_isa isa;
    const char *why = NULL;
    int rc = nd_cpu_isa_choose(&isa, &why);
    const char *forced = getenv("NEEDLE_ISA");
    CHECKF(why && *why, "a reason is always given");
    if (forced && *forced) {
        CHECKF(rc == 0, "NEEDLE_ISA=%s refused here: %s", forced, why);
        CHECKF(rc != 0 || !strcmp(nd_cpu_isa_name(isa), forced), "chose %s, forced %s", nd_cpu_isa_name(isa), forced);
    } else {
        CHECKF(rc == 0, "automatic choice failed: %s", why);
    }
    if (rc == 0)
        CHECKF(nd_cpu_kernels_active()->isa == isa, "active table %d, chosen %d", nd_cpu_kernels_active()->isa, isa);
    printf("  kernel path: %s (%s)\n", rc == 0 ? nd_cpu_isa_name(isa) : "none", why);
    /* the baseline is always built and always runs */
    nd_cpu_features f;
    nd_cpu_features_detect(&f);
    CHECK(nd_cpu_kernels_for(ND_ISA_BASELINE) != NULL);
    CHECK(nd_cpu_isa_supported(&f, ND_ISA_BASELINE, NULL));
    const char *missing = NULL;
    nd_cpu_features none = {0};
    CHECK(!nd_cpu_isa_supported(&none, ND_ISA_AVX512, &missing) && missing && !strcmp(missing, "avx512f"));
    CHECK(!nd_cpu_isa_supported(&none, ND_ISA_AVX2, &missing) && !strcmp(missing, "avx2"));
}

/* y = W x with table k, for 1, 2 and 3 threads: the same bits each time */
static float *matmul_with(const nd_cpu_kernels *k, const nd_matrix *w, const float *x, int T, const char *what)
{
    float *y = malloc(sizeof(float) * (size_t)T * (size_t)w->rows),
          *y2 = malloc(sizeof(float) * (size_t)T * (size_t)w->rows);
    for (int th = 1; th <= 3; th++) {
        nd_threadpool *pool = NULL;
        if (th > 1) CHECK(nd_threadpool_create(th, &pool, NULL) == 0);
        float *work = malloc(sizeof(float) * (k->matmul_work_floats(w, T, th) + 1));
        k->matmul(pool, w, x, T, w->cols, th == 1 ? y : y2, w->rows, work);
        if (th > 1)
            CHECKF(!memcmp(y, y2, sizeof(float) * (size_t)T * (size_t)w->rows), "%s %s T=%d: %d threads differ from 1",
                   nd_cpu_isa_name(k->isa), what, T, th);
        free(work);
        nd_threadpool_free(pool);
    }
    free(y2);
    return y;
}

static void test_matmuls_agree_across_paths(void)
{
    const nd_cpu_kernels *t[ND_ISA_COUNT];
    int n = tables(t);
    const nd_cpu_kernels *base = nd_cpu_kernels_for(ND_ISA_BASELINE);
    int Ts[] = {1, 2, 7};
    for (int kind = 0; kind < 4; kind++) { /* f32, CQ 4-bit, 3-bit, 2-bit */
        int rows = 150, cols = kind == 0 ? 333 : 384;
        cq_owned o = {0};
        float *wf = NULL;
        nd_matrix m;
        if (kind == 0) {
            wf = malloc(sizeof(float) * (size_t)rows * (size_t)cols);
            fill(wf, (size_t)rows * (size_t)cols);
            nd_matrix f = {.kind = ND_MAT_F32, .rows = rows, .cols = cols, .f32 = wf};
            m = f;
        } else {
            make_cq(&o, rows, cols, 5 - kind);
            m = o.m;
        }
        for (int ti = 0; ti < 3; ti++) {
            int T = Ts[ti];
            float *x = malloc(sizeof(float) * (size_t)T * (size_t)cols);
            fill(x, (size_t)T * (size_t)cols);
            float *ref = matmul_with(base, &m, x, T, "matmul");
            for (int i = 0; i < n; i++) {
                float *y = matmul_with(t[i], &m, x, T, "matmul");
                double d = rel_diff(y, ref, (size_t)T * (size_t)rows);
                CHECKF(d < 1e-5, "%s kind %d T=%d: %g from %s", nd_cpu_isa_name(t[i]->isa), kind, T, d,
                       nd_cpu_isa_name(base->isa));
                free(y);
            }
            free(ref), free(x);
        }
        free(wf), free(o.idx), free(o.norms);
    }
}

static void test_attention_agrees_across_paths(void)
{
    const nd_cpu_kernels *t[ND_ISA_COUNT];
    int n = tables(t);
    const nd_cpu_kernels *base = nd_cpu_kernels_for(ND_ISA_BASELINE);
    int H = 8, KVH = 2, hd = 64, T = 5, slots = 20, KV = KVH * hd, A = H * hd;
    float *q = malloc(sizeof(float) * (size_t)T * A), *kc = malloc(sizeof(float) * (size_t)T * KV),
          *vc = malloc(sizeof(float) * (size_t)T * KV), *kcache = malloc(sizeof(float) * (size_t)slots * KV),
          *vcache = malloc(sizeof(float) * (size_t)slots * KV);
    fill(q, (size_t)T * A), fill(kc, (size_t)T * KV), fill(vc, (size_t)T * KV);
    fill(kcache, (size_t)slots * KV), fill(vcache, (size_t)slots * KV);
    int pos[20];
    for (int s = 0; s < slots; s++) pos[s] = s;
    float *ref = malloc(sizeof(float) * (size_t)T * A), *out = malloc(sizeof(float) * (size_t)T * A);
    nd_attn_args a = {.q = q,
                      .k_chunk = kc,
                      .v_chunk = vc,
                      .k_cache = kcache,
                      .v_cache = vcache,
                      .cache_pos = pos,
                      .cache_slots = slots,
                      .T = T,
                      .pos0 = slots,
                      .num_heads = H,
                      .num_kv_heads = KVH,
                      .head_dim = hd,
                      .window = 16,
                      .sinks = 2,
                      .kv_bits = 32,
                      .out = ref};
    float *work = malloc(sizeof(float) * base->attention_work_floats(&a, 1));
    base->attention(NULL, &a, work);
    for (int i = 0; i < n; i++) {
        a.out = out;
        t[i]->attention(NULL, &a, work);
        double d = rel_diff(out, ref, (size_t)T * A);
        CHECKF(d < 1e-5, "attention %s: %g", nd_cpu_isa_name(t[i]->isa), d);
    }
    free(work), free(q), free(kc), free(vc), free(kcache), free(vcache), free(ref), free(out);
}

static void test_small_kernels_agree_across_paths(void)
{
    const nd_cpu_kernels *t[ND_ISA_COUNT];
    int n = tables(t);
    const nd_cpu_kernels *base = nd_cpu_kernels_for(ND_ISA_BASELINE);
    enum { D = 300 };
    float x[D], sc[D], ref[D], out[D], y0[D], y[D];
    fill(x, D), fill(sc, D), fill(y0, D);
    base->rmsnorm(x, D, sc, ref);
    float dref = base->dot(x, sc, D);
    for (int i = 0; i < n; i++) {
        t[i]->rmsnorm(x, D, sc, out);
        CHECKF(rel_diff(out, ref, D) < 1e-6, "rmsnorm %s", nd_cpu_isa_name(t[i]->isa));
        float dv = t[i]->dot(x, sc, D);
        CHECKF(fabsf(dv - dref) < 1e-4f * (1.0f + fabsf(dref)), "dot %s: %g vs %g", nd_cpu_isa_name(t[i]->isa), dv,
               dref);
        memcpy(y, y0, sizeof y);
        t[i]->sigmoid_gate(y, x, D);
        for (int k = 0; k < D; k++)
            CHECKF(fabsf(y[k] - y0[k] / (1.0f + expf(-x[k]))) < 1e-5f, "sigmoid_gate %s", nd_cpu_isa_name(t[i]->isa));
    }
}

/* The Hadamard transform and the A8 quantiser are compiled per ISA for speed;
 * they must give the bits of the one definition (quant/) on every path,
 * including rounding ties (values that are exact halves of the scale). */
static void test_hadamard_and_a8_bits_on_every_path(void)
{
    const nd_cpu_kernels *t[ND_ISA_COUNT];
    int n = tables(t);
    enum { N = 1024 };
    static float x[N], ref[N], out[N], xq[N], xq_ref[N];
    static int8_t c[N], c_ref[N];
    for (int len = 1; len <= N; len *= 2) {
        fill(x, N);
        memcpy(ref, x, sizeof(float) * len);
        nd_hadamard(ref, len);
        for (int i = 0; i < n; i++) {
            memcpy(out, x, sizeof(float) * len);
            t[i]->hadamard(out, len);
            CHECKF(!memcmp(out, ref, sizeof(float) * len), "hadamard %s n=%d", nd_cpu_isa_name(t[i]->isa), len);
        }
    }
    const int lens[] = {1, 7, 8, 15, 16, 33, 300, 512, 1000, N};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        int len = lens[li];
        for (int variant = 0; variant < 3; variant++) {
            fill(x, N);
            if (variant == 1) /* ties: multiples of s/2 with max |x| = 127 s */
                for (int k = 0; k < len; k++) x[k] = (k == 0 ? 127.0f : (float)((int)(x[k] * 254.0f)) * 0.5f) * 0.03125f;
            if (variant == 2) memset(x, 0, sizeof(float) * len); /* all zero: scale 1 */
            memcpy(xq_ref, x, sizeof(float) * len);
            float s_ref = nd_act_fake_quant(xq_ref, len, c_ref);
            CHECK(nd_act_quant_i8(x, len, c) == s_ref && !memcmp(c, c_ref, (size_t)len));
            for (int i = 0; i < n; i++) {
                const char *name = nd_cpu_isa_name(t[i]->isa);
                memset(c, 0x55, sizeof c);
                float s = t[i]->act_quant(x, len, c, xq);
                CHECKF(s == s_ref && !memcmp(c, c_ref, (size_t)len) && !memcmp(xq, xq_ref, sizeof(float) * len),
                       "act_quant %s n=%d variant %d", name, len, variant);
                memcpy(out, x, sizeof(float) * len); /* in place, no codes */
                CHECKF(t[i]->act_quant(out, len, NULL, out) == s_ref && !memcmp(out, xq_ref, sizeof(float) * len),
                       "act_quant in place %s n=%d", name, len);
                memset(c, 0x55, sizeof c); /* codes only */
                CHECKF(t[i]->act_quant(x, len, c, NULL) == s_ref && !memcmp(c, c_ref, (size_t)len),
                       "act_quant codes %s n=%d", name, len);
            }
        }
    }
}

/* The KV rule, written out: per 32 values, scale max|x| / 127 (a NaN never
 * the maximum), codes rint(x * 127 / max) (half to even), 0 for a zero group. */
static void kv_quant_rule(const float *x, int n, int8_t *q, float *scale)
{
    for (int g = 0; g < n / 32; g++) {
        float mx = 0.0f;
        for (int i = 0; i < 32; i++) mx = fabsf(x[32 * g + i]) > mx ? fabsf(x[32 * g + i]) : mx;
        float inv = mx > 0.0f ? 127.0f / mx : 0.0f;
        scale[g] = mx / 127.0f;
        for (int i = 0; i < 32; i++) q[32 * g + i] = (int8_t)(int)rintf(x[32 * g + i] * inv);
    }
}

/* Needle 2's int8 KV quantiser (per 32 values) is vectorised per ISA: the
 * rule's codes and scales on every path this machine runs, ties included. */
static void test_kv_quant_bits_on_every_path(void)
{
    const nd_cpu_kernels *t[ND_ISA_COUNT];
    int n = tables(t);
    enum { N = 1024 };
    static float x[N], sc_ref[N / 32], sc[N / 32];
    static int8_t q_ref[N], q[N];
    const int lens[] = {32, 64, 256, N};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (int variant = 0; variant < 3; variant++) {
            int len = lens[li];
            fill(x, N);
            if (variant == 1) /* ties: each group's max is 127 * 2^-5, the rest halves of 2^-5 */
                for (int k = 0; k < len; k++)
                    x[k] = (k % 32 == 0 ? 127.0f : (float)((int)(x[k] * 254.0f)) * 0.5f) * 0.03125f;
            if (variant == 2) memset(x, 0, sizeof(float) * 32); /* an all-zero group */
            kv_quant_rule(x, len, q_ref, sc_ref);
            for (int i = 0; i < n; i++) {
                memset(q, 0x55, sizeof q);
                t[i]->quantize_kv(x, len, q, sc);
                CHECKF(!memcmp(q, q_ref, (size_t)len) && !memcmp(sc, sc_ref, sizeof(float) * (size_t)(len / 32)),
                       "quantize_kv %s n=%d variant %d", nd_cpu_isa_name(t[i]->isa), len, variant);
            }
        }
}

/* Needle 3's Monarch MLP is compiled per ISA (wider tiles of its Kronecker
 * products) with each output's arithmetic unchanged: every path, inline and
 * split over 2 and 3 threads, gives the baseline's bits, on geometries whose
 * factors are narrower than, as wide as and wider than one vector.  (The MLP's
 * norm is each path's own rmsnorm, whose sums differ in order; the inputs are
 * multiples of 1/16 with small numerators, so every order sums their squares
 * exactly and the norm is the same on every path.) */
static void test_monarch_bits_on_every_path(void)
{
    const nd_cpu_kernels *t[ND_ISA_COUNT];
    int n = tables(t);
    const nd_cpu_kernels *base = nd_cpu_kernels_for(ND_ISA_BASELINE);
    const int geo[][3] = {{40, 8, 8}, {200, 16, 16}, {300, 16, 32}, {700, 32, 32}}; /* d, a, b */
    for (size_t gi = 0; gi < sizeof geo / sizeof geo[0]; gi++) {
        int d = geo[gi][0], A = geo[gi][1], B = geo[gi][2], N = A * B, R = 8, T = 3;
        float *b0 = malloc(sizeof(float) * (size_t)T * d), *norm = malloc(sizeof(float) * (size_t)d);
        float *dv = malloc(sizeof(float) * 5 * (size_t)N), *wa = malloc(sizeof(float) * 3 * (size_t)A * A);
        float *wb = malloc(sizeof(float) * 3 * (size_t)B * B), *cv = malloc(sizeof(float) * (size_t)d * R);
        float *cu = malloc(sizeof(float) * (size_t)R * N), *p1 = malloc(sizeof(float) * (size_t)N);
        float *p2 = malloc(sizeof(float) * (size_t)N), *z = malloc(sizeof(float) * (3 * (size_t)N + (size_t)R));
        float *ref = malloc(sizeof(float) * (size_t)T * d), *got = malloc(sizeof(float) * (size_t)T * d);
        fill(b0, (size_t)T * d), fill(norm, (size_t)d), fill(dv, 5 * (size_t)N), fill(wa, 3 * (size_t)A * A);
        fill(wb, 3 * (size_t)B * B), fill(cv, (size_t)d * R), fill(cu, (size_t)R * N);
        for (int i = 0; i < T * d; i++) b0[i] = (float)(int)(b0[i] * 64.0f) / 16.0f;
        for (int i = 0; i < N; i++) p1[i] = (float)((i * 5 + 3) % N), p2[i] = (float)((i * 7 + 1) % N);
        size_t AA = (size_t)A * A, BB = (size_t)B * B;
        nd_monarch_mlp_args a = {.T = T, .d = d, .hada_n = N, .a = A, .b_dim = B, .rank = R, .norm = norm,
                                 .d1 = dv, .d2 = dv + N, .b2 = dv + 2 * N, .d3 = dv + 3 * N, .d4 = dv + 4 * N,
                                 .w1a = wa, .w1b = wb, .w2a = wa + AA, .w2b = wb + BB, .w3a = wa + 2 * AA,
                                 .w3b = wb + 2 * BB, .cond_v = cv, .cond_u = cu, .p1 = p1, .p2 = p2, .z = z};
        memcpy(ref, b0, sizeof(float) * (size_t)T * d);
        a.b = ref;
        base->monarch_mlp(&a);
        for (int i = 0; i < n; i++)
            for (int th = 1; th <= 3; th++) {
                nd_threadpool *pool = NULL;
                if (th > 1) CHECK(nd_threadpool_create(th, &pool, NULL) == 0);
                memcpy(got, b0, sizeof(float) * (size_t)T * d);
                a.b = got;
                if (pool)
                    t[i]->monarch_mlp_pooled(pool, &a, NULL, NULL);
                else
                    t[i]->monarch_mlp(&a);
                CHECKF(!memcmp(got, ref, sizeof(float) * (size_t)T * d), "monarch_mlp %s d=%d a=%d b=%d, %d threads",
                       nd_cpu_isa_name(t[i]->isa), d, A, B, th);
                nd_threadpool_free(pool);
            }
        free(b0), free(norm), free(dv), free(wa), free(wb), free(cv), free(cu), free(p1), free(p2), free(z);
        free(ref), free(got);
    }
}

int main(void)
{
    RUN(test_choice_follows_environment);
    RUN(test_matmuls_agree_across_paths);
    RUN(test_attention_agrees_across_paths);
    RUN(test_small_kernels_agree_across_paths);
    RUN(test_hadamard_and_a8_bits_on_every_path);
    RUN(test_kv_quant_bits_on_every_path);
    RUN(test_monarch_bits_on_every_path);
    return check_summary();
}
