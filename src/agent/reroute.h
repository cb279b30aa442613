/* reroute.h - one call to a tool while the request names another tool's choice.
 *
 * The small model sometimes picks a tool by the request's shape and not its
 * words: "temperature in Reno in fahrenheit" -> set_lights {"room": "Reno"},
 * "What's it like outside in Hobart, in celsius" -> send_message {"recipient":
 * "Hobart", "text": "celsius"}.  The request names a choice ("fahrenheit",
 * "celsius") that the called tool does not have and other declared tools do.
 * So when a first request is answered with exactly one call, and the request
 * says (nd_choice_said: its words, forms, or symbols such as "68F") a value of
 * a string enum of other tools, of five letters or more (not "cool" or "auto",
 * which people say for other reasons), that is not a value of
 * any enum of the called tool nor said inside the call's string values, the
 * request is answered again in a scratch session that declares only those
 * other tools.  That answer is taken on the terms of the call the model nearly
 * made (lean_call.h): a call that nothing withholds, every value said, none of
 * nd_refusal_signs, none of nd_made_up_call's signs.  validation.asked_again is
 * then true.  Part of --ask-again. */
#ifndef ND_REROUTE_H
#define ND_REROUTE_H

#include "agent/session.h"
#include "agent/split_turn.h"
#include "core/json.h"

/* The declarations of the tools whose choices the request names while the one
 * call of `calls` is to another tool (above), as a new JSON array in *out
 * (NULL when the sign is not there).  1 when there are such tools, 0 when not,
 * -1 when out of memory. */
int nd_reroute_tools(const nd_json *calls, const nd_json *tools, const char *request, nd_json **out);

/* Answer request again with only those tools declared (above).  Returns 1
 * with out filled when the answer is taken, 0 when not, or an error code (out
 * of memory). */
int nd_answer_rerouted(needle_session *s, const char *request, const nd_json *calls, int max_new_tokens,
                       nd_split_answer *out, needle_error *err);

#endif
