/* split_request.c - where a request that asks for two things may be cut in two
 * (split_request.h). */
#include "agent/split_request.h"

#include <string.h>

#include "agent/said_number.h"

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

static int is_alnum(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static int is_space(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Is text[i, i + n) the word w (ASCII, any case), with no letter or digit
 * on either side? */
static int word_at(const char *text, size_t len, size_t i, const char *w)
{
    size_t n = strlen(w);
    if (i + n > len) return 0;
    for (size_t k = 0; k < n; k++)
        if (lower((unsigned char)text[i + k]) != w[k]) return 0;
    if (i > 0 && (is_alnum((unsigned char)text[i - 1]) || text[i - 1] == '\'')) return 0;
    if (i + n < len && (is_alnum((unsigned char)text[i + n]) || text[i + n] == '\'')) return 0;
    return 1;
}

/* The word that ends just before position `end` (spaces and commas skipped),
 * lower case, cut to cap - 1 bytes; "" when none. */
static void word_before(const char *text, size_t end, char *out, size_t cap)
{
    size_t e = end;
    while (e > 0 && (is_space((unsigned char)text[e - 1]) || text[e - 1] == ',')) e--;
    size_t b = e;
    while (b > 0 && is_alnum((unsigned char)text[b - 1])) b--;
    size_t n = e - b < cap - 1 ? e - b : cap - 1;
    for (size_t k = 0; k < n; k++) out[k] = (char)lower((unsigned char)text[b + k]);
    out[n] = '\0';
}

/* The word that starts at or after position `begin` (spaces skipped). */
static void word_after(const char *text, size_t len, size_t begin, char *out, size_t cap)
{
    size_t b = begin;
    while (b < len && is_space((unsigned char)text[b])) b++;
    size_t e = b;
    while (e < len && is_alnum((unsigned char)text[e])) e++;
    size_t n = e - b < cap - 1 ? e - b : cap - 1;
    for (size_t k = 0; k < n; k++) out[k] = (char)lower((unsigned char)text[b + k]);
    out[n] = '\0';
}

/* Is a sentence ending at text[i] ('.', '!' or '?' followed by a space)? */
static int sentence_end(const char *text, size_t len, size_t i)
{
    return (text[i] == '.' || text[i] == '!' || text[i] == '?') && i + 1 < len && is_space((unsigned char)text[i + 1]);
}

/* Words of the last sentence of text[b, e) (the part next to a cut on its left). */
static int words_of_last_sentence(const char *text, size_t b, size_t e)
{
    size_t s = e;
    while (s > b && !(s - 1 > b && sentence_end(text, e, s - 2))) s--;
    int words = 0, in_word = 0;
    for (size_t i = s; i < e; i++) {
        int sp = is_space((unsigned char)text[i]);
        if (!sp && !in_word) words++;
        in_word = !sp;
    }
    return words;
}

/* Words of the first sentence of text[b, e) (the part next to a cut on its right). */
static int words_of_first_sentence(const char *text, size_t b, size_t e)
{
    int words = 0, in_word = 0;
    for (size_t i = b; i < e; i++) {
        if (sentence_end(text, e, i)) break;
        int sp = is_space((unsigned char)text[i]);
        if (!sp && !in_word) words++;
        in_word = !sp;
    }
    return words;
}

/* Is position i inside quotes: an odd count of '"' before it, or more
 * U+201C than U+201D? */
static int inside_quotes(const char *text, size_t i)
{
    int straight = 0, open = 0, close = 0;
    for (size_t k = 0; k < i; k++) {
        if (text[k] == '"') straight++;
        if ((unsigned char)text[k] == 0xE2 && k + 2 < i && (unsigned char)text[k + 1] == 0x80) {
            if ((unsigned char)text[k + 2] == 0x9C) open++;
            if ((unsigned char)text[k + 2] == 0x9D) close++;
        }
    }
    return straight % 2 == 1 || open > close;
}

/* Does the value v (ASCII case folded) occur in text with an occurrence that
 * starts before `from` and ends after `to`? */
static int value_spans(const char *text, size_t len, const char *v, size_t vlen, size_t from, size_t to)
{
    if (vlen == 0 || vlen > len) return 0;
    for (size_t i = 0; i + vlen <= len && i < from; i++) {
        size_t k = 0;
        while (k < vlen && lower((unsigned char)text[i + k]) == lower((unsigned char)v[k])) k++;
        if (k == vlen && i + vlen > to) return 1;
    }
    return 0;
}

/* Does a string value of the calls (an argument, or a string in an argument's
 * array) run across text[from, to)? */
static int cut_through_value(const char *text, size_t len, const nd_json *calls, size_t from, size_t to)
{
    if (!calls || calls->type != ND_JSON_ARRAY) return 0;
    for (size_t c = 0; c < calls->count; c++) {
        const nd_json *args = nd_json_get(&calls->items[c], "arguments");
        if (!args || args->type != ND_JSON_OBJECT) continue;
        for (size_t a = 0; a < args->count; a++) {
            const nd_json *v = &args->items[a];
            if (v->type == ND_JSON_STRING && value_spans(text, len, v->str, v->len, from, to)) return 1;
            if (v->type != ND_JSON_ARRAY) continue;
            for (size_t k = 0; k < v->count; k++)
                if (v->items[k].type == ND_JSON_STRING &&
                    value_spans(text, len, v->items[k].str, v->items[k].len, from, to))
                    return 1;
        }
    }
    return 0;
}

static int trim_char(int c)
{
    return is_space(c) || c == ',' || c == '.' || c == ';' || c == ':';
}

/* The joins, strongest first: words (one or two), or the characters ';',
 * '&' and a sentence's full stop. */
enum { JOIN_WORDS, JOIN_SEMICOLON, JOIN_SENTENCE, JOIN_AMPERSAND };
typedef struct {
    int kind;
    const char *first, *second; /* JOIN_WORDS: "and" "then", or one word (second NULL) */
} join;

static const join JOINS[] = {
    {JOIN_WORDS, "and", "then"}, {JOIN_WORDS, "then", NULL}, {JOIN_WORDS, "and", "also"},
    {JOIN_WORDS, "also", NULL},  {JOIN_WORDS, "plus", NULL}, {JOIN_SEMICOLON, NULL, NULL},
    {JOIN_SENTENCE, NULL, NULL}, {JOIN_AMPERSAND, NULL, NULL}, {JOIN_WORDS, "and", NULL},
};

static const char *const NUMBER_SCALES[] = {"hundred", "thousand", "million", NULL};
static const char *const TITLES[] = {"mr", "ms", "mrs", "dr", "st", "jr", "sr", "prof", "mt", NULL};
static const char *const QUALIFIERS[] = {"called", "named", "titled", "labelled", "labeled", "with", "for",
                                         "to",     "at",    "in",     "on",       "from",    "by",  NULL};

/* Does the join j sit at text[i]?  On a match, [*m_begin, *m_end) is the join
 * itself (its words or character). */
static int join_at(const char *text, size_t len, size_t i, const join *j, size_t *m_begin, size_t *m_end)
{
    char w[16];
    switch (j->kind) {
    case JOIN_SEMICOLON:
        if (text[i] != ';') return 0;
        break;
    case JOIN_AMPERSAND:
        if (text[i] != '&' || i == 0 || !is_space((unsigned char)text[i - 1]) || i + 1 >= len ||
            !is_space((unsigned char)text[i + 1]))
            return 0;
        break;
    case JOIN_SENTENCE:
        /* a full stop between a word or number and a next word: "porch. Also ..." (not "95.8") */
        if (text[i] != '.' || i == 0 || !is_alnum((unsigned char)text[i - 1]) || i + 2 >= len ||
            !is_space((unsigned char)text[i + 1]))
            return 0;
        word_before(text, i, w, sizeof w);
        if (nd_word_listed(w, TITLES)) return 0;
        break;
    default: {
        if (!word_at(text, len, i, j->first)) return 0;
        size_t e = i + strlen(j->first);
        if (j->second) {
            size_t k = e;
            while (k < len && is_space((unsigned char)text[k])) k++;
            if (k == e || !word_at(text, len, k, j->second)) return 0;
            e = k + strlen(j->second);
        } else {
            /* "and then" / "and also" are their own joins */
            word_before(text, i, w, sizeof w);
            if (!strcmp(j->first, "then") || !strcmp(j->first, "also"))
                if (!strcmp(w, "and")) return 0;
            if (!strcmp(j->first, "and")) {
                if (nd_word_listed(w, NUMBER_SCALES)) return 0; /* "one hundred and five" */
                char next[16];
                word_after(text, len, e, next, sizeof next);
                if (!strcmp(next, "then") || !strcmp(next, "also")) return 0;
            }
        }
        *m_begin = i;
        *m_end = e;
        return 1;
    }
    }
    *m_begin = i;
    *m_end = i + 1;
    return 1;
}

int nd_split_points(const char *request, const nd_json *calls, nd_split_point *out, int max)
{
    if (!request || max <= 0) return 0;
    size_t len = strlen(request);
    int n = 0;
    for (size_t jk = 0; jk < sizeof JOINS / sizeof JOINS[0] && n < max; jk++) {
        for (size_t i = 0; i < len && n < max; i++) {
            size_t mb, me;
            if (!join_at(request, len, i, &JOINS[jk], &mb, &me)) continue;
            nd_split_point p;
            p.left_begin = 0;
            p.left_end = mb;
            p.right_begin = me;
            p.right_end = len;
            while (p.left_begin < p.left_end && trim_char((unsigned char)request[p.left_begin])) p.left_begin++;
            while (p.left_end > p.left_begin && trim_char((unsigned char)request[p.left_end - 1])) p.left_end--;
            while (p.right_begin < p.right_end && trim_char((unsigned char)request[p.right_begin])) p.right_begin++;
            while (p.right_end > p.right_begin && trim_char((unsigned char)request[p.right_end - 1])) p.right_end--;
            if (words_of_last_sentence(request, p.left_begin, p.left_end) < 2 ||
                words_of_first_sentence(request, p.right_begin, p.right_end) < 2)
                continue;
            char w[16];
            word_after(request, len, p.right_begin, w, sizeof w);
            if (nd_word_listed(w, QUALIFIERS)) continue;
            if (inside_quotes(request, mb)) continue;
            if (cut_through_value(request, len, calls, p.left_end, p.right_begin)) continue;
            out[n++] = p;
        }
    }
    return n;
}

/* ------------------------------------------------------------ one action, two objects */

static const char *const FILLERS[] = {"the", "my", "a", "an", "in", "to", "at", "for", "on", NULL};

/* A join between two objects starting at text[i] (a space or comma first):
 * " and ", " and also ", ", and ", " & ".  Returns where what follows it
 * starts (past its spaces), or 0. */
static size_t object_join_at(const char *text, size_t len, size_t i)
{
    size_t k = i;
    while (k < len && (is_space((unsigned char)text[k]) || text[k] == ',')) k++;
    if (k == i || k >= len) return 0;
    size_t e;
    if (text[k] == '&') {
        e = k + 1;
    } else if (word_at(text, len, k, "and")) {
        e = k + 3;
        size_t m = e;
        while (m < len && is_space((unsigned char)text[m])) m++;
        if (m > e && word_at(text, len, m, "also")) e = m + 4;
    } else {
        return 0;
    }
    if (e >= len || !is_space((unsigned char)text[e])) return 0;
    while (e < len && is_space((unsigned char)text[e])) e++;
    return e;
}

/* Past one filler word and its spaces at text[i]; i itself when there is none. */
static size_t past_filler(const char *text, size_t len, size_t i)
{
    for (const char *const *f = FILLERS; *f; f++) {
        size_t n = strlen(*f);
        if (word_at(text, len, i, *f) && i + n < len && is_space((unsigned char)text[i + n])) {
            i += n;
            while (i < len && is_space((unsigned char)text[i])) i++;
            return i;
        }
    }
    return i;
}

/* Is text[at, at + n) the bytes y (ASCII case folded), a whole piece (no
 * letter or digit touching it)? */
static int piece_at(const char *text, size_t len, size_t at, const char *y, size_t n)
{
    if (n == 0 || at + n > len) return 0;
    for (size_t k = 0; k < n; k++)
        if (lower((unsigned char)text[at + k]) != lower((unsigned char)y[k])) return 0;
    if (at > 0 && is_alnum((unsigned char)text[at - 1]) && is_alnum((unsigned char)text[at])) return 0;
    if (at + n < len && is_alnum((unsigned char)text[at + n]) && is_alnum((unsigned char)text[at + n - 1])) return 0;
    return 1;
}

/* How a value is said: a clock time "07:30" as "7:30" too (the form without
 * its leading zero, in *alt), else only as written (0). */
static int said_alt(const char *v, size_t n, const char **alt, size_t *alt_len)
{
    if (n == 5 && v[0] == '0' && v[1] >= '0' && v[1] <= '9' && v[2] == ':' && v[3] >= '0' && v[3] <= '5' &&
        v[4] >= '0' && v[4] <= '9') {
        *alt = v + 1;
        *alt_len = 4;
        return 1;
    }
    return 0;
}

int nd_other_objects(const char *request, const nd_json *call, nd_other_object *out, int max)
{
    const nd_json *args = call ? nd_json_get(call, "arguments") : NULL;
    if (!request || !args || args->type != ND_JSON_OBJECT || max <= 0) return 0;
    size_t len = strlen(request);
    int n = 0;
    for (size_t a = 0; a < args->count && n < max; a++) {
        const nd_json *v = &args->items[a];
        if (v->type != ND_JSON_STRING || v->len == 0 || v->len > len) continue;
        /* the value as written, or else as said ("07:30" said "7:30") */
        const char *vs = v->str;
        size_t vn = v->len, found = 0;
        for (size_t at = 0; at + vn <= len && !found; at++) found = piece_at(request, len, at, vs, vn);
        if (!found) said_alt(v->str, v->len, &vs, &vn);
        for (size_t at = 0; at + vn <= len && n < max; at++) {
            if (!piece_at(request, len, at, vs, vn)) continue;
            size_t b = at + vn;
            nd_other_object o = {.key = args->keys[a], .value_begin = at, .value_end = b};
            /* V first: "call Filippo & Londisizwe" without "Filippo & " */
            size_t e = object_join_at(request, len, b);
            if (e) {
                /* "in Lisbon and in Porto": the far side's filler word that V's side
                 * already has goes too ("weather in Porto", not "in in Porto") */
                char before[16];
                word_before(request, at, before, sizeof before);
                size_t join_end = e, past = past_filler(request, len, e);
                if (past != e && word_at(request, len, e, before)) e = past;
                o.cut_begin = at;
                o.cut_end = e;
                o.far_side = join_end;
                o.value_first = 1;
                out[n++] = o;
                continue;
            }
            /* V second: "in Jon's room and also the new driveway" without " and also the new driveway" */
            for (size_t js = 1; js < at && n < max; js++) {
                if (is_space((unsigned char)request[js - 1]) || request[js - 1] == ',') continue;
                size_t je = object_join_at(request, len, js);
                if (!je) continue;
                size_t p = je;
                for (int f = 0; f < 2 && p < at; f++) p = past_filler(request, len, p);
                if (p != at) continue;
                o.cut_begin = js;
                o.cut_end = b;
                o.far_side = js;
                o.value_first = 0;
                out[n++] = o;
                break;
            }
        }
    }
    return n;
}

static int flanks_as(const char *request, const nd_other_object *o, const char *y, size_t y_len);

int nd_other_object_flanks(const char *request, const nd_other_object *o, const char *y, size_t y_len)
{
    const char *alt;
    size_t alt_len;
    return flanks_as(request, o, y, y_len) || (said_alt(y, y_len, &alt, &alt_len) && flanks_as(request, o, alt, alt_len));
}

/* Does y, as written, stand on the far side of the join? */
static int flanks_as(const char *request, const nd_other_object *o, const char *y, size_t y_len)
{
    size_t len = strlen(request);
    if (o->value_first) {
        size_t p = o->far_side;
        for (int f = 0; f <= 2; f++) {
            if (piece_at(request, len, p, y, y_len)) return 1;
            size_t next = past_filler(request, len, p);
            if (next == p) break;
            p = next;
        }
        return 0;
    }
    return o->far_side >= y_len && piece_at(request, len, o->far_side - y_len, y, y_len);
}
