/* train_ckpt.h - checkpoints and LoRA adapters for the training model. */
#ifndef ND_TRAIN_CKPT_H
#define ND_TRAIN_CKPT_H

#include "train/train_model.h"

/* Load a .safetensors checkpoint (config from __metadata__["config"]) into a
 * fresh model.  Every tensor the forward pass reads must be present with its
 * exact shape; the heads are copied when present; other tensors (mtp_*) are
 * ignored and counted in *n_ignored (may be NULL). */
int nd_train_model_load(nd_train_model *m, const char *path, int *n_ignored, needle_error *err);
/* The same from a .cact deploy file, dequantised (train_from_cact.c);
 * nd_train_model_load calls it for a file that starts with the .cact tag. */
int nd_train_model_load_cact(nd_train_model *m, const char *path, needle_error *err);

/* Write every tensor of the model (a --full result), same names as SPEC 3,
 * float32, the config in __metadata__. */
int nd_train_save_full(const nd_train_model *m, const char *path, needle_error *err);

/* Write the adapter: `<param path>.lora_A` (L,in,r) and `.lora_B` (L,r,out),
 * float32, metadata rank, alpha, targets and the base config. */
int nd_train_save_lora(const nd_train_model *m, const char *path, needle_error *err);

/* ---- resumable training state ----------------------------------------------
 * One .safetensors file (written atomically) holding everything a run needs to
 * continue bit for bit: the trainable weights ("weights": the LoRA slab, or the
 * whole parameter slab for --full), the AdamW moments ("adam.m", "adam.v") and
 * step count, the row order ("order": validation rows, then the training rows
 * as the current epoch visits them - every shuffle is a pure function of the
 * seed and the epoch, so this and the position are the whole data/RNG state),
 * the loss history, the options line and a fingerprint of the data. */
typedef struct nd_train_state {
    int step;          /* optimizer steps done */
    int epoch, batch;  /* where to continue: epoch index, first batch not yet done */
    int ep_steps;      /* the current epoch's steps so far and their loss sum */
    double ep_sum;
    uint64_t data_hash;
    char opts[512];
    int n_order;
    int32_t *order;
    int n_train_loss, cap_train_loss;
    float *train_loss; /* the loss of every step done */
    int n_val_loss, cap_val_loss;
    float *val_loss;   /* the validation loss after each epoch ... */
    int32_t *val_step; /* ... and the step count it was measured at */
} nd_train_state;

/* Allocate room for n rows, `steps` step losses and `epochs` validation losses. */
int nd_train_state_init(nd_train_state *s, int n, int steps, int epochs, needle_error *err);
void nd_train_state_free(nd_train_state *s);
/* Copy src's position and history into dst (sized by nd_train_state_init;
 * counts beyond dst's room are clamped - the trainer checks them first). */
void nd_train_state_copy(nd_train_state *dst, const nd_train_state *src);

#include "train/adamw.h"
int nd_train_state_save(const char *path, const nd_train_model *m, const nd_adamw *opt, const nd_train_state *s,
                        needle_error *err);
/* Read the weights into m (whose mode and sizes must match) and the moments
 * into opt (initialised for the same count); s is allocated here. */
int nd_train_state_load(const char *path, nd_train_model *m, nd_adamw *opt, nd_train_state *s, needle_error *err);

/* A 64-bit FNV-1a hash of the float32 values of the five LoRA target kernels
 * (q, k, v, gate, out; checkpoint layout, in that order): an adapter records
 * it as "base_checksum" so merging onto another base is refused. */
uint64_t nd_train_base_checksum(const nd_train_model *m);
/* The same hash computed from a checkpoint file (0 with err set on failure). */
int nd_train_base_checksum_file(const char *path, uint64_t *out, needle_error *err);

#endif
