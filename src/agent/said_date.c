/* said_date.c - the date a request says, written into the call (said_date.h). */
#include "agent/said_date.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/grounding.h"
#include "agent/repair.h"
#include "agent/said_number.h"
#include "agent/spoken_words.h"

/* ------------------------------------------------------------------ calendar */

/* The civil date of a day number (the inverse of nd_days_from_civil; H. Hinnant's algorithm). */
static void civil_from_days(long z, long *y, int *m, int *d)
{
    z += 719468;
    long era = (z >= 0 ? z : z - 146096) / 146097;
    long doe = z - era * 146097;
    long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    long mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int days_in_month(long y, int m)
{
    static const int n[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0) ? 29 : n[m - 1];
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* YYYY-MM-DD at s (a valid date, not inside a longer run of digits): 1 and the day number. */
static int iso_at(const char *s, size_t i, long *day)
{
    if (i > 0 && is_digit(s[i - 1])) return 0;
    for (int k = 0; k < 10; k++)
        if (k == 4 || k == 7 ? s[i + k] != '-' : !is_digit(s[i + k])) return 0;
    if (is_digit(s[i + 10])) return 0;
    long y = atol(s + i);
    int m = (s[i + 5] - '0') * 10 + (s[i + 6] - '0'), d = (s[i + 8] - '0') * 10 + (s[i + 9] - '0');
    if (m < 1 || m > 12 || d < 1 || d > days_in_month(y, m)) return 0;
    *day = nd_days_from_civil(y, m, d);
    return 1;
}

/* ------------------------------------------------------------------ reading */


static int month_at(const nd_tokens *t, int i)
{
    for (int m = 0; m < 12; m++)
        if (nd_token_is(t, i, ND_MONTH_NAMES[m])) return m + 1;
    return 0;
}

static int weekday_at(const nd_tokens *t, int i)
{
    for (int d = 0; d < 7; d++)
        if (nd_token_is(t, i, ND_WEEKDAY_NAMES[d])) return d + 1;
    return 0;
}

/* A day of the month at token i: 1-31 in digits ("3", "3rd"); 0 if none. */
static int day_at(const nd_tokens *t, int i, int *next)
{
    if (nd_token_is(t, i, "#") && t->num[i] >= 1 && t->num[i] <= 31 && t->num[i] == (int)t->num[i]) {
        *next = i + 1;
        return (int)t->num[i];
    }
    return 0;
}

/* The next day number on or after `from` that is month m, day d (year y if y > 0). */
static long month_day(long from, long y, int m, int d)
{
    long fy;
    int fm, fd;
    civil_from_days(from, &fy, &fm, &fd);
    if (y > 0) return d <= days_in_month(y, m) ? nd_days_from_civil(y, m, d) : -1;
    for (long yy = fy; yy <= fy + 1; yy++)
        if (d <= days_in_month(yy, m) && nd_days_from_civil(yy, m, d) >= from) return nd_days_from_civil(yy, m, d);
    return -1;
}

/* A date relative to today (base) at token i: "today", "tomorrow", "the day
 * after tomorrow", "yesterday", "in 3 days", "in 2 weeks", a weekday.  Returns
 * the offset in days and *next, or a value below -1 when none. */
static long relative_at(const nd_tokens *t, int i, long base, int *next)
{
    *next = i + 1;
    if (nd_token_is(t, i, "today") || nd_token_is(t, i, "tonight")) return 0;
    if (nd_token_is(t, i, "tomorrow")) return 1;
    if (nd_token_is(t, i, "yesterday")) return -1;
    if (nd_token_is(t, i, "day") && nd_token_is(t, i + 1, "after") && nd_token_is(t, i + 2, "tomorrow")) {
        *next = i + 3;
        return 2;
    }
    if (nd_token_is(t, i, "in")) {
        int j = i + 1, k;
        long n = -1;
        if (nd_token_is(t, j, "#")) n = (long)t->num[j++];
        else if (nd_token_is(t, j, "a") || nd_token_is(t, j, "one")) n = 1, j++;
        else if ((n = nd_number_in_words((char (*)[16])t->w, t->n, j, &k)) >= 0) j = k;
        int days = nd_token_is(t, j, "day") || nd_token_is(t, j, "days");
        int weeks = nd_token_is(t, j, "week") || nd_token_is(t, j, "weeks");
        *next = j + 1;
        if (n >= 0 && (days || weeks)) return weeks ? 7 * n : n;
    }
    int wd = weekday_at(t, i);
    if (wd) { /* the first such day after today; "this" on the day itself is today */
        int today = (int)(((base % 7) + 7 + 3) % 7) + 1; /* 1970-01-01 was a Thursday (4) */
        int delta = (wd - today + 7) % 7;
        *next = i + 1;
        return delta == 0 && !nd_token_is(t, i - 1, "this") ? 7 : delta;
    }
    return -2;
}

/* Read one date at token i (have_base: today, base, is known). */
static int date_at(const nd_tokens *t, int i, int have_base, long base, long *day, int *next)
{
    int j, m, d;
    long offset = have_base ? relative_at(t, i, base, next) : -2;
    if (offset >= -1) {
        *day = base + offset;
        return 1;
    }
    /* "March 3rd [2027]", "3 March [2027]", "the 3rd of March [2027]" */
    long y = 0;
    if ((m = month_at(t, i)) && (d = day_at(t, i + 1, &j))) {
        /* j is after the day */
    } else if ((d = day_at(t, i, &j)) && ((m = month_at(t, j)) || (nd_token_is(t, j, "of") && (m = month_at(t, j + 1)) && ++j))) {
        j++; /* after the month */
    } else {
        return 0;
    }
    if (nd_token_is(t, j, "#") && t->num[j] >= 1900 && t->num[j] <= 2200) y = (long)t->num[j++];
    if (y == 0 && !have_base) return 0;
    long dd = month_day(base, y, m, d);
    if (dd < 0) return 0;
    *day = dd;
    *next = j;
    return 1;
}

int nd_date_said(const char *request, const char *system, char out[11])
{
    if (!request) return 0;
    long base = 0;
    int have_base = nd_system_date(system, &base);
    int found = 0;
    long day = 0;
    /* ISO dates in the text */
    for (size_t i = 0; request[i]; i++) {
        long d;
        if (iso_at(request, i, &d)) { /* (iso_at stops at the end of the text) */
            if (found && d != day) return 0;
            day = d;
            found = 1;
        }
    }
    nd_tokens *t = malloc(sizeof *t);
    if (!t) return 0;
    nd_tokenize(request, t);
    for (int i = 0; i < t->n;) {
        long d;
        int next;
        /* (the numbers of an ISO date read as words would give nothing: "#" "-" ...) */
        if (date_at(t, i, have_base, base, &d, &next)) {
            if (found && d != day) {
                free(t);
                return 0;
            }
            day = d;
            found = 1;
            i = next;
        } else {
            i++;
        }
    }
    free(t);
    if (!found) return 0;
    long y;
    int m, dd;
    civil_from_days(day, &y, &m, &dd);
    if (y < 1000 || y > 9999) return 0;
    long digits[8] = {y / 1000, y / 100 % 10, y / 10 % 10, y % 10, m / 10, m % 10, dd / 10, dd % 10};
    for (int k = 0, o = 0; k < 8; k++) { /* YYYY-MM-DD (snprintf cannot show the compiler it fits) */
        if (k == 4 || k == 6) out[o++] = '-';
        out[o++] = (char)('0' + digits[k]);
    }
    out[10] = 0;
    return 1;
}

/* ------------------------------------------------------------------ the call */

/* Does the schema take text as a date: format "date", or a pattern that accepts it? */
static int date_schema(const nd_json *schema, const char *text)
{
    const nd_json *t = schema ? nd_json_get(schema, "type") : NULL;
    if (!t || t->type != ND_JSON_STRING || strcmp(t->str, "string") || nd_json_get(schema, "enum") ||
        nd_json_get(schema, "const"))
        return 0;
    const nd_json *f = nd_json_get(schema, "format");
    if (f && f->type == ND_JSON_STRING) return !strcmp(f->str, "date");
    return nd_pattern_accepts(schema, text);
}

int nd_fix_said_date(nd_json *calls, const nd_json *tools, const char *request, const char *system, nd_buf *paths,
                     int *n_paths)
{
    nd_one_call c;
    char date[11];
    if (!request || !nd_repair_one_call(calls, tools, &c) || !nd_date_said(request, system, date)) return 0;
    const char *key = NULL;
    for (size_t k = 0; k < c.props->count; k++)
        if (date_schema(&c.props->items[k], date)) {
            if (key) return 0; /* two date arguments: which one? */
            key = c.props->keys[k];
        }
    if (!key) return 0;
    nd_json *v = (nd_json *)nd_json_get(c.args, key);
    if (v && v->type == ND_JSON_STRING && v->len == 10 && !memcmp(v->str, date, 10)) return 0;
    if (v) {
        if (v->type != ND_JSON_STRING) return 0;
        char *copy = malloc(11);
        if (!copy) return -1;
        memcpy(copy, date, 11);
        free(v->str);
        v->str = copy;
        v->len = 10;
    } else if (nd_json_object_add_string(c.args, key, date)) {
        return -1;
    }
    nd_repair_note(paths, n_paths, c.tool, key);
    return paths->oom ? -1 : 1;
}
