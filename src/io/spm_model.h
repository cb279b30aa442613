/* spm_model.h - reading a SentencePiece .model file (protobuf ModelProto). */
#ifndef ND_SPM_MODEL_H
#define ND_SPM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "needle.h"

/* Piece types as stored in the .cact tokenizer blob (SPEC section 8). */
enum {
    ND_PIECE_NORMAL = 0,
    ND_PIECE_UNKNOWN = 1,
    ND_PIECE_CONTROL = 2,
    ND_PIECE_MARKER = 3, /* a chat marker (ten in Needle 2, sixteen in Needle 3) */
    ND_PIECE_BYTE = 4
};

/* A tokenizer vocabulary: what both a .model and a .cact blob reduce to. */
typedef struct nd_vocab {
    int n_pieces;
    int pad_id, eos_id, bos_id, unk_id;
    int add_dummy_prefix, byte_fallback;
    char **pieces;   /* UTF-8, NUL-terminated */
    int *piece_lens;
    float *scores;
    uint8_t *types;  /* ND_PIECE_* */
} nd_vocab;

/* Parse a SentencePiece .model (protobuf).  Types map NORMAL->0, UNKNOWN->1,
 * CONTROL->2, BYTE->4, and the ten chat markers (by text) -> 3. */
int nd_vocab_from_spm(const uint8_t *data, size_t size, const char *where, nd_vocab *v, needle_error *err);
int nd_vocab_load_spm_file(const char *path, nd_vocab *v, needle_error *err);
/* Parse / build the .cact tokenizer blob (SPEC section 8). */
int nd_vocab_from_blob(const uint8_t *data, size_t size, const char *where, nd_vocab *v, needle_error *err);
int nd_vocab_to_blob(const nd_vocab *v, uint8_t **out, size_t *out_size, needle_error *err);
void nd_vocab_free(nd_vocab *v);

#endif
