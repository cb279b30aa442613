/* test_forward.c - the forward pass held to the reference implementation's
 * golden outputs (tests/golden/tiny.json), plus the engine's own invariants:
 * prefill == token-by-token decode, chunking and thread count do not change
 * results, and the KV window/sink ring matches the reference mask. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/file.h"
#include "core/json.h"
#include "model/model.h"
#include "model/heads.h"

#define GOLDEN "tests/golden/"

static nd_json *golden;

static const nd_json *gcase(int i) { return &nd_json_get(golden, "cases")->items[i]; }
static int ncases(void) { return (int)nd_json_get(golden, "cases")->count; }

static int *case_ids(const nd_json *c, int *T)
{
    const nd_json *ids = nd_json_get(c, "ids");
    int *v = malloc(sizeof(int) * ids->count);
    for (size_t i = 0; i < ids->count; i++) v[i] = (int)ids->items[i].num;
    *T = (int)ids->count;
    return v;
}

static nd_model *open_model(const char *path, int threads, int dequant)
{
    nd_model_options o = {.threads = threads, .dequantize = dequant, .acts = NEEDLE_ACTS_FLOAT}; /* float goldens */
    nd_model *m = NULL;
    needle_error e = {0};
    int rc = nd_model_open(path, &o, &m, &e);
    CHECKF(rc == 0, "open %s: %s", path, e.message);
    return rc == 0 ? m : NULL;
}

/* Logits for every position of ids, fed in pieces of `step` tokens (0 = all at once). */
static int g_kv_bits; /* KV cache storage of the sessions run_logits creates (0 = float) */

static float *run_logits(nd_model *m, const int *ids, int T, int window, int sinks, int step, int chunk)
{
    nd_state_options so = {.window = window, .sinks = sinks, .max_chunk = chunk, .kv_bits = g_kv_bits};
    nd_state *s = NULL;
    needle_error e = {0};
    int rc = nd_state_create(m, &so, &s, &e);
    CHECKF(rc == 0, "state: %s", e.message);
    if (rc) return NULL;
    int V = m->weights.cfg.vocab_size;
    float *lg = malloc(sizeof(float) * (size_t)T * V);
    uint8_t *want = malloc((size_t)T);
    memset(want, 1, (size_t)T);
    if (step <= 0) step = T;
    for (int t0 = 0; t0 < T && rc == 0; t0 += step) {
        int n = T - t0 < step ? T - t0 : step;
        rc = nd_state_eval(s, ids + t0, n, want, lg + (size_t)t0 * V, NULL, &e);
        CHECKF(rc == 0, "eval: %s", e.message);
    }
    free(want);
    nd_state_free(s);
    return lg;
}

/* Compare with one golden logits entry: at_positions, argmax, logsumexp. */
static void compare_logits(const nd_json *c, const char *key, const float *lg, int T, int V, double tol)
{
    const nd_json *ref = nd_json_get(c, key), *pos = nd_json_get(c, "positions");
    CHECKF(ref != NULL, "no %s", key);
    if (!ref) return;
    const nd_json *at = nd_json_get(ref, "at_positions"), *am = nd_json_get(ref, "argmax"),
                  *lse = nd_json_get(ref, "logsumexp");
    CHECK((int)am->count == T && (int)lse->count == T);
    double worst = 0;
    for (size_t i = 0; i < pos->count; i++) {
        int p = (int)pos->items[i].num;
        for (int v = 0; v < V; v++) {
            double d = fabs(at->items[i].items[v].num - lg[(size_t)p * V + v]);
            if (d > worst) worst = d;
        }
    }
    CHECKF(worst <= tol, "%s: max |logit diff| %.3g > %.1g", key, worst, tol);
    int bad_arg = 0;
    double worst_lse = 0;
    for (int t = 0; t < T; t++) {
        const float *row = lg + (size_t)t * V;
        int best = 0;
        double mx = row[0];
        for (int v = 1; v < V; v++)
            if (row[v] > mx) mx = row[v], best = v;
        int ra = (int)am->items[t].num;
        /* ties aside: a different argmax is fine only if it is (numerically) a tie */
        if (best != ra && fabs(row[ra] - mx) > tol) bad_arg++;
        double s = 0;
        for (int v = 0; v < V; v++) s += exp(row[v] - mx);
        double d = fabs(mx + log(s) - lse->items[t].num);
        if (d > worst_lse) worst_lse = d;
    }
    CHECKF(bad_arg == 0, "%s: %d positions with a different argmax", key, bad_arg);
    CHECKF(worst_lse <= tol, "%s: max |logsumexp diff| %.3g", key, worst_lse);
    printf("    %s: max logit diff %.2e, logsumexp diff %.2e\n", key, worst, worst_lse);
}

static void golden_file_case(const char *file, const char *key, int dequant)
{
    nd_model *m = open_model(file, 0, dequant);
    if (!m) return;
    for (int ci = 0; ci < ncases(); ci++) {
        int T, *ids = case_ids(gcase(ci), &T);
        float *lg = run_logits(m, ids, T, 0, 0, 0, 0);
        if (lg) compare_logits(gcase(ci), key, lg, T, m->weights.cfg.vocab_size, 1e-4);
        free(lg);
        free(ids);
    }
    nd_model_free(m);
}

static void test_golden_f32(void) { golden_file_case(GOLDEN "tiny.safetensors", "logits_f32", 0); }
static void test_golden_w4(void) { golden_file_case(GOLDEN "tiny_w4.cact", "logits_w4", 0); }
static void test_golden_mixed(void) { golden_file_case(GOLDEN "tiny_mixed.cact", "logits_mixed", 0); }
/* the float path: the .cact dequantised to F32 matrices up front */
static void test_golden_w4_float_path(void) { golden_file_case(GOLDEN "tiny_w4.cact", "logits_w4", 1); }
static void test_golden_mixed_float_path(void) { golden_file_case(GOLDEN "tiny_mixed.cact", "logits_mixed", 1); }

/* window 6, first 4 positions sinks: as one prefill, and token by token (the
 * ring wraps many times), and in chunks of 5. */
static void test_golden_window_sinks(void)
{
    nd_model *m = open_model(GOLDEN "tiny.safetensors", 0, 0);
    if (!m) return;
    for (int ci = 0; ci < ncases(); ci++) {
        const nd_json *c = gcase(ci), *win = nd_json_get(c, "window");
        int W = (int)nd_json_get(win, "kv_window")->num, S = (int)nd_json_get(win, "sink_len")->num;
        int T, *ids = case_ids(c, &T);
        int steps[3] = {0, 1, 5};
        for (int k = 0; k < 3; k++) {
            float *lg = run_logits(m, ids, T, W, S, steps[k], 0);
            if (lg) compare_logits(c, "logits_f32_window6_sink4", lg, T, m->weights.cfg.vocab_size, 1e-4);
            free(lg);
        }
        free(ids);
    }
    nd_model_free(m);
}

static void test_golden_heads(void)
{
    nd_model *m = open_model(GOLDEN "tiny.safetensors", 0, 0);
    if (!m) return;
    const nd_config *cfg = &m->weights.cfg;
    for (int ci = 0; ci < ncases(); ci++) {
        const nd_json *c = gcase(ci);
        int T, *ids = case_ids(c, &T);
        int ncell = T * (cfg->num_layers + 1);
        float *cells = malloc(sizeof(float) * (size_t)ncell * cfg->d_model);
        float *lg = malloc(sizeof(float) * cfg->vocab_size);
        nd_state *s = NULL;
        needle_error e = {0};
        CHECK(nd_state_create(m, NULL, &s, &e) == 0);
        CHECKF(nd_state_eval(s, ids, T, NULL, lg, cells, &e) == 0, "%s", e.message);
        float logit = 0, emb[1024];
        CHECKF(nd_head_confidence(m, cells, ncell, &logit, &e) == 0, "%s", e.message);
        double ref = nd_json_get(c, "confidence_logit")->num;
        CHECKF(fabs(logit - ref) < 1e-4, "confidence %.6f vs %.6f", logit, ref);
        CHECKF(nd_head_contrastive(m, cells, ncell, emb, &e) == 0, "%s", e.message);
        const nd_json *re = nd_json_get(c, "contrastive_embedding");
        double worst = 0;
        for (size_t i = 0; i < re->count; i++) worst = fmax(worst, fabs(re->items[i].num - emb[i]));
        CHECKF(worst < 1e-4, "contrastive max diff %.3g", worst);
        printf("    case %d: confidence %.6f (ref %.6f), contrastive max diff %.2e\n", ci, logit, ref, worst);
        nd_state_free(s);
        free(cells);
        free(lg);
        free(ids);
    }
    nd_model_free(m);
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) w = fmax(w, fabs((double)a[i] - b[i]));
    return w;
}

/* Prefill of T tokens equals T decode steps; chunking changes nothing. */
static void prefill_vs_decode(const char *file, double tol)
{
    nd_model *m = open_model(file, 0, 0);
    if (!m) return;
    int T, *ids = case_ids(gcase(0), &T);
    int V = m->weights.cfg.vocab_size;
    float *a = run_logits(m, ids, T, 0, 0, 0, 0);
    float *b = run_logits(m, ids, T, 0, 0, 1, 0);
    float *c = run_logits(m, ids, T, 0, 0, 0, 7); /* internal chunks of 7 */
    if (a && b && c) {
        double d1 = max_diff(a, b, (size_t)T * V), d2 = max_diff(a, c, (size_t)T * V);
        CHECKF(d1 <= tol, "%s: prefill vs decode %.3g", file, d1);
        CHECKF(d2 <= tol, "%s: prefill vs chunked %.3g", file, d2);
        printf("    %s: prefill vs decode %.2e, vs chunks of 7 %.2e\n", file, d1, d2);
    }
    free(a), free(b), free(c), free(ids);
    nd_model_free(m);
}
static void test_prefill_equals_decode_f32(void) { prefill_vs_decode(GOLDEN "tiny.safetensors", 1e-5); }
static void test_prefill_equals_decode_cq(void) { prefill_vs_decode(GOLDEN "tiny_mixed.cact", 1e-5); }

/* 1 thread and 2 or 3 threads give the same bits. */
static void test_threads_bit_identical(void)
{
    const char *files[2] = {GOLDEN "tiny.safetensors", GOLDEN "tiny_w4.cact"};
    for (int f = 0; f < 2; f++) {
        float *r[3] = {0};
        int T, *ids = case_ids(gcase(0), &T), V = 0;
        for (int k = 0; k < 3; k++) {
            nd_model *m = open_model(files[f], k + 1, 0);
            if (!m) break;
            V = m->weights.cfg.vocab_size;
            r[k] = run_logits(m, ids, T, 0, 0, k == 2 ? 1 : 0, 0);
            if (k == 2) { /* decode path too: compare against 1-thread decode */
                nd_model *m1 = open_model(files[f], 1, 0);
                float *d1 = run_logits(m1, ids, T, 0, 0, 1, 0);
                CHECKF(d1 && r[2] && !memcmp(d1, r[2], sizeof(float) * (size_t)T * V), "%s: decode 1 vs 3 threads",
                       files[f]);
                free(d1);
                nd_model_free(m1);
            }
            nd_model_free(m);
        }
        if (r[0] && r[1]) CHECKF(!memcmp(r[0], r[1], sizeof(float) * (size_t)T * V), "%s: 1 vs 2 threads", files[f]);
        for (int k = 0; k < 3; k++) free(r[k]);
        free(ids);
    }
}

/* The int8 KV cache (deploy numerics) stays close to the float reference:
 * logits within a few hundredths, decode agrees with prefill, and with a
 * window the ring of int8 entries wraps correctly. */
static void test_kv_int8(void)
{
    nd_model *m = open_model(GOLDEN "tiny.safetensors", 0, 0);
    if (!m) return;
    int V = m->weights.cfg.vocab_size;
    g_kv_bits = 8;
    for (int ci = 0; ci < ncases(); ci++) {
        const nd_json *c = gcase(ci);
        int T, *ids = case_ids(c, &T);
        const char *keys[2] = {"logits_f32", "logits_f32_window6_sink4"};
        for (int k = 0; k < 2; k++) {
            int W = k ? 6 : 0, S = k ? 4 : 0;
            float *pre = run_logits(m, ids, T, W, S, 0, 0), *dec = run_logits(m, ids, T, W, S, 1, 0);
            const nd_json *ref = nd_json_get(c, keys[k]), *pos = nd_json_get(c, "positions");
            double worst = 0;
            int same_arg = 0;
            for (size_t i = 0; i < pos->count; i++) {
                int p = (int)pos->items[i].num;
                for (int v = 0; v < V; v++)
                    worst = fmax(worst, fabs(nd_json_get(ref, "at_positions")->items[i].items[v].num - dec[(size_t)p * V + v]));
            }
            for (int t = 0; t < T; t++) {
                int best = 0;
                for (int v = 1; v < V; v++)
                    if (dec[(size_t)t * V + v] > dec[(size_t)t * V + best]) best = v;
                same_arg += best == (int)nd_json_get(ref, "argmax")->items[t].num;
            }
            double pd = max_diff(pre, dec, (size_t)T * V);
            CHECKF(worst < 0.05, "%s int8 KV: logit diff %.3g", keys[k], worst);
            CHECKF(same_arg >= T - 2, "%s int8 KV: argmax equal at %d of %d", keys[k], same_arg, T);
            CHECKF(pd < 0.05, "%s int8 KV: prefill vs decode %.3g", keys[k], pd);
            printf("    case %d %s int8 KV: max logit diff %.2e, argmax %d/%d, prefill vs decode %.2e\n", ci, keys[k],
                   worst, same_arg, T, pd);
            free(pre), free(dec);
        }
        free(ids);
    }
    g_kv_bits = 0;
    nd_model_free(m);
}

/* Weights whose shapes disagree with the config are refused, not read. */
static void test_model_rejects_bad_shapes(void)
{
    nd_weights w;
    needle_error e = {0};
    CHECK(nd_weights_load(GOLDEN "tiny_w4.cact", &w, &e) == 0);
    nd_layer_weights saved = w.layers[2];
    nd_model *m = NULL;
    w.layers[2].q_proj.rows += 1;
    CHECK(nd_model_create(&w, NULL, &m, &e) == NEEDLE_EFORMAT && m == NULL);
    CHECKF(strstr(e.message, "q_proj[2]") != NULL, "%s", e.message);
    w.layers[2] = saved;
    w.layers[1].phi_res.cols_pad = 64;
    CHECK(nd_model_create(&w, NULL, &m, &e) == NEEDLE_EFORMAT);
    w.layers[1] = w.layers[0];
    w.cfg.mhc_lanes = 17;
    CHECK(nd_model_create(&w, NULL, &m, &e) == NEEDLE_EFORMAT);
    nd_weights_free(&w);
}

/* Sessions of one model in several threads at once give the results of one. */
typedef struct session_thread_arg {
    nd_model *m;
    const int *ids;
    int T;
    float *out;
} session_thread_arg;

static void *session_thread(void *p)
{
    session_thread_arg *a = p;
    a->out = run_logits(a->m, a->ids, a->T, 0, 0, 3, 0);
    return NULL;
}

static void test_sessions_in_threads(void)
{
    nd_model *m = open_model(GOLDEN "tiny_w4.cact", 2, 0);
    if (!m) return;
    int T, *ids = case_ids(gcase(0), &T), V = m->weights.cfg.vocab_size;
    float *ref = run_logits(m, ids, T, 0, 0, 3, 0);
    session_thread_arg args[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        args[i] = (session_thread_arg){.m = m, .ids = ids, .T = T};
        pthread_create(&th[i], NULL, session_thread, &args[i]);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        CHECKF(args[i].out && !memcmp(args[i].out, ref, sizeof(float) * (size_t)T * V), "thread %d differs", i);
        free(args[i].out);
    }
    free(ref);
    free(ids);
    nd_model_free(m);
}

/* Memory stays bounded by window + sinks, and the state API refuses misuse. */
static void test_state_api(void)
{
    nd_model *m = open_model(GOLDEN "tiny_w4.cact", 1, 0);
    if (!m) return;
    nd_state_options so = {.window = 8, .sinks = 2, .max_chunk = 16};
    nd_state *s = NULL;
    needle_error e = {0};
    CHECK(nd_state_create(m, &so, &s, &e) == 0);
    size_t bytes = nd_state_bytes(s);
    float *lg = malloc(sizeof(float) * m->weights.cfg.vocab_size);
    int tok = 5;
    for (int i = 0; i < 300; i++) CHECK(nd_state_eval(s, &tok, 1, NULL, lg, NULL, &e) == 0);
    CHECK(nd_state_position(s) == 300);
    CHECK(nd_state_bytes(s) == bytes);
    CHECK(nd_state_set_sinks(s, 1, &e) == NEEDLE_ESTATE);
    nd_state_reset(s);
    CHECK(nd_state_position(s) == 0);
    CHECK(nd_state_set_sinks(s, 1, &e) == 0);
    CHECK(nd_state_set_sinks(s, 3, &e) == NEEDLE_EINVAL);
    int bad = 999999;
    CHECK(nd_state_eval(s, &bad, 1, NULL, lg, NULL, &e) == NEEDLE_EINVAL);
    CHECK(nd_state_eval(s, &tok, 0, NULL, lg, NULL, &e) == NEEDLE_EINVAL);
    free(lg);
    nd_state_free(s);
    nd_model_free(m);
}

int main(void)
{
    needle_error e = {0};
    char *text = NULL;
    size_t len = 0;
    if (nd_read_file(GOLDEN "tiny.json", &text, &len, &e) || nd_json_parse(text, len, "tiny.json", &golden, &e)) {
        fprintf(stderr, "cannot read golden file: %s\n", e.message);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    free(text);
    RUN(test_golden_f32);
    RUN(test_golden_w4);
    RUN(test_golden_mixed);
    RUN(test_golden_w4_float_path);
    RUN(test_golden_mixed_float_path);
    RUN(test_golden_window_sinks);
    RUN(test_golden_heads);
    RUN(test_prefill_equals_decode_f32);
    RUN(test_prefill_equals_decode_cq);
    RUN(test_threads_bit_identical);
    RUN(test_kv_int8);
    RUN(test_state_api);
    RUN(test_model_rejects_bad_shapes);
    RUN(test_sessions_in_threads);
    nd_json_free(golden);
    return check_summary();
}
