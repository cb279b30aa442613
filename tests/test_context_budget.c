/* test_context_budget.c - tools, system text and turns longer than the model's
 * context are refused before anything is evaluated, with the part, its length,
 * the excess and the limit (issue 20, D2; agent/context_budget.h); retrieval
 * narrows the selected tools until their block fits.  Checks look at codes,
 * messages and the session's state, never at time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/context_budget.h"
#include "agent/retrieval.h"
#include "agent/session.h"
#include "check.h"
#include "core/buf.h"
#include "core/json.h"
#include "needle.h"
#include "text/tokenizer.h"

#define MODEL "tests/golden/tiny_w4.cact" /* max_seq_len 512, a contrastive head */
#define SMALL_TOOLS "[{\"name\":\"lights\",\"parameters\":{\"type\":\"object\",\"properties\":{\"on\":{\"type\":\"boolean\"}},\"required\":[\"on\"]}}]"

static needle_model *open_model(void)
{
    needle_model_options mo = {.threads = 1};
    needle_model *m = NULL;
    needle_error err = {0};
    CHECKF(needle_model_open(MODEL, NULL, &mo, &m, &err) == 0, "%s", err.message);
    return m;
}

/* n bytes of varied plain words (so the tokenizer cannot merge them away). */
static char *words(size_t n)
{
    static const char *const w[] = {"turn", "the", "kitchen", "lights", "set", "timer", "for", "music", "paris", "alice"};
    char *s = malloc(n + 1);
    if (!s) return NULL;
    size_t at = 0;
    for (int i = 0; at < n; i++) {
        const char *x = w[(i * 7 + i / 10) % 10];
        for (size_t k = 0; x[k] && at < n; k++) s[at++] = x[k];
        if (at < n) s[at++] = ' ';
    }
    s[n] = 0;
    return s;
}

/* A tools array of one tool whose description is `desc`. */
static char *tool_with_description(const char *name, const char *desc)
{
    nd_buf b;
    nd_buf_init(&b);
    nd_buf_printf(&b, "[{\"name\":\"%s\",\"description\":\"", name);
    nd_buf_puts(&b, desc);
    nd_buf_puts(&b, "\",\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\"}}}}]");
    return b.oom ? (nd_buf_free(&b), NULL) : nd_buf_take(&b);
}

static int open_session(needle_model *m, const char *system, const char *tools, needle_session **s, needle_error *err)
{
    needle_session_options so = {.system = system, .tools_json = tools, .max_new_tokens = 200};
    *s = NULL;
    return needle_session_open(m, &so, s, err);
}

/* Parse "<prefix>N tokens, X over the limit of L" and check N - X == L. */
static int numbers_agree(const char *msg, const char *prefix, int *n_out, int *limit_out)
{
    const char *p = strstr(msg, prefix);
    int n = 0, x = 0, l = 0;
    if (!p || sscanf(p + strlen(prefix), "%d tokens, %d over the limit of %d", &n, &x, &l) != 3) return 0;
    if (n_out) *n_out = n;
    if (limit_out) *limit_out = l;
    return n - x == l && x > 0;
}

static void test_tools_block_longer_than_context(void)
{
    needle_model *m = open_model();
    if (!m) return;
    char *desc = words(4000), *tools = desc ? tool_with_description("describe", desc) : NULL;
    needle_session *s = NULL;
    needle_error err = {0};
    CHECK(tools && open_session(m, NULL, tools, &s, &err) == NEEDLE_ELIMIT && !s);
    int n = 0, limit = 0;
    CHECKF(numbers_agree(err.message, "tools: the tools block is ", &n, &limit), "%s", err.message);
    CHECKF(strstr(err.message, "(max_seq_len 512 less 32 reserved for the request and 7 for the prompt layout"), "%s",
           err.message);
    /* the count is the block's real length: the pinned prefix less the layout */
    int with = 0, without = 0;
    CHECK(nd_budget_prefix_len(m, NULL, tools, &with, &err) == 0 && nd_budget_prefix_len(m, NULL, "", &without, &err) == 0);
    CHECKF(n == with - without, "message says %d, prefix says %d", n, with - without);
    CHECK(limit == 512 - ND_REQUEST_RESERVE - without);
    free(tools);
    free(desc);

    /* 10 MB: refused from its byte length, without counting */
    desc = words((size_t)10 << 20);
    tools = desc ? tool_with_description("describe", desc) : NULL;
    CHECK(tools && open_session(m, NULL, tools, &s, &err) == NEEDLE_ELIMIT && !s);
    CHECKF(strstr(err.message, "tools: the tools block is at least ") && strstr(err.message, " bytes), over the limit of "),
           "%s", err.message);
    free(tools);
    free(desc);
    needle_model_close(m);
}

static void test_system_longer_than_context(void)
{
    needle_model *m = open_model();
    if (!m) return;
    char *sys = words(100 << 10);
    needle_session *s = NULL;
    needle_error err = {0};
    CHECK(sys && open_session(m, sys, SMALL_TOOLS, &s, &err) == NEEDLE_ELIMIT && !s);
    CHECKF(numbers_agree(err.message, "system: the system text is ", NULL, NULL), "%s", err.message);
    free(sys);
    /* a system text that fits, with tools that then do not: the tools are named */
    sys = words(1200);
    char *desc = words(1200), *tools = desc ? tool_with_description("t", desc) : NULL;
    CHECK(sys && tools && open_session(m, sys, tools, &s, &err) == NEEDLE_ELIMIT && !s);
    CHECKF(numbers_agree(err.message, "tools: the tools block is ", NULL, NULL) &&
               strstr(err.message, "for the prompt layout and system text"),
           "%s", err.message);
    free(tools);
    free(desc);
    free(sys);
    needle_model_close(m);
}

static void test_turns_longer_than_context(void)
{
    needle_model *m = open_model();
    if (!m) return;
    needle_session *s = NULL;
    needle_error err = {0};
    CHECK(open_session(m, NULL, SMALL_TOOLS, &s, &err) == 0);
    if (!s) {
        needle_model_close(m);
        return;
    }
    char *q = words(3000), *env = NULL;
    CHECK(q && needle_session_send(s, q, &env, &err) == NEEDLE_ELIMIT && !env);
    int n = 0, limit = 0;
    CHECKF(numbers_agree(err.message, "query: the turn is ", &n, &limit), "%s", err.message);
    CHECK(limit == nd_budget_request_limit(&s->budget, s->prefix_len) && limit == 512 - s->prefix_len);
    CHECK(!s->started && (!s->st || nd_state_position(s->st) == 0)); /* nothing was evaluated */
    free(q);
    q = words(1 << 20); /* 1 MB: refused from its byte length */
    CHECK(q && needle_session_send(s, q, &env, &err) == NEEDLE_ELIMIT && !env);
    CHECKF(strstr(err.message, "query: the turn is at least "), "%s", err.message);
    free(q);

    /* the session still answers a normal request, then refuses a long tool
     * result without ending the conversation */
    CHECKF(needle_session_send(s, "turn on the lights", &env, &err) == 0, "%s", err.message);
    needle_free(env);
    env = NULL;
    int pos = s->st ? nd_state_position(s->st) : -1;
    nd_buf r;
    nd_buf_init(&r);
    nd_buf_puts(&r, "{\"log\":\"");
    char *w = words(3000);
    nd_buf_puts(&r, w ? w : "");
    nd_buf_puts(&r, "\"}");
    free(w);
    CHECK(!r.oom && needle_session_tool_result(s, r.data, &env, &err) == NEEDLE_ELIMIT && !env);
    CHECKF(numbers_agree(err.message, "tool result: the turn is ", NULL, NULL), "%s", err.message);
    CHECK(s->started && s->st && nd_state_position(s->st) == pos);
    CHECKF(needle_session_tool_result(s, "{\"ok\":true}", &env, &err) == 0, "%s", err.message);
    needle_free(env);
    nd_buf_free(&r);
    needle_session_close(s);
    needle_model_close(m);
}

/* The limit itself: a turn of exactly the room left passes, one more token does not. */
static void test_request_limit_boundary(void)
{
    nd_budget b = {.context = 512, .frame = 7, .system = 0};
    needle_error err = {0};
    CHECK(nd_budget_check_request(&b, 400, 112, "query", &err) == 0);
    CHECK(nd_budget_check_request(&b, 400, 113, "query", &err) == NEEDLE_ELIMIT);
    CHECKF(strstr(err.message, "query: the turn is 113 tokens, 1 over the limit of 112 (max_seq_len 512 less 400 tokens"),
           "%s", err.message);
}

/* Eight tools of ~150 tokens each (> 5 x 150 = the context): each fits alone,
 * retrieval keeps the best that fit together; one tool that can never fit
 * is refused at load, by index and name. */
static char *catalogue_of(int n, int big_index, size_t desc_bytes)
{
    static const char *const names[] = {"lights", "music", "weather", "timer", "message", "alarm", "thermostat", "taxi"};
    nd_buf b;
    nd_buf_init(&b);
    nd_buf_putc(&b, '[');
    for (int i = 0; i < n; i++) {
        char *d = words(i == big_index ? 20000 : desc_bytes + (size_t)i * 7);
        nd_buf_printf(&b, "%s{\"name\":\"%s\",\"description\":\"%s %s\",\"parameters\":{\"type\":\"object\","
                          "\"properties\":{\"value\":{\"type\":\"string\"}}}}",
                      i ? "," : "", names[i % 8], names[i % 8], d ? d : "");
        free(d);
    }
    nd_buf_putc(&b, ']');
    return b.oom ? (nd_buf_free(&b), NULL) : nd_buf_take(&b);
}

static void test_retrieval_narrows_to_fit(void)
{
    needle_model *m = open_model();
    if (!m) return;
    char *tools = catalogue_of(8, -1, 480);
    needle_session *s = NULL;
    needle_error err = {0};
    CHECKF(tools && open_session(m, NULL, tools, &s, &err) == 0, "%s", err.message);
    if (s) {
        CHECK(s->retr != NULL);
        char *env = NULL;
        const char *query = "what is the weather in paris";
        CHECKF(needle_session_send(s, query, &env, &err) == 0, "%s", err.message);
        needle_free(env);
        CHECKF(s->n_selected >= 1 && s->n_selected < ND_RETRIEVAL_TOP_K, "%d selected", s->n_selected);
        CHECK(s->prefix_len > 0 && s->prefix_len <= 512 - ND_REQUEST_RESERVE);
        CHECK(s->st && nd_state_sinks(s->st) == s->prefix_len);
        CHECK(nd_grammar_tool_count(s->grammar) == (size_t)s->n_selected);
        /* the kept ones are the best n by score, and one more would not fit */
        float q[512];
        int idx[ND_RETRIEVAL_TOP_K], n = s->n_selected;
        CHECK(s->retr->dim <= 512 && nd_retrieval_embed_text(m->net, m->tok, query, q, &err) == 0);
        CHECK(nd_retrieval_top_k(s->retr->emb, s->retr->n_tools, s->retr->dim, q, n, idx) == n);
        CHECK(!memcmp(idx, s->selected, sizeof(int) * (size_t)n));
        int more[ND_RETRIEVAL_TOP_K];
        int n1 = nd_retrieval_top_k(s->retr->emb, s->retr->n_tools, s->retr->dim, q, n + 1, more);
        nd_buf b;
        nd_buf_init(&b);
        nd_buf_putc(&b, '[');
        for (int i = 0; i < n1; i++) {
            if (i) nd_buf_putc(&b, ',');
            nd_buf_puts(&b, s->retr->texts[more[i]]);
        }
        nd_buf_putc(&b, ']');
        int P = 0;
        CHECK(nd_budget_check_tools(m, &s->budget, NULL, b.data, NULL, 1, &P, &err) == NEEDLE_ELIMIT);
        nd_buf_free(&b);
        needle_session_close(s);
    }
    free(tools);

    tools = catalogue_of(8, 3, 100);
    CHECK(tools && open_session(m, NULL, tools, &s, &err) == NEEDLE_ELIMIT && !s);
    CHECKF(numbers_agree(err.message, "tools: tool 3 (\"timer\") alone is ", NULL, NULL), "%s", err.message);
    free(tools);
    needle_model_close(m);
}

/* A further request that would carry the positions past max_seq_len (less
 * ND_ANSWER_RESERVE for the answer) starts a new conversation at fresh
 * positions with the tools already selected; one that fits goes on in the
 * same cache. */
static void test_follow_up_past_context_starts_over(void)
{
    needle_model *m = open_model();
    if (!m) return;
    char *tools = catalogue_of(8, -1, 480); /* retrieval: a pinned block near the limit */
    needle_session *s = NULL;
    needle_error err = {0};
    CHECKF(tools && open_session(m, NULL, tools, &s, &err) == 0, "%s", err.message);
    int restarts = 0, continued = 0;
    for (int turn = 0; s && turn < 6; turn++) {
        const char *q = turn ? "and what about the music in the kitchen" : "what is the weather in paris";
        int was_started = s->started, pos = was_started ? nd_state_position(s->st) : 0;
        int n_sel = s->n_selected, sel[ND_RETRIEVAL_TOP_K];
        memcpy(sel, s->selected, sizeof sel);
        nd_ids seg;
        nd_ids_init(&seg);
        nd_buf b;
        nd_buf_init(&b);
        nd_buf_printf(&b, "\n<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", q);
        CHECK(nd_tokenizer_encode(m->tok, b.data, b.len, &seg, &err) == 0);
        int outgrows = pos + (int)s->pending.len + (int)seg.len + ND_ANSWER_RESERVE > 512;
        char *env = NULL;
        CHECKF(needle_session_send(s, q, &env, &err) == 0, "%s", err.message);
        needle_free(env);
        if (was_started && outgrows) {
            restarts++;
            /* the conversation started over after its pinned block, with the same tools */
            CHECK(s->n_selected == n_sel && !memcmp(sel, s->selected, sizeof(int) * (size_t)n_sel));
            CHECK(nd_state_sinks(s->st) == s->prefix_len);
            /* what the conversation heard starts again with this request */
            CHECK(s->heard.len == strlen(q) + 1 && !strncmp(s->heard.data, q, strlen(q)));
        } else if (was_started) {
            continued++;
            CHECK(!s->started || nd_state_position(s->st) >= pos + (int)seg.len);
            CHECK(s->heard.len > strlen(q) + 1);
        }
        nd_buf_free(&b);
        nd_ids_free(&seg);
    }
    CHECKF(restarts > 0, "no further request outgrew the context (%d continued)", continued);
    needle_session_close(s);
    free(tools);

    /* small tools: a short follow-up fits and continues the same cache */
    CHECK(open_session(m, NULL, SMALL_TOOLS, &s, &err) == 0);
    char *env = NULL;
    if (s && needle_session_send(s, "turn on the lights", &env, &err) == 0 && s->started) {
        needle_free(env);
        env = NULL;
        int pos = nd_state_position(s->st);
        CHECKF(needle_session_send(s, "and off again", &env, &err) == 0, "%s", err.message);
        CHECK(!s->started || nd_state_position(s->st) > pos);
        CHECK(s->heard.len > strlen("and off again") + 1);
    }
    needle_free(env);
    needle_session_close(s);
    needle_model_close(m);
}

int main(void)
{
    RUN(test_tools_block_longer_than_context);
    RUN(test_system_longer_than_context);
    RUN(test_turns_longer_than_context);
    RUN(test_request_limit_boundary);
    RUN(test_retrieval_narrows_to_fit);
    RUN(test_follow_up_past_context_starts_over);
    return check_summary();
}
