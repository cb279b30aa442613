/* test_needle3.c - Needle 3 inference held to the reference's golden outputs
 * (tests/golden/needle3/, copied from the shared golden folder; its README
 * gives the tolerances used here):
 *   - every logit row the goldens record within 1e-3 x max|logit|, logsumexp
 *     at every position within the same bound, argmax at every position
 *     (except where the reference's top-2 margin is below twice the bound);
 *   - the embedding, confidence and router heads within 1e-4;
 * for n3_tiny, its ladder rung 3 and n3_small, on the float path and on the
 * CQ path; incremental decode (one token at a time) equal to the whole
 * sequence at every position; rung 3 of the unsliced file equal to the rung
 * file; malformed v3 files refused with one-line errors naming file and byte. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/envelope.h"
#include "check.h"
#include "core/buf.h"
#include "core/file.h"
#include "core/json.h"
#include "model/cact/cact.h"
#include "model/heads.h"
#include "model/model.h"
#include "model/params.h"
#include "io/spm_model.h"
#include "needle.h"
#include "text/tokenizer.h"

#define DIR "tests/golden/needle3/"

static nd_json *tiny_json, *small_json;

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

static nd_model *open_model(const char *path, int dequant, int layers)
{
    /* the float goldens: float activations (A8 is tests/test_needle3_a8.c) */
    nd_model_options o = {.threads = 1, .dequantize = dequant, .layers = layers, .acts = NEEDLE_ACTS_FLOAT};
    nd_model *m = NULL;
    needle_error e = {0};
    int rc = nd_model_open(path, &o, &m, &e);
    CHECKF(rc == 0, "open %s: %s", path, e.message);
    return rc == 0 ? m : NULL;
}

static int *json_ints(const nd_json *a, int *n)
{
    int *v = malloc(sizeof(int) * (a->count ? a->count : 1));
    for (size_t i = 0; i < a->count; i++) v[i] = (int)a->items[i].num;
    *n = (int)a->count;
    return v;
}

/* Logits of every position, fed `step` tokens at a time (0 = all at once);
 * cells (may be NULL) get the heads' cells of a one-call prefill. */
static float *run(nd_model *m, const int *ids, int T, int step, float *cells)
{
    nd_state *s = NULL;
    needle_error e = {0};
    nd_state_options so = {0};
    int rc = nd_state_create(m, &so, &s, &e);
    CHECKF(rc == 0, "state: %s", e.message);
    if (rc) return NULL;
    int V = m->weights.cfg.vocab_size, L = m->weights.cfg.num_layers, d = m->weights.cfg.d_model;
    float *lg = malloc(sizeof(float) * (size_t)T * V);
    uint8_t *want = malloc((size_t)T);
    memset(want, 1, (size_t)T);
    if (step <= 0) step = T;
    for (int t0 = 0; t0 < T && rc == 0; t0 += step) {
        int n = T - t0 < step ? T - t0 : step;
        rc = nd_state_eval(s, ids + t0, n, want, lg + (size_t)t0 * V, cells ? cells + (size_t)t0 * (L + 1) * d : NULL,
                           &e);
    }
    CHECKF(rc == 0, "eval: %s", e.message);
    free(want);
    nd_state_free(s);
    return lg;
}

/* The golden's logits block against ours: at_positions rows (when recorded),
 * top-64 values, logsumexp and argmax everywhere. */
static void check_logits(const char *what, const nd_model *m, const float *lg, const nd_json *ref, const int *pos,
                         int np, int T)
{
    int V = m->weights.cfg.vocab_size, W = (int)nd_json_get(ref, "width")->num;
    CHECKF(W == nd_config_logit_width(&m->weights.cfg), "%s: logit width %d, ours %d", what, W,
           nd_config_logit_width(&m->weights.cfg));
    double bound = 1e-3 * nd_json_get(ref, "max_abs_logit")->num, worst = 0.0;
    const nd_json *at = nd_json_get(ref, "at_positions"), *top = nd_json_get(ref, "top64_at_positions");
    for (int i = 0; i < np; i++) {
        const float *row = lg + (size_t)pos[i] * V;
        if (at)
            for (int k = 0; k < W; k++) {
                double dlt = fabs(row[k] - at->items[i].items[k].num);
                if (dlt > worst) worst = dlt;
            }
        const nd_json *ti = nd_json_get(&top->items[i], "ids"), *tv = nd_json_get(&top->items[i], "values");
        for (size_t k = 0; k < ti->count; k++) {
            double dlt = fabs(row[(int)ti->items[k].num] - tv->items[k].num);
            if (dlt > worst) worst = dlt;
        }
        for (int k = W; k < V; k++) CHECKF(isinf(row[k]) && row[k] < 0, "%s: column %d past out_vocab is %g", what, k, row[k]);
    }
    CHECKF(worst <= bound, "%s: recorded logits off by %g (bound %g)", what, worst, bound);
    const nd_json *lse = nd_json_get(ref, "logsumexp"), *am = nd_json_get(ref, "argmax"),
                  *margin = nd_json_get(ref, "top2_margin");
    double lworst = 0.0;
    int bad_argmax = 0;
    for (int t = 0; t < T; t++) {
        const float *row = lg + (size_t)t * V;
        int best = 0;
        for (int k = 1; k < W; k++)
            if (row[k] > row[best]) best = k;
        double sum = 0.0;
        for (int k = 0; k < W; k++) sum += exp((double)row[k] - row[best]);
        double l = row[best] + log(sum), dlt = fabs(l - lse->items[t].num);
        if (dlt > lworst) lworst = dlt;
        if (best != (int)am->items[t].num && margin->items[t].num >= 2 * bound) bad_argmax++;
    }
    CHECKF(lworst <= bound, "%s: logsumexp off by %g (bound %g)", what, lworst, bound);
    CHECKF(bad_argmax == 0, "%s: argmax differs at %d positions", what, bad_argmax);
}

/* The three heads over all the ids, within 1e-4 of the golden's. */
static void check_heads(const char *what, const nd_model *m, const float *cells, int T, const nd_json *ref)
{
    const nd_weights *w = &m->weights;
    int n_cells = T * (w->cfg.num_layers + 1);
    float emb[64], conf, router[3];
    needle_error e = {0};
    const nd_json *re = nd_json_get(ref, "embedding");
    CHECKF(w->contrastive.present && w->contrastive.out_dim == (int)re->count, "%s: embedding head", what);
    if (!w->contrastive.present || w->contrastive.out_dim > 64) return;
    CHECKF(nd_head_contrastive(m, cells, n_cells, emb, &e) == 0, "%s: %s", what, e.message);
    double worst = 0.0;
    for (size_t i = 0; i < re->count; i++) worst = fmax(worst, fabs(emb[i] - re->items[i].num));
    CHECKF(worst <= 1e-4, "%s: embedding off by %g", what, worst);
    CHECKF(nd_head_confidence(m, cells, n_cells, &conf, &e) == 0, "%s: %s", what, e.message);
    double dc = fabs(conf - nd_json_get(ref, "confidence_logit")->num);
    CHECKF(dc <= 1e-4, "%s: confidence logit off by %g", what, dc);
    CHECKF(nd_head_router(m, cells, n_cells, router, &e) == 0, "%s: %s", what, e.message);
    const nd_json *rr = nd_json_get(ref, "router_logits"), *cal = nd_json_get(ref, "router_calibration_fp16");
    for (int i = 0; i < 3; i++) {
        CHECKF(fabs(router[i] - rr->items[i].num) <= 1e-4, "%s: router logit %d: %g vs %g", what, i, router[i],
               rr->items[i].num);
        CHECKF(w->router.calibration && w->router.calibration[i] == (float)cal->items[i].num,
               "%s: router calibration %d", what, i);
    }
}

static void golden_case(const char *file, const nd_json *g, const nd_json *ref, int dequant, int layers)
{
    char what[160];
    snprintf(what, sizeof what, "%s%s%s", file, dequant ? " (float path)" : " (CQ path)", layers ? " --layers" : "");
    char path[256];
    snprintf(path, sizeof path, DIR "%s", file);
    nd_model *m = open_model(path, dequant, layers);
    if (!m) return;
    CHECKF(nd_config_generation(&m->weights.cfg) == 3, "%s: not read as Needle 3", what);
    int T, np;
    int *ids = json_ints(nd_json_get(g, "ids"), &T), *pos = json_ints(nd_json_get(g, "positions"), &np);
    const nd_config *c = &m->weights.cfg;
    float *cells = malloc(sizeof(float) * (size_t)T * (c->num_layers + 1) * c->d_model);
    float *lg = run(m, ids, T, 0, cells);
    if (lg) {
        check_logits(what, m, lg, nd_json_get(ref, "logits"), pos, np, T);
        check_heads(what, m, cells, T, nd_json_get(ref, "heads"));
        /* one token at a time must give the whole-sequence logits at every position */
        float *inc = run(m, ids, T, 1, NULL);
        double worst = 0.0, scale = nd_json_get(nd_json_get(ref, "logits"), "max_abs_logit")->num;
        int V = c->vocab_size, W = nd_config_logit_width(c);
        for (int t = 0; inc && t < T; t++)
            for (int k = 0; k < W; k++) worst = fmax(worst, fabs(inc[(size_t)t * V + k] - lg[(size_t)t * V + k]));
        CHECKF(inc && worst <= 1e-5 * scale, "%s: decode vs prefill differ by %g", what, worst);
        free(inc);
    }
    free(lg);
    free(cells);
    free(ids);
    free(pos);
    nd_model_free(m);
}

static void test_n3_tiny(void)
{
    golden_case("n3_tiny.cact", tiny_json, tiny_json, 1, 0);
    golden_case("n3_tiny.cact", tiny_json, tiny_json, 0, 0);
}

static void test_n3_tiny_rung3(void)
{
    const nd_json *rung = nd_json_get(tiny_json, "rung");
    golden_case("n3_tiny_rung3.cact", tiny_json, rung, 1, 0);
    golden_case("n3_tiny_rung3.cact", tiny_json, rung, 0, 0);
}

static void test_n3_small(void)
{
    golden_case("n3_small.cact", small_json, small_json, 1, 0);
    golden_case("n3_small.cact", small_json, small_json, 0, 0);
}

/* Rung 3 of the unsliced file runs as the rung file does (same weights, so
 * the same numbers), and meets the rung's goldens. */
static void test_ladder_rung3_from_full_file(void)
{
    int order[20], want[20] = {0, 19, 9, 14, 4, 6, 11, 16, 2, 7, 12, 17, 1, 3, 5, 8, 10, 13, 15, 18};
    CHECK(nd_ladder_order(20, order) == 20);
    CHECK(memcmp(order, want, sizeof want) == 0);
    int o5[5], w5[5] = {0, 4, 2, 1, 3};
    CHECK(nd_ladder_order(5, o5) == 5 && memcmp(o5, w5, sizeof w5) == 0);

    golden_case("n3_tiny.cact", tiny_json, nd_json_get(tiny_json, "rung"), 1, 3);
    nd_model *a = open_model(DIR "n3_tiny.cact", 0, 3), *b = open_model(DIR "n3_tiny_rung3.cact", 0, 0);
    if (!a || !b) {
        nd_model_free(a);
        nd_model_free(b);
        return;
    }
    CHECK(a->weights.cfg.num_layers == 3 && a->weights.cfg.num_sites == 1 && a->weights.cfg.engram_layers[0] == 1);
    CHECK(a->weights.cfg.global_mask == b->weights.cfg.global_mask);
    int T;
    int *ids = json_ints(nd_json_get(tiny_json, "ids"), &T);
    float *la = run(a, ids, T, 0, NULL), *lb = run(b, ids, T, 0, NULL);
    size_t n = (size_t)T * a->weights.cfg.vocab_size;
    CHECK(la && lb && memcmp(la, lb, n * sizeof(float)) == 0);
    free(la);
    free(lb);
    free(ids);
    /* Needle 2 files have no ladder */
    nd_model_options o = {.layers = 2};
    nd_model *m = NULL;
    needle_error e = {0};
    CHECK(nd_model_open("tests/golden/tiny_w4.cact", &o, &m, &e) == NEEDLE_EUNSUPPORTED);
    CHECKF(strstr(e.message, "Needle 3") != NULL, "%s", e.message);
    nd_model_free(a);
    nd_model_free(b);
}

/* A patched copy of n3_tiny.cact must be refused with a one-line message
 * naming the file and the place. */
static void expect_refused(const uint8_t *data, size_t size, const char *needle_in_message)
{
    nd_weights w;
    needle_error e = {0};
    int rc = nd_weights_load_cact_buffer(data, size, "n3_bad.cact", &w, &e);
    CHECKF(rc != 0, "accepted a file that should fail with \"%s\"", needle_in_message);
    if (rc == 0) {
        nd_weights_free(&w);
        return;
    }
    CHECKF(strstr(e.message, "n3_bad.cact") && strstr(e.message, needle_in_message) && !strchr(e.message, '\n'),
           "message \"%s\" lacks \"%s\"", e.message, needle_in_message);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

static void test_malformed_v3(void)
{
    char *text = NULL;
    size_t len = 0;
    needle_error e = {0};
    CHECK(nd_read_file(DIR "n3_tiny.cact", &text, &len, &e) == 0);
    if (!text) return;
    uint8_t *orig = (uint8_t *)text, *b = malloc(len);
    /* the unmodified bytes load, as Needle 3 with every header field */
    nd_weights w;
    CHECKF(nd_weights_load_cact_buffer(orig, len, "n3_tiny.cact", &w, &e) == 0, "%s", e.message);
    CHECK(w.cfg.generation == 3 && w.cfg.qk_head_dim == 16 && w.cfg.v_head_dim == 32 && w.cfg.sliding_window == 8 &&
          w.cfg.global_mask == ((1ull << 2) | (1ull << 4)) && w.cfg.qkv_conv_taps == 3 && w.cfg.num_sites == 2 &&
          w.router.present && w.router.num_queries == 4 && w.contrastive.num_probes == 4);
    nd_weights_free(&w);
    expect_refused(orig, 150, "truncated Needle 3 header"); /* inside the 196 bytes */
#define PATCHED(byte, value, msg)                 \
    do {                                          \
        memcpy(b, orig, len);                     \
        put_u32(b + (byte), (uint32_t)(value));   \
        expect_refused(b, len, msg);              \
    } while (0)
    PATCHED(72, 1, "global_mask");             /* global_mask_hi marks layer 32 of 5 */
    PATCHED(124, 17, "num_sites");             /* more than 16 sites */
    PATCHED(128 + 4 * 5, 3, "sites[5]");       /* a site slot past num_sites */
    PATCHED(48, 24, "tensor");                 /* v_head_dim: shapes no longer fit */
    PATCHED(76, 0, "num_tensors");             /* no taps: the tensor count no longer fits */
    PATCHED(40, 65, "num_layers");             /* past the 64-bit mask */
    PATCHED(192, 0, "rope_theta");             /* f32 0 at byte 192 */
    PATCHED(24, 9000, "out_vocab");            /* larger than vocab */
    free(b);
    free(text);
}

/* v3 header fields reach the config (and the v2 files still read as Needle 2). */
static void test_generation_and_budget(void)
{
    nd_config c;
    needle_error e = {0};
    CHECK(nd_config_preset(&c, "needle3", &e) == 0);
    CHECK(nd_config_generation(&c) == 3 && c.qk_dim == 48 && c.v_dim == 64 && c.hada_n == 1024 && c.hada_a == 32 &&
          c.hada_b == 32);
    /* SPEC-needle3 5.4: the default geometry's window is 3456 */
    CHECKF(nd_config_budget_window(&c) == 3456, "budget %d", nd_config_budget_window(&c));
    c.num_layers = 18, c.num_sites = 4, c.global_mask = (1ull << 4) | (1ull << 9) | (1ull << 14);
    (void)nd_config_derive(&c, "t", NULL);
    CHECKF(nd_config_budget_window(&c) == 4096, "rung 18 budget %d", nd_config_budget_window(&c));
    nd_model *m = open_model("tests/golden/tiny_w4.cact", 0, 0);
    if (m) CHECK(nd_config_generation(&m->weights.cfg) == 2 && !m->weights.router.present);
    nd_model_free(m);
}

/* needle_model_embed on a v3 file feeds [BOS] + enc(text) to the embedding
 * head: the golden's text gives the golden's ids, so the reference's embedding. */
static void test_embed_api_uses_v3_head(void)
{
    needle_model *m = NULL;
    needle_error e = {0};
    needle_model_options mo = {.acts = NEEDLE_ACTS_FLOAT}; /* the float golden's head */
    int rc = needle_model_open(DIR "n3_tiny.cact", NULL, &mo, &m, &e);
    CHECKF(rc == 0, "%s", e.message);
    if (rc) return;
    const nd_json *ref = nd_json_get(nd_json_get(tiny_json, "heads"), "embedding");
    int dim = needle_model_embed_dim(m);
    CHECKF(dim == (int)ref->count, "dim %d", dim);
    float out[64];
    if (dim == (int)ref->count && dim <= 64) {
        CHECKF(needle_model_embed(m, nd_json_get(tiny_json, "text")->str, out, dim, &e) == 0, "%s", e.message);
        double worst = 0.0;
        for (int i = 0; i < dim; i++) worst = fmax(worst, fabs(out[i] - ref->items[i].num));
        CHECKF(worst <= 1e-4, "embedding off by %g", worst);
    }
    needle_model_close(m);
}

/* Binary (1-bit) CQ matrices (tests/fuzz/seeds/fuzz_cact/v3_micro_binary.cact,
 * made by tools/make_v3_fuzz_seeds.py) load and decode like prefill. */
static void test_binary_cq_micro(void)
{
    nd_model *m = open_model("tests/fuzz/seeds/fuzz_cact/v3_micro_binary.cact", 0, 0);
    if (!m) return;
    CHECK(m->weights.layers[0].q_proj.kind == ND_MAT_F32); /* widened at load */
    int ids[8] = {2, 5, 6, 7, 8, 9, 10, 11}, V = m->weights.cfg.vocab_size;
    float *a = run(m, ids, 8, 0, NULL), *b = run(m, ids, 8, 1, NULL);
    double worst = 0.0;
    for (int i = 0; a && b && i < 8 * V; i++) worst = fmax(worst, fabs(a[i] - b[i]));
    CHECKF(a && b && worst < 1e-5, "decode vs prefill %g", worst);
    free(a);
    free(b);
    nd_model_free(m);
}

/* A Needle 3 tokenizer blob (SPEC-needle3 5.5): 16 user-defined markers
 * (type 3, including the six new ones) and add_dummy_prefix taken from the
 * blob's flag byte, which may now be 0. */
static size_t put_piece(uint8_t *b, size_t at, const char *text, float score, int type)
{
    size_t n = strlen(text);
    memcpy(b + at, &score, 4);
    b[at + 4] = (uint8_t)type;
    b[at + 5] = (uint8_t)n, b[at + 6] = (uint8_t)(n >> 8);
    memcpy(b + at + 7, text, n);
    return at + 7 + n;
}

static void test_v3_tokenizer_blob(void)
{
    static const char *markers[16] = {"<|im_start|>", "<|im_end|>", "<tools>", "</tools>", "<tool_call>", "</tool_call>",
                                      "<think>", "</think>", "<tool_response>", "</tool_response>", "<context>",
                                      "</context>", "<extract>", "</extract>", "<schema>", "</schema>"};
    for (int prefix = 0; prefix <= 1; prefix++) {
        uint8_t b[2048];
        uint32_t head[5] = {4 + 16 + 4, 0, 1, 2, 3};
        memcpy(b, head, sizeof head);
        b[20] = (uint8_t)prefix, b[21] = 0, b[22] = b[23] = 0;
        size_t at = 24;
        at = put_piece(b, at, "<pad>", 0, ND_PIECE_CONTROL), at = put_piece(b, at, "</s>", 0, ND_PIECE_CONTROL);
        at = put_piece(b, at, "<s>", 0, ND_PIECE_CONTROL), at = put_piece(b, at, "<unk>", 0, ND_PIECE_UNKNOWN);
        for (int i = 0; i < 16; i++) at = put_piece(b, at, markers[i], 0, ND_PIECE_MARKER);
        at = put_piece(b, at, "a", -1, ND_PIECE_NORMAL), at = put_piece(b, at, "b", -2, ND_PIECE_NORMAL);
        at = put_piece(b, at, "\xe2\x96\x81", -3, ND_PIECE_NORMAL);
        at = put_piece(b, at, "\xe2\x96\x81" "a", -0.5f, ND_PIECE_NORMAL);
        needle_error e = {0};
        CHECKF(nd_cact_check_tokenizer_blob(b, at, "blob", &e) == 0, "%s", e.message);
        nd_vocab v;
        nd_tokenizer *t = NULL;
        CHECKF(nd_vocab_from_blob(b, at, "blob", &v, &e) == 0, "%s", e.message);
        CHECKF(nd_tokenizer_create(&v, &t, &e) == 0, "%s", e.message);
        nd_vocab_free(&v);
        if (!t) continue;
        nd_ids ids;
        nd_ids_init(&ids);
        const char *text = "a<context>b</schema>";
        CHECKF(nd_tokenizer_encode(t, text, strlen(text), &ids, &e) == 0, "%s", e.message);
        /* markers 14 (<context>) and 19 (</schema>); a leading U+2581 only with add_dummy_prefix */
        int want0[4] = {20, 14, 21, 19}, want1[4] = {23, 14, 21, 19};
        const int *want = prefix ? want1 : want0;
        CHECKF(ids.len == 4 && !memcmp(ids.data, want, sizeof(int) * 4), "add_dummy_prefix %d: %zu ids [%d %d %d %d]",
               prefix, ids.len, ids.len > 0 ? ids.data[0] : -1, ids.len > 1 ? ids.data[1] : -1,
               ids.len > 2 ? ids.data[2] : -1, ids.len > 3 ? ids.data[3] : -1);
        nd_ids_free(&ids);
        nd_tokenizer_free(t);
    }
}

/* The router in the envelope: raw logits and the file's calibration, only
 * when the model has a router head. */
static void test_envelope_router(void)
{
    for (int with = 0; with <= 1; with++) {
        nd_envelope env = {.success = 1, .calls = "[]", .calls_len = 2, .confidence = 0.5, .has_router = with,
                           .router_logits = {1.5, -2.25, 0.125}, .router_calibration = {0.9, 0.0, 0.6}};
        nd_buf b;
        nd_buf_init(&b);
        nd_envelope_write(&b, &env);
        nd_json *j = NULL;
        needle_error e = {0};
        CHECKF(nd_json_parse(b.data, b.len, "envelope", &j, &e) == 0, "%s", e.message);
        const nd_json *r = j ? nd_json_get(j, "router") : NULL;
        if (!with) CHECK(j && !r);
        else {
            const nd_json *lg = r ? nd_json_get(r, "logits") : NULL, *cal = r ? nd_json_get(r, "calibration") : NULL;
            CHECKF(lg && lg->count == 3 && lg->items[0].num == 1.5 && lg->items[1].num == -2.25 &&
                       lg->items[2].num == 0.125 && cal && cal->count == 3 && fabs(cal->items[0].num - 0.9) < 1e-9,
                   "%.*s", (int)b.len, b.data);
        }
        nd_json_free(j);
        nd_buf_free(&b);
    }
}

int main(void)
{
    tiny_json = load_json(DIR "n3_tiny.json");
    small_json = load_json(DIR "n3_small.json");
    if (!tiny_json || !small_json) {
        printf("0 passed, 1 failed\n");
        return 1;
    }
    RUN(test_n3_tiny);
    RUN(test_n3_tiny_rung3);
    RUN(test_n3_small);
    RUN(test_ladder_rung3_from_full_file);
    RUN(test_malformed_v3);
    RUN(test_generation_and_budget);
    RUN(test_embed_api_uses_v3_head);
    RUN(test_binary_cq_micro);
    RUN(test_v3_tokenizer_blob);
    RUN(test_envelope_router);
    nd_json_free(tiny_json);
    nd_json_free(small_json);
    return check_summary();
}
