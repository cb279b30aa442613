/* chat.c - POST /v1/chat/completions: an OpenAI chat request run as needle
 * session turns, answered as an OpenAI chat.completion (or SSE chunks).
 *
 * Mapping (README "needle serve" says the same for users):
 *   system/developer messages  -> the session's system text (joined by "\n")
 *   tools [{type:function,function:{name,description,parameters}}]
 *                              -> the session's tools (needle form); absent: --tools
 *   a final user message       -> needle_session_send
 *   final tool messages        -> needle_session_tool_result (one message: its
 *                                 JSON content, or the text as a JSON string;
 *                                 several: a JSON array of them, in order)
 *   tool_choice  auto: as is; none: no decode, an empty answer; named: only
 *                that tool is declared; required/named: the grammar still
 *                allows "no call", which is reported as needle.tool_choice_unmet
 *   envelope     -> message.tool_calls (ids, JSON-string arguments),
 *                   finish_reason tool_calls / stop / length (budget exhausted),
 *                   and the rest in a `needle` object.
 *
 * History: the session cache (session_cache.c) continues a conversation the
 * server itself answered.  Otherwise a fresh session replays only the last
 * turn: the last user message, and when the request ends in tool results,
 * that user message is sent first (the model's own call is regenerated and
 * discarded) and then the results.  Earlier turns, and assistant messages the
 * server did not write, are not replayed: Needle was trained on single turns
 * and the public session API can only append turns the model generates. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/session.h"
#include "server/chat.h"

static double num_or(const nd_json *v, double dflt) { return v && v->type == ND_JSON_NUMBER ? v->num : dflt; }
static const char *str_or(const nd_json *v, const char *dflt) { return v && v->type == ND_JSON_STRING ? v->str : dflt; }

/* One session turn; the envelope parsed into t.  0, or the needle error code. */
static int run_turn(needle_session *s, int kind, const char *text, turn *t, needle_error *err)
{
    char *env = NULL;
    int rc = kind == ROLE_TOOL ? needle_session_tool_result(s, text, &env, err) : needle_session_send(s, text, &env, err);
    if (rc) return rc;
    nd_json_free(t->env);
    t->env = NULL;
    rc = nd_json_parse(env, strlen(env), "envelope", &t->env, err);
    needle_free(env);
    if (rc) return rc;
    const nd_json *e = t->env;
    t->calls = nd_json_get(e, "function_calls");
    const nd_json *ok = nd_json_get(e, "success");
    t->success = ok && ok->type == ND_JSON_TRUE;
    t->error = str_or(nd_json_get(e, "error"), NULL);
    t->error_code = (int)num_or(nd_json_get(e, "error_code"), 0);
    t->reasoning = str_or(nd_json_get(e, "reasoning"), "");
    t->type = str_or(nd_json_get(e, "type"), "respond");
    t->confidence = num_or(nd_json_get(e, "confidence"), NAN);
    t->prefill_tps = num_or(nd_json_get(e, "prefill_tps"), 0);
    t->decode_tps = num_or(nd_json_get(e, "decode_tps"), 0);
    t->peak_ram_mb = num_or(nd_json_get(e, "peak_ram_mb"), 0);
    /* tokens: what this turn evaluated, less what it generated */
    t->completion_tokens += s->last_new_tokens;
    int evaluated = (int)s->turn_ids.len;
    t->prompt_tokens += evaluated > s->last_new_tokens ? evaluated - s->last_new_tokens : 0;
    return 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* {"tools":[...]}: the tools retrieval showed the model, or NULL when it showed all. */
static char *router_names(const needle_session *s)
{
    if (!s->retr || s->n_selected <= 0 || !s->tools) return NULL;
    nd_buf b;
    nd_buf_init(&b);
    nd_buf_puts(&b, "{\"tools\":[");
    for (int i = 0; i < s->n_selected; i++) {
        const nd_json *name = nd_json_get(&s->tools->items[s->selected[i]], "name");
        if (i) nd_buf_putc(&b, ',');
        nd_json_write_string(&b, name ? name->str : "", name ? name->len : 0, 0);
    }
    nd_buf_puts(&b, "]}");
    return b.oom ? (nd_buf_free(&b), NULL) : nd_buf_take(&b);
}

static int session_error_status(int code)
{
    switch (code) {
    case NEEDLE_EJSON: case NEEDLE_ESCHEMA: case NEEDLE_EUTF8: case NEEDLE_EINVAL: case NEEDLE_ELIMIT:
    case NEEDLE_ESTATE:
        return 400;
    default:
        return 500;
    }
}

void nd_chat_completions(const nd_request *rq, nd_reply *r)
{
    nd_server *srv = rq->srv;
    double t0 = now_ms();
    chat_req q;
    memset(&q, 0, sizeof q);
    nd_buf_init(&q.system);
    turn t;
    memset(&t, 0, sizeof t);
    t.confidence = NAN;
    answer a;
    memset(&a, 0, sizeof a);
    snprintf(a.id, sizeof a.id, "chatcmpl-%016llx", (unsigned long long)nd_server_next_id(srv));
    a.created = (long)time(NULL);
    a.model = srv->cfg->model_id;
    a.session = "none";
    if (chat_request_parse(&q, rq, r)) goto out;

    if (q.choice == CHOICE_NONE) { /* nothing may be called: no decode */
        a.finish = "stop";
        a.total_ms = now_ms() - t0;
        chat_answer(r, srv, &q, &t, &a);
        goto out;
    }

    /* the new turn: the last user message, or the tool results ending the list */
    int last = q.n - 1, p = last;
    if (q.msgs[last].role == ROLE_TOOL) {
        while (p > 0 && q.msgs[p - 1].role == ROLE_TOOL) p--;
        if (p == 0 || q.msgs[p - 1].role != ROLE_ASSISTANT) {
            nd_reply_bad(r, "messages: tool results must follow the assistant message whose tool_calls they answer");
            goto out;
        }
    }
    uint64_t h = q.settings;
    for (int i = 0; i < p; i++) h = nd_hash_bytes(h, &q.msgs[i].hash, sizeof q.msgs[i].hash);
    uint64_t prefix_hash = h;
    char *results = NULL;
    if (q.msgs[last].role == ROLE_TOOL && !(results = chat_tool_results(&q, p, last + 1))) {
        nd_reply_error(r, 500, "server_error", NULL, "out of memory");
        goto out;
    }

    int adm = nd_admission_enter(&srv->adm, rq->gone, rq->gone_ctx);
    if (adm != ND_ADMIT_OK) {
        free(results);
        if (adm == ND_ADMIT_GONE) r->drop = 1;
        else {
            nd_reply_error(r, 503, "server_error", "overloaded",
                           "the server is busy (%d decoding, %d queued); retry after a second", srv->adm.parallel,
                           srv->adm.queue);
            r->retry_after = 1;
        }
        goto out;
    }
    a.queue_ms = now_ms() - t0;
    needle_error err = {0};
    int rc = 0;
    needle_session *s = nd_session_cache_take(srv->cache, prefix_hash);
    nd_session_cache_count(srv->cache, s != NULL);
    a.session = s ? "reused" : "new";
    if (!s) {
        needle_session_options so;
        memset(&so, 0, sizeof so);
        so.system = q.system.len ? q.system.data : NULL;
        so.tools_json = q.tools_json;
        so.max_new_tokens = q.max_tokens;
        so.temperature = q.temperature;
        so.top_p = q.top_p;
        so.seed = q.seed;
        so.strict = q.strict;
        so.grounded_decoding = q.copy_values;
        so.split_requests = q.split;
        so.ask_again = q.ask_again;
        rc = needle_session_open(srv->cfg->model, &so, &s, &err);
        if (!rc && results) {
            /* a history the server did not answer: replay its last user request */
            int u = p - 1;
            while (u >= 0 && q.msgs[u].role != ROLE_USER) u--;
            if (u < 0) {
                err.code = rc = NEEDLE_EINVAL;
                snprintf(err.message, sizeof err.message,
                         "messages: tool results with no user request before them to answer");
            } else {
                rc = run_turn(s, ROLE_USER, q.msgs[u].text, &t, &err);
                if (!rc && !t.success) { /* the replayed turn ran out of budget */
                    err.code = rc = t.error_code ? t.error_code : NEEDLE_ELIMIT;
                    snprintf(err.message, sizeof err.message, "replaying the last user request: %s",
                             t.error ? t.error : "failed");
                }
            }
        }
    }
    if (!rc && rq->gone && rq->gone(rq->gone_ctx)) { /* hung up while we prepared: skip the decode */
        nd_admission_leave(&srv->adm);
        nd_admission_count_cancel(&srv->adm);
        needle_session_close(s);
        free(results);
        r->drop = 1;
        goto out;
    }
    if (!rc) rc = run_turn(s, results ? ROLE_TOOL : ROLE_USER, results ? results : q.msgs[last].text, &t, &err);
    nd_admission_leave(&srv->adm);
    free(results);
    if (rc) {
        needle_session_close(s);
        int status = session_error_status(rc);
        nd_reply_error(r, status, status == 400 ? "invalid_request_error" : "server_error", NULL, "%s",
                       err.message[0] ? err.message : needle_strerror(rc));
        goto out;
    }
    a.router = router_names(s);
    a.n_calls = t.success && t.calls && t.calls->type == ND_JSON_ARRAY ? (int)t.calls->count : 0;
    a.finish = !t.success ? (t.error_code == NEEDLE_ELIMIT ? "length" : "stop") : a.n_calls > 0 ? "tool_calls" : "stop";
    a.unmet = (q.choice == CHOICE_REQUIRED || q.choice == CHOICE_NAMED) && a.n_calls == 0;
    if (t.success) {
        /* keep the conversation, keyed by its history plus the answer as the
         * client will send it back */
        uint64_t ah = nd_hash_str(ND_HASH_SEED, "assistant");
        for (int i = 0; i < a.n_calls; i++) {
            const nd_json *c = &t.calls->items[i], *name = nd_json_get(c, "name");
            ah = chat_hash_call(ah, name && name->type == ND_JSON_STRING ? name->str : "", nd_json_get(c, "arguments"));
        }
        for (int i = p; i < q.n; i++) h = nd_hash_bytes(h, &q.msgs[i].hash, sizeof q.msgs[i].hash);
        h = nd_hash_bytes(h, &ah, sizeof ah);
        nd_session_cache_put(srv->cache, h, s);
    } else {
        needle_session_close(s); /* the conversation ended (budget exhausted) */
    }
    a.total_ms = now_ms() - t0;
    chat_answer(r, srv, &q, &t, &a);
out:
    free(a.router);
    nd_json_free(t.env);
    chat_req_free(&q);
}
