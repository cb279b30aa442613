/* split_turn.h - a request that asks for two things, answered one part at a time.
 *
 * When the model answers the first request of a conversation with two calls
 * or fewer, and the request can be cut in two (split_request.h), each side is
 * sent alone to a scratch session on the same model, tools, system facts and
 * options.  The two answers replace the model's when both sides call
 * something, nothing either side calls is withheld or has a value its side
 * does not say (validation.ungrounded), and together they make two calls or
 * more.  The first cut that passes is taken (at most ND_SPLIT_MAX_POINTS are
 * tried, two short turns each; a side may be cut again, trying two).
 *
 * When the model wrote two calls, the parts check its values: the small model
 * mixes the two halves' values ("set an alarm at 21:15, then the thermostat
 * to twenty-eight point five" -> temperature 21.5).  The parts' answers are
 * taken on the same conditions, and only when they name the same tools as
 * the model's, as many times each, and the right side does not start with a
 * determiner ("... the laundry room and the basement lights": "the basement
 * lights" alone names an object, not an action).  Measured on 2,846
 * generated rows: 36 made right, 1 wrong; the dev set unchanged.
 *
 * One action with two objects ("call Filippo & Londisizwe") is answered the
 * same way when no cut is taken and the model wrote one call: the request
 * without the object it wrote is answered alone, and its call is added when
 * it is the same tool with another value for the same key, standing across
 * the join (split_request.h, nd_other_objects), grounded and not withheld,
 * and that value does not name one of the tool's fields ("brightness").
 *
 * A side the model answers with no call leans (lean_call.h) when the whole
 * session would: it gets the call the model nearly made when that call also
 * says its yes/no settings in the side ("navigate to Brixton Market and call
 * Kemi": "call Kemi" alone is answered [] by a fine-tuned car model).
 *
 * The session's own KV cache keeps the tokens the model wrote for the whole
 * request, as with the value repairs. */
#ifndef ND_SPLIT_TURN_H
#define ND_SPLIT_TURN_H

#include "agent/session.h"
#include "core/buf.h"
#include "core/json.h"

/* A side may be cut again once: "A, plus B, plus C" is answered in three parts. */
#define ND_SPLIT_DEPTH 2

typedef struct {
    nd_buf calls;      /* the merged call array (JSON text) */
    nd_buf completed;  /* the parts' validation.completed, one JSON array */
    nd_buf parts;      /* the two sides, a JSON array of strings (validation.split) */
    double confidence; /* the lower of the parts' confidences (NaN: neither has one) */
    int keeps_whole;   /* one of the calls is the whole request's own (one action, two objects):
                          its grounding flags stand */
} nd_split_answer;

void nd_split_answer_init(nd_split_answer *a);
void nd_split_answer_free(nd_split_answer *a);

/* Try the cuts of request, then its other objects (calls: the model's answer
 * to it, after the value repairs; whole_completed and whole_confidence: that
 * answer's validation.completed and confidence).  Returns 1 with *out filled
 * when the parts' answers are taken, 0 when not, or an error code (out of
 * memory; a part's input error is only a cut not taken). */
int nd_answer_in_parts(needle_session *s, const char *request, const nd_json *calls, const char *whole_completed,
                       double whole_confidence, int max_new_tokens, nd_split_answer *out, needle_error *err);

/* The scratch session the parts are answered in: the same model, tools,
 * system facts and options as s, cut at most ND_SPLIT_DEPTH - 1 more times,
 * never asked again.  0 or an error code. */
int nd_scratch_open(needle_session *s, int max_new_tokens, needle_session **out, needle_error *err);

/* The same with other tools declared (a JSON array of declarations). */
int nd_scratch_open_with(needle_session *s, const nd_json *tools_decl, int max_new_tokens, needle_session **out,
                         needle_error *err);

/* text[0, len) answered alone, from a fresh start, in the scratch session:
 * the envelope, parsed; NULL when it does not count (a failed turn, no call,
 * a call withheld, or a value it does not say), with *rc an error code when
 * memory ran out (0 otherwise). */
nd_json *nd_scratch_answer(needle_session *scratch, const char *text, size_t len, int max_new_tokens, int *rc,
                           needle_error *err);

#endif
