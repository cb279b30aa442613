/* schema.h - JSON Schema -> grammar nodes (the compiled form grammar.c runs).
 *
 * Each schema becomes a node; nodes refer to each other by index, so $ref
 * recursion is just a cycle in the node graph (the runtime stack depth bounds
 * it).  What we enforce, and the choices we made:
 *  - Objects with "properties" are CLOSED (no undeclared keys, even without
 *    additionalProperties:false) and their keys come in declaration order, as
 *    the training data writes them; required keys are always present.
 *    Objects without "properties" accept any keys (values per
 *    additionalProperties, or any JSON when absent/true); additionalProperties
 *    false makes them `{}`.
 *  - oneOf is treated as anyOf (exclusivity is not enforced).
 *  - format: date, time, date-time (RFC 3339), email, uuid, uri (RFC 3986's
 *    outline), hostname (RFC 1123), ipv4, as patterns; any other format is an
 *    error naming the path.
 *  - allOf is supported for object schemas whose property sets are merged.
 *  - enum/const strings accept every JSON spelling of the value; other enum
 *    values are written compactly with non-ASCII escaped.
 *  - Integers have at most 18 digits; bounded numbers at most 15 significant
 *    digits and no exponent; multipleOf must be a positive integer (numbers with
 *    it are generated as integers) or a power of ten below one (0.1, 0.01, ...,
 *    1e-6: at most that many fraction digits, the bounds multiples of it).
 *    These only narrow what is generated.
 *  - Keywords that constrain values but are not enforced (not, if/then/else,
 *    patternProperties, ...) are NEEDLE_ESCHEMA errors naming the JSON path;
 *    annotations (description, title, default, examples, ...) are ignored.
 *  - uniqueItems true is not a grammar constraint: the agent withholds a call
 *    whose array repeats an item (agent/grounding.c), where properties and
 *    items lead to it; elsewhere ($ref, anyOf, ...) it is an error.
 */
#ifndef ND_SCHEMA_H
#define ND_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include "grammar/copy_source.h"
#include "grammar/grammar.h"
#include "grammar/regex.h"

#define ND_G_INF 1000000000u
#define ND_G_MAX_NODES 60000
#define ND_G_MAX_STRING_BOUND 65536u  /* larger minLength is rejected, larger maxLength clamped */
#define ND_G_INT_MAX_DIGITS 18
#define ND_G_NUM_MAX_DIGITS 15

typedef enum {
    ND_G_LITERAL, /* one of a sorted set of exact byte strings */
    ND_G_STRING,  /* a JSON string whose value matches a DFA and a length range */
    ND_G_INTEGER,
    ND_G_NUMBER,
    ND_G_ARRAY,
    ND_G_OBJECT,  /* closed object, keys in declaration order */
    ND_G_MAP,     /* object with free keys, one value schema */
    ND_G_CALL,    /* {"name":"<tool>","arguments":ARGS}: heads are whole prefixes */
    ND_G_ANYOF,   /* alternatives (flattened: never ANYOF or REF) */
    ND_G_REF      /* compile-time placeholder, resolved away before use */
} nd_gnode_kind;

typedef struct nd_gprop {
    char *key;        /* OBJECT: `"key":`; CALL: `{"name":"tool","arguments":` */
    uint32_t key_len;
    int node;         /* value node */
    int required;
} nd_gprop;

typedef struct nd_gnode {
    nd_gnode_kind kind;
    uint32_t min_depth; /* frames needed to complete a value (ND_G_INF: unsatisfiable) */
    uint32_t first[8];  /* bytes that can start a value */

    /* LITERAL */
    char **lits;
    uint32_t *lit_lens;
    int n_lits;

    /* STRING */
    nd_dfa dfa;
    uint32_t min_len, max_len; /* max_len UINT32_MAX: unbounded */
    int free_string;           /* any text, no bounds: every state viable */
    int copy_value;            /* a free string value the schema compiled (not a map key or "any JSON"
                                  string): grounded decoding limits it to copies of the copy source */
    uint64_t *lens;            /* per DFA state, bitset of completion lengths 0..lens_cap (top bit: >= cap) */
    uint32_t lens_cap, lens_words;

    /* INTEGER / NUMBER */
    int bounded;               /* any of min/max/multipleOf present */
    int64_t imin, imax, mult;  /* INTEGER: inclusive bounds, multipleOf (1 = none) */
    double nmin, nmax;         /* NUMBER: bounds (-inf/+inf when absent) */
    int nmin_excl, nmax_excl;
    int max_frac;              /* NUMBER: at most this many fraction digits (multipleOf 10^-max_frac); 0: any */

    /* ARRAY */
    int items;                 /* -1: no items beyond prefix */
    int *prefix;
    int n_prefix;
    uint32_t min_items, max_items;

    /* OBJECT / CALL */
    nd_gprop *props;
    int n_props;

    /* MAP */
    int key_node, value_node;

    /* ANYOF */
    int *alts;
    int n_alts;

    /* REF */
    int target;
} nd_gnode;

struct nd_grammar {
    nd_gnode *nodes;
    int n_nodes, cap;
    int root;          /* the top-level array */
    char **tool_names;
    size_t n_tools;
    /* grounded decoding (copy_source.h): NULL when off; copy_gen changes with
     * every nd_grammar_set_copy_source, so mask caches know their states are stale */
    nd_copy_source *copy;
    uint32_t copy_gen;
};

/* A tool declaration as given: {"name",...}, or the OpenAI wrapper's
 * {"type":"function","function":{...}} unwrapped. */
const nd_json *nd_tool_declaration(const nd_json *tool);

/* Build the grammar for tools[indices[i]] (all tools when indices is NULL). */
int nd_schema_compile_tools(const nd_json *tools, const int *indices, size_t n_indices, nd_grammar **out,
                            needle_error *err);

/* Compile one schema alone as the grammar root (no call wrapper): used by tests
 * and the fuzzer to exercise schemas directly.  `where` prefixes messages. */
int nd_schema_compile_value(const nd_json *schema, const char *where, nd_grammar **out, needle_error *err);

void nd_schema_free(nd_grammar *g);

/* Viability helpers shared with the runtime. */
int nd_string_viable(const nd_gnode *n, int32_t state, uint32_t count);
int nd_int_viable(const nd_gnode *n, int neg, uint64_t v, int ndigits);

#endif
