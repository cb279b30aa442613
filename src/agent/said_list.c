/* said_list.c - the values a list argument names, written into the call (said_list.h). */
#include "agent/said_list.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/repair.h"
#include "agent/said_number.h"
#include "agent/spoken_words.h"

#define MAX_WORDS 256 /* request words read */
#define MAX_VALUE_WORDS 8
#define MAX_ITEMS 64 /* enum values looked at */


typedef struct {
    char w[MAX_WORDS][16];
    size_t ends[MAX_WORDS];
    int n;
    unsigned char taken[MAX_WORDS]; /* inside a string value the call already has */
} request_words;

static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* The words of an enum value, or 0 when it holds anything but ASCII letters,
 * spaces, '-' and '_' (a value such words cannot say). */
static int value_words(const nd_json *v, char (*w)[16], int cap)
{
    if (v->type != ND_JSON_STRING || v->len == 0) return 0;
    for (size_t i = 0; i < v->len; i++) {
        char c = v->str[i];
        if (!is_alpha(c) && c != ' ' && c != '-' && c != '_') return 0;
    }
    return nd_lower_words(v->str, w, NULL, cap);
}

/* Do the request's words from i on read as the m words of vw (the last one
 * may carry a final "s": "tuesdays")? */
static int said_at(const request_words *r, int i, char (*vw)[16], int m)
{
    if (i + m > r->n) return 0;
    for (int j = 0; j < m; j++) {
        const char *x = r->w[i + j], *v = vw[j];
        size_t L = strlen(x), n = strlen(v);
        if (r->taken[i + j]) return 0;
        if (L == n && !memcmp(x, v, n)) continue;
        if (j == m - 1 && L == n + 1 && x[n] == 's' && !memcmp(x, v, n)) continue;
        return 0;
    }
    return 1;
}

/* Mark the request's words that spell one of the call's string values (top
 * level or array items), the list argument itself left out. */
static void mark_taken(request_words *r, const nd_json *args, size_t skip)
{
    for (size_t k = 0; k < args->count; k++) {
        if (k == skip) continue;
        const nd_json *v = &args->items[k];
        size_t m = v->type == ND_JSON_ARRAY ? v->count : 1;
        for (size_t i = 0; i < m; i++) {
            const nd_json *s = v->type == ND_JSON_ARRAY ? &v->items[i] : v;
            if (s->type != ND_JSON_STRING || memchr(s->str, 0, s->len)) continue;
            char sw[MAX_VALUE_WORDS][16];
            int n = nd_lower_words(s->str, sw, NULL, MAX_VALUE_WORDS);
            if (n == 0 || n == MAX_VALUE_WORDS) continue;
            for (int at = 0; at + n <= r->n; at++)
                if (said_at(r, at, sw, n))
                    for (int j = 0; j < n; j++) r->taken[at + j] = 1;
        }
    }
}

static int word_is(const request_words *r, int i, const char *w)
{
    return i >= 0 && i < r->n && !r->taken[i] && !strcmp(r->w[i], w);
}

/* The weekday request word i names (0 Monday .. 6 Sunday, plural allowed), or -1. */
static int day_at(const request_words *r, int i)
{
    if (i < 0 || i >= r->n || r->taken[i]) return -1;
    for (int d = 0; d < 7; d++) {
        size_t n = strlen(ND_WEEKDAY_NAMES[d]), L = strlen(r->w[i]);
        if (!memcmp(r->w[i], ND_WEEKDAY_NAMES[d], n) && (L == n || (L == n + 1 && r->w[i][n] == 's'))) return d;
    }
    return -1;
}

/* Only a '-' (and spaces) between words i and i + 1: "Mon-Fri". */
static int dash_between(const char *request, const request_words *r, int i)
{
    if (i + 1 >= r->n) return 0;
    size_t from = r->ends[i], to = r->ends[i + 1] - strlen(r->w[i + 1]);
    int dash = 0;
    for (size_t k = from; k < to; k++) {
        if (request[k] == '-') dash++;
        else if (request[k] != ' ') return 0;
    }
    return dash == 1;
}

/* Days first .. last (0 Monday .. 6 Sunday), over the weekend when last < first, into out; how many. */
static int day_run(int first, int last, int *out)
{
    int n = 0;
    for (int k = first;; k = (k + 1) % 7) {
        out[n++] = k;
        if (k == last) return n;
    }
}

/* The days said from request word i, in order, into out (0 Monday .. 6
 * Sunday): a range "Monday to Friday" (how many words it takes in *used),
 * "weekdays", "weekend", "every day", one day.  Returns how many; 0 when
 * word i says none. */
static int days_at(const char *request, const request_words *r, int i, int *used, int out[7])
{
    *used = 1;
    int d = day_at(r, i);
    if (d >= 0) {
        static const char *const TO[] = {"to", "through", "thru", "till", "until", NULL};
        int to = 0;
        for (const char *const *t = TO; *t && !to; t++) to = word_is(r, i + 1, *t);
        int e = to ? day_at(r, i + 2) : dash_between(request, r, i) ? day_at(r, i + 1) : -1;
        if (e < 0) return day_run(d, d, out);
        *used = to ? 3 : 2;
        return day_run(d, e, out);
    }
    if (word_is(r, i, "weekday") || word_is(r, i, "weekdays")) return day_run(0, 4, out);
    if (word_is(r, i, "weekend") || word_is(r, i, "weekends")) return day_run(5, 6, out);
    if (word_is(r, i, "daily") || word_is(r, i, "everyday")) return day_run(0, 6, out);
    if (word_is(r, i, "every") && word_is(r, i + 1, "day")) {
        *used = 2;
        return day_run(0, 6, out);
    }
    return 0;
}

/* A list schema this reads: array of string enum, no pattern or format. */
static const nd_json *list_enum(const nd_json *schema)
{
    const nd_json *t = nd_json_get(schema, "type"), *items = nd_json_get(schema, "items");
    if (!t || t->type != ND_JSON_STRING || strcmp(t->str, "array") || !items || items->type != ND_JSON_OBJECT) return NULL;
    const nd_json *it = nd_json_get(items, "type"), *e = nd_json_get(items, "enum");
    if (!it || it->type != ND_JSON_STRING || strcmp(it->str, "string") || !e || e->type != ND_JSON_ARRAY ||
        e->count == 0 || e->count > MAX_ITEMS || nd_json_get(items, "pattern") || nd_json_get(items, "format"))
        return NULL;
    return e;
}

/* The enum index of each weekday (-1 when the enum lacks it); 1 when it has all seven. */
static int week_enum(const nd_json *e, int day_index[7])
{
    int all = 1;
    for (int d = 0; d < 7; d++) {
        day_index[d] = -1;
        for (size_t i = 0; i < e->count; i++) {
            const nd_json *v = &e->items[i];
            size_t n = strlen(ND_WEEKDAY_NAMES[d]);
            if (v->type == ND_JSON_STRING && v->len == n && !strncasecmp(v->str, ND_WEEKDAY_NAMES[d], n)) day_index[d] = (int)i;
        }
        all = all && day_index[d] >= 0;
    }
    return all;
}

static void add_item(int *list, int *n, int item)
{
    for (int k = 0; k < *n; k++)
        if (list[k] == item) return;
    if (*n < MAX_ITEMS) list[(*n)++] = item;
}

/* The enum indices the request says, in its order; how many. */
static int items_said(const char *request, const request_words *r, const nd_json *e, int *list)
{
    int day_index[7], week = week_enum(e, day_index), n = 0;
    for (int i = 0; i < r->n; i++) {
        int used = 1, days[7], n_days = week ? days_at(request, r, i, &used, days) : 0;
        if (n_days) {
            for (int d = 0; d < n_days; d++) add_item(list, &n, day_index[days[d]]);
            i += used - 1;
            continue;
        }
        for (size_t v = 0; v < e->count; v++) {
            char vw[MAX_VALUE_WORDS][16];
            int m = value_words(&e->items[v], vw, MAX_VALUE_WORDS);
            if (m == 0 || m == MAX_VALUE_WORDS || !said_at(r, i, vw, m)) continue;
            add_item(list, &n, (int)v);
            i += m - 1;
            break;
        }
    }
    return n;
}

/* Does the call's value already hold exactly these items in this order? */
static int same_list(const nd_json *have, const nd_json *e, const int *list, int n)
{
    if (!have || have->type != ND_JSON_ARRAY || have->count != (size_t)n) return 0;
    for (int k = 0; k < n; k++)
        if (!nd_json_equal(&have->items[k], &e->items[list[k]])) return 0;
    return 1;
}

static int fits_items(const nd_json *schema, int n)
{
    const nd_json *mn = nd_json_get(schema, "minItems"), *mx = nd_json_get(schema, "maxItems");
    if (mn && mn->type == ND_JSON_NUMBER && n < mn->num) return 0;
    if (mx && mx->type == ND_JSON_NUMBER && n > mx->num) return 0;
    return 1;
}

/* Set args[key] to the list of e's items; 0 or -1 (out of memory). */
static int write_list(nd_json *args, const char *key, const nd_json *e, const int *list, int n)
{
    nd_buf text;
    nd_buf_init(&text);
    nd_buf_putc(&text, '[');
    for (int k = 0; k < n; k++) {
        if (k) nd_buf_putc(&text, ',');
        nd_json_write_string(&text, e->items[list[k]].str, e->items[list[k]].len, 0);
    }
    nd_buf_putc(&text, ']');
    int rc = text.oom ? -1 : nd_object_put_json(args, key, text.data, text.len);
    nd_buf_free(&text);
    return rc;
}

int nd_fix_said_lists(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths)
{
    nd_one_call c;
    if (!request || !nd_repair_one_call(calls, tools, &c)) return 0;
    request_words *r = malloc(sizeof *r);
    if (!r) return -1;
    r->n = nd_lower_words(request, r->w, r->ends, MAX_WORDS);
    int changed = 0;
    for (size_t k = 0; k < c.props->count; k++) {
        const char *key = c.props->keys[k];
        const nd_json *schema = &c.props->items[k], *e = list_enum(schema);
        if (!e || memchr(key, 0, c.props->key_lens[k])) continue;
        const nd_json *have = nd_json_get(c.args, key);
        memset(r->taken, 0, sizeof r->taken);
        mark_taken(r, c.args, have ? (size_t)(have - c.args->items) : (size_t)-1);
        int list[MAX_ITEMS], n = items_said(request, r, e, list);
        if (n == 0 || !fits_items(schema, n) || same_list(have, e, list, n)) continue;
        if (write_list(c.args, key, e, list, n)) {
            free(r);
            return -1;
        }
        nd_repair_note(paths, n_paths, c.tool, key);
        changed++;
    }
    free(r);
    return paths->oom ? -1 : changed;
}

int nd_drop_unsaid_lists(nd_json *calls, const nd_json *tools, const char *request)
{
    nd_one_call c;
    if (!request || !nd_repair_one_call(calls, tools, &c)) return 0;
    request_words *r = malloc(sizeof *r);
    if (!r) return -1;
    r->n = nd_lower_words(request, r->w, r->ends, MAX_WORDS);
    int dropped = 0;
    for (size_t k = 0; k < c.args->count;) {
        const char *key = c.args->keys[k];
        const nd_json *e = list_enum(nd_json_get(c.props, key));
        int list[MAX_ITEMS];
        int unsaid = e && c.args->items[k].type == ND_JSON_ARRAY && !nd_schema_required(c.params, key);
        if (unsaid) {
            memset(r->taken, 0, sizeof r->taken);
            mark_taken(r, c.args, k);
            unsaid = items_said(request, r, e, list) == 0;
        }
        if (unsaid) {
            nd_json_object_remove(c.args, k);
            dropped++;
        } else {
            k++;
        }
    }
    free(r);
    return dropped;
}
