/* fuzz_spm.c - the SentencePiece protobuf reader and the .cact tokenizer blob
 * reader on arbitrary bytes: they must return an error or a vocabulary that
 * builds a tokenizer, writes a blob that reads back identically, and encodes
 * a short text - never crash or read out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/spm_model.h"
#include "text/tokenizer.h"

static void exercise(const nd_vocab *v)
{
    needle_error err;
    nd_tokenizer *t = NULL;
    if (nd_tokenizer_create(v, &t, &err) == 0) {
        nd_ids ids;
        nd_ids_init(&ids);
        static const char text[] = "<|im_start|>user\n hi \xc3\xa9 <tools>[]</tools>";
        if (nd_tokenizer_encode(t, text, sizeof text - 1, &ids, &err) == 0) {
            nd_buf b;
            nd_buf_init(&b);
            nd_tokenizer_decode(t, ids.data, ids.len, &b, &err);
            nd_buf_free(&b);
        }
        nd_ids_free(&ids);
        nd_tokenizer_free(t);
    }
    uint8_t *blob = NULL;
    size_t size = 0;
    if (nd_vocab_to_blob(v, &blob, &size, &err) == 0) {
        nd_vocab w;
        if (nd_vocab_from_blob(blob, size, "blob", &w, &err) != 0 || w.n_pieces != v->n_pieces) abort();
        nd_vocab_free(&w);
        free(blob);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    needle_error err;
    nd_vocab v;
    if (nd_vocab_from_spm(data, size, "fuzz", &v, &err) == 0) {
        exercise(&v);
        nd_vocab_free(&v);
    }
    if (nd_vocab_from_blob(data, size, "fuzz", &v, &err) == 0) {
        exercise(&v);
        nd_vocab_free(&v);
    }
    return 0;
}
