/* schema.c - compile declared tools' JSON Schemas into grammar nodes.
 *
 * One recursive pass builds nodes from schemas (see schema.h for the choices
 * made); then $ref placeholders are resolved, anyOf lists flattened, the byte
 * sets that can start each value computed, and the minimum stack depth each
 * value needs (a fixpoint, because $ref makes the node graph cyclic).  The
 * runtime relies on that depth to refuse entering values it could not finish.
 */
#include "grammar/schema.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"

#define MAX_SCHEMA_DEPTH 64
#define INT_LIMIT 999999999999999999LL /* 18 digits */
#define NUM_LIMIT 999999999999999.0    /* 15 digits */

typedef struct ref_entry {
    const nd_json *root;
    char *ref;
    int node;
} ref_entry;

typedef struct ctx {
    nd_grammar *g;
    needle_error *err;
    const nd_json *doc_root; /* the schema document $ref pointers resolve in */
    ref_entry *refs;
    int n_refs, cap_refs;
    int any_node;            /* the shared "any JSON value" node, -1 until built */
    int free_string_node;    /* shared free string (map keys) */
    /* > 0 while compiling a schema the agent's checks do not reach by
     * following a call's arguments through properties and items: under $ref,
     * anyOf, oneOf, allOf, tuple items (prefixItems, items as an array) and
     * additionalItems / additionalProperties (see check_keywords) */
    int indirect;
} ctx;

enum { T_NULL = 1, T_BOOL = 2, T_INT = 4, T_NUM = 8, T_STR = 16, T_ARR = 32, T_OBJ = 64, T_ALL = 127 };

/* ------------------------------------------------------------ nodes */

static int new_node(ctx *c, nd_gnode_kind kind, const char *path)
{
    nd_grammar *g = c->g;
    if (g->n_nodes >= ND_G_MAX_NODES)
        return nd_errorf(c->err, NEEDLE_ELIMIT, "%s: schema too large (more than %d grammar nodes)", path,
                         ND_G_MAX_NODES);
    if (g->n_nodes == g->cap) {
        int cap = g->cap ? g->cap * 2 : 64;
        nd_gnode *p = realloc(g->nodes, (size_t)cap * sizeof *p);
        if (!p) return nd_errorf(c->err, NEEDLE_ENOMEM, "%s: out of memory", path);
        g->nodes = p;
        g->cap = cap;
    }
    nd_gnode *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->items = -1;
    n->target = -1;
    n->key_node = n->value_node = -1;
    n->max_len = UINT32_MAX;
    n->max_items = UINT32_MAX;
    n->mult = 1;
    n->nmin = -INFINITY;
    n->nmax = INFINITY;
    n->dfa.start = -1;
    return g->n_nodes++;
}

static void free_node(nd_gnode *n)
{
    for (int i = 0; i < n->n_lits; i++) free(n->lits[i]);
    free(n->lits);
    free(n->lit_lens);
    nd_dfa_free(&n->dfa);
    free(n->lens);
    free(n->prefix);
    for (int i = 0; i < n->n_props; i++) free(n->props[i].key);
    free(n->props);
    free(n->alts);
}

void nd_schema_free(nd_grammar *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_nodes; i++) free_node(&g->nodes[i]);
    free(g->nodes);
    for (size_t i = 0; i < g->n_tools; i++) free(g->tool_names[i]);
    free(g->tool_names);
    nd_copy_source_free(g->copy);
    free(g);
}

/* ------------------------------------------------------------ keyword tables */

/* Keywords that constrain values and that we do not enforce: an error, never ignored. */
static const char *const unsupported_keywords[] = {
    "not", "if", "then", "else", "patternProperties", "dependentRequired", "dependentSchemas", "dependencies",
    "contains", "minContains", "maxContains", "propertyNames", "unevaluatedProperties", "unevaluatedItems",
    "$dynamicRef", "$recursiveRef", "contentSchema", NULL};

/* Keywords that constrain the value directly (used to reject them beside $ref/anyOf). */
static const char *const value_keywords[] = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "items", "prefixItems",
    "additionalItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "anyOf", "oneOf", "allOf", "$ref",
    "minProperties", "maxProperties", NULL};

static int in_list(const char *k, const char *const *list)
{
    for (int i = 0; list[i]; i++)
        if (strcmp(k, list[i]) == 0) return 1;
    return 0;
}

/* Reject unsupported keywords.  `uniqueItems: true` is enforced after
 * decoding, not by the grammar: the agent's checks (agent/grounding.c) withhold
 * a call whose array repeats an item, and they follow a call's arguments
 * through properties and items only, so it is accepted on those paths alone
 * (not under $ref, anyOf, oneOf, allOf, tuple items or additional*: ctx.indirect). */
static int check_keywords(ctx *c, const nd_json *s, const char *path)
{
    for (size_t i = 0; i < s->count; i++) {
        const char *k = s->keys[i];
        if (in_list(k, unsupported_keywords))
            return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s: unsupported keyword \"%s\"", path, k);
        if (strcmp(k, "uniqueItems") == 0 && s->items[i].type == ND_JSON_TRUE && c->indirect > 0)
            return nd_errorf(c->err, NEEDLE_ESCHEMA,
                             "%s: \"uniqueItems\" (true) is supported only where properties and items lead to it",
                             path);
    }
    return 0;
}

/* The first value keyword in s other than `except` (NULL when none). */
static const char *other_value_keyword(const nd_json *s, const char *const *except)
{
    for (size_t i = 0; i < s->count; i++)
        if (in_list(s->keys[i], value_keywords) && !in_list(s->keys[i], except)) return s->keys[i];
    return NULL;
}

/* ------------------------------------------------------------ small readers */

static int get_count(ctx *c, const nd_json *s, const char *key, const char *path, uint32_t *out, int *present)
{
    const nd_json *v = nd_json_get(s, key);
    *present = 0;
    if (!v) return 0;
    if (v->type != ND_JSON_NUMBER || v->num < 0 || v->num != floor(v->num))
        return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.%s: must be a non-negative integer", path, key);
    *out = v->num > 4e9 ? 4000000000u : (uint32_t)v->num;
    *present = 1;
    return 0;
}

static int get_number(ctx *c, const nd_json *s, const char *key, const char *path, double *out, int *present)
{
    const nd_json *v = nd_json_get(s, key);
    *present = 0;
    if (!v) return 0;
    if (v->type != ND_JSON_NUMBER) return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.%s: must be a number", path, key);
    *out = v->num;
    *present = 1;
    return 0;
}

static int type_bit(const nd_json *v)
{
    if (v->type != ND_JSON_STRING) return -1;
    const char *t = v->str;
    if (!strcmp(t, "null")) return T_NULL;
    if (!strcmp(t, "boolean")) return T_BOOL;
    if (!strcmp(t, "integer")) return T_INT;
    if (!strcmp(t, "number")) return T_NUM;
    if (!strcmp(t, "string")) return T_STR;
    if (!strcmp(t, "array")) return T_ARR;
    if (!strcmp(t, "object")) return T_OBJ;
    return -1;
}

/* ------------------------------------------------------------ leaves */

static int add_literal(ctx *c, int id, const char *bytes, size_t n, const char *path)
{
    nd_gnode *nd = &c->g->nodes[id];
    for (int i = 0; i < nd->n_lits; i++)
        if (nd->lit_lens[i] == n && memcmp(nd->lits[i], bytes, n) == 0) return 0; /* duplicate */
    char **l = realloc(nd->lits, (size_t)(nd->n_lits + 1) * sizeof *l);
    if (l) nd->lits = l;
    uint32_t *ll = realloc(nd->lit_lens, (size_t)(nd->n_lits + 1) * sizeof *ll);
    if (ll) nd->lit_lens = ll;
    char *s = malloc(n + 1);
    if (!l || !ll || !s) {
        free(s);
        return nd_errorf(c->err, NEEDLE_ENOMEM, "%s: out of memory", path);
    }
    memcpy(s, bytes, n);
    s[n] = 0;
    nd->lits[nd->n_lits] = s;
    nd->lit_lens[nd->n_lits] = (uint32_t)n;
    nd->n_lits++;
    return 0;
}

static int literal_node(ctx *c, const char *const *words, int n, const char *path)
{
    int id = new_node(c, ND_G_LITERAL, path);
    if (id < 0) return id;
    for (int i = 0; i < n; i++) {
        int rc = add_literal(c, id, words[i], strlen(words[i]), path);
        if (rc < 0) return rc;
    }
    return id;
}

/* Per DFA state, the set of lengths with which acceptance can be reached
 * (bits 0..cap; for unbounded strings bit cap means "cap or more"). */
static int compute_lengths(ctx *c, int id, const char *path)
{
    nd_gnode *n = &c->g->nodes[id];
    const nd_dfa *d = &n->dfa;
    int ns = d->n_states;
    if (ns == 0) return 0;
    int bounded = n->max_len != UINT32_MAX;
    if (bounded && (uint64_t)(n->max_len + 1ull) * (uint64_t)ns > (1ull << 24)) {
        /* narrowing maxLength keeps every output valid: only memory is saved */
        uint32_t m = (uint32_t)((1ull << 24) / (uint64_t)ns) - 1;
        if (m < n->min_len)
            return nd_errorf(c->err, NEEDLE_ELIMIT, "%s: string length bounds too large for this pattern", path);
        n->max_len = m;
    }
    uint32_t cap = bounded ? n->max_len : n->min_len;
    if ((uint64_t)cap * (uint64_t)ns > (1ull << 26))
        return nd_errorf(c->err, NEEDLE_ELIMIT, "%s: string length bounds too large for this pattern", path);
    n->lens_cap = cap;
    n->lens_words = cap / 64 + 1;
    n->lens = calloc((size_t)ns * n->lens_words, sizeof *n->lens);
    uint8_t *cur = calloc((size_t)ns, 1), *nxt = calloc((size_t)ns, 1);
    if (!n->lens || !cur || !nxt) {
        free(cur);
        free(nxt);
        return nd_errorf(c->err, NEEDLE_ENOMEM, "%s: out of memory", path);
    }
    /* R_k = states that reach acceptance in exactly k steps.  Lengths past cap
     * only matter as "some length >= cap"; by pumping, if one exists then one
     * exists in [cap, cap + ns), so the layers stop there. */
    for (int s = 0; s < ns; s++) cur[s] = d->accept[s];
    uint64_t last = bounded ? cap : (uint64_t)cap + (uint64_t)ns;
    for (uint64_t k = 0; k <= last; k++) {
        uint32_t bit = k < cap ? (uint32_t)k : cap;
        int any = 0;
        for (int s = 0; s < ns; s++)
            if (cur[s]) {
                n->lens[(size_t)s * n->lens_words + bit / 64] |= 1ull << (bit % 64);
                any = 1;
            }
        if (!any) break;
        memset(nxt, 0, (size_t)ns);
        for (int s = 0; s < ns; s++)
            for (int32_t e = d->edge_start[s]; e < d->edge_start[s + 1]; e++)
                if (cur[d->edges[e].to]) { nxt[s] = 1; break; }
        uint8_t *t = cur;
        cur = nxt;
        nxt = t;
    }
    free(cur);
    free(nxt);
    return 0;
}

int nd_string_viable(const nd_gnode *n, int32_t state, uint32_t count)
{
    if (state < 0) return 0;
    if (n->free_string) return 1;
    uint32_t lo = n->min_len > count ? n->min_len - count : 0, hi;
    if (n->max_len != UINT32_MAX) {
        if (count > n->max_len) return 0;
        hi = n->max_len - count;
    } else {
        hi = n->lens_cap;
        if (lo > n->lens_cap) lo = n->lens_cap; /* unbounded: the top bit means ">= cap" */
    }
    if (lo > hi) return 0;
    const uint64_t *w = n->lens + (size_t)state * n->lens_words;
    for (uint32_t i = lo / 64; i <= hi / 64; i++) {
        uint64_t m = w[i];
        if (i == lo / 64) m &= ~0ull << (lo % 64);
        if (i == hi / 64 && hi % 64 != 63) m &= (1ull << (hi % 64 + 1)) - 1;
        if (m) return 1;
    }
    return 0;
}

/* Is there a multiple of m in [lo, hi]? */
static int has_multiple(int64_t lo, int64_t hi, int64_t m)
{
    if (lo > hi) return 0;
    if (m <= 1) return 1;
    int64_t q = lo / m;
    if (q * m < lo) q++;
    return q * m <= hi;
}

/* Can an integer whose digits so far are v (ndigits of them, sign neg) still
 * end inside [imin, imax] on a multiple of mult?  Completions append up to
 * 18 - ndigits digits: v*10^k .. v*10^k + 10^k - 1 for each k. */
int nd_int_viable(const nd_gnode *n, int neg, uint64_t v, int ndigits)
{
    int64_t lo, hi;
    if (ndigits == 0) {
        lo = neg ? -INT_LIMIT : 0;
        hi = neg ? -1 : INT_LIMIT;
        if (lo < n->imin) lo = n->imin;
        if (hi > n->imax) hi = n->imax;
        return has_multiple(lo, hi, n->mult);
    }
    if (v == 0) return !neg && has_multiple(n->imin > 0 ? n->imin : 0, n->imax < 0 ? n->imax : 0, n->mult);
    int64_t p = 1;
    for (int k = 0; k + ndigits <= ND_G_INT_MAX_DIGITS; k++) {
        int64_t a = (int64_t)v * p, b = a + p - 1;
        if (neg) {
            int64_t t = -b;
            b = -a;
            a = t;
        }
        if (a < n->imin) a = n->imin;
        if (b > n->imax) b = n->imax;
        if (has_multiple(a, b, n->mult)) return 1;
        if (k + ndigits == ND_G_INT_MAX_DIGITS) break;
        p *= 10;
    }
    return 0;
}

/* Built-in formats as patterns (anchored).  Days follow each month's length,
 * and February 29 comes only in leap years (Gregorian, RFC 3339): a year is
 * leap when its last two digits are a multiple of 4 other than 00, or when
 * they are 00 and its first two are a multiple of 4 (2000, 2400; not 1900),
 * which a regular language can say digit by digit. */
#define ND_MULT4_2DIGITS "(0[48]|[2468][048]|[13579][26])"
#define ND_LEAP_YEAR_RE "([0-9]{2}" ND_MULT4_2DIGITS "|" ND_MULT4_2DIGITS "00|0000)"
#define ND_DATE_RE                                                                                              \
    "([0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))" \
    "|" ND_LEAP_YEAR_RE "-02-29)"
static const char *format_pattern(const char *f)
{
    if (!strcmp(f, "date")) return "^" ND_DATE_RE "$";
    if (!strcmp(f, "time"))
        return "^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$";
    if (!strcmp(f, "date-time"))
        return "^" ND_DATE_RE "T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
               "(\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$";
    if (!strcmp(f, "email")) return "^[A-Za-z0-9_%+-]+(\\.[A-Za-z0-9_%+-]+)*@[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)+$";
    if (!strcmp(f, "uuid"))
        return "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
    /* RFC 3986's outline: a scheme, a colon, then characters a URI may hold
     * (ASCII, no spaces, quotes, angle brackets or backslashes) */
    if (!strcmp(f, "uri")) return "^[A-Za-z][A-Za-z0-9+.-]*:[A-Za-z0-9\\-._~:/?#\\[\\]@!$&'()*+,;=%]+$";
    /* RFC 1123 labels of 1-63 letters, digits and inner hyphens, dot-separated */
    if (!strcmp(f, "hostname"))
        return "^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$";
    if (!strcmp(f, "ipv4"))
        return "^((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])$";
    return NULL;
}

static int string_node_from_dfa(ctx *c, int id, const char *path)
{
    nd_gnode *n = &c->g->nodes[id];
    if (n->free_string) return 0;
    return compute_lengths(c, id, path);
}

static int build_string(ctx *c, const nd_json *s, const char *path)
{
    int id = new_node(c, ND_G_STRING, path);
    if (id < 0) return id;
    uint32_t mn = 0, mx = UINT32_MAX;
    int has_mn, has_mx, rc;
    if ((rc = get_count(c, s, "minLength", path, &mn, &has_mn)) < 0) return rc;
    if ((rc = get_count(c, s, "maxLength", path, &mx, &has_mx)) < 0) return rc;
    if (mn > ND_G_MAX_STRING_BOUND)
        return nd_errorf(c->err, NEEDLE_ELIMIT, "%s.minLength: larger than %u", path, ND_G_MAX_STRING_BOUND);
    if (has_mx && mx > ND_G_MAX_STRING_BOUND) mx = ND_G_MAX_STRING_BOUND; /* narrowing is always safe */
    const nd_json *pat = nd_json_get(s, "pattern"), *fmt = nd_json_get(s, "format");
    const char *src = NULL;
    size_t src_len = 0;
    char where[32] = "pattern";
    if (pat && pat->type != ND_JSON_STRING)
        return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.pattern: must be a string", path);
    if (fmt && fmt->type != ND_JSON_STRING)
        return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.format: must be a string", path);
    if (pat && fmt)
        return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s: pattern together with format is not supported", path);
    if (pat) {
        src = pat->str;
        src_len = pat->len;
    } else if (fmt) {
        src = format_pattern(fmt->str);
        if (!src) return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.format: unsupported format \"%s\"", path, fmt->str);
        src_len = strlen(src);
        snprintf(where, sizeof where, "format");
    }
    nd_gnode *n = &c->g->nodes[id];
    n->min_len = mn;
    n->max_len = has_mx ? mx : UINT32_MAX;
    char why[160];
    if (src) {
        rc = nd_regex_compile(src, src_len, &n->dfa, why, sizeof why);
        if (rc < 0) return nd_errorf(c->err, rc, "%s.%s: %s", path, where, why);
    } else {
        if (nd_dfa_any(&n->dfa) < 0) return nd_errorf(c->err, NEEDLE_ENOMEM, "%s: out of memory", path);
        n->free_string = mn == 0 && !has_mx;
        n->copy_value = n->free_string;
    }
    rc = string_node_from_dfa(c, id, path);
    return rc < 0 ? rc : id;
}

static int64_t clamp_i64(double v)
{
    if (v > (double)INT_LIMIT) return INT_LIMIT + 1;
    if (v < -(double)INT_LIMIT) return -INT_LIMIT - 1;
    return (int64_t)v;
}

/* Read minimum/maximum/exclusive* (both the 2020 numeric and the draft-4 boolean form). */
static int read_bounds(ctx *c, const nd_json *s, const char *path, double *lo, int *lo_excl, double *hi,
                       int *hi_excl, int *any)
{
    double v;
    int p, rc;
    *lo = -INFINITY;
    *hi = INFINITY;
    *lo_excl = *hi_excl = 0;
    *any = 0;
    if ((rc = get_number(c, s, "minimum", path, &v, &p)) < 0) return rc;
    if (p) { *lo = v; *any = 1; }
    if ((rc = get_number(c, s, "maximum", path, &v, &p)) < 0) return rc;
    if (p) { *hi = v; *any = 1; }
    const nd_json *e = nd_json_get(s, "exclusiveMinimum");
    if (e && e->type == ND_JSON_TRUE) *lo_excl = 1;
    else if (e && e->type == ND_JSON_NUMBER) {
        if (e->num >= *lo) { *lo = e->num; *lo_excl = 1; }
        *any = 1;
    } else if (e && e->type != ND_JSON_FALSE)
        return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.exclusiveMinimum: must be a number", path);
    e = nd_json_get(s, "exclusiveMaximum");
    if (e && e->type == ND_JSON_TRUE) *hi_excl = 1;
    else if (e && e->type == ND_JSON_NUMBER) {
        if (e->num <= *hi) { *hi = e->num; *hi_excl = 1; }
        *any = 1;
    } else if (e && e->type != ND_JSON_FALSE)
        return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.exclusiveMaximum: must be a number", path);
    return 0;
}

static int build_number(ctx *c, const nd_json *s, const char *path, int integer)
{
    double lo, hi;
    int lo_x, hi_x, any, rc, has_mult;
    double mult = 1;
    if ((rc = read_bounds(c, s, path, &lo, &lo_x, &hi, &hi_x, &any)) < 0) return rc;
    if ((rc = get_number(c, s, "multipleOf", path, &mult, &has_mult)) < 0) return rc;
    int max_frac = 0;
    if (has_mult) {
        /* a power of ten below one (money's 0.01): at most k fraction digits */
        for (int k = 1; k <= 6 && !(mult >= 1); k++)
            if (fabs(mult * pow(10, k) - 1) < 1e-9) max_frac = k;
        if (max_frac) {
            double q = pow(10, -max_frac);
            for (int side = 0; side < 2; side++) { /* finite bounds on the grid, so no prefix is a dead end */
                double b = side ? hi : lo;
                if (isfinite(b) && fabs(b / q - nearbyint(b / q)) > 1e-6)
                    return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s: %s %g is not a multiple of multipleOf %g", path,
                                     side ? "maximum" : "minimum", b, mult);
            }
            if (integer) max_frac = 0; /* every integer is a multiple */
            any = 1;
        } else if (!(mult >= 1 && mult <= 1e15 && mult == floor(mult))) {
            return nd_errorf(c->err, NEEDLE_ESCHEMA,
                             "%s.multipleOf: only positive integers and powers of ten below one (0.1, 0.01, ...) are supported",
                             path);
        } else {
            integer = 1; /* multiples of an integer are generated as integers */
            any = 1;
        }
    }
    int id = new_node(c, integer ? ND_G_INTEGER : ND_G_NUMBER, path);
    if (id < 0) return id;
    nd_gnode *n = &c->g->nodes[id];
    n->bounded = any;
    if (integer) {
        double a = lo_x ? floor(lo) + 1 : ceil(lo), b = hi_x ? ceil(hi) - 1 : floor(hi);
        n->imin = isinf(a) ? -INT_LIMIT : clamp_i64(a);
        n->imax = isinf(b) ? INT_LIMIT : clamp_i64(b);
        if (n->imin < -INT_LIMIT) n->imin = -INT_LIMIT;
        if (n->imax > INT_LIMIT) n->imax = INT_LIMIT;
        /* say why here: the emptiness check later can only blame nesting */
        if (a > b) return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s: no value satisfies the schema: no integer lies between its minimum and maximum", path);
        if (n->imin > n->imax)
            return nd_errorf(c->err, NEEDLE_ESCHEMA,
                             "%s: no value satisfies the schema: no integer of at most 18 digits (the longest generated) lies within its bounds", path);
        n->mult = has_mult ? (int64_t)mult : 1;
    } else {
        n->nmin = lo;
        n->nmax = hi;
        n->nmin_excl = lo_x;
        n->nmax_excl = hi_x;
        n->max_frac = max_frac;
    }
    return id;
}

/* ------------------------------------------------------------ enum / const */

static int build_enum(ctx *c, const nd_json *s, int types, int typed, const char *path)
{
    const nd_json *e = nd_json_get(s, "enum"), *k = nd_json_get(s, "const");
    if (e && k) return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s: enum together with const is not supported", path);
    const nd_json *vals = e ? e->items : k;
    size_t nv = e ? e->count : 1;
    if (e && e->type != ND_JSON_ARRAY) return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.enum: must be an array", path);
    const char **strs = calloc(nv + 1, sizeof *strs);
    size_t *lens = calloc(nv + 1, sizeof *lens);
    size_t ns = 0;
    int lit = -1, str = -1, rc = 0;
    nd_buf b;
    nd_buf_init(&b);
    if (!strs || !lens) { rc = nd_errorf(c->err, NEEDLE_ENOMEM, "%s: out of memory", path); goto out; }
    lit = new_node(c, ND_G_LITERAL, path);
    if (lit < 0) { rc = lit; goto out; }
    for (size_t i = 0; i < nv; i++) {
        const nd_json *v = &vals[i];
        int t = v->type == ND_JSON_NULL ? T_NULL
              : v->type == ND_JSON_TRUE || v->type == ND_JSON_FALSE ? T_BOOL
              : v->type == ND_JSON_NUMBER ? (v->num == floor(v->num) ? T_INT | T_NUM : T_NUM)
              : v->type == ND_JSON_STRING ? T_STR
              : v->type == ND_JSON_ARRAY ? T_ARR : T_OBJ;
        if (typed && !(t & types)) continue; /* a value the type excludes can never validate */
        if (v->type == ND_JSON_STRING) {
            strs[ns] = v->str;
            lens[ns++] = v->len;
            continue;
        }
        nd_buf_reset(&b);
        nd_json_write(&b, v, 1);
        if (b.oom) { rc = nd_errorf(c->err, NEEDLE_ENOMEM, "%s: out of memory", path); goto out; }
        if ((rc = add_literal(c, lit, b.data, b.len, path)) < 0) goto out;
    }
    if (ns) {
        str = new_node(c, ND_G_STRING, path);
        if (str < 0) { rc = str; goto out; }
        char why[160];
        rc = nd_dfa_from_literals(strs, lens, ns, &c->g->nodes[str].dfa, why, sizeof why);
        if (rc < 0) { rc = nd_errorf(c->err, rc, "%s.enum: %s", path, why); goto out; }
        if ((rc = string_node_from_dfa(c, str, path)) < 0) goto out;
    }
    if (str >= 0 && c->g->nodes[lit].n_lits == 0) {
        rc = str;
    } else if (str >= 0) {
        int any = new_node(c, ND_G_ANYOF, path);
        if (any < 0) { rc = any; goto out; }
        int *alts = malloc(2 * sizeof *alts);
        if (!alts) { rc = nd_errorf(c->err, NEEDLE_ENOMEM, "%s: out of memory", path); goto out; }
        alts[0] = lit;
        alts[1] = str;
        c->g->nodes[any].alts = alts;
        c->g->nodes[any].n_alts = 2;
        rc = any;
    } else {
        rc = lit; /* possibly empty: unsatisfiable, reported by the caller */
    }
out:
    free(strs);
    free(lens);
    nd_buf_free(&b);
    return rc;
}

/* ------------------------------------------------------------ composite */

static int compile(ctx *c, const nd_json *s, const char *path, int depth);

/* compile, counted as a schema the agent's checks do not reach (ctx.indirect) */
static int compile_indirect(ctx *c, const nd_json *s, const char *path, int depth)
{
    c->indirect++;
    int id = compile(c, s, path, depth);
    c->indirect--;
    return id;
}

/* The shared "any JSON value" node (a recursive anyOf). */
static int any_node(ctx *c, const char *path)
{
    if (c->any_node >= 0) return c->any_node;
    int id = new_node(c, ND_G_ANYOF, path);
    if (id < 0) return id;
    c->any_node = id;
    static const char *const words[] = {"null", "true", "false"};
    int lit = literal_node(c, words, 3, path);
    if (lit < 0) return lit;
    int num = new_node(c, ND_G_NUMBER, path);
    if (num < 0) return num;
    int str = new_node(c, ND_G_STRING, path);
    if (str < 0) return str;
    if (nd_dfa_any(&c->g->nodes[str].dfa) < 0) return nd_errorf(c->err, NEEDLE_ENOMEM, "%s: out of memory", path);
    c->g->nodes[str].free_string = 1;
    int arr = new_node(c, ND_G_ARRAY, path);
    if (arr < 0) return arr;
    c->g->nodes[arr].items = id;
    int map = new_node(c, ND_G_MAP, path);
    if (map < 0) return map;
    c->g->nodes[map].key_node = str;
    c->g->nodes[map].value_node = id;
    if (c->free_string_node < 0) c->free_string_node = str;
    int *alts = malloc(5 * sizeof *alts);
    if (!alts) return nd_errorf(c->err, NEEDLE_ENOMEM, "%s: out of memory", path);
    alts[0] = lit;
    alts[1] = num;
    alts[2] = str;
    alts[3] = arr;
    alts[4] = map;
    c->g->nodes[id].alts = alts;
    c->g->nodes[id].n_alts = 5;
    return id;
}

static int build_array(ctx *c, const nd_json *s, const char *path, int depth)
{
    char sub[1200];
    uint32_t mn = 0, mx = UINT32_MAX;
    int p1, p2, rc;
    if ((rc = get_count(c, s, "minItems", path, &mn, &p1)) < 0) return rc;
    if ((rc = get_count(c, s, "maxItems", path, &mx, &p2)) < 0) return rc;
    /* no call fits a context with more items than this: refuse rather than generate until the budget ends */
    enum { MAX_MIN_ITEMS = 4096 };
    if (p1 && mn > MAX_MIN_ITEMS)
        return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.minItems: %u is more than the %d items a call can hold", path, mn,
                         MAX_MIN_ITEMS);
    const nd_json *items = nd_json_get(s, "items"), *prefix = nd_json_get(s, "prefixItems");
    const nd_json *additional = NULL;
    const char *prefix_name = "prefixItems";
    if (items && items->type == ND_JSON_ARRAY) { /* draft-4 tuple form */
        if (prefix) return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s: items array together with prefixItems", path);
        prefix = items;
        prefix_name = "items";
        items = NULL;
        additional = nd_json_get(s, "additionalItems");
        if (!additional) additional = NULL;
    }
    if (prefix && prefix->type != ND_JSON_ARRAY)
        return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.prefixItems: must be an array", path);
    int id = new_node(c, ND_G_ARRAY, path);
    if (id < 0) return id;
    c->g->nodes[id].min_items = mn;
    c->g->nodes[id].max_items = mx;
    if (prefix && prefix->count) {
        int *pre = calloc(prefix->count, sizeof *pre);
        if (!pre) return nd_errorf(c->err, NEEDLE_ENOMEM, "%s: out of memory", path);
        c->g->nodes[id].prefix = pre;
        for (size_t i = 0; i < prefix->count; i++) {
            snprintf(sub, sizeof sub, "%s.%s[%zu]", path, prefix_name, i);
            int k = compile_indirect(c, &prefix->items[i], sub, depth + 1);
            if (k < 0) return k;
            c->g->nodes[id].prefix[i] = k;
            c->g->nodes[id].n_prefix = (int)i + 1;
        }
    }
    const nd_json *rest = prefix_name[0] == 'i' ? additional : items;
    int it = -1;
    if (!rest || rest->type == ND_JSON_TRUE) {
        it = any_node(c, path);
        if (it < 0) return it;
    } else if (rest->type == ND_JSON_FALSE) {
        it = -1;
        uint32_t np = prefix ? (uint32_t)prefix->count : 0;
        if (c->g->nodes[id].max_items > np) c->g->nodes[id].max_items = np;
    } else {
        snprintf(sub, sizeof sub, "%s.%s", path, prefix_name[0] == 'i' ? "additionalItems" : "items");
        it = prefix_name[0] == 'i' ? compile_indirect(c, rest, sub, depth + 1) : compile(c, rest, sub, depth + 1);
        if (it < 0) return it;
    }
    c->g->nodes[id].items = it;
    return id;
}

typedef struct prop_src {
    const nd_json *props;    /* "properties" object */
    const nd_json *required; /* "required" array or NULL */
    const char *path;
} prop_src;

static int build_object_from(ctx *c, const prop_src *src, int n_src, const nd_json *s, const char *path, int depth)
{
    char sub[1200];
    int id = new_node(c, ND_G_OBJECT, path);
    if (id < 0) return id;
    size_t total = 0;
    for (int k = 0; k < n_src; k++) {
        if (src[k].props->type != ND_JSON_OBJECT)
            return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.properties: must be an object", src[k].path);
        total += src[k].props->count;
    }
    if (total) {
        nd_gprop *props = calloc(total, sizeof *props);
        if (!props) return nd_errorf(c->err, NEEDLE_ENOMEM, "%s: out of memory", path);
        c->g->nodes[id].props = props;
    }
    nd_buf b;
    nd_buf_init(&b);
    for (int k = 0; k < n_src; k++) {
        const nd_json *pr = src[k].props;
        /* keys within one object are unique (the JSON reader refuses
         * duplicates): only the keys of earlier allOf members can clash, so a
         * single object of many properties compiles in linear time */
        int earlier = c->g->nodes[id].n_props;
        for (size_t i = 0; i < pr->count; i++) {
            nd_gnode *n = &c->g->nodes[id];
            nd_buf_reset(&b);
            nd_json_write_string(&b, pr->keys[i], pr->key_lens[i], 1);
            nd_buf_putc(&b, ':');
            if (b.oom) { nd_buf_free(&b); return nd_errorf(c->err, NEEDLE_ENOMEM, "%s: out of memory", path); }
            for (int j = 0; j < earlier; j++)
                if (n->props[j].key_len == b.len && memcmp(n->props[j].key, b.data, b.len) == 0) {
                    nd_buf_free(&b);
                    return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.properties.%s: declared twice in allOf",
                                     src[k].path, pr->keys[i]);
                }
            snprintf(sub, sizeof sub, "%s.properties.%s", src[k].path, pr->keys[i]);
            int v = compile(c, &pr->items[i], sub, depth + 1);
            if (v < 0) { nd_buf_free(&b); return v; }
            n = &c->g->nodes[id];
            nd_gprop *p = &n->props[n->n_props++];
            p->key = nd_buf_take(&b);
            p->key_len = (uint32_t)strlen(p->key);
            p->node = v;
        }
    }
    nd_buf_free(&b);
    nd_gnode *n = &c->g->nodes[id];
    for (int k = 0; k < n_src; k++) {
        const nd_json *rq = src[k].required;
        if (!rq) continue;
        if (rq->type != ND_JSON_ARRAY)
            return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.required: must be an array", src[k].path);
        int hint = 0;
        for (size_t i = 0; i < rq->count; i++) {
            if (rq->items[i].type != ND_JSON_STRING)
                return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.required[%zu]: must be a string", src[k].path, i);
            int found = 0;
            /* keys are stored encoded; compare against the encoded form */
            nd_buf kb;
            nd_buf_init(&kb);
            nd_json_write_string(&kb, rq->items[i].str, rq->items[i].len, 1);
            nd_buf_putc(&kb, ':');
            if (kb.oom) {
                nd_buf_free(&kb);
                return nd_errorf(c->err, NEEDLE_ENOMEM, "%s: out of memory", path);
            }
            /* keys are unique; a "required" list usually follows the declared
             * order, so the search starts after the previous match */
            for (int step = 0; step < n->n_props && !found; step++) {
                int j = (hint + step) % n->n_props;
                if (kb.len == n->props[j].key_len && memcmp(kb.data, n->props[j].key, kb.len) == 0) {
                    n->props[j].required = 1;
                    found = 1;
                    hint = j + 1;
                }
            }
            nd_buf_free(&kb);
            if (!found)
                return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.required: \"%s\" is not a declared property",
                                 src[k].path, rq->items[i].str);
        }
    }
    /* min/maxProperties only when they hold for every object we generate */
    uint32_t v;
    int p, rc, n_req = 0;
    for (int j = 0; j < n->n_props; j++) n_req += n->props[j].required;
    if ((rc = get_count(c, s, "minProperties", path, &v, &p)) < 0) return rc;
    if (p && v > (uint32_t)n_req)
        return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s: unsupported keyword \"minProperties\" (more than the required properties)", path);
    if ((rc = get_count(c, s, "maxProperties", path, &v, &p)) < 0) return rc;
    if (p && v < (uint32_t)n->n_props)
        return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s: unsupported keyword \"maxProperties\" (fewer than the declared properties)", path);
    return id;
}

static int build_object(ctx *c, const nd_json *s, const char *path, int depth)
{
    const nd_json *props = nd_json_get(s, "properties"), *req = nd_json_get(s, "required");
    const nd_json *add = nd_json_get(s, "additionalProperties");
    if (props) {
        prop_src src = {props, req, path};
        return build_object_from(c, &src, 1, s, path, depth);
    }
    if (add && add->type == ND_JSON_FALSE) {
        static const nd_json empty = {.type = ND_JSON_OBJECT};
        prop_src src = {&empty, req, path};
        return build_object_from(c, &src, 1, s, path, depth);
    }
    /* free keys */
    if (req && req->type == ND_JSON_ARRAY && req->count)
        return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.required: required keys without \"properties\" are not supported", path);
    uint32_t v;
    int p, rc;
    if ((rc = get_count(c, s, "minProperties", path, &v, &p)) < 0) return rc;
    if (p && v > 0) return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s: unsupported keyword \"minProperties\"", path);
    if ((rc = get_count(c, s, "maxProperties", path, &v, &p)) < 0) return rc;
    if (p) return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s: unsupported keyword \"maxProperties\"", path);
    int anyv = any_node(c, path); /* also creates the shared free string node */
    if (anyv < 0) return anyv;
    int id = new_node(c, ND_G_MAP, path);
    if (id < 0) return id;
    int val = anyv;
    if (add && add->type != ND_JSON_TRUE) {
        char sub[1200];
        snprintf(sub, sizeof sub, "%s.additionalProperties", path);
        val = compile_indirect(c, add, sub, depth + 1);
        if (val < 0) return val;
    }
    c->g->nodes[id].key_node = c->free_string_node;
    c->g->nodes[id].value_node = val;
    return id;
}

/* ------------------------------------------------------------ $ref */

/* Follow a JSON pointer "#/a/b" inside root (~0 and ~1 unescaped). */
static const nd_json *resolve_pointer(const nd_json *root, const char *ref)
{
    if (ref[0] != '#') return NULL;
    const char *p = ref + 1;
    const nd_json *cur = root;
    char tok[512];
    while (*p) {
        if (*p != '/') return NULL;
        p++;
        size_t n = 0;
        while (*p && *p != '/') {
            char ch = *p++;
            if (ch == '~' && *p == '0') { ch = '~'; p++; }
            else if (ch == '~' && *p == '1') { ch = '/'; p++; }
            if (n + 1 >= sizeof tok) return NULL;
            tok[n++] = ch;
        }
        tok[n] = 0;
        if (cur->type == ND_JSON_OBJECT) {
            cur = nd_json_get(cur, tok);
        } else if (cur->type == ND_JSON_ARRAY) {
            char *end;
            unsigned long i = strtoul(tok, &end, 10);
            if (*end || n == 0 || i >= cur->count) return NULL;
            cur = &cur->items[i];
        } else {
            return NULL;
        }
        if (!cur) return NULL;
    }
    return cur;
}

static int compile_ref(ctx *c, const nd_json *s, const char *path, int depth)
{
    const nd_json *r = nd_json_get(s, "$ref");
    if (r->type != ND_JSON_STRING) return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.$ref: must be a string", path);
    static const char *const only_ref[] = {"$ref", NULL};
    const char *other = other_value_keyword(s, only_ref);
    if (other) return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s: keyword \"%s\" beside $ref is not supported", path, other);
    for (int i = 0; i < c->n_refs; i++)
        if (c->refs[i].root == c->doc_root && strcmp(c->refs[i].ref, r->str) == 0) return c->refs[i].node;
    const nd_json *target = resolve_pointer(c->doc_root, r->str);
    if (!target) return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.$ref: cannot resolve \"%s\"", path, r->str);
    int id = new_node(c, ND_G_REF, path);
    if (id < 0) return id;
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? c->cap_refs * 2 : 16;
        ref_entry *p = realloc(c->refs, (size_t)cap * sizeof *p);
        if (!p) return nd_errorf(c->err, NEEDLE_ENOMEM, "%s: out of memory", path);
        c->refs = p;
        c->cap_refs = cap;
    }
    char *copy = strdup(r->str);
    if (!copy) return nd_errorf(c->err, NEEDLE_ENOMEM, "%s: out of memory", path);
    c->refs[c->n_refs++] = (ref_entry){c->doc_root, copy, id};
    char sub[1200];
    snprintf(sub, sizeof sub, "%s.$ref(%s)", path, r->str);
    int t = compile(c, target, sub, depth + 1);
    if (t < 0) return t;
    c->g->nodes[id].target = t;
    return id;
}

/* ------------------------------------------------------------ dispatch */

static int make_anyof(ctx *c, const int *alts, int n, const char *path)
{
    if (n == 1) return alts[0];
    int id = new_node(c, ND_G_ANYOF, path);
    if (id < 0) return id;
    int *a = malloc((size_t)(n ? n : 1) * sizeof *a);
    if (!a) return nd_errorf(c->err, NEEDLE_ENOMEM, "%s: out of memory", path);
    memcpy(a, alts, (size_t)n * sizeof *a);
    c->g->nodes[id].alts = a;
    c->g->nodes[id].n_alts = n;
    return id;
}

static int compile_anyof(ctx *c, const nd_json *s, const char *key, const char *path, int depth)
{
    const nd_json *list = nd_json_get(s, key);
    if (list->type != ND_JSON_ARRAY || list->count == 0)
        return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.%s: must be a non-empty array", path, key);
    static const char *const allowed[] = {"anyOf", "oneOf", NULL};
    const char *other = other_value_keyword(s, allowed);
    if (other || (nd_json_get(s, "anyOf") && nd_json_get(s, "oneOf")))
        return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s: keyword \"%s\" beside %s is not supported", path,
                         other ? other : "oneOf", key);
    int *alts = malloc(list->count * sizeof *alts);
    if (!alts) return nd_errorf(c->err, NEEDLE_ENOMEM, "%s: out of memory", path);
    char sub[1200];
    for (size_t i = 0; i < list->count; i++) {
        snprintf(sub, sizeof sub, "%s.%s[%zu]", path, key, i);
        int k = compile(c, &list->items[i], sub, depth + 1);
        if (k < 0) { free(alts); return k; }
        alts[i] = k;
    }
    int id = make_anyof(c, alts, (int)list->count, path);
    free(alts);
    return id;
}

/* allOf: one schema, or object schemas whose properties are merged. */
static int compile_allof(ctx *c, const nd_json *s, const char *path, int depth)
{
    const nd_json *list = nd_json_get(s, "allOf");
    if (list->type != ND_JSON_ARRAY || list->count == 0)
        return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.allOf: must be a non-empty array", path);
    static const char *const allowed[] = {"allOf", "type", NULL};
    const char *other = other_value_keyword(s, allowed);
    if (other) return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s: keyword \"%s\" beside allOf is not supported", path, other);
    char sub[1200];
    if (list->count == 1) {
        snprintf(sub, sizeof sub, "%s.allOf[0]", path);
        return compile(c, &list->items[0], sub, depth + 1);
    }
    prop_src *src = calloc(list->count, sizeof *src);
    char(*paths)[1200] = calloc(list->count, sizeof *paths);
    int rc = 0;
    if (!src || !paths) { rc = nd_errorf(c->err, NEEDLE_ENOMEM, "%s: out of memory", path); goto out; }
    for (size_t i = 0; i < list->count; i++) {
        const nd_json *e = &list->items[i];
        snprintf(paths[i], sizeof paths[i], "%s.allOf[%zu]", path, i);
        for (int hops = 0; e && e->type == ND_JSON_OBJECT && nd_json_get(e, "$ref") && hops < 32; hops++) {
            const nd_json *r = nd_json_get(e, "$ref");
            e = r->type == ND_JSON_STRING ? resolve_pointer(c->doc_root, r->str) : NULL;
        }
        if (!e || e->type != ND_JSON_OBJECT || !nd_json_get(e, "properties")) {
            rc = nd_errorf(c->err, NEEDLE_ESCHEMA, "%s: allOf is only supported over object schemas with properties",
                           paths[i]);
            goto out;
        }
        if ((rc = check_keywords(c, e, paths[i])) < 0) goto out;
        static const char *const obj_kw[] = {"type", "properties", "required", "additionalProperties", NULL};
        const char *o = other_value_keyword(e, obj_kw);
        if (o) {
            rc = nd_errorf(c->err, NEEDLE_ESCHEMA, "%s: keyword \"%s\" inside allOf is not supported", paths[i], o);
            goto out;
        }
        src[i] = (prop_src){nd_json_get(e, "properties"), nd_json_get(e, "required"), paths[i]};
    }
    rc = build_object_from(c, src, (int)list->count, s, path, depth);
out:
    free(src);
    free(paths);
    return rc;
}

static int compile_at(ctx *c, const nd_json *s, const char *path, int depth);

/* Compile s at path, eliding the middle of a long path (a deep $ref chain or
 * nesting) so that an error's reason always fits the 512-byte message. */
static int compile(ctx *c, const nd_json *s, const char *path, int depth)
{
    enum { KEEP_HEAD = 80, KEEP_TAIL = 140 };
    size_t n = strlen(path);
    if (n <= KEEP_HEAD + KEEP_TAIL + 5) return compile_at(c, s, path, depth);
    char shorter[KEEP_HEAD + KEEP_TAIL + 8];
    snprintf(shorter, sizeof shorter, "%.*s.....%s", KEEP_HEAD, path, path + n - KEEP_TAIL);
    return compile_at(c, s, shorter, depth);
}

static int compile_at(ctx *c, const nd_json *s, const char *path, int depth)
{
    if (depth > MAX_SCHEMA_DEPTH) return nd_errorf(c->err, NEEDLE_ELIMIT, "%s: schema nested too deeply", path);
    if (s->type == ND_JSON_TRUE) return any_node(c, path);
    if (s->type == ND_JSON_FALSE) return new_node(c, ND_G_LITERAL, path); /* matches nothing */
    if (s->type != ND_JSON_OBJECT) return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s: a schema must be an object", path);
    int rc = check_keywords(c, s, path);
    if (rc < 0) return rc;
    if (nd_json_get(s, "$ref") || nd_json_get(s, "anyOf") || nd_json_get(s, "oneOf") || nd_json_get(s, "allOf")) {
        c->indirect++; /* what these lead to, the agent's checks do not follow */
        int id = nd_json_get(s, "$ref")    ? compile_ref(c, s, path, depth)
                 : nd_json_get(s, "anyOf") ? compile_anyof(c, s, "anyOf", path, depth)
                 : nd_json_get(s, "oneOf") ? compile_anyof(c, s, "oneOf", path, depth) /* treated as anyOf */
                                           : compile_allof(c, s, path, depth);
        c->indirect--;
        return id;
    }

    int types = 0, typed = 0;
    const nd_json *t = nd_json_get(s, "type");
    if (t) {
        typed = 1;
        if (t->type == ND_JSON_ARRAY) {
            for (size_t i = 0; i < t->count; i++) {
                int b = type_bit(&t->items[i]);
                if (b < 0) return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.type[%zu]: unknown type", path, i);
                types |= b;
            }
        } else {
            types = type_bit(t);
            if (types < 0) return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.type: unknown type", path);
        }
    }
    const nd_json *nullable = nd_json_get(s, "nullable");
    if (nullable && nullable->type == ND_JSON_TRUE) types |= T_NULL; /* OpenAPI 3.0 style */
    if (nd_json_get(s, "enum") || nd_json_get(s, "const")) return build_enum(c, s, types, typed, path);
    if (!typed) {
        /* no type: generate only the kinds the keywords describe (narrower is valid) */
        static const char *const okw[] = {"properties", "required", "additionalProperties", "minProperties", NULL};
        static const char *const akw[] = {"items", "prefixItems", "minItems", "maxItems", NULL};
        static const char *const skw[] = {"pattern", "format", "minLength", "maxLength", NULL};
        static const char *const nkw[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", NULL};
        int inferred = 0;
        for (size_t i = 0; i < s->count; i++) {
            if (in_list(s->keys[i], okw)) inferred |= T_OBJ;
            if (in_list(s->keys[i], akw)) inferred |= T_ARR;
            if (in_list(s->keys[i], skw)) inferred |= T_STR;
            if (in_list(s->keys[i], nkw)) inferred |= T_NUM;
        }
        types |= inferred ? inferred : T_ALL;
    }
    if ((types & T_INT) && (types & T_NUM)) types &= ~T_INT;
    if (types == T_ALL) return any_node(c, path);
    int alts[8], n = 0;
    if (types & (T_NULL | T_BOOL)) {
        const char *words[3];
        int nw = 0;
        if (types & T_NULL) words[nw++] = "null";
        if (types & T_BOOL) { words[nw++] = "true"; words[nw++] = "false"; }
        if ((alts[n++] = literal_node(c, words, nw, path)) < 0) return alts[n - 1];
    }
    if (types & T_INT && (alts[n++] = build_number(c, s, path, 1)) < 0) return alts[n - 1];
    if (types & T_NUM && (alts[n++] = build_number(c, s, path, 0)) < 0) return alts[n - 1];
    if (types & T_STR && (alts[n++] = build_string(c, s, path)) < 0) return alts[n - 1];
    if (types & T_ARR && (alts[n++] = build_array(c, s, path, depth)) < 0) return alts[n - 1];
    if (types & T_OBJ && (alts[n++] = build_object(c, s, path, depth)) < 0) return alts[n - 1];
    if (n == 0) return nd_errorf(c->err, NEEDLE_ESCHEMA, "%s.type: empty type list", path);
    return make_anyof(c, alts, n, path);
}

/* ------------------------------------------------------------ post passes */

static int resolve(nd_grammar *g, int id)
{
    for (int hops = 0; id >= 0 && g->nodes[id].kind == ND_G_REF; hops++) {
        if (hops > g->n_nodes) return -2; /* a $ref cycle with no schema in it */
        id = g->nodes[id].target;
    }
    return id;
}

static int resolve_all(ctx *c)
{
    nd_grammar *g = c->g;
    int bad = 0;
#define FIX(field)                                  \
    do {                                            \
        if ((field) >= 0) {                         \
            int r_ = resolve(g, (field));           \
            if (r_ == -2) bad = 1; else (field) = r_; \
        }                                           \
    } while (0)
    FIX(g->root);
    for (int i = 0; i < g->n_nodes; i++) {
        nd_gnode *n = &g->nodes[i];
        FIX(n->items);
        FIX(n->key_node);
        FIX(n->value_node);
        for (int k = 0; k < n->n_prefix; k++) FIX(n->prefix[k]);
        for (int k = 0; k < n->n_props; k++) FIX(n->props[k].node);
        for (int k = 0; k < n->n_alts; k++) FIX(n->alts[k]);
    }
#undef FIX
    if (bad) return nd_errorf(c->err, NEEDLE_ESCHEMA, "tools: a $ref cycle that never reaches a schema");
    return 0;
}

/* Replace each anyOf's alternatives by the non-anyOf nodes reachable through
 * nested anyOfs (each once), so the runtime expands one level only. */
static int flatten_anyof(ctx *c)
{
    nd_grammar *g = c->g;
    /* the count is an int; one unsigned copy keeps every size non-negative
     * (newer gcc proves a negative count would wrap the allocation size) */
    size_t n = g->n_nodes > 0 ? (size_t)g->n_nodes : 1;
    int *stack = malloc(n * sizeof *stack);
    int *out = malloc(n * sizeof *out);
    uint32_t *mark = calloc(n, sizeof *mark);
    if (!stack || !out || !mark) {
        free(stack); free(out); free(mark);
        return nd_errorf(c->err, NEEDLE_ENOMEM, "tools: out of memory");
    }
    uint32_t gen = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].kind != ND_G_ANYOF) continue;
        gen++;
        int sp = 0, no = 0;
        stack[sp++] = i;
        mark[i] = gen;
        while (sp) {
            int x = stack[--sp];
            const nd_gnode *n = &g->nodes[x];
            for (int k = n->n_alts - 1; k >= 0; k--) {
                int a = n->alts[k];
                if (mark[a] == gen) continue;
                mark[a] = gen;
                if (g->nodes[a].kind == ND_G_ANYOF) stack[sp++] = a;
                else out[no++] = a;
            }
        }
        int *alts = realloc(g->nodes[i].alts, (size_t)(no ? no : 1) * sizeof *alts);
        if (!alts) {
            free(stack); free(out); free(mark);
            return nd_errorf(c->err, NEEDLE_ENOMEM, "tools: out of memory");
        }
        memcpy(alts, out, (size_t)no * sizeof *alts);
        g->nodes[i].alts = alts;
        g->nodes[i].n_alts = no;
    }
    free(stack); free(out); free(mark);
    return 0;
}

static void set_bit(uint32_t *bits, unsigned b) { bits[b / 32] |= 1u << (b % 32); }

static void first_sets(nd_grammar *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        nd_gnode *n = &g->nodes[i];
        memset(n->first, 0, sizeof n->first);
        switch (n->kind) {
        case ND_G_LITERAL:
            for (int k = 0; k < n->n_lits; k++)
                if (n->lit_lens[k]) set_bit(n->first, (unsigned char)n->lits[k][0]);
            break;
        case ND_G_STRING: set_bit(n->first, '"'); break;
        case ND_G_INTEGER: case ND_G_NUMBER:
            set_bit(n->first, '-');
            for (unsigned d = '0'; d <= '9'; d++) set_bit(n->first, d);
            break;
        case ND_G_ARRAY: set_bit(n->first, '['); break;
        case ND_G_OBJECT: case ND_G_MAP: case ND_G_CALL: set_bit(n->first, '{'); break;
        default: break;
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        nd_gnode *n = &g->nodes[i];
        if (n->kind != ND_G_ANYOF) continue;
        for (int k = 0; k < n->n_alts; k++)
            for (int w = 0; w < 8; w++) n->first[w] |= g->nodes[n->alts[k]].first[w];
    }
}

static uint32_t add_depth(uint32_t a) { return a >= ND_G_INF ? ND_G_INF : a + 1; }

/* Can a number node produce any value at all? */
static int number_satisfiable(const nd_gnode *n)
{
    if (n->kind == ND_G_INTEGER) {
        if (n->imin > n->imax) return 0;
        return nd_int_viable(n, 0, 0, 0) || nd_int_viable(n, 1, 0, 0);
    }
    if (!n->bounded) return 1;
    double lo = n->nmin, hi = n->nmax;
    if (lo > hi || (lo == hi && (n->nmin_excl || n->nmax_excl))) return 0;
    if (lo > NUM_LIMIT || hi < -NUM_LIMIT) return 0;
    return 1;
}

static void min_depths(nd_grammar *g)
{
    for (int i = 0; i < g->n_nodes; i++) g->nodes[i].min_depth = ND_G_INF;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < g->n_nodes; i++) {
            nd_gnode *n = &g->nodes[i];
            uint32_t d = ND_G_INF;
            switch (n->kind) {
            case ND_G_LITERAL: d = n->n_lits ? 1 : ND_G_INF; break;
            case ND_G_STRING: d = n->dfa.start >= 0 && nd_string_viable(n, n->dfa.start, 0) ? 1 : ND_G_INF; break;
            case ND_G_INTEGER: case ND_G_NUMBER: d = number_satisfiable(n) ? 1 : ND_G_INF; break;
            case ND_G_ARRAY: {
                if (n->min_items > n->max_items) break;
                uint32_t need = 0;
                for (uint32_t k = 0; k < n->min_items; k++) {
                    int it = (int)k < n->n_prefix ? n->prefix[k] : n->items;
                    uint32_t m = it < 0 ? ND_G_INF : g->nodes[it].min_depth;
                    if (m > need) need = m;
                    if ((int)k >= n->n_prefix) break; /* the rest repeat `items` */
                }
                d = add_depth(need);
                break;
            }
            case ND_G_OBJECT: {
                uint32_t need = 0;
                for (int k = 0; k < n->n_props; k++)
                    if (n->props[k].required && g->nodes[n->props[k].node].min_depth > need)
                        need = g->nodes[n->props[k].node].min_depth;
                d = add_depth(need);
                break;
            }
            case ND_G_MAP: d = 1; break;
            case ND_G_CALL: {
                uint32_t best = ND_G_INF;
                for (int k = 0; k < n->n_props; k++)
                    if (g->nodes[n->props[k].node].min_depth < best) best = g->nodes[n->props[k].node].min_depth;
                d = add_depth(best);
                break;
            }
            case ND_G_ANYOF:
                for (int k = 0; k < n->n_alts; k++)
                    if (g->nodes[n->alts[k]].min_depth < d) d = g->nodes[n->alts[k]].min_depth;
                break;
            case ND_G_REF: break;
            }
            if (d < n->min_depth) {
                n->min_depth = d;
                changed = 1;
            }
        }
    }
}

/* Sort literal sets so that candidates sharing a prefix are contiguous and the
 * shortest comes first (the runtime's literal matching relies on it). */
static int cmp_lit(const void *a, const void *b)
{
    const char *const *x = a, *const *y = b;
    return strcmp(*x, *y);
}

static int sort_literals(ctx *c)
{
    for (int i = 0; i < c->g->n_nodes; i++) {
        nd_gnode *n = &c->g->nodes[i];
        if (n->kind != ND_G_LITERAL || n->n_lits < 2) continue;
        for (int k = 0; k < n->n_lits; k++)
            if (memchr(n->lits[k], 0, n->lit_lens[k]))
                return nd_errorf(c->err, NEEDLE_ESCHEMA, "tools: enum value with a NUL byte");
        qsort(n->lits, (size_t)n->n_lits, sizeof *n->lits, cmp_lit);
        for (int k = 0; k < n->n_lits; k++) n->lit_lens[k] = (uint32_t)strlen(n->lits[k]);
    }
    return 0;
}

static int finish(ctx *c)
{
    int rc;
    if ((rc = resolve_all(c)) < 0) return rc;
    if ((rc = flatten_anyof(c)) < 0) return rc;
    if ((rc = sort_literals(c)) < 0) return rc;
    first_sets(c->g);
    min_depths(c->g);
    return 0;
}

static void ctx_free(ctx *c)
{
    for (int i = 0; i < c->n_refs; i++) free(c->refs[i].ref);
    free(c->refs);
}

/* ------------------------------------------------------------ entry points */

const nd_json *nd_tool_declaration(const nd_json *tool)
{
    const nd_json *f = nd_json_get(tool, "function");
    return f && f->type == ND_JSON_OBJECT && !nd_json_get(tool, "name") ? f : tool;
}

int nd_schema_compile_tools(const nd_json *tools, const int *indices, size_t n_indices, nd_grammar **out,
                            needle_error *err)
{
    *out = NULL;
    if (!tools || tools->type != ND_JSON_ARRAY)
        return nd_errorf(err, NEEDLE_ESCHEMA, "tools: must be a JSON array of tool declarations");
    size_t n = indices ? n_indices : tools->count;
    nd_grammar *g = calloc(1, sizeof *g);
    ctx c = {.g = g, .err = err, .any_node = -1, .free_string_node = -1};
    int rc = 0;
    if (!g) return nd_errorf(err, NEEDLE_ENOMEM, "tools: out of memory");
    g->tool_names = calloc(n ? n : 1, sizeof *g->tool_names);
    if (!g->tool_names) { rc = nd_errorf(err, NEEDLE_ENOMEM, "tools: out of memory"); goto fail; }
    int call = new_node(&c, ND_G_CALL, "tools");
    if (call < 0) { rc = call; goto fail; }
    if (n) {
        c.g->nodes[call].props = calloc(n, sizeof(nd_gprop));
        if (!c.g->nodes[call].props) { rc = nd_errorf(err, NEEDLE_ENOMEM, "tools: out of memory"); goto fail; }
    }
    nd_buf b;
    nd_buf_init(&b);
    for (size_t k = 0; k < n; k++) {
        char path[64];
        if (indices && (indices[k] < 0 || (size_t)indices[k] >= tools->count)) {
            rc = nd_errorf(err, NEEDLE_EINVAL, "tools: tool index %d out of range", indices[k]);
            break;
        }
        size_t ti = indices ? (size_t)indices[k] : k;
        snprintf(path, sizeof path, "tools[%zu]", ti);
        const nd_json *tool = &tools->items[ti];
        if (tool->type != ND_JSON_OBJECT) { rc = nd_errorf(err, NEEDLE_ESCHEMA, "%s: must be an object", path); break; }
        tool = nd_tool_declaration(tool);
        const nd_json *name = nd_json_get(tool, "name"), *params = nd_json_get(tool, "parameters");
        if (!name || name->type != ND_JSON_STRING || name->len == 0 || memchr(name->str, 0, name->len)) {
            rc = nd_errorf(err, NEEDLE_ESCHEMA, "%s.name: must be a non-empty string", path);
            break;
        }
        for (size_t j = 0; j < g->n_tools; j++)
            if (strcmp(g->tool_names[j], name->str) == 0) {
                rc = nd_errorf(err, NEEDLE_ESCHEMA, "%s.name: \"%s\" is declared twice", path, name->str);
                break;
            }
        if (rc < 0) break;
        g->tool_names[g->n_tools] = strdup(name->str);
        if (!g->tool_names[g->n_tools]) { rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path); break; }
        g->n_tools++;
        static const nd_json empty_props = {.type = ND_JSON_OBJECT};
        int args;
        char ppath[80];
        snprintf(ppath, sizeof ppath, "%s.parameters", path);
        c.doc_root = params;
        if (!params) {
            prop_src src = {&empty_props, NULL, ppath};
            static const nd_json empty_schema = {.type = ND_JSON_OBJECT};
            args = build_object_from(&c, &src, 1, &empty_schema, ppath, 0);
        } else {
            args = compile(&c, params, ppath, 0);
        }
        if (args < 0) { rc = args; break; }
        nd_buf_reset(&b);
        nd_buf_puts(&b, "{\"name\":");
        nd_json_write_string(&b, name->str, name->len, 1);
        nd_buf_puts(&b, ",\"arguments\":");
        if (b.oom) { rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path); break; }
        nd_gnode *cn = &c.g->nodes[call];
        cn->props[cn->n_props].key_len = (uint32_t)b.len;
        cn->props[cn->n_props].key = nd_buf_take(&b);
        cn->props[cn->n_props].node = args;
        cn->n_props++;
    }
    nd_buf_free(&b);
    if (rc < 0) goto fail;
    int root = new_node(&c, ND_G_ARRAY, "tools");
    if (root < 0) { rc = root; goto fail; }
    g->nodes[root].items = call;
    g->root = root;
    if ((rc = finish(&c)) < 0) goto fail;
    /* every declared tool must be callable: its arguments completable within the depth bound */
    for (int k = 0; k < g->nodes[call].n_props; k++) {
        uint32_t d = g->nodes[g->nodes[call].props[k].node].min_depth;
        if (d >= ND_G_INF || d + 2 > ND_G_MAX_DEPTH) {
            size_t ti = indices ? (size_t)indices[k] : (size_t)k;
            rc = nd_errorf(err, NEEDLE_ESCHEMA,
                           "tools[%zu].parameters: no value satisfies the schema (or it needs more than %d levels of nesting)",
                           ti, ND_G_MAX_DEPTH - 2);
            goto fail;
        }
    }
    ctx_free(&c);
    *out = g;
    return 0;
fail:
    ctx_free(&c);
    nd_schema_free(g);
    return rc < 0 ? rc : NEEDLE_ESCHEMA;
}

int nd_schema_compile_value(const nd_json *schema, const char *where, nd_grammar **out, needle_error *err)
{
    *out = NULL;
    nd_grammar *g = calloc(1, sizeof *g);
    if (!g) return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where);
    ctx c = {.g = g, .err = err, .any_node = -1, .free_string_node = -1, .doc_root = schema};
    int rc = compile(&c, schema, where, 0);
    if (rc >= 0) {
        g->root = rc;
        rc = finish(&c);
    }
    if (rc >= 0 && g->nodes[g->root].min_depth > ND_G_MAX_DEPTH)
        rc = nd_errorf(err, NEEDLE_ESCHEMA, "%s: no value satisfies the schema within the nesting bound", where);
    ctx_free(&c);
    if (rc < 0) {
        nd_schema_free(g);
        return rc;
    }
    *out = g;
    return 0;
}
