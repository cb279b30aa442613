/* json.c - strict RFC 8259 parser into the nd_json DOM, and a compact writer.
 *
 * The parser is recursive descent with an explicit depth limit (so hostile
 * input cannot exhaust the C stack).  Every node is kept structurally
 * consistent while it is being built (count = number of initialised
 * children), so on any error the whole partial tree is freed from the root.
 */
#include "core/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/utf8.h"

typedef struct parser {
    const unsigned char *s;
    size_t len, pos;
    int depth;
    const char *file;
    needle_error *err;
} parser;

/* ---------------------------------------------------------------- errors */

/* Line and column (1-based, columns in characters) of byte offset `at`. */
static void line_column(const unsigned char *s, size_t at, size_t *line, size_t *col)
{
    size_t l = 1, c = 1;
    for (size_t i = 0; i < at; i++) {
        if (s[i] == '\n') { l++; c = 1; }
        else if ((s[i] & 0xC0) != 0x80) c++; /* count UTF-8 lead bytes only */
    }
    *line = l;
    *col = c;
}

static int fail(parser *p, int code, size_t at, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(parser *p, int code, size_t at, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (at > p->len) at = p->len;
    size_t line, col;
    line_column(p->s, at, &line, &col);
    return nd_errorf(p->err, code, "%s%s%s at line %zu column %zu (byte %zu)", p->file ? p->file : "",
                     p->file ? ": " : "", what, line, col, at);
}

/* A short printable rendering of a byte for messages. */
static const char *show_byte(unsigned char c, char tmp[8])
{
    if (c >= 0x20 && c < 0x7f) snprintf(tmp, 8, "'%c'", c);
    else snprintf(tmp, 8, "0x%02x", c);
    return tmp;
}

/* ---------------------------------------------------------------- freeing */

static void free_contents(nd_json *v)
{
    free(v->str);
    if (v->type == ND_JSON_ARRAY || v->type == ND_JSON_OBJECT) {
        for (size_t i = 0; i < v->count; i++) free_contents(&v->items[i]);
        if (v->keys)
            for (size_t i = 0; i < v->count; i++) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->key_lens);
    memset(v, 0, sizeof *v);
}

void nd_json_free(nd_json *v)
{
    if (!v) return;
    free_contents(v);
    free(v);
}

int nd_json_object_add_string(nd_json *obj, const char *key, const char *value)
{
    size_t n = obj->count;
    char *k = strdup(key), *v = strdup(value);
    nd_json *items = k && v ? realloc(obj->items, (n + 1) * sizeof *items) : NULL;
    if (items) obj->items = items;
    char **keys = items ? realloc(obj->keys, (n + 1) * sizeof *keys) : NULL;
    if (keys) obj->keys = keys;
    size_t *lens = keys ? realloc(obj->key_lens, (n + 1) * sizeof *lens) : NULL;
    if (!lens) {
        free(k);
        free(v);
        return NEEDLE_ENOMEM;
    }
    obj->key_lens = lens;
    memset(&items[n], 0, sizeof items[n]);
    items[n].type = ND_JSON_STRING;
    items[n].str = v;
    items[n].len = strlen(v);
    keys[n] = k;
    lens[n] = strlen(k);
    obj->count = n + 1;
    return 0;
}

void nd_json_object_remove(nd_json *obj, size_t i)
{
    if (obj->type != ND_JSON_OBJECT || i >= obj->count) return;
    free_contents(&obj->items[i]);
    free(obj->keys[i]);
    size_t rest = obj->count - i - 1;
    memmove(&obj->items[i], &obj->items[i + 1], rest * sizeof obj->items[0]);
    memmove(&obj->keys[i], &obj->keys[i + 1], rest * sizeof obj->keys[0]);
    memmove(&obj->key_lens[i], &obj->key_lens[i + 1], rest * sizeof obj->key_lens[0]);
    obj->count--;
}

void nd_json_array_remove(nd_json *arr, size_t i)
{
    if (arr->type != ND_JSON_ARRAY || i >= arr->count) return;
    free_contents(&arr->items[i]);
    memmove(&arr->items[i], &arr->items[i + 1], (arr->count - i - 1) * sizeof arr->items[0]);
    arr->count--;
}

int nd_json_object_put(nd_json *obj, const char *key, nd_json *value)
{
    for (size_t i = 0; i < obj->count; i++)
        if (!strcmp(obj->keys[i], key) && obj->key_lens[i] == strlen(key)) {
            free_contents(&obj->items[i]);
            obj->items[i] = *value;
            free(value);
            return 0;
        }
    /* appended as a string member first, then given the value's contents */
    if (nd_json_object_add_string(obj, key, "")) {
        nd_json_free(value);
        return NEEDLE_ENOMEM;
    }
    free_contents(&obj->items[obj->count - 1]);
    obj->items[obj->count - 1] = *value;
    free(value);
    return 0;
}

/* ---------------------------------------------------------------- parsing */

static int parse_value(parser *p, nd_json *out);

static void skip_ws(parser *p)
{
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static int hex4(const unsigned char *s, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

/* Parse a string starting at the opening quote; *out gets a malloc'd,
 * NUL-terminated decoded copy. */
static int parse_string(parser *p, char **out, size_t *out_len)
{
    size_t start = p->pos;
    p->pos++; /* opening quote */
    /* Find the closing quote first: the decoded text is never longer than the
     * raw text, so one allocation of that size suffices. */
    size_t end = p->pos;
    while (end < p->len && p->s[end] != '"') end += (p->s[end] == '\\') ? 2 : 1;
    if (end >= p->len) return fail(p, NEEDLE_EJSON, start, "unterminated string");
    char *buf = malloc(end - p->pos + 1);
    if (!buf) return fail(p, NEEDLE_ENOMEM, start, "out of memory");
    size_t n = 0;
    while (p->pos < end) {
        unsigned char c = p->s[p->pos];
        if (c < 0x20) {
            free(buf);
            return fail(p, NEEDLE_EJSON, p->pos, "unescaped control character 0x%02x in string", c);
        }
        if (c >= 0x80) {
            size_t k = nd_utf8_valid_len(p->s + p->pos, end - p->pos);
            if (!k) { free(buf); return fail(p, NEEDLE_EUTF8, p->pos, "invalid UTF-8 in string"); }
            memcpy(buf + n, p->s + p->pos, k);
            n += k;
            p->pos += k;
            continue;
        }
        if (c != '\\') { buf[n++] = (char)c; p->pos++; continue; }
        size_t esc = p->pos;
        unsigned char e = p->s[p->pos + 1]; /* in bounds: the scan above stepped over it */
        p->pos += 2;
        switch (e) {
        case '"': buf[n++] = '"'; break;
        case '\\': buf[n++] = '\\'; break;
        case '/': buf[n++] = '/'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case 'n': buf[n++] = '\n'; break;
        case 'r': buf[n++] = '\r'; break;
        case 't': buf[n++] = '\t'; break;
        case 'u': {
            uint32_t cp;
            if (p->pos + 4 > end || !hex4(p->s + p->pos, &cp)) {
                free(buf);
                return fail(p, NEEDLE_EJSON, esc, "bad \\u escape (4 hex digits expected)");
            }
            p->pos += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                free(buf);
                return fail(p, NEEDLE_EUTF8, esc, "lone low surrogate \\u%04x", (unsigned)cp);
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t lo;
                if (p->pos + 6 > end || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u' ||
                    !hex4(p->s + p->pos + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                    free(buf);
                    return fail(p, NEEDLE_EUTF8, esc, "high surrogate \\u%04x not followed by a low surrogate",
                                (unsigned)cp);
                }
                p->pos += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            n += nd_utf8_encode(cp, buf + n);
            break;
        }
        default: {
            char tmp[8];
            free(buf);
            return fail(p, NEEDLE_EJSON, esc, "invalid escape \\%s", show_byte(e, tmp));
        }
        }
    }
    buf[n] = '\0';
    p->pos = end + 1;
    *out = buf;
    *out_len = n;
    return 0;
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static int parse_number(parser *p, nd_json *out)
{
    size_t start = p->pos, i = p->pos;
    const unsigned char *s = p->s;
    if (i < p->len && s[i] == '-') i++;
    if (i >= p->len || !is_digit(s[i])) return fail(p, NEEDLE_EJSON, i, "digit expected in number");
    if (s[i] == '0') {
        i++;
        if (i < p->len && is_digit(s[i])) return fail(p, NEEDLE_EJSON, start, "leading zero in number");
    } else {
        while (i < p->len && is_digit(s[i])) i++;
    }
    if (i < p->len && s[i] == '.') {
        i++;
        if (i >= p->len || !is_digit(s[i])) return fail(p, NEEDLE_EJSON, i, "digit expected after decimal point");
        while (i < p->len && is_digit(s[i])) i++;
    }
    if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < p->len && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= p->len || !is_digit(s[i])) return fail(p, NEEDLE_EJSON, i, "digit expected in exponent");
        while (i < p->len && is_digit(s[i])) i++;
    }
    size_t n = i - start;
    out->str = malloc(n + 1);
    if (!out->str) return fail(p, NEEDLE_ENOMEM, start, "out of memory");
    memcpy(out->str, s + start, n);
    out->str[n] = '\0';
    out->len = n;
    out->num = strtod(out->str, NULL); /* the grammar above is a subset of strtod's */
    p->pos = i;
    return 0;
}

static int literal(parser *p, const char *word, nd_json_type type, nd_json *out)
{
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return fail(p, NEEDLE_EJSON, p->pos, "invalid literal (expected %s)", word);
    out->type = type;
    p->pos += n;
    return 0;
}

/* Grow an array or object node so it can hold one more member. */
static int grow(parser *p, nd_json *v, size_t *cap, int with_keys)
{
    if (v->count < *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 4;
    if (nc > ((size_t)-1) / sizeof(nd_json)) return fail(p, NEEDLE_ENOMEM, p->pos, "out of memory");
    nd_json *items = realloc(v->items, nc * sizeof *items);
    if (!items) return fail(p, NEEDLE_ENOMEM, p->pos, "out of memory");
    v->items = items;
    if (with_keys) {
        char **keys = realloc(v->keys, nc * sizeof *keys);
        if (!keys) return fail(p, NEEDLE_ENOMEM, p->pos, "out of memory");
        v->keys = keys;
        size_t *kl = realloc(v->key_lens, nc * sizeof *kl);
        if (!kl) return fail(p, NEEDLE_ENOMEM, p->pos, "out of memory");
        v->key_lens = kl;
    }
    *cap = nc;
    return 0;
}

static int enter(parser *p)
{
    if (++p->depth > ND_JSON_MAX_DEPTH)
        return fail(p, NEEDLE_ELIMIT, p->pos, "nesting deeper than %d", ND_JSON_MAX_DEPTH);
    return 0;
}

static int parse_array(parser *p, nd_json *out)
{
    out->type = ND_JSON_ARRAY;
    int rc = enter(p);
    if (rc) return rc;
    size_t cap = 0;
    p->pos++; /* '[' */
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == ']') { p->pos++; p->depth--; return 0; }
    for (;;) {
        if ((rc = grow(p, out, &cap, 0))) return rc;
        nd_json *item = &out->items[out->count++];
        memset(item, 0, sizeof *item);
        if ((rc = parse_value(p, item))) return rc;
        skip_ws(p);
        if (p->pos >= p->len) return fail(p, NEEDLE_EJSON, p->pos, "unexpected end of input in array");
        unsigned char c = p->s[p->pos];
        if (c == ']') { p->pos++; break; }
        if (c != ',') {
            char tmp[8];
            return fail(p, NEEDLE_EJSON, p->pos, "expected ',' or ']' in array, got %s", show_byte(c, tmp));
        }
        p->pos++;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ']') return fail(p, NEEDLE_EJSON, p->pos, "trailing comma in array");
    }
    p->depth--;
    return 0;
}

static uint64_t key_hash(const char *k, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
    return h;
}

static int same_key(const nd_json *o, size_t a, size_t b)
{
    return o->key_lens[a] == o->key_lens[b] && memcmp(o->keys[a], o->keys[b], o->key_lens[a]) == 0;
}

/* Index of a member whose key repeats an earlier one, or o->count if none.
 * Small objects compare pairwise; large ones use a hash table so hostile
 * input with many keys stays linear. */
static size_t find_duplicate_key(const nd_json *o, int *oom)
{
    *oom = 0;
    if (o->count <= 16) {
        for (size_t i = 1; i < o->count; i++)
            for (size_t j = 0; j < i; j++)
                if (same_key(o, i, j)) return i;
        return o->count;
    }
    size_t nslots = 32;
    while (nslots < o->count * 2) nslots *= 2;
    size_t *slots = malloc(nslots * sizeof *slots);
    if (!slots) { *oom = 1; return o->count; }
    for (size_t i = 0; i < nslots; i++) slots[i] = (size_t)-1;
    size_t dup = o->count;
    for (size_t i = 0; i < o->count && dup == o->count; i++) {
        size_t h = (size_t)key_hash(o->keys[i], o->key_lens[i]) & (nslots - 1);
        while (slots[h] != (size_t)-1) {
            if (same_key(o, i, slots[h])) { dup = i; break; }
            h = (h + 1) & (nslots - 1);
        }
        slots[h] = i;
    }
    free(slots);
    return dup;
}

static int parse_object(parser *p, nd_json *out)
{
    out->type = ND_JSON_OBJECT;
    int rc = enter(p);
    if (rc) return rc;
    size_t cap = 0;
    p->pos++; /* '{' */
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == '}') { p->pos++; p->depth--; return 0; }
    for (;;) {
        if (p->pos >= p->len) return fail(p, NEEDLE_EJSON, p->pos, "unexpected end of input in object");
        if (p->s[p->pos] != '"') {
            char tmp[8];
            return fail(p, NEEDLE_EJSON, p->pos, "expected a string key in object, got %s",
                        show_byte(p->s[p->pos], tmp));
        }
        char *key;
        size_t klen;
        if ((rc = parse_string(p, &key, &klen))) return rc;
        skip_ws(p);
        if (p->pos >= p->len || p->s[p->pos] != ':') {
            free(key);
            return fail(p, NEEDLE_EJSON, p->pos, "expected ':' after object key");
        }
        p->pos++;
        if ((rc = grow(p, out, &cap, 1))) { free(key); return rc; }
        out->keys[out->count] = key;
        out->key_lens[out->count] = klen;
        nd_json *item = &out->items[out->count++];
        memset(item, 0, sizeof *item);
        if ((rc = parse_value(p, item))) return rc;
        skip_ws(p);
        if (p->pos >= p->len) return fail(p, NEEDLE_EJSON, p->pos, "unexpected end of input in object");
        unsigned char c = p->s[p->pos];
        if (c == '}') { p->pos++; break; }
        if (c != ',') {
            char tmp[8];
            return fail(p, NEEDLE_EJSON, p->pos, "expected ',' or '}' in object, got %s", show_byte(c, tmp));
        }
        p->pos++;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == '}') return fail(p, NEEDLE_EJSON, p->pos, "trailing comma in object");
    }
    int oom;
    size_t dup = find_duplicate_key(out, &oom);
    if (oom) return fail(p, NEEDLE_ENOMEM, out->offset, "out of memory");
    if (dup < out->count) {
        /* show the key printable and short: it may hold any bytes */
        char shown[48];
        size_t n = 0;
        for (size_t i = 0; i < out->key_lens[dup] && n < 40; i++) {
            unsigned char c = (unsigned char)out->keys[dup][i];
            shown[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
        }
        shown[n] = '\0';
        return fail(p, NEEDLE_EJSON, out->items[dup].offset, "duplicate object key \"%s\"", shown);
    }
    p->depth--;
    return 0;
}

static int parse_value(parser *p, nd_json *out)
{
    skip_ws(p);
    out->offset = p->pos;
    if (p->pos >= p->len) return fail(p, NEEDLE_EJSON, p->pos, "unexpected end of input (a value expected)");
    unsigned char c = p->s[p->pos];
    switch (c) {
    case '{': return parse_object(p, out);
    case '[': return parse_array(p, out);
    case '"':
        out->type = ND_JSON_STRING;
        return parse_string(p, &out->str, &out->len);
    case 't': return literal(p, "true", ND_JSON_TRUE, out);
    case 'f': return literal(p, "false", ND_JSON_FALSE, out);
    case 'n': return literal(p, "null", ND_JSON_NULL, out);
    default:
        if (c == '-' || is_digit(c)) {
            out->type = ND_JSON_NUMBER;
            return parse_number(p, out);
        }
        {
            char tmp[8];
            return fail(p, NEEDLE_EJSON, p->pos, "unexpected character %s (a value expected)", show_byte(c, tmp));
        }
    }
}

int nd_json_parse(const char *text, size_t len, const char *what_file, nd_json **out, needle_error *err)
{
    *out = NULL;
    parser p = {(const unsigned char *)text, len, 0, 0, what_file, err};
    if (len > ND_JSON_MAX_BYTES) return fail(&p, NEEDLE_ELIMIT, 0, "JSON text larger than %u bytes", ND_JSON_MAX_BYTES);
    if (!text && len) return nd_errorf(err, NEEDLE_EINVAL, "%s: NULL JSON text", what_file ? what_file : "json");
    nd_json *root = calloc(1, sizeof *root);
    if (!root) return fail(&p, NEEDLE_ENOMEM, 0, "out of memory");
    int rc = parse_value(&p, root);
    if (!rc) {
        skip_ws(&p);
        if (p.pos < p.len) {
            char tmp[8];
            rc = fail(&p, NEEDLE_EJSON, p.pos, "unexpected %s after the JSON value", show_byte(p.s[p.pos], tmp));
        }
    }
    if (rc) {
        nd_json_free(root);
        return rc;
    }
    *out = root;
    return 0;
}

const nd_json *nd_json_get(const nd_json *v, const char *key)
{
    if (!v || v->type != ND_JSON_OBJECT || !key) return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < v->count; i++)
        if (v->key_lens[i] == n && memcmp(v->keys[i], key, n) == 0) return &v->items[i];
    return NULL;
}

/* ---------------------------------------------------------------- writing */

static const char hexdigits[] = "0123456789abcdef";

static void put_u_escape(nd_buf *b, uint32_t u)
{
    char e[6] = {'\\', 'u', hexdigits[(u >> 12) & 15], hexdigits[(u >> 8) & 15], hexdigits[(u >> 4) & 15],
                 hexdigits[u & 15]};
    nd_buf_append(b, e, 6);
}

void nd_json_print_error_line(FILE *to, const char *msg)
{
    nd_buf b;
    nd_buf_init(&b);
    nd_buf_puts(&b, "{\"error\":");
    nd_json_write_string(&b, msg, strlen(msg), 1);
    nd_buf_puts(&b, "}\n");
    if (!b.oom) fwrite(b.data, 1, b.len, to);
    nd_buf_free(&b);
}

void nd_json_write_string(nd_buf *b, const char *s, size_t n, int ascii_only)
{
    const unsigned char *u = (const unsigned char *)s;
    nd_buf_putc(b, '"');
    size_t i = 0;
    while (i < n) {
        unsigned char c = u[i];
        /* copy a run of characters that need no escaping in one append */
        size_t run = i;
        while (run < n && u[run] >= 0x20 && u[run] != '"' && u[run] != '\\' &&
               (u[run] < 0x7f || (u[run] == 0x7f && !ascii_only)))
            run++;
        if (run > i) { nd_buf_append(b, u + i, run - i); i = run; continue; }
        switch (c) {
        case '"': nd_buf_append(b, "\\\"", 2); i++; continue;
        case '\\': nd_buf_append(b, "\\\\", 2); i++; continue;
        case '\n': nd_buf_append(b, "\\n", 2); i++; continue;
        case '\r': nd_buf_append(b, "\\r", 2); i++; continue;
        case '\t': nd_buf_append(b, "\\t", 2); i++; continue;
        case '\b': nd_buf_append(b, "\\b", 2); i++; continue;
        case '\f': nd_buf_append(b, "\\f", 2); i++; continue;
        default: break;
        }
        if (c < 0x80) { /* other control characters, and DEL when ascii_only (as Python does) */
            put_u_escape(b, c);
            i++;
            continue;
        }
        size_t k = nd_utf8_valid_len(u + i, n - i);
        if (!k) {
            /* not UTF-8: the DOM never holds this, but callers may pass raw
             * bytes; write U+FFFD so the output is always valid JSON */
            if (ascii_only) put_u_escape(b, 0xFFFD);
            else nd_buf_append(b, "\xEF\xBF\xBD", 3);
            i++;
            continue;
        }
        if (!ascii_only) { nd_buf_append(b, u + i, k); i += k; continue; }
        uint32_t cp;
        nd_utf8_decode(u + i, k, &cp);
        i += k;
        if (cp >= 0x10000) {
            cp -= 0x10000;
            put_u_escape(b, 0xD800 + (cp >> 10));
            put_u_escape(b, 0xDC00 + (cp & 0x3FF));
        } else {
            put_u_escape(b, cp);
        }
    }
    nd_buf_putc(b, '"');
}

/* Numbers built in code (no literal text): the shortest %.*g that reads back. */
static void write_double(nd_buf *b, double d)
{
    if (!isfinite(d)) { nd_buf_puts(b, "null"); return; }
    char tmp[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, d);
        if (strtod(tmp, NULL) == d) break;
    }
    nd_buf_puts(b, tmp);
}

void nd_json_write(nd_buf *b, const nd_json *v, int ascii_only)
{
    switch (v->type) {
    case ND_JSON_NULL: nd_buf_puts(b, "null"); return;
    case ND_JSON_FALSE: nd_buf_puts(b, "false"); return;
    case ND_JSON_TRUE: nd_buf_puts(b, "true"); return;
    case ND_JSON_NUMBER:
        if (v->str) nd_buf_append(b, v->str, v->len);
        else write_double(b, v->num);
        return;
    case ND_JSON_STRING: nd_json_write_string(b, v->str ? v->str : "", v->str ? v->len : 0, ascii_only); return;
    case ND_JSON_ARRAY:
        nd_buf_putc(b, '[');
        for (size_t i = 0; i < v->count; i++) {
            if (i) nd_buf_putc(b, ',');
            nd_json_write(b, &v->items[i], ascii_only);
        }
        nd_buf_putc(b, ']');
        return;
    case ND_JSON_OBJECT:
        nd_buf_putc(b, '{');
        for (size_t i = 0; i < v->count; i++) {
            if (i) nd_buf_putc(b, ',');
            nd_json_write_string(b, v->keys[i], v->key_lens[i], ascii_only);
            nd_buf_putc(b, ':');
            nd_json_write(b, &v->items[i], ascii_only);
        }
        nd_buf_putc(b, '}');
        return;
    }
}

int nd_json_equal(const nd_json *a, const nd_json *b)
{
    if (!a || !b) return a == b;
    if (a->type != b->type) return 0;
    switch (a->type) {
    case ND_JSON_NULL:
    case ND_JSON_FALSE:
    case ND_JSON_TRUE: return 1;
    case ND_JSON_NUMBER: return a->num == b->num;
    case ND_JSON_STRING: return a->len == b->len && (a->len == 0 || memcmp(a->str, b->str, a->len) == 0);
    case ND_JSON_ARRAY:
        if (a->count != b->count) return 0;
        for (size_t i = 0; i < a->count; i++)
            if (!nd_json_equal(&a->items[i], &b->items[i])) return 0;
        return 1;
    case ND_JSON_OBJECT:
        if (a->count != b->count) return 0;
        /* keys are unique in a parsed object, so equal counts + every key of a
         * found in b with an equal value means the member sets are equal */
        for (size_t i = 0; i < a->count; i++) {
            const nd_json *bv = NULL;
            for (size_t j = 0; j < b->count; j++)
                if (b->key_lens[j] == a->key_lens[i] && memcmp(b->keys[j], a->keys[i], a->key_lens[i]) == 0) {
                    bv = &b->items[j];
                    break;
                }
            if (!bv || !nd_json_equal(&a->items[i], bv)) return 0;
        }
        return 1;
    }
    return 0;
}
