/* grammar.h - constrained decoding of tool calls: a pushdown automaton over bytes.
 *
 * nd_grammar_compile turns the declared tools (a JSON array of
 * {"name", "description"?, "parameters": JSON Schema}) into a grammar that
 * accepts exactly the text the model writes between <tool_call> and
 * </tool_call>: a compact JSON array (no whitespace outside strings) of zero or
 * more calls {"name":"<declared tool>","arguments":{...}} whose arguments
 * satisfy that tool's schema.  `[]` is always accepted.
 *
 * The runtime state is a small value (a few fixed-size stacks of 16-byte
 * frames) advanced one byte at a time.  Every state the automaton can reach has
 * at least one valid completion: a byte that would lead to a dead end is
 * refused, so sampling only allowed bytes always ends in a valid call list.
 *
 * Ambiguity (anyOf alternatives that start alike) is handled by running up to
 * ND_G_MAX_THREADS stacks side by side ("threads"); past that the extra
 * alternatives are dropped, which only ever makes the grammar stricter.
 */
#ifndef ND_GRAMMAR_H
#define ND_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "needle.h"

#define ND_G_MAX_THREADS 8
#define ND_G_MAX_DEPTH 24 /* frames per stack: bounds nesting and $ref recursion */

/* One stack frame: which grammar node, and where inside it we are. */
typedef struct nd_gframe {
    uint16_t node;
    uint8_t phase;
    uint8_t aux;
    uint32_t a, b, c; /* meaning depends on the node kind (see grammar.c) */
} nd_gframe;

typedef struct nd_grammar_state {
    uint8_t n_threads;
    uint8_t depth[ND_G_MAX_THREADS];
    nd_gframe frames[ND_G_MAX_THREADS][ND_G_MAX_DEPTH];
} nd_grammar_state;

typedef struct nd_grammar nd_grammar;

/* Compile all tools.  NEEDLE_ESCHEMA names the JSON path of the problem, e.g.
 * "tools[2].parameters.properties.when: unsupported keyword \"not\"". */
int nd_grammar_compile(const nd_json *tools_array, nd_grammar **out, needle_error *err);
/* Compile only tools_array[indices[i]] (tool retrieval keeps the top few). */
int nd_grammar_compile_subset(const nd_json *tools_array, const int *indices, size_t n_indices, nd_grammar **out,
                              needle_error *err);
void nd_grammar_free(nd_grammar *g);

/* Grounded decoding: from now on every free string value (a string the
 * schema leaves free: no enum/const, pattern, format or length bounds; not a
 * map key) may only be a non-empty substring of text[0..len), matched
 * case-insensitively for ASCII letters; characters JSON must escape are never
 * copied (copy_source.h).  text NULL turns it off; so does a text with nothing
 * to copy, which keeps every state completable (a required free string must
 * have at least one character to copy).  States made before the call are
 * meaningless after it: start again.  Returns 0 or NEEDLE_ENOMEM (the grammar
 * is then unchanged). */
int nd_grammar_set_copy_source(nd_grammar *g, const char *text, size_t len);
int nd_grammar_copy_active(const nd_grammar *g);
/* Changes at every nd_grammar_set_copy_source: equal states of different
 * generations are different states (mask caches compare it). */
uint32_t nd_grammar_copy_generation(const nd_grammar *g);

/* Number of tools the grammar accepts, and their names (as declared). */
size_t nd_grammar_tool_count(const nd_grammar *g);
const char *nd_grammar_tool_name(const nd_grammar *g, size_t i);

void nd_grammar_start(const nd_grammar *g, nd_grammar_state *s);
/* Advance by n bytes.  Returns 0, or -1 when a byte is not allowed (s is then
 * left unspecified: advance a copy when probing). */
int nd_grammar_advance(const nd_grammar *g, nd_grammar_state *s, const char *bytes, size_t n);
/* One byte from `in` into `out` (distinct states): 0, or -1 when refused.
 * The mask computation uses this to probe without extra copies. */
int nd_grammar_step(const nd_grammar *g, const nd_grammar_state *in, nd_grammar_state *out, unsigned char byte);
/* 1 when the text so far is a complete call list. */
int nd_grammar_complete(const nd_grammar *g, const nd_grammar_state *s);
/* 1 when no byte can follow (complete and nothing may be appended). */
int nd_grammar_finished(const nd_grammar *g, const nd_grammar_state *s);
/* bits[b/32] bit b%32 set for every byte b allowed next (256 bits). */
void nd_grammar_allowed_bytes(const nd_grammar *g, const nd_grammar_state *s, uint32_t bits[8]);

/* Copy only the used part of a state (cheaper than struct assignment). */
void nd_grammar_state_copy(nd_grammar_state *dst, const nd_grammar_state *src);
/* A canonical byte image of the state for hashing/equality (unused parts
 * excluded); returns its length.  buf must hold sizeof(nd_grammar_state). */
size_t nd_grammar_state_key(const nd_grammar_state *s, uint8_t *buf);

#endif
