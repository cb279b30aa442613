/* number.h - one strict parser for numbers given as text (CLI options, --set
 * values, environment variables).  The whole string must be the number: no
 * blanks, no trailing junk, no NaN or Inf, no overflow, inside [lo, hi].  The
 * error names the option and the allowed range:
 *   "--epochs: 99999999999 is out of range (allowed 1 .. 1000000)". */
#ifndef ND_NUMBER_H
#define ND_NUMBER_H

#include <stdint.h>

#include "needle.h"

int nd_parse_i64(const char *s, int64_t lo, int64_t hi, const char *name, int64_t *out, needle_error *err);
int nd_parse_int(const char *s, int lo, int hi, const char *name, int *out, needle_error *err);
/* Unsigned, all 64 bits (seeds); a leading '-' is refused. */
int nd_parse_u64(const char *s, const char *name, uint64_t *out, needle_error *err);
/* Finite decimal or exponent notation in [lo, hi]. */
int nd_parse_double(const char *s, double lo, double hi, const char *name, double *out, needle_error *err);
int nd_parse_float(const char *s, float lo, float hi, const char *name, float *out, needle_error *err);

#endif
