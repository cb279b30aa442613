/* copy_source.h - the text free string values may be copied from (grounded decoding).
 *
 * A small model fills free-text arguments with values it memorised ("text mom
 * ..." -> recipient "Maya").  Grounded decoding only lets such a value be a
 * copy of what was said (the request, the conversation, the system facts): a
 * non-empty piece of the text, letter case as written, that starts at the
 * start of a word (or at + # @ $ ( before one: "+44 20 ...") and ends at the
 * end of one (its last character a letter, digit, non-ASCII character or one
 * of . ! ? ) ' and the next one not a letter, digit or non-ASCII character).
 *
 * Whole words matter: a model pulled towards a memorised "patio" would
 * otherwise stop at "pa" of "pantry".  Case is kept because every free value
 * of the hand-written dev set and of the generated test splits is an exact
 * copy, and folding ASCII case let the model write "upstairs landinG Lights"
 * (exact calls on the dev set: 14.1% with case kept, 12.9% folded).
 * Characters JSON must escape (", \ and controls) and invalid UTF-8 are cut
 * out: a copy never contains or crosses them.
 *
 * The word-start positions of the text are sorted as suffixes.  A copy in
 * progress is the interval of those suffixes that begin with what was
 * written, and its length: one character narrows the interval by two binary
 * searches.  A step is only taken when some suffix of the new interval can
 * still reach a word end, so every state can be finished.  The state is two
 * uint32 (a: the interval, b: the length), kept at character boundaries.
 */
#ifndef ND_COPY_SOURCE_H
#define ND_COPY_SOURCE_H

#include <stddef.h>
#include <stdint.h>

/* Longer sources keep their last ND_COPY_MAX_BYTES bytes (the most recent turns). */
#define ND_COPY_MAX_BYTES 32768u

typedef struct nd_copy_source nd_copy_source;

/* Build from text[0..len) (any bytes).  Returns 0 and *out (NULL when the text
 * holds no word to copy: then nothing can be copied, and the caller must not
 * constrain), or NEEDLE_ENOMEM. */
int nd_copy_source_build(const char *text, size_t len, nd_copy_source **out);
void nd_copy_source_free(nd_copy_source *c);

/* The start state (nothing copied yet) is a = 0, b = 0. */

/* Continue the copy in state (*a, *b) with code point cp: 0 and the new state, or -1 (state unchanged) when the copy
 * cannot go on with cp and still reach a word end. */
int nd_copy_step(const nd_copy_source *c, uint32_t *a, uint32_t *b, uint32_t cp);

/* 1 when some code point in [lo, hi] is a step nd_copy_step would take. */
int nd_copy_range_viable(const nd_copy_source *c, uint32_t a, uint32_t b, uint32_t lo, uint32_t hi);

/* 1 when the copy may end here (non-empty and at a word end). */
int nd_copy_can_end(const nd_copy_source *c, uint32_t a, uint32_t b);

/* Word starts in the source (tests). */
uint32_t nd_copy_word_count(const nd_copy_source *c);

#endif
