/* init.h - reference initialisation of a Needle model (SPEC section 3).
 *
 * Parameters are produced in checkpoint layout (names as the checkpoint
 * tree, kernels [in, out], `layers` leaves with a leading L axis), exactly
 * the names and shapes of tests/golden/tiny.safetensors, so they can be
 * written as a checkpoint or handed to the trainer.
 */
#ifndef ND_INIT_H
#define ND_INIT_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "needle.h"

#define ND_PARAM_MAX_DIMS 4

typedef struct nd_param {
    char name[96];
    int ndim;
    int64_t shape[ND_PARAM_MAX_DIMS];
    size_t numel;
    float *data; /* inside nd_param_set.block */
} nd_param;

typedef struct nd_param_set {
    nd_param *params;
    size_t count;
    float *block; /* one allocation holding every parameter */
    size_t total; /* floats in block = number of parameters */
} nd_param_set;

/* Allocate and initialise every parameter of `c` (which must be derived).
 * Deterministic: each tensor draws from its own stream of (seed, name), so
 * the result does not depend on tensor order. */
int nd_init_params(const nd_config *c, uint64_t seed, nd_param_set *out, needle_error *err);
void nd_param_set_free(nd_param_set *ps);
const nd_param *nd_param_find(const nd_param_set *ps, const char *name);

/* Write the parameters as a checkpoint (.safetensors, F32) with
 * __metadata__ {"format":"needle-checkpoint","config":<config JSON>}. */
int nd_param_set_write(const nd_param_set *ps, const nd_config *c, const char *path, needle_error *err);

#endif
