/* said_number.h - the one number a request says, written over a number the
 * request does not say.
 *
 * The small models misread numbers: "thermostat to twenty five degrees" ->
 * 29, "blinds to 25%" -> 23, "sleep timer for five mins" -> 15, "log 1867
 * millilitres" -> 186.  The grounding checks (grounding.h) find such a
 * number ungrounded; when the request says exactly one number the call
 * does not already use, that number is what was meant:
 *
 *   - only a turn with one call, and only when exactly one of its top-level
 *     number arguments is ungrounded (its "tool.key" in the ungrounded list);
 *   - the numbers said: digits ("25", "1,867", "42.99") and words ("twenty
 *     five", "twenty-five", "a hundred and fifty", "twenty-eight point five"),
 *     not negative, not part of
 *     a time (7:30), a date (2026-07-01) or an ordinal (14th), and not
 *     followed by a unit that converts ("two hours" may mean 120 minutes,
 *     "half a litre" 500 ml: the grounding checks' unit steps);
 *   - numbers the call already uses (its other number arguments, or inside
 *     its string values) are not candidates; exactly one must remain;
 *   - the schema must take it: an integer for "integer", inside minimum /
 *     maximum and the exclusive bounds, no enum or const.
 *
 * English number words only. */
#ifndef ND_SAID_NUMBER_H
#define ND_SAID_NUMBER_H

#include "core/buf.h"
#include "core/json.h"

/* The numbers `request` says as described above, at most `cap` of them in
 * out (duplicates kept); returns how many. */
int nd_numbers_said(const char *request, double *out, int cap);

/* A number written in words in a request: its value, the byte after its last
 * word, whether it is one word, whether "minus" comes right before it. */
typedef struct {
    double value;
    size_t end;
    int one_word, after_minus;
} nd_word_number;
/* The numbers request writes in words ("twenty five", "twenty-eight point
 * five"), at most cap, in order; how many (0 when out of memory). */
int nd_word_numbers(const char *request, nd_word_number *out, int cap);

/* The words of text (runs of ASCII letters and inner apostrophes, lowered,
 * longer ones cut to 15 bytes) into w, at most cap; ends[i] (may be NULL) is
 * the byte after word i.  Returns how many. */
int nd_lower_words(const char *text, char (*w)[16], size_t *ends, int cap);

/* Is the lowered word w one of list (NULL-terminated)? */
int nd_word_listed(const char *w, const char *const *list);
/* A number written in words starting at w[i] ("twenty five", "a hundred
 * and fifty", "seven"): its value, with *next the word after it; -1 when
 * w[i] starts none ("a" alone is not one). */
int nd_number_in_words(char (*w)[16], int n, int i, int *next);

/* Write the one candidate over the one ungrounded number argument of the one
 * call (`ungrounded`: the grounding checks' JSON array of "tool.key"
 * strings).  The argument's "tool.key" is appended to *paths (a JSON array
 * being built: '[' before the first entry, ',' before the others; *n_paths
 * counts them).  Returns 1 when the call changed, 0 when not, -1 when out of
 * memory. */
int nd_fix_said_number(nd_json *calls, const nd_json *tools, const char *request, const char *ungrounded,
                       nd_buf *paths, int *n_paths);

/* A decimal cut to its whole part: "put the radio on 98.4" -> 98, "set auto
 * to 71.5F" -> 71.  In a turn with one call, a whole number argument whose
 * value is the whole part of exactly one decimal the request says in digits
 * (not a clock time: "7.30 pm", "at 7.30"; not "1.2.3") gets the decimal
 * when the schema takes it (type "number", the bounds).  "tool.key" of each
 * changed argument is appended to *paths.  Returns how many changed, or -1
 * when out of memory. */
int nd_fix_said_decimal(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths);

/* The numbers in digits `request` says within three words of a word of
 * `key` (its words of four letters or more, ASCII case ignored: "brightness"
 * for "brightness", "speed" for "fan_speed"), with their sign ("-10" at the
 * start of a word is negative; times, dates, ordinals and "1,867" are not
 * read): "brightness to 101 percent" -> 101, "200% brightness" -> 200.  At
 * most cap into out; returns how many, or -1 when out of memory. */
int nd_numbers_near_key(const char *request, const char *key, double *out, int cap);

#endif
