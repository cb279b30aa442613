/* sampler.c - greedy and temperature/top-p sampling over masked logits. */
#include "agent/sampler.h"

#include <math.h>
#include <stdlib.h>

#include "core/error.h"

int nd_sampler_init(nd_sampler *s, int n_vocab, float temperature, float top_p, uint64_t seed, needle_error *err)
{
    s->n_vocab = n_vocab;
    s->temperature = temperature;
    s->top_p = top_p;
    nd_rng_seed(&s->rng, seed);
    s->prob = NULL;
    s->order = NULL;
    if (n_vocab <= 0) return nd_errorf(err, NEEDLE_EINVAL, "sampler: vocabulary size %d", n_vocab);
    if (!(temperature >= 0.0f) || !(top_p >= 0.0f) || isinf(temperature))
        return nd_errorf(err, NEEDLE_EINVAL, "sampler: temperature %g / top_p %g out of range", (double)temperature,
                         (double)top_p);
    if (temperature > 0.0f) { /* greedy needs no scratch */
        s->prob = malloc(sizeof(float) * (size_t)n_vocab);
        s->order = malloc(sizeof(int) * (size_t)n_vocab);
        if (!s->prob || !s->order) {
            nd_sampler_free(s);
            return nd_errorf(err, NEEDLE_ENOMEM, "sampler: out of memory");
        }
    }
    return 0;
}

void nd_sampler_free(nd_sampler *s)
{
    free(s->prob);
    free(s->order);
    s->prob = NULL;
    s->order = NULL;
}

void nd_sampler_reseed(nd_sampler *s, uint64_t seed) { nd_rng_seed(&s->rng, seed); }

static int allowed_at(const uint32_t *allowed, int id) { return !allowed || nd_mask_test(allowed, id); }

int nd_sampler_best(const nd_sampler *s, const float *logits, const uint32_t *allowed)
{
    int best = -1;
    float bv = -INFINITY;
    for (int i = 0; i < s->n_vocab; i++) {
        if (!allowed_at(allowed, i)) continue;
        float v = logits[i];
        if (isnan(v)) continue;
        if (best < 0 ? v > -INFINITY : v > bv) { /* strict: lowest id wins ties */
            best = i;
            bv = v;
        }
    }
    return best;
}

/* qsort context is not portable in C11: compare through a file-level pointer
 * would not be thread-safe, so we sort pairs instead. */
typedef struct pair { float p; int id; } pair;
static int by_prob_desc(const void *a, const void *b)
{
    const pair *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return x->id - y->id;
}

int nd_sampler_pick(nd_sampler *s, const float *logits, const uint32_t *allowed)
{
    if (s->temperature <= 0.0f || !s->prob) return nd_sampler_best(s, logits, allowed);
    int best = nd_sampler_best(s, logits, allowed);
    if (best < 0) return -1;
    float mx = logits[best];
    /* softmax over the allowed tokens, at the temperature */
    int n = 0;
    double sum = 0.0;
    for (int i = 0; i < s->n_vocab; i++) {
        if (!allowed_at(allowed, i) || isnan(logits[i])) continue;
        float p = expf((logits[i] - mx) / s->temperature);
        if (p <= 0.0f) continue;
        s->prob[n] = p;
        s->order[n] = i;
        sum += p;
        n++;
    }
    if (n == 0 || !(sum > 0.0)) return best;
    int keep = n;
    if (s->top_p > 0.0f && s->top_p < 1.0f && n > 1) {
        pair *pairs = malloc(sizeof(pair) * (size_t)n);
        if (pairs) {
            for (int i = 0; i < n; i++) pairs[i] = (pair){s->prob[i], s->order[i]};
            qsort(pairs, (size_t)n, sizeof *pairs, by_prob_desc);
            double acc = 0.0, target = s->top_p * sum;
            keep = 0;
            while (keep < n) {
                acc += pairs[keep].p;
                keep++;
                if (acc >= target) break;
            }
            sum = 0.0;
            for (int i = 0; i < keep; i++) {
                s->prob[i] = pairs[i].p;
                s->order[i] = pairs[i].id;
                sum += pairs[i].p;
            }
            free(pairs);
        }
        /* out of memory: sample from the full allowed set (still valid) */
    }
    double r = nd_rng_uniform(&s->rng) * sum, acc = 0.0;
    for (int i = 0; i < keep; i++) {
        acc += s->prob[i];
        if (r < acc) return s->order[i];
    }
    return s->order[keep - 1]; /* rounding left r at the very top */
}

double nd_log_softmax_at(const float *logits, int n, int id)
{
    float mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (logits[i] > mx) mx = logits[i];
    if (!(mx > -INFINITY)) return -INFINITY;
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += exp((double)logits[i] - mx);
    return (double)logits[id] - mx - log(sum);
}
