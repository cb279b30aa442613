/* message_span.h - a message's text copied only in part is taken whole.
 *
 * The small model often stops a message early or starts it late: "text Aunt
 * Pilar that the flight lands at 9" -> text "flight lands at", "send a text
 * to Siobhán - happy graduation!!" -> "happy", "Let my landlord know the
 * boiler is leaking again" -> "the boiler".  A message runs from the word
 * that introduces it to the end of the request, so the text argument of a
 * one-call answer is widened:
 *
 *   - a free string argument (no enum, const, pattern, format or length
 *     bounds) named text, message, body, content, note or caption (any case),
 *     whose value occurs once in the latest request, at word edges, and
 *     does not repeat another argument (a placeholder: grounding.h);
 *   - inside quotation marks ("...", '...', “...”, ‘...’): to the marks;
 *   - otherwise to the end of the request, but not past "and then", "then",
 *     "and also", "also", "plus" or ';' (a second request begins there; see
 *     split_request.h), and without the courtesy words that end it (please,
 *     pls, plz, thanks, thank you, thx, ty, cheers, asap, now, real quick, if
 *     you can, would you, for me), trailing commas and spaces, and a single
 *     final '.' or '!' ("see you at Kathu!" -> "see you at Kathu"; "happy
 *     graduation!!" keeps its marks);
 *   - on the left back over at most two words to the word that introduces
 *     it ("that", "saying", "says", "say", "know", "telling", ':', '-', '–'),
 *     when no other such word lies between.
 *
 * Measured before it was kept (docs/envelope.md): 14 of 1,809 rows made
 * right, none wrong.  Every session (session.c), after name_span.h.  The KV
 * cache keeps the tokens the model wrote. */
#ifndef ND_MESSAGE_SPAN_H
#define ND_MESSAGE_SPAN_H

#include "core/buf.h"
#include "core/json.h"

/* Widen the message text of a one-call answer (calls modified in place;
 * tools: the declared tools, plain or OpenAI-wrapped).  The widened
 * argument's "tool.key" is appended to *paths (repair.h, nd_repair_note).
 * Returns the number of arguments widened, or -1 when out of memory. */
int nd_complete_message_text(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths);

/* The widened text for value in request, as described above (malloc'd), or
 * NULL when it would not change. */
char *nd_message_span_widen(const char *request, const char *value, size_t value_len);

/* The message that starts at request[at] (spaces skipped), as a frame says
 * it (message_frame.h): inside the quotation marks that open there, or else
 * to the end of the request with the same cuts as above (a second request,
 * courtesy words, a single final '!').  malloc'd; NULL when empty, when a
 * quotation mark is not closed, or when memory runs out. */
char *nd_message_text_at(const char *request, size_t at);

#endif
