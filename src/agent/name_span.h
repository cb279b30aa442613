/* name_span.h - finish a name (or a number in groups) the model copied only part of.
 *
 * With grounded decoding (copy_source.h) a free string value is a copy of
 * whole words of the request, but the small model often stops a word early
 * or starts a word late: "call Dmitri Volkov" -> name "Dmitri", "text
 * Thandiwe Mokoena ..." -> recipient "Mokoena", "see you at Sundin Airport"
 * -> text "see you at Sundin".  A name written with capitals is one unit in
 * English text, so a copied value whose first or last word is capitalised is
 * widened over the capitalised words right beside it in the request:
 *
 *   - only free string arguments (type string with no enum, const, pattern,
 *     format or length bounds), top level or items of an array of them;
 *   - only values found in the latest request, starting and ending at word
 *     edges (the first place they occur);
 *   - a word joins when it starts with an upper-case letter and is not a
 *     function word ("To", "And", "Then", "I", ...), a weekday or a month;
 *   - a lower-case particle between two such words joins with the second
 *     ("Gare de Lyon", "Kind of Blue"), and a value that is a house number
 *     takes the words after it ("14 Harrow Lane");
 *   - a value that ends (or starts) with a group of digits takes the groups
 *     beside it: a phone number copied in part ("+234 803 555" of "+234
 *     803 555 0199"; groups of 2-6 digits, a leading '+' allowed);
 *   - never across punctuation that ends a clause (, . ; : ! ?), a quotation
 *     mark, or "&"; never onto the request's first word or the first word of
 *     a sentence (capitalised for another reason), though the value's own
 *     edge word may be one ("Receipt: Café Lumière" -> "Café": the model
 *     chose that word, so its capital is the name's), and a day or month
 *     it chose may begin a title ("Sunday" -> "Sunday Cleaning");
 *   - at most ND_NAME_SPAN_MAX_WORDS words are added on each side.
 *
 * Lower-case requests are left alone.  Every session (session.c).  The KV cache keeps the tokens as the
 * model wrote them (as for a repeat cut): a follow-up turn sees the shorter
 * value in the model's own earlier answer. */
#ifndef ND_NAME_SPAN_H
#define ND_NAME_SPAN_H

#include "core/buf.h"
#include "core/json.h"

#define ND_NAME_SPAN_MAX_WORDS 4

/* Widen the free string values of `calls` (a JSON array of {name, arguments};
 * modified in place) as described above.  `tools` is the declared tools array
 * (plain or OpenAI-wrapped declarations; NULL: nothing is widened).  Each
 * widened argument's "tool.key" is appended to *paths (a JSON array being
 * built: '[' before the first entry, ',' before the others; *n_paths counts
 * them, the caller closes the list).  Returns the number of arguments
 * widened, or -1 when out of memory (a value whose widened copy could not be
 * allocated is left as it was). */
int nd_complete_names(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths);

/* The widening of one value (tests): the widened text of value[0..len) as
 * found in request, in a malloc'd string, or NULL when nothing changes (or
 * out of memory). */
char *nd_name_span_widen(const char *request, const char *value, size_t len);

#endif
