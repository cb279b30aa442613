/* json.h - a strict JSON parser (RFC 8259) into a small DOM, and a writer.
 *
 * Strict: UTF-8 validated (overlongs, surrogates and bytes past U+10FFFF are
 * errors), no trailing commas, no comments, no leading zeros, lone surrogate
 * escapes are errors, depth <= ND_JSON_MAX_DEPTH, input <= ND_JSON_MAX_BYTES.
 * Numbers keep their literal text so they can be re-emitted exactly.
 * Object keys keep their order; duplicate keys are an error.
 */
#ifndef ND_JSON_H
#define ND_JSON_H

#include <stddef.h>
#include <stdio.h>

#include "core/buf.h"
#include "needle.h"

#define ND_JSON_MAX_DEPTH 128
#define ND_JSON_MAX_BYTES (64u << 20)

typedef enum {
    ND_JSON_NULL,
    ND_JSON_FALSE,
    ND_JSON_TRUE,
    ND_JSON_NUMBER,
    ND_JSON_STRING,
    ND_JSON_ARRAY,
    ND_JSON_OBJECT
} nd_json_type;

typedef struct nd_json nd_json;
struct nd_json {
    nd_json_type type;
    char *str;        /* STRING: decoded UTF-8, NUL-terminated (may hold NULs: use len);
                         NUMBER: the literal text as written */
    size_t len;       /* byte length of str */
    double num;       /* NUMBER: value (strtod of the literal) */
    nd_json *items;   /* ARRAY: elements; OBJECT: values */
    char **keys;      /* OBJECT: decoded keys, NUL-terminated, parallel to items */
    size_t *key_lens; /* OBJECT: key byte lengths */
    size_t count;     /* ARRAY/OBJECT: number of elements/members */
    size_t offset;    /* byte offset of the value in the source text */
};

/* Parse text[0..len).  On error returns NEEDLE_EJSON (or NEEDLE_EUTF8 /
 * NEEDLE_ELIMIT / NEEDLE_ENOMEM) with a message "<what> at line L column C (byte B)";
 * `what_file` (may be NULL) is prefixed to the message as "FILE: ". */
int nd_json_parse(const char *text, size_t len, const char *what_file, nd_json **out, needle_error *err);
/* Free a tree returned by nd_json_parse (only roots: children live in their parent's array). */
void nd_json_free(nd_json *v);

/* Object member lookup (NULL when absent or v is not an object). */
const nd_json *nd_json_get(const nd_json *v, const char *key);

/* Append the member key: "value" (both NUL-terminated UTF-8) to an object
 * (a tree from nd_json_parse; the key must not be there yet).  Pointers into
 * the object's members are invalid afterwards.  Returns 0, or NEEDLE_ENOMEM
 * (the object unchanged). */
int nd_json_object_add_string(nd_json *obj, const char *key, const char *value);

/* Set obj's member key to `value`, a root from nd_json_parse that this call
 * takes over (freed in every case): an existing member's value is replaced,
 * else the member is appended.  Pointers into the object's members are
 * invalid afterwards.  Returns 0, or NEEDLE_ENOMEM (the object unchanged). */
int nd_json_object_put(nd_json *obj, const char *key, nd_json *value);

/* Remove member i of an object (its key and value freed; later members
 * move down).  Pointers into the object's members are invalid afterwards. */
void nd_json_object_remove(nd_json *obj, size_t i);

/* Remove element i of an array (its contents freed; later elements move
 * down).  Pointers into the array's elements are invalid afterwards. */
void nd_json_array_remove(nd_json *arr, size_t i);

/* Compact writer, Python json.dumps(separators=(",",":")) style.  ascii_only
 * escapes every non-ASCII character as \uXXXX (surrogate pairs above U+FFFF),
 * as Python's ensure_ascii=True does; numbers are written as their literal text. */
void nd_json_write(nd_buf *b, const nd_json *v, int ascii_only);
void nd_json_write_string(nd_buf *b, const char *s, size_t n, int ascii_only);
/* Print {"error":"msg"} and a newline to `to`: the per-line failure answer of
 * the line-by-line tools (`needle tokenize --rows`, tools/render_rows). */
void nd_json_print_error_line(FILE *to, const char *msg);

/* Structural equality as JSON values (numbers compared by value, object member
 * order ignored). */
int nd_json_equal(const nd_json *a, const nd_json *b);

#endif
