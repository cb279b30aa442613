/* test_a8_golden.c - the A8 deploy numerics held to the reference
 * (tests/golden/tiny_a8.json, deploy_numerics.md section 8):
 *   1. the quantiser reproduces fake_quant_unit exactly;
 *   2. the engine's int8 codes and scales at every A8 point, in program
 *      order, match the reference's up to the first difference, which must
 *      sit on a near tie of the reference run;
 *   3. logits before that position within 1e-4, after it within the band
 *      (max abs 0.035, logsumexp 1e-3); argmax identical at every position.
 * The codes come from a debug hook: the test wraps the instance's matmul_a8
 * op and quantises the rows it receives with the same quantiser. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "check.h"
#include "core/file.h"
#include "core/json.h"
#include "model/model.h"
#include "quant/act_quant.h"

#define GOLDEN "tests/golden/"

static nd_json *golden;

/* ---- the hook: every matmul_a8 call's input rows, quantised */
#define MAX_CALLS 1024 /* 11 points x 50 tokens fed one at a time */
typedef struct a8_call {
    int T, D;
    int8_t *codes;
    float *scales;
} a8_call;
static a8_call calls[MAX_CALLS];
static int n_calls;
static void (*real_matmul_a8)(const nd_backend *, int, const nd_matrix *const *, const float *, int, int,
                              float *const *, const int *, float *);

static void recording_matmul_a8(const nd_backend *be, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                                float *const *y, const int *ldy, float *work)
{
    if (n_calls < MAX_CALLS) {
        a8_call *c = &calls[n_calls++];
        c->T = T, c->D = w[0]->cols;
        c->codes = malloc((size_t)T * c->D);
        c->scales = malloc(sizeof(float) * (size_t)T);
        for (int t = 0; t < T; t++) c->scales[t] = nd_act_quant_i8(x + (size_t)t * ldx, c->D, c->codes + (size_t)t * c->D);
    }
    real_matmul_a8(be, n, w, x, T, ldx, y, ldy, work);
}

static void clear_calls(void)
{
    for (int i = 0; i < n_calls; i++) free(calls[i].codes), free(calls[i].scales);
    n_calls = 0;
}

static void test_fake_quant_unit(void)
{
    const nd_json *u = nd_json_get(golden, "fake_quant_unit");
    CHECK(u && u->count >= 5);
    for (size_t i = 0; u && i < u->count; i++) {
        const nd_json *x = nd_json_get(&u->items[i], "x"), *codes = nd_json_get(&u->items[i], "codes");
        float xv[64];
        int8_t c[64];
        int n = (int)x->count;
        for (int k = 0; k < n; k++) xv[k] = (float)x->items[k].num;
        float s = nd_act_quant_i8(xv, n, c);
        CHECKF(s == (float)nd_json_get(&u->items[i], "scale")->num, "unit %zu: scale %.9g", i, s);
        for (int k = 0; k < n; k++) CHECKF(c[k] == (int)codes->items[k].num, "unit %zu code %d: %d", i, k, c[k]);
    }
}

/* Is (point, index, pos, col) one of the reference's near ties? */
static int near_tie(const nd_json *cs, const char *point, int index, int pos, int col)
{
    const nd_json *ties = nd_json_get(cs, "near_ties_1e-4");
    for (size_t i = 0; ties && i < ties->count; i++) {
        const nd_json *t = &ties->items[i], *at = nd_json_get(t, "at");
        if (!strcmp(nd_json_get(t, "point")->str, point) && (int)nd_json_get(t, "index")->num == index &&
            (int)at->items[0].num == pos && (int)at->items[1].num == col)
            return 1;
    }
    return 0;
}

/* Gather the recorded calls into one [T, D] code matrix and T scales per
 * point: the engine runs the points in the reference's program order once
 * per chunk, so call k of a chunk is point k % points. */
static void assemble_calls(int points, int T)
{
    a8_call merged[MAX_CALLS];
    int rows[MAX_CALLS] = {0};
    for (int p = 0; p < points; p++) {
        merged[p].T = T, merged[p].D = calls[p].D;
        merged[p].codes = malloc((size_t)T * calls[p].D);
        merged[p].scales = malloc(sizeof(float) * (size_t)T);
    }
    for (int k = 0; k < n_calls; k++) {
        int p = k % points;
        if (calls[k].D != merged[p].D || rows[p] + calls[k].T > T) continue;
        memcpy(merged[p].codes + (size_t)rows[p] * merged[p].D, calls[k].codes, (size_t)calls[k].T * calls[k].D);
        memcpy(merged[p].scales + rows[p], calls[k].scales, sizeof(float) * (size_t)calls[k].T);
        rows[p] += calls[k].T;
    }
    clear_calls();
    for (int p = 0; p < points; p++) calls[p] = merged[p];
    n_calls = points;
}

/* Run one case fed in pieces of `step` tokens (step 1: every matmul is a
 * decode-sized one, the integer kernels; the whole case at once: the batch
 * path); returns the first position whose codes differ (T if none). */
static int check_case(nd_model *m, const nd_json *cs, int kv_bits, int step, double *max_before, double *max_after)
{
    const nd_json *ids = nd_json_get(cs, "ids");
    size_t n_ids = ids->count; /* a golden case has at least one id (checked by the caller's schema) */
    int T = (int)n_ids, V = m->weights.cfg.vocab_size;
    int *tok = malloc(sizeof(int) * (size_t)T);
    for (int i = 0; i < T; i++) tok[i] = (int)ids->items[i].num;
    nd_state_options so = {.max_chunk = T, .kv_bits = kv_bits};
    nd_state *s = NULL;
    needle_error e = {0};
    float *lg = malloc(sizeof(float) * (size_t)T * V);
    uint8_t *want = malloc(n_ids);
    memset(want, 1, n_ids);
    clear_calls();
    int rc = nd_state_create(m, &so, &s, &e);
    for (int t0 = 0; t0 < T && !rc; t0 += step) {
        int n = T - t0 < step ? T - t0 : step;
        rc = nd_state_eval(s, tok + t0, n, want, lg + (size_t)t0 * V, NULL, &e);
    }
    CHECKF(rc == 0, "eval: %s", e.message);
    nd_state_free(s);
    assemble_calls((int)nd_json_get(cs, "a8_points")->count, T);

    /* codes, point by point in program order */
    const nd_json *pts = nd_json_get(cs, "a8_points");
    CHECKF((int)pts->count == n_calls, "%zu reference points, %d engine A8 matmuls", pts->count, n_calls);
    int first = T, first_pt = -1;
    for (int i = 0; i < n_calls && i < (int)pts->count; i++) {
        const nd_json *p = &pts->items[i], *shape = nd_json_get(p, "shape");
        int D = (int)shape->items[1].num;
        CHECKF((int)shape->items[0].num == calls[i].T && D == calls[i].D, "point %d shape", i);
        if (calls[i].T != T || calls[i].D != D) continue;
        uint8_t *ref = malloc((size_t)T * D);
        const nd_json *b64 = nd_json_get(p, "codes_b64");
        CHECK(b64_decode(b64->str, b64->len, ref, (size_t)T * D) == (size_t)T * D);
        for (int t = 0; t < T; t++)
            for (int k = 0; k < D; k++)
                if ((int8_t)ref[(size_t)t * D + k] != calls[i].codes[(size_t)t * D + k] && t < first) first = t, first_pt = i;
        free(ref);
    }
    /* positions before the first difference: identical codes (checked by
     * construction) and scales to float32 rounding; the first difference
     * itself must be on a near tie of the reference run */
    for (int i = 0; i < n_calls && i < (int)pts->count; i++) {
        const nd_json *sc = nd_json_get(&pts->items[i], "scales");
        for (int t = 0; t < first && t < (int)sc->count; t++)
            CHECKF(fabs(calls[i].scales[t] - sc->items[t].num) <= 2e-6 * fabs(sc->items[t].num), "point %d pos %d scale %.9g vs %.9g",
                   i, t, calls[i].scales[t], sc->items[t].num);
    }
    if (first_pt >= 0) {
        const nd_json *p = &pts->items[first_pt];
        const char *point = nd_json_get(p, "point")->str;
        int index = (int)nd_json_get(p, "index")->num, D = calls[first_pt].D;
        uint8_t *ref = malloc((size_t)T * D);
        b64_decode(nd_json_get(p, "codes_b64")->str, nd_json_get(p, "codes_b64")->len, ref, (size_t)T * D);
        for (int k = 0; k < D; k++)
            if ((int8_t)ref[(size_t)first * D + k] != calls[first_pt].codes[(size_t)first * D + k]) {
                CHECKF(near_tie(cs, point, index, first, k), "first differing code %s[%d] pos %d col %d (%d vs %d) is not a near tie",
                       point, index, first, k, calls[first_pt].codes[(size_t)first * D + k], (int8_t)ref[(size_t)first * D + k]);
                printf("        first differing code: %s[%d] position %d column %d (a reference near tie)\n", point, index,
                       first, k);
            }
        free(ref);
    }

    /* logits: before `first` like float goldens, after it within the band */
    const nd_json *ref = nd_json_get(cs, "logits_a8"), *pos = nd_json_get(cs, "positions");
    const nd_json *at = nd_json_get(ref, "at_positions"), *am = nd_json_get(ref, "argmax"), *lse = nd_json_get(ref, "logsumexp");
    *max_before = 0, *max_after = 0;
    for (size_t i = 0; i < pos->count; i++) {
        int p = (int)pos->items[i].num;
        double worst = 0;
        for (int v = 0; v < V; v++) {
            double d = fabs(at->items[i].items[v].num - lg[(size_t)p * V + v]);
            worst = d > worst ? d : worst;
        }
        if (p < first) *max_before = worst > *max_before ? worst : *max_before;
        else *max_after = worst > *max_after ? worst : *max_after;
    }
    CHECKF(*max_before <= 1e-4, "logits before the first differing code: %.3g", *max_before);
    CHECKF(*max_after <= 0.035, "logits after the first differing code: %.3g (band 0.03)", *max_after);
    int bad_arg = 0;
    double worst_lse = 0;
    for (int t = 0; t < T; t++) {
        const float *row = lg + (size_t)t * V;
        int best = 0;
        for (int v = 1; v < V; v++) best = row[v] > row[best] ? v : best;
        bad_arg += best != (int)am->items[t].num;
        double s = 0;
        for (int v = 0; v < V; v++) s += exp(row[v] - row[best]);
        double d = fabs(row[best] + log(s) - lse->items[t].num);
        worst_lse = d > worst_lse ? d : worst_lse;
    }
    CHECKF(bad_arg == 0, "%d positions with a different argmax", bad_arg);
    CHECKF(worst_lse <= 1e-3, "logsumexp differs by %.3g", worst_lse);
    printf("        %d ids: codes equal before position %d; max |logit diff| %.2e before, %.2e after; logsumexp %.2e; "
           "argmax %d/%d\n",
           T, first, *max_before, *max_after, worst_lse, T - bad_arg, T);
    free(tok), free(lg), free(want);
    return first;
}

static nd_model *open_a8(void)
{
    nd_model_options o = {.threads = 1}; /* acts 0: A8, the default */
    nd_model *m = NULL;
    needle_error e = {0};
    int rc = nd_model_open(GOLDEN "tiny_w4.cact", &o, &m, &e);
    CHECKF(rc == 0, "open: %s", e.message);
    if (rc) return NULL;
    CHECK(m->acts == NEEDLE_ACTS_A8);
    real_matmul_a8 = m->be->ops.matmul_a8;
    m->be->ops.matmul_a8 = recording_matmul_a8;
    return m;
}

/* The reference keeps K/V in float (Needle 2 maps kv_bits 8 to none). */
static void test_golden_a8_float_kv(void)
{
    nd_model *m = open_a8();
    if (!m) return;
    const nd_json *cases = nd_json_get(golden, "cases");
    for (size_t i = 0; i < cases->count; i++) {
        double before, after;
        check_case(m, &cases->items[i], 32, (int)nd_json_get(&cases->items[i], "ids")->count, &before, &after);
        check_case(m, &cases->items[i], 32, 1, &before, &after);
        check_case(m, &cases->items[i], 32, 3, &before, &after);
    }
    clear_calls();
    nd_model_free(m);
}

/* Our own int8 KV cache on top, decoding token by token so every key and
 * value is read back from the cache: logits within the A8 band, argmax
 * identical at every position. */
static void test_golden_a8_int8_kv_decode(void)
{
    nd_model *m = open_a8();
    if (!m) return;
    const nd_json *cases = nd_json_get(golden, "cases");
    for (size_t ci = 0; ci < cases->count; ci++) {
        const nd_json *cs = &cases->items[ci], *ids = nd_json_get(cs, "ids");
        const nd_json *ref = nd_json_get(cs, "logits_a8"), *pos = nd_json_get(cs, "positions");
        int T = (int)ids->count, V = m->weights.cfg.vocab_size;
        nd_state_options so = {.kv_bits = 8};
        nd_state *s = NULL;
        needle_error e = {0};
        float *lg = malloc(sizeof(float) * (size_t)T * V);
        int rc = nd_state_create(m, &so, &s, &e);
        for (int t = 0; t < T && !rc; t++) {
            int tok = (int)ids->items[t].num;
            rc = nd_state_eval(s, &tok, 1, NULL, lg + (size_t)t * V, NULL, &e);
        }
        CHECKF(rc == 0, "eval: %s", e.message);
        nd_state_free(s);
        clear_calls();
        double worst = 0;
        for (size_t i = 0; i < pos->count; i++) {
            int p = (int)pos->items[i].num;
            for (int v = 0; v < V; v++) {
                double d = fabs(nd_json_get(ref, "at_positions")->items[i].items[v].num - lg[(size_t)p * V + v]);
                worst = d > worst ? d : worst;
            }
        }
        int bad = 0;
        for (int t = 0; t < T; t++) {
            int best = 0;
            for (int v = 1; v < V; v++) best = lg[(size_t)t * V + v] > lg[(size_t)t * V + best] ? v : best;
            bad += best != (int)nd_json_get(ref, "argmax")->items[t].num;
        }
        CHECKF(worst <= 0.035, "int8 KV: max |logit diff| %.3g", worst);
        CHECKF(bad == 0, "int8 KV: %d positions with a different argmax", bad);
        printf("        int8 KV, decode: %d ids, max |logit diff| %.2e, argmax %d/%d\n", T, worst, T - bad, T);
        free(lg);
    }
    nd_model_free(m);
}

int main(void)
{
    char *text = NULL;
    size_t len = 0;
    needle_error e = {0};
    if (nd_read_file(GOLDEN "tiny_a8.json", &text, &len, &e) || nd_json_parse(text, len, "tiny_a8.json", &golden, &e)) {
        fprintf(stderr, "%s\n", e.message);
        return 1;
    }
    free(text);
    RUN(test_fake_quant_unit);
    RUN(test_golden_a8_float_kv);
    RUN(test_golden_a8_int8_kv_decode);
    nd_json_free(golden);
    return check_summary();
}
