/* place_span.c - a place named in part is taken whole (place_span.h). */
#include "agent/place_span.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/repair.h"
#include "agent/spoken_words.h"

#define MAX_WORDS 128

typedef struct {
    size_t begin, end;
} span;

static int letter(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

/* The request as words (a letter, then letters, ' and -) and single marks;
 * returns how many (at most cap). */
static int split_words(const char *text, span *w, int cap)
{
    int n = 0;
    size_t len = strlen(text);
    for (size_t i = 0; i < len && n < cap;) {
        unsigned char c = (unsigned char)text[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            i++;
            continue;
        }
        size_t e = i + 1;
        if (letter(c))
            while (e < len && (letter((unsigned char)text[e]) || text[e] == '\'' || text[e] == '-')) e++;
        else
            while (e < len && ((unsigned char)text[e] & 0xC0) == 0x80) e++; /* one whole UTF-8 mark */
        w[n].begin = i;
        w[n].end = e;
        n++;
        i = e;
    }
    return n;
}

static int word_is(const char *text, span w, const char *s)
{
    size_t n = strlen(s);
    return w.end - w.begin == n && strncasecmp(text + w.begin, s, n) == 0;
}

/* Is the word one of the tool's name ("lights" of "set_lights"), plural 's' aside? */
static int tool_word(const char *text, span w, const char *tool)
{
    size_t n = w.end - w.begin;
    if (n > 1 && (text[w.end - 1] == 's' || text[w.end - 1] == 'S')) n--;
    for (const char *p = tool; *p;) {
        size_t k = 0;
        while (p[k] && p[k] != '_' && p[k] != '-' && p[k] != ' ') k++;
        size_t m = k > 1 && (p[k - 1] == 's' || p[k - 1] == 'S') ? k - 1 : k;
        if (m == n && n > 0 && strncasecmp(text + w.begin, p, n) == 0) return 1;
        p += k;
        while (*p == '_' || *p == '-' || *p == ' ') p++;
    }
    return 0;
}

static const char *const FUNCTION_WORDS[] = {
    "the",  "a",    "an",   "my",    "our",    "your",  "his",   "her",   "their", "this",  "that",  "these",
    "those", "in",  "on",   "at",    "to",     "for",   "of",    "and",   "or",    "with",  "from",  "by",
    "into", "onto", "off",  "up",    "down",   "out",   "over",  "please", "pls",  "thanks", "thx", "all",
    "some", "every", "each", "it",   "its",    "me",    "us",    "them",  "is",    "are",   "be",    "set",
    "turn", "switch", "make", "put", "get",    "show",  "tell",  "what",  "whats", "how",   "hows",  "will",
    "would", "could", "can", "should", NULL};

/* May the word join a place name: plain lower-case ASCII, not a function word
 * or a word of the tool's name? */
static int joins(const char *text, span w, const char *tool)
{
    if (!(text[w.begin] >= 'a' && text[w.begin] <= 'z')) return 0;
    for (size_t i = w.begin; i < w.end; i++)
        if (!((text[i] >= 'a' && text[i] <= 'z') || text[i] == '\'' || text[i] == '-')) return 0;
    for (const char *const *f = FUNCTION_WORDS; *f; f++)
        if (word_is(text, w, *f)) return 0;
    return !tool_word(text, w, tool);
}

/* The value as a run of whole words of the request, found once: its first
 * and last word in *a and *b. */
static int locate(const char *request, const span *w, int n, const char *value, size_t value_len, int *a, int *b)
{
    span vw[MAX_WORDS];
    char *v = malloc(value_len + 1);
    if (!v) return 0;
    memcpy(v, value, value_len);
    v[value_len] = '\0';
    int m = split_words(v, vw, MAX_WORDS), found = 0;
    for (int i = 0; m > 0 && i + m <= n; i++) {
        int same = 1;
        for (int k = 0; k < m && same; k++)
            same = w[i + k].end - w[i + k].begin == vw[k].end - vw[k].begin &&
                   memcmp(request + w[i + k].begin, v + vw[k].begin, vw[k].end - vw[k].begin) == 0;
        if (!same) continue;
        if (found++) break;
        *a = i;
        *b = i + m - 1;
    }
    free(v);
    return found == 1;
}

/* Could the word be (a part of) a name: a capital or a non-ASCII letter first? */
static int name_like(const char *text, span w)
{
    unsigned char c = (unsigned char)text[w.begin];
    return (c >= 'A' && c <= 'Z') || c >= 0x80;
}

/* Is the word a name's possessive: name-like, 's or ’s last? */
static int possessive_name(const char *text, span w)
{
    size_t n = w.end - w.begin;
    if (!name_like(text, w)) return 0;
    if (n > 2 && text[w.end - 2] == '\'' && text[w.end - 1] == 's') return 1;
    return n > 4 && !strncmp(text + w.end - 4, "\xE2\x80\x99s", 4);
}

/* A name cut before its possessive: "Jennifer" of "in Jennifer's bedroom",
 * "Okonkwo" of "to Okonkwo's Pharmacy".  The value, found once in the
 * request and ending a word there, is followed by 's (or ’s) and one more
 * word that is not a function word or a word of the tool's name; that whole
 * span, or NULL. */
static char *possessive_place(const char *request, const char *tool, const char *value, size_t value_len)
{
    size_t len = strlen(request), at = 0;
    int found = 0;
    if (value_len == 0 || value_len >= len) return NULL;
    for (size_t i = 0; i + value_len <= len; i++)
        if (!memcmp(request + i, value, value_len) && (i == 0 || !letter((unsigned char)request[i - 1]))) {
            if (found++) return NULL;
            at = i;
        }
    if (!found) return NULL;
    size_t p = at + value_len;
    if (request[p] == '\'' && request[p + 1] == 's') p += 2;
    else if (!strncmp(request + p, "\xE2\x80\x99s", 4)) p += 4;
    else return NULL;
    if (request[p] != ' ') return NULL;
    span next[2];
    if (split_words(request + p, next, 2) < 1 || !letter((unsigned char)request[p + next[0].begin])) return NULL;
    span word = {p + next[0].begin, p + next[0].end};
    for (const char *const *f = FUNCTION_WORDS; *f; f++)
        if (word_is(request, word, *f)) return NULL;
    if (tool_word(request, word, tool)) return NULL;
    return nd_copy_text_span(request, at, word.end);
}

/* Does word k close a clause: the end, a mark (, . ! ? ; not a digit) or a word that
 * follows a place at a request's end ("... for the porch please")? */
static int closes_clause(const char *text, const span *w, int n, int k)
{
    static const char *const CLOSERS[] = {"and", "please", "pls", "plz", "thanks", "thank", "thx", "ty", "cheers",
                                          "asap", "now", "if", "for", "real", "then", "also", NULL};
    if (k >= n) return 1;
    unsigned char c = (unsigned char)text[w[k].begin];
    if (!letter(c)) return !(c >= '0' && c <= '9'); /* a mark, not a number ("the porch position 11%") */
    for (const char *const *c = CLOSERS; *c; c++)
        if (word_is(text, w[k], *c)) return 1;
    return 0;
}

/* The one place the request names in a place's own pattern: "the|my|our W..
 * NOUN" (NOUN a word of the tool's name: "the balcony lights") or "in|for|on
 * the W.." closing a clause ("for the porch pls"), with one to three words W
 * that may join a place (joins()), the fewest that fit.  A name's possessive
 * may stand for "the" before one word W and is then part of the place ("in
 * Tobi's bedroom", "Ana's study lights"; not "in Leila's study halfway", nor
 * a name of several words, "Luis Ángel's room", whose start is unsure).  1
 * with its byte span, 0 when there is none or two different ones. */
static int named_place(const char *text, const span *w, int n, const char *tool, size_t *s0, size_t *s1)
{
    int found = 0;
    for (int i = 0; i + 1 < n; i++) {
        /* a name's possessive stands where "the" would and is part of the place ("in Tobi's bedroom") */
        int owner = possessive_name(text, w[i]) && !(i > 0 && name_like(text, w[i - 1])); /* not "Luis Ángel's" */
        if (!owner && !word_is(text, w[i], "the") && !word_is(text, w[i], "my") && !word_is(text, w[i], "our")) continue;
        int prep = (owner || word_is(text, w[i], "the")) && i > 0 &&
                   (word_is(text, w[i - 1], "in") || word_is(text, w[i - 1], "for") || word_is(text, w[i - 1], "on"));
        for (int e = i + 1; e < n && e <= i + (owner ? 1 : 3) && joins(text, w[e], tool); e++) {
            int noun_after = e + 1 < n && tool_word(text, w[e + 1], tool);
            if (!noun_after && !(prep && closes_clause(text, w, n, e + 1))) continue;
            size_t c0 = owner ? w[i].begin : w[i + 1].begin, c1 = w[e].end;
            if (found && (c1 - c0 != *s1 - *s0 || memcmp(text + c0, text + *s0, c1 - c0) != 0)) return 0;
            found = 1;
            *s0 = c0;
            *s1 = c1;
            break;
        }
    }
    return found;
}

/* The value widened or trimmed where it stands (every step below but the
 * one named place), or NULL when it would not change. */
static char *reshape_where_it_stands(const char *request, const char *tool, const char *value, size_t value_len)
{
    if (value_len == 0) return NULL;
    span w[MAX_WORDS];
    int n = split_words(request, w, MAX_WORDS), a = 0, b = 0;
    char *possessive = possessive_place(request, tool, value, value_len);
    if (possessive) return possessive;
    if (!locate(request, w, n, value, value_len, &a, &b)) return NULL;
    /* the tool's own noun at the end goes ("greenhouse lights" -> "greenhouse") */
    while (b > a && tool_word(request, w[b], tool)) b--;
    /* after: words between the value and the tool's noun */
    int nb = b;
    while (nb + 1 < n && nb - b < 2 && joins(request, w[nb + 1], tool)) nb++;
    while (nb > b && !(nb + 1 < n && tool_word(request, w[nb + 1], tool))) nb--;
    /* a room or area is named with its noun ("the games room", "the dining area") */
    if (nb + 1 < n && (word_is(request, w[nb + 1], "room") || word_is(request, w[nb + 1], "area")) &&
        !tool_word(request, w[nb + 1], tool))
        nb++;
    /* before: words right after "the", "my" or "our" */
    int na = a;
    while (na > 0 && a - na < 2 && joins(request, w[na - 1], tool)) na--;
    while (na < a && !(na > 0 && (word_is(request, w[na - 1], "the") || word_is(request, w[na - 1], "my") ||
                                  word_is(request, w[na - 1], "our"))))
        na++;
    /* a name's possessive right before it joins ("Joseph's [study]") */
    if (na > 0 && possessive_name(request, w[na - 1])) na--;
    /* a value that was only the tool's noun ("lights") keeps the place before it, not the noun */
    while (nb > na && tool_word(request, w[nb], tool)) nb--;
    size_t s0 = w[na].begin, s1 = w[nb].end;
    if (s1 - s0 == value_len && memcmp(request + s0, value, value_len) == 0) return NULL;
    return nd_copy_text_span(request, s0, s1);
}

char *nd_place_span_reshape(const char *request, const char *tool, const char *value, size_t value_len)
{
    if (value_len == 0) return NULL;
    span w[MAX_WORDS];
    int n = split_words(request, w, MAX_WORDS);
    /* a value outside the one place the request names, or a part of it, is replaced by that place */
    size_t p0 = 0, p1 = 0;
    if (named_place(request, w, n, tool, &p0, &p1) &&
        !(p1 - p0 == value_len && memcmp(request + p0, value, value_len) == 0))
        return nd_copy_text_span(request, p0, p1);
    return reshape_where_it_stands(request, tool, value, value_len);
}

static int wants_place(const nd_json *args, size_t k)
{
    static const char *const KEYS[] = {"room", "location", "destination", "place", "area",
                                       "zone", "door",     "window",      "city",  "address", NULL};
    for (const char *const *key = KEYS; *key; key++)
        if (!strcasecmp(args->keys[k], *key)) return 1;
    return 0;
}

/* Is text the value of a place argument of a call other than calls->items[skip]? */
static int another_calls_place(const nd_json *calls, size_t skip, const char *text)
{
    for (size_t i = 0; i < calls->count; i++) {
        const nd_json *args = nd_json_get(&calls->items[i], "arguments");
        if (i == skip || !args || args->type != ND_JSON_OBJECT) continue;
        for (size_t k = 0; k < args->count; k++)
            if (wants_place(args, k) && args->items[k].type == ND_JSON_STRING && args->items[k].len == strlen(text) &&
                !memcmp(args->items[k].str, text, args->items[k].len))
                return 1;
    }
    return 0;
}

/* Is every word of the value a function word ("the", "in the")? */
static int function_words_only(const char *value, size_t value_len)
{
    char *v = nd_copy_text_span(value, 0, value_len);
    if (!v) return 0;
    span w[8];
    int n = split_words(v, w, 8), only = n > 0 && n < 8;
    for (int i = 0; i < n && only; i++) {
        int listed = 0;
        for (const char *const *f = FUNCTION_WORDS; *f && !listed; f++) listed = word_is(v, w[i], *f);
        only = listed;
    }
    free(v);
    return only;
}

/* May the word be a word of a place's name: a capital or a non-ASCII letter
 * first, letters after it, not "I", a month or a weekday ("in March")? */
static int place_name_word(const char *text, span w)
{
    if (!name_like(text, w) || !letter((unsigned char)text[w.begin]) || word_is(text, w, "I")) return 0;
    for (int m = 0; m < 12; m++)
        if (word_is(text, w, ND_MONTH_NAMES[m])) return 0;
    for (int d = 0; d < 7; d++)
        if (word_is(text, w, ND_WEEKDAY_NAMES[d])) return 0;
    return 1;
}

/* The one place the request names after "in" with a capital: "in Valparaíso",
 * "in Da Nang" (one to three words, place_name_word()).  1 with its byte span,
 * 0 when there is none or two different ones. */
static int place_after_in(const char *text, const span *w, int n, size_t *s0, size_t *s1)
{
    int found = 0;
    for (int i = 0; i + 1 < n; i++) {
        if (!word_is(text, w[i], "in") || !place_name_word(text, w[i + 1])) continue;
        int e = i + 1;
        while (e + 1 < n && e < i + 3 && place_name_word(text, w[e + 1]) && w[e + 1].begin == w[e].end + 1) e++;
        size_t c0 = w[i + 1].begin, c1 = w[e].end;
        if (found && (c1 - c0 != *s1 - *s0 || memcmp(text + c0, text + *s0, c1 - c0) != 0)) return 0;
        found = 1;
        *s0 = c0;
        *s1 = c1;
    }
    return found;
}

/* A place said after "in" that the one call leaves out: its tool's one free
 * string argument named as a place (wants_place) is absent or holds only
 * function words ("what's the weather in Valparaíso" -> "location": "the")
 * and is set to the place.  1 when written, 0 when not, -1 out of memory. */
static int fill_left_out_place(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths)
{
    nd_one_call one;
    if (!request || !nd_repair_one_call(calls, tools, &one) || !one.props || one.props->type != ND_JSON_OBJECT)
        return 0;
    const char *key = NULL;
    for (size_t k = 0; k < one.props->count; k++) {
        if (!wants_place(one.props, k) || !nd_free_string_schema(&one.props->items[k])) continue;
        if (key) return 0; /* two places ("origin", "destination"): which one is unsure */
        key = one.props->keys[k];
    }
    if (!key) return 0;
    const nd_json *v = nd_json_get(one.args, key);
    if (v && !(v->type == ND_JSON_STRING && function_words_only(v->str, v->len))) return 0;
    span w[MAX_WORDS];
    int n = split_words(request, w, MAX_WORDS);
    size_t p0 = 0, p1 = 0;
    if (!place_after_in(request, w, n, &p0, &p1)) return 0;
    nd_buf quoted;
    nd_buf_init(&quoted);
    nd_json_write_string(&quoted, request + p0, p1 - p0, 0);
    int rc = quoted.oom || nd_object_put_json(one.args, key, quoted.data, quoted.len) ? -1 : 1;
    nd_buf_free(&quoted);
    if (rc > 0) nd_repair_note(paths, n_paths, one.tool, key);
    return rc;
}

int nd_complete_place_names(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths)
{
    /* several calls: each place is only widened or trimmed where it stands (the
     * request names several places, so none replaces another), and never into
     * the place another call already has ("basement" and "garage" of "the lower
     * basement and old garage" must not both become "lower basement") */
    if (request && calls && calls->type == ND_JSON_ARRAY && calls->count > 1)
        return nd_reshape_free_texts_each(calls, tools, request, wants_place, reshape_where_it_stands,
                                          another_calls_place, paths, n_paths);
    int changed = nd_reshape_free_texts(calls, tools, request, wants_place, nd_place_span_reshape, paths, n_paths);
    int filled = changed < 0 ? 0 : fill_left_out_place(calls, tools, request, paths, n_paths);
    return changed < 0 || filled < 0 || paths->oom ? -1 : changed + filled;
}
