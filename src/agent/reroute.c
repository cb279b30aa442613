/* reroute.c - one call to a tool while the request names another tool's choice (reroute.h). */
#include "agent/reroute.h"

#include <stdlib.h>
#include <string.h>

#include "agent/ask_again.h"
#include "agent/grounding.h"
#include "agent/lean_call.h"
#include "agent/said_choice.h"
#include "agent/said_number.h"
#include "core/buf.h"
#include "core/error.h"
#include "grammar/schema.h"

/* Is v one of the string values of some enum among props? */
static int in_some_enum(const nd_json *props, const nd_json *v)
{
    for (size_t k = 0; props && props->type == ND_JSON_OBJECT && k < props->count; k++) {
        const nd_json *e = nd_json_get(&props->items[k], "enum");
        for (size_t i = 0; e && e->type == ND_JSON_ARRAY && i < e->count; i++)
            if (nd_json_equal(&e->items[i], v)) return 1;
    }
    return 0;
}

/* Is the choice v said inside one of the call's string values, among other
 * words ("the fan is on high": a message that speaks of it; a value that is
 * the choice alone, "text": "celsius", is the choice misplaced)? */
static int inside_values(const nd_json *args, const nd_json *v)
{
    for (size_t k = 0; args && args->type == ND_JSON_OBJECT && k < args->count; k++) {
        const nd_json *a = &args->items[k];
        if (a->type != ND_JSON_STRING || memchr(a->str, 0, a->len) || a->len <= v->len + 1) continue;
        if (nd_choice_said(a->str, v->str, v->len) > 0) return 1;
    }
    return 0;
}

/* Is tool name[0, n) one of the calls'? */
static int called(const nd_json *calls, const nd_json *name)
{
    for (size_t c = 0; c < calls->count; c++) {
        const nd_json *cn = nd_json_get(&calls->items[c], "name");
        if (cn && cn->type == ND_JSON_STRING && nd_json_equal(cn, name)) return 1;
    }
    return 0;
}

/* Is the word w (lowered) one of text's words ('_' a space)? */
static int word_of(const char *text, size_t len, const char *w)
{
    char *t = malloc(len + 1);
    char (*words)[16] = malloc(sizeof(char[16]) * 64);
    int hit = 0;
    if (t && words) {
        for (size_t i = 0; i < len; i++) t[i] = text[i] == '_' ? ' ' : text[i];
        t[len] = '\0';
        int n = nd_lower_words(t, words, NULL, 64);
        for (int i = 0; i < n && !hit; i++) hit = !strcmp(words[i], w);
    }
    free(t);
    free(words);
    return hit;
}

/* Is the choice v a word of the called tool itself: of its name, description
 * or argument names ("track" and "playlist" for add_to_playlist's track and
 * playlist)?  Then the request's word is that tool's, not the other's choice. */
static int word_of_tool(const nd_json *tool, const char *name, const nd_json *v)
{
    char w[16];
    if (v->len >= sizeof w) return 0; /* longer than any word read */
    for (size_t i = 0; i < v->len; i++) w[i] = (char)(v->str[i] >= 'A' && v->str[i] <= 'Z' ? v->str[i] + 32 : v->str[i]);
    w[v->len] = '\0';
    if (word_of(name, strlen(name), w)) return 1;
    const nd_json *desc = nd_json_get(tool, "description");
    if (desc && desc->type == ND_JSON_STRING && word_of(desc->str, desc->len, w)) return 1;
    const nd_json *props = nd_json_get(nd_json_get(tool, "parameters"), "properties");
    for (size_t k = 0; props && props->type == ND_JSON_OBJECT && k < props->count; k++)
        if (word_of(props->keys[k], props->key_lens[k], w)) return 1;
    return 0;
}

/* Is the choice v a choice or a word of a called tool, or spoken of in a call's message? */
static int choice_of_the_calls(const nd_json *calls, const nd_json *tools, const nd_json *v)
{
    for (size_t c = 0; c < calls->count; c++) {
        const nd_json *cn = nd_json_get(&calls->items[c], "name");
        const nd_json *tool = cn && cn->type == ND_JSON_STRING ? nd_tool_named(tools, cn->str) : NULL;
        const nd_json *params = tool ? nd_json_get(tool, "parameters") : NULL;
        if (in_some_enum(params ? nd_json_get(params, "properties") : NULL, v) || (tool && word_of_tool(tool, cn->str, v)) ||
            inside_values(nd_json_get(&calls->items[c], "arguments"), v))
            return 1;
    }
    return 0;
}

/* Does the request name a choice of this tool's enums that no called tool has? 1, 0, -1 out of memory. */
static int names_choice_of(const nd_json *props, const nd_json *calls, const nd_json *tools, const char *request)
{
    for (size_t k = 0; props && props->type == ND_JSON_OBJECT && k < props->count; k++) {
        const nd_json *e = nd_json_get(&props->items[k], "enum");
        for (size_t i = 0; e && e->type == ND_JSON_ARRAY && i < e->count; i++) {
            const nd_json *v = &e->items[i];
            if (v->type != ND_JSON_STRING || v->len < 5 || memchr(v->str, 0, v->len)) continue; /* not "cool", "auto" */
            if (choice_of_the_calls(calls, tools, v)) continue;
            int said = nd_choice_said(request, v->str, v->len);
            if (said) return said;
        }
    }
    return 0;
}

int nd_reroute_tools(const nd_json *calls, const nd_json *tools, const char *request, nd_json **out)
{
    *out = NULL;
    if (!calls || calls->type != ND_JSON_ARRAY || !tools || tools->type != ND_JSON_ARRAY || !request) return 0;
    nd_buf text;
    nd_buf_init(&text);
    int n = 0, rc = 0;
    for (size_t t = 0; t < tools->count && rc >= 0; t++) {
        const nd_json *decl = nd_tool_declaration(&tools->items[t]); /* plain, or in the OpenAI wrapper */
        const nd_json *tn = nd_json_get(decl, "name"), *params = nd_json_get(decl, "parameters");
        if (!tn || tn->type != ND_JSON_STRING || called(calls, tn) || memchr(tn->str, 0, tn->len)) continue;
        int named = names_choice_of(params ? nd_json_get(params, "properties") : NULL, calls, tools, request);
        if (named < 0) rc = -1;
        if (named <= 0) continue;
        nd_buf_putc(&text, n++ ? ',' : '[');
        nd_json_write(&text, &tools->items[t], 0);
    }
    if (rc < 0 || text.oom) {
        nd_buf_free(&text);
        return -1;
    }
    if (n == 0) return 0;
    nd_buf_putc(&text, ']');
    needle_error err;
    if (text.oom || nd_json_parse(text.data, text.len, NULL, out, &err) != 0) rc = -1;
    nd_buf_free(&text);
    return rc < 0 ? -1 : 1;
}

int nd_answer_rerouted(needle_session *s, const char *request, const nd_json *calls, int max_new_tokens,
                       nd_split_answer *out, needle_error *err)
{
    nd_json *subset = NULL;
    int sign = nd_reroute_tools(calls, s->tools, request, &subset);
    if (sign < 0) return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory reading the request's choices");
    if (!sign) return 0;
    needle_session *scratch = NULL;
    int rc = nd_scratch_open_with(s, subset, max_new_tokens, &scratch, err), taken = 0;
    nd_json_free(subset);
    if (rc) return rc == NEEDLE_ENOMEM ? rc : 0; /* (a subset of tools the session took once) */
    nd_json *env = nd_scratch_answer(scratch, request, strlen(request), max_new_tokens, &rc, err);
    if (!env && !rc) /* no call: asked as ask-again asks ("please " first), on its terms */
        env = nd_scratch_answer_again(scratch, s->tools, request, max_new_tokens, &rc, err);
    const nd_json *again = nd_json_get(env, "function_calls");
    int bad = env ? nd_refusal_signs(again, s->tools, request) : 1;
    if (!bad) bad = nd_made_up_call(again, s->tools, request);
    taken = nd_take_scratch_if(s, env, bad, rc, out, err);
    nd_session_free(scratch);
    return taken;
}
