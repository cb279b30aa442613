/* rng.c - splitmix64 seeding, xoshiro256** stream, Box-Muller normals. */
#include "core/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void nd_rng_seed(nd_rng *r, uint64_t seed)
{
    /* splitmix64 never yields four zero words in a row, so the xoshiro state
     * is never the all-zero fixed point */
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
    r->has_spare = 0;
    r->spare = 0.0;
}

void nd_rng_seed_stream(nd_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t mix = stream;
    nd_rng_seed(r, seed ^ splitmix64(&mix));
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t nd_rng_next(nd_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double nd_rng_uniform(nd_rng *r) { return (double)(nd_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

uint64_t nd_rng_below(nd_rng *r, uint64_t n)
{
    /* reject the top partial bucket so every value is equally likely */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = nd_rng_next(r);
    while (x >= limit);
    return x % n;
}

double nd_rng_normal(nd_rng *r)
{
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    /* u1 in (0, 1] so log(u1) is finite */
    double u1 = 1.0 - nd_rng_uniform(r);
    double u2 = nd_rng_uniform(r);
    double rad = sqrt(-2.0 * log(u1));
    double th = 6.283185307179586 * u2;
    r->spare = rad * sin(th);
    r->has_spare = 1;
    return rad * cos(th);
}

void nd_rng_fill_normal(nd_rng *r, float *x, size_t n, float mean, float std)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)(mean + std * nd_rng_normal(r));
}

void nd_rng_shuffle_int(nd_rng *r, int *a, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)nd_rng_below(r, i);
        int t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}
