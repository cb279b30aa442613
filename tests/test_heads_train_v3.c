/* test_heads_train_v3.c - `needle train-heads` on a Needle 3 checkpoint.
 *
 * 1. The v3 head backward (per-row probe pooling, rmsunit and gain, query
 *    pooling with row bias, projection; the confidence logistic loss and the
 *    embedding head's sigmoid contrastive loss with temperature and bias) is
 *    held to central finite differences, every parameter one by one.
 * 2. Training both heads on the golden tiny v3 checkpoint (n3_tiny) with a
 *    small JSONL lowers both objectives; the written checkpoint keeps the body,
 *    the router head and the metadata, and replaces the two heads.
 * 3. The engine uses them: `needle build`'s writer (nd_cact_write) puts the
 *    trained heads into a .cact; its embedding and confidence logit match the
 *    float heads of the trained checkpoint (CQ4 rounding apart) and differ from
 *    the untrained file's; a turn's envelope confidence is min(call-token
 *    geometric mean, sigmoid(trained head logit)). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "agent/retrieval.h"
#include "agent/session.h"
#include "core/json.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "io/spm_model.h"
#include "model/cact/cact.h"
#include "model/heads.h"
#include "model/weights.h"
#include "train/heads_train_v3.h"

#define CKPT "tests/golden/needle3/n3_tiny.safetensors"
#define CACT_ORIG "tests/golden/needle3/n3_tiny.cact"
#define TOK "tests/golden/tok8k.model"

/* ------------------------------------------------------------------ 1. gradients */

static nd_cells g_cells[6], g_tools[3];
static int g_y[6] = {1, 0, 0, 1, 1, 0}, g_idx[6] = {0, 1, 2, 3, 4, 5}, g_tool_of[6] = {0, 1, 2, 0, 2, 1};

static double conf_fn(nd_head3 *h, float *g) { return nd_conf3_loss(h, g_cells, g_y, g_idx, 6, g, NULL); }
static double embed_fn(nd_head3 *h, float *g) { return nd_embed3_loss(h, g_cells, g_tools, g_tool_of, g_idx, 6, g, NULL); }

/* grad[i] against (L(w+h) - L(w-h)) / 2h for every parameter i < n_check. */
static void check_all(nd_head3 *h, double (*loss)(nd_head3 *, float *), size_t n_check, const char *what)
{
    float *g = calloc(h->n, sizeof(float));
    loss(h, g);
    int bad = 0, nonzero = 0;
    double worst = 0.0;
    for (size_t i = 0; i < n_check; i++) {
        float keep = h->flat[i];
        const float step = 4e-3f;
        h->flat[i] = keep + step;
        double lp = loss(h, NULL);
        h->flat[i] = keep - step;
        double lm = loss(h, NULL);
        h->flat[i] = keep;
        double num = (lp - lm) / (2 * step), diff = fabs(num - g[i]), tol = 2e-4 + 3e-3 * fabs(num);
        nonzero += g[i] != 0.0f;
        if (diff > worst) worst = diff;
        if (diff > tol && bad++ < 5) fprintf(stderr, "  %s param %zu: analytic %.6g numeric %.6g\n", what, i, g[i], num);
    }
    CHECKF(bad == 0, "%s: %d of %zu gradients off (worst %.3g)", what, bad, n_check, worst);
    CHECKF(nonzero > (int)n_check / 2, "%s: only %d of %zu gradients are non-zero", what, nonzero, n_check);
    free(g);
}

static void test_gradients_match_finite_differences(void)
{
    nd_rng r;
    nd_rng_seed(&r, 11);
    enum { R = 3, K = 2, Q = 2, D = 6 };
    for (int i = 0; i < 6; i++) {
        g_cells[i].n = (2 + i % 3) * R;
        g_cells[i].x = malloc(sizeof(float) * (size_t)g_cells[i].n * D);
        nd_rng_fill_normal(&r, g_cells[i].x, (size_t)g_cells[i].n * D, 0.0f, 1.0f);
    }
    for (int i = 0; i < 3; i++) {
        g_tools[i].n = (3 + i) * R;
        g_tools[i].x = malloc(sizeof(float) * (size_t)g_tools[i].n * D);
        nd_rng_fill_normal(&r, g_tools[i].x, (size_t)g_tools[i].n * D, 0.0f, 1.0f);
    }
    nd_head3 h;
    needle_error err = {0};
    CHECK(nd_head3_alloc(&h, R, K, Q, D, 1, &err) == 0);
    nd_rng_fill_normal(&r, h.flat, h.n, 0.0f, 0.5f);
    for (int j = 0; j < R * K; j++) h.gain[j] = 1.0f + 0.3f * h.gain[j];
    check_all(&h, conf_fn, h.n - 2, "confidence"); /* the two embedding scalars are not read */
    nd_head3_free(&h);
    CHECK(nd_head3_alloc(&h, R, K, Q, D, 4, &err) == 0);
    nd_rng_fill_normal(&r, h.flat, h.n, 0.0f, 0.5f);
    for (int j = 0; j < R * K; j++) h.gain[j] = 1.0f + 0.3f * h.gain[j];
    *h.log_temp = 0.8f;
    *h.logit_bias = -1.5f;
    check_all(&h, embed_fn, h.n, "embedding");
    nd_head3_free(&h);
    for (int i = 0; i < 6; i++) free(g_cells[i].x);
    for (int i = 0; i < 3; i++) free(g_tools[i].x);
}

/* ------------------------------------------------------------------ 2, 3. training, checkpoint, .cact */

static const char *TOOLS =
    "[{\"name\":\"set_lights\",\"description\":\"Turn lights on or off\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"room\":{\"type\":\"string\"},\"on\":{\"type\":\"boolean\"}},\"required\":[\"room\",\"on\"]}},"
    "{\"name\":\"lock_door\",\"description\":\"Lock a door\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"door\":{\"type\":\"string\"}},\"required\":[\"door\"]}},"
    "{\"name\":\"play_music\",\"description\":\"Play a song\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"song\":{\"type\":\"string\"}},\"required\":[\"song\"]}}]";

/* 24 rows: three kinds of tool request and off-topic chat (no call). */
static int write_data(const char *path)
{
    static const char *rooms[6] = {"kitchen", "bedroom", "hallway", "garage", "office", "porch"};
    static const char *chat[4] = {"tell me a joke", "what is the meaning of life", "how are you today",
                                  "write a poem about cats"};
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (int i = 0; i < 24; i++) {
        const char *room = rooms[i % 6];
        switch (i % 4) {
        case 0:
            fprintf(f, "{\"query\":\"turn %s the %s lights\",\"tools\":%s,\"answers\":[{\"name\":\"set_lights\","
                       "\"arguments\":{\"room\":\"%s\",\"on\":%s}}]}\n", i % 2 ? "on" : "off", room, TOOLS, room,
                    i % 2 ? "true" : "false");
            break;
        case 1:
            fprintf(f, "{\"query\":\"lock the %s door\",\"tools\":%s,\"answers\":[{\"name\":\"lock_door\","
                       "\"arguments\":{\"door\":\"%s\"}}]}\n", room, TOOLS, room);
            break;
        case 2:
            fprintf(f, "{\"query\":\"play song number %d\",\"tools\":%s,\"answers\":[{\"name\":\"play_music\","
                       "\"arguments\":{\"song\":\"number %d\"}}]}\n", i, TOOLS, i);
            break;
        default: fprintf(f, "{\"query\":\"%s\",\"tools\":%s,\"answers\":[]}\n", chat[(i / 4) % 4], TOOLS); break;
        }
    }
    return fclose(f);
}

static int tensors_equal(const nd_safetensors *a, const nd_safetensors *b, const char *name)
{
    const nd_st_tensor *x = nd_st_find(a, name), *y = nd_st_find(b, name);
    return x && y && x->nbytes == y->nbytes && !memcmp(x->data, y->data, x->nbytes);
}

static double cosine(const float *a, const float *b, int n)
{
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return ab / sqrt(aa * bb + 1e-30);
}

/* The embedding and confidence logit of `text` under a model file. */
static int heads_of(const char *path, const char *tok, const char *text, float *emb, float *logit)
{
    needle_model *m = NULL;
    needle_model_options mo = {0};
    needle_error err = {0};
    int rc = needle_model_open(path, tok, &mo, &m, &err);
    float *cells = NULL;
    int n = 0;
    if (!rc) rc = nd_retrieval_cells_text(m->net, m->tok, text, &cells, &n, &err);
    if (!rc) rc = nd_head_contrastive(m->net, cells, n, emb, &err);
    if (!rc) rc = nd_head_confidence(m->net, cells, n, logit, &err);
    if (rc) printf("  %s: %s\n", path, err.message);
    free(cells);
    needle_model_close(m);
    return rc;
}

/* One turn on `path` (short reasoning so the random body ends its call
 * list): the envelope's confidence against min(geometric mean of the call
 * tokens, sigmoid(head logit over the turn's cells)). */
static void check_envelope_confidence(const char *path)
{
    needle_model *m = NULL;
    needle_model_options mo = {0};
    needle_error err = {0};
    CHECK(needle_model_open(path, NULL, &mo, &m, &err) == 0);
    if (!m) return;
    needle_session_options so = {.tools_json = TOOLS, .max_new_tokens = 40, .max_reasoning_tokens = 2};
    needle_session *s = NULL;
    char *env = NULL;
    CHECK(nd_session_open(m, &so, &s, &err) == 0);
    if (s) s->keep_cells = 1;
    CHECK(s && nd_session_turn(s, ND_TURN_USER, "lock the porch door", 0, &env, &err) == 0);
    nd_json *j = NULL;
    if (env && nd_json_parse(env, strlen(env), "envelope", &j, &err) == 0) {
        const nd_json *c = nd_json_get(j, "confidence");
        const nd_config *cfg = &m->net->weights.cfg;
        float logit = 0.0f;
        CHECK(s->cells_len > 0 &&
              nd_head_confidence(m->net, s->cells, (int)(s->cells_len / (size_t)cfg->d_model), &logit, &err) == 0);
        double p = 1.0 / (1.0 + exp(-(double)logit)), geo = exp(s->last_call_logp_mean);
        double want = isnan(geo) || p < geo ? p : geo;
        CHECKF(c && c->type == ND_JSON_NUMBER && fabs(c->num - want) <= 1e-4 * want + 1e-12,
               "envelope confidence %s, expected min(%g, sigmoid(%g) = %g)", env, geo, logit, p);
        printf("    envelope confidence %.6g = min(call tokens %.6g, trained head %.6g)\n", c ? c->num : NAN, geo, p);
    } else {
        CHECKF(0, "no envelope: %s", err.message);
    }
    nd_json_free(j);
    free(env);
    nd_session_free(s);
    needle_model_close(m);
}

static void test_train_heads_v3_on_tiny(void)
{
    char dir[] = "/tmp/needle_heads3_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0);
        return;
    }
    char data[300], out[300], cact[300], cmd[400];
    snprintf(data, sizeof data, "%s/train.jsonl", dir);
    snprintf(out, sizeof out, "%s/heads.safetensors", dir);
    snprintf(cact, sizeof cact, "%s/heads.cact", dir);
    CHECK(write_data(data) == 0);
    nd_heads_train_options o = {.epochs = 20, .max_new_tokens = 32, .seed = 3};
    nd_heads_report rep;
    needle_error err = {0};
    int rc = nd_heads_train(CKPT, TOK, data, out, &o, &rep, &err);
    CHECKF(rc == 0, "%s", err.message);
    printf("    confidence %d train / %d held (%d right): loss %.4f -> %.4f, held %.4f -> %.4f\n", rep.conf_train,
           rep.conf_held, rep.conf_correct, rep.conf_loss_before, rep.conf_loss_after, rep.held_loss_before,
           rep.held_loss_after);
    printf("    embedding %d pairs over %d tools: loss %.4f -> %.4f, held-out top-1 %.2f -> %.2f\n", rep.con_train,
           rep.con_tools, rep.con_loss_before, rep.con_loss_after, rep.con_top1_before, rep.con_top1_after);
    CHECK(rep.rows == 24 && rep.conf_train >= 15 && rep.con_train >= 10 && rep.con_tools == 3);
    CHECK(rep.conf_correct > 0 && rep.conf_correct < rep.conf_train + rep.conf_held); /* both labels occur */
    CHECKF(rep.conf_loss_after < rep.conf_loss_before - 0.05, "%.4f -> %.4f", rep.conf_loss_before,
           rep.conf_loss_after);
    CHECKF(rep.con_loss_after < 0.5 * rep.con_loss_before, "%.4f -> %.4f", rep.con_loss_before, rep.con_loss_after);
    if (rc) goto cleanup;

    /* the checkpoint: same tensors and metadata; the two heads new; body and router untouched */
    nd_safetensors a, b;
    CHECK(nd_st_open(CKPT, &a, &err) == 0);
    CHECK(nd_st_open(out, &b, &err) == 0);
    CHECK(a.count == b.count);
    for (size_t i = 0; i < a.count; i++) {
        const char *nm = a.tensors[i].name;
        const nd_st_tensor *t = nd_st_find(&b, nm);
        CHECKF(t && t->ndim == a.tensors[i].ndim && !memcmp(t->shape, a.tensors[i].shape, sizeof t->shape),
               "%s: missing or reshaped", nm);
        int head = !strncmp(nm, "embedding_head/", 15) || !strncmp(nm, "confidence_head/", 16);
        int zero_init = strstr(nm, "row_bias") || !strcmp(nm, "confidence_head/proj/bias");
        if (!head) CHECKF(tensors_equal(&a, &b, nm), "%s changed", nm);
        else if (!zero_init) CHECKF(!tensors_equal(&a, &b, nm), "%s did not change", nm);
    }
    CHECK(tensors_equal(&a, &b, "router_head/proj/kernel"));
    CHECK(nd_st_meta(&b, "config") && !strcmp(nd_st_meta(&a, "config"), nd_st_meta(&b, "config")));
    nd_st_close(&a);
    nd_st_close(&b);

    /* build the .cact (needle build's writer, default 4-bit) */
    nd_weights w;
    rc = nd_weights_load_safetensors(out, &w, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc) goto cleanup;
    CHECK(w.contrastive.present && w.confidence.present && w.router.present);
    nd_vocab v;
    CHECK(nd_vocab_load_spm_file(TOK, &v, &err) == 0);
    nd_cact_write_stats st;
    rc = nd_cact_write(cact, &w, &v, NULL, &st, &err);
    CHECKF(rc == 0, "%s", err.message);
    nd_vocab_free(&v);
    nd_weights_free(&w);
    if (rc) goto cleanup;

    /* the engine reads the trained heads from the .cact */
    const char *text = "lock the garage door";
    float e_float[64], e_cact[64], e_orig[64], l_float, l_cact, l_orig;
    CHECK(heads_of(out, TOK, text, e_float, &l_float) == 0);
    CHECK(heads_of(cact, NULL, text, e_cact, &l_cact) == 0);
    CHECK(heads_of(CACT_ORIG, NULL, text, e_orig, &l_orig) == 0);
    int dim = 32; /* n3_tiny's embedding_dim */
    double c_built = cosine(e_float, e_cact, dim), c_orig = cosine(e_orig, e_cact, dim);
    printf("    .cact embedding: cosine %.4f to the trained float head, %.4f to the untrained file's; confidence "
           "logit %.4f (float %.4f, untrained %.4f)\n", c_built, c_orig, l_cact, l_float, l_orig);
    CHECKF(c_built > 0.97, "cosine %.4f", c_built);
    CHECKF(c_orig < c_built - 0.1, "cosine to the untrained head %.4f", c_orig);
    CHECKF(fabsf(l_cact - l_float) < 0.1f + 0.1f * fabsf(l_float), "logit %.4f vs %.4f", l_cact, l_float);
    CHECKF(fabsf(l_cact - l_orig) > 4 * fabsf(l_cact - l_float), "logit %.4f, untrained %.4f", l_cact, l_orig);
    check_envelope_confidence(cact);

cleanup:
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(void)
{
    RUN(test_gradients_match_finite_differences);
    RUN(test_train_heads_v3_on_tiny);
    return check_summary();
}
