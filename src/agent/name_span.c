/* name_span.c - finish a name the model copied only part of (name_span.h). */
#include "agent/name_span.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/grounding.h"
#include "agent/repair.h"
#include "core/utf8.h"

/* One whitespace-separated word of the request: [start, end) as written,
 * [core_start, core_end) without the quotes and brackets before it and the
 * punctuation, quotes and brackets after it. */
typedef struct {
    size_t start, end, core_start, core_end;
} word;

#define MAX_WORDS 512

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* The code point at s[i] (or at the one before i, when before), with its length in *n. */
static uint32_t cp_at(const char *s, size_t i, size_t end, size_t *n)
{
    uint32_t cp = 0;
    size_t k = nd_utf8_decode((const unsigned char *)s + i, end - i, &cp);
    *n = k ? k : 1;
    return k ? cp : 0xFFFD;
}

static size_t cp_before(const char *s, size_t start, size_t i, uint32_t *cp)
{
    size_t j = i - 1;
    while (j > start && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
    size_t n;
    *cp = cp_at(s, j, i, &n);
    return j;
}

/* Opening quotes and brackets (before a word's core); closing ones and
 * clause punctuation (after it). */
static int is_opener(uint32_t cp)
{
    return cp == '"' || cp == '\'' || cp == '(' || cp == '[' || cp == 0x201C || cp == 0x2018 || cp == 0xAB;
}
static int is_closer(uint32_t cp)
{
    return cp == '"' || cp == '\'' || cp == ')' || cp == ']' || cp == '.' || cp == ',' || cp == ';' || cp == ':' ||
           cp == '!' || cp == '?' || cp == 0x201D || cp == 0x2019 || cp == 0xBB;
}

static int split_words(const char *s, word *w, int cap)
{
    size_t len = strlen(s), i = 0;
    int n = 0;
    while (i < len && n < cap) {
        while (i < len && is_space(s[i])) i++;
        if (i >= len) break;
        word x;
        x.start = i;
        while (i < len && !is_space(s[i])) i++;
        x.end = i;
        size_t a = x.start, b = x.end, k;
        while (a < b && is_opener(cp_at(s, a, b, &k))) a += k;
        while (b > a) {
            uint32_t cp;
            size_t j = cp_before(s, a, b, &cp);
            if (!is_closer(cp)) break;
            b = j;
        }
        x.core_start = a;
        x.core_end = b;
        w[n++] = x;
    }
    return n;
}

/* Upper-case letters: ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic
 * capitals (enough for the names people type; other scripts have no case). */
static int is_upper(uint32_t c)
{
    if (c >= 'A' && c <= 'Z') return 1;
    if (c >= 0xC0 && c <= 0xDE) return c != 0xD7;
    if (c >= 0x100 && c <= 0x137) return (c & 1) == 0;
    if (c >= 0x139 && c <= 0x148) return (c & 1) == 1;
    if (c >= 0x14A && c <= 0x177) return (c & 1) == 0;
    if (c == 0x178 || c == 0x179 || c == 0x17B || c == 0x17D) return 1;
    if (c >= 0x391 && c <= 0x3A9) return c != 0x3A2;
    return c >= 0x400 && c <= 0x42F;
}

/* Capitalised words that are not names: function words a sentence may start
 * with anywhere ("so To Eritrea"), pronouns, greetings, days and months. */
static const char *const NOT_NAMES[] = {
    "to", "and", "then", "at", "in", "on", "for", "from", "with", "please", "also", "plus", "so", "but", "or",
    "by", "of", "i", "i'm", "i'll", "i'd", "i've", "hey", "hi", "hello", "ok", "okay", "yes", "no", "thanks",
    "thank", "my", "me", "it", "is", "are", "this", "that", "today", "tomorrow", "tonight", "yesterday",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "mon", "tue", "tues", "wed",
    "thu", "thur", "thurs", "fri", "sat", "sun", "january", "february", "march", "april", "may", "june", "july",
    "august", "september", "october", "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
    "sep", "sept", "oct", "nov", "dec"};

/* Is s[0..n) one of NOT_NAMES from index `from` on? */
static int listed_from(const char *s, size_t n, size_t from)
{
    for (size_t i = from; i < sizeof NOT_NAMES / sizeof NOT_NAMES[0]; i++)
        if (strlen(NOT_NAMES[i]) == n && strncasecmp(NOT_NAMES[i], s, n) == 0) return 1;
    return 0;
}

static int not_a_name(const char *s, size_t n) { return listed_from(s, n, 0); }

/* A day or a month (the tail of NOT_NAMES, from "monday" on). */
static int calendar_word(const char *s, size_t n)
{
    size_t from = 0;
    while (strcmp(NOT_NAMES[from], "monday")) from++;
    return listed_from(s, n, from);
}

/* Does word k start a sentence (the request's first word, or after . ! ? : ;)? */
static int starts_sentence(const char *s, const word *w, int k)
{
    if (k == 0) return 1;
    char last = s[w[k - 1].end - 1];
    return last == '.' || last == '!' || last == '?' || last == ':' || last == ';';
}

/* Is word k capitalised as a name is: upper-case first letter, not a
 * function word, day or month, and not capitalised for starting a sentence? */
static int name_word(const char *s, const word *w, int k)
{
    if (w[k].core_end <= w[k].core_start || starts_sentence(s, w, k)) return 0;
    size_t n;
    uint32_t cp = cp_at(s, w[k].core_start, w[k].core_end, &n);
    return is_upper(cp) && !not_a_name(s + w[k].core_start, w[k].core_end - w[k].core_start);
}

/* Is the value's own edge word k capitalised as a name's is?  As name_word,
 * but a word that starts a sentence counts too: the model chose it as part
 * of the value, so its capital is the name's ("Receipt: Café Lumière" ->
 * "Café", "lodging expense: Hotel Sakura" -> "Hotel"). */
static int edge_name_word(const char *s, const word *w, int k, int dir)
{
    if (w[k].core_end <= w[k].core_start) return 0;
    size_t n, len = w[k].core_end - w[k].core_start;
    uint32_t cp = cp_at(s, w[k].core_start, w[k].core_end, &n);
    if (!is_upper(cp)) return 0;
    /* a day or month the model chose as the value may begin a title ("Sunday
     * Cleaning"), though not end a name ("Maria Monday") */
    if (dir > 0 && calendar_word(s + w[k].core_start, len)) return 1;
    return !not_a_name(s + w[k].core_start, len);
}

/* Can words k and k+1 be one name: nothing but spaces between their cores? */
static int joined(const word *w, int k) { return w[k].core_end == w[k].end && w[k + 1].core_start == w[k + 1].start; }

/* Lower-case words that sit inside names between capitalised ones: "Gare de
 * Lyon", "Kind of Blue", "Ludwig van Beethoven". */
static const char *const PARTICLES[] = {"de", "du", "des", "del", "della", "di", "da", "do", "dos", "das", "la",
                                        "le", "van", "von", "der", "den", "ter", "y", "of", "bin", "al", "el"};

static int particle(const char *s, const word *w, int k)
{
    size_t n = w[k].core_end - w[k].core_start;
    for (size_t i = 0; i < sizeof PARTICLES / sizeof PARTICLES[0]; i++)
        if (strlen(PARTICLES[i]) == n && !strncmp(PARTICLES[i], s + w[k].core_start, n)) return 1;
    return 0;
}

/* Is word k a house number (digits only), which a name may follow ("14 Harrow Lane")? */
static int house_number(const char *s, const word *w, int k)
{
    if (w[k].core_end <= w[k].core_start || w[k].core_end - w[k].core_start > 5) return 0;
    for (size_t i = w[k].core_start; i < w[k].core_end; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

/* Is word k a group of a number written in groups, as phone numbers are
 * ("+234 803 555 0199", "06 12 34 56 78"): digits, 2 to 6 of them, with
 * an optional leading '+'? */
static int digit_group(const char *s, const word *w, int k)
{
    size_t a = w[k].core_start, b = w[k].core_end;
    if (a < b && s[a] == '+') a++;
    if (b - a < 2 || b - a > 6) return 0;
    for (size_t i = a; i < b; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

/* How many words the name at edge b may take to its right: 1 (a name word),
 * 2 (a particle and a name word), 0 (none).  (dir -1: to the left of edge b.) */
static int name_step(const char *s, const word *w, int nw, int b, int dir)
{
    int n1 = b + dir, n2 = b + 2 * dir;
    if (n1 < 0 || n1 >= nw || !joined(w, dir > 0 ? b : n1)) return 0;
    if (digit_group(s, w, b) && digit_group(s, w, n1)) return 1; /* the rest of a number in groups */
    if (!edge_name_word(s, w, b, dir) && !(dir > 0 && house_number(s, w, b))) return 0;
    if (name_word(s, w, n1)) return 1;
    if (n2 >= 0 && n2 < nw && particle(s, w, n1) && joined(w, dir > 0 ? n1 : n2) && name_word(s, w, n2)) return 2;
    return 0;
}

char *nd_name_span_widen(const char *request, const char *value, size_t len)
{
    if (!request || !value || len == 0) return NULL;
    word w[MAX_WORDS];
    int nw = split_words(request, w, MAX_WORDS);
    size_t rlen = strlen(request);
    for (size_t at = 0; at + len <= rlen; at++) {
        if (memcmp(request + at, value, len) != 0) continue;
        int first = -1, last = -1;
        for (int k = 0; k < nw; k++) {
            if (w[k].core_start == at) first = k;
            if (w[k].core_end == at + len) last = k;
        }
        if (first < 0 || last < first) continue; /* not at word edges here */
        int a = first, b = last, step;
        for (int added = 0; added < ND_NAME_SPAN_MAX_WORDS && (step = name_step(request, w, nw, b, +1)) > 0;
             added += step)
            b += step;
        for (int added = 0; added < ND_NAME_SPAN_MAX_WORDS && (step = name_step(request, w, nw, a, -1)) > 0;
             added += step)
            a -= step;
        if (a == first && b == last) return NULL;
        return nd_copy_text_span(request, w[a].core_start, w[b].core_end);
    }
    return NULL;
}

/* Widen one string value in place: 1 widened, 0 not, -1 out of memory. */
static int widen_value(nd_json *v, const char *request)
{
    if (v->type != ND_JSON_STRING || memchr(v->str, 0, v->len)) return 0;
    char *wide = nd_name_span_widen(request, v->str, v->len);
    if (!wide) return 0;
    free(v->str);
    v->str = wide;
    v->len = strlen(wide);
    return 1;
}

int nd_complete_names(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths)
{
    int widened = 0;
    for (size_t c = 0; calls && calls->type == ND_JSON_ARRAY && request && tools && c < calls->count; c++) {
        const nd_json *name = nd_json_get(&calls->items[c], "name");
        nd_json *args = (nd_json *)nd_json_get(&calls->items[c], "arguments");
        if (!name || name->type != ND_JSON_STRING || !args || args->type != ND_JSON_OBJECT) continue;
        const nd_json *params = nd_tool_parameters(tools, name->str);
        const nd_json *props = params ? nd_json_get(params, "properties") : NULL;
        for (size_t k = 0; props && k < args->count; k++) {
            const nd_json *schema = nd_json_get(props, args->keys[k]);
            nd_json *v = &args->items[k];
            int got = 0;
            if (nd_free_string_schema(schema)) {
                got = widen_value(v, request);
            } else if (v->type == ND_JSON_ARRAY && schema && nd_free_string_schema(nd_json_get(schema, "items"))) {
                for (size_t i = 0; i < v->count; i++) got |= widen_value(&v->items[i], request);
            }
            if (got) {
                widened++;
                nd_repair_note(paths, n_paths, name->str, args->keys[k]);
            }
        }
    }
    return paths->oom ? -1 : widened;
}
