/* synthetic_vocab.h - a token trie over a made-up vocabulary for the token
 * mask tests (test_grammar.c, test_copy_values.c): ids 0..255 are the single
 * bytes, ids 256.. the given multi-byte strings, in order.  Include after
 * check.h. */
#ifndef ND_TEST_SYNTHETIC_VOCAB_H
#define ND_TEST_SYNTHETIC_VOCAB_H

#include <stdlib.h>
#include <string.h>

#include "grammar/token_mask.h"

typedef struct {
    int n;               /* 256 + the multi-byte strings */
    int *ids;
    const char **bytes;  /* each token's bytes (not NUL-terminated for the single bytes) */
    size_t *lens;
    nd_token_trie *trie; /* NULL when the build failed (a CHECK has failed then) */
} synthetic_vocab;

static char synthetic_single_bytes[256];

static synthetic_vocab synthetic_vocab_build(const char *const *multi, int n_multi)
{
    synthetic_vocab v = {256 + n_multi, NULL, NULL, NULL, NULL};
    v.ids = malloc((size_t)v.n * sizeof *v.ids);
    v.bytes = malloc((size_t)v.n * sizeof *v.bytes);
    v.lens = malloc((size_t)v.n * sizeof *v.lens);
    for (int b = 0; b < 256; b++) {
        synthetic_single_bytes[b] = (char)b;
        v.ids[b] = b;
        v.bytes[b] = &synthetic_single_bytes[b];
        v.lens[b] = 1;
    }
    for (int i = 0; i < n_multi; i++) {
        v.ids[256 + i] = 256 + i;
        v.bytes[256 + i] = multi[i];
        v.lens[256 + i] = strlen(multi[i]);
    }
    needle_error err = {0};
    CHECK(nd_token_trie_build(v.ids, v.bytes, v.lens, (size_t)v.n, v.n, &v.trie, &err) == 0);
    return v;
}

static void synthetic_vocab_free(synthetic_vocab *v)
{
    nd_token_trie_free(v->trie);
    free(v->ids);
    free(v->bytes);
    free(v->lens);
}

#endif
