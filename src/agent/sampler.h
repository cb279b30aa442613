/* sampler.h - choosing the next token from logits, under an allowed-token mask.
 *
 * Greedy (temperature 0): the highest logit among the allowed tokens, the
 * lowest id on ties, so runs are reproducible bit for bit.  Otherwise
 * softmax(logits / temperature) restricted to the allowed tokens, cut to the
 * smallest set whose mass reaches top_p (nucleus), sampled with the session's
 * own seeded generator: the same seed gives the same tokens. */
#ifndef ND_SAMPLER_H
#define ND_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "needle.h"

typedef struct nd_sampler {
    int n_vocab;
    float temperature; /* <= 0: greedy */
    float top_p;       /* <= 0 or >= 1: no nucleus cut */
    nd_rng rng;
    float *prob; /* scratch, n_vocab */
    int *order;  /* scratch, n_vocab */
} nd_sampler;

int nd_sampler_init(nd_sampler *s, int n_vocab, float temperature, float top_p, uint64_t seed, needle_error *err);
void nd_sampler_free(nd_sampler *s);
/* Re-seed (a conversation reset restarts the random stream). */
void nd_sampler_reseed(nd_sampler *s, uint64_t seed);

/* Bit helpers for masks of n_vocab bits in uint32 words. */
static inline int nd_mask_test(const uint32_t *mask, int id) { return (mask[id >> 5] >> (id & 31)) & 1u; }
static inline void nd_mask_set(uint32_t *mask, int id) { mask[id >> 5] |= 1u << (id & 31); }
static inline size_t nd_mask_words(int n) { return ((size_t)n + 31) / 32; }

/* The chosen token id, or -1 when the mask allows nothing (or every allowed
 * logit is NaN/-inf).  allowed == NULL allows every token. */
int nd_sampler_pick(nd_sampler *s, const float *logits, const uint32_t *allowed);

/* The greedy choice whatever the temperature: the highest finite logit among
 * the allowed tokens, lowest id on ties; -1 when there is none. */
int nd_sampler_best(const nd_sampler *s, const float *logits, const uint32_t *allowed);

/* log softmax(logits)[id] over all n logits (the unmasked distribution). */
double nd_log_softmax_at(const float *logits, int n, int id);

#endif
