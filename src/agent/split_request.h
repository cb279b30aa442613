/* split_request.h - where a request that asks for two things may be cut in two.
 *
 * A small model often answers "set the thermostat to 20 and turn on the
 * hallway lights" with one call: it stops after the first action.  Each half
 * alone it answers well.  These are the places a request may be cut so that
 * each side is a request of its own, strongest joins first:
 *
 *   "and then", "then", "and also", "also", "plus", ";", a sentence end
 *   ("... the porch. Also ..."), "&", "and"
 *
 * A place is skipped when cutting there would break something that belongs
 * together:
 *   - inside double quotes (a message text);
 *   - inside a string value the model already wrote ("Simon and Garfunkel",
 *     "I'll be late and pick up milk": the model read them as one value);
 *   - "and" after hundred / thousand / million (one number in words);
 *   - a full stop after a title (Mr. Ms. Mrs. Dr. St. ...);
 *   - a side whose words next to the cut are fewer than two ("pause and ...",
 *     "Quick favour. Oh and ..."): a lone word is rarely a request;
 *   - a right side that starts by qualifying the left ("... called Amber",
 *     "with ...", "for ...", "to ...").
 * Cutting is only half the rule: session.c answers each side on its own and
 * takes the two answers only when both call something without a doubtful
 * value (docs/envelope.md). */
#ifndef ND_SPLIT_REQUEST_H
#define ND_SPLIT_REQUEST_H

#include <stddef.h>

#include "core/json.h"

#define ND_SPLIT_MAX_POINTS 4

/* One cut: left side request[left_begin, left_end), right side
 * request[right_begin, right_end), both trimmed of spaces and of the
 * punctuation next to the cut. */
typedef struct {
    size_t left_begin, left_end, right_begin, right_end;
} nd_split_point;

/* The places request may be cut, strongest join first (at most max).  calls
 * (may be NULL) is the model's answer to the whole request: a cut through one
 * of its string values is skipped. */
int nd_split_points(const char *request, const nd_json *calls, nd_split_point *out, int max);

#endif
