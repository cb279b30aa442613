/* test_attention_wide.c - the CPU attention at the geometries the vector
 * paths take (head_dim 64 and 48, 1 to 3 query heads per KV head, float and
 * int8 caches, decode and prefill shapes, 1 and 2 threads) against a textbook
 * reference written here from SPEC section 5.  test_ops.c covers the small
 * head_dim whose scalar tail runs; this one covers the register-blocked
 * weighted sums and the shared visible-key lists. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "check.h"
#include "core/threadpool.h"

static uint32_t rng = 88172645u;
static float frand(void) /* uniform in [-1, 1) */
{
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return (float)((rng >> 8) * (1.0 / 8388608.0)) - 1.0f;
}

/* out = attention by the book: for each query and head, the visible keys'
 * softmax-weighted values, in double. */
static void reference(const nd_attn_args *a, const float *kc, const float *vc, float *ref)
{
    int H = a->num_heads, KVH = a->num_kv_heads, hd = a->head_dim, KV = KVH * hd, A = H * hd;
    int keys = a->cache_slots + a->T;
    double *sc = malloc(sizeof(double) * (size_t)keys);
    const float **vs = malloc(sizeof(float *) * (size_t)keys);
    for (int t = 0; t < a->T; t++)
        for (int h = 0; h < H; h++) {
            int qp = a->pos0 + t, kvh = h / (H / KVH), n = 0;
            double mx = -1e300, sum = 0;
            for (int s = 0; s < keys; s++) {
                int p = s < a->cache_slots ? a->cache_pos[s] : a->pos0 + (s - a->cache_slots);
                if (p < 0 || p > qp || !(qp - p < a->window || p < a->sinks)) continue;
                const float *k = s < a->cache_slots ? kc + (size_t)s * KV : a->k_chunk + (size_t)(s - a->cache_slots) * KV;
                vs[n] = (s < a->cache_slots ? vc + (size_t)s * KV : a->v_chunk + (size_t)(s - a->cache_slots) * KV) +
                        kvh * hd;
                double d = 0;
                for (int i = 0; i < hd; i++) d += (double)a->q[(size_t)t * A + h * hd + i] * k[kvh * hd + i];
                sc[n] = d / sqrt(hd);
                mx = fmax(mx, sc[n]);
                n++;
            }
            for (int i = 0; i < n; i++) sum += (sc[i] = exp(sc[i] - mx));
            for (int c = 0; c < hd; c++) {
                double acc = 0;
                for (int i = 0; i < n; i++) acc += sc[i] * vs[i][c];
                ref[(size_t)t * A + h * hd + c] = n ? (float)(acc / sum) : 0.0f;
            }
        }
    free(sc), free(vs);
}

static double maxdiff(const float *a, const float *b, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) w = fmax(w, fabs((double)a[i] - b[i]));
    return w;
}

static void run_case(int H, int KVH, int hd, int T, int slots, int filled, int window, int sinks, int kv8,
                     nd_threadpool *pool)
{
    int KV = KVH * hd, A = H * hd, G = KV / ND_KV_GROUP;
    int pos0 = filled; /* the cache holds positions 0..filled-1 in a ring of `slots` */
    float *kc = malloc(sizeof(float) * (size_t)slots * KV), *vc = malloc(sizeof(float) * (size_t)slots * KV);
    float *kq = malloc(sizeof(float) * (size_t)T * KV), *vq = malloc(sizeof(float) * (size_t)T * KV);
    float *q = malloc(sizeof(float) * (size_t)T * A), *out = malloc(sizeof(float) * (size_t)T * A);
    float *ref = malloc(sizeof(float) * (size_t)T * A);
    int8_t *k8 = malloc((size_t)slots * KV), *v8 = malloc((size_t)slots * KV);
    float *ks = malloc(sizeof(float) * (size_t)slots * (G ? G : 1)), *vsc = malloc(sizeof(float) * (size_t)slots * (G ? G : 1));
    int *cache_pos = malloc(sizeof(int) * (size_t)slots);
    for (int s = 0; s < slots; s++) cache_pos[s] = -1;
    for (int p = 0; p < filled; p++) cache_pos[p < sinks ? p : sinks + (p - sinks) % (slots - sinks)] = p;
    for (size_t i = 0; i < (size_t)slots * KV; i++) kc[i] = 2 * frand(), vc[i] = frand();
    for (size_t i = 0; i < (size_t)T * KV; i++) kq[i] = 2 * frand(), vq[i] = frand();
    for (size_t i = 0; i < (size_t)T * A; i++) q[i] = 2 * frand();
    if (kv8) { /* the reference reads the widened values the kernel sees */
        for (int s = 0; s < slots; s++) {
            nd_cpu_quantize_kv(kc + (size_t)s * KV, KV, k8 + (size_t)s * KV, ks + (size_t)s * G);
            nd_cpu_quantize_kv(vc + (size_t)s * KV, KV, v8 + (size_t)s * KV, vsc + (size_t)s * G);
            for (int i = 0; i < KV; i++) {
                kc[(size_t)s * KV + i] = k8[(size_t)s * KV + i] * ks[(size_t)s * G + i / ND_KV_GROUP];
                vc[(size_t)s * KV + i] = v8[(size_t)s * KV + i] * vsc[(size_t)s * G + i / ND_KV_GROUP];
            }
        }
    }
    nd_attn_args a = {.T = T, .pos0 = pos0, .num_heads = H, .num_kv_heads = KVH, .head_dim = hd, .window = window,
                      .sinks = sinks, .q = q, .k_chunk = kq, .v_chunk = vq, .kv_bits = kv8 ? 8 : 32,
                      .cache_pos = cache_pos, .cache_slots = slots, .out = out};
    if (kv8) a.k_cache8 = k8, a.v_cache8 = v8, a.k_scale = ks, a.v_scale = vsc;
    else a.k_cache = kc, a.v_cache = vc;
    float *work = malloc(sizeof(float) * nd_cpu_attention_work_floats(&a, nd_threadpool_threads(pool)));
    nd_cpu_attention(pool, &a, work);
    reference(&a, kc, vc, ref);
    double md = maxdiff(out, ref, (size_t)T * A);
    CHECKF(md < 2e-5, "H %d KVH %d hd %d T %d slots %d filled %d window %d sinks %d kv8 %d threads %d: diff %g", H, KVH,
           hd, T, slots, filled, window, sinks, kv8, nd_threadpool_threads(pool), md);
    free(work), free(kc), free(vc), free(kq), free(vq), free(q), free(out), free(ref), free(k8), free(v8), free(ks),
        free(vsc), free(cache_pos);
}

static void test_wide_heads(void)
{
    nd_threadpool *pool2 = NULL;
    needle_error err;
    CHECK(nd_threadpool_create(2, &pool2, &err) == 0);
    nd_threadpool *pools[2] = {NULL, pool2};
    for (int pi = 0; pi < 2; pi++)
        for (int kv8 = 0; kv8 < 2; kv8++) {
            run_case(8, 4, 64, 1, 100, 70, 1000, 0, kv8, pools[pi]);  /* decode, GQA pairs */
            run_case(8, 4, 64, 9, 100, 60, 40, 4, kv8, pools[pi]);    /* prefill chunk, window + sinks */
            run_case(6, 2, 64, 3, 40, 37, 20, 0, kv8, pools[pi]);     /* three heads per KV head */
            run_case(4, 4, 96, 5, 30, 30, 1000, 2, kv8, pools[pi]);   /* no GQA; 96 = 64 + 32 */
            run_case(4, 2, 32, 4, 20, 0, 1000, 0, kv8, pools[pi]);    /* empty cache */
        }
    run_case(2, 1, 48, 6, 10, 10, 3, 0, 0, NULL); /* head_dim 48: a short last vector step */
    nd_threadpool_free(pool2);
}

/* Any thread count gives the same bits. */
static void test_threads_same_bits(void)
{
    int H = 8, KVH = 4, hd = 64, T = 7, slots = 64, KV = KVH * hd, A = H * hd;
    float *kc = malloc(sizeof(float) * (size_t)slots * KV), *vc = malloc(sizeof(float) * (size_t)slots * KV);
    float *kq = malloc(sizeof(float) * (size_t)T * KV), *vq = malloc(sizeof(float) * (size_t)T * KV);
    float *q = malloc(sizeof(float) * (size_t)T * A), *o1 = malloc(sizeof(float) * (size_t)T * A),
          *o3 = malloc(sizeof(float) * (size_t)T * A);
    int cache_pos[64];
    for (int s = 0; s < slots; s++) cache_pos[s] = s < 50 ? s : -1;
    for (size_t i = 0; i < (size_t)slots * KV; i++) kc[i] = frand(), vc[i] = frand();
    for (size_t i = 0; i < (size_t)T * KV; i++) kq[i] = frand(), vq[i] = frand();
    for (size_t i = 0; i < (size_t)T * A; i++) q[i] = frand();
    nd_attn_args a = {.T = T, .pos0 = 50, .num_heads = H, .num_kv_heads = KVH, .head_dim = hd, .window = 1000,
                      .q = q, .k_chunk = kq, .v_chunk = vq, .kv_bits = 32, .k_cache = kc, .v_cache = vc,
                      .cache_pos = cache_pos, .cache_slots = slots, .out = o1};
    float *work = malloc(sizeof(float) * nd_cpu_attention_work_floats(&a, 3));
    nd_cpu_attention(NULL, &a, work);
    nd_threadpool *pool = NULL;
    needle_error err;
    CHECK(nd_threadpool_create(3, &pool, &err) == 0);
    a.out = o3;
    nd_cpu_attention(pool, &a, work);
    CHECK(!memcmp(o1, o3, sizeof(float) * (size_t)T * A));
    nd_threadpool_free(pool);
    free(work), free(kc), free(vc), free(kq), free(vq), free(q), free(o1), free(o3);
}

int main(void)
{
    RUN(test_wide_heads);
    RUN(test_threads_same_bits);
    return check_summary();
}
