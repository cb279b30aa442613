/* repair.c - what the value repairs share (repair.h). */
#include "agent/repair.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/grounding.h"
#include "agent/said_number.h"
#include "core/utf8.h"
#include "grammar/regex.h"
#include "needle.h"

int nd_repair_one_call(nd_json *calls, const nd_json *tools, nd_one_call *out)
{
    memset(out, 0, sizeof *out);
    if (!calls || calls->type != ND_JSON_ARRAY || calls->count != 1) return 0;
    return nd_repair_call_at(calls, 0, tools, out);
}

int nd_repair_call_at(nd_json *calls, size_t i, const nd_json *tools, nd_one_call *out)
{
    memset(out, 0, sizeof *out);
    if (!calls || calls->type != ND_JSON_ARRAY || i >= calls->count || !tools) return 0;
    const nd_json *name = nd_json_get(&calls->items[i], "name");
    nd_json *args = (nd_json *)nd_json_get(&calls->items[i], "arguments");
    if (!name || name->type != ND_JSON_STRING || !args || args->type != ND_JSON_OBJECT) return 0;
    out->params = nd_tool_parameters(tools, name->str);
    out->props = out->params ? nd_json_get(out->params, "properties") : NULL;
    if (!out->props || out->props->type != ND_JSON_OBJECT) return 0;
    out->tool = name->str;
    out->args = args;
    return 1;
}

int nd_schema_required(const nd_json *params, const char *key)
{
    const nd_json *req = params ? nd_json_get(params, "required") : NULL;
    for (size_t i = 0; req && req->type == ND_JSON_ARRAY && i < req->count; i++)
        if (req->items[i].type == ND_JSON_STRING && !strcmp(req->items[i].str, key)) return 1;
    return 0;
}

int nd_path_listed(const char *list, const char *tool, const char *key)
{
    if (!list) return 0;
    nd_buf p;
    nd_buf_init(&p);
    nd_buf_putc(&p, '"');
    nd_buf_printf(&p, "%s.%s", tool, key);
    nd_buf_putc(&p, '"');
    int listed = p.data && strstr(list, p.data) != NULL; /* (names with '"' never match: fine) */
    nd_buf_free(&p);
    return listed;
}

void nd_repair_note(nd_buf *paths, int *n_paths, const char *tool, const char *key)
{
    nd_buf p;
    nd_buf_init(&p);
    nd_buf_printf(&p, "%s.%s", tool, key);
    nd_buf_putc(paths, *n_paths ? ',' : '[');
    nd_json_write_string(paths, p.data ? p.data : "", p.len, 0);
    if (p.oom) paths->oom = 1;
    nd_buf_free(&p);
    (*n_paths)++;
}

int nd_schema_takes_number(const nd_json *schema, double v, int *bounds_only)
{
    if (bounds_only) *bounds_only = 0;
    if (!schema || nd_json_get(schema, "enum") || nd_json_get(schema, "const")) return 0;
    const nd_json *t = nd_json_get(schema, "type");
    if (!t || t->type != ND_JSON_STRING) return 0;
    if (!strcmp(t->str, "integer")) {
        if (v != floor(v)) return 0;
    } else if (strcmp(t->str, "number")) {
        return 0;
    }
    if (nd_schema_bounds_refuse(schema, v)) {
        if (bounds_only) *bounds_only = 1;
        return 0;
    }
    return 1;
}

int nd_pattern_accepts(const nd_json *schema, const char *text)
{
    const nd_json *p = schema ? nd_json_get(schema, "pattern") : NULL;
    return p && p->type == ND_JSON_STRING && nd_regex_accepts(p->str, p->len, text);
}

int nd_json_set_number_value(nd_json *v, double x)
{
    char text[40];
    if (x == floor(x) && fabs(x) < 1e15) snprintf(text, sizeof text, "%lld", (long long)x);
    else snprintf(text, sizeof text, "%.15g", x);
    size_t n = strlen(text);
    char *copy = malloc(n + 1);
    if (!copy) return NEEDLE_ENOMEM;
    memcpy(copy, text, n + 1);
    free(v->str);
    v->str = copy;
    v->len = n;
    v->num = x;
    return 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

void nd_tokenize(const char *s, nd_tokens *t)
{
    t->n = 0;
    for (size_t i = 0; s[i] && t->n < ND_REPAIR_MAX_TOKENS;) {
        if (is_digit(s[i])) {
            double v = 0;
            while (is_digit(s[i])) v = v * 10 + (s[i++] - '0');
            if (s[i] == '.' && is_digit(s[i + 1]))
                for (double scale = 0.1; is_digit(s[++i]); scale /= 10) v += (s[i] - '0') * scale;
            /* an ordinal's letters ("3rd") belong to the number */
            if ((s[i] == 's' && s[i + 1] == 't') || (s[i] == 'n' && s[i + 1] == 'd') || (s[i] == 'r' && s[i + 1] == 'd') ||
                (s[i] == 't' && s[i + 1] == 'h'))
                if (!is_alpha(s[i + 2])) i += 2;
            strcpy(t->w[t->n], "#");
            t->num[t->n++] = v;
        } else if (is_alpha(s[i])) {
            size_t start = i;
            while (is_alpha(s[i]) || (s[i] == '\'' && is_alpha(s[i + 1]))) i++;
            char one[64];
            size_t n = i - start < sizeof one - 1 ? i - start : sizeof one - 1;
            memcpy(one, s + start, n);
            one[n] = 0;
            nd_lower_words(one, &t->w[t->n], NULL, 1);
            t->num[t->n++] = 0;
        } else {
            i++;
        }
    }
}

int nd_token_is(const nd_tokens *t, int i, const char *w) { return i >= 0 && i < t->n && !strcmp(t->w[i], w); }

int nd_free_string_schema(const nd_json *schema)
{
    const nd_json *t = schema ? nd_json_get(schema, "type") : NULL;
    if (!t || t->type != ND_JSON_STRING || strcmp(t->str, "string") != 0) return 0;
    static const char *const RESTRICT[] = {"enum", "const", "pattern", "format", "minLength", "maxLength"};
    for (size_t i = 0; i < sizeof RESTRICT / sizeof RESTRICT[0]; i++)
        if (nd_json_get(schema, RESTRICT[i])) return 0;
    return 1;
}

/* The reshaping of one call's free texts (nd_reshape_free_texts); refuse
 * (NULL: none) may keep a new text out. */
static int reshape_call(const nd_one_call *one, const nd_json *calls, size_t call, const char *request,
                        int (*wants)(const nd_json *args, size_t k), nd_text_reshape reshape,
                        int (*refuse)(const nd_json *calls, size_t call, const char *text), nd_buf *paths,
                        int *n_paths)
{
    int changed = 0;
    for (size_t k = 0; k < one->args->count; k++) {
        nd_json *v = &one->args->items[k];
        if (v->type != ND_JSON_STRING || v->len == 0 || memchr(v->str, 0, v->len) ||
            !nd_free_string_schema(nd_json_get(one->props, one->args->keys[k])) || !wants(one->args, k))
            continue;
        char *text = reshape(request, one->tool, v->str, v->len);
        if (!text) continue;
        if (refuse && refuse(calls, call, text)) {
            free(text);
            continue;
        }
        free(v->str);
        v->str = text;
        v->len = strlen(text);
        changed++;
        nd_repair_note(paths, n_paths, one->tool, one->args->keys[k]);
    }
    return changed;
}

int nd_reshape_free_texts(nd_json *calls, const nd_json *tools, const char *request,
                          int (*wants)(const nd_json *args, size_t k), nd_text_reshape reshape, nd_buf *paths,
                          int *n_paths)
{
    nd_one_call one;
    if (!request || !nd_repair_one_call(calls, tools, &one)) return 0;
    int changed = reshape_call(&one, calls, 0, request, wants, reshape, NULL, paths, n_paths);
    return paths->oom ? -1 : changed;
}

int nd_reshape_free_texts_each(nd_json *calls, const nd_json *tools, const char *request,
                               int (*wants)(const nd_json *args, size_t k), nd_text_reshape reshape,
                               int (*refuse)(const nd_json *calls, size_t call, const char *text), nd_buf *paths,
                               int *n_paths)
{
    int changed = 0;
    nd_one_call one;
    for (size_t i = 0; request && calls && calls->type == ND_JSON_ARRAY && i < calls->count; i++)
        if (nd_repair_call_at(calls, i, tools, &one))
            changed += reshape_call(&one, calls, i, request, wants, reshape, refuse, paths, n_paths);
    return paths->oom ? -1 : changed;
}

char *nd_copy_text_span(const char *text, size_t begin, size_t end)
{
    if (end <= begin || nd_utf8_first_invalid(text + begin, end - begin) != end - begin) return NULL;
    char *out = malloc(end - begin + 1);
    if (!out) return NULL;
    memcpy(out, text + begin, end - begin);
    out[end - begin] = '\0';
    return out;
}

/* Is call b a near copy of call a: the same tool, the same keys, every value
 * equal but at most one string, one of the two strings inside the other? */
static int near_copy(const nd_json *a, const nd_json *b)
{
    const nd_json *na = nd_json_get(a, "name"), *nb = nd_json_get(b, "name");
    const nd_json *xa = nd_json_get(a, "arguments"), *xb = nd_json_get(b, "arguments");
    if (!na || !nb || !nd_json_equal(na, nb) || !xa || !xb || xa->type != ND_JSON_OBJECT ||
        xb->type != ND_JSON_OBJECT || xa->count != xb->count)
        return 0;
    int differ = 0;
    for (size_t k = 0; k < xa->count; k++) {
        const nd_json *u = &xa->items[k], *v = nd_json_get(xb, xa->keys[k]);
        if (!v) return 0;
        if (nd_json_equal(u, v)) continue;
        if (differ++ || u->type != ND_JSON_STRING || v->type != ND_JSON_STRING || !u->len || !v->len ||
            memchr(u->str, 0, u->len) || memchr(v->str, 0, v->len))
            return 0;
        if (!strstr(u->str, v->str) && !strstr(v->str, u->str)) return 0;
    }
    return 1; /* (an exact copy too: duplicate calls are dropped) */
}

int nd_drop_near_duplicates(nd_json *calls)
{
    int dropped = 0;
    for (size_t i = 1; calls && calls->type == ND_JSON_ARRAY && i < calls->count;) {
        int copy = 0;
        for (size_t j = 0; j < i && !copy; j++) copy = near_copy(&calls->items[j], &calls->items[i]);
        if (copy) {
            nd_json_array_remove(calls, i);
            dropped++;
        } else {
            i++;
        }
    }
    return dropped;
}

int nd_drop_ungrounded_optional(nd_json *calls, const nd_json *tools, const char *ungrounded, const char *outside)
{
    int dropped = 0;
    for (size_t c = 0; ungrounded && tools && calls && calls->type == ND_JSON_ARRAY && c < calls->count; c++) {
        const nd_json *name = nd_json_get(&calls->items[c], "name");
        nd_json *args = (nd_json *)nd_json_get(&calls->items[c], "arguments");
        if (!name || name->type != ND_JSON_STRING || !args || args->type != ND_JSON_OBJECT) continue;
        const nd_json *params = nd_tool_parameters(tools, name->str);
        for (size_t k = 0; params && k < args->count;) {
            const char *key = args->keys[k];
            if (nd_path_listed(ungrounded, name->str, key) && !nd_path_listed(outside, name->str, key) &&
                !nd_schema_required(params, key)) {
                nd_json_object_remove(args, k);
                dropped++;
            } else {
                k++;
            }
        }
    }
    return dropped;
}

int nd_object_put_json(nd_json *obj, const char *key, const char *text, size_t len)
{
    nd_json *value = NULL;
    needle_error perr;
    if (!text || nd_json_parse(text, len, NULL, &value, &perr)) return -1;
    return nd_json_object_put(obj, key, value) ? -1 : 0;
}

/* The rank of an argument: its place in the tool's properties, or after them
 * all in the order it came (a key the schema does not name). */
static size_t argument_rank(const nd_json *props, const char *key, size_t at)
{
    for (size_t k = 0; props && props->type == ND_JSON_OBJECT && k < props->count; k++)
        if (!strcmp(props->keys[k], key)) return k;
    return (props && props->type == ND_JSON_OBJECT ? props->count : 0) + at;
}

void nd_order_arguments(nd_json *calls, const nd_json *tools)
{
    for (size_t i = 0; calls && calls->type == ND_JSON_ARRAY && i < calls->count; i++) {
        const nd_json *name = nd_json_get(&calls->items[i], "name");
        nd_json *args = (nd_json *)nd_json_get(&calls->items[i], "arguments");
        if (!name || name->type != ND_JSON_STRING || !args || args->type != ND_JSON_OBJECT) continue;
        const nd_json *props = nd_json_get(nd_tool_parameters(tools, name->str), "properties");
        /* insertion sort (a handful of members), moving each member's three parts together */
        for (size_t a = 1; a < args->count; a++)
            for (size_t b = a; b > 0 && argument_rank(props, args->keys[b], b) < argument_rank(props, args->keys[b - 1], b - 1);
                 b--) {
                nd_json v = args->items[b];
                args->items[b] = args->items[b - 1];
                args->items[b - 1] = v;
                char *k = args->keys[b];
                args->keys[b] = args->keys[b - 1];
                args->keys[b - 1] = k;
                size_t l = args->key_lens[b];
                args->key_lens[b] = args->key_lens[b - 1];
                args->key_lens[b - 1] = l;
            }
    }
}
