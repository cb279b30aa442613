/* eval.h - score a model on a JSONL test set (`needle eval`).
 *
 * Every row is answered through the public session API exactly as `needle run`
 * answers a request (needle_session_open with the row's tools and system, then
 * needle_session_send), and the envelope's function_calls are compared with the
 * row's answers.  Scoring itself (nd_eval_score) needs no model, so tests can
 * check it on handmade predictions.
 *
 * Metrics (all over the scored rows; malformed rows are reported and skipped):
 *   tool-name accuracy   the multiset of called names equals the expected one
 *                        (an off-topic row counts when nothing is called)
 *   exact-call accuracy  the calls equal the expected calls as JSON values
 *                        (names and arguments; order of calls ignored)
 *   argument F1          micro-F1 over (tool name, argument key, value) triples
 *   refusal accuracy     off-topic rows (expected []) answered []
 *   false refusals       on-topic rows answered []
 *   schema-valid rate    the turn succeeded and its calls, written compactly,
 *                        are accepted by the grammar of the declared tools
 *   mean decode tok/s    the envelopes' decode_tps, averaged
 */
#ifndef ND_EVAL_H
#define ND_EVAL_H

#include <stdio.h>

#include "core/buf.h"
#include "core/json.h"
#include "needle.h"

typedef struct nd_eval_opts {
    const char *tools_json;  /* tools for every row when tools_from_data is 0 */
    int tools_from_data;     /* 1: each row's own "tools" (required); 2: a row's own "tools" when it has
                                them, else tools_json */
    int max_new_tokens;      /* 0: the session default */
    int grounded_decoding;   /* needle_session_options.grounded_decoding (0: the default) */
    int split_requests;      /* needle_session_options.split_requests (0: the default) */
    int ask_again;           /* needle_session_options.ask_again (0: the default) */
    int strict;              /* needle_session_options.strict */
    FILE *report;            /* malformed rows and (show_failures) wrong answers; may be NULL */
    int show_failures;       /* print up to this many wrong rows to report */
} nd_eval_opts;

typedef struct nd_eval_result {
    int lines;          /* non-empty lines read */
    int rows;           /* rows scored */
    int malformed;      /* rows skipped: not a valid row */
    int errors;         /* rows whose turn failed before an envelope (counted in rows, all wrong) */
    int on_topic, off_topic;
    int name_ok, exact_ok, refusal_ok, false_refusals, schema_valid;
    long arg_tp, arg_pred, arg_gold;
    double tps_sum;
    int tps_n;
    int failures_shown;
} nd_eval_result;

/* Add one prediction to the tallies.  pred: the envelope's function_calls
 * (NULL when the turn produced none, e.g. failed); gold: the expected calls
 * (an array of {name, arguments}); tools: the declared tools array, for the
 * schema check (NULL skips it: counted invalid); success: the envelope's
 * "success".  Returns 1 when the row is an exact match, else 0. */
int nd_eval_score(const nd_json *pred, const nd_json *gold, const nd_json *tools, int success, nd_eval_result *r);

/* Score one JSONL row (line[0..len), `where` = "FILE:LINE" for messages).
 * Returns 0 when scored; NEEDLE_EFORMAT/NEEDLE_EJSON for a malformed row (err
 * says why; nothing is tallied); other codes for failures of the model. */
int nd_eval_row(needle_model *m, const char *line, size_t len, const char *where, const nd_eval_opts *o,
                nd_eval_result *r, needle_error *err);

/* Score every row of a JSONL file.  Malformed rows are reported on o->report
 * as "FILE:LINE: skipped: why" and counted.  Fails only on I/O errors. */
int nd_eval_file(needle_model *m, const char *path, const nd_eval_opts *o, nd_eval_result *r, needle_error *err);

/* The result as one JSON object (rates in [0,1], null when undefined). */
void nd_eval_write_json(nd_buf *b, const nd_eval_result *r);

#endif
