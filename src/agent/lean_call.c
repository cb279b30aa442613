/* lean_call.c - a request answered with no call the model nearly made,
 * answered again with a call (lean_call.h). */
#include "agent/lean_call.h"
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "agent/ask_again.h"
#include "agent/grounding.h"
#include "agent/repair.h"
#include "agent/said_number.h"
#include "core/error.h"

#define MAX_WORDS 256

/* Words that name no tool: articles, pronouns, the verbs every tool shares
 * ("set", "turn", "make") and politeness. */
static const char *const GENERIC_WORDS[] = {
    "the",  "and",   "for",  "you",  "your", "with", "from",  "this", "that",  "can",  "could", "would", "will",
    "please", "set", "get",  "turn", "make", "change", "adjust", "start", "stop", "put", "some", "any", "all",
    "what", "how",   "are",  "its",  "it's", "off",  "one",   "now",  "just",  "want", "need", "like", NULL};

/* Do two lowered words name the same thing: equal, or the same first five
 * letters ("navigate" / "navigation", "message" / "messages")? */
static int same_stem(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la >= 5 && lb >= 5) return !strncmp(a, b, 5);
    return !strcmp(a, b);
}

/* Is a word of text one of the request's naming words (three letters or
 * more, not generic)? */
static int shares_word(const char (*rw)[16], int n_request, const char *text, size_t len)
{
    char (*w)[16] = malloc(sizeof(char[16]) * MAX_WORDS);
    char *t = malloc(len + 1);
    int hit = 0;
    if (w && t) {
        memcpy(t, text, len);
        t[len] = '\0';
        for (char *p = t; *p; p++)
            if (*p == '_') *p = ' '; /* snake_case names: set_heart_rate_alert */
        int n = nd_lower_words(t, w, NULL, MAX_WORDS);
        for (int i = 0; i < n && !hit; i++)
            for (int j = 0; j < n_request && !hit; j++)
                hit = strlen(rw[j]) >= 3 && !nd_word_listed(rw[j], GENERIC_WORDS) && same_stem(rw[j], w[i]);
    }
    free(w);
    free(t);
    return hit;
}

/* Does a naming word of rw[0, n) (shares_word) name the tool: a word of its
 * name, description or argument names, or with_choices, of its choices? */
static int tool_shares_word(const nd_json *tool, const char *name, const char (*rw)[16], int n, int with_choices)
{
    if (shares_word(rw, n, name, strlen(name))) return 1;
    const nd_json *desc = nd_json_get(tool, "description");
    if (desc && desc->type == ND_JSON_STRING && shares_word(rw, n, desc->str, desc->len)) return 1;
    const nd_json *props = nd_json_get(nd_json_get(tool, "parameters"), "properties");
    for (size_t k = 0; props && props->type == ND_JSON_OBJECT && k < props->count; k++) {
        if (shares_word(rw, n, props->keys[k], strlen(props->keys[k]))) return 1;
        const nd_json *e = with_choices ? nd_json_get(&props->items[k], "enum") : NULL;
        if (with_choices && !e) e = nd_json_get(nd_json_get(&props->items[k], "items"), "enum");
        for (size_t i = 0; e && e->type == ND_JSON_ARRAY && i < e->count; i++)
            if (e->items[i].type == ND_JSON_STRING && shares_word(rw, n, e->items[i].str, e->items[i].len))
                return 1;
    }
    return 0;
}

/* Is the value made of the tool's own words ("navigation" for navigate_to,
 * "the contact" for call_contact): the request named the tool, not a value? */
static int value_names_tool(const nd_json *tool, const char *name, const char *v, size_t len)
{
    char w[16][16];
    char *t = malloc(len + 1);
    if (!t) return 0;
    memcpy(t, v, len);
    t[len] = '\0';
    int n = nd_lower_words(t, w, NULL, 16), content = 0, all = 1;
    free(t);
    for (int i = 0; i < n && all; i++) {
        if (strlen(w[i]) < 3 || nd_word_listed(w[i], GENERIC_WORDS)) continue;
        content++;
        all = tool_shares_word(tool, name, (const char(*)[16])w[i], 1, 0);
    }
    return content > 0 && all;
}

/* Is needle[0, n) said in hay as whole words, ignoring case: starting where
 * a word starts and ending where one ends, before a space or clause
 * punctuation ("jo" is not said by "jo@kite.io")? */
static int said_whole(const char *hay, const char *needle, size_t n)
{
    if (n == 0) return 0;
    for (const char *p = hay; *p; p++) {
        if (p > hay && !strchr(" \t\n\"'(", p[-1])) continue;
        if (strncasecmp(p, needle, n)) continue;
        char after = p[n];
        if (!after || strchr(" \t\n\"'),.;:!?", after)) return 1;
    }
    return 0;
}

/* Does the request say a one: "1", "one", "a", "an"? */
static int one_said(const char *request, const char (*rw)[16], int n_request)
{
    static const char *const ONE[] = {"one", "a", "an", NULL};
    for (int i = 0; i < n_request; i++)
        if (nd_word_listed(rw[i], ONE)) return 1;
    double said[16];
    int n = nd_numbers_said(request, said, 16);
    for (int i = 0; i < n; i++)
        if (said[i] == 1) return 1;
    return 0;
}

int nd_made_up_call(const nd_json *calls, const nd_json *tools, const char *request)
{
    if (!calls || calls->type != ND_JSON_ARRAY || !request) return 1;
    char (*rw)[16] = malloc(sizeof(char[16]) * MAX_WORDS);
    if (!rw) return -1;
    int n_request = nd_lower_words(request, rw, NULL, MAX_WORDS), sign = 0;
    const nd_json *seen[64];
    int n_seen = 0;
    for (size_t c = 0; c < calls->count && !sign; c++) {
        const nd_json *name = nd_json_get(&calls->items[c], "name");
        const nd_json *args = nd_json_get(&calls->items[c], "arguments");
        const nd_json *tool = name && name->type == ND_JSON_STRING ? nd_tool_named(tools, name->str) : NULL;
        /* the request must name the declared tool: a word of its name, description, argument names or choices */
        if (!tool || !args || args->type != ND_JSON_OBJECT ||
            !tool_shares_word(tool, name->str, (const char(*)[16])rw, n_request, 1)) {
            sign = 1;
            break;
        }
        const nd_json *props = nd_json_get(nd_json_get(tool, "parameters"), "properties");
        for (size_t k = 0; k < args->count && !sign; k++) {
            const nd_json *v = &args->items[k];
            /* the grounding checks let a 1 go without saying ("a", "an"): here it must be said */
            if (v->type == ND_JSON_NUMBER && v->num == 1) sign = !one_said(request, (const char(*)[16])rw, n_request);
            if (v->type != ND_JSON_STRING) continue;
            for (int i = 0; i < n_seen && !sign; i++)
                sign = seen[i]->len == v->len && !strncasecmp(seen[i]->str, v->str, v->len);
            if (n_seen < 64) seen[n_seen++] = v;
            if (!sign && nd_free_string_schema(nd_json_get(props, args->keys[k])))
                sign = !said_whole(request, v->str, v->len) ||
                       value_names_tool(tool, name->str, v->str, v->len);
        }
    }
    free(rw);
    return sign;
}

/* Does the request say each yes/no setting of the calls: its key as a word
 * ("on speaker", "speakers"), or "on" for true and "off" for false? */
static int flags_said(const nd_json *calls, const char *request)
{
    char (*rw)[16] = malloc(sizeof(char[16]) * MAX_WORDS);
    if (!rw) return -1;
    int n = nd_lower_words(request, rw, NULL, MAX_WORDS), said_all = 1;
    int on = 0, off = 0;
    for (int i = 0; i < n; i++) {
        on |= !strcmp(rw[i], "on");
        off |= !strcmp(rw[i], "off");
    }
    for (size_t c = 0; c < calls->count && said_all; c++) {
        const nd_json *args = nd_json_get(&calls->items[c], "arguments");
        for (size_t k = 0; args && args->type == ND_JSON_OBJECT && k < args->count && said_all; k++) {
            if (args->items[k].type != ND_JSON_TRUE && args->items[k].type != ND_JSON_FALSE) continue;
            int said = args->items[k].type == ND_JSON_TRUE ? on : off;
            size_t kl = strlen(args->keys[k]);
            for (int i = 0; i < n && !said; i++) {
                size_t wl = strlen(rw[i]);
                said = (wl == kl || (wl == kl + 1 && rw[i][kl] == 's')) && !strncasecmp(rw[i], args->keys[k], kl);
            }
            said_all = said;
        }
    }
    free(rw);
    return said_all;
}

int nd_answer_leaning(needle_session *s, const char *request, int max_new_tokens, nd_split_answer *out,
                      needle_error *err)
{
    if (!s->tools || !request) return 0;
    needle_session *scratch = NULL;
    int rc = nd_scratch_open(s, max_new_tokens, &scratch, err), taken = 0;
    if (rc) return rc == NEEDLE_ENOMEM ? rc : 0;
    scratch->force_call = 1;
    nd_json *env = nd_scratch_answer(scratch, request, strlen(request), max_new_tokens, &rc, err);
    const nd_json *calls = nd_json_get(env, "function_calls");
    int sign = env ? nd_refusal_signs(calls, s->tools, request) : 1;
    if (!sign) sign = nd_made_up_call(calls, s->tools, request);
    if (!sign && s->lean_says_flags) {
        int said = flags_said(calls, request);
        sign = said < 0 ? -1 : !said;
    }
    taken = nd_take_scratch_if(s, env, sign, rc, out, err);
    nd_session_free(scratch);
    return taken;
}

int nd_request_names_a_called_tool(const nd_json *calls, const nd_json *tools, const char *request)
{
    if (!calls || calls->type != ND_JSON_ARRAY || !request) return 0;
    char (*rw)[16] = malloc(sizeof(char[16]) * MAX_WORDS);
    if (!rw) return -1;
    int n = nd_lower_words(request, rw, NULL, MAX_WORDS), named = 0;
    for (size_t c = 0; c < calls->count && !named; c++) {
        const nd_json *name = nd_json_get(&calls->items[c], "name");
        const nd_json *tool = name && name->type == ND_JSON_STRING ? nd_tool_named(tools, name->str) : NULL;
        named = tool && tool_shares_word(tool, name->str, (const char(*)[16])rw, n, 1);
    }
    free(rw);
    return named;
}
