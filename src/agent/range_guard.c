/* range_guard.c - see range_guard.h. */
#include "agent/range_guard.h"

#include <stdio.h>
#include <string.h>

void nd_json_lexpos_feed(nd_json_lexpos *p, const char *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = bytes[i];
        if (!p->in_string) {
            if (c == '"') p->in_string = 1;
        } else if (p->escape) {
            p->escape = 0;
        } else if (c == '\\') {
            p->escape = 1;
        } else if (c == '"') {
            p->in_string = 0;
        }
    }
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* 0: not number characters alone; 1: a lone sign ("-", "--"); 2: number
 * characters with a digit or '.'. */
static int numeric_token(const char *t, size_t n)
{
    int kind = n > 0;
    for (size_t i = 0; i < n; i++) {
        if (is_digit(t[i]) || t[i] == '.') kind = 2;
        else if (t[i] != '-') return 0;
    }
    return kind;
}

int nd_range_refused(const nd_json_lexpos *p, const char *text, size_t len, const char *want, size_t want_len,
                     const char *got, size_t got_len)
{
    int kind = want ? numeric_token(want, want_len) : 0;
    if (p->in_string || kind == 0 || len == 0) return 0;
    char last = text[len - 1];
    if (is_digit(last) || last == '.' || last == '-') {
        if (kind != 2) return 0; /* a sign inside a number is JSON's refusal, not the schema's */
        /* the number written so far: back to the character before it */
        size_t start = len;
        while (start > 0 && (is_digit(text[start - 1]) || strchr(".-+eE", text[start - 1]))) start--;
        size_t nlen = len - start;
        const char *num = text + start;
        /* JSON's leading-zero rule, not the schema, refuses a digit after "0" */
        if ((nlen == 1 && num[0] == '0') || (nlen == 2 && num[0] == '-' && num[1] == '0')) return 0;
        return 1;
    }
    if (last == ':' || last == ',' || last == '[')
        return got && got_len > 0 && (is_digit(got[0]) || got[0] == '-');
    return 0;
}

/* The string that ends at the quote text[q] (text[q] == '"'), copied to out
 * without its quotes; escapes are kept as written.  0 when none. */
static int string_before(const char *text, size_t q, char *out, size_t cap)
{
    size_t s = q;
    while (s > 0) {
        s--;
        if (text[s] == '"') {
            size_t bs = 0; /* an escaped quote is preceded by an odd run of backslashes */
            while (s >= bs + 1 && text[s - bs - 1] == '\\') bs++;
            if (bs % 2 == 0) break;
        }
    }
    if (text[s] != '"' || s == q) return 0;
    size_t n = q - s - 1;
    if (n >= cap) n = cap - 1;
    memcpy(out, text + s + 1, n);
    out[n] = 0;
    return 1;
}

void nd_range_path(const char *text, size_t at, char *out, size_t cap)
{
    char tool[128] = "?", key[128] = "?";
    if (cap == 0) return;
    /* the innermost key: the last `"KEY":` before `at` */
    for (size_t i = at; i > 1; i--)
        if (text[i - 1] == ':' && text[i - 2] == '"') {
            if (!string_before(text, i - 2, key, sizeof key)) strcpy(key, "?");
            break;
        }
    /* the call: the last `"name":"TOOL"` before `at` */
    static const char marker[] = "\"name\":\"";
    size_t ml = sizeof marker - 1;
    for (size_t i = at >= ml ? at - ml + 1 : 0; i > 0; i--) {
        if (memcmp(text + i - 1, marker, ml) == 0) {
            size_t s = i - 1 + ml, e = s;
            while (e < at && text[e] != '"') e++;
            size_t n = e - s < sizeof tool - 1 ? e - s : sizeof tool - 1;
            memcpy(tool, text + s, n);
            tool[n] = 0;
            break;
        }
    }
    snprintf(out, cap, "%s.%s", tool, key);
}

/* The property `key` in schema's properties, or in any nested object or
 * array item schema below them (depth-first); NULL when none. */
static const nd_json *find_property(const nd_json *schema, const char *key, int depth)
{
    if (!schema || schema->type != ND_JSON_OBJECT || depth > 16) return NULL;
    const nd_json *props = nd_json_get(schema, "properties");
    const nd_json *hit = props && props->type == ND_JSON_OBJECT ? nd_json_get(props, key) : NULL;
    if (hit) return hit;
    for (size_t i = 0; props && props->type == ND_JSON_OBJECT && i < props->count; i++) {
        const nd_json *sub = &props->items[i];
        if ((hit = find_property(sub, key, depth + 1))) return hit;
        if (sub->type == ND_JSON_OBJECT && (hit = find_property(nd_json_get(sub, "items"), key, depth + 1))) return hit;
    }
    return NULL;
}

int nd_range_closed_string(const nd_json *tools, const char *path)
{
    const char *dot = strchr(path, '.');
    if (!tools || tools->type != ND_JSON_ARRAY || !dot) return 0;
    size_t tn = (size_t)(dot - path);
    for (size_t i = 0; i < tools->count; i++) {
        const nd_json *name = nd_json_get(&tools->items[i], "name");
        if (!name || name->type != ND_JSON_STRING || name->len != tn || memcmp(name->str, path, tn) != 0) continue;
        const nd_json *p = find_property(nd_json_get(&tools->items[i], "parameters"), dot + 1, 0);
        if (p && p->type == ND_JSON_OBJECT) {
            const nd_json *items = nd_json_get(p, "items"); /* "days": {"type": "array", "items": {"enum": ...}} */
            if (items && items->type == ND_JSON_OBJECT) p = items;
            return nd_json_get(p, "enum") || nd_json_get(p, "const") || nd_json_get(p, "pattern") ||
                   nd_json_get(p, "format");
        }
        return 0;
    }
    return 0;
}
