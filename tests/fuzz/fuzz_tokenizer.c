/* fuzz_tokenizer.c - encode arbitrary bytes with the golden tokenizer
 * (tests/golden/tok8k.model, run from the repository root): invalid UTF-8
 * must be NEEDLE_EUTF8, valid text must encode, and decoding its ids must
 * give the text back (U+2581 in the input decodes as a space, the one
 * documented exception). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "text/tokenizer.h"

static nd_tokenizer *tok;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    needle_error err;
    if (!tok && nd_tokenizer_load_spm("tests/golden/tok8k.model", &tok, &err) != 0) abort();
    const char *text = (const char *)data;
    nd_ids ids;
    nd_ids_init(&ids);
    int rc = nd_tokenizer_encode(tok, text, size, &ids, &err);
    int valid = nd_utf8_first_invalid(text, size) == size;
    if (valid != (rc == 0)) abort();
    if (!valid && rc != NEEDLE_EUTF8) abort();
    if (rc == 0) {
        for (size_t i = 0; i < ids.len; i++)
            if (ids.data[i] < 0 || ids.data[i] >= nd_tokenizer_size(tok)) abort();
        nd_buf b;
        nd_buf_init(&b);
        if (nd_tokenizer_decode(tok, ids.data, ids.len, &b, &err) != 0) abort();
        int has_u2581 = size >= 3 && memmem(text, size, "\xe2\x96\x81", 3) != NULL;
        if (!has_u2581 && (b.len != size || (size && memcmp(b.data, text, size) != 0))) abort();
        nd_buf_free(&b);
    }
    /* Arbitrary ids (from the bytes) decode or fail cleanly. */
    int raw[64];
    size_t n = size / 2 < 64 ? size / 2 : 64;
    for (size_t i = 0; i < n; i++) raw[i] = (int)(data[2 * i] | data[2 * i + 1] << 8) - 2000;
    nd_buf b;
    nd_buf_init(&b);
    nd_tokenizer_decode(tok, raw, n, &b, &err);
    nd_buf_free(&b);
    nd_ids_free(&ids);
    return 0;
}
