/* repeat_guard.h - notice a decode stuck in a loop.
 *
 * A small model sometimes falls into a cycle inside a free string ("the the
 * the ...", "a-b-a-b-...") and would write it until max_new_tokens, leaving
 * an unfinished, invalid call.  The session keeps the ids it generated for
 * the call list; when their tail is one short cycle repeated, the token that
 * would continue the cycle is banned for the next step (the grammar mask
 * minus that id), which steers the model to its next choice - usually the
 * closing quote.  Thresholds are chosen so that ordinary values (a phone
 * number "5555", "1000000") are never touched: a cycle of 1 token must
 * repeat 8 times, of 2 tokens 4 times, of 3 to ND_REPEAT_MAX_CYCLE tokens
 * 3 times. */
#ifndef ND_REPEAT_GUARD_H
#define ND_REPEAT_GUARD_H

#include <stddef.h>
#include <stdint.h>

#define ND_REPEAT_MAX_CYCLE 16
/* the history the guard needs: the longest pattern it looks for */
#define ND_REPEAT_HISTORY (3 * ND_REPEAT_MAX_CYCLE)

/* ids[0..n) are the most recent tokens, oldest first.  Returns the id that
 * would continue a detected cycle, or -1. */
int nd_repeat_next(const int32_t *ids, int n);

/* The same guard one level up, on the JSON of the call list: a model that
 * writes an array item (or a whole call) it already wrote is usually starting
 * a loop ("days":["Monday","Monday","Monday",...]) or repeating itself.  After
 * every token the decoder asks whether the text so far has just completed an
 * element (ended by ',' or ']') equal, byte for byte, to an earlier element
 * of the same array; the grammar writes compact JSON with keys in schema
 * order, so equal values are equal text.  If so, returns 1 with *cut = the
 * length to keep (the text before the separator that preceded the repeated
 * element) and closers = the brackets that close every container still open
 * there (NUL-terminated; cap bytes at most), so that text[0..cut) + closers
 * ends the list without the repeat.  The decoder keeps the result only if the
 * grammar accepts it (a minItems or a later required key may not).  Returns 0
 * when nothing repeats (or the nesting is deeper than ND_REPEAT_MAX_DEPTH). */
#define ND_REPEAT_MAX_DEPTH 32
int nd_repeat_item_cut(const char *text, size_t len, size_t *cut, char *closers, size_t cap);

#endif
