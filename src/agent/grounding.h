/* grounding.h - do a turn's calls follow from what was said?
 *
 * A small model sometimes fills an argument with a value it remembers rather
 * than one the user said ("text mom that I'll be late" -> recipient "Maya"),
 * and sometimes acts on a request that says not to ("don't turn on the
 * lights").  These checks look at the calls after decoding and report, in the
 * envelope's "validation" member:
 *
 *   ungrounded  "tool.path" of every argument whose value neither appears in,
 *               nor follows from, the conversation's user texts, tool results
 *               and the system facts.  Strings: every content word of the
 *               value is said (case, punctuation and a few function words
 *               ignored); numbers: said in digits or words, or a unit step
 *               away (x60, x1000, x100 and back: "an hour and a half" = 90);
 *               times HH:MM: the hour (12- or 24-hour) and the minutes
 *               ("half past", "quarter to", "noon") are said; dates
 *               YYYY-MM-DD: said as a date, a month and day, or relative to
 *               the system's "date: YYYY-MM-DD" fact (today, tomorrow, in N
 *               days, a weekday name, "the 14th").  Booleans and values the
 *               schema restricts to an enum are choices, not copies: never
 *               flagged.
 *   out_of_schema  "tool.path" of every ungrounded number whose schema bounds
 *               (minimum, maximum, exclusive ones) refuse a number the latest
 *               request says as a value (said_number.h: digits and whole
 *               number words, so "one hundred and twenty-two" is 122 alone;
 *               and "-10", "minus 10"): the user asked for a value outside
 *               the schema and the model wrote another one ("150%
 *               brightness" -> 15).
 *   missing     "tool.key" of every required free-text argument filled with
 *               a placeholder: a word of the tool's own name ("room":
 *               "lights" for set_lights) or the same string as another
 *               required argument ("track" and "playlist" both "Heroes")
 *               or starting with the request's capitalised first word
 *               ("Tell Geoffrey ..." -> "recipient": "Tell"; not when the
 *               next word names the tool or its description: "Kitchen
 *               lights off"), and every required number or clock time (type integer or
 *               number, format time, a pattern taking "07:30") that is
 *               ungrounded while the latest request says no number at all:
 *               the request gave no value for it.
 *   negation    the latest request negates the action ("don't ...", "do
 *               not", "no need to", "never mind", "actually no", "let's not",
 *               "better not", ...), except
 *               "don't forget" and negations inside a generated string value
 *               (a message that says "don't wait up").
 *
 * These are heuristics over English text: they flag, they do not prove. */
#ifndef ND_GROUNDING_H
#define ND_GROUNDING_H

#include <stddef.h>

#include "core/buf.h"
#include "core/json.h"

typedef struct nd_grounding {
    nd_buf ungrounded; /* the "tool.path" strings as a compact JSON array ("[...]") */
    int n_ungrounded;
    nd_buf out_of_schema; /* the ungrounded numbers whose request says a value outside their schema */
    int n_out_of_schema;
    nd_buf missing; /* required free-text arguments filled with a placeholder */
    int n_missing;
    int negation;
} nd_grounding;

/* Check calls (a JSON array of {name, arguments}) against what was said:
 * `heard` (the conversation's user texts and tool results, any separator),
 * `request` (the latest user text, for negation; may be NULL), `system` (may
 * be NULL) and the declared tools (for enums and bounds; may be NULL); `bent`
 * is the "tool.key" whose value the decoder saw the schema bend
 * (range_guard.h), listed first in out_of_schema, or NULL.  g is
 * initialised here; free it with nd_grounding_free.  Returns 0, or
 * NEEDLE_ENOMEM. */
int nd_grounding_check(const nd_json *calls, const nd_json *tools, const char *heard, const char *request,
                       const char *system, const char *bent, nd_grounding *g);
void nd_grounding_free(nd_grounding *g);

/* Add "tool.key" to g->out_of_schema (once), after nd_grounding_check; 0 or
 * NEEDLE_ENOMEM. */
int nd_grounding_add_out_of_schema(nd_grounding *g, const char *path);

/* The declared tool `name` (plain, or the "function" of the OpenAI wrapper
 * {"type":"function","function":{...}}), or NULL. */
const nd_json *nd_tool_named(const nd_json *tools, const char *name);

/* The "parameters" schema of the declared tool `name` (plain or in the
 * OpenAI wrapper {"type":"function","function":{...}}), or NULL. */
const nd_json *nd_tool_parameters(const nd_json *tools, const char *name);

/* Days since 1970-01-01 of a civil date (proleptic Gregorian). */
long nd_days_from_civil(long y, int m, int d);

/* Today as the system facts say it: the first YYYY-MM-DD in `system` (may be
 * NULL) as a day number in *day; 0 when there is none. */
int nd_system_date(const char *system, long *day);

/* Do the schema's minimum / maximum / exclusiveMinimum / exclusiveMaximum
 * refuse v? */
int nd_schema_bounds_refuse(const nd_json *schema, double v);

/* The negation test alone (calls may be NULL). */
int nd_request_negates(const char *request, const nd_json *calls);

#endif
