/* message_frame.h - a messaging request the model answered with no call,
 * read by the frame people text with.
 *
 * The bundled model learnt the generator's message texts rather than the
 * frame "text X that ...": "text mom that I'll be late" and "tell Ingrid
 * Solberg I've booked the cabin" get no call, while texts it saw in training
 * do (docs/default-model.md, eighth session).  The frame itself says who and
 * what, so a first request said in one of these frames is answered with the
 * call it spells out (the session decides when: session.c):
 *
 *   [FILLER...] VERB RECIPIENT MARK TEXT     text|txt|msg|message|sms|ping|tell
 *                                            write to|drop a line to|get word to
 *                                            send|shoot|fire [off|out] [a|an|the]
 *                                            [quick] text message|text|message|
 *                                            msg|sms to|for
 *   [FILLER...] send RECIPIENT a text|message|msg MARK TEXT
 *   [FILLER...] let RECIPIENT know [that] TEXT
 *
 *   FILLER     hey, hi, ok, so, please, pls, can you, could you, would you,
 *              i need you to, go ahead and, quick one, i was wondering if you
 *              could, i think we should, time to, don't forget to, again, ...
 *              (and , ! : . after them)
 *   RECIPIENT  one to three name words (a capital or a non-ASCII letter
 *              first; never "I", "I'm", ...) after an optional title (Dr.,
 *              Mr., Mrs., Ms., Prof., Aunt, Uncle, Coach); "my" and one or two
 *              lower-case words; "the" and one lower-case word ("the
 *              plumber": a mark must follow), or one or two ending in group,
 *              team, chat, channel, crew or family; or a family
 *              word (mom, mum, dad, grandma, ...).  Never a pronoun.
 *   MARK       ':', '-', "that", "saying" or an opening quotation mark; after
 *              a name, a family word or "my W" with VERB text, txt, msg,
 *              message or tell, none when the text starts with "I" ("I'm",
 *              "I've") or a lower-case word that does not join the recipient
 *              or start a question about someone (and, or, about, to, for, ...)
 *   TEXT       nd_message_text_at() (message_span.h): to the closing quote, or
 *              to the end without a second request or the courtesy words.
 *
 * The tool: the one declared tool with a free string argument for the
 * person (recipient, to, contact, recipient_name) and one for the text
 * (text, message, body, content) and no other required argument.  Negation
 * is the caller's: a request that says not to send is not answered. */
#ifndef ND_MESSAGE_FRAME_H
#define ND_MESSAGE_FRAME_H

#include "core/buf.h"
#include "core/json.h"

/* The one call the frame spells out, as a JSON array text (malloc'd), or
 * NULL when the request is not in a frame above, no declared tool fits, or
 * memory runs out.  ascii: write non-ASCII text as \u escapes (the model's
 * chat layout).  *tool and *person_key / *text_key (may be NULL) point into
 * tools. */
char *nd_message_frame_call(const nd_json *tools, const char *request, int ascii, const char **tool,
                            const char **person_key, const char **text_key);

/* A one-call answer of that tool for a request said in its frame: a
 * recipient or text the model wrote that is a piece of the frame's ("text
 * Yusuf come round the back" -> "back"), or the same text in both arguments
 * (a placeholder), is replaced by the frame's.  Each changed "tool.key" is
 * appended to *paths (repair.h).  Returns how many changed, or -1 when out of
 * memory. */
int nd_fix_framed_message(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths);

#endif
