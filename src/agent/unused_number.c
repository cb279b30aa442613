/* unused_number.c - a number the request says that no call uses (unused_number.h). */
#include "agent/unused_number.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_NUMBERS 64

typedef struct {
    double v[MAX_NUMBERS];
    size_t at[MAX_NUMBERS], len[MAX_NUMBERS]; /* where the said ones are written */
    int n;
} numbers;

static void push(numbers *x, double v, size_t at, size_t len)
{
    if (x->n >= MAX_NUMBERS) return;
    x->v[x->n] = v;
    x->at[x->n] = at;
    x->len[x->n] = len;
    x->n++;
}

static int digit(char c) { return c >= '0' && c <= '9'; }
static int letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* Does the text at s (a word's start) begin with one of the words, followed by no letter? */
static int word_at(const char *s, const char *const *list)
{
    for (; *list; list++) {
        size_t n = strlen(*list);
        if (!strncasecmp(s, *list, n) && !letter(s[n])) return 1;
    }
    return 0;
}

/* Units written right after a number ("300ml", "68F", "5k"): the number is a quantity. */
static const char *const UNITS[] = {"ml", "l", "cl", "dl", "kg", "g", "mg", "lb", "lbs", "oz", "km", "m", "cm",
                                    "mm", "mi", "ft", "min", "mins", "hr", "hrs", "s", "sec", "secs", "bpm",
                                    "k", "kcal", "cal", "mph", "kph", "kmh", "f", "c", "x", "pm", "am", "h",
                                    "st", "nd", "rd", "th", NULL};
/* Words after a number that make it a clock hour, an ordinal or a span of days. */
static const char *const NOT_QUANTITY[] = {"am", "pm", "a.m", "p.m", "o'clock", "h", "st", "nd", "rd", "th",
                                           "day", "days", "week", "weeks", "month", "months", "year", "years",
                                           "yr", "yrs", NULL};

/* The numbers the request says (unused_number.h). */
static void said_numbers(const char *s, numbers *out)
{
    size_t len = strlen(s), i = 0;
    while (i < len) {
        if (!digit(s[i])) { i++; continue; }
        char prev = i ? s[i - 1] : ' ';
        size_t start = i;
        /* the whole run of digits and separators it belongs to */
        while (i < len && (digit(s[i]) || ((s[i] == ',' || s[i] == '.' || s[i] == ':' || s[i] == '/' || s[i] == '-') &&
                                           i + 1 < len && digit(s[i + 1]))))
            i++;
        if (letter(prev) || digit(prev) || prev == '.' || prev == ',' || prev == ':' || prev == '/' || prev == '-' ||
            prev == '_')
            continue; /* inside a word or another number */
        int plain = 1, points = 0;
        for (size_t k = start; k < i; k++) {
            if (s[k] == ':' || s[k] == '/' || s[k] == '-') plain = 0; /* a time, date, range or code */
            if (s[k] == '.') points++;
        }
        if (!plain || points > 1) continue;
        /* what follows: a unit, an identifier's letters, a clock hour, an ordinal, a span */
        size_t j = i;
        if (j < len && letter(s[j])) {
            if (!word_at(s + j, UNITS) || word_at(s + j, NOT_QUANTITY)) continue;
        } else {
            while (j < len && s[j] == ' ') j++;
            if (j < len && word_at(s + j, NOT_QUANTITY)) continue;
        }
        char buf[64];
        size_t n = 0;
        for (size_t k = start; k < i && n + 1 < sizeof buf; k++)
            if (s[k] != ',') buf[n++] = s[k];
        buf[n] = '\0';
        push(out, strtod(buf, NULL), start, i - start);
    }
}

/* The numbers of v pushed to out (nd_call_numbers). */
static void push_call_numbers(const nd_json *v, double *out, int *n, int cap)
{
    if (!v || *n >= cap) return;
    if (v->type == ND_JSON_NUMBER) {
        out[(*n)++] = v->num;
    } else if (v->type == ND_JSON_STRING) {
        for (size_t i = 0; i < v->len && *n < cap;) {
            if (!digit(v->str[i])) {
                i++;
                continue;
            }
            char buf[64];
            size_t k = 0, start = i;
            while (i < v->len && (digit(v->str[i]) || (v->str[i] == '.' && i + 1 < v->len && digit(v->str[i + 1]))) &&
                   k + 1 < sizeof buf)
                buf[k++] = v->str[i++];
            buf[k] = '\0';
            double x = strtod(buf, NULL);
            out[(*n)++] = x;
            int clock = i + 2 < v->len && v->str[i] == ':' && digit(v->str[i + 1]) && digit(v->str[i + 2]) && i - start <= 2;
            if (clock && x > 12 && x < 24 && *n < cap) out[(*n)++] = x - 12; /* "19:00": 7 */
            if (clock && *n < cap) out[(*n)++] = x * 100 + (v->str[i + 1] - '0') * 10 + (v->str[i + 2] - '0'); /* 1900 */
        }
    } else if (v->type == ND_JSON_ARRAY || v->type == ND_JSON_OBJECT) {
        for (size_t i = 0; i < v->count; i++) push_call_numbers(&v->items[i], out, n, cap);
    }
}

int nd_call_numbers(const nd_json *calls, double *out, int cap)
{
    int n = 0;
    push_call_numbers(calls, out, &n, cap);
    return n;
}

/* Is b the number a, or a unit step away from it? */
static int same_quantity(double a, double b)
{
    static const double STEPS[] = {1, 60, 1.0 / 60, 1000, 1.0 / 1000, 100, 1.0 / 100, 3600, 1.0 / 3600};
    a = fabs(a);
    b = fabs(b);
    for (size_t i = 0; i < sizeof STEPS / sizeof STEPS[0]; i++)
        if (fabs(a * STEPS[i] - b) <= 1e-9 * (1 + fabs(b))) return 1;
    return 0;
}

int nd_numbers_unused(const nd_json *calls, const char *request, nd_buf *out)
{
    if (!calls || calls->type != ND_JSON_ARRAY || calls->count == 0 || !request) return 0;
    numbers *said = calloc(1, sizeof *said);
    double *used = malloc(sizeof(double) * MAX_NUMBERS);
    if (!said || !used) {
        free(said);
        free(used);
        return -1;
    }
    said_numbers(request, said);
    int n_used = nd_call_numbers(calls, used, MAX_NUMBERS); /* names too: "do task 17" -> tool_17 */
    int any_used = 0;
    for (int i = 0; i < said->n && !any_used; i++) {
        if (said->v[i] >= 2 && said->v[i] == (double)calls->count) any_used = 1; /* "set 2 alarms" */
        for (int k = 0; k < n_used && !any_used; k++) any_used = same_quantity(said->v[i], used[k]);
    }
    int n = any_used ? 0 : said->n;
    for (int i = 0; i < n; i++) {
        nd_buf_puts(out, i ? ",\"" : "[\"");
        nd_buf_append(out, request + said->at[i], said->len[i]);
        nd_buf_puts(out, "\"");
    }
    if (n) nd_buf_puts(out, "]");
    free(said);
    free(used);
    return out->oom ? -1 : n;
}
