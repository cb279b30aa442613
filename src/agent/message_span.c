/* message_span.c - a message's text copied only in part is taken whole
 * (message_span.h). */
#include "agent/message_span.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/repair.h"

static int is_alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Is text[i, i + strlen(w)) the word w (ASCII, any case) with no letter or
 * digit on either side? */
static int word_at(const char *text, size_t len, size_t i, const char *w)
{
    size_t n = strlen(w);
    if (i + n > len || strncasecmp(text + i, w, n) != 0) return 0;
    if (i > 0 && (is_alnum((unsigned char)text[i - 1]) || text[i - 1] == '\'')) return 0;
    return i + n == len || !(is_alnum((unsigned char)text[i + n]) || text[i + n] == '\'');
}

/* Is text[i, i + 3) a curly quotation mark or a dash (U+2018/9, U+201C/D, U+2013/4)? */
static int punctuation_mark(const char *text, size_t len, size_t i)
{
    if (i + 3 > len || (unsigned char)text[i] != 0xE2 || (unsigned char)text[i + 1] != 0x80) return 0;
    unsigned char c = (unsigned char)text[i + 2];
    return c == 0x98 || c == 0x99 || c == 0x9C || c == 0x9D || c == 0x93 || c == 0x94;
}

/* A letter or digit ends right before text[i] (a UTF-8 letter too, but not a curly mark). */
static int letter_before(const char *text, size_t len, size_t i)
{
    if (i == 0) return 0;
    if (i >= 3 && punctuation_mark(text, len, i - 3)) return 0;
    return is_alnum((unsigned char)text[i - 1]);
}

/* A letter or digit starts at text[i]. */
static int letter_at(const char *text, size_t len, size_t i)
{
    return i < len && !punctuation_mark(text, len, i) && is_alnum((unsigned char)text[i]);
}

/* The one place value occurs in request at word edges; -1 when it occurs
 * nowhere or more than once. */
static long find_once(const char *request, size_t len, const char *value, size_t n)
{
    long at = -1;
    for (size_t i = 0; n > 0 && i + n <= len; i++) {
        if (memcmp(request + i, value, n) != 0) continue;
        if (letter_before(request, len, i) && letter_at(value, n, 0)) continue;
        if (letter_at(request, len, i + n) && letter_before(value, n, n)) continue;
        if (at >= 0) return -1;
        at = (long)i;
    }
    return at;
}

/* ------------------------------------------------------------ quotation marks */

/* The quotation mark at text[i]: 1 for '"', 2 for '\'', 3 for U+201C/U+201D,
 * 4 for U+2018/U+2019; its byte length in *n. */
static int quote_at(const char *text, size_t len, size_t i, size_t *n)
{
    *n = 1;
    if (text[i] == '"') return 1;
    if (text[i] == '\'') return 2;
    if (i + 2 < len && (unsigned char)text[i] == 0xE2 && (unsigned char)text[i + 1] == 0x80) {
        *n = 3;
        unsigned char c = (unsigned char)text[i + 2];
        if (c == 0x9C || c == 0x9D) return 3;
        if (c == 0x98 || c == 0x99) return 4;
    }
    return 0;
}

/* The quoted span around [at, end): its inside in [*q_begin, *q_end).  An
 * opening mark stands after a space, ':', '-' or the start; a closing one
 * before a space, punctuation or the end (so "I'll" and "don't" are no
 * marks). */
static int quoted_span(const char *text, size_t len, size_t at, size_t end, size_t *q_begin, size_t *q_end)
{
    for (size_t i = at; i-- > 0;) {
        size_t n;
        int kind = quote_at(text, len, i, &n);
        if (!kind) continue;
        if (i > 0 && !is_space(text[i - 1]) && text[i - 1] != ':' && text[i - 1] != '-') continue;
        for (size_t k = end; k < len; k++) {
            size_t m;
            int close = quote_at(text, len, k, &m);
            if (!close || close != kind || letter_at(text, len, k + m)) continue;
            *q_begin = i + n;
            *q_end = k;
            return 1;
        }
        return 0;
    }
    return 0;
}

/* ------------------------------------------------------------ the end of an unquoted message */

/* The words that end a message: a second request begins ("and then", ...),
 * or the request takes itself back ("... actually no, don't": the negation
 * is then the request's, not the message's). */
static size_t second_request_at(const char *text, size_t len, size_t from)
{
    static const char *const JOINS[] = {"then", "also", "plus", NULL};
    static const char *const TAKEN_BACK[] = {"actually no", "actually, no", "actually don't", "actually, don't",
                                             "never mind", "nevermind", "scratch that", "on second thought",
                                             "wait, no", "wait no", NULL};
    for (size_t k = from; k < len; k++) {
        if (text[k] == ';') return k;
        for (const char *const *b = TAKEN_BACK; *b; b++)
            if (k > from && word_at(text, len, k, *b)) {
                size_t e = k;
                while (e > from && (is_space(text[e - 1]) || text[e - 1] == ',' || text[e - 1] == '.')) e--;
                return e;
            }
        for (const char *const *j = JOINS; *j; j++)
            if (k > from && word_at(text, len, k, *j)) {
                /* "and then", "and also": the message ends before "and" */
                size_t e = k;
                while (e > from && (is_space(text[e - 1]) || text[e - 1] == ',')) e--;
                if (e >= from + 3 && word_at(text, len, e - 3, "and")) e -= 3;
                return e;
            }
    }
    return len;
}

static const char *const COURTESY[] = {"please", "pls", "plz", "thanks", "thank you", "thx", "ty", "cheers",
                                       "asap", "now", "real quick", "if you can", "would you", "would you?",
                                       "for me", NULL};

/* Drop courtesy words, commas, spaces and full stops from the end of text[0, end). */
static size_t without_courtesy(const char *text, size_t from, size_t end)
{
    for (;;) {
        while (end > from && (is_space(text[end - 1]) || text[end - 1] == ',' || text[end - 1] == '.')) end--;
        int cut = 0;
        for (const char *const *c = COURTESY; *c && !cut; c++) {
            size_t n = strlen(*c);
            if (end >= from + n + 1 && strncasecmp(text + end - n, *c, n) == 0 &&
                (is_space(text[end - n - 1]) || text[end - n - 1] == ',')) {
                end -= n;
                cut = 1;
            }
        }
        if (!cut) return end;
    }
}

/* ------------------------------------------------------------ the start */

static int introduces_message(const char *text, size_t len, size_t p)
{
    /* the word or mark that ends right before p (spaces skipped) */
    size_t e = p;
    while (e > 0 && is_space(text[e - 1])) e--;
    if (e == 0) return 0;
    if (text[e - 1] == ':' || text[e - 1] == '-') return 1;
    if (e >= 3 && (unsigned char)text[e - 3] == 0xE2 && (unsigned char)text[e - 2] == 0x80 &&
        (unsigned char)text[e - 1] == 0x93)
        return 1; /* en dash */
    static const char *const WORDS[] = {"that", "saying", "says", "say", "know", "telling", NULL};
    for (const char *const *w = WORDS; *w; w++) {
        size_t n = strlen(*w);
        if (e >= n && word_at(text, len, e - n, *w)) return 1;
    }
    return 0;
}

/* Back over at most two words from at to just after the word that introduces
 * the message; at itself when there is none, or it stands right before at. */
static size_t message_start(const char *text, size_t len, size_t at)
{
    size_t p = at;
    for (int words = 0; words < 2; words++) {
        if (introduces_message(text, len, p)) return words ? p : at;
        size_t e = p;
        while (e > 0 && is_space(text[e - 1])) e--;
        size_t b = e;
        while (b > 0 && !is_space(text[b - 1])) b--;
        if (b == e) return at;
        p = b;
    }
    return introduces_message(text, len, p) ? p : at;
}

char *nd_message_span_widen(const char *request, const char *value, size_t value_len)
{
    size_t len = strlen(request);
    long found = find_once(request, len, value, value_len);
    if (found < 0) return NULL;
    size_t at = (size_t)found, end = at + value_len, start, stop;
    size_t qb, qe;
    if (quoted_span(request, len, at, end, &qb, &qe)) {
        start = qb;
        stop = qe;
    } else {
        start = message_start(request, len, at);
        stop = without_courtesy(request, end, second_request_at(request, len, end));
        if (stop < end) stop = end;
        /* a single final '!' is the request's, not the message's */
        if (stop > end && request[stop - 1] == '!' && request[stop - 2] != '!') stop--;
    }
    while (start < at && is_space(request[start])) start++;
    if (start > at || stop < end || (start == at && stop == end)) return NULL;
    return nd_copy_text_span(request, start, stop);
}

char *nd_message_text_at(const char *request, size_t at)
{
    size_t len = strlen(request), n;
    while (at < len && is_space(request[at])) at++;
    int kind = at < len ? quote_at(request, len, at, &n) : 0;
    if (kind) { /* to the closing mark of the same kind */
        for (size_t k = at + n; k < len; k++) {
            size_t m;
            if (quote_at(request, len, k, &m) == kind && !letter_at(request, len, k + m))
                return k > at + n ? nd_copy_text_span(request, at + n, k) : NULL;
        }
        return NULL;
    }
    size_t stop = second_request_at(request, len, at);
    while (stop > at && is_space(request[stop - 1])) stop--;
    /* a single final '!' is the request's, not the message's ("..., thanks!") */
    if (stop > at + 1 && request[stop - 1] == '!' && request[stop - 2] != '!') stop--;
    stop = without_courtesy(request, at, stop);
    for (const char *const *c = COURTESY; *c; c++) /* a courtesy word alone is no message */
        if (stop - at == strlen(*c) && !strncasecmp(request + at, *c, stop - at)) return NULL;
    return stop > at ? nd_copy_text_span(request, at, stop) : NULL;
}

/* A message argument: named text, message, body, content, note or caption,
 * and not a repeat of another argument (a placeholder: grounding.c withholds it). */
static int wants_message(const nd_json *args, size_t k)
{
    static const char *const KEYS[] = {"text", "message", "body", "content", "note", "caption", NULL};
    int named = 0;
    for (const char *const *key = KEYS; *key && !named; key++) named = !strcasecmp(args->keys[k], *key);
    const nd_json *v = &args->items[k];
    for (size_t o = 0; named && o < args->count; o++) {
        const nd_json *w = &args->items[o];
        if (o != k && w->type == ND_JSON_STRING && w->len == v->len && !strncasecmp(w->str, v->str, v->len)) named = 0;
    }
    return named;
}

static char *widen(const char *request, const char *tool, const char *value, size_t value_len)
{
    (void)tool;
    return nd_message_span_widen(request, value, value_len);
}

int nd_complete_message_text(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths)
{
    return nd_reshape_free_texts(calls, tools, request, wants_message, widen, paths, n_paths);
}
