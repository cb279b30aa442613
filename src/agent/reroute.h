/* reroute.h - a request that names a tool's choice, answered without that tool.
 *
 * The small model sometimes picks a tool by the request's shape and not its
 * words: "temperature in Reno in fahrenheit" -> set_lights {"room": "Reno"},
 * "What's it like outside in Hobart, in celsius" -> send_message {"recipient":
 * "Hobart", "text": "celsius"}, "forecast for Wellington tomorrow in
 * fahrenheit" -> a message to a placeholder (withheld).  (An answer with no
 * call is left alone: asked with a tool the request names a choice of, the
 * model calls it for "play my running playlist" and "add Heroes to a
 * playlist" as well.)  The request names a
 * choice ("fahrenheit", "celsius") that no called tool has and other declared
 * tools do.  So when a first request's answer (the first one, or the one asked
 * again or leaned to) is one call, or calls withheld as placeholders only
 * (validation.missing) for tools the request does not name (placeholders for a
 * tool it names mean the values were not given: "add Heroes to a playlist"),
 * and the request says (nd_choice_said: its words,
 * forms, or symbols such as "68F") a value of a string enum of tools it did not
 * call, of five letters or more (not "cool" or "auto", which people say for
 * other reasons), that is not a value of any enum of a called tool nor said
 * among other words inside a call's string values ("text mom that the heating
 * is on"), the request is answered again in a scratch session that declares
 * only those tools (plainly, then as ask-again asks).  That answer is taken on
 * the terms of the call the model nearly made (lean_call.h): a call that
 * nothing withholds, every value said, none of nd_refusal_signs, none of
 * nd_made_up_call's signs.  validation.asked_again is then true (and missing
 * empty).  Part of --ask-again. */
#ifndef ND_REROUTE_H
#define ND_REROUTE_H

#include "agent/session.h"
#include "agent/split_turn.h"
#include "core/json.h"

/* The declarations of the tools the calls do not call whose choices the
 * request names (above: any number of calls; the session decides when to
 * ask), as a new JSON array in *out (NULL when there are none).  1 when there
 * are such tools, 0 when not, -1 when out of memory. */
int nd_reroute_tools(const nd_json *calls, const nd_json *tools, const char *request, nd_json **out);

/* Answer request again with only those tools declared (above).  Returns 1
 * with out filled when the answer is taken, 0 when not, or an error code (out
 * of memory). */
int nd_answer_rerouted(needle_session *s, const char *request, const nd_json *calls, int max_new_tokens,
                       nd_split_answer *out, needle_error *err);

#endif
