/* test_needle3_a8.c - Needle 3's A8 deploy numerics held to the reference
 * (tests/golden/needle3/n3_tiny_a8.json and n3_small_a8.json, copied from the
 * shared golden folder; deploy_numerics.md sections 4 and 8):
 *   1. the quantiser (and the backend's act_quant op) reproduces
 *      fake_quant_unit (fake_quant_act and a8_fake_quant_kv);
 *   2. the engine's int8 codes and scales at every A8 point (engram.e, mhc.nx,
 *      attn.in, attn.q, attn.k, attn.v, attn.out, logits.in), in program
 *      order, match the reference's up to the first difference, which must
 *      sit on a near tie of the reference run; scales before it to float32
 *      rounding;
 *   3. logits before that position within 1e-4, from it on within the A8
 *      band (max abs 0.035, logsumexp 1e-3), argmax identical at every
 *      position except where the golden's top-2 margin is below 0.01;
 * on the CQ path (integer kernels) and the float path, fed whole, one token
 * at a time and three at a time, with the default (int8, per-head) KV cache;
 * and incremental decode equal to the whole-sequence forward under A8.
 * The codes come from a debug hook: the test wraps the instance's matmul_a8
 * and act_quant ops and quantises the rows they receive with the one
 * quantiser (quant/act_quant.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "check.h"
#include "core/file.h"
#include "core/json.h"
#include "model/model.h"
#include "model/params.h"
#include "quant/act_quant.h"

#define DIR "tests/golden/needle3/"

/* ---- the hook: every A8 call's vectors, quantised, in program order */
#define MAX_CALLS 8192 /* 39 points x 108 tokens fed one at a time */
typedef struct a8_call {
    int count, D; /* vectors, and their length */
    int8_t *codes;
    float *scales;
} a8_call;
static a8_call calls[MAX_CALLS];
static int n_calls;
static void (*real_matmul_a8)(const nd_backend *, int, const nd_matrix *const *, const float *, int, int,
                              float *const *, const int *, float *);
static void (*real_act_quant)(const nd_backend *, float *, int, int, int8_t *, float *);

static void record(const float *x, int count, int D, int ldx)
{
    if (n_calls >= MAX_CALLS) return;
    a8_call *c = &calls[n_calls++];
    c->count = count, c->D = D;
    c->codes = malloc((size_t)count * D);
    c->scales = malloc(sizeof(float) * (size_t)count);
    for (int i = 0; i < count; i++) c->scales[i] = nd_act_quant_i8(x + (size_t)i * ldx, D, c->codes + (size_t)i * D);
}

static void recording_matmul_a8(const nd_backend *be, int n, const nd_matrix *const *w, const float *x, int T, int ldx,
                                float *const *y, const int *ldy, float *work)
{
    record(x, T, w[0]->cols, ldx);
    real_matmul_a8(be, n, w, x, T, ldx, y, ldy, work);
}

static void recording_act_quant(const nd_backend *be, float *x, int n, int count, int8_t *codes, float *scales)
{
    record(x, count, n, n);
    real_act_quant(be, x, n, count, codes, scales);
}

static void clear_calls(void)
{
    for (int i = 0; i < n_calls; i++) free(calls[i].codes), free(calls[i].scales);
    n_calls = 0;
}

static nd_json *load_json(const char *path)
{
    needle_error e = {0};
    char *text = NULL;
    size_t len = 0;
    nd_json *j = NULL;
    if (nd_read_file(path, &text, &len, &e) || nd_json_parse(text, len, path, &j, &e))
        fprintf(stderr, "cannot read %s: %s\n", path, e.message);
    free(text);
    return j;
}

/* Equal, or one float32 ulp apart (the reference returns v + (v' - v)). */
static int within_ulp(float a, float b) { return a == b || nextafterf(a, INFINITY) == b || nextafterf(a, -INFINITY) == b; }

static void check_unit(const nd_json *g, const char *name)
{
    const nd_json *u = nd_json_get(g, "fake_quant_unit");
    CHECK(u && u->count >= 4);
    nd_model_options o = {.threads = 1};
    nd_model *m = NULL;
    needle_error e = {0};
    CHECKF(nd_model_open(DIR "n3_tiny.cact", &o, &m, &e) == 0, "%s", e.message);
    for (size_t i = 0; u && i < u->count; i++) {
        const nd_json *x = nd_json_get(&u->items[i], "x");
        const char *fields[2] = {"fake_quant_act", "a8_fake_quant_kv"};
        for (int f = 0; f < 2; f++) {
            const nd_json *want = nd_json_get(&u->items[i], fields[f]);
            float a[64], b[64];
            int n = (int)x->count;
            for (int k = 0; k < n; k++) a[k] = b[k] = (float)x->items[k].num;
            nd_act_fake_quant(a, n, NULL);
            if (m) m->be->ops.act_quant(m->be, b, n, 1, NULL, NULL);
            for (int k = 0; k < n; k++) {
                CHECKF(within_ulp(a[k], (float)want->items[k].num), "%s unit %zu %s[%d]: %.9g vs %.9g", name, i,
                       fields[f], k, a[k], want->items[k].num);
                CHECKF(!m || a[k] == b[k], "%s unit %zu: act_quant op differs from the quantiser", name, i);
            }
        }
    }
    nd_model_free(m);
}

static void test_fake_quant_unit(void)
{
    nd_json *t = load_json(DIR "n3_tiny_a8.json"), *s = load_json(DIR "n3_small_a8.json");
    CHECK(t && s);
    if (t) check_unit(t, "n3_tiny_a8");
    if (s) check_unit(s, "n3_small_a8");
    nd_json_free(t);
    nd_json_free(s);
}

/* Is (point, index, pos, head, col) one of the reference's near ties? */
static int near_tie(const nd_json *g, const char *point, int index, int pos, int head, int col, int dims)
{
    const nd_json *ties = nd_json_get(g, "near_ties_1e-4");
    for (size_t i = 0; ties && i < ties->count; i++) {
        const nd_json *t = &ties->items[i], *at = nd_json_get(t, "at");
        if (strcmp(nd_json_get(t, "point")->str, point) || (int)nd_json_get(t, "index")->num != index) continue;
        if ((int)at->count != dims || (int)at->items[0].num != pos) continue;
        if (dims == 2 && (int)at->items[1].num == col) return 1;
        if (dims == 3 && (int)at->items[1].num == head && (int)at->items[2].num == col) return 1;
    }
    return 0;
}

/* One golden point: per position `heads` vectors of `D`. */
typedef struct point_shape {
    int T, heads, D, dims;
} point_shape;

static point_shape shape_of(const nd_json *p)
{
    const nd_json *sh = nd_json_get(p, "shape");
    point_shape s = {(int)sh->items[0].num, 1, (int)sh->items[sh->count - 1].num, (int)sh->count};
    if (sh->count == 3) s.heads = (int)sh->items[1].num;
    return s;
}

/* Gather the recorded calls into one [T*heads, D] code matrix per point: the
 * engine runs the points in the reference's program order once per chunk, so
 * call k of the run is point k % points; returns 0 when the calls do not fit. */
static int assemble_calls(const nd_json *pts)
{
    int points = (int)pts->count, ok = n_calls % points == 0;
    a8_call merged[64];
    int rows[64] = {0};
    if (points > 64) return 0;
    for (int p = 0; p < points; p++) {
        point_shape sh = shape_of(&pts->items[p]);
        merged[p].count = sh.T * sh.heads, merged[p].D = sh.D;
        merged[p].codes = calloc((size_t)merged[p].count, (size_t)sh.D);
        merged[p].scales = calloc((size_t)merged[p].count, sizeof(float));
    }
    for (int k = 0; k < n_calls; k++) {
        int p = k % points;
        if (calls[k].D != merged[p].D || rows[p] + calls[k].count > merged[p].count) {
            ok = 0;
            continue;
        }
        memcpy(merged[p].codes + (size_t)rows[p] * merged[p].D, calls[k].codes, (size_t)calls[k].count * calls[k].D);
        memcpy(merged[p].scales + rows[p], calls[k].scales, sizeof(float) * (size_t)calls[k].count);
        rows[p] += calls[k].count;
    }
    for (int p = 0; p < points; p++) ok &= rows[p] == merged[p].count;
    clear_calls();
    for (int p = 0; p < points; p++) calls[p] = merged[p];
    n_calls = points;
    return ok;
}

static nd_model *open_a8(const char *file, int dequant)
{
    char path[256];
    snprintf(path, sizeof path, DIR "%s", file);
    nd_model_options o = {.threads = 1, .dequantize = dequant}; /* acts 0: A8, the default */
    nd_model *m = NULL;
    needle_error e = {0};
    int rc = nd_model_open(path, &o, &m, &e);
    CHECKF(rc == 0, "open %s: %s", path, e.message);
    if (rc) return NULL;
    CHECK(m->acts == NEEDLE_ACTS_A8 && nd_config_generation(&m->weights.cfg) == 3);
    real_matmul_a8 = m->be->ops.matmul_a8;
    real_act_quant = m->be->ops.act_quant;
    m->be->ops.matmul_a8 = recording_matmul_a8;
    m->be->ops.act_quant = recording_act_quant;
    return m;
}

/* Logits of every position, fed `step` tokens at a time, default session
 * (kv_bits 8 under A8: the per-head int8 cache); the hook records the calls. */
static float *run(nd_model *m, const int *ids, int T, int step, int *kv_bits)
{
    nd_state_options so = {.max_chunk = T};
    nd_state *s = NULL;
    needle_error e = {0};
    int V = m->weights.cfg.vocab_size;
    float *lg = malloc(sizeof(float) * (size_t)T * V);
    uint8_t *want = malloc((size_t)T);
    memset(want, 1, (size_t)T);
    clear_calls();
    int rc = nd_state_create(m, &so, &s, &e);
    if (!rc) *kv_bits = nd_state_kv_bits(s);
    for (int t0 = 0; t0 < T && !rc; t0 += step) {
        int n = T - t0 < step ? T - t0 : step;
        rc = nd_state_eval(s, ids + t0, n, want, lg + (size_t)t0 * V, NULL, &e);
    }
    CHECKF(rc == 0, "eval: %s", e.message);
    nd_state_free(s);
    free(want);
    if (rc) {
        free(lg);
        return NULL;
    }
    return lg;
}

/* Compare the assembled calls with the golden's points; returns the first
 * position whose codes differ (T if none), after checking that the first
 * difference is a near tie and the scales before it agree. */
static int check_codes(const char *what, const nd_json *g, int T)
{
    const nd_json *pts = nd_json_get(g, "a8_points");
    int first = T, first_pt = -1;
    long long codes = 0, equal = 0;
    double worst_scale = 0;
    for (int i = 0; i < n_calls; i++) {
        const nd_json *p = &pts->items[i];
        point_shape sh = shape_of(p);
        size_t n = (size_t)sh.T * sh.heads * sh.D;
        uint8_t *ref = malloc(n);
        const nd_json *b64 = nd_json_get(p, "codes_b64");
        CHECKF(b64_decode(b64->str, b64->len, ref, n) == n, "%s: point %d codes", what, i);
        for (int t = 0; t < sh.T; t++)
            for (size_t k = 0; k < (size_t)sh.heads * sh.D; k++) {
                size_t at = (size_t)t * sh.heads * sh.D + k;
                codes++;
                if ((int8_t)ref[at] == calls[i].codes[at]) equal++;
                else if (t < first) first = t, first_pt = i;
            }
        free(ref);
    }
    for (int i = 0; i < n_calls; i++) {
        const nd_json *sc = nd_json_get(&pts->items[i], "scales");
        point_shape sh = shape_of(&pts->items[i]);
        for (int v = 0; v < first * sh.heads && v < (int)sc->count; v++) {
            double ref = sc->items[v].num, d = fabs(calls[i].scales[v] - ref) / (ref > 0 ? ref : 1.0);
            worst_scale = d > worst_scale ? d : worst_scale;
        }
    }
    /* float32 rounding: the inputs themselves carry a few ulps of float noise */
    CHECKF(worst_scale <= 1e-5, "%s: scales before position %d differ by %.3g relative", what, first, worst_scale);
    if (first_pt >= 0) {
        const nd_json *p = &pts->items[first_pt];
        point_shape sh = shape_of(p);
        const char *point = nd_json_get(p, "point")->str;
        int index = (int)nd_json_get(p, "index")->num, W = sh.heads * sh.D;
        uint8_t *ref = malloc((size_t)sh.T * W);
        b64_decode(nd_json_get(p, "codes_b64")->str, nd_json_get(p, "codes_b64")->len, ref, (size_t)sh.T * W);
        for (int k = 0; k < W; k++) {
            int8_t r = (int8_t)ref[(size_t)first * W + k], o = calls[first_pt].codes[(size_t)first * W + k];
            if (r == o) continue;
            int head = k / sh.D, col = k % sh.D;
            CHECKF(near_tie(g, point, index, first, head, col, sh.dims),
                   "%s: first differing code %s[%d] pos %d head %d col %d (%d vs %d) is not a near tie", what, point,
                   index, first, head, col, o, r);
            printf("        %s: first differing code %s[%d] position %d head %d column %d (%d vs %d, a reference near tie)\n",
                   what, point, index, first, head, col, o, r);
        }
        free(ref);
    }
    printf("        %s: %lld / %lld codes equal, all equal before position %d; scales %.2g relative\n", what, equal,
           codes, first, worst_scale);
    return first;
}

/* Logits against logits_a8: before `first` within 1e-4, from it on within
 * the band; logsumexp 1e-3 and argmax (margin >= 0.01) at every position. */
static void check_logits(const char *what, const nd_model *m, const float *lg, const nd_json *g, int first, int T)
{
    const nd_json *ref = nd_json_get(g, "logits_a8"), *pos = nd_json_get(g, "positions");
    const nd_json *at = nd_json_get(ref, "at_positions"), *top = nd_json_get(ref, "top64_at_positions");
    const nd_json *am = nd_json_get(ref, "argmax"), *lse = nd_json_get(ref, "logsumexp"),
                  *margin = nd_json_get(ref, "top2_margin");
    int V = m->weights.cfg.vocab_size, W = (int)nd_json_get(ref, "width")->num;
    CHECK(W == nd_config_logit_width(&m->weights.cfg));
    double before = 0, after = 0;
    for (size_t i = 0; i < pos->count; i++) {
        int p = (int)pos->items[i].num;
        const float *row = lg + (size_t)p * V;
        double worst = 0;
        for (int v = 0; v < W; v++) worst = fmax(worst, fabs(at->items[i].items[v].num - row[v]));
        const nd_json *ti = nd_json_get(&top->items[i], "ids"), *tv = nd_json_get(&top->items[i], "values");
        for (size_t k = 0; k < ti->count; k++) worst = fmax(worst, fabs(row[(int)ti->items[k].num] - tv->items[k].num));
        for (int v = W; v < V; v++) CHECKF(isinf(row[v]) && row[v] < 0, "%s: column %d past out_vocab", what, v);
        if (p < first) before = fmax(before, worst);
        else after = fmax(after, worst);
    }
    CHECKF(before <= 1e-4, "%s: logits before the first differing code: %.3g", what, before);
    CHECKF(after <= 0.035, "%s: logits after the first differing code: %.3g (band 0.03)", what, after);
    int bad = 0, low_margin_flips = 0;
    double worst_lse = 0;
    for (int t = 0; t < T; t++) {
        const float *row = lg + (size_t)t * V;
        int best = 0;
        for (int v = 1; v < W; v++) best = row[v] > row[best] ? v : best;
        if (best != (int)am->items[t].num) {
            if (margin->items[t].num >= 0.01) bad++;
            else low_margin_flips++;
        }
        double s = 0;
        for (int v = 0; v < W; v++) s += exp((double)row[v] - row[best]);
        worst_lse = fmax(worst_lse, fabs(row[best] + log(s) - lse->items[t].num));
    }
    CHECKF(bad == 0, "%s: %d positions with a different argmax (top-2 margin >= 0.01)", what, bad);
    CHECKF(worst_lse <= 1e-3, "%s: logsumexp differs by %.3g", what, worst_lse);
    printf("        %s: max |logit diff| %.2e before position %d, %.2e from it; logsumexp %.2e; argmax %d/%d "
           "(%d flips at a top-2 margin < 0.01)\n",
           what, before, first, after, worst_lse, T - bad - low_margin_flips, T, low_margin_flips);
}

static int *json_ints(const nd_json *a, int *n)
{
    int *v = malloc(sizeof(int) * (a->count ? a->count : 1));
    for (size_t i = 0; i < a->count; i++) v[i] = (int)a->items[i].num;
    *n = (int)a->count;
    return v;
}

/* One golden file: codes, scales and logits on both paths and three feeds,
 * then decode (one token at a time) against the whole-sequence forward. */
static void golden_file(const char *cact, const char *json)
{
    nd_json *g = load_json(json);
    CHECK(g != NULL);
    if (!g) return;
    int T;
    int *ids = json_ints(nd_json_get(g, "ids"), &T);
    const nd_json *pts = nd_json_get(g, "a8_points");
    for (int dequant = 0; dequant <= 1; dequant++) {
        nd_model *m = open_a8(cact, dequant);
        if (!m) continue;
        int V = m->weights.cfg.vocab_size, W = nd_config_logit_width(&m->weights.cfg);
        int steps[3] = {T, 1, 3}, first[3] = {0};
        float *lg[3] = {NULL};
        for (int k = 0; k < 3; k++) {
            if (dequant && k == 2) continue;
            char what[160];
            snprintf(what, sizeof what, "%s %s, %d at a time", cact, dequant ? "float path" : "CQ path", steps[k]);
            int kv_bits = 0;
            lg[k] = run(m, ids, T, steps[k], &kv_bits);
            CHECKF(kv_bits == 8, "%s: default KV cache %d bits under A8", what, kv_bits);
            int fits = assemble_calls(pts);
            CHECKF(fits, "%s: the engine's A8 calls do not line up with the %zu reference points", what, pts->count);
            if (!lg[k] || !fits) continue;
            first[k] = check_codes(what, g, T);
            check_logits(what, m, lg[k], g, first[k], T);
        }
        /* incremental decode equals the whole-sequence forward: to float
         * rounding up to the first position where the two runs' codes can
         * differ (before both runs' first difference from the reference,
         * both equal the reference's), within the A8 band after it */
        if (lg[0] && lg[1]) {
            int agree = first[0] < first[1] ? first[0] : first[1];
            double before = 0, after = 0;
            int bad = 0;
            const nd_json *margin = nd_json_get(nd_json_get(g, "logits_a8"), "top2_margin");
            for (int t = 0; t < T; t++) {
                const float *a = lg[0] + (size_t)t * V, *b = lg[1] + (size_t)t * V;
                double w = 0;
                int ba = 0, bb = 0;
                for (int v = 0; v < W; v++) {
                    w = fmax(w, fabs(a[v] - b[v]));
                    ba = a[v] > a[ba] ? v : ba, bb = b[v] > b[bb] ? v : bb;
                }
                if (t < agree) before = fmax(before, w);
                else after = fmax(after, w);
                bad += ba != bb && margin->items[t].num >= 0.01;
            }
            CHECKF(before <= 1e-4 && after <= 0.035 && bad == 0,
                   "%s: decode vs prefill %.3g before position %d, %.3g after, %d argmax differences", cact, before,
                   agree, after, bad);
            printf("        %s %s: decode vs prefill max |diff| %.2e before position %d, %.2e from it\n", cact,
                   dequant ? "float path" : "CQ path", before, agree, after);
        }
        for (int k = 0; k < 3; k++) free(lg[k]);
        clear_calls();
        nd_model_free(m);
    }
    free(ids);
    nd_json_free(g);
}

static void test_n3_tiny_a8(void) { golden_file("n3_tiny.cact", DIR "n3_tiny_a8.json"); }
static void test_n3_small_a8(void) { golden_file("n3_small.cact", DIR "n3_small_a8.json"); }

/* The recorded calls of a run made of chunks of P calls each, as one code
 * array per point in position order (call k belongs to point k % P). */
static int8_t **flatten_calls(int P, size_t *len)
{
    int8_t **out = calloc((size_t)P, sizeof *out);
    for (int p = 0; p < P; p++) {
        len[p] = 0;
        for (int k = p; k < n_calls; k += P) len[p] += (size_t)calls[k].count * calls[k].D;
        out[p] = malloc(len[p] ? len[p] : 1);
        size_t at = 0;
        for (int k = p; k < n_calls; k += P) {
            memcpy(out[p] + at, calls[k].codes, (size_t)calls[k].count * calls[k].D);
            at += (size_t)calls[k].count * calls[k].D;
        }
    }
    return out;
}

/* Float activations with the int8 cache (the reference's act_bits 0,
 * kv_bits 8: only k and v are quantised, per head and position): decode
 * equals prefill to float rounding up to the first position where the two
 * runs' k/v codes differ (a rounding tie the two matmul paths' float noise
 * puts on either side), within the A8 band after it, argmax everywhere. */
static void test_int8_kv_decode_equals_prefill(void)
{
    const char *files[2] = {"n3_tiny.cact", "n3_small.cact"};
    const char *goldens[2] = {DIR "n3_tiny.json", DIR "n3_small.json"};
    for (int f = 0; f < 2; f++) {
        nd_json *g = load_json(goldens[f]);
        nd_model *m = open_a8(files[f], 0);
        if (!g || !m) {
            nd_json_free(g);
            nd_model_free(m);
            continue;
        }
        m->acts = NEEDLE_ACTS_FLOAT; /* before any session: only the int8 cache quantises */
        const nd_config *c = &m->weights.cfg;
        int T, V = c->vocab_size, W = nd_config_logit_width(c), P = 2 * c->num_layers;
        int *ids = json_ints(nd_json_get(g, "ids"), &T);
        float *out[2] = {NULL, NULL};
        int8_t **codes[2] = {NULL, NULL};
        size_t len[2][128];
        for (int k = 0; k < 2 && P <= 128; k++) {
            nd_state_options so = {.kv_bits = 8, .max_chunk = T};
            nd_state *s = NULL;
            needle_error e = {0};
            out[k] = malloc(sizeof(float) * (size_t)T * V);
            uint8_t *want = malloc((size_t)T);
            memset(want, 1, (size_t)T);
            clear_calls();
            int rc = nd_state_create(m, &so, &s, &e), step = k ? 1 : T;
            for (int t0 = 0; t0 < T && !rc; t0 += step)
                rc = nd_state_eval(s, ids + t0, T - t0 < step ? T - t0 : step, want, out[k] + (size_t)t0 * V, NULL, &e);
            CHECKF(rc == 0, "%s", e.message);
            CHECKF(n_calls == P * (k ? T : 1), "%s: %d act_quant calls (k and v per layer and chunk)", files[f], n_calls);
            codes[k] = flatten_calls(P, len[k]);
            nd_state_free(s);
            free(want);
        }
        int first = T;
        for (int p = 0; p < P && codes[0] && codes[1]; p++) {
            size_t per_pos = len[0][p] / (size_t)T;
            for (size_t i = 0; i < len[0][p] && i < len[1][p]; i++)
                if (codes[0][p][i] != codes[1][p][i] && (int)(i / per_pos) < first) first = (int)(i / per_pos);
        }
        double before = 0, after = 0, scale = nd_json_get(nd_json_get(g, "logits"), "max_abs_logit")->num;
        int bad = 0;
        for (int t = 0; out[0] && out[1] && t < T; t++) {
            const float *a = out[0] + (size_t)t * V, *b = out[1] + (size_t)t * V;
            double w = 0;
            int ba = 0, bb = 0;
            for (int v = 0; v < W; v++) {
                w = fmax(w, fabs(a[v] - b[v]));
                ba = a[v] > a[ba] ? v : ba, bb = b[v] > b[bb] ? v : bb;
            }
            if (t < first) before = fmax(before, w);
            else after = fmax(after, w);
            bad += ba != bb;
        }
        CHECKF(before <= 1e-5 * scale && after <= 0.035 && bad == 0,
               "%s: int8 KV decode vs prefill %.3g before position %d, %.3g after, %d argmax differences", files[f],
               before, first, after, bad);
        printf("        %s, float acts + int8 KV: decode vs prefill max |diff| %.2e before position %d (codes equal), "
               "%.2e from it\n", files[f], before, first, after);
        for (int k = 0; k < 2; k++) {
            for (int p = 0; codes[k] && p < P; p++) free(codes[k][p]);
            free(codes[k]);
            free(out[k]);
        }
        clear_calls();
        free(ids);
        nd_model_free(m);
        nd_json_free(g);
    }
}

/* Rung 3 of the unsliced file runs as the rung file does under A8 too. */
static void test_a8_layers3_equals_rung_file(void)
{
    nd_model_options oa = {.threads = 1, .layers = 3}, ob = {.threads = 1};
    nd_model *a = NULL, *b = NULL;
    needle_error e = {0};
    CHECKF(nd_model_open(DIR "n3_tiny.cact", &oa, &a, &e) == 0, "%s", e.message);
    CHECKF(nd_model_open(DIR "n3_tiny_rung3.cact", &ob, &b, &e) == 0, "%s", e.message);
    nd_json *g = load_json(DIR "n3_tiny.json");
    if (a && b && g) {
        int T, V = a->weights.cfg.vocab_size, kva = 0, kvb = 0;
        int *ids = json_ints(nd_json_get(g, "ids"), &T);
        float *la = run(a, ids, T, T, &kva), *lb = run(b, ids, T, T, &kvb);
        CHECK(la && lb && kva == 8 && kvb == 8 && memcmp(la, lb, sizeof(float) * (size_t)T * V) == 0);
        clear_calls();
        free(la), free(lb), free(ids);
    }
    nd_json_free(g);
    nd_model_free(a);
    nd_model_free(b);
}

int main(void)
{
    RUN(test_fake_quant_unit);
    RUN(test_n3_tiny_a8);
    RUN(test_n3_small_a8);
    RUN(test_int8_kv_decode_equals_prefill);
    RUN(test_a8_layers3_equals_rung_file);
    return check_summary();
}
