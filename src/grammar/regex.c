/* regex.c - pattern subset -> syntax tree -> Thompson NFA -> DFA over code points.
 *
 * Three small stages, each bounded: the parser builds a tree of sets, concatenations,
 * alternations and repeats; the tree becomes an NFA (repeats are expanded, so
 * {m,n} is capped); subset construction over code point *ranges* gives the DFA,
 * whose dead states (no path to acceptance) are then removed.
 */
#include "grammar/regex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "needle.h"

#define MAX_CP 0x10FFFFu
#define MAX_NFA_STATES 200000
#define MAX_AST_NODES 100000

typedef struct range {
    uint32_t lo, hi;
} range;

enum { R_SET, R_CAT, R_ALT, R_REP };

typedef struct rnode {
    int kind;
    int set_off, set_n;     /* R_SET: ranges in the pool */
    int first, next;        /* children (R_CAT, R_ALT, R_REP) as a sibling list, -1 ends */
    int min, max;           /* R_REP: max -1 = unbounded */
} rnode;

typedef struct nstate {
    int32_t e1, e2;         /* epsilon edges (-1 none) */
    int32_t set_off, set_n; /* set_n > 0: a range transition to `to` */
    int32_t to;
} nstate;

typedef struct rx {
    const uint32_t *cp;
    size_t n, pos;
    rnode *nodes;
    int nn, ncap;
    range *pool;
    int np, pcap;
    nstate *ns;
    int nns, nscap;
    char *why;
    size_t why_size;
    int err;
} rx;

static int fail(rx *r, int code, const char *msg)
{
    if (!r->err) {
        r->err = code;
        snprintf(r->why, r->why_size, "%s", msg);
    }
    return -1;
}

/* ------------------------------------------------------------ range sets */

static int pool_push(rx *r, uint32_t lo, uint32_t hi)
{
    if (r->np == r->pcap) {
        int cap = r->pcap ? r->pcap * 2 : 256;
        range *p = realloc(r->pool, (size_t)cap * sizeof *p);
        if (!p) return fail(r, NEEDLE_ENOMEM, "out of memory");
        r->pool = p;
        r->pcap = cap;
    }
    r->pool[r->np++] = (range){lo, hi};
    return 0;
}

static int cmp_range(const void *a, const void *b)
{
    const range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sort and merge pool[off..np) in place, dropping the surrogate block (never a
 * character of a valid string). */
static void normalize_tail(rx *r, int off)
{
    int n = r->np - off;
    range *a = r->pool + off;
    qsort(a, (size_t)n, sizeof *a, cmp_range);
    int w = 0, touches = 0;
    for (int i = 0; i < n; i++) {
        if (w > 0 && a[i].lo <= a[w - 1].hi + 1) {
            if (a[i].hi > a[w - 1].hi) a[w - 1].hi = a[i].hi;
        } else {
            a[w++] = a[i];
        }
    }
    r->np = off + w;
    for (int i = 0; i < w; i++)
        if (!(a[i].hi < 0xD800 || a[i].lo > 0xDFFF)) touches = 1;
    if (!touches) return;
    /* rebuild without 0xD800..0xDFFF at the end of the pool, then move it down */
    int base = r->np;
    for (int i = 0; i < w; i++) {
        range x = r->pool[off + i]; /* re-read: pool_push may move the pool */
        if (x.hi < 0xD800 || x.lo > 0xDFFF) { pool_push(r, x.lo, x.hi); continue; }
        if (x.lo < 0xD800) pool_push(r, x.lo, 0xD7FF);
        if (x.hi > 0xDFFF) pool_push(r, 0xE000, x.hi);
    }
    if (r->err) return;
    int m = r->np - base;
    memmove(r->pool + off, r->pool + base, (size_t)m * sizeof(range));
    r->np = off + m;
}

/* Replace pool[off..np) (normalized) by its complement in [0, MAX_CP]. */
static void complement_tail(rx *r, int off)
{
    int n = r->np - off, base = r->np;
    uint32_t next = 0;
    for (int i = 0; i < n; i++) {
        range x = r->pool[off + i];
        if (x.lo > next) pool_push(r, next, x.lo - 1);
        next = x.hi + 1;
    }
    if (next <= MAX_CP) pool_push(r, next, MAX_CP);
    if (r->err) return;
    int m = r->np - base;
    memmove(r->pool + off, r->pool + base, (size_t)m * sizeof(range));
    r->np = off + m;
    normalize_tail(r, off);
}

static int new_node(rx *r, int kind)
{
    if (r->nn >= MAX_AST_NODES) return fail(r, NEEDLE_ELIMIT, "pattern too large");
    if (r->nn == r->ncap) {
        int cap = r->ncap ? r->ncap * 2 : 64;
        rnode *p = realloc(r->nodes, (size_t)cap * sizeof *p);
        if (!p) return fail(r, NEEDLE_ENOMEM, "out of memory");
        r->nodes = p;
        r->ncap = cap;
    }
    rnode *x = &r->nodes[r->nn];
    memset(x, 0, sizeof *x);
    x->kind = kind;
    x->first = x->next = -1;
    return r->nn++;
}

/* A set node holding the ranges pushed since `off`. */
static int set_node(rx *r, int off)
{
    normalize_tail(r, off);
    int id = new_node(r, R_SET);
    if (id < 0) return -1;
    r->nodes[id].set_off = off;
    r->nodes[id].set_n = r->np - off;
    return id;
}

static void add_child(rx *r, int parent, int *last, int child)
{
    if (*last < 0) r->nodes[parent].first = child;
    else r->nodes[*last].next = child;
    *last = child;
}

/* ------------------------------------------------------------ parser */

static int at_end(rx *r) { return r->pos >= r->n; }
static uint32_t peek(rx *r) { return r->pos < r->n ? r->cp[r->pos] : 0; }

static int hexval(uint32_t c)
{
    if (c >= '0' && c <= '9') return (int)(c - '0');
    if (c >= 'a' && c <= 'f') return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return (int)(c - 'A' + 10);
    return -1;
}

static int read_hex(rx *r, int digits, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        int h = at_end(r) ? -1 : hexval(peek(r));
        if (h < 0) return fail(r, NEEDLE_ESCHEMA, "bad hex escape");
        v = v * 16 + (uint32_t)h;
        r->pos++;
    }
    *out = v;
    return 0;
}

/* Push the class ranges of \d \w \s and their negations. */
static void push_class(rx *r, uint32_t c)
{
    int off = r->np;
    switch (c) {
    case 'd': case 'D': pool_push(r, '0', '9'); break;
    case 'w': case 'W':
        pool_push(r, '0', '9'); pool_push(r, 'A', 'Z'); pool_push(r, '_', '_'); pool_push(r, 'a', 'z');
        break;
    case 's': pool_push(r, 9, 13); pool_push(r, ' ', ' '); break;
    case 'S':
        /* whitespace in ECMA or in Python: never produce these for \S */
        pool_push(r, 9, 13); pool_push(r, 0x1C, 0x20); pool_push(r, 0x85, 0x85); pool_push(r, 0xA0, 0xA0);
        pool_push(r, 0x1680, 0x1680); pool_push(r, 0x180E, 0x180E); pool_push(r, 0x2000, 0x200A);
        pool_push(r, 0x2028, 0x2029); pool_push(r, 0x202F, 0x202F); pool_push(r, 0x205F, 0x205F);
        pool_push(r, 0x3000, 0x3000); pool_push(r, 0xFEFF, 0xFEFF);
        break;
    }
    if (c == 'D' || c == 'W') {
        /* ASCII-only complement: Python's \D and \W exclude Unicode digits/letters */
        normalize_tail(r, off);
        complement_tail(r, off);
        int n = r->np - off, w = 0;
        for (int i = 0; i < n; i++) {
            range x = r->pool[off + i];
            if (x.lo > 127) continue;
            if (x.hi > 127) x.hi = 127;
            r->pool[off + w++] = x;
        }
        r->np = off + w;
    } else if (c == 'S') {
        normalize_tail(r, off);
        complement_tail(r, off);
    }
}

/* One escaped character after '\' (outside or inside a class).  Returns 1 when
 * it was a class escape (ranges pushed), 0 for a single character in *out. */
static int parse_escape(rx *r, uint32_t *out, int in_class)
{
    if (at_end(r)) return fail(r, NEEDLE_ESCHEMA, "pattern ends with a backslash");
    uint32_t c = r->cp[r->pos++];
    switch (c) {
    case 'd': case 'D': case 'w': case 'W': case 's': case 'S': push_class(r, c); return 1;
    case 'n': *out = '\n'; return 0;
    case 't': *out = '\t'; return 0;
    case 'r': *out = '\r'; return 0;
    case 'f': *out = '\f'; return 0;
    case 'v': *out = '\v'; return 0;
    case '0':
        if (!at_end(r) && peek(r) >= '0' && peek(r) <= '9') return fail(r, NEEDLE_ESCHEMA, "octal escapes are not supported");
        *out = 0;
        return 0;
    case 'x': return read_hex(r, 2, out) < 0 ? -1 : 0;
    case 'u': {
        uint32_t v;
        if (read_hex(r, 4, &v) < 0) return -1;
        if (v >= 0xD800 && v <= 0xDBFF && r->pos + 6 <= r->n && r->cp[r->pos] == '\\' && r->cp[r->pos + 1] == 'u') {
            r->pos += 2;
            uint32_t lo;
            if (read_hex(r, 4, &lo) < 0) return -1;
            if (lo < 0xDC00 || lo > 0xDFFF) return fail(r, NEEDLE_ESCHEMA, "unpaired surrogate escape");
            v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
        } else if (v >= 0xD800 && v <= 0xDFFF) {
            return fail(r, NEEDLE_ESCHEMA, "unpaired surrogate escape");
        }
        *out = v;
        return 0;
    }
    case 'b':
        if (in_class) { *out = 8; return 0; }
        return fail(r, NEEDLE_ESCHEMA, "unsupported construct \\b (word boundary)");
    case 'B': return fail(r, NEEDLE_ESCHEMA, "unsupported construct \\B (word boundary)");
    case 'p': case 'P': return fail(r, NEEDLE_ESCHEMA, "unsupported construct \\p (Unicode property)");
    case 'c': return fail(r, NEEDLE_ESCHEMA, "unsupported construct \\c (control escape)");
    case 'k': return fail(r, NEEDLE_ESCHEMA, "unsupported construct \\k (named backreference)");
    default:
        if (c >= '1' && c <= '9') return fail(r, NEEDLE_ESCHEMA, "unsupported construct: backreference");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            return fail(r, NEEDLE_ESCHEMA, "unsupported escape in pattern");
        *out = c; /* escaped punctuation stands for itself */
        return 0;
    }
}

static int parse_class(rx *r)
{
    /* r->pos is just after '[' */
    int negate = 0;
    if (peek(r) == '^' && !at_end(r)) { negate = 1; r->pos++; }
    int off = r->np;
    int first = 1;
    for (;;) {
        if (at_end(r)) return fail(r, NEEDLE_ESCHEMA, "unterminated character class");
        uint32_t c = r->cp[r->pos];
        if (c == ']' && !first) { r->pos++; break; }
        if (c == ']' && first) { /* ECMA: [] is the empty class, []...] is not special */
            r->pos++;
            break;
        }
        first = 0;
        r->pos++;
        uint32_t lo;
        if (c == '\\') {
            int k = parse_escape(r, &lo, 1);
            if (k < 0) return -1;
            if (k == 1) continue;
        } else if (c == '[' && r->pos < r->n && r->cp[r->pos] == ':') {
            return fail(r, NEEDLE_ESCHEMA, "POSIX classes are not supported");
        } else {
            lo = c;
        }
        uint32_t hi = lo;
        if (peek(r) == '-' && r->pos + 1 < r->n && r->cp[r->pos + 1] != ']') {
            r->pos++;
            uint32_t d = r->cp[r->pos++];
            if (d == '\\') {
                int k = parse_escape(r, &hi, 1);
                if (k < 0) return -1;
                if (k == 1) return fail(r, NEEDLE_ESCHEMA, "class escape as a range end");
            } else {
                hi = d;
            }
            if (hi < lo) return fail(r, NEEDLE_ESCHEMA, "range out of order in character class");
        }
        pool_push(r, lo, hi);
    }
    if (r->err) return -1;
    normalize_tail(r, off);
    if (negate) complement_tail(r, off);
    return set_node(r, off);
}

static int parse_alt(rx *r, int depth);

static int parse_atom(rx *r, int depth)
{
    uint32_t c = r->cp[r->pos++];
    int off = r->np;
    switch (c) {
    case '(': {
        if (peek(r) == '?') {
            r->pos++;
            uint32_t k = peek(r);
            if (k == ':') {
                r->pos++;
            } else if ((k == '<' || k == 'P') && r->pos + 1 < r->n && r->cp[r->pos + 1] != '=' &&
                       r->cp[r->pos + 1] != '!') {
                /* named group: (?<name>...) or (?P<name>...) */
                if (k == 'P') r->pos++;
                if (peek(r) != '<') return fail(r, NEEDLE_ESCHEMA, "unsupported group syntax");
                while (!at_end(r) && peek(r) != '>') r->pos++;
                if (at_end(r)) return fail(r, NEEDLE_ESCHEMA, "unterminated group name");
                r->pos++;
            } else {
                return fail(r, NEEDLE_ESCHEMA, "unsupported construct: lookaround or inline flags");
            }
        }
        int id = parse_alt(r, depth + 1);
        if (id < 0) return -1;
        if (at_end(r) || peek(r) != ')') return fail(r, NEEDLE_ESCHEMA, "missing ')'");
        r->pos++;
        return id;
    }
    case '[': return parse_class(r);
    case '.':
        pool_push(r, 0, 9); pool_push(r, 11, 12); pool_push(r, 14, 0x2027); pool_push(r, 0x202A, MAX_CP);
        return r->err ? -1 : set_node(r, off);
    case '\\': {
        uint32_t v;
        int k = parse_escape(r, &v, 0);
        if (k < 0) return -1;
        if (k == 0) pool_push(r, v, v);
        return r->err ? -1 : set_node(r, off);
    }
    case '^': case '$': return fail(r, NEEDLE_ESCHEMA, "anchors are only supported at the ends of the pattern");
    case '*': case '+': case '?': case '{': return fail(r, NEEDLE_ESCHEMA, "quantifier without a target");
    case ')': return fail(r, NEEDLE_ESCHEMA, "unbalanced ')'");
    default:
        pool_push(r, c, c);
        return r->err ? -1 : set_node(r, off);
    }
}

/* {m}, {m,}, {m,n} after '{'; returns 1 when parsed, 0 when not a quantifier. */
static int parse_braces(rx *r, int *min, int *max)
{
    size_t p = r->pos;
    long m = 0, n = -1;
    int digits = 0;
    while (p < r->n && r->cp[p] >= '0' && r->cp[p] <= '9') {
        if (m < 100000) m = m * 10 + (long)(r->cp[p] - '0');
        p++;
        digits++;
    }
    if (!digits) return 0;
    if (p < r->n && r->cp[p] == ',') {
        p++;
        int d2 = 0;
        long v = 0;
        while (p < r->n && r->cp[p] >= '0' && r->cp[p] <= '9') {
            if (v < 100000) v = v * 10 + (long)(r->cp[p] - '0');
            p++;
            d2++;
        }
        n = d2 ? v : -1;
    } else {
        n = m;
    }
    if (p >= r->n || r->cp[p] != '}') return 0;
    r->pos = p + 1;
    if (m > ND_REGEX_MAX_REPEAT || n > ND_REGEX_MAX_REPEAT) return fail(r, NEEDLE_ELIMIT, "repeat count too large");
    if (n >= 0 && n < m) return fail(r, NEEDLE_ESCHEMA, "repeat {m,n} with n < m");
    *min = (int)m;
    *max = (int)n;
    return 1;
}

/* A concatenation; stops before '|' or ')' (or a final '$' when top). */
static int parse_cat(rx *r, int depth, int top, int *anchored_end)
{
    int cat = new_node(r, R_CAT), last = -1;
    if (cat < 0) return -1;
    while (!at_end(r) && peek(r) != '|' && peek(r) != ')') {
        if (top && peek(r) == '$' && (r->pos + 1 == r->n || r->cp[r->pos + 1] == '|')) {
            r->pos++;
            *anchored_end = 1;
            break;
        }
        int atom = parse_atom(r, depth);
        if (atom < 0) return -1;
        for (;;) { /* quantifiers, possibly stacked like a{2}? (lazy) */
            int min = 0, max = 0; /* every path to their use sets them; gcc 12 -O1 -fsanitize=thread cannot tell */
            uint32_t q = peek(r);
            if (at_end(r)) break;
            if (q == '*') { min = 0; max = -1; r->pos++; }
            else if (q == '+') { min = 1; max = -1; r->pos++; }
            else if (q == '?') { min = 0; max = 1; r->pos++; }
            else if (q == '{') {
                r->pos++;
                int k = parse_braces(r, &min, &max);
                if (k < 0) return -1;
                if (k == 0) { r->pos--; break; } /* a literal '{' follows: let the next atom take it */
            } else break;
            if (!at_end(r) && peek(r) == '?') r->pos++; /* lazy: same language */
            if (!at_end(r) && peek(r) == '+') return fail(r, NEEDLE_ESCHEMA, "possessive quantifiers are not supported");
            int rep = new_node(r, R_REP);
            if (rep < 0) return -1;
            r->nodes[rep].first = atom;
            r->nodes[rep].min = min;
            r->nodes[rep].max = max;
            atom = rep;
            if (!at_end(r) && (peek(r) == '*' || peek(r) == '+' || peek(r) == '?' || peek(r) == '{'))
                if (peek(r) != '{') return fail(r, NEEDLE_ESCHEMA, "nested quantifier");
        }
        add_child(r, cat, &last, atom);
    }
    return cat;
}

/* An "any character" star for unanchored ends. */
static int any_star(rx *r)
{
    int off = r->np;
    pool_push(r, 0, MAX_CP);
    int s = set_node(r, off);
    if (s < 0) return -1;
    int rep = new_node(r, R_REP);
    if (rep < 0) return -1;
    r->nodes[rep].first = s;
    r->nodes[rep].min = 0;
    r->nodes[rep].max = -1;
    return rep;
}

static int parse_alt(rx *r, int depth)
{
    if (depth > 64) return fail(r, NEEDLE_ELIMIT, "pattern nested too deeply");
    int alt = new_node(r, R_ALT), last = -1;
    if (alt < 0) return -1;
    for (;;) {
        int top = depth == 0, anchored_start = 0, anchored_end = 0;
        if (top && !at_end(r) && peek(r) == '^') { r->pos++; anchored_start = 1; }
        int cat = parse_cat(r, depth, top, &anchored_end);
        if (cat < 0) return -1;
        if (top) {
            /* search semantics: unanchored sides accept any surrounding text */
            if (!anchored_start) {
                int a = any_star(r);
                if (a < 0) return -1;
                r->nodes[a].next = r->nodes[cat].first;
                r->nodes[cat].first = a;
            }
            if (!anchored_end) {
                int a = any_star(r);
                if (a < 0) return -1;
                int *link = &r->nodes[cat].first;
                while (*link >= 0) link = &r->nodes[*link].next;
                *link = a;
            }
        }
        add_child(r, alt, &last, cat);
        if (at_end(r) || peek(r) != '|') break;
        r->pos++;
    }
    if (depth == 0 && !at_end(r)) return fail(r, NEEDLE_ESCHEMA, "unbalanced ')'");
    return alt;
}

/* ------------------------------------------------------------ NFA */

static int nstate_new(rx *r)
{
    if (r->nns >= MAX_NFA_STATES) return fail(r, NEEDLE_ELIMIT, "pattern too complex (NFA size)");
    if (r->nns == r->nscap) {
        int cap = r->nscap ? r->nscap * 2 : 256;
        nstate *p = realloc(r->ns, (size_t)cap * sizeof *p);
        if (!p) return fail(r, NEEDLE_ENOMEM, "out of memory");
        r->ns = p;
        r->nscap = cap;
    }
    r->ns[r->nns] = (nstate){-1, -1, 0, 0, -1};
    return r->nns++;
}

/* Add an epsilon edge a -> b; a state has two slots, chain through a fresh one when full. */
static int eps(rx *r, int a, int b)
{
    if (r->ns[a].e1 < 0) { r->ns[a].e1 = b; return 0; }
    if (r->ns[a].e2 < 0) { r->ns[a].e2 = b; return 0; }
    int c = nstate_new(r);
    if (c < 0) return -1;
    r->ns[c].e1 = r->ns[a].e2;
    r->ns[c].e2 = b;
    r->ns[a].e2 = c;
    return 0;
}

/* Build node id into a fragment from *s to *e (e has no outgoing edges yet). */
static int build(rx *r, int id, int *s, int *e)
{
    const rnode nd = r->nodes[id];
    int a = nstate_new(r);
    if (a < 0) return -1;
    int b = nstate_new(r);
    if (b < 0) return -1;
    *s = a;
    *e = b;
    switch (nd.kind) {
    case R_SET:
        r->ns[a].set_off = nd.set_off;
        r->ns[a].set_n = nd.set_n;
        r->ns[a].to = b;
        if (nd.set_n == 0) r->ns[a].to = -1; /* empty class: matches nothing */
        return 0;
    case R_CAT: {
        int cur = a;
        for (int k = nd.first; k >= 0; k = r->nodes[k].next) {
            int cs, ce;
            if (build(r, k, &cs, &ce) < 0 || eps(r, cur, cs) < 0) return -1;
            cur = ce;
        }
        return eps(r, cur, b);
    }
    case R_ALT:
        for (int k = nd.first; k >= 0; k = r->nodes[k].next) {
            int cs, ce;
            if (build(r, k, &cs, &ce) < 0 || eps(r, a, cs) < 0 || eps(r, ce, b) < 0) return -1;
        }
        return 0;
    case R_REP: {
        int cur = a;
        for (int i = 0; i < nd.min; i++) {
            int cs, ce;
            if (build(r, nd.first, &cs, &ce) < 0 || eps(r, cur, cs) < 0) return -1;
            cur = ce;
        }
        if (nd.max < 0) {
            int cs, ce;
            if (build(r, nd.first, &cs, &ce) < 0) return -1;
            if (eps(r, cur, cs) < 0 || eps(r, cur, b) < 0 || eps(r, ce, cur) < 0) return -1;
            /* the loop goes back through `cur`, which also exits to b */
            return 0;
        }
        for (int i = nd.min; i < nd.max; i++) {
            int cs, ce;
            if (build(r, nd.first, &cs, &ce) < 0) return -1;
            if (eps(r, cur, cs) < 0 || eps(r, cur, b) < 0) return -1;
            cur = ce;
        }
        return eps(r, cur, b);
    }
    }
    return fail(r, NEEDLE_ESCHEMA, "internal: bad node");
}

/* ------------------------------------------------------------ DFA */

typedef struct dset_table {
    int32_t *items;     /* concatenated sorted NFA state lists */
    size_t nitems, icap;
    size_t *off;        /* per DFA state: offset and count */
    int *cnt;
    int n, cap;
    int32_t *hash;      /* open addressing: DFA id or -1 */
    size_t hcap;
} dset_table;

static uint64_t hash_ids(const int32_t *ids, int n)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) h = (h ^ (uint32_t)ids[i]) * 1099511628211ull;
    return h;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* Find or add the set ids[0..n) (sorted); returns its DFA id, or -1. */
static int dset_intern(rx *r, dset_table *t, const int32_t *ids, int n, int *is_new)
{
    if ((size_t)(t->n + 1) * 2 > t->hcap) {
        size_t hc = t->hcap ? t->hcap * 2 : 64;
        int32_t *h = malloc(hc * sizeof *h);
        if (!h) return fail(r, NEEDLE_ENOMEM, "out of memory");
        for (size_t i = 0; i < hc; i++) h[i] = -1;
        for (int d = 0; d < t->n; d++) {
            size_t j = hash_ids(t->items + t->off[d], t->cnt[d]) & (hc - 1);
            while (h[j] >= 0) j = (j + 1) & (hc - 1);
            h[j] = d;
        }
        free(t->hash);
        t->hash = h;
        t->hcap = hc;
    }
    size_t j = hash_ids(ids, n) & (t->hcap - 1);
    while (t->hash[j] >= 0) {
        int d = t->hash[j];
        if (t->cnt[d] == n && memcmp(t->items + t->off[d], ids, (size_t)n * sizeof *ids) == 0) {
            *is_new = 0;
            return d;
        }
        j = (j + 1) & (t->hcap - 1);
    }
    if (t->n >= ND_DFA_MAX_STATES) return fail(r, NEEDLE_ELIMIT, "pattern too complex (DFA states)");
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 64;
        size_t *o = realloc(t->off, (size_t)cap * sizeof *o);
        if (!o) return fail(r, NEEDLE_ENOMEM, "out of memory");
        t->off = o;
        int *c = realloc(t->cnt, (size_t)cap * sizeof *c);
        if (!c) return fail(r, NEEDLE_ENOMEM, "out of memory");
        t->cnt = c;
        t->cap = cap;
    }
    if (t->nitems + (size_t)n > t->icap) {
        size_t cap = t->icap ? t->icap : 1024;
        while (cap < t->nitems + (size_t)n) cap *= 2;
        int32_t *p = realloc(t->items, cap * sizeof *p);
        if (!p) return fail(r, NEEDLE_ENOMEM, "out of memory");
        t->items = p;
        t->icap = cap;
    }
    memcpy(t->items + t->nitems, ids, (size_t)n * sizeof *ids);
    t->off[t->n] = t->nitems;
    t->cnt[t->n] = n;
    t->nitems += (size_t)n;
    t->hash[j] = t->n;
    *is_new = 1;
    return t->n++;
}

typedef struct work {
    int32_t *stack, *list;
    uint32_t *mark;
    uint32_t gen;
} work;

/* Epsilon closure of seeds[0..n) into w->list (sorted); returns its size. */
static int closure(rx *r, work *w, const int32_t *seeds, int n)
{
    w->gen++;
    int sp = 0, cnt = 0;
    for (int i = 0; i < n; i++) {
        if (w->mark[seeds[i]] == w->gen) continue;
        w->mark[seeds[i]] = w->gen;
        w->stack[sp++] = seeds[i];
    }
    while (sp > 0) {
        int32_t s = w->stack[--sp];
        w->list[cnt++] = s;
        int32_t e[2] = {r->ns[s].e1, r->ns[s].e2};
        for (int k = 0; k < 2; k++)
            if (e[k] >= 0 && w->mark[e[k]] != w->gen) {
                w->mark[e[k]] = w->gen;
                w->stack[sp++] = e[k];
            }
    }
    qsort(w->list, (size_t)cnt, sizeof *w->list, cmp_i32);
    return cnt;
}

typedef struct tedge {
    uint32_t lo, hi;
    int32_t to;
} tedge;

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int grow_edges(rx *r, nd_dfa_edge **e, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    nd_dfa_edge *p = realloc(*e, c * sizeof *p);
    if (!p) return fail(r, NEEDLE_ENOMEM, "out of memory");
    *e = p;
    *cap = c;
    return 0;
}

/* Subset construction from NFA start `ns0` with accepting state `nacc`. */
static int determinize(rx *r, int ns0, int nacc, nd_dfa *out)
{
    work w = {0};
    dset_table t = {0};
    nd_dfa_edge *edges = NULL;
    size_t ne = 0, ecap = 0;
    int32_t *estart = NULL;
    tedge *te = NULL;
    uint32_t *pts = NULL;
    int32_t *targets = NULL;
    size_t tecap = 0;
    int ok = -1;
    size_t nn = (size_t)r->nns;
    w.stack = malloc(nn * sizeof *w.stack);
    w.list = malloc(nn * sizeof *w.list);
    w.mark = calloc(nn, sizeof *w.mark);
    targets = malloc(nn * sizeof *targets);
    if (!w.stack || !w.list || !w.mark || !targets) { fail(r, NEEDLE_ENOMEM, "out of memory"); goto done; }

    int32_t seed = ns0, is_new;
    int cnt = closure(r, &w, &seed, 1);
    if (dset_intern(r, &t, w.list, cnt, &is_new) < 0) goto done;
    /* states are processed in creation order; edges are appended per state */
    for (int d = 0; d < t.n; d++) {
        int32_t *es = realloc(estart, (size_t)(d + 2) * sizeof *es);
        if (!es) { fail(r, NEEDLE_ENOMEM, "out of memory"); goto done; }
        estart = es;
        estart[d] = (int32_t)ne;
        /* collect range transitions of the set */
        size_t nte = 0;
        for (int i = 0; i < t.cnt[d]; i++) {
            const nstate *s = &r->ns[t.items[t.off[d] + i]];
            if (s->set_n <= 0 || s->to < 0) continue;
            if (nte + (size_t)s->set_n > tecap) {
                size_t c = tecap ? tecap * 2 : 64;
                while (c < nte + (size_t)s->set_n) c *= 2;
                tedge *p = realloc(te, c * sizeof *p);
                uint32_t *q = realloc(pts, 2 * c * sizeof *q);
                if (p) te = p;
                if (q) pts = q;
                if (!p || !q) { fail(r, NEEDLE_ENOMEM, "out of memory"); goto done; }
                tecap = c;
            }
            for (int k = 0; k < s->set_n; k++) {
                range g = r->pool[s->set_off + k];
                te[nte++] = (tedge){g.lo, g.hi, s->to};
            }
        }
        if (nte == 0) continue;
        size_t np = 0;
        for (size_t i = 0; i < nte; i++) {
            pts[np++] = te[i].lo;
            pts[np++] = te[i].hi + 1;
        }
        qsort(pts, np, sizeof *pts, cmp_u32);
        size_t u = 0;
        for (size_t i = 0; i < np; i++)
            if (u == 0 || pts[i] != pts[u - 1]) pts[u++] = pts[i];
        for (size_t i = 0; i + 1 < u; i++) {
            uint32_t lo = pts[i], hi = pts[i + 1] - 1;
            int nt = 0;
            for (size_t k = 0; k < nte; k++)
                if (te[k].lo <= lo && te[k].hi >= lo) targets[nt++] = te[k].to;
            if (nt == 0) continue;
            int c2 = closure(r, &w, targets, nt);
            int to = dset_intern(r, &t, w.list, c2, &is_new);
            if (to < 0) goto done;
            size_t first = (size_t)estart[d];
            if (ne > first && edges[ne - 1].to == to && edges[ne - 1].hi + 1 == lo) {
                edges[ne - 1].hi = hi;
                continue;
            }
            if (grow_edges(r, &edges, &ecap, ne + 1) < 0) goto done;
            edges[ne++] = (nd_dfa_edge){lo, hi, to};
        }
    }
    {
        int32_t *es = realloc(estart, (size_t)(t.n + 1) * sizeof *es);
        if (!es) { fail(r, NEEDLE_ENOMEM, "out of memory"); goto done; }
        estart = es;
        estart[t.n] = (int32_t)ne;
    }
    /* liveness: a state is live when acceptance is reachable from it */
    int n = t.n;
    uint8_t *acc = calloc((size_t)n, 1), *live = calloc((size_t)n, 1);
    int32_t *renum = malloc((size_t)n * sizeof *renum);
    if (!acc || !live || !renum) {
        free(acc); free(live); free(renum);
        fail(r, NEEDLE_ENOMEM, "out of memory");
        goto done;
    }
    for (int d = 0; d < n; d++)
        for (int i = 0; i < t.cnt[d]; i++)
            if (t.items[t.off[d] + i] == nacc) acc[d] = live[d] = 1;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int d = n - 1; d >= 0; d--) {
            if (live[d]) continue;
            for (int32_t k = estart[d]; k < estart[d + 1]; k++)
                if (live[edges[k].to]) { live[d] = 1; changed = 1; break; }
        }
    }
    int m = 0;
    for (int d = 0; d < n; d++) renum[d] = live[d] ? m++ : -1;
    memset(out, 0, sizeof *out);
    out->n_states = m;
    out->start = n > 0 ? renum[0] : -1;
    out->accept = calloc((size_t)(m ? m : 1), 1);
    out->edge_start = calloc((size_t)m + 1, sizeof *out->edge_start);
    out->edges = malloc((ne ? ne : 1) * sizeof *out->edges);
    out->ascii = malloc((size_t)(m ? m : 1) * 128 * sizeof *out->ascii);
    if (!out->accept || !out->edge_start || !out->edges || !out->ascii) {
        free(acc); free(live); free(renum);
        nd_dfa_free(out);
        fail(r, NEEDLE_ENOMEM, "out of memory");
        goto done;
    }
    size_t w2 = 0;
    for (int d = 0; d < n; d++) {
        if (renum[d] < 0) continue;
        int s = renum[d];
        out->accept[s] = acc[d];
        out->edge_start[s] = (int32_t)w2;
        for (int32_t k = estart[d]; k < estart[d + 1]; k++) {
            if (renum[edges[k].to] < 0) continue;
            nd_dfa_edge e = edges[k];
            e.to = renum[e.to];
            if (w2 > (size_t)out->edge_start[s] && out->edges[w2 - 1].to == e.to && out->edges[w2 - 1].hi + 1 == e.lo)
                out->edges[w2 - 1].hi = e.hi; /* merge neighbours made adjacent by pruning */
            else
                out->edges[w2++] = e;
        }
        for (uint32_t c = 0; c < 128; c++) out->ascii[(size_t)s * 128 + c] = -1;
        for (int32_t k = out->edge_start[s]; k < (int32_t)w2; k++)
            for (uint32_t c = out->edges[k].lo; c <= out->edges[k].hi && c < 128; c++)
                out->ascii[(size_t)s * 128 + c] = out->edges[k].to;
    }
    out->edge_start[m] = (int32_t)w2;
    free(acc); free(live); free(renum);
    ok = 0;
done:
    free(w.stack); free(w.list); free(w.mark); free(targets);
    free(t.items); free(t.off); free(t.cnt); free(t.hash);
    free(edges); free(estart); free(te); free(pts);
    return ok;
}

static int finish(rx *r, int root, nd_dfa *out)
{
    int s, e;
    memset(out, 0, sizeof *out);
    if (root < 0 || build(r, root, &s, &e) < 0 || determinize(r, s, e, out) < 0) {
        int code = r->err ? r->err : NEEDLE_ESCHEMA;
        free(r->nodes); free(r->pool); free(r->ns);
        return code;
    }
    free(r->nodes); free(r->pool); free(r->ns);
    return 0;
}

int nd_regex_compile(const char *pattern, size_t len, nd_dfa *out, char *why, size_t why_size)
{
    memset(out, 0, sizeof *out);
    uint32_t *cps = malloc((len + 1) * sizeof *cps);
    if (!cps) { snprintf(why, why_size, "out of memory"); return NEEDLE_ENOMEM; }
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t k = nd_utf8_decode((const unsigned char *)pattern + i, len - i, &cps[n]);
        if (k == 0) break;
        i += k;
        n++;
    }
    rx r = {0};
    r.cp = cps;
    r.n = n;
    r.why = why;
    r.why_size = why_size;
    int root = parse_alt(&r, 0);
    int rc = finish(&r, r.err ? -1 : root, out);
    free(cps);
    return rc;
}

int nd_dfa_from_literals(const char *const *strs, const size_t *lens, size_t n, nd_dfa *out, char *why,
                         size_t why_size)
{
    rx r = {0};
    r.why = why;
    r.why_size = why_size;
    int alt = new_node(&r, R_ALT), last = -1;
    for (size_t i = 0; i < n && !r.err; i++) {
        int cat = new_node(&r, R_CAT), cl = -1;
        if (cat < 0) break;
        for (size_t j = 0; j < lens[i] && !r.err;) {
            uint32_t cp;
            size_t k = nd_utf8_decode((const unsigned char *)strs[i] + j, lens[i] - j, &cp);
            j += k;
            int off = r.np;
            pool_push(&r, cp, cp);
            int sn = set_node(&r, off);
            if (sn < 0) break;
            add_child(&r, cat, &cl, sn);
        }
        if (!r.err) add_child(&r, alt, &last, cat);
    }
    return finish(&r, r.err ? -1 : alt, out);
}

int nd_dfa_any(nd_dfa *out)
{
    char why[8];
    return nd_regex_compile("", 0, out, why, sizeof why);
}

int nd_regex_accepts(const char *pattern, size_t len, const char *text)
{
    nd_dfa d;
    char why[160];
    if (nd_regex_compile(pattern, len, &d, why, sizeof why) != 0) return 0;
    int32_t s = d.start;
    for (const char *c = text; *c && s >= 0; c++) s = nd_dfa_step(&d, s, (unsigned char)*c);
    int ok = s >= 0 && d.accept[s];
    nd_dfa_free(&d);
    return ok;
}

void nd_dfa_free(nd_dfa *d)
{
    free(d->accept);
    free(d->edge_start);
    free(d->edges);
    free(d->ascii);
    memset(d, 0, sizeof *d);
}
