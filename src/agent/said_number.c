/* said_number.c - the one number a request says, written over a number the request does not say (said_number.h). */
#include "agent/said_number.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/repair.h"
#include "agent/spoken_words.h"

#define MAX_WORDS 256

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* Units after which a number may stand for another one (a unit step). */
static const char *const CONVERTING[] = {"hour", "hours", "hr", "hrs", "h", "litre", "litres", "liter", "liters", "l",
                                         "kilo", "kilos", "kilogram", "kilograms", "kg", "kilometre", "kilometres",
                                         "kilometer", "kilometers", "km", "quarter", "quarters", "half", "thousand",
                                         "k", "second", "seconds", "sec", "secs"};

static int word_in(const char *w, size_t n, const char *const *list, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (strlen(list[i]) == n && !memcmp(list[i], w, n)) return 1;
    return 0;
}

/* The word right after position i (spaces skipped), lowered into buf. */
static size_t next_word(const char *s, size_t i, char *buf, size_t cap)
{
    while (s[i] == ' ') i++;
    size_t n = 0;
    while (is_alpha(s[i]) && n + 1 < cap) {
        char c = s[i++];
        buf[n++] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
    }
    buf[n] = 0;
    return n;
}

static int converts_after(const char *s, size_t i)
{
    char w[16];
    size_t n = next_word(s, i, w, sizeof w);
    return n && word_in(w, n, CONVERTING, sizeof CONVERTING / sizeof CONVERTING[0]);
}

/* Below 100 at words[i]: "seven", "twenty five"; -1 if none. */
static int below_hundred(char (*w)[16], int n, int i, int *next)
{
    if (i >= n) return -1;
    int v = nd_small_number_word(w[i]);
    if (v >= 0) {
        *next = i + 1;
        return v;
    }
    v = nd_tens_word(w[i]);
    if (v < 0) return -1;
    *next = i + 1;
    int u = i + 1 < n ? nd_small_number_word(w[i + 1]) : -1;
    if (u >= 1 && u <= 9) {
        *next = i + 2;
        v += u;
    }
    return v;
}

int nd_number_in_words(char (*w)[16], int n, int i, int *next)
{
    int v;
    if (i + 1 < n && !strcmp(w[i], "a") && !strcmp(w[i + 1], "hundred")) {
        v = 1;
        *next = i + 1;
    } else if ((v = below_hundred(w, n, i, next)) < 0) {
        return -1;
    }
    if (*next < n && !strcmp(w[*next], "hundred")) {
        v *= 100;
        int j = *next + 1;
        if (j < n && !strcmp(w[j], "and")) j++;
        int after = j, rest = below_hundred(w, n, j, &after);
        if (rest >= 0) {
            v += rest;
            j = after;
        }
        *next = j;
    }
    return v;
}

int nd_word_listed(const char *w, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(w, *list)) return 1;
    return 0;
}

int nd_lower_words(const char *text, char (*w)[16], size_t *ends, int cap)
{
    int n = 0;
    for (size_t i = 0; text[i] && n < cap;) {
        if (!is_alpha(text[i])) {
            i++;
            continue;
        }
        size_t k = 0;
        while (is_alpha(text[i]) || (text[i] == '\'' && is_alpha(text[i + 1]))) {
            char c = text[i++];
            if (k + 1 < 16) w[n][k++] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
        }
        w[n][k] = 0;
        if (ends) ends[n] = i;
        n++;
    }
    return n;
}

int nd_numbers_said(const char *request, double *out, int cap)
{
    if (!request) return 0;
    size_t len = strlen(request);
    int k = 0;
    /* digits */
    for (size_t i = 0; i < len && k < cap;) {
        if (!is_digit(request[i]) || (i && (is_digit(request[i - 1]) || request[i - 1] == '.' || request[i - 1] == ','))) {
            i++;
            continue;
        }
        size_t j = i;
        double v = 0;
        while (j < len && (is_digit(request[j]) || (request[j] == ',' && j + 3 < len && is_digit(request[j + 1]) &&
                                                    is_digit(request[j + 2]) && is_digit(request[j + 3]) &&
                                                    (j + 4 >= len || !is_digit(request[j + 4]))))) {
            if (request[j] != ',') v = v * 10 + (request[j] - '0');
            j++;
        }
        if (j + 1 < len && request[j] == '.' && is_digit(request[j + 1])) {
            double scale = 0.1;
            for (j++; j < len && is_digit(request[j]); j++, scale /= 10) v += (request[j] - '0') * scale;
        }
        int negative = i > 0 && request[i - 1] == '-' && (i < 2 || !is_digit(request[i - 2]));
        int in_time_or_date = (j < len && (request[j] == ':' || (request[j] == '-' && j + 1 < len && is_digit(request[j + 1])))) ||
                              (i > 0 && (request[i - 1] == ':' || (request[i - 1] == '-' && i > 1 && is_digit(request[i - 2]))));
        int ordinal = j + 1 < len && ((request[j] == 's' && request[j + 1] == 't') || (request[j] == 'n' && request[j + 1] == 'd') ||
                                      (request[j] == 'r' && request[j + 1] == 'd') || (request[j] == 't' && request[j + 1] == 'h'));
        if (!negative && !in_time_or_date && !ordinal && !converts_after(request, j)) out[k++] = v;
        i = j;
    }
    /* words */
    nd_word_number *said = malloc(sizeof *said * (size_t)cap);
    int n = said ? nd_word_numbers(request, said, cap - k) : 0;
    for (int i = 0; i < n; i++)
        /* "one" as in "the one", "minus five", "five hours": not a value said */
        if (!said[i].after_minus && !(said[i].value == 1 && said[i].one_word) && !converts_after(request, said[i].end))
            out[k++] = said[i].value;
    free(said);
    return k;
}

int nd_word_numbers(const char *request, nd_word_number *out, int cap)
{
    char (*w)[16] = malloc(sizeof(char[16]) * MAX_WORDS);
    size_t *ends = malloc(sizeof(size_t) * MAX_WORDS);
    int n = w && ends && request ? nd_lower_words(request, w, ends, MAX_WORDS) : 0, k = 0;
    for (int i = 0; i < n && k < cap;) {
        int next = i, v = nd_number_in_words(w, n, i, &next);
        if (v < 0) {
            i++;
            continue;
        }
        /* "twenty eight point five" = 28.5: digits after the point, one word each */
        double value = v;
        if (next + 1 < n && !strcmp(w[next], "point") && nd_small_number_word(w[next + 1]) >= 0 && nd_small_number_word(w[next + 1]) < 10) {
            double digits = 0, scale = 1;
            int j = next + 1;
            for (; j < n && nd_small_number_word(w[j]) >= 0 && nd_small_number_word(w[j]) < 10 && scale < 1e6; j++, scale *= 10)
                digits = digits * 10 + nd_small_number_word(w[j]);
            value = (v * scale + digits) / scale;
            next = j;
        }
        out[k].value = value;
        out[k].end = ends[next - 1];
        out[k].one_word = next == i + 1;
        out[k].after_minus = i > 0 && !strcmp(w[i - 1], "minus");
        k++;
        i = next;
    }
    free(w);
    free(ends);
    return k;
}

/* ------------------------------------------------------------------ the call */

/* Is v written inside one of the call's string values (as a number of its own)? */
static int inside_strings(const nd_json *args, double v)
{
    for (size_t k = 0; k < args->count; k++) {
        const nd_json *x = &args->items[k];
        size_t m = x->type == ND_JSON_ARRAY ? x->count : 1;
        for (size_t i = 0; i < m; i++) {
            const nd_json *s = x->type == ND_JSON_ARRAY ? &x->items[i] : x;
            if (s->type != ND_JSON_STRING || memchr(s->str, 0, s->len)) continue;
            double nums[64];
            int n = nd_numbers_said(s->str, nums, 64);
            for (int j = 0; j < n; j++)
                if (nums[j] == v) return 1;
        }
    }
    return 0;
}

int nd_fix_said_number(nd_json *calls, const nd_json *tools, const char *request, const char *ungrounded,
                       nd_buf *paths, int *n_paths)
{
    nd_one_call c;
    if (!request || !ungrounded || !nd_repair_one_call(calls, tools, &c)) return 0;
    nd_json *args = c.args;
    const char *tool = c.tool;
    nd_json *slot = NULL;
    size_t key = 0;
    for (size_t k = 0; k < args->count; k++) {
        if (args->items[k].type != ND_JSON_NUMBER) continue;
        if (!nd_path_listed(ungrounded, tool, args->keys[k])) continue;
        if (slot) return 0; /* two numbers not said */
        slot = &args->items[k];
        key = k;
    }
    if (!slot) return 0;
    double said[64], pick = 0;
    int n = nd_numbers_said(request, said, 64), found = 0;
    for (int i = 0; i < n; i++) {
        int used = 0;
        for (size_t k = 0; k < args->count && !used; k++)
            used = &args->items[k] != slot && args->items[k].type == ND_JSON_NUMBER && args->items[k].num == said[i];
        if (used || inside_strings(args, said[i])) continue;
        if (found && said[i] == pick) continue; /* said twice */
        if (found) return 0;                      /* two candidates */
        pick = said[i];
        found = 1;
    }
    if (!found) return 0;
    if (!nd_schema_takes_number(nd_json_get(c.props, args->keys[key]), pick, NULL)) return 0;
    if (nd_json_set_number_value(slot, pick)) return -1;
    nd_repair_note(paths, n_paths, tool, args->keys[key]);
    return paths->oom ? -1 : 1;
}

/* ------------------------------------------------------------------ a decimal cut to its whole part */

#define MAX_DECIMALS 16

/* Is the decimal at request[i, k) a clock time: "7.30 pm", "7.30 a.m.", "at 7.30"? */
static int decimal_is_time(const char *request, size_t i, size_t k)
{
    char w[16];
    size_t n = next_word(request, k, w, sizeof w);
    if ((n == 2 && (!strcmp(w, "am") || !strcmp(w, "pm"))) ||
        (n == 1 && (w[0] == 'a' || w[0] == 'p') && request[k + strspn(request + k, " ") + 1] == '.'))
        return 1;
    size_t e = i;
    while (e > 0 && request[e - 1] == ' ') e--;
    return e >= 2 && (request[e - 2] | 32) == 'a' && (request[e - 1] | 32) == 't' && (e == 2 || !is_alpha(request[e - 3]));
}

/* The decimals the request says in digits ("98.4", "£18.20"; not times,
 * versions or dates such as "1.2.3"); how many. */
static int decimals_said(const char *request, double *out, int cap)
{
    int n = 0;
    for (size_t i = 0; request[i] && n < cap; i++) {
        if (!is_digit(request[i]) || (i > 0 && (is_digit(request[i - 1]) || request[i - 1] == '.' ||
                                                request[i - 1] == ',' || request[i - 1] == ':')))
            continue;
        size_t k = i;
        while (is_digit(request[k])) k++;
        if (request[k] != '.' || !is_digit(request[k + 1])) {
            i = k - 1;
            continue;
        }
        for (k++; is_digit(request[k]);) k++;
        char digits[40];
        /* "1.2.3", "7.30:15", "1.234,5" are no decimals; a full stop or comma after one ends a sentence */
        int plain = !((request[k] == '.' || request[k] == ',' || request[k] == ':') && is_digit(request[k + 1])) &&
                    k - i < sizeof digits;
        if (plain && !decimal_is_time(request, i, k)) {
            memcpy(digits, request + i, k - i);
            digits[k - i] = 0;
            out[n++] = strtod(digits, NULL);
        }
        i = k - 1;
    }
    return n;
}

int nd_fix_said_decimal(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths)
{
    nd_one_call c;
    if (!request || !nd_repair_one_call(calls, tools, &c)) return 0;
    double said[MAX_DECIMALS];
    int n = decimals_said(request, said, MAX_DECIMALS), changed = 0;
    for (size_t k = 0; k < c.args->count && n > 0; k++) {
        nd_json *v = &c.args->items[k];
        if (v->type != ND_JSON_NUMBER || v->num != (double)(long long)v->num) continue;
        double pick = 0;
        int found = 0;
        for (int i = 0; i < n; i++) {
            if ((double)(long long)said[i] != v->num || said[i] == v->num || (found && said[i] == pick)) continue;
            if (found) {
                found = 0; /* two decimals with that whole part: no choice */
                break;
            }
            pick = said[i];
            found = 1;
        }
        if (!found || !nd_schema_takes_number(nd_json_get(c.props, c.args->keys[k]), pick, NULL)) continue;
        if (nd_json_set_number_value(v, pick)) return -1;
        nd_repair_note(paths, n_paths, c.tool, c.args->keys[k]);
        changed++;
    }
    return paths->oom ? -1 : changed;
}

/* One token of a request for nd_numbers_near_key: a lowered word, or a number
 * in digits with its sign. */
typedef struct {
    char word[16]; /* "" for a number */
    double num;
} near_token;

#define NEAR_TOKENS 256
#define NEAR_SPAN 3 /* words between an argument's name and its number, at most */

static int near_tokens(const char *s, near_token *t, int cap)
{
    int n = 0;
    for (size_t i = 0; s[i] && n < cap;) {
        if (is_digit(s[i])) {
            char *end = NULL;
            double v = strtod(s + i, &end);
            size_t j = (size_t)(end - s);
            /* "-10" at the start of a word is negative; "7-10" is a range */
            if (i > 0 && s[i - 1] == '-' && (i == 1 || s[i - 2] == ' ')) v = -v;
            /* "7:30", "2026-07-01", "14th", "1,867": not a plain number, and not read */
            if (s[j] == ':' || (s[j] == '-' && is_digit(s[j + 1])) || is_alpha(s[j]) || (s[j] == ',' && is_digit(s[j + 1]))) {
                while (s[j] && (is_digit(s[j]) || is_alpha(s[j]) || s[j] == ':' || s[j] == '-' || s[j] == ',' || s[j] == '.')) j++;
                memcpy(t[n].word, "#", 2); /* a token all the same: it keeps the distances */
                t[n++].num = 0;
                i = j;
                continue;
            }
            t[n].word[0] = '\0';
            t[n++].num = v;
            i = j;
        } else if (is_alpha(s[i])) {
            size_t k = 0;
            while (is_alpha(s[i])) {
                if (k + 1 < sizeof t[n].word) t[n].word[k++] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
                i++;
            }
            t[n].word[k] = '\0';
            t[n++].num = 0;
        } else {
            i++;
        }
    }
    return n;
}

int nd_numbers_near_key(const char *request, const char *key, double *out, int cap)
{
    if (!request || !key) return 0;
    near_token *t = malloc(sizeof *t * NEAR_TOKENS);
    if (!t) return -1;
    int n = near_tokens(request, t, NEAR_TOKENS), found = 0;
    /* the key's words of four letters or more ("brightness", "fan_speed" -> "speed") */
    for (const char *k = key; *k && found < cap;) {
        while (*k && !is_alpha(*k)) k++;
        char kw[16];
        size_t m = 0;
        while (is_alpha(*k)) {
            if (m + 1 < sizeof kw) kw[m++] = (char)(*k >= 'A' && *k <= 'Z' ? *k + 32 : *k);
            k++;
        }
        kw[m] = '\0';
        if (m < 4) continue;
        for (int i = 0; i < n && found < cap; i++) {
            if (strcmp(t[i].word, kw)) continue;
            for (int j = i - NEAR_SPAN; j <= i + NEAR_SPAN && found < cap; j++)
                if (j >= 0 && j < n && j != i && !t[j].word[0]) out[found++] = t[j].num;
        }
    }
    free(t);
    return found;
}
