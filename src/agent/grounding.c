/* grounding.c - argument grounding and negation checks (see grounding.h). */
#include "agent/grounding.h"

#include <ctype.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/said_number.h"
#include "agent/said_quantity.h"
#include "agent/spoken_words.h"
#include "grammar/schema.h"
#include "grammar/regex.h"
#include "needle.h"

/* ------------------------------------------------------------------ the text as words and numbers */

typedef struct { size_t at, len; } span;

typedef struct heard {
    char *low;      /* lowercased (ASCII), curly apostrophes folded to ' */
    size_t len;
    span *words;    /* runs of [a-z0-9] and non-ASCII bytes */
    int n_words;
    double *nums;   /* every number said, in digits or words */
    int n_nums, cap_nums;
    int oom;
} heard;

static void add_num(heard *h, double v)
{
    if (h->n_nums == h->cap_nums) {
        int cap = h->cap_nums ? 2 * h->cap_nums : 32;
        double *p = realloc(h->nums, sizeof *p * (size_t)cap);
        if (!p) { h->oom = 1; return; }
        h->nums = p;
        h->cap_nums = cap;
    }
    h->nums[h->n_nums++] = v;
}

static int word_byte(unsigned char c) { return isalnum(c) || c >= 0x80; }

/* Lowercase copy with U+2019 (e2 80 99) folded to an ASCII apostrophe. */
static char *fold(const char *s, size_t n, size_t *out_len)
{
    char *o = malloc(n + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0xe2 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 && (unsigned char)s[i + 2] == 0x99) {
            o[k++] = '\'';
            i += 2;
        } else o[k++] = (char)tolower(c);
    }
    o[k] = '\0';
    *out_len = k;
    return o;
}

static int word_is(const heard *h, int i, const char *w)
{
    if (i < 0 || i >= h->n_words) return 0;
    size_t n = strlen(w);
    return h->words[i].len == n && !memcmp(h->low + h->words[i].at, w, n);
}

static const char *const ORDINALS[] = {"", "first", "second", "third", "fourth", "fifth", "sixth", "seventh",
                                       "eighth", "ninth", "tenth", "eleventh", "twelfth", "thirteenth", "fourteenth",
                                       "fifteenth", "sixteenth", "seventeenth", "eighteenth", "nineteenth"};

/* The value of a number word, or -1. */
static double number_word(const heard *h, int i)
{
    for (int k = 0; k < 20; k++)
        if (word_is(h, i, ND_SMALL_NUMBERS[k]) || (k && word_is(h, i, ORDINALS[k]))) return k;
    for (int k = 0; k < 8; k++) {
        const char *tens = ND_TENS_WORDS[k];
        if (word_is(h, i, tens)) return 20 + 10 * k;
        char ord[16]; /* "twentieth" */
        snprintf(ord, sizeof ord, "%.*stieth", (int)strlen(tens) - 1, tens);
        if (word_is(h, i, ord)) return 20 + 10 * k;
    }
    return -1;
}

/* Numbers in digits ("21.5", "1,000", "7:30" = 7 and 30, "27th") and in words
 * ("twenty two", "a hundred and fifty", "half", "dozen"). */
static void read_numbers(heard *h)
{
    const char *t = h->low;
    for (size_t i = 0; i < h->len;) {
        if (!isdigit((unsigned char)t[i]) || (i && isdigit((unsigned char)t[i - 1]))) { i++; continue; }
        double v = 0;
        size_t j = i;
        while (j < h->len && (isdigit((unsigned char)t[j]) ||
                              (t[j] == ',' && j + 3 < h->len && isdigit((unsigned char)t[j + 1]) &&
                               isdigit((unsigned char)t[j + 2]) && isdigit((unsigned char)t[j + 3]) &&
                               (j + 4 >= h->len || !isdigit((unsigned char)t[j + 4]))))) {
            if (t[j] != ',') v = v * 10 + (t[j] - '0');
            j++;
        }
        add_num(h, v);
        if (j + 1 < h->len && t[j] == '.' && isdigit((unsigned char)t[j + 1])) { /* 21.5, and 7.30 as 7 and 30 */
            double frac = 0, scale = 1;
            size_t k = j + 1;
            while (k < h->len && isdigit((unsigned char)t[k])) {
                frac = frac * 10 + (t[k] - '0');
                scale *= 10;
                k++;
            }
            add_num(h, v + frac / scale);
            add_num(h, frac);
            j = k;
        }
        i = j;
    }
    add_num(h, 1); /* "a", "an", "one" go without saying */
    double cur = -1, total = 0;
    for (int i = 0; i <= h->n_words; i++) {
        double w = i < h->n_words ? number_word(h, i) : -1;
        int joiner = i < h->n_words && cur >= 0 && word_is(h, i, "and");
        if (w >= 0) {
            /* the parts of "eighty-seven" are not said by it: a tens word before a
             * unit word, and that unit word, count only in the whole */
            double next = i + 1 < h->n_words ? number_word(h, i + 1) : -1;
            double prev = i > 0 ? number_word(h, i - 1) : -1;
            int tens = w >= 20 && w < 100 && fmod(w, 10) == 0, unit = w >= 1 && w <= 9;
            int part = (tens && next >= 1 && next <= 9) || (unit && prev >= 20 && prev < 100 && fmod(prev, 10) == 0);
            if (!part) add_num(h, w);
            cur = cur < 0 ? w : cur + w; /* "twenty two", "a hundred and fifty" */
        } else if (word_is(h, i, "hundred")) cur = (cur < 0 ? 1 : cur) * 100;
        else if (word_is(h, i, "thousand")) { total += (cur < 0 ? 1 : cur) * 1000; cur = 0; }
        else if (word_is(h, i, "half") || word_is(h, i, "halfway")) add_num(h, 0.5);
        else if (word_is(h, i, "quarter")) add_num(h, 0.25);
        else if (word_is(h, i, "dozen")) add_num(h, 12);
        else if (cur >= 0 && word_is(h, i, "point") && i + 1 < h->n_words && number_word(h, i + 1) >= 0 &&
                 number_word(h, i + 1) < 10) {
            /* "twenty eight point five" = 28.5: digits after the point, one word each */
            double whole = total + cur, digits = 0, scale = 1, d;
            int k = i + 1;
            for (; k < h->n_words && (d = number_word(h, k)) >= 0 && d < 10 && scale < 1e6; k++, scale *= 10)
                digits = digits * 10 + d;
            add_num(h, whole);
            add_num(h, (whole * scale + digits) / scale);
            cur = -1;
            total = 0;
            i = k - 1;
        }
        else if (word_is(h, i, "couple")) add_num(h, 2);
        else if (!joiner) {
            if (cur >= 0 || total > 0) add_num(h, total + (cur > 0 ? cur : 0));
            cur = -1;
            total = 0;
        }
    }
    /* "an hour and a half" = 1.5: sums of two numbers said */
    int n = h->n_nums;
    for (int a = 0; a < n && n < 200; a++)
        for (int b = a + 1; b < n; b++)
            if (h->nums[b] == 0.5 || h->nums[b] == 0.25) add_num(h, h->nums[a] + h->nums[b]);
}

static int heard_init(heard *h, const char *a, const char *b, const char *c)
{
    memset(h, 0, sizeof *h);
    nd_buf all;
    nd_buf_init(&all);
    const char *parts[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (parts[i]) {
            nd_buf_puts(&all, parts[i]);
            nd_buf_putc(&all, '\n');
        }
    if (all.oom) { nd_buf_free(&all); return NEEDLE_ENOMEM; }
    h->low = fold(all.data ? all.data : "", all.len, &h->len);
    nd_buf_free(&all);
    if (!h->low) return NEEDLE_ENOMEM;
    int cap = 0;
    for (size_t i = 0; i < h->len;) {
        if (!word_byte((unsigned char)h->low[i])) { i++; continue; }
        size_t j = i;
        while (j < h->len && word_byte((unsigned char)h->low[j])) j++;
        if (h->n_words == cap) {
            cap = cap ? 2 * cap : 64;
            span *p = realloc(h->words, sizeof *p * (size_t)cap);
            if (!p) return NEEDLE_ENOMEM;
            h->words = p;
        }
        h->words[h->n_words++] = (span){i, j - i};
        i = j;
    }
    read_numbers(h);
    /* durations and volumes said with their unit, in minutes and millilitres
     * ("three quarters of an hour" is 45; x60 and x1000 steps apply as to any
     * number said) */
    double q[32];
    int nq = nd_quantities_said(h->low, 0, q, 32);
    for (int i = 0; i < nq; i++) add_num(h, q[i]);
    return h->oom ? NEEDLE_ENOMEM : 0;
}

static void heard_free(heard *h)
{
    free(h->low);
    free(h->words);
    free(h->nums);
}

static int said_word(const heard *h, const char *w, size_t n)
{
    for (int i = 0; i < h->n_words; i++) {
        size_t L = h->words[i].len;
        const char *x = h->low + h->words[i].at;
        if (L == n && !memcmp(x, w, n)) return 1;
        /* a plural either way: "light" / "lights" */
        if (L == n + 1 && x[n] == 's' && !memcmp(x, w, n)) return 1;
        if (n == L + 1 && w[L] == 's' && !memcmp(x, w, L)) return 1;
    }
    return 0;
}

static int has_word(const heard *h, const char *w) { return said_word(h, w, strlen(w)); }

static const char *const TIME_WORDS[] = {"hour", "hr", "minute", "min", "second", "sec", NULL};
static const char *const METRIC_WORDS[] = {"litre", "liter", "l", "kilo", "kilogram", "kg", "kilometre", "kilometer",
                                           "km", "gram", "metre", "meter", NULL};

/* True when "a", "an", "one" or "1" comes right before one of units ("an
 * hour", "a litre", "1 L"): only then does the one convert by that unit. */
static int one_before(const heard *h, const char *const *units)
{
    for (int i = 0; i + 1 < h->n_words; i++) {
        if (!word_is(h, i, "a") && !word_is(h, i, "an") && !word_is(h, i, "one") && !word_is(h, i, "1")) continue;
        for (const char *const *u = units; *u; u++) {
            size_t n = strlen(*u), L = h->words[i + 1].len;
            const char *x = h->low + h->words[i + 1].at;
            if ((L == n || (L == n + 1 && x[n] == 's')) && !memcmp(x, *u, n)) return 1;
        }
    }
    return 0;
}

/* A number said, or one it converts to by a unit step: minutes and seconds
 * (x60), hours in seconds (x3600), litres and kilos (x1000), a fraction as
 * a percent (0.5 -> 50).  A one ("a", "an", "one" go without saying) converts
 * only by the unit the request names ("an hour" = 60 minutes, "a litre" =
 * 1000 ml), and never to 100: otherwise 60, 100, 1000 and 3600 would be
 * grounded in every request, and 100 is what a small model says when the
 * schema cuts the 300 it meant. */
static int said_number(const heard *h, double v)
{
    static const double steps[] = {1, 60, 1.0 / 60, 1000, 0.001, 100, 0.01, 3600};
    v = fabs(v);
    if (v == 1) return 1;
    int one_time = one_before(h, TIME_WORDS), one_metric = one_before(h, METRIC_WORDS);
    for (int i = 0; i < h->n_nums; i++)
        for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
            double st = steps[k];
            if (h->nums[i] == 1 && st != 1 &&
                !(one_time && (st == 60 || st == 1.0 / 60 || st == 3600)) && !(one_metric && (st == 1000 || st == 0.001)))
                continue;
            if (fabs(h->nums[i] * st - v) <= 1e-9 * (1 + v)) return 1;
        }
    return 0;
}

/* True when some word of the request starts with the n bytes of stem. */
static int said_stem(const heard *h, const char *stem, size_t n)
{
    for (int i = 0; i < h->n_words; i++)
        if (h->words[i].len >= n && !memcmp(h->low + h->words[i].at, stem, n)) return 1;
    return 0;
}

static int has_any_word(const heard *h, const char *const *ws)
{
    for (; *ws; ws++)
        if (has_word(h, *ws)) return 1;
    return 0;
}

static const char *const FULL_WORDS[] = {"full", "fully", "max", "maximum", "highest", "completely", NULL};
static const char *const LEAST_WORDS[] = {"min", "minimum", "lowest", NULL};

/* A state the parameter's description names for v, said: "(0 closed, 100
 * fully open)" names 0 "closed" (said by "close", "closed"...) and 100 "fully
 * open" (said by "open" with "fully", "full", "all the way"...); also the
 * schema's maximum said as "max", "full", "all the way" and its minimum as
 * "min", "lowest". */
static int named_by_schema(const heard *h, double v, const nd_json *schema)
{
    const nd_json *mx = schema ? nd_json_get(schema, "maximum") : NULL;
    const nd_json *mn = schema ? nd_json_get(schema, "minimum") : NULL;
    int full = has_any_word(h, FULL_WORDS) || strstr(h->low, "all the way") != NULL;
    if (mx && mx->type == ND_JSON_NUMBER && mx->num == v && full) return 1;
    if (mn && mn->type == ND_JSON_NUMBER && mn->num == v && has_any_word(h, LEAST_WORDS)) return 1;
    const nd_json *d = schema ? nd_json_get(schema, "description") : NULL;
    if (!d || d->type != ND_JSON_STRING) return 0;
    for (const char *p = strchr(d->str, '('); p; p = strchr(p + 1, '(')) {
        const char *end = strchr(p, ')');
        if (!end) break;
        /* parts "N word [word [word]]" separated by , or ; */
        for (const char *q = p + 1; q < end;) {
            const char *stop = q;
            while (stop < end && *stop != ',' && *stop != ';') stop++;
            char *after;
            while (q < stop && *q == ' ') q++;
            double n = strtod(q, &after);
            if (after != q && after <= stop && n == v) {
                /* the state's last word, its stem ("closed" -> "clos", "open" -> "open") */
                const char *we = stop;
                while (we > after && !isalpha((unsigned char)we[-1])) we--;
                const char *ws = we;
                while (ws > after && isalpha((unsigned char)ws[-1])) ws--;
                size_t wn = (size_t)(we - ws);
                if (wn > 4 && tolower((unsigned char)we[-2]) == 'e' && tolower((unsigned char)we[-1]) == 'd') wn -= 2;
                else if (wn > 3 && tolower((unsigned char)we[-1]) == 'e') wn -= 1;
                char stem[32];
                if (wn == 0 || wn >= sizeof stem) continue;
                for (size_t k = 0; k < wn; k++) stem[k] = (char)tolower((unsigned char)ws[k]);
                int adverb = 0; /* "fully open": the state needs its adverb said too */
                for (const char *a = after; a + 4 <= ws && !adverb; a++) adverb = !strncmp(a, "full", 4);
                if (said_stem(h, stem, wn) && (!adverb || full)) return 1;
            }
            q = stop + 1;
        }
    }
    return 0;
}

static int said_integer(const heard *h, long v)
{
    for (int i = 0; i < h->n_nums; i++)
        if (h->nums[i] == (double)v) return 1;
    return 0;
}

/* ------------------------------------------------------------------ strings, times, dates */

static const char *const FUNCTION_WORDS[] = {"a", "an", "the", "my", "your", "our", "his", "her", "their", "its",
                                             "to", "of", "for", "and", "or", "in", "on", "at", "by", "with", "from",
                                             "that", "this", "is", "are", "be", "i", "me", "we", "you", "it",
                                             "please", "s", "ll", "m", "re", "ve", "d", "t"};

static int function_word(const char *w, size_t n)
{
    for (size_t i = 0; i < sizeof FUNCTION_WORDS / sizeof FUNCTION_WORDS[0]; i++)
        if (strlen(FUNCTION_WORDS[i]) == n && !memcmp(FUNCTION_WORDS[i], w, n)) return 1;
    return 0;
}

static int string_grounded(const heard *h, const char *v, size_t n)
{
    size_t L;
    char *low = fold(v, n, &L);
    if (!low) return 1;
    int ok = 1;
    for (size_t i = 0; i < L && ok;) {
        if (!word_byte((unsigned char)low[i])) { i++; continue; }
        size_t j = i;
        while (j < L && word_byte((unsigned char)low[j])) j++;
        const char *w = low + i;
        size_t wn = j - i;
        int digits = 1;
        for (size_t k = 0; k < wn; k++) digits = digits && isdigit((unsigned char)w[k]);
        if (digits) ok = said_word(h, w, wn) || said_number(h, strtod(w, NULL));
        else if (!function_word(w, wn)) ok = said_word(h, w, wn);
        i = j;
    }
    free(low);
    return ok;
}

static int two_digits(const char *s) { return isdigit((unsigned char)s[0]) && isdigit((unsigned char)s[1]); }

/* "HH:MM", "HH:MM:SS", or RFC 3339's full-time (format "time": seconds, a
 * fraction, then Z or an offset): a clock value whose hour and minute are what
 * the request must say (the seconds and the zone are never said) */
static int clock_value(const char *s, size_t n)
{
    if (n < 5 || !two_digits(s) || s[2] != ':' || !two_digits(s + 3)) return 0;
    size_t i = 5;
    if (i == n) return 1;
    if (s[i] != ':' || i + 3 > n || !two_digits(s + i + 1)) return 0;
    i += 3;
    if (i < n && s[i] == '.') {
        i++;
        if (i == n || s[i] < '0' || s[i] > '9') return 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i == n) return 1;
    if (s[i] == 'Z' || s[i] == 'z') return i + 1 == n;
    return (s[i] == '+' || s[i] == '-') && i + 6 == n && two_digits(s + i + 1) && s[i + 3] == ':' &&
           two_digits(s + i + 4);
}

static int time_grounded(const heard *h, int H, int M)
{
    int hour_ok = 0, min_ok = M == 0;
    for (int i = 0; i < h->n_nums && !hour_ok; i++) {
        double n = h->nums[i];
        hour_ok = n == H || n + 12 == H || (n == 12 && H == 0) || (n == 24 && H == 0) || n == H * 100 + M ||
                  (M > 30 && (n == (H + 1) % 24 || n + 12 == (H + 1) % 24 || (n == 12 && H == 11)));
    }
    if (has_word(h, "noon") || has_word(h, "midday")) hour_ok = hour_ok || H == 12 || (M > 30 && H == 11);
    if (has_word(h, "midnight")) hour_ok = hour_ok || H == 0 || (M > 30 && H == 23);
    if (!min_ok) min_ok = said_integer(h, M) || (M > 30 && said_integer(h, 60 - M)) ||
                          (M == 30 && has_word(h, "half")) || ((M == 15 || M == 45) && has_word(h, "quarter"));
    if (said_integer(h, H * 100 + M)) hour_ok = min_ok = 1;
    return hour_ok && min_ok;
}

/* Days since 1970-01-01 of a civil date (H. Hinnant's algorithm). */
long nd_days_from_civil(long y, int m, int d)
{
    y -= m <= 2;
    long era = (y >= 0 ? y : y - 399) / 400;
    long yoe = y - era * 400;
    long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* A YYYY-MM-DD at s (exactly), or 0. */
static int parse_date(const char *s, size_t n, long *y, int *m, int *d)
{
    if (n < 10 || !two_digits(s) || !two_digits(s + 2) || s[4] != '-' || !two_digits(s + 5) || s[7] != '-' ||
        !two_digits(s + 8) || (n > 10 && s[10] != 'T' && s[10] != 't' && s[10] != ' '))
        return 0;
    *y = strtol(s, NULL, 10);
    *m = (s[5] - '0') * 10 + s[6] - '0';
    *d = (s[8] - '0') * 10 + s[9] - '0';
    return *m >= 1 && *m <= 12 && *d >= 1 && *d <= 31;
}


static int said_month(const heard *h, int m)
{
    const char *full = ND_MONTH_NAMES[m - 1];
    if (has_word(h, full)) return 1;
    if (m != 5 && said_word(h, full, 3)) return 1; /* jan, feb, ... ("may" is its own) */
    return m == 9 && has_word(h, "sept");
}

static int said_weekday(const heard *h, int wd)
{
    const char *full = ND_WEEKDAY_NAMES[(wd + 6) % 7]; /* wd: Sunday 0 */
    return has_word(h, full) || said_word(h, full, 3) || (wd == 2 && has_word(h, "tues")) ||
           (wd == 4 && (has_word(h, "thu") || has_word(h, "thur") || has_word(h, "thurs")));
}

/* The first YYYY-MM-DD of the system text ("date: 2026-06-12 ..."), as days, or 0 with *found = 0. */
int nd_system_date(const char *system, long *day)
{
    for (const char *p = system; p && *p; p++) {
        long y;
        int m, d;
        size_t rest = strlen(p);
        if (parse_date(p, rest < 10 ? rest : 10, &y, &m, &d)) {
            *day = nd_days_from_civil(y, m, d);
            return 1;
        }
    }
    return 0;
}

static int date_grounded(const heard *h, const char *system, const char *v, long y, int m, int d)
{
    if (strstr(h->low, v) || (said_month(h, m) && said_integer(h, d))) return 1;
    long day = nd_days_from_civil(y, m, d);
    int wd = (int)(((day % 7) + 11) % 7); /* 1970-01-01 was a Thursday (4) */
    long base = 0;
    int have_base = nd_system_date(system, &base);
    if (!have_base) return said_weekday(h, wd) || (said_integer(h, m) && said_integer(h, d));
    long delta = day - base;
    if (delta == 0 && (has_word(h, "today") || has_word(h, "tonight"))) return 1;
    if (delta == 1 && has_word(h, "tomorrow")) return 1;
    if (delta == 2 && has_word(h, "tomorrow") && has_word(h, "after")) return 1;
    if (delta == -1 && has_word(h, "yesterday")) return 1;
    if (delta >= 0 && delta <= 13 && said_weekday(h, wd)) return 1;
    if (delta >= 0 && delta <= 13 && (wd == 0 || wd == 6) && has_word(h, "weekend")) return 1;
    if (delta > 0 && (has_word(h, "day") || has_word(h, "days")) && said_integer(h, delta)) return 1;
    if (delta > 0 && delta % 7 == 0 && has_word(h, "week") && said_integer(h, delta / 7)) return 1;
    if (delta >= 7 && delta <= 13 && has_word(h, "next") && has_word(h, "week")) return 1;
    if (delta >= 0 && delta <= 62 && said_integer(h, d)) return 1; /* "the 14th" */
    return 0;
}

/* ------------------------------------------------------------------ walking the calls */

typedef struct walker {
    const heard *h;
    const heard *req; /* the latest request alone, or NULL */
    const char *request; /* its text */
    const char *system;
    nd_grounding *g;
} walker;

/* Is path (as its JSON string) in the JSON array being built in b?  An out
 * of memory is noted in *oom. */
static int path_listed(const nd_buf *b, const char *path, nd_buf *q, int *oom)
{
    nd_buf_init(q);
    nd_json_write_string(q, path, strlen(path), 0);
    if (q->oom) *oom = 1;
    return q->data && b->data && strstr(b->data, q->data) != NULL;
}

/* Add path to the JSON array being built in b (count *n), each path once. */
static void add_path(nd_buf *b, int *n, const char *path)
{
    nd_buf q;
    int oom = 0;
    if (!path_listed(b, path, &q, &oom)) {
        nd_buf_putc(b, *n ? ',' : '[');
        nd_buf_append(b, q.data ? q.data : "", q.len);
        (*n)++;
    }
    if (oom) b->oom = 1;
    nd_buf_free(&q);
}

/* after nd_grounding_check, whose list is closed ("[]" or "[...]") */
int nd_grounding_add_out_of_schema(nd_grounding *g, const char *path)
{
    nd_buf *b = &g->out_of_schema, q;
    int oom = 0;
    if (!path_listed(b, path, &q, &oom) && !oom) {
        if (b->len && b->data[b->len - 1] == ']') b->len--; /* reopen the list */
        if (!g->n_out_of_schema) b->len = 0;
        nd_buf_putc(b, g->n_out_of_schema ? ',' : '[');
        nd_buf_append(b, q.data ? q.data : "", q.len);
        nd_buf_putc(b, ']');
        g->n_out_of_schema++;
    }
    nd_buf_free(&q);
    return oom || b->oom ? NEEDLE_ENOMEM : 0;
}

static void flag(walker *w, const char *path) { add_path(&w->g->ungrounded, &w->g->n_ungrounded, path); }

/* A number bound of the schema ("minimum", "exclusiveMaximum", ...), if any. */
static int bound(const nd_json *schema, const char *key, double *v)
{
    const nd_json *b = schema ? nd_json_get(schema, key) : NULL;
    if (!b || b->type != ND_JSON_NUMBER) return 0;
    *v = b->num;
    return 1;
}

int nd_schema_bounds_refuse(const nd_json *schema, double v)
{
    double b;
    return (bound(schema, "minimum", &b) && v < b) || (bound(schema, "maximum", &b) && v > b) ||
           (bound(schema, "exclusiveMinimum", &b) && v <= b) || (bound(schema, "exclusiveMaximum", &b) && v >= b);
}

/* Does the request say a number outside the schema's bounds?  The numbers
 * it says as values (said_number.h: "one hundred and twenty-two" is 122, not
 * also 1, 2, 20 and 100 as the grounding reads it; no halves, quarters or
 * sums), and negative ones: "-10" (a '-' that starts a word) or "minus 10". */
static int said_outside(const heard *r, const char *request, const nd_json *schema)
{
    double said[64];
    int n = nd_numbers_said(request, said, 64);
    for (int i = 0; i < n; i++)
        if (nd_schema_bounds_refuse(schema, said[i])) return 1;
    const char *t = r->low;
    for (size_t i = 0; i + 1 < r->len; i++) {
        int sign = t[i] == '-' && isdigit((unsigned char)t[i + 1]) && (i == 0 || !word_byte((unsigned char)t[i - 1]));
        size_t j = i + 1;
        if (!sign && !strncmp(t + i, "minus ", 6) && (i == 0 || !word_byte((unsigned char)t[i - 1])) &&
            i + 6 < r->len && isdigit((unsigned char)t[i + 6])) {
            sign = 1;
            j = i + 6;
        }
        if (sign && nd_schema_bounds_refuse(schema, -strtod(t + j, NULL))) return 1;
    }
    return 0;
}

/* An array whose schema says uniqueItems and that repeats an item: outside the
 * schema (the grammar cannot see it; the decoder's repeat cut, repeat_guard.h,
 * usually ends such a list before the repeat, but a minItems may refuse that) */
static int repeats_an_item(const nd_json *v, const nd_json *schema)
{
    const nd_json *u = schema ? nd_json_get(schema, "uniqueItems") : NULL;
    if (!u || u->type != ND_JSON_TRUE) return 0;
    for (size_t i = 1; i < v->count; i++)
        for (size_t k = 0; k < i; k++)
            if (nd_json_equal(&v->items[i], &v->items[k])) return 1; /* numbers by value, keys in any order */
    return 0;
}

static void walk(walker *w, const nd_json *v, const nd_json *schema, const char *path)
{
    if (v->type == ND_JSON_ARRAY && repeats_an_item(v, schema))
        add_path(&w->g->out_of_schema, &w->g->n_out_of_schema, path);
    if (schema && (nd_json_get(schema, "enum") || nd_json_get(schema, "const"))) return; /* a choice, not a copy */
    switch (v->type) {
    case ND_JSON_NUMBER:
        if (!said_number(w->h, v->num) && !named_by_schema(w->h, v->num, schema)) {
            flag(w, path);
            /* a value not said, where the request says one the schema refuses: the
             * user asked for something outside the schema ("150%" -> 15) */
            if (w->req && said_outside(w->req, w->request, schema))
                add_path(&w->g->out_of_schema, &w->g->n_out_of_schema, path);
        }
        break;
    case ND_JSON_STRING: {
        long y;
        int m, d;
        int ok;
        if (parse_date(v->str, v->len, &y, &m, &d)) {
            char ymd[11];
            memcpy(ymd, v->str, 10);
            ymd[10] = '\0';
            ok = date_grounded(w->h, w->system, ymd, y, m, d);
            if (ok && v->len >= 16 && two_digits(v->str + 11) && v->str[13] == ':' && two_digits(v->str + 14))
                ok = time_grounded(w->h, (v->str[11] - '0') * 10 + v->str[12] - '0',
                                   (v->str[14] - '0') * 10 + v->str[15] - '0');
        } else if (clock_value(v->str, v->len)) {
            ok = time_grounded(w->h, (v->str[0] - '0') * 10 + v->str[1] - '0', (v->str[3] - '0') * 10 + v->str[4] - '0');
        } else {
            ok = string_grounded(w->h, v->str, v->len);
        }
        if (!ok) flag(w, path);
        break;
    }
    case ND_JSON_ARRAY: {
        const nd_json *items = schema ? nd_json_get(schema, "items") : NULL;
        for (size_t i = 0; i < v->count; i++) walk(w, &v->items[i], items, path);
        break;
    }
    case ND_JSON_OBJECT: {
        const nd_json *props = schema ? nd_json_get(schema, "properties") : NULL;
        for (size_t i = 0; i < v->count; i++) {
            size_t n = strlen(path) + v->key_lens[i] + 2;
            char *sub = malloc(n);
            if (!sub) { w->g->ungrounded.oom = 1; return; }
            snprintf(sub, n, "%s.%s", path, v->keys[i]);
            walk(w, &v->items[i], props ? nd_json_get(props, v->keys[i]) : NULL, sub);
            free(sub);
        }
        break;
    }
    default: /* booleans and null: choices */
        break;
    }
}

const nd_json *nd_tool_named(const nd_json *tools, const char *name)
{
    if (!tools || tools->type != ND_JSON_ARRAY) return NULL;
    for (size_t i = 0; i < tools->count; i++) {
        const nd_json *t = nd_tool_declaration(&tools->items[i]), *n = nd_json_get(t, "name");
        if (n && n->type == ND_JSON_STRING && !strcmp(n->str, name)) return t;
    }
    return NULL;
}

const nd_json *nd_tool_parameters(const nd_json *tools, const char *name)
{
    return nd_json_get(nd_tool_named(tools, name), "parameters");
}

/* ------------------------------------------------------------------ placeholders */

/* Does word[0..n) equal one of the words of the tool's name (split at _ - and
 * spaces; ASCII case and a plural s ignored on both sides)? */
static int names_the_tool(const char *tool, const char *word, size_t n)
{
    if (n > 1 && (word[n - 1] == 's' || word[n - 1] == 'S')) n--;
    for (const char *p = tool; *p;) {
        const char *e = p;
        while (*e && *e != '_' && *e != '-' && *e != ' ') e++;
        size_t wl = (size_t)(e - p);
        if (wl > 1 && (p[wl - 1] == 's' || p[wl - 1] == 'S')) wl--;
        if (wl == n && n > 0 && strncasecmp(p, word, n) == 0) return 1;
        p = *e ? e + 1 : e;
    }
    return 0;
}

/* Words that carry no value of their own: the function words above, and
 * "off", "up", "down", "so", "if", "then" ("room": "off"). */
static int no_value_word(const char *w)
{
    static const char *const MORE[] = {"off", "up", "down", "so", "if", "then", NULL};
    for (const char *const *f = MORE; *f; f++)
        if (!strcmp(w, *f)) return 1;
    return function_word(w, strlen(w));
}

/* Is w (lowered) a word of the tool's name, a plural s ignored? */
static int tool_word(const char *tool, const char *w) { return names_the_tool(tool, w, strlen(w)); }

/* A value made only of function words ("off", "you", "for me"), or of another
 * required value padded with function words and words of the tool's name
 * ("the message to Patience Olawale" beside a recipient "Patience Olawale"
 * for send_message)?  Digits are not words here: "at 6" is function words. */
static int padding_only(const char *tool, const nd_json *v, const nd_json *req, const nd_json *args)
{
    char w[16][16], o[16][16];
    int n = nd_lower_words(v->str, w, NULL, 16), content = 0;
    if (n == 0 || n == 16) return 0;
    for (int i = 0; i < n; i++) content += !no_value_word(w[i]);
    if (content == 0) return 1;
    for (size_t r = 0; r < req->count; r++) {
        const nd_json *x = req->items[r].type == ND_JSON_STRING ? nd_json_get(args, req->items[r].str) : NULL;
        if (!x || x == v || x->type != ND_JSON_STRING || memchr(x->str, 0, x->len)) continue;
        int m = nd_lower_words(x->str, o, NULL, 16), padded = 0, inside = 1;
        if (m == 0 || m == 16) continue;
        for (int i = 0; i < n && inside; i++) {
            if (no_value_word(w[i]) || tool_word(tool, w[i])) {
                padded = 1;
                continue;
            }
            int found = 0;
            for (int j = 0; j < m && !found; j++) found = !strcmp(w[i], o[j]);
            inside = found;
        }
        if (inside && padded) return 1;
    }
    return 0;
}

/* Is v's text a run of whole words of x's text (ASCII case ignored), x a
 * text of four words or more, digits counted ("see you at 8": a message, not
 * a name; "Heroes" inside the track "Heroes Forever" is a playlist's own
 * name)? */
static int words_inside(const nd_json *x, const nd_json *v)
{
    if (v->len == 0 || memchr(x->str, 0, x->len)) return 0;
    int words = 0;
    for (size_t i = 0; i < x->len; i++)
        words += word_byte((unsigned char)x->str[i]) && (i == 0 || !word_byte((unsigned char)x->str[i - 1]));
    if (words < 4) return 0;
    for (size_t at = 0; at + v->len <= x->len; at++) {
        if (strncasecmp(x->str + at, v->str, v->len)) continue;
        int starts = at == 0 || !word_byte((unsigned char)x->str[at - 1]);
        int ends = at + v->len == x->len || !word_byte((unsigned char)x->str[at + v->len]);
        if (starts && ends) return 1;
    }
    return 0;
}

/* Is the lowered word w (a plural s ignored, three letters or more) a word of
 * the tool's description? */
static int describes_the_tool(const nd_json *tool, const char *w)
{
    const nd_json *d = nd_json_get(tool, "description");
    size_t n = strlen(w);
    if (n > 3 && w[n - 1] == 's') n--;
    if (!d || d->type != ND_JSON_STRING || n < 3 || memchr(d->str, 0, d->len)) return 0;
    char dw[64][16];
    int m = nd_lower_words(d->str, dw, NULL, 64);
    for (int i = 0; i < m; i++) {
        size_t k = strlen(dw[i]);
        if (k > 3 && dw[i][k - 1] == 's') k--;
        if (k == n && !strncmp(dw[i], w, n)) return 1;
    }
    return 0;
}

/* Does v start with the request's own first word, capitalised ("Tell Geoffrey
 * running late" -> "recipient": "Tell", "Could you please ring the contact" ->
 * "name": "Could", "Hey, how's my weather" -> "location": "Hey")?  The model
 * took the opening word of the sentence for a name.  Not when the word after
 * it names the tool or a word of its description: "Kitchen lights off" may
 * well mean the room "Kitchen", "Paris weather tomorrow" the place. */
static int opening_word(const char *request, const nd_json *v, const char *tool, const nd_json *declared)
{
    if (!request) return 0;
    while (*request == ' ') request++;
    if (!(request[0] >= 'A' && request[0] <= 'Z')) return 0;
    size_t n = 1;
    while ((request[n] >= 'a' && request[n] <= 'z') || (request[n] >= 'A' && request[n] <= 'Z') ||
           (request[n] == '\'' && request[n + 1] >= 'a' && request[n + 1] <= 'z'))
        n++;
    if (n < 2 || v->len < n || memcmp(v->str, request, n) || (v->len > n && v->str[n] != ' ')) return 0;
    char next[1][16];
    if (request[n] != ' ' || nd_lower_words(request + n, next, NULL, 1) != 1) return 1;
    return !names_the_tool(tool, next[0], strlen(next[0])) && !describes_the_tool(declared, next[0]);
}

/* A required free-text argument the model filled with a placeholder: a word
 * of the tool's own name ("room": "lights" for set_lights, "blinds" for
 * set_blinds) or the same string as another required argument ("track" and
 * "playlist" both "Heroes"; an optional argument that repeats a required one,
 * "name" and "company" both "Leigh", says nothing about the required one) or
 * whole words of another required value ("recipient": "ETA" beside the text
 * "traffic is terrible, ETA 8:50am"),
 * words with no value of their own ("room": "off", "query": "you"), or
 * another required value padded with such words and the tool's name ("text":
 * "the message to Patience Olawale" beside that recipient).
 * The request gave no value for it, and the model wrote the nearest words
 * instead; the behaviour contract answers a required value not given with no
 * call ("missing"). */
static void placeholders(nd_grounding *g, const nd_json *args, const nd_json *params, const char *tool,
                         const char *request, const nd_json *declared)
{
    const nd_json *req = params ? nd_json_get(params, "required") : NULL;
    const nd_json *props = params ? nd_json_get(params, "properties") : NULL;
    for (size_t k = 0; req && req->type == ND_JSON_ARRAY && k < req->count; k++) {
        if (req->items[k].type != ND_JSON_STRING) continue;
        const char *key = req->items[k].str;
        const nd_json *v = nd_json_get(args, key), *schema = props ? nd_json_get(props, key) : NULL;
        if (!v || v->type != ND_JSON_STRING || v->len == 0 || memchr(v->str, 0, v->len)) continue;
        if (schema && (nd_json_get(schema, "enum") || nd_json_get(schema, "const") || nd_json_get(schema, "pattern") ||
                       nd_json_get(schema, "format")))
            continue; /* a closed or formatted string is not a copy */
        int placeholder = (!memchr(v->str, ' ', v->len) && names_the_tool(tool, v->str, v->len)) ||
                          padding_only(tool, v, req, args) || opening_word(request, v, tool, declared);
        for (size_t o = 0; o < req->count && !placeholder; o++) {
            const nd_json *x = req->items[o].type == ND_JSON_STRING ? nd_json_get(args, req->items[o].str) : NULL;
            placeholder = x && x != v && x->type == ND_JSON_STRING && x->len == v->len && !memcmp(x->str, v->str, v->len);
            /* a piece of another required value: "shoot off the message saying 'traffic is terrible,
             * ETA 8:50am'" -> "recipient": "ETA" */
            if (!placeholder && x && x != v && x->type == ND_JSON_STRING && x->len > v->len)
                placeholder = words_inside(x, v) && !padding_only(tool, x, req, args);
        }
        if (placeholder) {
            char path[256];
            snprintf(path, sizeof path, "%s.%s", tool, key);
            add_path(&g->missing, &g->n_missing, path);
        }
    }
}

/* Does the request say no number at all: no digits, no number words, no
 * "half" or "quarter", no "noon" or "midnight"?  (read_numbers always adds
 * the 1 that "a" and "an" say; nothing else.) */
static int says_no_number(const heard *r)
{
    return r->n_nums == 1 && !has_word(r, "noon") && !has_word(r, "midday") && !has_word(r, "midnight");
}

/* A required number, time or date the model wrote while the request says no
 * number at all ("set the thermostat to fahrenheit" -> temperature 61, "set
 * the alarm for The Season Song" -> time "00:00"): ungrounded, and nothing in
 * the request could have been converted into it.  The request gave no value,
 * so the call is answered as the behaviour contract answers a missing one.
 * Dates are left out: "tomorrow" and "Friday" ground them by the calendar. */
static void required_number_unsaid(nd_grounding *g, const heard *req, const nd_json *params, const char *tool)
{
    const nd_json *req_keys = params ? nd_json_get(params, "required") : NULL;
    const nd_json *props = params ? nd_json_get(params, "properties") : NULL;
    if (!req_keys || req_keys->type != ND_JSON_ARRAY || !props || !says_no_number(req) || !g->ungrounded.data) return;
    for (size_t k = 0; k < req_keys->count; k++) {
        if (req_keys->items[k].type != ND_JSON_STRING || memchr(req_keys->items[k].str, 0, req_keys->items[k].len)) continue;
        const char *key = req_keys->items[k].str;
        const nd_json *schema = nd_json_get(props, key), *t = schema ? nd_json_get(schema, "type") : NULL;
        const nd_json *fmt = schema ? nd_json_get(schema, "format") : NULL;
        if (!t || t->type != ND_JSON_STRING || nd_json_get(schema, "enum") || nd_json_get(schema, "const")) continue;
        int numeric = !strcmp(t->str, "integer") || !strcmp(t->str, "number");
        int clock = !strcmp(t->str, "string") && fmt && fmt->type == ND_JSON_STRING && !strcmp(fmt->str, "time");
        if (!clock && !strcmp(t->str, "string") && !fmt) { /* a pattern that takes a clock time: "HH:MM" */
            const nd_json *pat = nd_json_get(schema, "pattern");
            clock = pat && pat->type == ND_JSON_STRING && nd_regex_accepts(pat->str, pat->len, "07:30");
        }
        if (!numeric && !clock) continue;
        char path[260];
        snprintf(path, sizeof path, "%s.%s", tool, key);
        nd_buf q;
        int flagged = path_listed(&g->ungrounded, path, &q, &g->missing.oom);
        nd_buf_free(&q);
        if (flagged) add_path(&g->missing, &g->n_missing, path);
    }
}

/* ------------------------------------------------------------------ negation */

/* Is `needle` (lowercase) inside some string value of the calls? */
static int inside_a_value(const nd_json *v, const char *needle)
{
    if (!v) return 0;
    if (v->type == ND_JSON_STRING) {
        size_t n;
        char *low = fold(v->str, v->len, &n);
        int in = low && strstr(low, needle) != NULL;
        free(low);
        return in;
    }
    if (v->type == ND_JSON_ARRAY || v->type == ND_JSON_OBJECT)
        for (size_t i = 0; i < v->count; i++)
            if (inside_a_value(&v->items[i], needle)) return 1;
    return 0;
}

static const char *const NEGATORS[] = {"don't", "dont", "do not", "doesn't need", "does not need", "no need",
                                       "never mind", "nevermind", "never", "forget it", "forget about it",
                                       "forget that", "scratch that", "actually no", "actually, no", "hold off",
                                       "not necessary", "won't need", "shouldn't", "should not", "no thanks",
                                       "no, thanks", "not needed", "didn't ask", "did not ask", "let's not",
                                       "lets not", "better not", "rather not"};
/* words after "don't" that keep the request positive: "don't forget to ...",
 * "..., if you don't mind" */
static const char *const KEEPERS[] = {"forget", "let me forget", "let me miss", "hesitate", "worry", "mind"};

int nd_request_negates(const char *request, const nd_json *calls)
{
    if (!request) return 0;
    size_t n;
    char *low = fold(request, strlen(request), &n);
    if (!low) return 0;
    int neg = 0;
    for (size_t k = 0; k < sizeof NEGATORS / sizeof NEGATORS[0] && !neg; k++) {
        size_t L = strlen(NEGATORS[k]);
        for (const char *p = strstr(low, NEGATORS[k]); p && !neg; p = strstr(p + 1, NEGATORS[k])) {
            if (p > low && word_byte((unsigned char)p[-1])) continue;
            if (word_byte((unsigned char)p[L]) && isalpha((unsigned char)NEGATORS[k][L - 1])) continue;
            const char *after = p + L;
            while (*after == ' ' || *after == ',') after++;
            int kept = 0;
            for (size_t j = 0; j < sizeof KEEPERS / sizeof KEEPERS[0] && !kept; j++)
                kept = !strncmp(after, KEEPERS[j], strlen(KEEPERS[j]));
            /* a negation quoted in a generated message ("tell her don't wait up") is content */
            char phrase[64];
            size_t span = L;
            while (p[span] && p[span] != ',' && p[span] != '.' && span < sizeof phrase - 1 && span < L + 12) span++;
            memcpy(phrase, p, span);
            phrase[span] = '\0';
            if (!kept && !inside_a_value(calls, phrase)) neg = 1;
        }
    }
    free(low);
    return neg;
}

/* A bounded number argument the request sets, next to its name, to a value
 * the schema refuses, while the call leaves the argument out or writes the
 * number without its sign: "brightness to 101 percent" answered with no
 * brightness, "-10% brightness" with 10 (the call alone; a one-call turn). */
static int said_outside_near_name(const char *request, const nd_json *args, const nd_json *params, const char *tool,
                                  nd_grounding *g)
{
    const nd_json *props = nd_json_get(params, "properties");
    for (size_t k = 0; props && props->type == ND_JSON_OBJECT && k < props->count; k++) {
        const nd_json *schema = &props->items[k], *t = nd_json_get(schema, "type");
        if (!t || t->type != ND_JSON_STRING || (strcmp(t->str, "integer") && strcmp(t->str, "number")) ||
            nd_json_get(schema, "enum") || nd_json_get(schema, "const") || memchr(props->keys[k], 0, props->key_lens[k]))
            continue;
        const nd_json *have = nd_json_get(args, props->keys[k]);
        if (have && have->type != ND_JSON_NUMBER) continue;
        double near[16];
        int n = nd_numbers_near_key(request, props->keys[k], near, 16);
        if (n < 0) return -1;
        for (int i = 0; i < n; i++)
            if (nd_schema_bounds_refuse(schema, near[i]) && (!have || (have->num != near[i] && fabs(have->num) == fabs(near[i])))) {
                char path[260];
                snprintf(path, sizeof path, "%s.%s", tool, props->keys[k]);
                add_path(&g->out_of_schema, &g->n_out_of_schema, path); /* (each path once) */
                break;
            }
    }
    return 0;
}

/* ------------------------------------------------------------------ the check */

int nd_grounding_check(const nd_json *calls, const nd_json *tools, const char *heard_text, const char *request,
                       const char *system, const char *bent, nd_grounding *g)
{
    memset(g, 0, sizeof *g);
    nd_buf_init(&g->ungrounded);
    nd_buf_init(&g->out_of_schema);
    nd_buf_init(&g->missing);
    heard h, req;
    memset(&req, 0, sizeof req);
    int rc = heard_init(&h, heard_text, request, system);
    if (!rc && request) rc = heard_init(&req, request, NULL, NULL);
    walker w = {&h, request ? &req : NULL, request, system, g};
    if (bent && calls && calls->type == ND_JSON_ARRAY && calls->count > 0)
        add_path(&g->out_of_schema, &g->n_out_of_schema, bent);
    for (size_t i = 0; !rc && calls && calls->type == ND_JSON_ARRAY && i < calls->count; i++) {
        const nd_json *c = &calls->items[i], *name = nd_json_get(c, "name"), *args = nd_json_get(c, "arguments");
        if (!name || name->type != ND_JSON_STRING || !args || args->type != ND_JSON_OBJECT) continue;
        const nd_json *params = nd_tool_parameters(tools, name->str);
        walk(&w, args, params, name->str);
        placeholders(g, args, params, name->str, request, nd_tool_named(tools, name->str));
        if (request) required_number_unsaid(g, &req, params, name->str);
        if (request && calls->count == 1 && said_outside_near_name(request, args, params, name->str, g)) rc = NEEDLE_ENOMEM;
    }
    if (!rc) {
        nd_buf_puts(&g->ungrounded, g->n_ungrounded ? "]" : "[]");
        nd_buf_puts(&g->out_of_schema, g->n_out_of_schema ? "]" : "[]");
        nd_buf_puts(&g->missing, g->n_missing ? "]" : "[]");
        g->negation = nd_request_negates(request, calls);
        if (g->ungrounded.oom || g->out_of_schema.oom || g->missing.oom) rc = NEEDLE_ENOMEM;
    }
    heard_free(&h);
    heard_free(&req);
    return rc;
}

void nd_grounding_free(nd_grounding *g)
{
    if (!g) return;
    nd_buf_free(&g->ungrounded);
    nd_buf_free(&g->out_of_schema);
    nd_buf_free(&g->missing);
    memset(g, 0, sizeof *g);
}
