/* utf8.h - the one UTF-8 codec of the library.
 *
 * "Valid" is strict everywhere: no overlong forms, no surrogates
 * (U+D800..DFFF), nothing past U+10FFFF.  The JSON parser, the tokenizer,
 * the vocabulary loader, the regex compiler and the envelope writer all use
 * these, so they agree on what a character is. */
#ifndef ND_UTF8_H
#define ND_UTF8_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

/* Length of the valid sequence starting at s[0..n) (n >= 1), or 0 if it is
 * invalid or cut short. */
size_t nd_utf8_valid_len(const unsigned char *s, size_t n);

/* The offset of the first byte of the first invalid sequence, or n if the
 * whole of s[0..n) is valid. */
size_t nd_utf8_first_invalid(const char *s, size_t n);

/* Byte length of the character whose lead byte is c (input already valid). */
static inline int nd_utf8_seq_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

/* Decode one code point from s[0..n) (input already valid); returns its
 * length.  A sequence cut short by n gives U+FFFD and the bytes left. */
size_t nd_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/* Encode cp (<= U+10FFFF) into out (4 bytes room); returns the length. */
size_t nd_utf8_encode(uint32_t cp, char *out);

/* Append s[0..n) to out with every invalid sequence replaced by U+FFFD, so
 * text cut in the middle of a character still makes a valid string. */
void nd_utf8_append_repaired(nd_buf *out, const char *s, size_t n);

#endif
