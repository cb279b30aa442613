/* split_turn.c - a request that asks for two things, answered one part at a
 * time (split_turn.h). */
#include "agent/split_turn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/ask_again.h"
#include "agent/grounding.h"
#include "agent/split_request.h"
#include "core/error.h"
#include "text/chat.h"

void nd_split_answer_init(nd_split_answer *a)
{
    nd_buf_init(&a->calls);
    nd_buf_init(&a->completed);
    nd_buf_init(&a->parts);
    a->confidence = NAN;
    a->keeps_whole = 0;
}

void nd_split_answer_free(nd_split_answer *a)
{
    nd_buf_free(&a->calls);
    nd_buf_free(&a->completed);
    nd_buf_free(&a->parts);
}

static size_t array_count(const nd_json *v)
{
    return v && v->type == ND_JSON_ARRAY ? v->count : 0;
}

/* One side's answer (split_turn.h, nd_scratch_answer). */
nd_json *nd_scratch_answer(needle_session *scratch, const char *text, size_t len, int max_new, int *rc,
                           needle_error *err)
{
    *rc = 0;
    char *side = malloc(len + 1);
    if (!side) {
        *rc = NEEDLE_ENOMEM;
        return NULL;
    }
    memcpy(side, text, len);
    side[len] = '\0';
    char *env_text = NULL;
    needle_error perr;
    nd_session_reset(scratch);
    int trc = nd_session_turn(scratch, ND_TURN_USER, side, max_new, &env_text, &perr);
    free(side);
    if (trc) {
        /* a side the session refuses (too long, ...) is only a cut not taken */
        if (trc == NEEDLE_ENOMEM) *rc = nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory answering in parts");
        return NULL;
    }
    nd_json *env = NULL;
    int prc = nd_json_parse(env_text, strlen(env_text), NULL, &env, &perr);
    free(env_text);
    if (prc) {
        if (prc == NEEDLE_ENOMEM) *rc = nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory answering in parts");
        return NULL;
    }
    const nd_json *ok = nd_json_get(env, "success");
    const nd_json *validation = nd_json_get(env, "validation");
    if (!ok || ok->type != ND_JSON_TRUE || array_count(nd_json_get(env, "function_calls")) == 0 ||
        array_count(nd_json_get(env, "suppressed_calls")) > 0 ||
        array_count(nd_json_get(validation, "ungrounded")) > 0) {
        nd_json_free(env);
        return NULL;
    }
    return env;
}

/* The most calls a merged answer keeps (the parts' calls beyond it are dropped). */
#define MERGED_MAX 64

/* Append the calls of both answers to out (a JSON array), each once; seen
 * (MERGED_MAX slots) receives the calls written; returns how many. */
static int merge_calls(const nd_json *a, const nd_json *b, int ascii, nd_buf *out, const nd_json **seen)
{
    const nd_json *lists[2] = {nd_json_get(a, "function_calls"), nd_json_get(b, "function_calls")};
    int n = 0;
    nd_buf_putc(out, '[');
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; i < lists[l]->count && n < MERGED_MAX; i++) {
            const nd_json *c = &lists[l]->items[i];
            int dup = 0;
            for (int k = 0; k < n && !dup; k++) dup = nd_json_equal(seen[k], c);
            if (dup) continue;
            if (n) nd_buf_putc(out, ',');
            nd_json_write(out, c, ascii);
            seen[n++] = c;
        }
    nd_buf_putc(out, ']');
    return n;
}

/* Two lists of "tool.key" paths (either may be NULL) written as one JSON array. */
static void merge_completed(const nd_json *first, const nd_json *second, int ascii, nd_buf *out)
{
    const nd_json *lists[2] = {first, second};
    int n = 0;
    nd_buf_putc(out, '[');
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; i < array_count(lists[l]); i++) {
            if (n++) nd_buf_putc(out, ',');
            nd_json_write(out, &lists[l]->items[i], ascii);
        }
    nd_buf_putc(out, ']');
}

static const nd_json *completed_of(const nd_json *env)
{
    return nd_json_get(nd_json_get(env, "validation"), "completed");
}

/* The lower of `so_far` (NaN: none yet) and the envelope's confidence. */
static double lower_confidence(double so_far, const nd_json *env)
{
    const nd_json *c = nd_json_get(env, "confidence");
    if (c && c->type == ND_JSON_NUMBER && (isnan(so_far) || c->num < so_far)) return c->num;
    return so_far;
}

/* The two requests answered, a JSON array of strings. */
static void write_parts(nd_buf *out, const char *first, size_t first_len, const char *second, size_t second_len,
                        int ascii)
{
    nd_buf_putc(out, '[');
    nd_json_write_string(out, first, first_len, ascii);
    nd_buf_putc(out, ',');
    nd_json_write_string(out, second, second_len, ascii);
    nd_buf_putc(out, ']');
}

int nd_scratch_open(needle_session *s, int max_new_tokens, needle_session **out, needle_error *err)
{
    return nd_scratch_open_with(s, s->tools, max_new_tokens, out, err);
}

int nd_scratch_open_with(needle_session *s, const nd_json *tools_decl, int max_new_tokens, needle_session **out,
                         needle_error *err)
{
    nd_buf tools;
    nd_buf_init(&tools);
    nd_json_write(&tools, tools_decl, 0);
    if (tools.oom) {
        nd_buf_free(&tools);
        return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory answering in parts");
    }
    needle_session_options o;
    memset(&o, 0, sizeof o);
    o.system = s->system;
    o.tools_json = tools.data;
    o.tool_index_path = s->tool_index_path;
    o.max_new_tokens = max_new_tokens;
    o.max_reasoning_tokens = s->max_reasoning_tokens;
    o.temperature = s->sampler.temperature;
    o.top_p = s->sampler.top_p;
    o.seed = s->seed;
    o.strict = s->strict;
    o.grounded_decoding = s->grounded ? 1 : -1;
    int rc = nd_session_open(s->model, &o, out, err);
    if (!rc) {
        (*out)->split = s->split - 1; /* a side is cut at most ND_SPLIT_DEPTH - 1 more times */
        (*out)->ask_again = 0;        /* and never asked again */
        (*out)->lean_call = 0;        /* nor answered with the call the model nearly made (but see below) */
        (*out)->message_frame = s->message_frame; /* (but read by its messaging frame as the whole is) */
    }
    nd_buf_free(&tools);
    return rc;
}

/* Is y a word of the tool's name or one of its argument names ("brightness")?
 * A value like that names a field, not an object. */
static int names_a_field(const nd_json *tools, const char *tool, const char *y)
{
    const nd_json *props = nd_json_get(nd_tool_parameters(tools, tool), "properties");
    for (size_t k = 0; props && props->type == ND_JSON_OBJECT && k < props->count; k++)
        if (!strcasecmp(props->keys[k], y)) return 1;
    size_t n = strlen(y);
    for (const char *w = tool; *w;) {
        size_t wl = strcspn(w, "_");
        if (wl == n && !strncasecmp(w, y, n)) return 1;
        w += wl;
        if (*w) w++;
    }
    return 0;
}

/* One action, two objects (split_request.h, nd_other_objects): the request
 * without the object the model wrote (objects[0, n), in the order to try),
 * answered alone, must give the same tool with another value for the same
 * key, standing across the join.  Returns 1 with out filled, 0, or an error
 * code. */
static int answer_other_object(needle_session *s, needle_session *scratch, const char *request, const nd_json *call,
                               const nd_other_object *objects, int n, const char *whole_completed,
                               double whole_confidence, int max_new_tokens, nd_split_answer *out, needle_error *err)
{
    const nd_json *name = nd_json_get(call, "name");
    if (!name || name->type != ND_JSON_STRING) return 0;
    int ascii = nd_chat_json_ascii(s->model->layout), rc = 0, taken = 0;
    size_t len = strlen(request);
    for (int i = 0; i < n && !taken && !rc; i++) {
        const nd_other_object *o = &objects[i];
        nd_buf reduced;
        nd_buf_init(&reduced);
        nd_buf_append(&reduced, request, o->cut_begin);
        nd_buf_append(&reduced, request + o->cut_end, len - o->cut_end);
        nd_buf_putc(&reduced, '\0');
        if (reduced.oom) {
            nd_buf_free(&reduced);
            return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory answering in parts");
        }
        nd_json *env = nd_scratch_answer(scratch, reduced.data, reduced.len - 1, max_new_tokens, &rc, err);
        /* a reduced request answered with no call is asked again, once, as a first request
         * is (ask_again.h): "lights on in the dining room" gets its call only as "please ..."
         * (the sides of a cut are not: 8 right, 13 wrong, docs/envelope.md) */
        if (!env && !rc && s->ask_again)
            env = nd_scratch_answer_again(scratch, s->tools, reduced.data, max_new_tokens, &rc, err);
        const nd_json *calls = nd_json_get(env, "function_calls");
        const nd_json *other = array_count(calls) == 1 ? &calls->items[0] : NULL;
        const nd_json *other_name = other ? nd_json_get(other, "name") : NULL;
        const nd_json *y = other ? nd_json_get(nd_json_get(other, "arguments"), o->key) : NULL;
        const nd_json *v = nd_json_get(nd_json_get(call, "arguments"), o->key);
        if (other_name && other_name->type == ND_JSON_STRING && !strcmp(other_name->str, name->str) && y &&
            y->type == ND_JSON_STRING && v && !(y->len == v->len && !strncasecmp(y->str, v->str, v->len)) &&
            !names_a_field(s->tools, name->str, y->str) && nd_other_object_flanks(request, o, y->str, y->len)) {
            taken = 1;
            /* the calls in the request's order; the whole request's own call keeps its checks */
            const nd_json *first = o->value_first ? call : other, *second = o->value_first ? other : call;
            out->calls.len = 0; /* (a cut tried before may have left its merged calls here) */
            nd_buf_putc(&out->calls, '[');
            nd_json_write(&out->calls, first, ascii);
            nd_buf_putc(&out->calls, ',');
            nd_json_write(&out->calls, second, ascii);
            nd_buf_putc(&out->calls, ']');
            nd_json *mine = NULL; /* the whole request's own list (NULL: none could be read) */
            needle_error perr;
            if (whole_completed && nd_json_parse(whole_completed, strlen(whole_completed), NULL, &mine, &perr) != 0)
                mine = NULL;
            merge_completed(mine, completed_of(env), ascii, &out->completed);
            nd_json_free(mine);
            out->confidence = lower_confidence(whole_confidence, env);
            out->keeps_whole = 1;
            size_t reduced_len = strlen(reduced.data);
            if (o->value_first) write_parts(&out->parts, request, len, reduced.data, reduced_len, ascii);
            else write_parts(&out->parts, reduced.data, reduced_len, request, len, ascii);
        }
        nd_json_free(env);
        nd_buf_free(&reduced);
    }
    return rc ? rc : taken;
}

/* Does the side start with a word that carries on a noun phrase ("... the
 * kitchen and the living room lights")?  A side like that is an object of the
 * other side's action, not a request of its own. */
static int starts_with_determiner(const char *side, size_t len)
{
    static const char *const DETERMINERS[] = {"the", "a", "an", "my", "our", "your", "his", "her", "their", "this",
                                              "that", "these", "those", NULL};
    size_t n = 0;
    while (n < len && ((side[n] >= 'a' && side[n] <= 'z') || (side[n] >= 'A' && side[n] <= 'Z'))) n++;
    for (int i = 0; DETERMINERS[i]; i++)
        if (strlen(DETERMINERS[i]) == n && !strncasecmp(side, DETERMINERS[i], n)) return 1;
    return 0;
}

/* Do the merged calls (merged[0, n)) name the same tools as the whole
 * answer, as many times each? */
static int same_tools(const nd_json *whole, const nd_json *const *merged, int n)
{
    int same = (size_t)n == array_count(whole);
    for (size_t i = 0; same && i < whole->count; i++) {
        const nd_json *name = nd_json_get(&whole->items[i], "name");
        size_t in_whole = 0, in_merged = 0;
        for (size_t k = 0; name && name->type == ND_JSON_STRING && k < whole->count; k++) {
            const nd_json *w = nd_json_get(&whole->items[k], "name"), *g = nd_json_get(merged[k], "name");
            in_whole += w && w->type == ND_JSON_STRING && !strcmp(w->str, name->str);
            in_merged += g && g->type == ND_JSON_STRING && !strcmp(g->str, name->str);
        }
        same = name && in_whole == in_merged;
    }
    return same;
}

int nd_answer_in_parts(needle_session *s, const char *request, const nd_json *calls, const char *whole_completed,
                       double whole_confidence, int max_new_tokens, nd_split_answer *out, needle_error *err)
{
    nd_split_point points[ND_SPLIT_MAX_POINTS];
    /* a side cut again tries its two strongest cuts only: a request full of
     * "and"s costs at most 4 x 2 x (1 + 2 x 2) short turns */
    int top = s->split >= ND_SPLIT_DEPTH;
    int n_points = nd_split_points(request, calls, points, top ? ND_SPLIT_MAX_POINTS : 2);
    nd_other_object objects[ND_OTHER_OBJECT_MAX];
    int one_call = array_count(calls) == 1;
    int n_objects = one_call ? nd_other_objects(request, &calls->items[0], objects, top ? ND_OTHER_OBJECT_MAX : 2) : 0;
    if ((n_points == 0 && n_objects == 0) || !s->tools) return 0;
    needle_session *scratch = NULL;
    int rc = nd_scratch_open(s, max_new_tokens, &scratch, err);
    if (rc) return rc == NEEDLE_ENOMEM ? rc : 0; /* (the session's own options opened it once) */
    /* a side answered with no call the model nearly made gets that call, when it also says the
     * call's yes/no settings (lean_call.h): "navigate to Brixton Market and call Kemi" */
    scratch->lean_call = s->lean_call;
    scratch->lean_says_flags = 1;
    int ascii = nd_chat_json_ascii(s->model->layout), taken = 0;
    /* the model wrote two calls or more: the parts check its values, so a cut
     * must leave a request on each side and give the same tools back */
    int recheck = array_count(calls) >= 2;
    for (int p = 0; p < n_points && !taken && !rc; p++) {
        const nd_split_point *pt = &points[p];
        if (recheck && starts_with_determiner(request + pt->right_begin, pt->right_end - pt->right_begin)) continue;
        nd_json *left = nd_scratch_answer(scratch, request + pt->left_begin, pt->left_end - pt->left_begin, max_new_tokens,
                                    &rc, err);
        nd_json *right = left && !rc ? nd_scratch_answer(scratch, request + pt->right_begin,
                                                   pt->right_end - pt->right_begin, max_new_tokens, &rc, err)
                                     : NULL;
        if (left && right) {
            out->calls.len = 0;
            const nd_json *merged[MERGED_MAX];
            int n_merged = merge_calls(left, right, ascii, &out->calls, merged);
            if (n_merged >= 2 && (!recheck || same_tools(calls, merged, n_merged))) {
                taken = 1;
                merge_completed(completed_of(left), completed_of(right), ascii, &out->completed);
                out->confidence = lower_confidence(lower_confidence(NAN, left), right);
                write_parts(&out->parts, request + pt->left_begin, pt->left_end - pt->left_begin,
                            request + pt->right_begin, pt->right_end - pt->right_begin, ascii);
            }
        }
        nd_json_free(left);
        nd_json_free(right);
    }
    if (!taken && !rc && n_objects > 0)
        taken = answer_other_object(s, scratch, request, &calls->items[0], objects, n_objects, whole_completed,
                                    whole_confidence, max_new_tokens, out, err);
    if (taken < 0) {
        rc = taken;
        taken = 0;
    }
    nd_session_free(scratch);
    if (!rc && (out->calls.oom || out->completed.oom || out->parts.oom))
        rc = nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory answering in parts");
    return rc ? rc : taken;
}
