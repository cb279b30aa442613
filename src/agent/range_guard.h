/* range_guard.h - notice when the schema bent a value the model wanted.
 *
 * The grammar keeps every value inside its schema: a request for "35
 * degrees" where the tool takes 16-30 cannot be written as 35, so the mask
 * lets the model write only what fits, and it writes 30 (or 3, or 17); "gold"
 * for a colour enum without it comes out as "white".  The call is then
 * schema-valid but says something the user did not ask for, and the
 * behaviour contract says a value outside the schema gets no call at all
 * (the "invalid" category: "set the brightness to 150%" -> []).
 *
 * The decoder knows when this happens: at that step the model's own best
 * token (the unmasked argmax) is one the grammar refuses, while a number is
 * being written or inside a string the schema closes (enum, const, pattern,
 * format).  This guard recognises those moments from the text written so far,
 * the two tokens (wanted and allowed) and the tools, so the session can report
 * the argument (validation.out_of_schema) and withhold the call.  It fires
 * only on the model's own choice being refused, and it ignores what is not a
 * schema bound: the start of a value whose type is not a number, JSON's own
 * rule against leading zeros ("07"), and free strings, where grounded
 * decoding refuses tokens for its own reason (copying). */
#ifndef ND_RANGE_GUARD_H
#define ND_RANGE_GUARD_H

#include <stddef.h>

#include "core/json.h"

/* Where the call list text is, lexically: inside a string or not.  Feed it
 * every byte appended to the text, in order. */
typedef struct nd_json_lexpos {
    int in_string, escape;
} nd_json_lexpos;

void nd_json_lexpos_feed(nd_json_lexpos *p, const char *bytes, size_t n);

/* text[0..len) is the call list so far (compact JSON, as the grammar writes
 * it), p its lexical position; `want` is the model's best token (refused by
 * the grammar) and `got` the token the mask let through.  Returns 1 when the
 * refusal bent a number: outside a string, `want` is number characters
 * (digits, '.', '-'), and either a number is being written (the text ends in
 * a digit, '.' or '-', is not a lone leading "0" or "-0", and `want` has a
 * digit or '.') or a number value starts here (the text ends in ':', ',' or
 * '[' and `got` starts with a digit or '-'). */
int nd_range_refused(const nd_json_lexpos *p, const char *text, size_t len, const char *want, size_t want_len,
                     const char *got, size_t got_len);

/* The argument the number at text offset `at` belongs to, as "tool.key" (the
 * innermost key before it; an array's items share their key), written to
 * out (cap bytes, NUL-terminated).  "?" parts when the text does not say. */
void nd_range_path(const char *text, size_t at, char *out, size_t cap);

/* Strings work the same way where the schema closes them: with "color":
 * {"enum": [...]} and no "gold" in it, "change the lights to gold" has the
 * model's own "g" refused, and the grammar writes "white".  Returns 1 when
 * the argument at `path` ("tool.key", as nd_range_path writes it; the key
 * looked up in the tool's parameters, nested properties and array items
 * included) is a string the schema closes: an enum, const, pattern or
 * format.  Free strings (names, messages) are 0: grounded decoding refuses
 * tokens there for its own reason (copying). */
int nd_range_closed_string(const nd_json *tools, const char *path);

#endif
