/* ask_again.h - a request the model answered with no call, asked again.
 *
 * The small model is brittle about the first words of a request: "kitchen
 * lights off please", "thermostat 19.5 celsius", "msg Haruto saying bring the
 * projector" and "weather please" get no call, while the same requests after
 * "please " get the right one.  So when the model answers a conversation's
 * first request with no call of its own choosing (not a call withheld), the
 * request is sent again, as "please " and the request, to a scratch session
 * on the same model, tools and options (split_turn.h).  The answer is taken
 * when it calls something that nothing withholds and that says no value the
 * request does not say (validation.ungrounded), and when none of these signs
 * of a request the contract refuses, or of a made-up value, is there:
 *
 *   - a free-text value that starts the request, or a sentence of it, when
 *     that start is capitalised ("Trn the lights off" -> room "Trn", "Could
 *     you please ring the contact" -> name "Could");
 *   - a free-text value made of function words only, or ending with one
 *     ("off", "the", "great if");
 *   - a word next to one of the tool's choice keys that is none of its
 *     values ("on eco mode" where mode is heat/cool/auto/off, "color maroon"):
 *     a value outside the schema, which the model then leaves out;
 *   - a date that does not exist ("February 30th");
 *   - a number the request says that the calls do not use (digits or words;
 *     a call's number, a number inside its strings, an hour of a time in
 *     either half of the day, or that number times 60 or 1000), or a duration
 *     or volume said with its unit that no call holds in minutes, hours,
 *     seconds, millilitres or litres ("bake at 200 for 5 hours" answered
 *     without the 5 hours); or "minus" said;
 *   - a required choice the request does not say (said_choice.h,
 *     nd_choice_said): "look up the metric with period yesterday" ->
 *     "metric": "steps".
 *
 * English only.  validation.asked_again is true when the answer was taken.
 * Measured on 1,809 rows (docs/envelope.md): 29 made right, 2 wrong (one of
 * them right again since "didn't ask" negates). */
#ifndef ND_ASK_AGAIN_H
#define ND_ASK_AGAIN_H

#include "agent/session.h"
#include "agent/split_turn.h"
#include "core/json.h"

/* The answer to request asked again ("please " and the request) in the
 * scratch session (nd_scratch_open), when it calls something and shows none of
 * the signs below; NULL when not (or with *rc set to an error code: out of
 * memory).  Free with nd_json_free.  Used for a first request (below) and for
 * the request without one of two objects (split_turn.c). */
nd_json *nd_scratch_answer_again(needle_session *scratch, const nd_json *tools, const char *request,
                                 int max_new_tokens, int *rc, needle_error *err);

/* Ask request again as described above.  Returns 1 with out->calls,
 * out->completed and out->confidence filled when the answer is taken, 0 when
 * not, or an error code (out of memory). */
int nd_answer_again(needle_session *s, const char *request, int max_new_tokens, nd_split_answer *out,
                    needle_error *err);

/* A scratch session's answer env taken as the turn's: its calls,
 * validation.completed and confidence into out.  0 or NEEDLE_ENOMEM. */
int nd_take_scratch_answer(const needle_session *s, const nd_json *env, nd_split_answer *out, needle_error *err);

/* The end of every second answer: env (may be NULL; freed here) taken into out
 * (nd_take_scratch_answer) when it is there, no sign was found (sign 0; -1:
 * memory ran out finding one) and no error came before (rc).  Returns 1
 * taken, 0 not, or an error code. */
int nd_take_scratch_if(const needle_session *s, nd_json *env, int sign, int rc, nd_split_answer *out,
                       needle_error *err);

/* The signs above, on a parsed call list for request: 1 when one is there
 * (the answer is not taken), 0 when none, -1 when out of memory. */
int nd_refusal_signs(const nd_json *calls, const nd_json *tools, const char *request);

#endif
