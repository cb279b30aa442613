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
    uint64_t seed; /* the seed nd_init_params drew with (recorded in a v3 checkpoint's run) */
} nd_param_set;

/* Allocate and initialise every parameter of `c` (which must be derived).
 * Deterministic: each tensor draws from its own stream of (seed, name), so
 * the result does not depend on tensor order. */
int nd_init_params(const nd_config *c, uint64_t seed, nd_param_set *out, needle_error *err);
void nd_param_set_free(nd_param_set *ps);
const nd_param *nd_param_find(const nd_param_set *ps, const char *name);

/* Write the parameters as a checkpoint (.safetensors, F32) with
 * __metadata__ {"format":"needle-checkpoint","config":<config JSON>}; a
 * Needle 3 config gets the reference's metadata instead: format_version "2",
 * config (nd_config_to_reference_json), step "0", run {generator, seed}. */
int nd_param_set_write(const nd_param_set *ps, const nd_config *c, const char *path, needle_error *err);

/* A Needle 3 config as the reference's checkpoints carry it: every
 * TransformerConfig field in its order, Python json.dumps spacing (heap
 * string, NULL when out of memory).  Our reader takes it back unchanged. */
char *nd_config_to_reference_json(const nd_config *c);

#endif
