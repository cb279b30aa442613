/* clock_time.c - the clock time a request says, written into the call (clock_time.h). */
#include "agent/clock_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/repair.h"
#include "agent/spoken_words.h"

/* ------------------------------------------------------------------ tokens */

enum { T_NUM, T_CLOCK, T_WORD };

typedef struct {
    int kind;
    int value;        /* T_NUM: the number; T_CLOCK: hours */
    int minutes;      /* T_CLOCK */
    int dot;          /* T_CLOCK written H.MM (could be an amount: 18.20) */
    int after_money;  /* T_NUM / T_CLOCK right after $ £ € ¥ */
    char word[16];    /* T_WORD, lower case (longer words cut) */
} token;

#define MAX_TOKENS 256

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c; }

/* Is s[i] preceded by a currency sign (spaces between allowed)? */
static int money_before(const char *s, size_t i)
{
    while (i > 0 && s[i - 1] == ' ') i--;
    if (i >= 1 && s[i - 1] == '$') return 1;
    /* £ C2 A3, € E2 82 AC, ¥ C2 A5 */
    if (i >= 2 && (unsigned char)s[i - 2] == 0xC2 && ((unsigned char)s[i - 1] == 0xA3 || (unsigned char)s[i - 1] == 0xA5))
        return 1;
    return i >= 3 && (unsigned char)s[i - 3] == 0xE2 && (unsigned char)s[i - 2] == 0x82 && (unsigned char)s[i - 1] == 0xAC;
}

static int tokenize(const char *s, token *t, int cap)
{
    int n = 0;
    size_t len = strlen(s);
    for (size_t i = 0; i < len && n < cap;) {
        token x;
        memset(&x, 0, sizeof x);
        if (is_digit(s[i])) {
            size_t j = i;
            long v = 0;
            while (j < len && is_digit(s[j]) && v < 100000) v = v * 10 + (s[j++] - '0');
            while (j < len && is_digit(s[j])) j++;
            x.after_money = money_before(s, i);
            /* H:MM or H.MM, two minute digits and no more digits or ".5" after */
            if (j + 2 < len && (s[j] == ':' || s[j] == '.') && is_digit(s[j + 1]) && is_digit(s[j + 2]) &&
                (j + 3 >= len || (!is_digit(s[j + 3]) && !(s[j + 3] == '.' && j + 4 < len && is_digit(s[j + 4]))))) {
                x.kind = T_CLOCK;
                x.value = (int)v;
                x.minutes = (s[j + 1] - '0') * 10 + (s[j + 2] - '0');
                x.dot = s[j] == '.';
                j += 3;
            } else {
                x.kind = T_NUM;
                x.value = (int)v;
            }
            t[n++] = x;
            i = j;
            continue;
        }
        if (is_alpha(s[i])) {
            /* "a.m." and "p.m." */
            if ((lower(s[i]) == 'a' || lower(s[i]) == 'p') && i + 2 < len && s[i + 1] == '.' && lower(s[i + 2]) == 'm' &&
                (i + 3 >= len || !is_alpha(s[i + 3]))) {
                x.kind = T_WORD;
                x.word[0] = lower(s[i]);
                x.word[1] = 'm';
                t[n++] = x;
                i += 3;
                if (i < len && s[i] == '.') i++;
                continue;
            }
            size_t j = i, k = 0;
            while (j < len && (is_alpha(s[j]) || (s[j] == '\'' && j + 1 < len && is_alpha(s[j + 1])))) {
                if (k + 1 < sizeof x.word) x.word[k++] = lower(s[j]);
                j++;
            }
            x.kind = T_WORD;
            t[n++] = x;
            i = j;
            continue;
        }
        i++; /* spaces, punctuation, hyphens ("twenty-five"), other scripts */
    }
    return n;
}

static int is_word(const token *t, int i, int n, const char *w)
{
    return i >= 0 && i < n && t[i].kind == T_WORD && !strcmp(t[i].word, w);
}

/* ------------------------------------------------------------------ numbers in words */

/* A number written in words at t[i] ("seven", "forty five"): its value and
 * the token after it, or -1.  Clock times stop at fifty-nine. */
static int word_number(const token *t, int i, int n, int *next)
{
    if (i >= n || t[i].kind != T_WORD) return -1;
    int v = nd_small_number_word(t[i].word);
    if (v >= 0) {
        *next = i + 1;
        return v;
    }
    v = nd_tens_word(t[i].word);
    if (v < 0 || v > 50) return -1;
    *next = i + 1;
    int u = i + 1 < n && t[i + 1].kind == T_WORD ? nd_small_number_word(t[i + 1].word) : -1;
    if (u >= 1 && u <= 9) {
        *next = i + 2;
        return v + u;
    }
    return v;
}

/* A number at t[i] in digits (not money) or words. */
static int any_number(const token *t, int i, int n, int *next)
{
    if (i < n && t[i].kind == T_NUM && !t[i].after_money) {
        *next = i + 1;
        return t[i].value;
    }
    return word_number(t, i, n, next);
}

/* ------------------------------------------------------------------ reading times */

enum { HALF_NONE = 0, HALF_AM = 1, HALF_PM = 2, HALF_ABSOLUTE = 3 };

typedef struct {
    int h, m, half; /* half: am/pm said right after, the time absolute (24-hour, noon), or none */
} said_time;

static int am_pm_at(const token *t, int i, int n) { return is_word(t, i, n, "am") ? HALF_AM : is_word(t, i, n, "pm") ? HALF_PM : 0; }

/* Read one time expression starting at t[i]; 1 and *out, *next, or 0. */
static int read_time(const token *t, int i, int n, said_time *out, int *next)
{
    int j, k;
    memset(out, 0, sizeof *out);
    if (is_word(t, i, n, "noon") || is_word(t, i, n, "midday") || is_word(t, i, n, "midnight")) {
        out->h = is_word(t, i, n, "midnight") ? 0 : 12;
        out->half = HALF_ABSOLUTE;
        *next = i + 1;
        return 1;
    }
    if (i < n && t[i].kind == T_CLOCK && !t[i].after_money) {
        int h = t[i].value, m = t[i].minutes, half = am_pm_at(t, i + 1, n);
        if (h > 23 || m > 59) return 0;
        /* H.MM is a time only with am/pm after it or "at" before it (not 18.20 euros) */
        if (t[i].dot && !half && !is_word(t, i - 1, n, "at")) return 0;
        if (half && (h == 0 || h > 12)) return 0; /* "13:15 pm" */
        out->h = h;
        out->m = m;
        out->half = half ? half : (h == 0 || h > 12) ? HALF_ABSOLUTE : HALF_NONE;
        *next = i + 1 + (half != 0);
        return 1;
    }
    /* half past seven, quarter to nine */
    if ((is_word(t, i, n, "half") || is_word(t, i, n, "quarter")) &&
        (is_word(t, i + 1, n, "past") || is_word(t, i + 1, n, "to"))) {
        int h = any_number(t, i + 2, n, &j);
        if (h < 1 || h > 12) return 0;
        int past = is_word(t, i + 1, n, "past"), m = t[i].word[0] == 'h' ? 30 : 15;
        out->h = past ? h : h - 1;
        out->m = past ? m : 60 - m;
        if (out->h == 0) out->h = 12;
        out->half = am_pm_at(t, j, n);
        *next = j + (out->half != 0);
        return 1;
    }
    /* ten past four, 20 to 6, twenty minutes past five */
    int mins = any_number(t, i, n, &j);
    if (mins >= 1 && mins <= 30) {
        if (is_word(t, j, n, "minutes") || is_word(t, j, n, "mins")) j++;
        if (is_word(t, j, n, "past") || is_word(t, j, n, "to")) {
            int h = any_number(t, j + 1, n, &k);
            if (h >= 1 && h <= 12) {
                int past = is_word(t, j, n, "past");
                out->h = past ? h : h - 1;
                out->m = past ? mins : 60 - mins;
                if (out->h == 0) out->h = 12;
                out->half = am_pm_at(t, k, n);
                *next = k + (out->half != 0);
                return 1;
            }
        }
    }
    /* an hour: "7 pm", "seven o'clock", "seven thirty", "seven oh five", "at 7" */
    int h = any_number(t, i, n, &j);
    if (h < 1 || h > 12) return 0;
    out->h = h;
    if ((out->half = am_pm_at(t, j, n)) != 0) {
        *next = j + 1;
        return 1;
    }
    if (is_word(t, j, n, "o'clock")) {
        out->half = am_pm_at(t, j + 1, n);
        *next = j + 1 + (out->half != 0);
        return 1;
    }
    if (t[i].kind == T_WORD) { /* minutes in words after an hour in words */
        int m = -1;
        if (is_word(t, j, n, "oh")) {
            m = word_number(t, j + 1, n, &k);
            if (m < 1 || m > 9) m = -1;
        } else {
            m = word_number(t, j, n, &k);
            if (m < 10 || m > 59) m = -1;
        }
        if (m >= 0) {
            out->m = m;
            out->half = am_pm_at(t, k, n);
            *next = k + (out->half != 0);
            return 1;
        }
    }
    /* "at 7" (nothing after it that makes it a quantity) */
    static const char *const UNITS[] = {"minute", "minutes", "min", "mins", "hour", "hours", "percent", "degrees",
                                        "degree", "days", "day", "times", "am", "pm"};
    if (is_word(t, i - 1, n, "at")) {
        for (size_t u = 0; u < sizeof UNITS / sizeof UNITS[0]; u++)
            if (is_word(t, j, n, UNITS[u])) return 0;
        *next = j;
        return 1;
    }
    return 0;
}

/* The half of the day the rest of the request gives: HALF_AM, HALF_PM, the
 * night (pm for 6..11, am for 12..5), none (0) or conflicting (-1). */
enum { CUE_NIGHT = 4 };
static int cue_of(const token *t, int n)
{
    int cue = 0;
    for (int i = 0; i < n; i++) {
        int c = is_word(t, i, n, "morning") ? HALF_AM
              : is_word(t, i, n, "afternoon") || is_word(t, i, n, "evening") || is_word(t, i, n, "tonight") ? HALF_PM
              : is_word(t, i, n, "night") ? CUE_NIGHT : 0;
        if (c && cue && c != cue) return -1;
        if (c) cue = c;
    }
    return cue;
}

/* The one time the request says, as minutes after midnight; a 12-hour time
 * with no half of the day is read as said ("quarter past six" -> 06:15) when
 * as_said, else -1. */
static int time_said(const char *request, int as_said)
{
    if (!request) return -1;
    token t[MAX_TOKENS];
    int n = tokenize(request, t, MAX_TOKENS), found = 0;
    said_time one = {0, 0, 0};
    for (int i = 0; i < n;) {
        said_time x;
        int next;
        if (read_time(t, i, n, &x, &next)) {
            if (found++) return -1; /* two times: which one? */
            one = x;
            i = next;
        } else {
            i++;
        }
    }
    if (found != 1) return -1;
    int h = one.h, half = one.half;
    if (half == HALF_NONE) {
        int cue = cue_of(t, n);
        if (cue <= 0 && !(as_said && cue == 0)) return -1;
        half = cue == CUE_NIGHT ? (h >= 6 && h <= 11 ? HALF_PM : HALF_AM) : cue;
    }
    if (half == HALF_AM && h == 12) h = 0;
    if (half == HALF_PM && h < 12) h += 12;
    return h * 60 + one.m;
}

int nd_clock_time_said(const char *request)
{
    return time_said(request, 0);
}

/* ------------------------------------------------------------------ the call */

static int hh_mm(const nd_json *v)
{
    return v->type == ND_JSON_STRING && v->len == 5 && is_digit(v->str[0]) && is_digit(v->str[1]) && v->str[2] == ':' &&
           is_digit(v->str[3]) && is_digit(v->str[4]);
}

/* The index of the call's one HH:MM value in *key: 1, or 0 when it has none or
 * two (which one would the request's time be?). */
static int one_time_slot(const nd_one_call *c, size_t *key)
{
    int slots = 0;
    for (size_t k = 0; k < c->args->count; k++)
        if (hh_mm(&c->args->items[k])) {
            slots++;
            *key = k;
        }
    return slots == 1;
}

int nd_fix_clock_time(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths)
{
    nd_one_call c;
    size_t key = 0;
    if (!nd_repair_one_call(calls, tools, &c) || !one_time_slot(&c, &key)) return 0;
    nd_json *slot = &c.args->items[key];
    int said = nd_clock_time_said(request);
    if (said < 0) {
        /* no half of the day said: the time as said ("quarter past six" -> 06:15, as
         * "6:15" is), only in place of a time that is neither half's ("00:00") */
        said = time_said(request, 1);
        int other = said < 0 ? -1 : said < 720 ? said + 720 : said - 720;
        int have = (slot->str[0] - '0') * 600 + (slot->str[1] - '0') * 60 + (slot->str[3] - '0') * 10 + (slot->str[4] - '0');
        if (said < 0 || have == said || have == other) return 0;
    }
    char text[6] = {(char)('0' + said / 600), (char)('0' + said / 60 % 10), ':', (char)('0' + said % 60 / 10),
                    (char)('0' + said % 10), 0}; /* HH:MM; said < 1440 */
    if (!memcmp(slot->str, text, 5)) return 0;
    const nd_json *schema = nd_json_get(c.props, c.args->keys[key]);
    if (!schema || nd_json_get(schema, "enum") || nd_json_get(schema, "const") || !nd_pattern_accepts(schema, text))
        return 0;
    memcpy(slot->str, text, 5);
    nd_repair_note(paths, n_paths, c.tool, c.args->keys[key]);
    return paths->oom ? -1 : 1;
}

int nd_clock_time_impossible(const char *request)
{
    if (!request) return 0;
    token t[MAX_TOKENS];
    int n = tokenize(request, t, MAX_TOKENS);
    for (int i = 0; i < n; i++) {
        if (t[i].kind == T_CLOCK && !t[i].after_money && (t[i].value > 23 || t[i].minutes > 59)) {
            /* H.MM only as a time: "at" before it or am/pm after it (not 18.75 euros) */
            if (!t[i].dot || is_word(t, i - 1, n, "at") || am_pm_at(t, i + 1, n)) return 1;
        }
        /* "31 o'clock": an hour no clock has */
        if (t[i].kind == T_NUM && !t[i].after_money && t[i].value > 24 && is_word(t, i + 1, n, "o'clock")) return 1;
    }
    return 0;
}

int nd_clock_time_outside(nd_json *calls, const nd_json *tools, const char *request, char *outside,
                          size_t outside_size)
{
    nd_one_call c;
    if (outside_size) outside[0] = '\0';
    size_t key = 0;
    if (!request || !nd_repair_one_call(calls, tools, &c) || !one_time_slot(&c, &key)) return 0;
    const nd_json *schema = nd_json_get(c.props, c.args->keys[key]);
    if (!schema || !nd_json_get(schema, "pattern") || !nd_clock_time_impossible(request)) return 0;
    snprintf(outside, outside_size, "%s.%s", c.tool, c.args->keys[key]);
    return 1;
}
