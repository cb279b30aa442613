/* ask_again.c - a request the model answered with no call, asked again (ask_again.h). */
#include "agent/ask_again.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/grounding.h"
#include "agent/repair.h"
#include "agent/said_choice.h"
#include "agent/said_number.h"
#include "agent/said_quantity.h"
#include "agent/spoken_words.h"
#include "agent/unused_number.h"
#include "core/error.h"
#include "text/chat.h"

#define MAX_WORDS 256
#define MAX_NUMBERS 64

static const char *const FUNCTION_WORDS[] = {"the",  "a",    "an",  "my", "our", "your", "his",  "her",  "their",
                                             "this", "that", "to",  "of", "for", "and",  "or",   "in",   "on",
                                             "at",   "by",   "with", "from", "is", "are", "be",   "i",    "me",
                                             "we",   "you",  "it",  "please", "if", "off", "up",   "down", "so",
                                             "then", NULL};

static int is_upper(char c) { return c >= 'A' && c <= 'Z'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Does text start with v at a capitalised start of the request or of a sentence in it? */
static int starts_capitalised(const char *request, const char *v, size_t n)
{
    for (size_t i = 0; request[i]; i++) {
        int start = i == 0;
        if (!start && i >= 2 && request[i - 1] == ' ') {
            size_t j = i - 1;
            while (j > 0 && request[j - 1] == ' ') j--;
            start = j > 0 && (request[j - 1] == '.' || request[j - 1] == '!' || request[j - 1] == '?');
        }
        if (start && is_upper(request[i]) && !strncmp(request + i, v, n)) return 1;
    }
    return 0;
}

/* Only function words, or a function word last ("off", "great if")? */
static int function_word_value(const char *v)
{
    char w[16][16];
    int n = nd_lower_words(v, w, NULL, 16);
    if (n == 0 || n == 16) return 0;
    if (nd_word_listed(w[n - 1], FUNCTION_WORDS)) return 1;
    for (int i = 0; i < n; i++)
        if (!nd_word_listed(w[i], FUNCTION_WORDS)) return 0;
    return 1;
}

/* The enum of a choice schema (a string enum, or an array of them), or NULL. */
static const nd_json *choice_enum(const nd_json *schema)
{
    const nd_json *e = nd_json_get(schema, "enum");
    if (!e) e = nd_json_get(nd_json_get(schema, "items"), "enum");
    return e && e->type == ND_JSON_ARRAY ? e : NULL;
}

/* Is w a word of one of the enum's values? */
static int enum_word(const nd_json *e, const char *w)
{
    for (size_t i = 0; i < e->count; i++) {
        if (e->items[i].type != ND_JSON_STRING || memchr(e->items[i].str, 0, e->items[i].len)) continue;
        char vw[8][16];
        int n = nd_lower_words(e->items[i].str, vw, NULL, 8);
        for (int k = 0; k < n; k++)
            if (!strcmp(vw[k], w)) return 1;
    }
    return 0;
}

/* A word next to one of the tool's choice keys that is none of its values ("on eco mode"). */
static int unknown_choice_named(const char (*rw)[16], int n, const nd_json *props)
{
    static const char *const NEUTRAL[] = {"mode", "unit", "please", "pls", "now", "level", "percent", "degrees",
                                          "set", "change", "adjust", NULL};
    for (size_t k = 0; props && k < props->count; k++) {
        const nd_json *e = choice_enum(&props->items[k]);
        if (!e || memchr(props->keys[k], 0, props->key_lens[k])) continue;
        char kw[8][16];
        int nk = nd_lower_words(props->keys[k], kw, NULL, 8);
        for (int a = 0; a < nk; a++) {
            if (strlen(kw[a]) < 3) continue;
            for (int i = 0; i < n; i++) {
                if (strcmp(rw[i], kw[a])) continue;
                for (int j = i - 1; j <= i + 1; j += 2) {
                    if (j < 0 || j >= n) continue;
                    const char *x = rw[j];
                    if (strlen(x) <= 2 || nd_word_listed(x, FUNCTION_WORDS) || nd_word_listed(x, NEUTRAL) || !strcmp(x, kw[a]) ||
                        enum_word(e, x))
                        continue;
                    return 1;
                }
            }
        }
    }
    return 0;
}

/* A month name followed by a day it does not have ("February 30th"). */
static int impossible_date(const char *request)
{
    static const int DAYS[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    char w[MAX_WORDS][16];
    size_t ends[MAX_WORDS];
    int n = nd_lower_words(request, w, ends, MAX_WORDS);
    for (int i = 0; i < n; i++)
        for (int m = 0; m < 12; m++) {
            if (strcmp(w[i], ND_MONTH_NAMES[m])) continue;
            const char *p = request + ends[i];
            while (*p == ' ') p++;
            if (!is_digit(*p)) continue;
            int d = 0;
            for (int k = 0; k < 3 && is_digit(*p); k++) d = d * 10 + (*p++ - '0');
            if (d > DAYS[m]) return 1;
        }
    return 0;
}

/* A number the request says that no call uses, a duration or volume no call
 * holds in some unit, or "minus". */
static int number_unused(const nd_json *calls, const char *request, const char (*rw)[16], int n_words)
{
    for (int i = 0; i < n_words; i++)
        if (!strcmp(rw[i], "minus")) return 1;
    double said[MAX_NUMBERS], held[MAX_NUMBERS];
    int n_said = nd_numbers_said(request, said, MAX_NUMBERS), n_held = nd_call_numbers(calls, held, MAX_NUMBERS);
    for (int i = 0; i < n_said; i++) {
        int used = 0;
        for (int k = 0; k < n_held && !used; k++)
            used = held[k] == said[i] || held[k] == said[i] * 60 || held[k] == said[i] * 1000;
        if (!used) return 1;
    }
    /* durations (in minutes) and volumes (in millilitres) with their units: "for 5 hours" */
    for (int kind = 0; kind < 2; kind++) {
        double q[16];
        int nq = nd_quantities_said(request, kind ? 'v' : 't', q, 16);
        for (int i = 0; i < nq; i++) {
            int used = 0;
            for (int k = 0; k < n_held && !used; k++)
                used = held[k] == q[i] || (kind ? held[k] * 1000 == q[i] : held[k] * 60 == q[i] || held[k] == q[i] * 60);
            if (!used) return 1;
        }
    }
    return 0;
}

int nd_refusal_signs(const nd_json *calls, const nd_json *tools, const char *request)
{
    if (!calls || calls->type != ND_JSON_ARRAY || !request) return 1;
    char (*rw)[16] = malloc(sizeof(char[16]) * MAX_WORDS);
    if (!rw) return -1;
    int n_words = nd_lower_words(request, rw, NULL, MAX_WORDS), sign = 0;
    for (size_t c = 0; c < calls->count && !sign; c++) {
        const nd_json *name = nd_json_get(&calls->items[c], "name");
        const nd_json *args = nd_json_get(&calls->items[c], "arguments");
        const nd_json *params = name && name->type == ND_JSON_STRING ? nd_tool_parameters(tools, name->str) : NULL;
        const nd_json *props = params ? nd_json_get(params, "properties") : NULL;
        if (!args || args->type != ND_JSON_OBJECT || !props) {
            sign = 1;
            break;
        }
        for (size_t k = 0; k < args->count && !sign; k++) {
            const nd_json *v = &args->items[k], *schema = nd_json_get(props, args->keys[k]);
            if (v->type != ND_JSON_STRING || memchr(v->str, 0, v->len)) continue;
            if (nd_free_string_schema(schema))
                sign = starts_capitalised(request, v->str, v->len) || function_word_value(v->str);
            else if (choice_enum(schema) && nd_schema_required(params, args->keys[k])) {
                int said = nd_choice_said(request, v->str, v->len);
                if (said < 0) sign = -1;
                else sign = !said;
            }
        }
        if (!sign) sign = unknown_choice_named((const char(*)[16])rw, n_words, props);
    }
    if (!sign) sign = impossible_date(request) || number_unused(calls, request, (const char(*)[16])rw, n_words);
    free(rw);
    return sign;
}

nd_json *nd_scratch_answer_again(needle_session *scratch, const nd_json *tools, const char *request,
                                 int max_new_tokens, int *rc, needle_error *err)
{
    static const char PREFIX[] = "please ";
    *rc = 0;
    size_t n = strlen(request), len = sizeof PREFIX - 1 + n;
    char *text = malloc(len + 1);
    if (!text) {
        *rc = nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory asking again");
        return NULL;
    }
    memcpy(text, PREFIX, sizeof PREFIX - 1);
    memcpy(text + sizeof PREFIX - 1, request, n + 1);
    nd_json *env = nd_scratch_answer(scratch, text, len, max_new_tokens, rc, err);
    free(text);
    int sign = env ? nd_refusal_signs(nd_json_get(env, "function_calls"), tools, request) : 1;
    if (sign < 0 && !*rc) *rc = nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory asking again");
    if (sign) {
        nd_json_free(env);
        return NULL;
    }
    return env;
}

int nd_take_scratch_answer(const needle_session *s, const nd_json *env, nd_split_answer *out, needle_error *err)
{
    int ascii = nd_chat_json_ascii(s->model->layout);
    out->calls.len = 0; /* (a two-part answer tried before may have left text here) */
    out->completed.len = 0;
    nd_json_write(&out->calls, nd_json_get(env, "function_calls"), ascii);
    const nd_json *completed = nd_json_get(nd_json_get(env, "validation"), "completed");
    if (completed) nd_json_write(&out->completed, completed, ascii);
    else nd_buf_puts(&out->completed, "[]");
    const nd_json *conf = nd_json_get(env, "confidence");
    if (conf && conf->type == ND_JSON_NUMBER) out->confidence = conf->num;
    if (out->calls.oom || out->completed.oom) return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory taking a second answer");
    return 0;
}

int nd_take_scratch_if(const needle_session *s, nd_json *env, int sign, int rc, nd_split_answer *out,
                       needle_error *err)
{
    int taken = 0;
    if (sign < 0 && !rc) rc = nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory answering again");
    if (env && !sign && !rc) {
        rc = nd_take_scratch_answer(s, env, out, err);
        taken = !rc;
    }
    nd_json_free(env);
    return rc ? rc : taken;
}

int nd_answer_again(needle_session *s, const char *request, int max_new_tokens, nd_split_answer *out,
                    needle_error *err)
{
    if (!s->tools || !request) return 0;
    needle_session *scratch = NULL;
    int rc = nd_scratch_open(s, max_new_tokens, &scratch, err), taken = 0;
    if (rc) return rc == NEEDLE_ENOMEM ? rc : 0;
    nd_json *env = nd_scratch_answer_again(scratch, s->tools, request, max_new_tokens, &rc, err);
    taken = nd_take_scratch_if(s, env, 0, rc, out, err);
    nd_session_free(scratch);
    return taken;
}
