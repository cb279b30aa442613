/* train_model.h - the Needle model as a training graph (llm.c style).
 *
 * Parameters live in ONE float slab in the checkpoint layout (SPEC section 3:
 * kernels [in, out], `layers` leaves with a leading L axis), described by a
 * table of named tensors, so a checkpoint is read and written by name with no
 * conversion.  Activations live in a second slab planned up front for a
 * batch B x T: the lane state X entering every layer is kept (L+1 copies) and
 * everything inside a layer is recomputed during the backward pass (one layer
 * of scratch), which keeps memory linear in L at the cost of one extra forward.
 *
 * Training attention is causal with no window.  The loss is the mean
 * cross-entropy over positions with a target (target[i] = id to predict at
 * row i, or -1).  LoRA (SPEC 9) adds scale * A B to q, k, v, gate and out of
 * every layer; in LoRA mode the base is frozen and only A, B get gradients.
 */
#ifndef ND_TRAIN_MODEL_H
#define ND_TRAIN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "core/threadpool.h"
#include "model/config.h"
#include "model/params.h"
#include "needle.h"

/* The tensors are the parameters of model/params.def (roles ND_P_*); LoRA
 * targets are its lines with a .lora number (ND_LORA_TARGETS of them, in the
 * order q, k, v, gate, out). */

typedef struct nd_tensor_info {
    char name[128];
    int ndim;
    int64_t shape[4];
    size_t offset, count; /* in floats, inside the slab */
    int role;             /* ND_P_* the forward reads, or -1 for one it does not (the heads) */
    const nd_param_desc *param; /* its line of model/params.def */
    int instance;               /* site or head index (0 otherwise) */
    int absent;                 /* not in the checkpoint it was loaded from (a head it lacks, or an optional
                                 * tensor filled by its initialiser): a Needle 3 save leaves it out */
} nd_tensor_info;

typedef struct nd_train_act nd_train_act; /* the activation plan (train_model.c) */

typedef struct nd_train_model {
    nd_config cfg;
    int n_tensors;
    nd_tensor_info *tensors;
    int role_index[ND_P_COUNT][ND_MAX_SITES]; /* tensors[] index of each role (and site), -1 when absent */
    float *params;
    size_t n_params;

    /* full fine-tuning: grads has the params layout (heads and extras stay 0) */
    int full;
    float *grads;

    /* LoRA: slab of A (L,in,r) and B (L,r,out) for the five targets */
    int lora_rank;
    float lora_scale;
    float *lora, *lora_grads;
    size_t n_lora;
    size_t lora_a_off[ND_LORA_TARGETS], lora_b_off[ND_LORA_TARGETS];

    uint64_t lora_seed;  /* the seed the adapter was initialised with (adapter metadata) */
    struct nd_qat *qat;  /* deploy numerics (train/qat.h); NULL: full precision */
    /* The first answer token after each <tool_call> (decision_token) decides call or no call; its
     * loss gradient is scaled by decision_weight when that is > 0 and not 1 (plain cross-entropy
     * otherwise, as SPEC 12).  decision_token -1: none. */
    int decision_token;
    float decision_weight;

    const char *source_path; /* borrowed: the checkpoint it came from (a Needle 3 adapter's "base"); may be NULL */
    nd_threadpool *pool; /* borrowed; NULL = serial */
    nd_train_act *act;
} nd_train_model;

/* Build the tensor table for cfg (checkpoint names and shapes of cfg's
 * generation: Needle 3 names are the reference's `/`-joined paths; the heads
 * are included so a --full checkpoint round-trips) and allocate zeroed params. */
int nd_train_model_create(nd_train_model *m, const nd_config *cfg, needle_error *err);
/* Reference initialisation (SPEC 3) with a deterministic seed. */
void nd_train_model_init_reference(nd_train_model *m, uint64_t seed);
void nd_train_model_free(nd_train_model *m);
/* Needle 3's Monarch permutations (hada_p1/p2) are constants, not weights:
 * they get no gradient, but a full-training optimizer step (weight decay)
 * would still move them.  This writes them back (the reference draws them
 * from fixed seeds, so they are the same in every checkpoint). */
void nd_train_restore_constants(nd_train_model *m);

/* The floats of m->params a full fine-tune trains: every parameter before the heads (the
 * parameter table puts the heads last, so the forward's tensors form one prefix). */
size_t nd_train_full_trainable(const nd_train_model *m);

/* Lookup by name (-1 when absent). */
int nd_train_find(const nd_train_model *m, const char *name);
static inline float *nd_train_site_param(const nd_train_model *m, int role, int site)
{
    int i = m->role_index[role][site];
    return i < 0 ? NULL : m->params + m->tensors[i].offset;
}
static inline float *nd_train_param(const nd_train_model *m, int role) { return nd_train_site_param(m, role, 0); }

/* LoRA: allocate A ~ N(0,1)/r, B = 0 and their gradients; scale = alpha/r. */
int nd_train_lora_create(nd_train_model *m, int rank, float alpha, uint64_t seed, needle_error *err);
/* Full training: allocate gradients for every parameter. */
int nd_train_enable_full(nd_train_model *m, needle_error *err);
/* Name of LoRA target t in the table ("stack.layers.block.self_attn.q_proj.kernel", ...: the Needle 2
 * checkpoint name) and its in/out widths. */
const char *nd_train_lora_target_name(int t);
/* The target's name in a checkpoint of c's generation (Needle 3: "stack/layers/block/self_attn/q_proj/kernel"). */
void nd_train_lora_target_ckpt(const nd_config *c, int t, char *out, size_t n);
void nd_train_lora_dims(const nd_train_model *m, int t, int *in, int *out);

/* Plan the activation slab for batches up to B x T (reallocates when larger). */
int nd_train_plan(nd_train_model *m, int B, int T, needle_error *err);

/* Forward over ids [B,T]; returns the summed cross-entropy over rows with a
 * target (count in *n_targets).  With backward=1, also zeroes and fills the
 * gradients (grads and/or lora_grads) of the MEAN loss.  Returns NaN on an
 * allocation failure inside an op. */
double nd_train_step_grad(nd_train_model *m, const int32_t *ids, const int32_t *targets, int B, int T,
                          int backward, int *n_targets);

/* Forward only, then the final hidden row (after final_norm) of token row r
 * is available from nd_train_hidden; logits = hidden @ E^T. */
int nd_train_forward(nd_train_model *m, const int32_t *ids, int B, int T, needle_error *err);
const float *nd_train_hidden(const nd_train_model *m, int row);
void nd_train_logits_row(const nd_train_model *m, int row, float *logits);

#endif
