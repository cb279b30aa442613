/* regex.h - the JSON Schema `pattern` subset, compiled to a DFA over code points.
 *
 * Constrained decoding needs to know, after every character of a string, whether
 * the text so far can still be completed into a match.  A DFA over Unicode code
 * points answers that in O(log edges) per character, and after dead states are
 * pruned "the state exists" means "some completion matches".
 *
 * Supported (ECMA-262 semantics, which JSON Schema names): literals, `.`, classes
 * [a-z] [^...], \d \w \s \D \W \S, escapes \n \t \r \f \v \0 \xHH \uXXXX \/ and
 * escaped metacharacters, groups ( ) (?: ) (?<name> ), `|`, `? * + {m} {m,} {m,n}`
 * (lazy forms are the same language), and anchors `^` / `$` at the ends of the
 * pattern or of a top-level alternative.  A pattern is a *search*: without `^`
 * any text may precede the match, without `$` any text may follow.
 * Unsupported (backreferences, lookaround, \b, flags, anchors in the middle) is
 * rejected with a reason, never ignored.
 *
 * Where ECMA and Python's `re` disagree we pick the intersection, so that what we
 * generate also validates in Python: \d \w are ASCII; \D \W are the ASCII
 * non-digits / non-word characters; \s is [\t\n\v\f\r ]; \S excludes every
 * character either engine calls whitespace; `.` excludes \n \r U+2028 U+2029.
 */
#ifndef ND_REGEX_H
#define ND_REGEX_H

#include <stddef.h>
#include <stdint.h>

#define ND_DFA_MAX_STATES 4096
#define ND_REGEX_MAX_REPEAT 1000

typedef struct nd_dfa_edge {
    uint32_t lo, hi; /* inclusive code point range */
    int32_t to;
} nd_dfa_edge;

typedef struct nd_dfa {
    int n_states;
    int start;           /* -1: the language is empty */
    uint8_t *accept;     /* per state */
    int32_t *edge_start; /* n_states+1 offsets into edges; edges of a state are sorted by lo */
    nd_dfa_edge *edges;
    int32_t *ascii;      /* n_states*128: target for code points < 128, or -1 (fast path) */
} nd_dfa;

/* Compile pattern[0..len) (UTF-8).  Returns 0, or NEEDLE_ESCHEMA / NEEDLE_ELIMIT /
 * NEEDLE_ENOMEM with a short reason in why (no place prefix: the caller adds it). */
int nd_regex_compile(const char *pattern, size_t len, nd_dfa *out, char *why, size_t why_size);

/* A DFA accepting exactly the given strings (each UTF-8, lens[i] bytes).  Used for
 * string enums/consts, so every JSON spelling of the value is accepted. */
int nd_dfa_from_literals(const char *const *strs, const size_t *lens, size_t n, nd_dfa *out, char *why,
                         size_t why_size);

/* A one-state DFA accepting every string (strings without a pattern). */
int nd_dfa_any(nd_dfa *out);

void nd_dfa_free(nd_dfa *d);

/* Does pattern[0..len), compiled as above (anchored where it says so, a
 * search where not, as JSON Schema reads it), accept text (read byte by
 * byte: meant for ASCII texts such as "07:30")?  0 when the pattern does not
 * compile. */
int nd_regex_accepts(const char *pattern, size_t len, const char *text);

/* The state after code point cp from state s, or -1 (no transition / dead). */
static inline int32_t nd_dfa_step(const nd_dfa *d, int32_t s, uint32_t cp)
{
    if (cp < 128) return d->ascii[(size_t)s * 128 + cp];
    int32_t a = d->edge_start[s], b = d->edge_start[s + 1];
    while (a < b) { /* binary search for the edge containing cp */
        int32_t m = a + (b - a) / 2;
        if (d->edges[m].hi < cp) a = m + 1;
        else if (d->edges[m].lo > cp) b = m;
        else return d->edges[m].to;
    }
    return -1;
}

#endif
