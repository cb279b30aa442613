/* error.h - filling a caller's needle_error. */
#ifndef ND_ERROR_H
#define ND_ERROR_H

#include "needle.h"

/* Format a message into err (which may be NULL) and return code, so callers
 * can write `return nd_errorf(err, NEEDLE_EFORMAT, "%s: ...", path);`. */
int nd_errorf(needle_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Clear an error record to NEEDLE_OK / "". */
void nd_error_clear(needle_error *err);

#endif
