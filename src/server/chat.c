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
#include "core/json.h"
#include "server/server_internal.h"

enum { ROLE_USER, ROLE_ASSISTANT, ROLE_TOOL };
enum { CHOICE_AUTO, CHOICE_NONE, CHOICE_REQUIRED, CHOICE_NAMED };

typedef struct chat_msg {
    int role;
    char *text;    /* user / tool: the content text; assistant: NULL */
    uint64_t hash; /* this message's canonical hash */
} chat_msg;

typedef struct chat_req {
    nd_json *root;
    chat_msg *msgs; /* non-system messages, in order */
    int n;
    nd_buf system;
    char *tools_json; /* needle form; NULL: no tools */
    int n_tools;
    int choice;
    const char *named;
    int max_tokens;
    float temperature, top_p;
    uint64_t seed;
    int stream, include_usage;
    uint64_t settings; /* hash of everything above that shapes the session */
} chat_req;

static void chat_req_free(chat_req *q)
{
    for (int i = 0; i < q->n; i++) free(q->msgs[i].text);
    free(q->msgs);
    nd_buf_free(&q->system);
    free(q->tools_json);
    nd_json_free(q->root);
}

/* Content as text: a string, or an array of {"type":"text","text":...} parts
 * (joined); null when allow_null.  0, or -1 with r filled. */
static int content_text(const nd_json *c, int allow_null, int i, nd_buf *out, nd_reply *r)
{
    if (!c || c->type == ND_JSON_NULL) {
        if (allow_null) return 0;
        nd_reply_bad(r, "messages[%d].content: required (a string or an array of text parts)", i);
        return -1;
    }
    if (c->type == ND_JSON_STRING) {
        nd_buf_append(out, c->str, c->len);
        return 0;
    }
    if (c->type != ND_JSON_ARRAY) {
        nd_reply_bad(r, "messages[%d].content: must be a string or an array of text parts", i);
        return -1;
    }
    for (size_t k = 0; k < c->count; k++) {
        const nd_json *part = &c->items[k], *type = nd_json_get(part, "type"), *text = nd_json_get(part, "text");
        if (!type || type->type != ND_JSON_STRING || strcmp(type->str, "text") != 0 || !text ||
            text->type != ND_JSON_STRING) {
            nd_reply_bad(r, "messages[%d].content[%zu]: only {\"type\":\"text\",\"text\":...} parts are supported", i, k);
            return -1;
        }
        nd_buf_append(out, text->str, text->len);
    }
    return 0;
}

/* Text with no NUL bytes (the session API takes C strings). */
static int no_nul(const nd_buf *b, int i, nd_reply *r)
{
    if (b->data && strlen(b->data) != b->len) {
        nd_reply_bad(r, "messages[%d].content: contains a NUL character", i);
        return -1;
    }
    return 0;
}

/* The canonical hash of an assistant message: its calls' names and compact
 * arguments (ids and content are ignored: clients rewrite them freely). */
static uint64_t hash_call(uint64_t h, const char *name, const nd_json *args)
{
    nd_buf b;
    nd_buf_init(&b);
    if (args) nd_json_write(&b, args, 0);
    h = nd_hash_str(h, name);
    h = nd_hash_str(h, b.data ? b.data : "");
    nd_buf_free(&b);
    return h;
}

static int parse_assistant(const nd_json *m, int i, uint64_t *hash, nd_reply *r)
{
    uint64_t h = nd_hash_str(ND_HASH_SEED, "assistant");
    const nd_json *calls = nd_json_get(m, "tool_calls");
    if (calls && calls->type != ND_JSON_NULL) {
        if (calls->type != ND_JSON_ARRAY) {
            nd_reply_bad(r, "messages[%d].tool_calls: must be an array", i);
            return -1;
        }
        for (size_t k = 0; k < calls->count; k++) {
            const nd_json *fn = nd_json_get(&calls->items[k], "function");
            const nd_json *name = nd_json_get(fn, "name"), *args = nd_json_get(fn, "arguments");
            if (!name || name->type != ND_JSON_STRING || (args && args->type != ND_JSON_STRING)) {
                nd_reply_bad(r, "messages[%d].tool_calls[%zu]: needs function.name and function.arguments strings", i, k);
                return -1;
            }
            nd_json *parsed = NULL;
            needle_error e;
            if (args && nd_json_parse(args->str, args->len, NULL, &parsed, &e) != 0) parsed = NULL;
            if (parsed || !args) h = hash_call(h, name->str, parsed);
            else h = nd_hash_str(nd_hash_str(h, name->str), args->str); /* not JSON: the raw text */
            nd_json_free(parsed);
        }
    }
    *hash = h;
    return 0;
}

static int parse_messages(chat_req *q, const nd_json *msgs, int max_messages, nd_reply *r)
{
    if (!msgs || msgs->type != ND_JSON_ARRAY || msgs->count == 0) {
        nd_reply_bad(r, "messages: required, a non-empty array");
        return -1;
    }
    if (msgs->count > (size_t)max_messages) {
        nd_reply_bad(r, "messages: %zu messages, more than this server's limit of %d", msgs->count, max_messages);
        return -1;
    }
    if (!(q->msgs = calloc(msgs->count, sizeof *q->msgs))) {
        nd_reply_error(r, 500, "server_error", NULL, "out of memory");
        return -1;
    }
    for (size_t k = 0; k < msgs->count; k++) {
        int i = (int)k;
        const nd_json *m = &msgs->items[k], *role = nd_json_get(m, "role");
        if (m->type != ND_JSON_OBJECT || !role || role->type != ND_JSON_STRING) {
            nd_reply_bad(r, "messages[%d]: must be an object with a \"role\" string", i);
            return -1;
        }
        const char *ro = role->str;
        const nd_json *content = nd_json_get(m, "content");
        nd_buf text;
        nd_buf_init(&text);
        if (!strcmp(ro, "system") || !strcmp(ro, "developer")) {
            if (content_text(content, 0, i, &text, r) || no_nul(&text, i, r)) {
                nd_buf_free(&text);
                return -1;
            }
            if (q->system.len) nd_buf_putc(&q->system, '\n');
            nd_buf_append(&q->system, text.data ? text.data : "", text.len);
            nd_buf_free(&text);
            continue;
        }
        chat_msg *cm = &q->msgs[q->n];
        if (!strcmp(ro, "user") || !strcmp(ro, "tool")) {
            cm->role = ro[0] == 'u' ? ROLE_USER : ROLE_TOOL;
            if (content_text(content, 0, i, &text, r) || no_nul(&text, i, r)) {
                nd_buf_free(&text);
                return -1;
            }
            nd_buf_putc(&text, '\0'); /* an empty content still gets a string */
            if (text.oom) {
                nd_buf_free(&text);
                nd_reply_error(r, 500, "server_error", NULL, "out of memory");
                return -1;
            }
            cm->text = nd_buf_take(&text);
            cm->hash = nd_hash_str(nd_hash_str(ND_HASH_SEED, ro), cm->text);
        } else if (!strcmp(ro, "assistant")) {
            cm->role = ROLE_ASSISTANT;
            if (parse_assistant(m, i, &cm->hash, r)) return -1;
        } else {
            nd_reply_bad(r, "messages[%d].role: '%s' is not one of system, developer, user, assistant, tool", i, ro);
            return -1;
        }
        q->n++;
    }
    if (q->n == 0) {
        nd_reply_bad(r, "messages: only system messages; add a user message");
        return -1;
    }
    int last = q->msgs[q->n - 1].role;
    if (last != ROLE_USER && last != ROLE_TOOL) {
        nd_reply_bad(r, "messages: the last message must be a user message or tool results");
        return -1;
    }
    return 0;
}

/* OpenAI tools -> the needle form [{"name","description","parameters"}];
 * with tool_choice named, only that tool. */
static int parse_tools(chat_req *q, const nd_json *tools, const char *default_tools, nd_reply *r)
{
    if (!tools || tools->type == ND_JSON_NULL) {
        if (!default_tools) return 0; /* no tools at all */
        nd_json *parsed = NULL;       /* the server's --tools, through the same checks */
        needle_error e;
        if (nd_json_parse(default_tools, strlen(default_tools), "--tools", &parsed, &e) != 0) {
            nd_reply_error(r, 500, "server_error", NULL, "%s", e.message);
            return -1;
        }
        int rc = parse_tools(q, parsed, NULL, r);
        nd_json_free(parsed);
        return rc;
    }
    if (tools->type != ND_JSON_ARRAY) {
        nd_reply_bad(r, "tools: must be an array of {\"type\":\"function\",\"function\":{...}}");
        return -1;
    }
    nd_buf b;
    nd_buf_init(&b);
    nd_buf_putc(&b, '[');
    int found_named = 0;
    for (size_t k = 0; k < tools->count; k++) {
        const nd_json *t = &tools->items[k], *fn = nd_json_get(t, "function"), *type = nd_json_get(t, "type");
        if (!fn && nd_json_get(t, "name")) fn = t; /* the needle form is accepted too */
        if (t->type != ND_JSON_OBJECT || !fn || fn->type != ND_JSON_OBJECT ||
            (type && (type->type != ND_JSON_STRING || strcmp(type->str, "function") != 0))) {
            nd_buf_free(&b);
            nd_reply_bad(r, "tools[%zu]: must be {\"type\":\"function\",\"function\":{\"name\",\"parameters\"}}", k);
            return -1;
        }
        const nd_json *name = nd_json_get(fn, "name"), *desc = nd_json_get(fn, "description"),
                      *params = nd_json_get(fn, "parameters");
        if (!name || name->type != ND_JSON_STRING || name->len == 0) {
            nd_buf_free(&b);
            nd_reply_bad(r, "tools[%zu].function.name: required, a non-empty string", k);
            return -1;
        }
        if (desc && desc->type != ND_JSON_STRING) {
            nd_buf_free(&b);
            nd_reply_bad(r, "tools[%zu].function.description: must be a string", k);
            return -1;
        }
        if (params && params->type != ND_JSON_OBJECT) {
            nd_buf_free(&b);
            nd_reply_bad(r, "tools[%zu].function.parameters: must be a JSON Schema object", k);
            return -1;
        }
        if (q->choice == CHOICE_NAMED && strcmp(name->str, q->named) != 0) continue;
        found_named = 1;
        if (q->n_tools++) nd_buf_putc(&b, ',');
        nd_buf_puts(&b, "{\"name\":");
        nd_json_write_string(&b, name->str, name->len, 0);
        nd_buf_puts(&b, ",\"description\":");
        nd_json_write_string(&b, desc ? desc->str : "", desc ? desc->len : 0, 0);
        nd_buf_puts(&b, ",\"parameters\":");
        if (params) nd_json_write(&b, params, 0);
        else nd_buf_puts(&b, "{\"type\":\"object\",\"properties\":{}}");
        nd_buf_putc(&b, '}');
    }
    nd_buf_putc(&b, ']');
    if (b.oom) {
        nd_buf_free(&b);
        nd_reply_error(r, 500, "server_error", NULL, "out of memory");
        return -1;
    }
    if (q->choice == CHOICE_NAMED && !found_named) {
        nd_buf_free(&b);
        nd_reply_bad(r, "tool_choice: no tool named '%s' in tools", q->named);
        return -1;
    }
    q->tools_json = nd_buf_take(&b);
    return 0;
}

static int parse_number(const nd_json *v, const char *what, double lo, double hi, double *out, nd_reply *r)
{
    if (!v || v->type == ND_JSON_NULL) return 0;
    if (v->type != ND_JSON_NUMBER || !(v->num >= lo && v->num <= hi)) {
        nd_reply_bad(r, "%s: must be a number in [%g, %g]", what, lo, hi);
        return -1;
    }
    *out = v->num;
    return 0;
}

static int parse_request(chat_req *q, const nd_request *rq, nd_reply *r)
{
    const nd_server_config *cfg = rq->srv->cfg;
    needle_error e;
    if (nd_json_parse(rq->body, rq->len, NULL, &q->root, &e) != 0) {
        nd_reply_bad(r, "the request body is not valid JSON: %s", e.message);
        return -1;
    }
    const nd_json *root = q->root;
    if (root->type != ND_JSON_OBJECT) {
        nd_reply_bad(r, "the request body must be a JSON object");
        return -1;
    }
    const nd_json *v;
    if ((v = nd_json_get(root, "n")) && v->type != ND_JSON_NULL && !(v->type == ND_JSON_NUMBER && v->num == 1)) {
        nd_reply_bad(r, "n: only 1 is supported");
        return -1;
    }
    if ((v = nd_json_get(root, "stream")) && v->type != ND_JSON_NULL) {
        if (v->type != ND_JSON_TRUE && v->type != ND_JSON_FALSE) {
            nd_reply_bad(r, "stream: must be a boolean");
            return -1;
        }
        q->stream = v->type == ND_JSON_TRUE;
    }
    const nd_json *so = nd_json_get(root, "stream_options");
    if ((v = nd_json_get(so, "include_usage")) && v->type == ND_JSON_TRUE) q->include_usage = 1;
    double d = 0;
    const nd_json *mt = nd_json_get(root, "max_completion_tokens");
    if (!mt || mt->type == ND_JSON_NULL) mt = nd_json_get(root, "max_tokens");
    if (mt && mt->type != ND_JSON_NULL) {
        if (mt->type != ND_JSON_NUMBER || mt->num != floor(mt->num) || mt->num < 1 || mt->num > cfg->max_tokens) {
            nd_reply_bad(r, "max_tokens: must be an integer in [1, %d] (this server's limit)", cfg->max_tokens);
            return -1;
        }
        q->max_tokens = (int)mt->num;
    }
    d = 0;
    if (parse_number(nd_json_get(root, "temperature"), "temperature", 0, 2, &d, r)) return -1;
    q->temperature = (float)d;
    d = 1;
    if (parse_number(nd_json_get(root, "top_p"), "top_p", 0, 1, &d, r)) return -1;
    q->top_p = (float)d;
    d = 0;
    if (parse_number(nd_json_get(root, "seed"), "seed", 0, 9007199254740991.0, &d, r)) return -1;
    q->seed = (uint64_t)d;

    q->choice = CHOICE_AUTO;
    const nd_json *tc = nd_json_get(root, "tool_choice");
    if (tc && tc->type == ND_JSON_STRING) {
        if (!strcmp(tc->str, "none")) q->choice = CHOICE_NONE;
        else if (!strcmp(tc->str, "required")) q->choice = CHOICE_REQUIRED;
        else if (strcmp(tc->str, "auto") != 0) {
            nd_reply_bad(r, "tool_choice: '%s' is not none, auto, required or {\"type\":\"function\",...}", tc->str);
            return -1;
        }
    } else if (tc && tc->type == ND_JSON_OBJECT) {
        const nd_json *name = nd_json_get(nd_json_get(tc, "function"), "name");
        if (!name || name->type != ND_JSON_STRING) {
            nd_reply_bad(r, "tool_choice: a named choice is {\"type\":\"function\",\"function\":{\"name\":...}}");
            return -1;
        }
        q->choice = CHOICE_NAMED;
        q->named = name->str;
    } else if (tc && tc->type != ND_JSON_NULL) {
        nd_reply_bad(r, "tool_choice: must be a string or an object");
        return -1;
    }
    if (parse_messages(q, nd_json_get(root, "messages"), cfg->max_messages, r)) return -1;
    if (parse_tools(q, nd_json_get(root, "tools"), cfg->tools_json, r)) return -1;
    if ((q->choice == CHOICE_REQUIRED || q->choice == CHOICE_NAMED) && q->n_tools == 0) {
        nd_reply_bad(r, "tool_choice: '%s' needs at least one tool", q->choice == CHOICE_NAMED ? q->named : "required");
        return -1;
    }
    if (q->system.oom) {
        nd_reply_error(r, 500, "server_error", NULL, "out of memory");
        return -1;
    }
    uint64_t h = nd_hash_str(ND_HASH_SEED, "needle-serve-1");
    h = nd_hash_str(h, q->tools_json);
    h = nd_hash_str(h, q->system.data ? q->system.data : "");
    int ints[2] = {q->max_tokens, q->choice};
    h = nd_hash_bytes(h, ints, sizeof ints);
    h = nd_hash_bytes(h, &q->temperature, sizeof q->temperature);
    h = nd_hash_bytes(h, &q->top_p, sizeof q->top_p);
    h = nd_hash_bytes(h, &q->seed, sizeof q->seed);
    q->settings = h;
    return 0;
}

/* The text of the tool results msgs[from..to). */
static char *tool_results(const chat_req *q, int from, int to)
{
    nd_buf b;
    nd_buf_init(&b);
    if (to - from > 1) nd_buf_putc(&b, '[');
    for (int i = from; i < to; i++) {
        if (i > from) nd_buf_putc(&b, ',');
        const char *t = q->msgs[i].text;
        nd_json *j = NULL;
        needle_error e;
        if (nd_json_parse(t, strlen(t), NULL, &j, &e) == 0) nd_json_write(&b, j, 0);
        else nd_json_write_string(&b, t, strlen(t), 0); /* plain text: as a JSON string */
        nd_json_free(j);
    }
    if (to - from > 1) nd_buf_putc(&b, ']');
    if (b.oom) {
        nd_buf_free(&b);
        return NULL;
    }
    return nd_buf_take(&b);
}

/* ---- running turns ---- */

typedef struct turn {
    nd_json *env;
    const nd_json *calls; /* array */
    int success, error_code;
    const char *error, *reasoning, *type;
    double confidence; /* NAN: null */
    double prefill_tps, decode_tps, peak_ram_mb;
    int prompt_tokens, completion_tokens;
} turn;

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

/* ---- writing the answer ---- */

typedef struct answer {
    char id[40];
    long created;
    const char *model;
    int n_calls;
    const char *finish;
    int unmet;
    const char *session; /* "reused" | "new" | "none" */
    double queue_ms, total_ms;
    char *router; /* JSON array of the tool names shown to the model, or NULL */
} answer;

static void write_call(nd_buf *b, nd_server *srv, const nd_json *call, int index, int with_index)
{
    const nd_json *name = nd_json_get(call, "name"), *args = nd_json_get(call, "arguments");
    nd_buf_putc(b, '{');
    if (with_index) nd_buf_printf(b, "\"index\":%d,", index);
    nd_buf_printf(b, "\"id\":\"call_%016llx\",\"type\":\"function\",\"function\":{\"name\":",
                  (unsigned long long)nd_server_next_id(srv));
    nd_json_write_string(b, name && name->type == ND_JSON_STRING ? name->str : "", name ? name->len : 0, 0);
    nd_buf_puts(b, ",\"arguments\":");
    nd_buf a;
    nd_buf_init(&a);
    if (args) nd_json_write(&a, args, 0);
    else nd_buf_puts(&a, "{}");
    nd_json_write_string(b, a.data ? a.data : "", a.len, 0);
    nd_buf_free(&a);
    nd_buf_puts(b, "}}");
}

static void write_usage(nd_buf *b, const turn *t)
{
    nd_buf_printf(b, "{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}", t->prompt_tokens,
                  t->completion_tokens, t->prompt_tokens + t->completion_tokens);
}

static void put_num(nd_buf *b, double v)
{
    if (!isfinite(v)) nd_buf_puts(b, "null");
    else nd_buf_printf(b, "%.6g", v);
}

static void write_needle(nd_buf *b, const turn *t, const answer *a)
{
    nd_buf_puts(b, "{\"type\":");
    nd_json_write_string(b, t->type ? t->type : "respond", strlen(t->type ? t->type : "respond"), 0);
    nd_buf_puts(b, ",\"confidence\":");
    put_num(b, t->confidence);
    nd_buf_puts(b, ",\"reasoning\":");
    const char *rs = t->reasoning ? t->reasoning : "";
    nd_json_write_string(b, rs, strlen(rs), 0);
    nd_buf_puts(b, ",\"error\":");
    if (t->error) nd_json_write_string(b, t->error, strlen(t->error), 0);
    else nd_buf_puts(b, "null");
    nd_buf_printf(b, ",\"tool_choice_unmet\":%s,\"session\":\"%s\",\"router\":", a->unmet ? "true" : "false",
                  a->session);
    nd_buf_puts(b, a->router ? a->router : "null");
    nd_buf_puts(b, ",\"timings\":{\"queue_ms\":");
    put_num(b, a->queue_ms);
    nd_buf_puts(b, ",\"total_ms\":");
    put_num(b, a->total_ms);
    nd_buf_puts(b, ",\"prefill_tokens_per_s\":");
    put_num(b, t->prefill_tps);
    nd_buf_puts(b, ",\"decode_tokens_per_s\":");
    put_num(b, t->decode_tps);
    nd_buf_puts(b, "},\"peak_ram_mb\":");
    put_num(b, t->peak_ram_mb);
    nd_buf_puts(b, ",\"rss_mb\":");
    put_num(b, nd_rss_mb());
    nd_buf_putc(b, '}');
}

static void write_completion(nd_buf *b, nd_server *srv, const turn *t, const answer *a)
{
    nd_buf_printf(b, "{\"id\":\"%s\",\"object\":\"chat.completion\",\"created\":%ld,\"model\":", a->id, a->created);
    nd_json_write_string(b, a->model, strlen(a->model), 0);
    nd_buf_puts(b, ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",");
    if (a->n_calls > 0) {
        nd_buf_puts(b, "\"content\":null,\"tool_calls\":[");
        for (int i = 0; i < a->n_calls; i++) {
            if (i) nd_buf_putc(b, ',');
            write_call(b, srv, &t->calls->items[i], i, 0);
        }
        nd_buf_putc(b, ']');
    } else {
        nd_buf_puts(b, "\"content\":\"\"");
    }
    nd_buf_printf(b, "},\"logprobs\":null,\"finish_reason\":\"%s\"}],\"usage\":", a->finish);
    write_usage(b, t);
    nd_buf_puts(b, ",\"needle\":");
    write_needle(b, t, a);
    nd_buf_puts(b, "}\n");
}

static void chunk_head(nd_buf *b, const answer *a)
{
    nd_buf_printf(b, "data: {\"id\":\"%s\",\"object\":\"chat.completion.chunk\",\"created\":%ld,\"model\":", a->id,
                  a->created);
    nd_json_write_string(b, a->model, strlen(a->model), 0);
}

/* The answer as server-sent events: the role, one chunk per call (its id,
 * name and whole arguments), the finish reason with the needle object, the
 * usage when asked, then [DONE].  The public session API returns a turn as a
 * whole, so the chunks are written when the turn is complete. */
static void write_stream(nd_buf *b, nd_server *srv, const turn *t, const answer *a, int include_usage)
{
    chunk_head(b, a);
    nd_buf_puts(b, ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":");
    nd_buf_puts(b, a->n_calls > 0 ? "null" : "\"\"");
    nd_buf_puts(b, "},\"logprobs\":null,\"finish_reason\":null}]}\n\n");
    for (int i = 0; i < a->n_calls; i++) {
        chunk_head(b, a);
        nd_buf_puts(b, ",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[");
        write_call(b, srv, &t->calls->items[i], i, 1);
        nd_buf_puts(b, "]},\"logprobs\":null,\"finish_reason\":null}]}\n\n");
    }
    chunk_head(b, a);
    nd_buf_printf(b, ",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"%s\"}],\"needle\":",
                  a->finish);
    write_needle(b, t, a);
    nd_buf_puts(b, "}\n\n");
    if (include_usage) {
        chunk_head(b, a);
        nd_buf_puts(b, ",\"choices\":[],\"usage\":");
        write_usage(b, t);
        nd_buf_puts(b, "}\n\n");
    }
    nd_buf_puts(b, "data: [DONE]\n\n");
}

/* The names of the tools retrieval showed the model, as a JSON array. */
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

static void answer_with(nd_reply *r, nd_server *srv, const chat_req *q, const turn *t, answer *a)
{
    nd_buf b;
    nd_buf_init(&b);
    if (q->stream) {
        write_stream(&b, srv, t, a, q->include_usage);
        nd_reply_take(r, 200, "text/event-stream", &b);
    } else {
        write_completion(&b, srv, t, a);
        nd_reply_take(r, 200, "application/json", &b);
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
    if (parse_request(&q, rq, r)) goto out;

    if (q.choice == CHOICE_NONE) { /* nothing may be called: no decode */
        a.finish = "stop";
        a.total_ms = now_ms() - t0;
        answer_with(r, srv, &q, &t, &a);
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
    if (q.msgs[last].role == ROLE_TOOL && !(results = tool_results(&q, p, last + 1))) {
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
        nd_reply_error(r, session_error_status(rc), session_error_status(rc) == 400 ? "invalid_request_error" : "server_error",
                       NULL, "%s", err.message[0] ? err.message : needle_strerror(rc));
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
            ah = hash_call(ah, name && name->type == ND_JSON_STRING ? name->str : "", nd_json_get(c, "arguments"));
        }
        for (int i = p; i < q.n; i++) h = nd_hash_bytes(h, &q.msgs[i].hash, sizeof q.msgs[i].hash);
        h = nd_hash_bytes(h, &ah, sizeof ah);
        nd_session_cache_put(srv->cache, h, s);
    } else {
        needle_session_close(s); /* the conversation ended (budget exhausted) */
    }
    a.total_ms = now_ms() - t0;
    answer_with(r, srv, &q, &t, &a);
out:
    free(a.router);
    nd_json_free(t.env);
    chat_req_free(&q);
}
