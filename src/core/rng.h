/* rng.h - a small deterministic random number generator.
 *
 * xoshiro256** seeded through splitmix64, plus Box-Muller normals.  The same
 * seed gives the same stream on every platform and build, which is what makes
 * `needle init --seed N` and training runs reproducible.  Not for secrets.
 */
#ifndef ND_RNG_H
#define ND_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct nd_rng {
    uint64_t s[4];
    int has_spare;   /* Box-Muller makes normals in pairs: the second waits here */
    double spare;
} nd_rng;

/* Seed from one 64-bit value (any value, 0 included). */
void nd_rng_seed(nd_rng *r, uint64_t seed);
/* An independent stream per (seed, stream) pair, e.g. one per worker thread or
 * per tensor, so results do not depend on the order streams are consumed. */
void nd_rng_seed_stream(nd_rng *r, uint64_t seed, uint64_t stream);

uint64_t nd_rng_next(nd_rng *r);
/* Uniform double in [0, 1) with 53 random bits. */
double nd_rng_uniform(nd_rng *r);
/* Uniform integer in [0, n) without modulo bias (n > 0). */
uint64_t nd_rng_below(nd_rng *r, uint64_t n);
/* Standard normal N(0, 1). */
double nd_rng_normal(nd_rng *r);
/* x[i] = mean + std * N(0, 1) for i < n. */
void nd_rng_fill_normal(nd_rng *r, float *x, size_t n, float mean, float std);
/* Fisher-Yates shuffle of an int array. */
void nd_rng_shuffle_int(nd_rng *r, int *a, size_t n);

#endif
