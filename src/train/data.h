/* data.h - fine-tuning data: JSONL rows -> token ids + loss mask (SPEC 7).
 *
 * Each line is an object {query, tools, answers | function_calls, reasoning?,
 * system?}, or the platform chat form {messages: [system?, user, assistant with
 * OpenAI tool_calls], tools: OpenAI-form} (read as the same local row; both
 * generations).  Local rows are {query, tools, answers | function_calls, reasoning?,
 * system?}.  tools and answers may be JSON values or strings holding JSON (as
 * in the published datasets); either way they are re-serialised compactly
 * with key order kept (non-ASCII escaped in the 2.0.8 layout, raw UTF-8 in
 * 2.0.15), then rendered by text/chat.h in the chosen layout
 * (NEEDLE_LAYOUT_2_0_8 or _2_0_15; the functions without a layout use 2.0.8). */
#ifndef ND_DATA_H
#define ND_DATA_H

#include <stdint.h>
#include <stdio.h>

#include "needle.h"
#include "text/tokenizer.h"

typedef struct nd_example {
    int32_t *ids;    /* [BOS] + enc(prompt) + enc(target) + [EOS] */
    uint8_t *mask;   /* 1 where the token is predicted (target tokens and EOS) */
    int len;
} nd_example;

typedef struct nd_dataset {
    nd_example *ex;
    int n, cap;
    int lines, malformed, too_long; /* what loading saw */
    int max_len_seen;
} nd_dataset;

/* Load every well-formed row of `path`.  A malformed line is reported on
 * `report` (may be NULL) as "PATH:LINE: skipped: why" and skipped; rows
 * longer than max_len tokens are skipped and counted.  Fails only on I/O or
 * memory errors, or when no row is usable. */
int nd_dataset_load_jsonl(const char *path, nd_tokenizer *tok, int max_len, FILE *report, nd_dataset *ds,
                          needle_error *err);
int nd_dataset_load_jsonl_layout(const char *path, nd_tokenizer *tok, int layout, int max_len, FILE *report,
                                 nd_dataset *ds, needle_error *err);
/* Turn one JSON line into an example (exposed for tests and fuzzing). */
int nd_example_from_json_line(const char *line, size_t len, const char *where, nd_tokenizer *tok, nd_example *ex,
                              needle_error *err);
int nd_example_from_json_line_layout(const char *line, size_t len, const char *where, nd_tokenizer *tok, int layout,
                                     nd_example *ex, needle_error *err);
void nd_dataset_free(nd_dataset *ds);

/* The padded sequence length: smallest power of two >= 128 holding the
 * longest example, capped at max_len. */
int nd_bucket_len(int longest, int max_len);
/* The same with another floor: smallest power of two >= min_len holding
 * `longest`, capped at max_len (per-batch buckets use a floor of 16). */
int nd_bucket_len_min(int longest, int min_len, int max_len);

/* A 64-bit FNV-1a hash of every example's ids and loss mask, in order: a
 * resumed run checks it to be sure it sees the same rows. */
uint64_t nd_dataset_fingerprint(const nd_dataset *ds);

/* Fill a batch [B, T] from examples idx[0..n) (n <= B): ids padded with
 * pad_id, targets[i] = ids[i+1] where mask[i+1] is set, else -1; rows past n
 * are all padding.  Returns the number of real (non-pad) tokens. */
long nd_make_batch(const nd_dataset *ds, const int *idx, int n, int B, int T, int pad_id, int32_t *ids,
                   int32_t *targets);

#endif
