/* said_choice.h - an optional choice the request names, added to the call.
 *
 * The small models leave out optional arguments the request does state:
 * "climate to 19.5 with the fan on high" -> set_climate without "fan": "high",
 * "give the living room a turbo clean" -> start_vacuum without "mode":
 * "turbo", "show my sleep from yesterday" -> no "period": "yesterday".  When
 * such an argument is a string enum, the request names the value in the
 * schema's own words, so the value can be read off it:
 *
 *   - only turns with one call (in a request with two actions the word may
 *     belong to the other one);
 *   - only optional arguments the call leaves out whose schema is a string
 *     "enum" (no pattern or format);
 *   - exactly one of the enum's values is said in the latest request as
 *     whole words (ASCII case ignored: "fan on High", "turbo"; a one-word
 *     value also in its "-ing" form: "heating" says heat), and that word
 *     is not part of a string value the call already has (the message text
 *     "the fan is on high" is not a fan setting).
 *
 * The added argument goes after the call's own.  The KV cache keeps the
 * tokens the model wrote (as for names finished, name_span.h). */
#ifndef ND_SAID_CHOICE_H
#define ND_SAID_CHOICE_H

#include "core/buf.h"
#include "core/json.h"

#include <stddef.h>

/* Add to the one call of `calls` (modified in place) each optional string
 * enum argument whose value the request names, as described above.  Each
 * added argument's "tool.key" is appended to *paths (a JSON array being
 * built: '[' before the first entry, ',' before the others; *n_paths counts
 * them, the caller closes the list).  Returns the number added, or -1 when
 * out of memory. */
int nd_add_said_choices(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths);

/* The other way round: the models also add optional choices nobody asked
 * for ("put the heat on at 23 degrees" -> "unit": "celsius", "show my
 * weather for Joakimeid" -> "unit": "celsius", "set auto to twenty-nine" ->
 * "zone": "all").  In every call of the turn (since 2026-12-06, evening: two
 * calls too, "set the thermostat to 20 and turn on the hallway lights" ->
 * "unit": "celsius"), an optional string enum argument whose value the
 * latest request does not say anywhere is dropped from its call.
 * Said here, generously: the value's words (ASCII case ignored, '_' a
 * space), or one-word value's "-s", "-ed"/"-d" or "-ing" form; "fahrenheit"
 * and "celsius" also by F or C after a number, "°" or "degrees"; a currency
 * code by its symbol or name ("$", "dollars" for USD; "€", "euros"; "£",
 * "pounds", "quid"; "¥", "yen"; "CA$", "C$", "Canadian dollars" for CAD).
 * Returns how many were dropped, or -1 when out of memory. */
int nd_drop_unsaid_choices(nd_json *calls, const nd_json *tools, const char *request);

/* Is the choice value[0, n) said in request, generously as above?  1, 0, or
 * -1 when out of memory. */
int nd_choice_said(const char *request, const char *value, size_t n);

/* A choice the request names next to the choice's name that its enum does
 * not have: "19ºC vacation mode", "22 degrees turbo mode", "the robot vacuum
 * in super mode" (modes heat, cool, auto, off; quiet, standard, turbo).  The
 * user asked for a value outside the schema (the behaviour contract's
 * "invalid": no call).  In a turn with one call, for each string enum
 * argument the call leaves out or fills with a value the request does not
 * say (nd_choice_said), a word of its key of four letters or more ("mode",
 * "color", "category") said in the request, and the word before it (or, when
 * that names no choice, the word after it: "mode turbo") of three letters or
 * more that
 *   - is not a function word, nor a verb or adjective that names no choice
 *     ("same", "current", "change"),
 *   - is not a value of the enum, a word of one, or a stem of one ("heating"
 *     for "heat", "cooling" for "cool"),
 *   - is not a word of the key or of the tool's name.
 * Then "tool.key" is written to outside[0..outside_size) and 1 returned;
 * else outside is "" and 0 returned (-1 when out of memory).  The calls are
 * not changed. */
int nd_choice_outside(nd_json *calls, const nd_json *tools, const char *request, char *outside, size_t outside_size);

/* A currency the request names that the call's currency choices lack: "log
 * an expense at Migros of 45 CHF" with currency one of USD, EUR, GBP, JPY,
 * CAD.  In a turn with one call, for each string enum argument whose values
 * are all currency codes (three capitals, at least two of them known ISO 4217
 * codes), the request names a currency the enum does not hold: a known code
 * written in capitals as a word of its own, or a symbol or name ("₹", "rupees",
 * "francs").  Writes "tool.key" to outside and returns 1, else "" and 0.  The
 * calls are not changed. */
int nd_currency_outside(nd_json *calls, const nd_json *tools, const char *request, char *outside, size_t outside_size);

/* The grammar bent a value while the model wrote it (range_guard.h: the
 * model reached for "3000" where amount_ml stops at 2000, or for a mode the
 * enum lacks), and after the repairs the argument at `path` ("tool.key") holds
 * a value the request says: 300 in "log 300ml of water", the choice "grill"
 * in "grill at 200 for a quarter of an hour" (the model's "bake" dropped as
 * unsaid, "grill" added).  The bend was then the model's slip, not a request
 * outside the schema.  1 when exactly one call bears the argument, its value
 * is a number the request says (nd_numbers_said) or an enum choice it says
 * (nd_choice_said), and no other argument of the turn holds the same value
 * (in "blinds to 50 and the oven to 500" the oven's bent 50 is the blinds'
 * number), and for a number, the request says no "minus" or "negative" (the
 * model reached for the sign of "minus 20"); else 0. */
int nd_bent_value_said(const nd_json *calls, const nd_json *tools, const char *request, const char *path);

/* A choice written into the wrong argument: "I need to be up at 6:20 on
 * Saturday" -> set_alarm {"time": "06:20", "label": "Saturday"} where "days"
 * is a list of weekdays.  In every call, an optional free-text argument
 * (nd_free_string_schema) whose whole value is, ASCII case ignored, a value of
 * the enum of another argument the call leaves out (or of the enum of its
 * array's items) moves there, in the enum's spelling (a list of one for an
 * array): {"time": "06:20", "days": ["Saturday"]}.  Each argument written is
 * listed in *paths as "tool.key" (repair.h).  Returns how many moved, or -1
 * when out of memory. */
int nd_move_misplaced_choices(nd_json *calls, const nd_json *tools, nd_buf *paths, int *n_paths);
#endif
