/* repair.h - what the value repairs share (name_span, said_choice, clock_time,
 * said_number, said_quantity, said_date): the one call they look at, the
 * list of arguments they changed, the schema checks a written value must
 * pass, and the request read as words and numbers. */
#ifndef ND_REPAIR_H
#define ND_REPAIR_H

#include <stddef.h>

#include "core/buf.h"
#include "core/json.h"

/* The turn's one call: its tool name, its arguments object and its tool's
 * "properties" schema.  0 when calls is not exactly one call of a declared
 * tool with an arguments object. */
typedef struct {
    const char *tool;
    nd_json *args;
    const nd_json *params, *props;
} nd_one_call;
int nd_repair_one_call(nd_json *calls, const nd_json *tools, nd_one_call *out);
/* The same for call i of a list of any length. */
int nd_repair_call_at(nd_json *calls, size_t i, const nd_json *tools, nd_one_call *out);

/* Is key listed in the schema's "required" array? */
int nd_schema_required(const nd_json *params, const char *key);

/* Does the JSON array of "tool.key" strings `list` (the grounding checks'
 * text; NULL: none) hold exactly "tool.key"? */
int nd_path_listed(const char *list, const char *tool, const char *key);

/* Append "tool.key" to the JSON array being built in *paths ('[' before the
 * first entry, ',' before the others; *n_paths counts them, the caller
 * closes the list). */
void nd_repair_note(nd_buf *paths, int *n_paths, const char *tool, const char *key);

/* Does a number schema take v: type "integer" (v whole) or "number", inside
 * minimum / maximum / exclusiveMinimum / exclusiveMaximum, no enum or const?
 * bounds_only: 1 when the bounds alone refuse v (the rest would take it). */
int nd_schema_takes_number(const nd_json *schema, double v, int *bounds_only);

/* A free string schema: type "string" with nothing that restricts the text
 * (no enum, const, pattern, format, minLength or maxLength). */
int nd_free_string_schema(const nd_json *schema);

/* A copy of text[begin, end) (malloc'd), or NULL when it is empty, not valid
 * UTF-8 (a cut inside a character) or memory runs out. */
char *nd_copy_text_span(const char *text, size_t begin, size_t end);

/* The free-text arguments (nd_free_string_schema) of a one-call answer that
 * `wants` (the arguments object and the member's index) are given to
 * `reshape`; a new text it returns (malloc'd; NULL: no change) replaces the
 * value and "tool.key" is noted in *paths.  Returns how many were replaced,
 * or -1 when out of memory. */
typedef char *(*nd_text_reshape)(const char *request, const char *tool, const char *value, size_t value_len);
int nd_reshape_free_texts(nd_json *calls, const nd_json *tools, const char *request,
                          int (*wants)(const nd_json *args, size_t k), nd_text_reshape reshape, nd_buf *paths,
                          int *n_paths);
/* The same for every call of the list, whatever their number; a new text
 * that refuse(calls, call, text) turns down (NULL: none) is not written. */
int nd_reshape_free_texts_each(nd_json *calls, const nd_json *tools, const char *request,
                               int (*wants)(const nd_json *args, size_t k), nd_text_reshape reshape,
                               int (*refuse)(const nd_json *calls, size_t call, const char *text), nd_buf *paths,
                               int *n_paths);

/* Drop each call that repeats an earlier one, or repeats it but for one
 * string value with one of the two values inside the other ("label":"to set" and "label":"to";
 * "room":"kids' gym" and "room":"gym"): the small models write such a near
 * copy where they mean one call.  The first is kept.  Returns how many were
 * dropped. */
int nd_drop_near_duplicates(nd_json *calls);

/* Drop every optional top-level argument whose "tool.key" the grounding
 * checks list as ungrounded (`ungrounded`: their JSON array of strings): a
 * value the request does not say in an argument the tool does not need is
 * one the model made up ("weather in Ritaborough" -> "date": "2028-08-23").
 * Required arguments stay (the checks report them), and so do those in
 * `outside` (the checks' out_of_schema list: "brightness 150%" bent to 100
 * is a request the contract refuses, not a made-up value).  Returns how many
 * were dropped. */
int nd_drop_ungrounded_optional(nd_json *calls, const nd_json *tools, const char *ungrounded, const char *outside);

/* Put each call's arguments in its tool's property order, the order the
 * grammar writes them (a repair appends the members it adds); members the
 * schema does not name follow, in their order. */
void nd_order_arguments(nd_json *calls, const nd_json *tools);

/* Set obj's member key to the value the JSON text[0, len) holds (replaced,
 * or appended).  Returns 0, or -1 when out of memory (or the text is not
 * JSON). */
int nd_object_put_json(nd_json *obj, const char *key, const char *text, size_t len);

/* Does the schema's "pattern" accept text (ASCII)?  0 without a pattern. */
int nd_pattern_accepts(const nd_json *schema, const char *text);

/* Write v into a number value (its literal text as written: whole numbers
 * without a point).  Returns 0 or NEEDLE_ENOMEM (v unchanged). */
int nd_json_set_number_value(nd_json *v, double x);

/* The request as tokens: words (ASCII letters and inner apostrophes, lower
 * case, cut to 15 bytes) and numbers in digits (word "#", value in num; a
 * decimal part read; an ordinal's letters "3rd" skipped). */
#define ND_REPAIR_MAX_TOKENS 256
typedef struct {
    char w[ND_REPAIR_MAX_TOKENS][16];
    double num[ND_REPAIR_MAX_TOKENS];
    int n;
} nd_tokens;
void nd_tokenize(const char *text, nd_tokens *t);
/* Is token i the word w (i may be out of range)? */
int nd_token_is(const nd_tokens *t, int i, const char *w);

#endif
