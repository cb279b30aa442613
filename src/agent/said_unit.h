/* said_unit.h - the temperature unit a number's symbol names.
 *
 * "set the thermostat to 68F", "bedroom lights to 10% and thermostat to
 * 66F", "set auto at 16C": the small models keep the number and drop the
 * unit its symbol names.  A number said with a temperature unit right after
 * it - "68F", "68 F", "68°F", "68 ºC", "68 degrees F", "68 fahrenheit",
 * "21 celsius", "21 centigrade" (the letter F or C standing alone), the
 * number in digits or in words ("sixty-eight point five degrees F") - gives
 * that unit to every call holding that number as a top-level number
 * argument: each of the call's string enum arguments that has the value
 * "fahrenheit" or "celsius" (ASCII case ignored) is set to it (written where
 * it differs, added where left out; listed in validation.completed).  A call
 * whose numbers are said with both units is left alone.  Any number of calls.
 * session.c applies it with the other value repairs, and again after
 * said_number.h writes the one number said (the unit comes with it). */
#ifndef ND_SAID_UNIT_H
#define ND_SAID_UNIT_H

#include "core/buf.h"
#include "core/json.h"

/* Apply the rule above to `calls` (modified in place); "tool.key" of each
 * changed argument is appended to *paths (as in said_choice.h).  Returns how
 * many changed, or -1 when out of memory. */
int nd_fix_said_units(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths);

#endif
