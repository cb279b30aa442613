/* grammar.c - the runtime: a set of frame stacks advanced one byte at a time.
 *
 * Each node kind has a step function that looks at one byte and either
 * consumes it (possibly pushing a child frame for the value that follows),
 * asks for it to be fed again (a child was pushed that starts with this byte),
 * says "I could end here, give the byte to my parent" (numbers and literals,
 * whose end is only known when a byte that cannot continue them arrives), or
 * refuses it.  A refusal is also how viability is enforced: a step never
 * enters a position from which no valid completion exists.
 *
 * Frame fields per kind (nd_gframe.a/b/c, phase, aux):
 *   LITERAL  a candidate index (smallest matching), b bytes matched
 *   STRING   a DFA state, b code points so far, c partial code point, aux counters;
 *            a copied value (a free string under a copy source) skips its DFA,
 *            which takes any text: a and b hold the copy state (copy_source.h)
 *   INTEGER  a sign, b:c magnitude (hi:lo), aux digits
 *   NUMBER   a sign | int digits<<8 | frac digits<<16, b:c mantissa (bounded only)
 *   ARRAY    a items so far
 *   OBJECT   a next property index, b key candidate, c key bytes matched
 *   CALL     b tool candidate, c head bytes matched
 *   MAP      (phase only)
 */
#include "grammar/grammar.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema.h"
#include "core/error.h"

enum { ST_DEAD, ST_CONSUMED, ST_AGAIN, ST_POP };

/* phases shared by the container kinds */
enum { P_OPEN = 0, P_FIRST = 1, P_AFTER = 2, P_KEY = 3, P_DONE = 4, P_NEXT = 5 };
/* string phases */
enum { S_OPEN, S_BODY, S_ESC, S_HEX, S_LOW_BS, S_LOW_U, S_LOW_HEX, S_UTF8, S_DONE };

typedef struct tstack {
    nd_gframe f[ND_G_MAX_DEPTH];
    int d;
} tstack;

static const nd_gnode *node_of(const nd_grammar *g, const nd_gframe *f) { return &g->nodes[f->node]; }

static int fits(const nd_grammar *g, int depth, int node)
{
    return (uint64_t)depth + g->nodes[node].min_depth <= ND_G_MAX_DEPTH;
}

static void init_frame(const nd_grammar *g, nd_gframe *f, int node)
{
    memset(f, 0, sizeof *f);
    f->node = (uint16_t)node;
    /* a copied value starts at copy state 0 (copy_source.h) */
    if (g->nodes[node].kind == ND_G_STRING && !(g->copy && g->nodes[node].copy_value))
        f->a = (uint32_t)g->nodes[node].dfa.start;
}

/* Push `node` on t (the caller checked it fits). */
static void push(const nd_grammar *g, tstack *t, int node)
{
    init_frame(g, &t->f[t->d], node);
    t->d++;
}

static uint64_t get64(const nd_gframe *f) { return ((uint64_t)f->b << 32) | f->c; }
static void set64(nd_gframe *f, uint64_t v)
{
    f->b = (uint32_t)(v >> 32);
    f->c = (uint32_t)v;
}

/* ------------------------------------------------------------ literal */

static int literal_can_end(const nd_gnode *n, const nd_gframe *f)
{
    return n->n_lits > 0 && n->lit_lens[f->a] == f->b;
}

static int literal_finished(const nd_gnode *n, const nd_gframe *f)
{
    if (!literal_can_end(n, f)) return 0;
    uint32_t a = f->a + 1, b = f->b;
    return !((int)a < n->n_lits && n->lit_lens[a] > b && memcmp(n->lits[a], n->lits[f->a], b) == 0);
}

static int step_literal(const nd_gnode *n, nd_gframe *f, unsigned char byte)
{
    uint32_t off = f->b;
    for (int k = (int)f->a; k < n->n_lits; k++) {
        if (k != (int)f->a && (n->lit_lens[k] < off || memcmp(n->lits[k], n->lits[f->a], off) != 0)) break;
        if (n->lit_lens[k] > off && (unsigned char)n->lits[k][off] == byte) {
            f->a = (uint32_t)k;
            f->b = off + 1;
            return ST_CONSUMED;
        }
    }
    return literal_can_end(n, f) ? ST_POP : ST_DEAD;
}

/* ------------------------------------------------------------ string */

/* Some code point in [lo, hi] leads from the frame's DFA state to a viable
 * state, or for a copied value (cs set: a free string, whose DFA takes every
 * code point and which has no bounds) continues the copy. */
static int range_viable(const nd_gnode *n, const nd_copy_source *cs, const nd_gframe *f, uint32_t lo, uint32_t hi)
{
    if (lo > hi) return 0;
    if (cs) return nd_copy_range_viable(cs, f->a, f->b, lo, hi);
    const nd_dfa *d = &n->dfa;
    int32_t s = (int32_t)f->a;
    for (int32_t e = d->edge_start[s]; e < d->edge_start[s + 1]; e++) {
        const nd_dfa_edge *x = &d->edges[e];
        if (x->hi < lo) continue;
        if (x->lo > hi) break;
        if (nd_string_viable(n, x->to, f->b + 1)) return 1;
    }
    return 0;
}

static int emit_cp(const nd_gnode *n, const nd_copy_source *cs, nd_gframe *f, uint32_t cp)
{
    if (cs) {
        if (nd_copy_step(cs, &f->a, &f->b, cp) < 0) return ST_DEAD;
    } else {
        int32_t t = nd_dfa_step(&n->dfa, (int32_t)f->a, cp);
        if (t < 0 || !nd_string_viable(n, t, f->b + 1)) return ST_DEAD;
        f->a = (uint32_t)t;
        /* free strings do not count: equal positions then have equal states, so a
         * long free text reuses one cached mask */
        if (!n->free_string) f->b++;
    }
    f->c = 0;
    f->aux = 0;
    f->phase = S_BODY;
    return ST_CONSUMED;
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The escapes a generated string may use are the ones json.dumps writes (the
 * layouts the models are trained on, SPEC.md section 7, and nd_json_write_string):
 * \" \\ \b \f \n \r \t, and \uXXXX only for the other control characters and
 * for code points from DEL (0x7F) up.  \u0041 for "A", \u000a for a newline and
 * \/ are valid JSON but never canonical: a small model that starts down that
 * path spends six tokens per character, and one was measured spelling a copied
 * name \u004c\u006f... until max_new_tokens ran out.  The code points a \u
 * escape may spell, as closed intervals: */
static const uint32_t U_ESCAPES[][2] = {{0x00, 0x07}, {0x0B, 0x0B}, {0x0E, 0x1F}, {0x7F, 0xFFFF}};
/* the code points of the two-character escapes \" \\ \b \f \n \r \t (step_string's S_ESC) */
static const uint32_t SHORT_ESCAPES[] = {'"', '\\', 8, 12, 10, 13, 9};

static int u_escape_allowed(uint32_t cu)
{
    for (size_t i = 0; i < sizeof U_ESCAPES / sizeof U_ESCAPES[0]; i++)
        if (cu >= U_ESCAPES[i][0] && cu <= U_ESCAPES[i][1]) return 1;
    return 0;
}

/* Code points spelt by \uXXXX with XXXX in [lo, hi] (UTF-16 code units): the
 * plain ones, plus (for high surrogates) the supplementary ones their pairs encode. */
static int hex_span_viable(const nd_gnode *n, const nd_copy_source *cs, const nd_gframe *f, uint32_t lo, uint32_t hi)
{
    if (range_viable(n, cs, f, lo, hi < 0xD7FF ? hi : 0xD7FF)) return 1;
    if (range_viable(n, cs, f, lo > 0xE000 ? lo : 0xE000, hi)) return 1;
    uint32_t slo = lo > 0xD800 ? lo : 0xD800, shi = hi < 0xDBFF ? hi : 0xDBFF;
    if (slo <= shi)
        return range_viable(n, cs, f, 0x10000 + ((slo - 0xD800) << 10), 0x10000 + ((shi - 0xD800) << 10) + 0x3FF);
    return 0;
}

/* Some code point an allowed \uXXXX starting with the k hex digits v spells is viable. */
static int hex_prefix_viable(const nd_gnode *n, const nd_copy_source *cs, const nd_gframe *f, uint32_t v, int k)
{
    int sh = 4 * (4 - k);
    uint32_t lo = v << sh, hi = ((v + 1) << sh) - 1;
    for (size_t i = 0; i < sizeof U_ESCAPES / sizeof U_ESCAPES[0]; i++) {
        uint32_t a = lo > U_ESCAPES[i][0] ? lo : U_ESCAPES[i][0], b = hi < U_ESCAPES[i][1] ? hi : U_ESCAPES[i][1];
        if (a <= b && hex_span_viable(n, cs, f, a, b)) return 1;
    }
    return 0;
}

/* After a backslash: some escape can spell a viable code point (a short one, or a \u one). */
static int escape_viable(const nd_gnode *n, const nd_copy_source *cs, const nd_gframe *f)
{
    for (size_t i = 0; i < sizeof SHORT_ESCAPES / sizeof SHORT_ESCAPES[0]; i++)
        if (range_viable(n, cs, f, SHORT_ESCAPES[i], SHORT_ESCAPES[i])) return 1;
    return hex_prefix_viable(n, cs, f, 0, 0);
}

static int utf8_check(const nd_gnode *n, const nd_copy_source *cs, nd_gframe *f, uint32_t v, int total, int remaining)
{
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    static const uint32_t max_cp[5] = {0, 0, 0x7FF, 0xFFFF, 0x10FFFF};
    if (remaining == 0) {
        if (v < min_cp[total] || v > max_cp[total]) return ST_DEAD;
        return emit_cp(n, cs, f, v);
    }
    uint32_t lo = v << (6 * remaining), hi = lo | ((1u << (6 * remaining)) - 1);
    if (lo < min_cp[total]) lo = min_cp[total];
    if (hi > max_cp[total]) hi = max_cp[total];
    if (!range_viable(n, cs, f, lo, hi)) return ST_DEAD; /* also refuses overlongs and surrogates */
    f->phase = S_UTF8;
    f->aux = (uint8_t)((total << 4) | remaining);
    f->c = v;
    return ST_CONSUMED;
}

static int step_string(const nd_gnode *n, const nd_copy_source *cs, nd_gframe *f, unsigned char byte)
{
    switch (f->phase) {
    case S_OPEN:
        if (byte != '"') return ST_DEAD;
        f->phase = S_BODY;
        return ST_CONSUMED;
    case S_BODY:
        if (byte == '"') {
            if (cs ? !nd_copy_can_end(cs, f->a, f->b) /* never empty, and at a word end */
                   : !n->dfa.accept[f->a] || f->b < n->min_len || f->b > n->max_len)
                return ST_DEAD;
            f->phase = S_DONE;
            return ST_CONSUMED;
        }
        if (byte == '\\') {
            if (!escape_viable(n, cs, f)) return ST_DEAD;
            f->phase = S_ESC;
            return ST_CONSUMED;
        }
        if (byte < 0x20) return ST_DEAD;
        if (byte < 0x80) return emit_cp(n, cs, f, byte);
        if (byte >= 0xC2 && byte <= 0xDF) return utf8_check(n, cs, f, byte & 0x1F, 2, 1);
        if (byte >= 0xE0 && byte <= 0xEF) return utf8_check(n, cs, f, byte & 0x0F, 3, 2);
        if (byte >= 0xF0 && byte <= 0xF4) return utf8_check(n, cs, f, byte & 0x07, 4, 3);
        return ST_DEAD;
    case S_UTF8: {
        if ((byte & 0xC0) != 0x80) return ST_DEAD;
        int total = f->aux >> 4, remaining = (f->aux & 15) - 1;
        return utf8_check(n, cs, f, (f->c << 6) | (byte & 0x3F), total, remaining);
    }
    case S_ESC:
        switch (byte) {
        case '"': return emit_cp(n, cs, f, '"');
        case '\\': return emit_cp(n, cs, f, '\\');
        case 'b': return emit_cp(n, cs, f, 8);
        case 'f': return emit_cp(n, cs, f, 12);
        case 'n': return emit_cp(n, cs, f, 10);
        case 'r': return emit_cp(n, cs, f, 13);
        case 't': return emit_cp(n, cs, f, 9);
        case 'u':
            /* only when some allowed \uXXXX leads on (a quote, say, is \" and never \u0022) */
            if (!hex_prefix_viable(n, cs, f, 0, 0)) return ST_DEAD;
            f->phase = S_HEX;
            f->aux = 0;
            f->c = 0;
            return ST_CONSUMED;
        default: return ST_DEAD;
        }
    case S_HEX: {
        int h = hexval(byte);
        if (h < 0) return ST_DEAD;
        uint32_t v = f->c * 16 + (uint32_t)h;
        int k = f->aux + 1;
        if (k < 4) {
            if (!hex_prefix_viable(n, cs, f, v, k)) return ST_DEAD;
            f->c = v;
            f->aux = (uint8_t)k;
            return ST_CONSUMED;
        }
        if (!u_escape_allowed(v)) return ST_DEAD; /* a character with a shorter canonical spelling */
        if (v >= 0xDC00 && v <= 0xDFFF) return ST_DEAD; /* a lone low surrogate */
        if (v >= 0xD800 && v <= 0xDBFF) {
            if (!range_viable(n, cs, f, 0x10000 + ((v - 0xD800) << 10), 0x10000 + ((v - 0xD800) << 10) + 0x3FF))
                return ST_DEAD;
            f->phase = S_LOW_BS;
            f->c = v;
            f->aux = 0;
            return ST_CONSUMED;
        }
        return emit_cp(n, cs, f, v);
    }
    case S_LOW_BS:
        if (byte != '\\') return ST_DEAD;
        f->phase = S_LOW_U;
        return ST_CONSUMED;
    case S_LOW_U:
        if (byte != 'u') return ST_DEAD;
        f->phase = S_LOW_HEX;
        f->c <<= 16;
        f->aux = 0;
        return ST_CONSUMED;
    case S_LOW_HEX: {
        int h = hexval(byte);
        if (h < 0) return ST_DEAD;
        uint32_t high = f->c >> 16, low = (f->c & 0xFFFF) * 16 + (uint32_t)h;
        int k = f->aux + 1, sh = 4 * (4 - k);
        uint32_t lo = low << sh, hi = ((low + 1) << sh) - 1;
        if (lo < 0xDC00) lo = 0xDC00;
        if (hi > 0xDFFF) hi = 0xDFFF;
        if (lo > hi) return ST_DEAD;
        uint32_t base = 0x10000 + ((high - 0xD800) << 10);
        if (k == 4) return emit_cp(n, cs, f, base + (low - 0xDC00));
        if (!range_viable(n, cs, f, base + (lo - 0xDC00), base + (hi - 0xDC00))) return ST_DEAD;
        f->c = (high << 16) | low;
        f->aux = (uint8_t)k;
        return ST_CONSUMED;
    }
    default: return ST_DEAD;
    }
}

/* ------------------------------------------------------------ integer */

enum { N_START, N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

static int int_in_range(const nd_gnode *n, int neg, uint64_t v)
{
    int64_t x = neg ? -(int64_t)v : (int64_t)v;
    return x >= n->imin && x <= n->imax && (n->mult <= 1 || x % n->mult == 0);
}

static int integer_can_end(const nd_gnode *n, const nd_gframe *f)
{
    return f->phase == N_ZERO || (f->phase == N_INT && int_in_range(n, (int)f->a, get64(f)));
}

static int step_integer(const nd_gnode *n, nd_gframe *f, unsigned char byte)
{
    int digit = byte >= '0' && byte <= '9' ? byte - '0' : -1;
    switch (f->phase) {
    case N_START:
        if (byte == '-') {
            if (!nd_int_viable(n, 1, 0, 0)) return ST_DEAD;
            f->a = 1;
            f->phase = N_MINUS;
            return ST_CONSUMED;
        }
        if (digit < 0 || !nd_int_viable(n, 0, (uint64_t)digit, 1)) return ST_DEAD;
        set64(f, (uint64_t)digit);
        f->aux = 1;
        f->phase = digit == 0 ? N_ZERO : N_INT;
        return ST_CONSUMED;
    case N_MINUS:
        if (digit <= 0 || !nd_int_viable(n, 1, (uint64_t)digit, 1)) return ST_DEAD; /* no "-0" */
        set64(f, (uint64_t)digit);
        f->aux = 1;
        f->phase = N_INT;
        return ST_CONSUMED;
    case N_ZERO: return ST_POP;
    case N_INT:
        if (digit >= 0 && f->aux < ND_G_INT_MAX_DIGITS) {
            uint64_t v = get64(f) * 10 + (uint64_t)digit;
            if (nd_int_viable(n, (int)f->a, v, f->aux + 1)) {
                set64(f, v);
                f->aux++;
                return ST_CONSUMED;
            }
        }
        return integer_can_end(n, f) ? ST_POP : ST_DEAD;
    }
    return ST_DEAD;
}

/* ------------------------------------------------------------ number */

static int step_number_free(nd_gframe *f, unsigned char byte)
{
    int digit = byte >= '0' && byte <= '9';
    int e = byte == 'e' || byte == 'E';
    uint8_t p = f->phase, next;
    switch (p) {
    case N_START: next = byte == '-' ? N_MINUS : byte == '0' ? N_ZERO : digit ? N_INT : 255; break;
    case N_MINUS: next = byte == '0' ? N_ZERO : digit ? N_INT : 255; break;
    case N_ZERO: next = byte == '.' ? N_DOT : e ? N_E : 254; break;
    case N_INT: next = digit ? N_INT : byte == '.' ? N_DOT : e ? N_E : 254; break;
    case N_DOT: next = digit ? N_FRAC : 255; break;
    case N_FRAC: next = digit ? N_FRAC : e ? N_E : 254; break;
    case N_E: next = byte == '+' || byte == '-' ? N_ESIGN : digit ? N_EXP : 255; break;
    case N_ESIGN: next = digit ? N_EXP : 255; break;
    case N_EXP: next = digit ? N_EXP : 254; break;
    default: next = 255;
    }
    if (next == 255) return ST_DEAD;
    if (next == 254) return ST_POP; /* only from phases that can end */
    f->phase = next;
    return ST_CONSUMED;
}

static const double pow10_tab[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                   1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18};

static int num_feasible(const nd_gnode *n, double x)
{
    if (x < n->nmin || (x == n->nmin && n->nmin_excl)) return 0;
    if (x > n->nmax || (x == n->nmax && n->nmax_excl)) return 0;
    return 1;
}

/* Does [L, U) (or the point L when point) meet the feasible set?  Decimals are
 * dense, so an overlap of positive width is taken as reachable. */
static int interval_ok(const nd_gnode *n, double L, double U, int point, int neg)
{
    if (neg) { /* (-U, -L] */
        double a = -U, b = -L;
        if (point) return num_feasible(n, b);
        double lo = a > n->nmin ? a : n->nmin, hi = b < n->nmax ? b : n->nmax;
        return lo < hi || (lo == hi && lo > a && num_feasible(n, lo));
    }
    if (point) return num_feasible(n, L);
    double lo = L > n->nmin ? L : n->nmin, hi = U < n->nmax ? U : n->nmax;
    return lo < hi || (lo == hi && lo < U && num_feasible(n, lo));
}

/* Bounded number: completions of sign/int digits/frac digits/mantissa. */
static int number_viable(const nd_gnode *n, int phase, int neg, int ni, int nf, uint64_t m)
{
    int left = ND_G_NUM_MAX_DIGITS - ni - nf; /* digits that may still be typed */
    /* after the point, at most max_frac digits (multipleOf 10^-max_frac) */
    if (n->max_frac && (phase == N_DOT || phase == N_FRAC) && n->max_frac - nf < left) left = n->max_frac - nf;
    if (phase == N_MINUS) return interval_ok(n, 0, pow10_tab[ND_G_NUM_MAX_DIGITS], 0, 1);
    if (phase == N_ZERO) return interval_ok(n, 0, left > 0 ? 1 : 0, left <= 0, neg);
    if (phase == N_INT) {
        for (int k = 0; k <= left; k++) {
            double L = (double)m * pow10_tab[k], U = ((double)m + 1) * pow10_tab[k];
            if (interval_ok(n, L, U, k == left, neg)) return 1;
        }
        return 0;
    }
    double x = (double)m / pow10_tab[nf];
    if (phase == N_DOT) return left > 0 && interval_ok(n, x, x + 1, 0, neg);
    /* N_FRAC */
    return interval_ok(n, x, x + 1.0 / pow10_tab[nf], left <= 0, neg);
}

static int number_can_end(const nd_gnode *n, const nd_gframe *f)
{
    if (!n->bounded) return f->phase == N_ZERO || f->phase == N_INT || f->phase == N_FRAC || f->phase == N_EXP;
    if (f->phase != N_ZERO && f->phase != N_INT && f->phase != N_FRAC) return 0;
    int nf = (int)(f->a >> 16) & 0xFF;
    /* exact: the mantissa is below 2^53 and 10^nf is exact, so this division
     * rounds exactly like parsing the literal */
    double x = (double)get64(f) / pow10_tab[nf];
    return num_feasible(n, (f->a & 1) ? -x : x);
}

static int step_number(const nd_gnode *n, nd_gframe *f, unsigned char byte)
{
    if (!n->bounded) return step_number_free(f, byte);
    int neg = (int)(f->a & 1), ni = (int)(f->a >> 8) & 0xFF, nf = (int)(f->a >> 16) & 0xFF;
    int digit = byte >= '0' && byte <= '9' ? byte - '0' : -1;
    uint64_t m = get64(f);
    int phase = f->phase, next = -1;
    switch (phase) {
    case N_START:
        if (byte == '-') { neg = 1; next = N_MINUS; }
        else if (digit == 0) { ni = 1; next = N_ZERO; }
        else if (digit > 0) { ni = 1; m = (uint64_t)digit; next = N_INT; }
        break;
    case N_MINUS:
        if (digit == 0) { ni = 1; next = N_ZERO; }
        else if (digit > 0) { ni = 1; m = (uint64_t)digit; next = N_INT; }
        break;
    case N_ZERO:
        if (byte == '.') next = N_DOT;
        break;
    case N_INT:
        if (digit >= 0 && ni + nf < ND_G_NUM_MAX_DIGITS) { ni++; m = m * 10 + (uint64_t)digit; next = N_INT; }
        else if (byte == '.') next = N_DOT;
        break;
    case N_DOT:
    case N_FRAC:
        if (digit >= 0 && ni + nf < ND_G_NUM_MAX_DIGITS && (!n->max_frac || nf < n->max_frac)) {
            nf++;
            m = m * 10 + (uint64_t)digit;
            next = N_FRAC;
        }
        break;
    }
    if (next < 0 || !number_viable(n, next, neg, ni, nf, m))
        return number_can_end(n, f) ? ST_POP : ST_DEAD;
    f->phase = (uint8_t)next;
    f->a = (uint32_t)neg | ((uint32_t)ni << 8) | ((uint32_t)nf << 16);
    set64(f, m);
    return ST_CONSUMED;
}

/* ------------------------------------------------------------ containers */

static int array_item(const nd_gnode *n, uint32_t i)
{
    return (int)i < n->n_prefix ? n->prefix[i] : n->items;
}

static int step_array(const nd_grammar *g, const nd_gnode *n, tstack *t, unsigned char byte)
{
    nd_gframe *f = &t->f[t->d - 1];
    switch (f->phase) {
    case P_OPEN:
        if (byte != '[') return ST_DEAD;
        f->phase = P_FIRST;
        return ST_CONSUMED;
    case P_FIRST: {
        if (byte == ']') {
            if (n->min_items > 0) return ST_DEAD;
            f->phase = P_DONE;
            return ST_CONSUMED;
        }
        int it = array_item(n, 0);
        if (it < 0 || n->max_items == 0 || !fits(g, t->d, it)) return ST_DEAD;
        if (!(g->nodes[it].first[byte / 32] >> (byte % 32) & 1)) return ST_DEAD;
        f->a = 1;
        f->phase = P_AFTER;
        push(g, t, it);
        return ST_AGAIN;
    }
    case P_AFTER:
        if (byte == ',') {
            int it = array_item(n, f->a);
            if (f->a >= n->max_items || it < 0 || !fits(g, t->d, it)) return ST_DEAD;
            f->a++;
            push(g, t, it);
            return ST_CONSUMED;
        }
        if (byte == ']' && f->a >= n->min_items) {
            f->phase = P_DONE;
            return ST_CONSUMED;
        }
        return ST_DEAD;
    }
    return ST_DEAD;
}

/* Match the next byte of one of props[lo..hi] (keys or call heads); the frame's
 * b is the smallest candidate consistent with the c bytes seen so far.  Returns
 * 1 and updates b/c on success. */
static int match_key(const nd_grammar *g, const nd_gnode *n, int depth, nd_gframe *f, int lo, int hi,
                     unsigned char byte)
{
    uint32_t off = f->c;
    const nd_gprop *cur = &n->props[f->b];
    for (int k = lo > (int)f->b ? lo : (int)f->b; k <= hi; k++) {
        const nd_gprop *p = &n->props[k];
        if (p->key_len <= off || (unsigned char)p->key[off] != byte) continue;
        if (off && memcmp(p->key, cur->key, off) != 0) continue;
        if (!fits(g, depth, p->node)) continue;
        f->b = (uint32_t)k;
        f->c = off + 1;
        return 1;
    }
    return 0;
}

static int first_required(const nd_gnode *n, uint32_t from)
{
    int k = (int)from;
    while (k < n->n_props && !n->props[k].required) k++;
    return k;
}

static int step_object(const nd_grammar *g, const nd_gnode *n, tstack *t, unsigned char byte)
{
    nd_gframe *f = &t->f[t->d - 1];
    int req = first_required(n, f->a), last = req < n->n_props ? req : n->n_props - 1;
    switch (f->phase) {
    case P_OPEN:
        if (byte != '{') return ST_DEAD;
        f->phase = P_FIRST;
        return ST_CONSUMED;
    case P_FIRST:
    case P_AFTER:
        if (byte == '}') {
            if (req < n->n_props) return ST_DEAD;
            f->phase = P_DONE;
            return ST_CONSUMED;
        }
        if (f->phase == P_AFTER) {
            if (byte != ',') return ST_DEAD;
            /* only when some key can still follow */
            for (int k = (int)f->a; k <= last; k++)
                if (fits(g, t->d, n->props[k].node)) {
                    f->phase = P_NEXT;
                    return ST_CONSUMED;
                }
            return ST_DEAD;
        }
        /* the first key starts with this byte */
        /* fall through */
    case P_NEXT:
        f->b = f->a;
        f->c = 0;
        if (!match_key(g, n, t->d, f, (int)f->a, last, byte)) return ST_DEAD;
        f->phase = P_KEY;
        return ST_CONSUMED;
    case P_KEY: {
        if (!match_key(g, n, t->d, f, (int)f->a, last, byte)) return ST_DEAD;
        const nd_gprop *p = &n->props[f->b];
        if (f->c < p->key_len) return ST_CONSUMED;
        f->a = f->b + 1;
        f->b = f->c = 0;
        f->phase = P_AFTER;
        push(g, t, p->node);
        return ST_CONSUMED;
    }
    }
    return ST_DEAD;
}

static int step_call(const nd_grammar *g, const nd_gnode *n, tstack *t, unsigned char byte)
{
    nd_gframe *f = &t->f[t->d - 1];
    if (f->phase == 0) {
        if (!match_key(g, n, t->d, f, 0, n->n_props - 1, byte)) return ST_DEAD;
        const nd_gprop *p = &n->props[f->b];
        if (f->c < p->key_len) return ST_CONSUMED;
        f->phase = 1;
        push(g, t, p->node);
        return ST_CONSUMED;
    }
    if (f->phase == 1 && byte == '}') {
        f->phase = P_DONE;
        return ST_CONSUMED;
    }
    return ST_DEAD;
}

static int step_map(const nd_grammar *g, const nd_gnode *n, tstack *t, unsigned char byte)
{
    nd_gframe *f = &t->f[t->d - 1];
    int entry_fits = fits(g, t->d, n->key_node) && fits(g, t->d, n->value_node);
    switch (f->phase) {
    case P_OPEN:
        if (byte != '{') return ST_DEAD;
        f->phase = P_FIRST;
        return ST_CONSUMED;
    case P_FIRST:
        if (byte == '}') {
            f->phase = P_DONE;
            return ST_CONSUMED;
        }
        /* a key starts here */
        /* fall through */
    case P_NEXT:
        if (byte != '"' || !entry_fits) return ST_DEAD;
        f->phase = P_KEY;
        push(g, t, n->key_node);
        return ST_AGAIN;
    case P_KEY:
        if (byte != ':') return ST_DEAD;
        f->phase = P_AFTER;
        push(g, t, n->value_node);
        return ST_CONSUMED;
    case P_AFTER:
        if (byte == '}') {
            f->phase = P_DONE;
            return ST_CONSUMED;
        }
        if (byte != ',' || !entry_fits) return ST_DEAD;
        f->phase = P_NEXT;
        return ST_CONSUMED;
    }
    return ST_DEAD;
}

/* ------------------------------------------------------------ frames */

static int frame_can_end(const nd_grammar *g, const nd_gframe *f)
{
    const nd_gnode *n = node_of(g, f);
    switch (n->kind) {
    case ND_G_LITERAL: return literal_can_end(n, f);
    case ND_G_STRING: return f->phase == S_DONE;
    case ND_G_INTEGER: return integer_can_end(n, f);
    case ND_G_NUMBER: return number_can_end(n, f);
    default: return f->phase == P_DONE;
    }
}

/* Frames with nothing left to read are popped at once, so equal positions have
 * equal states (which makes de-duplication and mask caching work). */
static int frame_finished(const nd_grammar *g, const nd_gframe *f)
{
    const nd_gnode *n = node_of(g, f);
    switch (n->kind) {
    case ND_G_LITERAL: return literal_finished(n, f);
    case ND_G_STRING: return f->phase == S_DONE;
    case ND_G_INTEGER: return f->phase == N_ZERO;
    case ND_G_NUMBER: return 0;
    default: return f->phase == P_DONE;
    }
}

static int step_top(const nd_grammar *g, tstack *t, unsigned char byte)
{
    nd_gframe *f = &t->f[t->d - 1];
    const nd_gnode *n = node_of(g, f);
    switch (n->kind) {
    case ND_G_LITERAL: return step_literal(n, f, byte);
    case ND_G_STRING: return f->phase == S_DONE ? ST_POP : step_string(n, n->copy_value ? g->copy : NULL, f, byte);
    case ND_G_INTEGER: return step_integer(n, f, byte);
    case ND_G_NUMBER: return step_number(n, f, byte);
    case ND_G_ARRAY: return f->phase == P_DONE ? ST_POP : step_array(g, n, t, byte);
    case ND_G_OBJECT: return f->phase == P_DONE ? ST_POP : step_object(g, n, t, byte);
    case ND_G_MAP: return f->phase == P_DONE ? ST_POP : step_map(g, n, t, byte);
    case ND_G_CALL: return f->phase == P_DONE ? ST_POP : step_call(g, n, t, byte);
    default: return ST_DEAD;
    }
}

/* ------------------------------------------------------------ threads */

static void emit_thread(nd_grammar_state *out, const tstack *t)
{
    for (int i = 0; i < out->n_threads; i++)
        if (out->depth[i] == t->d && memcmp(out->frames[i], t->f, (size_t)t->d * sizeof(nd_gframe)) == 0) return;
    if (out->n_threads >= ND_G_MAX_THREADS) return; /* dropping an alternative only narrows the language */
    int i = out->n_threads++;
    out->depth[i] = (uint8_t)t->d;
    memcpy(out->frames[i], t->f, (size_t)t->d * sizeof(nd_gframe));
}

/* Feed one byte to the stack t (modified in place), appending survivors to out. */
static void feed(const nd_grammar *g, tstack *t, unsigned char byte, nd_grammar_state *out)
{
    for (;;) {
        if (t->d == 0) return; /* complete: nothing may follow */
        const nd_gframe *top = &t->f[t->d - 1];
        const nd_gnode *n = node_of(g, top);
        if (n->kind == ND_G_ANYOF) {
            /* expand into the alternatives that can start with this byte */
            int live = 0, last = -1;
            for (int k = 0; k < n->n_alts; k++) {
                int a = n->alts[k];
                if ((g->nodes[a].first[byte / 32] >> (byte % 32) & 1) && fits(g, t->d - 1, a)) {
                    live++;
                    last = a;
                }
            }
            if (live == 0) return;
            for (int k = 0; k < n->n_alts && live > 1; k++) {
                int a = n->alts[k];
                if (a == last || !(g->nodes[a].first[byte / 32] >> (byte % 32) & 1) || !fits(g, t->d - 1, a))
                    continue;
                tstack copy;
                copy.d = t->d;
                memcpy(copy.f, t->f, (size_t)t->d * sizeof(nd_gframe));
                init_frame(g, &copy.f[copy.d - 1], a);
                feed(g, &copy, byte, out);
            }
            init_frame(g, &t->f[t->d - 1], last);
            continue;
        }
        switch (step_top(g, t, byte)) {
        case ST_DEAD: return;
        case ST_POP: t->d--; continue;
        case ST_AGAIN: continue;
        case ST_CONSUMED:
            while (t->d > 0 && frame_finished(g, &t->f[t->d - 1])) t->d--;
            emit_thread(out, t);
            return;
        }
    }
}

/* One byte from `in` into `out` (distinct objects).  0, or -1 when refused. */
static int step_state(const nd_grammar *g, const nd_grammar_state *in, nd_grammar_state *out, unsigned char byte)
{
    out->n_threads = 0;
    tstack t;
    for (int i = 0; i < in->n_threads; i++) {
        t.d = in->depth[i];
        memcpy(t.f, in->frames[i], (size_t)t.d * sizeof(nd_gframe));
        feed(g, &t, byte, out);
    }
    return out->n_threads ? 0 : -1;
}

/* ------------------------------------------------------------ API */

int nd_grammar_compile(const nd_json *tools_array, nd_grammar **out, needle_error *err)
{
    return nd_schema_compile_tools(tools_array, NULL, 0, out, err);
}

int nd_grammar_compile_subset(const nd_json *tools_array, const int *indices, size_t n_indices, nd_grammar **out,
                              needle_error *err)
{
    if (!indices && n_indices) return nd_errorf(err, NEEDLE_EINVAL, "tools: NULL index list");
    static const int none = 0;
    return nd_schema_compile_tools(tools_array, indices ? indices : &none, n_indices, out, err);
}

void nd_grammar_free(nd_grammar *g) { nd_schema_free(g); }

int nd_grammar_set_copy_source(nd_grammar *g, const char *text, size_t len)
{
    nd_copy_source *c = NULL;
    if (text) {
        int rc = nd_copy_source_build(text, len, &c);
        if (rc) return rc;
    }
    nd_copy_source_free(g->copy);
    g->copy = c;
    g->copy_gen++;
    return 0;
}

int nd_grammar_copy_active(const nd_grammar *g) { return g->copy != NULL; }
uint32_t nd_grammar_copy_generation(const nd_grammar *g) { return g->copy_gen; }

size_t nd_grammar_tool_count(const nd_grammar *g) { return g->n_tools; }
const char *nd_grammar_tool_name(const nd_grammar *g, size_t i) { return i < g->n_tools ? g->tool_names[i] : NULL; }

void nd_grammar_start(const nd_grammar *g, nd_grammar_state *s)
{
    s->n_threads = 1;
    s->depth[0] = 1;
    init_frame(g, &s->frames[0][0], g->root);
}

void nd_grammar_state_copy(nd_grammar_state *dst, const nd_grammar_state *src)
{
    dst->n_threads = src->n_threads;
    for (int i = 0; i < src->n_threads; i++) {
        dst->depth[i] = src->depth[i];
        memcpy(dst->frames[i], src->frames[i], (size_t)src->depth[i] * sizeof(nd_gframe));
    }
}

int nd_grammar_step(const nd_grammar *g, const nd_grammar_state *in, nd_grammar_state *out, unsigned char byte)
{
    return step_state(g, in, out, byte);
}

int nd_grammar_advance(const nd_grammar *g, nd_grammar_state *s, const char *bytes, size_t n)
{
    nd_grammar_state tmp;
    for (size_t i = 0; i < n; i++) {
        if (step_state(g, s, &tmp, (unsigned char)bytes[i]) < 0) return -1;
        nd_grammar_state_copy(s, &tmp);
    }
    return 0;
}

int nd_grammar_complete(const nd_grammar *g, const nd_grammar_state *s)
{
    for (int i = 0; i < s->n_threads; i++) {
        int ok = 1;
        for (int k = 0; k < s->depth[i] && ok; k++) ok = frame_can_end(g, &s->frames[i][k]);
        if (ok) return 1;
    }
    return 0;
}

int nd_grammar_finished(const nd_grammar *g, const nd_grammar_state *s)
{
    if (!nd_grammar_complete(g, s)) return 0;
    uint32_t bits[8];
    nd_grammar_allowed_bytes(g, s, bits);
    for (int i = 0; i < 8; i++)
        if (bits[i]) return 0;
    return 1;
}

void nd_grammar_allowed_bytes(const nd_grammar *g, const nd_grammar_state *s, uint32_t bits[8])
{
    nd_grammar_state tmp;
    memset(bits, 0, 8 * sizeof *bits);
    for (int b = 0; b < 256; b++)
        if (step_state(g, s, &tmp, (unsigned char)b) == 0) bits[b / 32] |= 1u << (b % 32);
}

size_t nd_grammar_state_key(const nd_grammar_state *s, uint8_t *buf)
{
    size_t n = 0;
    buf[n++] = s->n_threads;
    for (int i = 0; i < s->n_threads; i++) {
        buf[n++] = s->depth[i];
        memcpy(buf + n, s->frames[i], (size_t)s->depth[i] * sizeof(nd_gframe));
        n += (size_t)s->depth[i] * sizeof(nd_gframe);
    }
    return n;
}
