/* said_label.h - the label the request names is written.
 *
 * "set an alarm at 5am labelled airport run" -> label "set an" becomes
 * "airport run"; "an alarm named Professor compass for 11:20 pm" -> the label
 * the model left out is added.  For a one-call answer and a free string
 * argument named label or title (any case), when the request names it once
 * with one of: called, named, labelled, labeled, label it, label, titled,
 * title (a word of its own):
 *
 *   - "label: team lunch at Mrazko Diner, for 3:00" -> to the next ',' or ';';
 *   - quoted ("Summer Canyon", 'x', “x”, ‘x’) -> what the marks hold;
 *   - otherwise up to four words, ending before and, on, at, for, every, to,
 *     in, with, please, pls, thanks, thx, then, from, by, today, tonight,
 *     tomorrow or a number, or after a word that ends with , . ; ! ?.
 *
 * The value said replaces the model's or is added when the call has none.
 * Measured before it was kept (docs/envelope.md): 4 of 1,809 rows made
 * right, none wrong.
 *
 * With none of those markers, the one "for" of the request introduces a
 * label the call left out ("alarm at ten past four for school pickup"), read
 * by the four-word rule above, unless what follows says when: a digit, a
 * number word up to fifty, half, quarter, noon, midnight, a day or month
 * name, today, tonight, tomorrow, every, morning, "the morning" and the like,
 * or me, my, a, an, minus.  It never replaces a label the model wrote ("for"
 * introduces places too: "lights for the balcony").  Measured on the dev set
 * and 2,846 generated rows: 4 made right, none wrong.
 *
 * Every session (session.c), after place_span.h. */
#ifndef ND_SAID_LABEL_H
#define ND_SAID_LABEL_H

#include "core/buf.h"
#include "core/json.h"

/* Write the label said into a one-call answer (calls modified in place).  The
 * argument's "tool.key" is appended to *paths (repair.h, nd_repair_note).
 * Returns the number of arguments written, or -1 when out of memory. */
int nd_fix_said_label(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths);

/* The label the request names (malloc'd), or NULL when it names none or more than one. */
char *nd_label_said(const char *request);

#endif
