/* test_a8_threads.c - the deploy numerics (A8 activations, int8 KV cache)
 * give the same bits on 1, 2 and 3 threads, for a prefill chunk long enough
 * that every threaded split runs (integer GEMM row tasks, attention query
 * blocks, the per-token layer ops), for decode after it, and in chunks; and a
 * token's A8 matmul results do not depend on the chunk it came in (checked
 * in test_cq_int).  Needle 2 and Needle 3 models both. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/model.h"

/* Needle 2, and Needle 3 (its Monarch MLP, mHC over 4 lanes, per-head A8 of
 * q/k/v and the per-head int8 cache all split over the pool in prefill) */
static const char *const MODELS[] = {"tests/golden/tiny_w4.cact", "tests/golden/needle3/n3_tiny.cact"};

static float *run(const char *path, int threads, const int *ids, int T, int step, int *V)
{
    nd_model_options o = {.threads = threads, .acts = NEEDLE_ACTS_A8};
    nd_model *m = NULL;
    needle_error e = {0};
    int rc = nd_model_open(path, &o, &m, &e);
    CHECKF(rc == 0, "open %s: %s", path, e.message);
    if (rc) return NULL;
    *V = m->weights.cfg.vocab_size;
    nd_state_options so = {.kv_bits = 8};
    nd_state *s = NULL;
    rc = nd_state_create(m, &so, &s, &e);
    CHECKF(rc == 0, "state: %s", e.message);
    float *lg = rc ? NULL : malloc(sizeof(float) * (size_t)T * (size_t)*V);
    uint8_t *want = malloc((size_t)T);
    memset(want, 1, (size_t)T);
    for (int t0 = 0; lg && t0 < T && rc == 0; t0 += step) {
        int n = T - t0 < step ? T - t0 : step;
        rc = nd_state_eval(s, ids + t0, n, want + t0, lg + (size_t)t0 * (size_t)*V, NULL, &e);
        CHECKF(rc == 0, "eval: %s", e.message);
    }
    free(want);
    nd_state_free(s);
    nd_model_free(m);
    return lg;
}

static void test_threads_bit_identical_a8(void)
{
    enum { T = 45 };
    int ids[T];
    for (int i = 0; i < T; i++) ids[i] = (i * 37 + 11) % 500 + 3;
    const int steps[] = {T, 13, 1}; /* one chunk; chunks (prefill then prefill over the cache); decode */
    for (size_t mi = 0; mi < sizeof MODELS / sizeof MODELS[0]; mi++)
        for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
            const char *mdl = MODELS[mi];
            int V = 0;
            float *r1 = run(mdl, 1, ids, T, steps[k], &V), *r2 = run(mdl, 2, ids, T, steps[k], &V),
                  *r3 = run(mdl, 3, ids, T, steps[k], &V);
            size_t bytes = sizeof(float) * (size_t)T * (size_t)V;
            CHECKF(r1 && r2 && !memcmp(r1, r2, bytes), "%s step %d: 1 vs 2 threads differ", mdl, steps[k]);
            CHECKF(r1 && r3 && !memcmp(r1, r3, bytes), "%s step %d: 1 vs 3 threads differ", mdl, steps[k]);
            free(r1), free(r2), free(r3);
        }
}

int main(void)
{
    RUN(test_threads_bit_identical_a8);
    return check_summary();
}
