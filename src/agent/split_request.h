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

/* One action, two objects: "call Filippo & Londisizwe", "weather in Lisbon and
 * in Porto", "turn the west closet and also the porch lights off".  The model
 * often writes the call for one object only.  Its value V for `key` sits
 * next to a join ("and", "and also", "&"); the request without V and the
 * join (and up to two filler words between: the, my, a, an, in, to, at, for,
 * on) asks for the other object alone, and is answered on its own.  The
 * other object's value must stand on the far side of the join
 * (nd_other_object_flanks).  A clock time "06:00" not in the request as
 * written is looked for as said, "6:00". */
#define ND_OTHER_OBJECT_MAX 4
typedef struct {
    const char *key;               /* the argument (points into the call) */
    size_t value_begin, value_end; /* V in the request */
    size_t cut_begin, cut_end;     /* removed from the request: V, the join and the filler words between */
    size_t far_side;               /* value first: where the far side starts; else where it ends */
    int value_first;               /* V before the join */
} nd_other_object;

/* The places of one call's string values next to a join (call: one
 * {"name","arguments"} object), at most max. */
int nd_other_objects(const char *request, const nd_json *call, nd_other_object *out, int max);

/* Does y (the other call's value) stand on the far side of the join: right
 * after it, past up to two filler words (V first), or ending right before it? */
int nd_other_object_flanks(const char *request, const nd_other_object *o, const char *y, size_t y_len);

#endif
