/* trainer.h - the fine-tuning loop: split, batches, AdamW + schedule, val loss. */
#ifndef ND_TRAINER_H
#define ND_TRAINER_H

#include <stdint.h>
#include <stdio.h>

#include "train/data.h"
#include "train/train_model.h"

typedef struct nd_trainer_opts {
    int epochs, batch_size, max_len, log_every;
    double lr, val_split;
    uint64_t seed;
    FILE *progress; /* progress lines go here (may be NULL) */
} nd_trainer_opts;

void nd_trainer_opts_default(nd_trainer_opts *o);

typedef struct nd_trainer_result {
    int n_train, n_val, seq_len, steps;
    double first_loss, last_loss, last_val_loss;
    double seconds, tokens_per_s;
} nd_trainer_result;

/* Train m (LoRA when m->lora is set, else full when m->grads is set) on ds.
 * The validation rows are a fixed shuffle (seed) of val_split of the rows. */
int nd_trainer_run(nd_train_model *m, const nd_dataset *ds, int pad_id, const nd_trainer_opts *o,
                   nd_trainer_result *res, needle_error *err);

#endif
