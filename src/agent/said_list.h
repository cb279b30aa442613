/* said_list.h - the values a list argument names, written into the call.
 *
 * The small models get lists of choices wrong: "set a weekday alarm for 6:20"
 * -> no "days", "on Tuesdays and Thursdays" -> ["Tuesday", "Saturday"],
 * "every Monday, Saturday & Sunday" -> ["Monday", "Saturday"], "directions
 * to the station avoiding tolls" -> no "avoid".  When the argument is an
 * array of a string enum, the request names its items in the schema's own
 * words, so the list can be read off it:
 *
 *   - only turns with one call (in a request with two actions the words may
 *     belong to the other one);
 *   - an argument whose schema is type "array" with items of type "string"
 *     and an "enum" (no pattern or format), required or not;
 *   - the items said: each enum value said as whole words in the latest
 *     request (ASCII case ignored, '_' read as a space: "this_week" is said
 *     by "this week"; a final "s" allowed: "Tuesdays", "weekdays"), in the
 *     order the request says them, each once;
 *   - for an enum holding the seven English weekday names: "weekday(s)" says
 *     Monday to Friday, "weekend(s)" Saturday and Sunday, "every day",
 *     "everyday" and "daily" all seven, and "Monday to Friday" (also
 *     "through", "thru", "till", "until", "-") every day from the first to
 *     the last;
 *   - words inside a string value the call already has do not count (the
 *     label "weekend trip" says no days);
 *   - the list must fit the schema's minItems / maxItems.
 *
 * The list said replaces the call's when it differs (or is added when the
 * call left the argument out); the argument is listed in
 * validation.completed.  English only. */
#ifndef ND_SAID_LIST_H
#define ND_SAID_LIST_H

#include "core/buf.h"
#include "core/json.h"

/* Write into the one call of `calls` (modified in place) each list argument
 * the request names, as described above.  Each changed argument's
 * "tool.key" is appended to *paths (a JSON array being built, as in
 * said_choice.h).  Returns the number changed, or -1 when out of memory. */
int nd_fix_said_lists(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths);

/* An optional list argument of that kind none of whose items the request
 * says (by the same reading: words, plurals, weekday sets and ranges; words
 * inside the call's other string values do not count) is made up: it is
 * removed from the one call ("set the alarm titled pay rent at 8.45pm" ->
 * no "days": ["Saturday"]), as said_choice.h drops an optional choice never
 * said.  Returns how many were removed (not listed anywhere), or -1 when out
 * of memory. */
int nd_drop_unsaid_lists(nd_json *calls, const nd_json *tools, const char *request);

#endif
