/* tokenizer.h - SentencePiece-exact BPE encode/decode (SPEC section 6).
 *
 * Encoding reproduces SentencePiece's BPE model with byte fallback and no
 * normalisation: spaces become U+2581, one U+2581 is prepended (when the
 * vocabulary says add_dummy_prefix), the ten chat markers are atomic symbols
 * (longest match first), and adjacent symbols are merged by a priority queue:
 * highest piece score first, leftmost on ties.  Symbols left without a piece
 * become <0xHH> byte pieces.  O(n log n) per call; the working memory is a
 * reusable scratch, so steady-state calls do not allocate.
 *
 * Decoding: byte pieces become raw bytes, control and unknown pieces vanish,
 * markers become their text, U+2581 becomes a space, and the very first
 * visible piece loses one leading space (the dummy prefix).  Unlike the
 * SentencePiece library, an <unk> id decodes to nothing (SPEC 6) and byte
 * pieces that do not form valid UTF-8 are passed through as raw bytes rather
 * than replaced by U+FFFD: a streaming caller may be mid-character.
 */
#ifndef ND_TOKENIZER_H
#define ND_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "io/spm_model.h"
#include "needle.h"

/* A growable array of token ids (also used for loss masks by chat.h). */
typedef struct nd_ids {
    int *data;
    size_t len, cap;
} nd_ids;

void nd_ids_init(nd_ids *v);
void nd_ids_free(nd_ids *v);
int nd_ids_push(nd_ids *v, int id); /* 0 or NEEDLE_ENOMEM */

/* Working memory for one encode at a time; grows to the largest input seen.
 * A thread that encodes in parallel with others gives each its own. */
typedef struct nd_tok_scratch {
    char *norm;
    size_t norm_cap;
    void *syms;
    size_t syms_cap;
    void *heap;
    size_t heap_cap;
    char *cat; /* nd_tokenizer_encode_spans: the spans joined, and which bytes are plain */
    size_t cat_cap;
    uint8_t *plain, *norm_plain;
    size_t plain_cap, norm_plain_cap;
} nd_tok_scratch;

void nd_tok_scratch_init(nd_tok_scratch *s);
void nd_tok_scratch_free(nd_tok_scratch *s);

typedef struct nd_tokenizer nd_tokenizer;

/* Build from a vocabulary (copied: the vocab may be freed afterwards).
 * Fails with NEEDLE_EFORMAT on duplicate pieces or malformed byte pieces. */
int nd_tokenizer_create(const nd_vocab *v, nd_tokenizer **out, needle_error *err);
/* Convenience: load a SentencePiece .model file. */
int nd_tokenizer_load_spm(const char *path, nd_tokenizer **out, needle_error *err);
void nd_tokenizer_free(nd_tokenizer *t);

/* Encode text[0..len) (no BOS/EOS) and APPEND the ids to out.  Invalid UTF-8
 * -> NEEDLE_EUTF8 naming the byte offset; out is then left as it was.  Uses
 * the tokenizer's own scratch under a lock (safe from several threads, but
 * serialised); nd_tokenizer_encode_scratch runs without the lock. */
int nd_tokenizer_encode(nd_tokenizer *t, const char *text, size_t len, nd_ids *out, needle_error *err);
int nd_tokenizer_encode_scratch(const nd_tokenizer *t, nd_tok_scratch *s, const char *text, size_t len, nd_ids *out,
                                needle_error *err);
/* One piece of a text to encode.  plain = 1 marks untrusted text (a user's
 * query, a tool's result, tool schemas, a system prompt): the chat markers in
 * it (<|im_end|>, </tools>, <tool_call>, ...) are encoded as the ordinary
 * characters they are spelled with, never matched as, or merged into, control
 * ids, so such text cannot fake a turn boundary.  plain = 0 is the template's
 * own text, where markers are markers.  The spans are encoded as one text
 * (merges cross span boundaries exactly as if joined), so when a plain span
 * holds no marker text the ids equal nd_tokenizer_encode of the joined text. */
typedef struct nd_tok_span {
    const char *text;
    size_t len;
    int plain;
} nd_tok_span;

int nd_tokenizer_encode_spans(nd_tokenizer *t, const nd_tok_span *spans, size_t n_spans, nd_ids *out,
                              needle_error *err);

/* Caller-buffer variant: writes at most cap ids, sets *n to the number the text
 * needs, and returns NEEDLE_ETOOSMALL when cap < *n. */
int nd_tokenizer_encode_into(nd_tokenizer *t, const char *text, size_t len, int *ids, int cap, int *n,
                             needle_error *err);

/* Decode ids to text appended to out.  Ids outside the vocabulary ->
 * NEEDLE_EINVAL (naming the position).  The _stream form carries the
 * "nothing visible decoded yet" state across calls for incremental
 * decoding: start with *at_start = 1. */
int nd_tokenizer_decode(const nd_tokenizer *t, const int *ids, size_t n, nd_buf *out, needle_error *err);
int nd_tokenizer_decode_stream(const nd_tokenizer *t, const int *ids, size_t n, int *at_start, nd_buf *out,
                               needle_error *err);

/* Vocabulary facts. */
int nd_tokenizer_size(const nd_tokenizer *t);
int nd_tokenizer_bos(const nd_tokenizer *t);
int nd_tokenizer_eos(const nd_tokenizer *t);
int nd_tokenizer_pad(const nd_tokenizer *t);
int nd_tokenizer_unk(const nd_tokenizer *t);
int nd_tokenizer_type(const nd_tokenizer *t, int id); /* ND_PIECE_*, or -1 out of range */
/* The piece text as stored (U+2581 for spaces, "<0x0A>" for bytes); NULL out of range. */
const char *nd_tokenizer_piece(const nd_tokenizer *t, int id, int *len);
/* The id of a piece text, or -1 when it is not in the vocabulary. */
int nd_tokenizer_piece_id(const nd_tokenizer *t, const char *piece, size_t len);
/* The bytes a token contributes to decoded text: normal pieces with U+2581
 * already turned into spaces, byte pieces their one byte, markers their text;
 * control and unknown tokens (and ids out of range) give NULL, *len 0. */
const char *nd_tokenizer_token_bytes(const nd_tokenizer *t, int id, int *len);
/* 1 when the token's piece starts with U+2581, i.e. its bytes start with a
 * space that decoding drops when it is the first visible token. */
int nd_tokenizer_token_starts_with_space(const nd_tokenizer *t, int id);

#endif
