/* chat_request.c - reading an OpenAI chat request: messages (text or text
 * parts), tools (to the needle form), tool_choice, sampling and limits, each
 * problem a 400 naming the field; and the hashes the session cache keys on. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/chat.h"

void chat_req_free(chat_req *q)
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
uint64_t chat_hash_call(uint64_t h, const char *name, const nd_json *args)
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
            if (parsed || !args) h = chat_hash_call(h, name->str, parsed);
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

int chat_request_parse(chat_req *q, const nd_request *rq, nd_reply *r)
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
    if ((v = nd_json_get(root, "strict")) && v->type != ND_JSON_NULL) { /* needle's own: docs/envelope.md */
        if (v->type != ND_JSON_TRUE && v->type != ND_JSON_FALSE) {
            nd_reply_bad(r, "strict: must be a boolean");
            return -1;
        }
        q->strict = v->type == ND_JSON_TRUE;
    }
    if ((v = nd_json_get(root, "copy_values")) && v->type != ND_JSON_NULL) { /* docs/envelope.md */
        if (v->type != ND_JSON_TRUE && v->type != ND_JSON_FALSE) {
            nd_reply_bad(r, "copy_values: must be a boolean");
            return -1;
        }
        q->copy_values = v->type == ND_JSON_TRUE ? 1 : -1;
    }
    if ((v = nd_json_get(root, "split")) && v->type != ND_JSON_NULL) { /* docs/envelope.md */
        if (v->type != ND_JSON_TRUE && v->type != ND_JSON_FALSE) {
            nd_reply_bad(r, "split: must be a boolean");
            return -1;
        }
        q->split = v->type == ND_JSON_TRUE ? 1 : -1;
    }
    if ((v = nd_json_get(root, "ask_again")) && v->type != ND_JSON_NULL) { /* docs/envelope.md */
        if (v->type != ND_JSON_TRUE && v->type != ND_JSON_FALSE) {
            nd_reply_bad(r, "ask_again: must be a boolean");
            return -1;
        }
        q->ask_again = v->type == ND_JSON_TRUE ? 1 : -1;
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
    int ints[6] = {q->max_tokens, q->choice, q->strict, q->copy_values, q->split, q->ask_again};
    h = nd_hash_bytes(h, ints, sizeof ints);
    h = nd_hash_bytes(h, &q->temperature, sizeof q->temperature);
    h = nd_hash_bytes(h, &q->top_p, sizeof q->top_p);
    h = nd_hash_bytes(h, &q->seed, sizeof q->seed);
    q->settings = h;
    return 0;
}

char *chat_tool_results(const chat_req *q, int from, int to)
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
