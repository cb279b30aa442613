/* test_retrieval.c - tool retrieval with the contrastive head, on the golden models.
 *
 * The golden weights are random, so which tools rank first means nothing;
 * these tests check the mechanics: the embedding is the head's output for
 * [BOS]+enc(text) (held to the reference numbers), the session renders and
 * compiles exactly the top five (recomputed here independently from the
 * stored embeddings), an unselected tool is unreachable through the grammar,
 * the selection lasts for a conversation, and a model without the head
 * renders every tool.  The catalogue is the first 40 tools of
 * tools/gen_data.py. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/retrieval.h"
#include "agent/session.h"
#include "check.h"
#include "tool_catalogue.h"
#include "core/json.h"
#include "model/model.h"
#include "needle.h"

#define MODEL "tests/golden/tiny_w4.cact"
#define N_CATALOGUE 40

static char *catalogue; /* compact JSON array of 40 tools */

static needle_model *open_model(const char *path)
{
    needle_model_options mo = {.threads = 1};
    needle_model *m = NULL;
    needle_error err = {0};
    int rc = needle_model_open(path, NULL, &mo, &m, &err);
    CHECKF(rc == 0, "open %s: %s", path, err.message);
    return m;
}

static needle_session *open_session(needle_model *m, const char *tools, const char *index)
{
    needle_session_options so = {.tools_json = tools, .tool_index_path = index, .max_new_tokens = 400};
    needle_session *s = NULL;
    needle_error err = {0};
    int rc = needle_session_open(m, &so, &s, &err);
    CHECKF(rc == 0, "session: %s", err.message);
    return s;
}

/* The golden contrastive embeddings are the head over the whole prompt's
 * cells: embedding those ids must reproduce them (full attention, no logits). */
static void test_embedding_matches_golden(void)
{
    nd_model *net = NULL;
    needle_error err = {0};
    nd_model_options mo = {.threads = 1, .acts = NEEDLE_ACTS_FLOAT}; /* the float golden */
    int rc = nd_model_open("tests/golden/tiny.safetensors", &mo, &net, &err);
    CHECKF(rc == 0, "%s", err.message);
    char *text = NULL;
    size_t len = 0;
    nd_json *g = NULL;
    CHECK(nd_read_file("tests/golden/tiny.json", &text, &len, &err) == 0);
    CHECK(text && nd_json_parse(text, len, "tiny.json", &g, &err) == 0);
    const nd_json *cases = g ? nd_json_get(g, "cases") : NULL;
    CHECK(cases && cases->count >= 1);
    for (size_t ci = 0; net && cases && ci < cases->count; ci++) {
        const nd_json *ids = nd_json_get(&cases->items[ci], "ids");
        const nd_json *ref = nd_json_get(&cases->items[ci], "contrastive_embedding");
        int T = (int)ids->count, dim = net->weights.contrastive.out_dim;
        CHECK((int)ref->count == dim);
        int *v = malloc(sizeof(int) * (size_t)T);
        float *emb = malloc(sizeof(float) * (size_t)dim);
        for (int t = 0; t < T; t++) v[t] = (int)ids->items[t].num;
        CHECKF(nd_retrieval_embed_ids(net, v, T, emb, &err) == 0, "%s", err.message);
        double worst = 0.0, norm = 0.0;
        for (int i = 0; i < dim; i++) {
            double dlt = fabs(emb[i] - ref->items[i].num);
            if (dlt > worst) worst = dlt;
            norm += (double)emb[i] * emb[i];
        }
        CHECKF(worst < 1e-4, "case %zu: max diff %.3g", ci, worst);
        CHECKF(fabs(norm - 1.0) < 1e-5, "norm %.6f", norm);
        free(v);
        free(emb);
    }
    nd_json_free(g);
    free(text);
    nd_model_free(net);
}

/* Hand-made vectors: the answer is known without running anything. */
static void test_top_k_order_and_ties(void)
{
    /* 7 tools, dim 2; query (1,0): scores 0.1 0.9 0.5 0.9 -1 0.3 0.7 */
    float e[] = {0.1f, 0, 0.9f, 0, 0.5f, 0, 0.9f, 0, -1, 0, 0.3f, 0, 0.7f, 0};
    float q[] = {1, 0};
    int out[7];
    int n = nd_retrieval_top_k(e, 7, 2, q, 5, out);
    CHECK(n == 5);
    int want[] = {1, 2, 3, 5, 6}; /* declared order, not score order */
    for (int i = 0; i < 5 && n == 5; i++) CHECKF(out[i] == want[i], "out[%d]=%d", i, out[i]);
    /* ties at the cut go to the lower index: keep 1 of the two 0.9s */
    n = nd_retrieval_top_k(e, 7, 2, q, 1, out);
    CHECK(n == 1 && out[0] == 1);
    /* fewer tools than k */
    n = nd_retrieval_top_k(e, 3, 2, q, 5, out);
    CHECK(n == 3 && out[0] == 0 && out[1] == 1 && out[2] == 2);
}

/* Our own top five from the session's stored embeddings and the query's. */
static void independent_top5(needle_session *s, const char *query, int *want)
{
    const nd_retriever *r = s->retr;
    float *q = malloc(sizeof(float) * (size_t)r->dim);
    needle_error err = {0};
    CHECKF(nd_retrieval_embed_text(s->model->net, s->model->tok, query, q, &err) == 0, "%s", err.message);
    double *sc = malloc(sizeof(double) * (size_t)r->n_tools);
    for (int i = 0; i < r->n_tools; i++) {
        sc[i] = 0.0;
        for (int j = 0; j < r->dim; j++) sc[i] += (double)r->emb[(size_t)i * r->dim + j] * q[j];
    }
    int n = 0;
    for (int i = 0; i < r->n_tools; i++) { /* rank = how many beat it (ties: lower index wins) */
        int better = 0;
        for (int j = 0; j < r->n_tools; j++)
            if (sc[j] > sc[i] || (sc[j] == sc[i] && j < i)) better++;
        if (better < 5) want[n++] = i;
    }
    CHECK(n == 5);
    free(sc);
    free(q);
}

static int grammar_accepts_name(const needle_session *s, const char *name)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, "[{\"name\":\"%s\",", name);
    nd_grammar_state gs;
    nd_grammar_start(s->grammar, &gs);
    return nd_grammar_advance(s->grammar, &gs, prefix, strlen(prefix)) == 0;
}

static void check_selection(needle_session *s, const char *query)
{
    int want[5] = {-1, -1, -1, -1, -1};
    independent_top5(s, query, want);
    CHECKF(s->n_selected == 5, "n_selected %d", s->n_selected);
    for (int i = 0; i < 5; i++) CHECKF(s->selected[i] == want[i], "selected[%d]=%d want %d", i, s->selected[i], want[i]);
    /* the tools block is exactly those tools, in declared order */
    nd_json *block = NULL;
    needle_error err = {0};
    CHECK(nd_json_parse(s->tools_compact, strlen(s->tools_compact), "block", &block, &err) == 0);
    CHECK(block && block->count == 5);
    for (size_t i = 0; block && i < block->count && i < 5; i++)
        CHECK(nd_json_equal(&block->items[i], &s->tools->items[s->selected[i]]));
    nd_json_free(block);
    /* the grammar names exactly the selected tools */
    CHECK(nd_grammar_tool_count(s->grammar) == 5);
    for (size_t i = 0; i < s->tools->count; i++) {
        const char *name = nd_json_get(&s->tools->items[i], "name")->str;
        int sel = 0;
        for (int k = 0; k < 5; k++) sel |= s->selected[k] == (int)i;
        CHECKF(grammar_accepts_name(s, name) == sel, "tool %s selected=%d", name, sel);
    }
}

static void check_calls_selected(needle_session *s, const char *env)
{
    nd_json *j = NULL;
    needle_error err = {0};
    CHECKF(nd_json_parse(env, strlen(env), "env", &j, &err) == 0, "%s", env);
    const nd_json *calls = j ? nd_json_get(j, "function_calls") : NULL;
    for (size_t i = 0; calls && i < calls->count; i++) {
        const char *name = nd_json_get(&calls->items[i], "name")->str;
        int ok = 0;
        for (int k = 0; k < s->n_selected; k++)
            ok |= !strcmp(name, nd_json_get(&s->tools->items[s->selected[k]], "name")->str);
        CHECKF(ok, "called unselected tool %s", name);
    }
    nd_json_free(j);
}

/* A stored embedding against the text's own: bit for bit on the CPU (one
 * code path whatever the batch); on a device backend the catalogue's batched
 * matmuls and a single text's can take different kernels (or the host), so
 * there they agree within 1e-4 of the vector's largest component.  Returns
 * 1 when they agree; *worst gets the largest difference seen. */
static int embeddings_agree(const needle_model *m, const float *a, const float *b, int dim, double *worst)
{
    if (!strcmp(m->net->be->name, "cpu")) return !memcmp(a, b, sizeof(float) * (size_t)dim);
    double diff = 0, big = 0;
    for (int i = 0; i < dim; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > diff) diff = d;
        if (fabs(b[i]) > big) big = fabs(b[i]);
    }
    if (diff > *worst) *worst = diff;
    return diff <= 1e-4 * (big > 1 ? big : 1);
}

static void test_catalogue_top5_rendered_and_compiled(void)
{
    needle_model *m = open_model(MODEL);
    needle_session *s = m ? open_session(m, catalogue, NULL) : NULL;
    if (!s) {
        needle_model_close(m);
        return;
    }
    CHECK(s->retr && s->retr->n_tools == N_CATALOGUE && s->retr->embedded == N_CATALOGUE);
    /* each stored embedding is the text's own embedding */
    float *e = malloc(sizeof(float) * (size_t)s->retr->dim);
    needle_error err = {0};
    double worst = 0;
    for (int i = 0; i < N_CATALOGUE; i += 13) {
        CHECK(nd_retrieval_embed_text(m->net, m->tok, s->retr->texts[i], e, &err) == 0);
        CHECKF(embeddings_agree(m, e, s->retr->emb + (size_t)i * s->retr->dim, s->retr->dim, &worst),
               "tool %d: stored embedding differs (max |diff| %.3g, backend %s)", i, worst, m->net->be->name);
    }
    free(e);
    const char *queries[] = {"turn on the kitchen lights", "what's the weather in Paris tomorrow?",
                             "convert 10 miles to km", "play some jazz"};
    for (int qi = 0; qi < 4; qi++) {
        needle_session_reset(s);
        char *env = NULL;
        CHECKF(needle_session_send(s, queries[qi], &env, &err) == 0, "%s", err.message);
        check_selection(s, queries[qi]);
        printf("    \"%s\" -> tools %d %d %d %d %d\n", queries[qi], s->selected[0], s->selected[1], s->selected[2],
               s->selected[3], s->selected[4]);
        if (env) check_calls_selected(s, env);
        /* the model saw only the selected tools: the prompt's text holds them and no other */
        nd_buf txt;
        nd_buf_init(&txt);
        CHECK(nd_tokenizer_decode(m->tok, s->turn_ids.data, s->turn_ids.len, &txt, &err) == 0);
        for (size_t i = 0; txt.data && i < s->tools->count; i++) {
            char needle[128];
            snprintf(needle, sizeof needle, "\"name\":\"%s\"", nd_json_get(&s->tools->items[i], "name")->str);
            int sel = 0;
            for (int k = 0; k < 5; k++) sel |= s->selected[k] == (int)i;
            CHECKF((strstr(txt.data, needle) != NULL) == sel, "prompt and selection disagree on %s", needle);
        }
        nd_buf_free(&txt);
        free(env);
    }
    needle_session_close(s);
    needle_model_close(m);
}

/* The selection is made at the first request and kept while the
 * conversation lasts (the tools block is the pinned KV prefix); a reset
 * ranks again for the next request. */
static void test_selection_kept_for_conversation(void)
{
    needle_model *m = open_model(MODEL);
    needle_session *s = m ? open_session(m, catalogue, NULL) : NULL;
    if (!s) {
        needle_model_close(m);
        return;
    }
    needle_error err = {0};
    char *env = NULL;
    const char *q1 = "set an alarm for 7am", *q2 = "send an email to Bob about the budget";
    CHECK(needle_session_send(s, q1, &env, &err) == 0);
    free(env);
    int first_ok = s->started; /* a failed first turn ends its conversation: the next request selects again */
    int first[5];
    memcpy(first, s->selected, sizeof first);
    char *block = strdup(s->tools_compact);
    /* a later turn of the same conversation keeps the block */
    env = NULL;
    int rc = needle_session_send(s, q2, &env, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (first_ok) {
        CHECK(!memcmp(first, s->selected, sizeof first));
        CHECK(!strcmp(block, s->tools_compact));
    }
    if (env) check_calls_selected(s, env);
    free(env);
    /* a new conversation selects for its own first request */
    needle_session_reset(s);
    env = NULL;
    CHECK(needle_session_send(s, q2, &env, &err) == 0);
    check_selection(s, q2);
    free(env);
    free(block);
    needle_session_close(s);
    needle_model_close(m);
}

/* Without a contrastive head nothing can rank the tools: all are rendered,
 * and a set whose block is longer than the model's context is refused with
 * the numbers (context_budget.h). */
static void test_no_head_renders_every_tool(void)
{
    enum { N_FIT = 6 }; /* more than five, short enough to fit 512 positions */
    static const char six[] =
        "[{\"name\":\"lights_on\",\"parameters\":{\"type\":\"object\",\"properties\":{\"room\":{\"type\":\"string\"}}}},"
        "{\"name\":\"lights_off\"},{\"name\":\"play_music\"},{\"name\":\"stop_music\"},"
        "{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}},"
        "{\"name\":\"set_timer\",\"parameters\":{\"type\":\"object\",\"properties\":{\"minutes\":{\"type\":\"integer\"}}}}]";
    needle_model *m = open_model(MODEL);
    if (!m) return;
    m->net->weights.contrastive.present = 0;
    needle_session *s = open_session(m, six, NULL);
    if (s) {
        CHECK(s->retr == NULL);
        CHECK(nd_grammar_tool_count(s->grammar) == N_FIT);
        char *env = NULL;
        needle_error err = {0};
        CHECK(needle_session_send(s, "turn on the lights", &env, &err) == 0);
        CHECK(s->n_selected == 0 && nd_grammar_tool_count(s->grammar) == N_FIT);
        nd_json *block = NULL;
        CHECK(nd_json_parse(s->tools_compact, strlen(s->tools_compact), "block", &block, &err) == 0);
        CHECK(block && block->count == N_FIT);
        nd_json_free(block);
        free(env);
        needle_session_close(s);
    }
    needle_session_options so = {.tools_json = catalogue};
    needle_error err = {0};
    s = NULL;
    CHECK(needle_session_open(m, &so, &s, &err) == NEEDLE_ELIMIT && s == NULL);
    CHECKF(strstr(err.message, "tools: the tools block is ") && strstr(err.message, " over the limit of ") &&
               strstr(err.message, "(max_seq_len 512 less 32 reserved for the request"),
           "%s", err.message);
    m->net->weights.contrastive.present = 1;
    needle_model_close(m);
}

/* Five tools or fewer: all shown, no model run to embed them. */
static void test_five_tools_need_no_retrieval(void)
{
    needle_model *m = open_model(MODEL);
    nd_json *all = NULL;
    needle_error err = {0};
    CHECK(nd_json_parse(catalogue, strlen(catalogue), "cat", &all, &err) == 0);
    nd_buf b;
    nd_buf_init(&b);
    nd_buf_putc(&b, '[');
    for (int i = 0; i < 5; i++) {
        if (i) nd_buf_putc(&b, ',');
        nd_json_write(&b, &all->items[i], 1);
    }
    nd_buf_putc(&b, ']');
    needle_session *s = m ? open_session(m, b.data, NULL) : NULL;
    if (s) {
        CHECK(s->retr == NULL);
        CHECK(nd_grammar_tool_count(s->grammar) == 5);
        CHECK(!strcmp(s->tools_compact, b.data));
    }
    needle_session_close(s);
    nd_buf_free(&b);
    nd_json_free(all);
    needle_model_close(m);
}

/* The catalogue is embedded on one reused state (retrieval.c, embedder): each
 * tool's embedding is the one embedding it alone gives (bit for bit on the
 * CPU; embeddings_agree). */
static void test_catalogue_embeddings_equal_single_embeddings(void)
{
    needle_model *m = open_model(MODEL);
    if (!m) return;
    nd_json *all = NULL;
    needle_error err = {0};
    nd_retriever *r = NULL;
    CHECK(nd_json_parse(catalogue, strlen(catalogue), "cat", &all, &err) == 0);
    CHECKF(all && nd_retriever_build(m->net, m->tok, all, NULL, &r, &err) == 0, "%s", err.message);
    if (r) {
        CHECK(r->n_tools == N_CATALOGUE && r->embedded == N_CATALOGUE);
        float *one = malloc(sizeof(float) * (size_t)r->dim);
        int same = 0;
        double worst = 0;
        for (int i = 0; one && i < r->n_tools; i++)
            if (nd_retrieval_embed_text(m->net, m->tok, r->texts[i], one, &err) == 0 &&
                embeddings_agree(m, one, r->emb + (size_t)i * r->dim, r->dim, &worst))
                same++;
        CHECKF(same == N_CATALOGUE, "%d of %d embeddings equal (backend %s, max |diff| %.3g)", same, N_CATALOGUE,
               m->net->be->name, worst);
        if (strcmp(m->net->be->name, "cpu")) printf("        backend %s: max |diff| %.3g\n", m->net->be->name, worst);
        free(one);
    }
    nd_retriever_free(r);
    nd_json_free(all);
    needle_model_close(m);
}

int main(void)
{
    catalogue = tool_catalogue_load(N_CATALOGUE, -1);
    if (!catalogue) {
        fprintf(stderr, "  FAIL: could not write the tool catalogue with tools/gen_data.py\n");
        printf("0 passed, 1 failed\n");
        return 1;
    }
    RUN(test_embedding_matches_golden);
    RUN(test_top_k_order_and_ties);
    RUN(test_catalogue_top5_rendered_and_compiled);
    RUN(test_selection_kept_for_conversation);
    RUN(test_no_head_renders_every_tool);
    RUN(test_catalogue_embeddings_equal_single_embeddings);
    RUN(test_five_tools_need_no_retrieval);
    free(catalogue);
    return check_summary();
}
