/* train_ckpt.h - checkpoints and LoRA adapters for the training model. */
#ifndef ND_TRAIN_CKPT_H
#define ND_TRAIN_CKPT_H

#include "train/train_model.h"

/* Load a .safetensors checkpoint (config from __metadata__["config"]) into a
 * fresh model.  Every tensor the forward pass reads must be present with its
 * exact shape; the heads are copied when present; other tensors (mtp_*) are
 * ignored and counted in *n_ignored (may be NULL). */
int nd_train_model_load(nd_train_model *m, const char *path, int *n_ignored, needle_error *err);

/* Write every tensor of the model (a --full result), same names as SPEC 3,
 * float32, the config in __metadata__. */
int nd_train_save_full(const nd_train_model *m, const char *path, needle_error *err);

/* Write the adapter: `<param path>.lora_A` (L,in,r) and `.lora_B` (L,r,out),
 * float32, metadata rank, alpha, targets and the base config. */
int nd_train_save_lora(const nd_train_model *m, const char *path, needle_error *err);

#endif
