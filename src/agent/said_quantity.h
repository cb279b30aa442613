/* said_quantity.h - a duration or volume the request says, in the unit the
 * argument takes.
 *
 * "sleep timer for an hour" -> minutes 15, "half a litre" -> amount_ml 1000,
 * "an hour and a half" -> goal_minutes 120, "set the sleep timer for 5 hours"
 * -> minutes 5: the small models do not convert units.  The request says the
 * quantity with its unit, and the argument's name or description says its
 * unit, so the value meant can be computed:
 *
 *   - quantities said: a number (digits, decimals, words) before a unit
 *     ("5 hours", "1.2 litres", "forty five minutes"), "a"/"an"/"one" before
 *     one ("an hour", "a litre"), "half an hour", "half a litre", "a quarter
 *     of an hour", "three quarters of an hour", "an hour and a half", "2 and
 *     a half hours";
 *   - units: hours, minutes, seconds (durations); litres, millilitres
 *     (volumes), with their plural and short forms (hr, min, sec, l, ml);
 *   - an argument's unit: a unit word among the words of its key
 *     ("goal_minutes", "amount_ml") or, failing that, of its description;
 *   - only a turn with one call, only number arguments the call has, only
 *     when the request says exactly one quantity of the argument's kind and
 *     no other argument of the call takes that kind.
 *
 * When the call's value differs from the quantity in the argument's unit:
 * the quantity is written if the schema takes it (an integer for "integer",
 * inside the bounds, no enum or const); if the bounds refuse it, the request
 * asked for a value outside the schema ("5 hours" where the timer takes at
 * most 120 minutes) and the argument is reported so (the caller withholds
 * the turn, as for validation.out_of_schema). */
#ifndef ND_SAID_QUANTITY_H
#define ND_SAID_QUANTITY_H

#include <stddef.h>

#include "core/buf.h"
#include "core/json.h"

/* Repair the one call as described.  A written argument's "tool.key" is
 * appended to *paths (a JSON array being built: '[' before the first entry,
 * ',' before the others; *n_paths counts them).  An argument whose quantity
 * the schema refuses is named in outside[0..outside_size) as "tool.key"
 * (left empty otherwise).  Returns the number of arguments written, -1 when
 * out of memory. */
int nd_fix_said_quantity(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths,
                         char *outside, size_t outside_size);

/* The quantities of a kind the request says: kind 't' durations in minutes,
 * 'v' volumes in millilitres, 0 both; at most cap in out; returns how many. */
int nd_quantities_said(const char *request, char kind, double *out, int cap);

#endif
