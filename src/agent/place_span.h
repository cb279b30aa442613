/* place_span.h - a place named in part is taken whole.
 *
 * Lower-case place names are compounds the small model often cuts: "the
 * upstairs landing lights" -> room "upstairs", "in the wine cellar" -> room
 * "cellar"; or it takes the tool's own noun along: "the greenhouse lights"
 * -> room "greenhouse lights".  For a one-call answer, a free string
 * argument named room, location, destination, place, area, zone, door,
 * window, city or address (any case) whose value is a run of whole words of
 * the latest request, found once, is reshaped:
 *
 *   - when the request names one place in a place's own pattern ("the/my/our
 *     W.. NOUN" with NOUN a word of the tool's name, or "in/for/on the W.."
 *     closing a clause; one to three words that may join a place), a value
 *     that is not that place is replaced by it;
 *   - words of the tool's name ("lights" of set_lights) at the value's end
 *     are dropped;
 *   - up to two lower-case words after it join when the word right after
 *     them is a word of the tool's name ("upstairs [landing] lights");
 *   - up to two lower-case words before it join when the word right before
 *     them is "the", "my" or "our" ("the [wine] cellar");
 *   - the word "room" or "area" right after it joins, unless it is a word
 *     of the tool's name ("the games [room]");
 *   - a name cut before its possessive is finished ("Jennifer" of "in
 *     Jennifer's bedroom"): the possessive and one more word, not a function
 *     word or a word of the tool's name;
 *   - a name's possessive right before it joins ("Joseph's [study]"); a value
 *     that was only the tool's noun keeps the place before it, not the noun;
 *   - a joining word is plain lower-case ASCII (letters, ' and -), not a
 *     function word (the, in, for, please, turn, ...), not a word of the
 *     tool's name.
 *
 * An answer of several calls (since the fifth session of 2026-12-06) has
 * each call's place widened or trimmed where it stands by the same steps
 * but the first (a request naming several places has no one place), and
 * never into the place another call already has: "the lower basement and
 * old garage" -> "basement" becomes "lower basement".
 *
 * A place said after "in" with a capital ("what's the weather in
 * Valparaíso") that the one call leaves out, or fills with function words
 * only ("the"), is written into its tool's one free string place argument
 * (since 2026-12-07; not a month or weekday, not with two places said).
 *
 * Measured before it was kept (docs/envelope.md): 10 of 1,809 rows made
 * right, none wrong; the several-call steps 5 more, none wrong.  Every session (session.c), after message_span.h.  The
 * KV cache keeps the tokens the model wrote. */
#ifndef ND_PLACE_SPAN_H
#define ND_PLACE_SPAN_H

#include "core/buf.h"
#include "core/json.h"

/* Reshape the place values of an answer as above (calls modified in place;
 * tools: the declared tools).  Each changed argument's "tool.key" is appended
 * to *paths (repair.h, nd_repair_note).  Returns the number changed, or -1
 * when out of memory. */
int nd_complete_place_names(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths);

/* The reshaped value (malloc'd) for value of tool `tool` in request, or NULL
 * when it would not change. */
char *nd_place_span_reshape(const char *request, const char *tool, const char *value, size_t value_len);

#endif
