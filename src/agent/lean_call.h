/* lean_call.h - a request answered with no call the model nearly made.
 *
 * The small model, fine-tuned on generated rows of which half answer with no
 * call, answers plain requests phrased unlike its data with no call: "get me
 * to the airport" writes "[]" while the model gave a call 0.42 of the
 * probability at the list's first token.  When the first request of a
 * conversation is answered with no call of the model's own choosing, the ask
 * again (ask_again.h) took nothing, and the model gave a call at least
 * lean_call of the probability, the request is answered again in a scratch
 * session whose call list may not be empty.  That answer is taken on ask
 * again's terms: it calls something nothing withholds, every value is said
 * (validation.ungrounded empty), and none of nd_refusal_signs' signs is
 * there, nor a sign of a call made up to fill a list that may not be empty
 * (nd_made_up_call).  A side of a two-part request (split_turn.h) leans too,
 * when its call also says its yes/no settings: the key as a word, or "on"
 * for true and "off" for false.  Otherwise the answer stays no call.  validation.leaned is true when
 * the answer was taken. */
#ifndef ND_LEAN_CALL_H
#define ND_LEAN_CALL_H

#include "agent/session.h"
#include "agent/split_turn.h"

/* The least probability of a call at which a session with ask_again leans
 * (measured on 2,200 rows with the bundled model: docs/envelope.md). */
#define ND_LEAN_CALL_MIN 0.1

/* The signs of a call made up to fill the list, on a parsed call list for
 * request: a tool the request does not name (no word of three letters or
 * more, other than the verbs every tool shares, is a word of the tool's
 * name, description, argument names or choices, or shares its first five
 * letters with one: "play some jazz" -> call_contact), one string value in
 * two places ({"room":"blue","color":"blue"}), or a free-text value the
 * request itself does not say as whole words ("jo" of "jo@kite.io"; one the
 * system facts gave: "Europe" from a
 * time zone) or that is made of the tool's own words ("start navigation" ->
 * destination "navigation"), or a 1 where the request says no one ("change the volume" ->
 * level 1; the grounding checks let "a" and "an" ground a 1).  1 when one is there, 0 when none, -1 when out of memory. */
int nd_made_up_call(const nd_json *calls, const nd_json *tools, const char *request);

/* Does the request name the tool of one of the calls (a word of its name,
 * description, argument names or choices, as nd_made_up_call reads it)?  1,
 * 0, or -1 when out of memory. */
int nd_request_names_a_called_tool(const nd_json *calls, const nd_json *tools, const char *request);

/* Answer request with a call as described above.  Returns 1 with
 * out->calls, out->completed and out->confidence filled when the answer is
 * taken, 0 when not, or an error code (out of memory). */
int nd_answer_leaning(needle_session *s, const char *request, int max_new_tokens, nd_split_answer *out,
                      needle_error *err);

#endif
