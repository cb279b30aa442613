/* said_label.c - the label the request names is written (said_label.h). */
#include "agent/said_label.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/repair.h"
#include "agent/spoken_words.h"

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int word_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '\'' || c >= 0x80;
}

/* Is text[i, i + strlen(w)) the word w (any case), a word of its own? */
static int word_at(const char *text, size_t len, size_t i, const char *w)
{
    size_t n = strlen(w);
    if (i + n > len || strncasecmp(text + i, w, n) != 0) return 0;
    if (i > 0 && word_char((unsigned char)text[i - 1])) return 0;
    return i + n == len || !word_char((unsigned char)text[i + n]);
}

/* The markers, longest first ("label it" before "label"). */
static const char *const MARKERS[] = {"label it", "labelled", "labeled", "called", "named", "titled", "label", "title",
                                      NULL};

/* Where the label starts after the one marker of the request (past an
 * optional ':' and spaces), whether a ':' followed it; 0 when there is no
 * marker or more than one. */
static size_t after_marker(const char *text, size_t len, int *colon)
{
    size_t found = 0;
    int count = 0;
    for (size_t i = 0; i < len; i++) {
        for (const char *const *m = MARKERS; *m; m++) {
            if (!word_at(text, len, i, *m)) continue;
            size_t e = i + strlen(*m);
            count++;
            size_t k = e;
            while (k < len && is_space(text[k])) k++;
            *colon = k < len && text[k] == ':';
            if (*colon) k++;
            while (k < len && is_space(text[k])) k++;
            found = k > e ? k : 0; /* a space or ':' must follow the marker */
            break;
        }
    }
    return count == 1 && found < len ? found : 0;
}

static const char *const ENDS[] = {"and",    "on",  "at",   "for",  "every", "to",    "in",    "with",     "please",
                                   "pls",    "thanks", "thx", "then", "from",  "by",    "today", "tonight", "tomorrow",
                                   NULL};

static char *copy_span(const char *text, size_t b, size_t e)
{
    while (b < e && is_space(text[b])) b++;
    while (e > b && (is_space(text[e - 1]) || strchr(".!?", text[e - 1]))) e--;
    return nd_copy_text_span(text, b, e);
}

/* Words after "for" that say when, not what ("for 7", "for tomorrow",
 * "for Monday", "for the morning"). */
static const char *const WHEN_WORDS[] = {"half", "quarter", "noon", "midnight", "midday", "today", "tonight",
                                         "tomorrow", "me", "my", "us", "a", "an", "every", "each", "minus", "weekdays",
                                         "weekends", "morning", "afternoon", "evening", "night", "later", "now", "it",
                                         "this", "next", "all", NULL};
static const char *const WHEN_AFTER_THE[] = {"morning", "afternoon", "evening", "night", "weekend", "weekdays",
                                             "day", "week", "next", NULL};

static int word_listed_at(const char *text, size_t len, size_t i, const char *const *list)
{
    for (const char *const *w = list; *w; w++)
        if (word_at(text, len, i, *w)) return 1;
    return 0;
}

/* A number, month or weekday said in words ("seven", "forty", "march", "friday", "fridays"). */
static int spoken_when_at(const char *text, size_t len, size_t i)
{
    for (int k = 0; k < 20; k++)
        if (word_at(text, len, i, ND_SMALL_NUMBERS[k])) return 1;
    for (int k = 0; k < 8; k++)
        if (word_at(text, len, i, ND_TENS_WORDS[k])) return 1;
    for (int k = 0; k < 12; k++)
        if (word_at(text, len, i, ND_MONTH_NAMES[k])) return 1;
    for (int k = 0; k < 7; k++) {
        char plural[16];
        snprintf(plural, sizeof plural, "%ss", ND_WEEKDAY_NAMES[k]);
        if (word_at(text, len, i, ND_WEEKDAY_NAMES[k]) || word_at(text, len, i, plural)) return 1;
    }
    return 0;
}

/* The one "for" followed by what (not when), or 0. */
static size_t after_for(const char *text, size_t len)
{
    size_t found = 0;
    int count = 0;
    for (size_t i = 0; i < len; i++) {
        if (!word_at(text, len, i, "for")) continue;
        count++;
        size_t k = i + 3;
        while (k < len && is_space(text[k])) k++;
        if (k >= len || (text[k] >= '0' && text[k] <= '9') || word_listed_at(text, len, k, WHEN_WORDS) ||
            spoken_when_at(text, len, k)) continue;
        if (word_at(text, len, k, "the")) {
            size_t t = k + 3;
            while (t < len && is_space(text[t])) t++;
            if (word_listed_at(text, len, t, WHEN_AFTER_THE)) continue;
        }
        found = k;
    }
    return count == 1 ? found : 0;
}

static char *label_at(const char *request, size_t len, size_t b, int colon);

char *nd_label_said(const char *request)
{
    if (!request) return NULL;
    size_t len = strlen(request);
    int colon = 0;
    size_t b = after_marker(request, len, &colon);
    return b ? label_at(request, len, b, colon) : NULL;
}

/* The label of the four-word rule after b. */
static char *label_at(const char *request, size_t len, size_t b, int colon)
{
    if (colon) { /* a field: to the next ',' or ';' */
        size_t e = b;
        while (e < len && request[e] != ',' && request[e] != ';') e++;
        return copy_span(request, b, e);
    }
    /* quoted: what the marks hold */
    static const char *const OPEN[] = {"\"", "'", "\xe2\x80\x9c", "\xe2\x80\x98", NULL};
    static const char *const CLOSE[] = {"\"", "'", "\xe2\x80\x9d", "\xe2\x80\x99", NULL};
    for (int q = 0; OPEN[q]; q++) {
        size_t n = strlen(OPEN[q]);
        if (strncmp(request + b, OPEN[q], n) != 0) continue;
        const char *end = strstr(request + b + n, CLOSE[q]);
        return end ? copy_span(request, b + n, (size_t)(end - request)) : NULL;
    }
    /* up to four words */
    size_t e = b, p = b;
    for (int words = 0; words < 4 && p < len; words++) {
        size_t ws = p;
        while (p < len && !is_space(request[p])) p++;
        size_t we = p;
        while (we > ws && strchr(",.;!?", request[we - 1])) we--;
        if (we == ws || (request[ws] >= '0' && request[ws] <= '9')) break;
        int stop = 0;
        for (const char *const *s = ENDS; *s && !stop; s++) stop = we - ws == strlen(*s) && !strncasecmp(request + ws, *s, we - ws);
        if (stop) break;
        e = we;
        if (we < p) break; /* the word ended a clause */
        while (p < len && is_space(request[p])) p++;
    }
    return e > b ? copy_span(request, b, e) : NULL;
}

static int label_key(const char *key)
{
    return !strcasecmp(key, "label") || !strcasecmp(key, "title");
}

int nd_fix_said_label(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths)
{
    nd_one_call one;
    if (!request || !nd_repair_one_call(calls, tools, &one)) return 0;
    char *label = NULL;
    int written = 0;
    for (size_t k = 0; k < one.props->count && written >= 0; k++) {
        const char *key = one.props->keys[k];
        if (!label_key(key) || !nd_free_string_schema(&one.props->items[k])) continue;
        nd_json *v = (nd_json *)nd_json_get(one.args, key);
        if (!label && !(label = nd_label_said(request))) {
            /* "for school pickup" only adds a label the call left out: "for"
             * also introduces places and people ("for the balcony") */
            size_t b = v ? 0 : after_for(request, strlen(request));
            if (!b || !(label = label_at(request, strlen(request), b, 0))) break;
        }
        if (v && v->type == ND_JSON_STRING && v->len == strlen(label) && !memcmp(v->str, label, v->len)) continue;
        if (v && v->type == ND_JSON_STRING) {
            size_t n = strlen(label);
            char *copy = malloc(n + 1);
            if (copy) memcpy(copy, label, n + 1);
            if (!copy) {
                written = -1;
                break;
            }
            free(v->str);
            v->str = copy;
            v->len = strlen(copy);
        } else if (v) {
            continue; /* a value of another type is the schema's business */
        } else if (nd_json_object_add_string(one.args, key, label)) {
            written = -1;
            break;
        }
        written++;
        nd_repair_note(paths, n_paths, one.tool, key);
    }
    free(label);
    return written < 0 || paths->oom ? -1 : written;
}
