/* trainer.h - the fine-tuning loop: split, batches, AdamW + schedule, val loss,
 * resumable state and the loss plot. */
#ifndef ND_TRAINER_H
#define ND_TRAINER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "train/data.h"
#include "train/train_model.h"

/* How batches are padded.  GLOBAL is SPEC 9: one power-of-two length >= 128
 * for the whole run.  BATCH pads each batch only to the smallest power of two
 * >= 16 holding its longest row and, with bucket_window > 0, groups rows of
 * similar length: after the epoch's shuffle, rows are sorted by length inside
 * windows of bucket_window batches, cut into batches, and the batch order is
 * shuffled again (all deterministic for the seed). */
enum { ND_BUCKET_GLOBAL = 0, ND_BUCKET_BATCH = 1 };
#define ND_BUCKET_MIN_LEN 16

typedef struct nd_trainer_opts {
    int epochs, batch_size, max_len, log_every;
    double lr, val_split;
    uint64_t seed;
    int bucket;        /* ND_BUCKET_GLOBAL (default) or ND_BUCKET_BATCH */
    int bucket_window; /* BATCH only: batches per sorting window (default 50; 0 = no sorting) */
    FILE *progress;    /* progress lines go here (may be NULL) */

    /* resumable runs: every save_every steps the whole state is written
     * atomically to save_path; resume_path continues from such a file. */
    int save_every;
    const char *save_path, *resume_path;
    int stop_after; /* > 0: stop after this many steps in total (a planned interruption) */
    const char *plot_path; /* an SVG of the training and validation loss (NULL: none) */

    /* validation and early stopping (a run with a validation set only) */
    int eval_every; /* > 0: the validation loss also every N steps, not only after each epoch */
    int patience;   /* > 0: stop after this many validations in a row without a new best */
    int keep_best;  /* 1: at the end, the weights of the best validation loss replace the last ones */
    int val_tail;   /* > 0: the dataset's last val_tail rows are the validation set (val_split unused) */
    double decision_weight; /* the model's decision_weight (train_model.h), recorded in the description */
} nd_trainer_opts;

void nd_trainer_opts_default(nd_trainer_opts *o);

/* The options that decide the result, as one line ("epochs=3;batch=16;...";
 * also the mode, LoRA rank and alpha of m): stored in a resumable state and
 * compared when resuming. */
void nd_trainer_describe(const nd_trainer_opts *o, const nd_train_model *m, char *out, size_t size);
/* Read such a line back into o (only the keys it holds) and the mode:
 * full = 1 for full training, else the adapter rank and alpha. */
int nd_trainer_parse_description(const char *s, nd_trainer_opts *o, int *full, int *rank, double *alpha,
                                 needle_error *err);

typedef struct nd_trainer_result {
    int n_train, n_val, seq_len, steps;
    int stopped; /* 1: ended early by stop_after */
    double first_loss, last_loss, last_val_loss;
    double seconds, tokens_per_s;
    long padded_tokens, real_tokens; /* positions computed vs real tokens, over the training steps run */
    double best_val_loss; /* NAN when there was no validation */
    int best_step;        /* the step of best_val_loss (the weights returned with keep_best) */
    int early_stopped;    /* 1: patience ran out */
} nd_trainer_result;

/* Train m (LoRA when m->lora is set, else full when m->grads is set) on ds.
 * The validation rows are a fixed shuffle (seed) of val_split of the rows. */
int nd_trainer_run(nd_train_model *m, const nd_dataset *ds, int pad_id, const nd_trainer_opts *o,
                   nd_trainer_result *res, needle_error *err);

#endif
