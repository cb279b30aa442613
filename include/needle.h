/* needle.h - the public C API of libneedle.
 *
 * libneedle runs, fine-tunes and exports Needle tool-calling models.  Every
 * function returns 0 (NEEDLE_OK) or a negative NEEDLE_E* code and, where it
 * takes a needle_error*, fills it with a one-line message naming the file and
 * the place.  There is no global mutable state: models and sessions are
 * handles, many per process.  The four released-engine calls at the bottom
 * are a thin compatibility layer over one hidden default session.
 */
#ifndef NEEDLE_H
#define NEEDLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NEEDLE_VERSION "0.1.0"

/* Error codes: 0 is success, every failure is a distinct negative value. */
enum {
    NEEDLE_OK = 0,
    NEEDLE_EIO = -1,          /* a file could not be opened, read or written */
    NEEDLE_EFORMAT = -2,      /* a file's contents are malformed */
    NEEDLE_ENOMEM = -3,       /* an allocation failed */
    NEEDLE_EINVAL = -4,       /* a bad argument from the caller */
    NEEDLE_EJSON = -5,        /* malformed JSON text */
    NEEDLE_ESCHEMA = -6,      /* a JSON Schema that cannot be enforced */
    NEEDLE_EUTF8 = -7,        /* text that is not valid UTF-8 */
    NEEDLE_ETOOSMALL = -8,    /* the caller's output buffer is too small */
    NEEDLE_EUNSUPPORTED = -9, /* a valid input this build cannot handle */
    NEEDLE_EBACKEND = -10,    /* the requested compute backend is unavailable */
    NEEDLE_ESTATE = -11,      /* a call made in the wrong state (e.g. before init) */
    NEEDLE_ELIMIT = -12       /* a size or depth limit was exceeded */
};

/* A caller-owned error record.  message is always NUL-terminated. */
typedef struct needle_error {
    int code;
    char message[512];
} needle_error;

/* A short static name for an error code ("NEEDLE_EFORMAT", ...). */
const char *needle_strerror(int code);

/* ---- Released engine compatibility layer (one hidden session per process) ---- */
int needle_init(const char *system, const char *tools_json, const char *tool_index_path);
int needle_complete(const char *text, int max_new_tokens, char *out, int out_size);
void needle_reset(void);
int needle_load(const char *blob, uint64_t size);

#ifdef __cplusplus
}
#endif
#endif /* NEEDLE_H */
