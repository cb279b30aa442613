/* error.c - error records and code names. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>

int nd_errorf(needle_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

void nd_error_clear(needle_error *err)
{
    if (err) {
        err->code = NEEDLE_OK;
        err->message[0] = '\0';
    }
}

const char *needle_strerror(int code)
{
    switch (code) {
    case NEEDLE_OK: return "NEEDLE_OK";
    case NEEDLE_EIO: return "NEEDLE_EIO";
    case NEEDLE_EFORMAT: return "NEEDLE_EFORMAT";
    case NEEDLE_ENOMEM: return "NEEDLE_ENOMEM";
    case NEEDLE_EINVAL: return "NEEDLE_EINVAL";
    case NEEDLE_EJSON: return "NEEDLE_EJSON";
    case NEEDLE_ESCHEMA: return "NEEDLE_ESCHEMA";
    case NEEDLE_EUTF8: return "NEEDLE_EUTF8";
    case NEEDLE_ETOOSMALL: return "NEEDLE_ETOOSMALL";
    case NEEDLE_EUNSUPPORTED: return "NEEDLE_EUNSUPPORTED";
    case NEEDLE_EBACKEND: return "NEEDLE_EBACKEND";
    case NEEDLE_ESTATE: return "NEEDLE_ESTATE";
    case NEEDLE_ELIMIT: return "NEEDLE_ELIMIT";
    default: return "NEEDLE_E?";
    }
}
