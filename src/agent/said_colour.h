/* said_colour.h - a colour the request asks for that the tool's colour
 * choices do not have.
 *
 * "change the hallway lights to gold" for a set_lights whose colour enum is
 * white, red, blue, ...: the model leaves the colour out, or writes one the
 * enum has, and the call goes through although the user asked for a value
 * outside the schema (the behaviour contract's "invalid": no call).
 *
 * A colour choice is an enum argument whose key names a colour ("color",
 * "colour", "light_color") or whose values include at least two basic colour
 * words.  The request's colour words come from a fixed English list of
 * colour names (basic ones and common shades: gold, turquoise, maroon,
 * magenta, ...).  One is outside the choices when
 *   - no value of the enum contains it as a word ("white" is inside "warm
 *     white"),
 *   - the word after it is not a colour the enum has ("lime green", "navy
 *     blue" say a shade of green and blue: not judged),
 *   - and it is not part of a string value the call already holds ("the gold
 *     room", "Violet's bedroom": a name, not a colour).
 * English colour names only; names of people that are colours are kept out
 * by the last rule when the call copies them. */
#ifndef ND_SAID_COLOUR_H
#define ND_SAID_COLOUR_H

#include <stddef.h>

#include "core/json.h"

/* In a turn with one call whose tool has a colour choice, when the request
 * says a colour outside it as above, "tool.key" of that choice is written to
 * outside[0..outside_size) and 1 returned; else outside is "" and 0 returned
 * (-1 when out of memory).  The calls are not changed. */
int nd_colour_outside(nd_json *calls, const nd_json *tools, const char *request, char *outside, size_t outside_size);

#endif
