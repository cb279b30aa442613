/* heads.h - the confidence and contrastive heads (SPEC section 4, "Heads").
 *
 * Both read the "cells" of a whole prompt: per token, x0 and the lane mean
 * after every layer (nd_state_eval fills them), n_cells = T * (L+1) vectors of
 * d.  Each probe p_k attends over all cells with weights
 * softmax_c((cell_c . p_k) / sqrt(d)); pooled = concat_k sum_c w_c cell_c. */
#ifndef ND_HEADS_H
#define ND_HEADS_H

#include "model/model.h"

/* pooled[P*d] for head h; NEEDLE_ENOMEM possible (scratch of n_cells floats). */
int nd_head_pool(const nd_model *m, const nd_head_weights *h, const float *cells, int n_cells, float *pooled,
                 needle_error *err);

/* Confidence logit = pooled . W + bias; probability = sigmoid(logit). */
int nd_head_confidence(const nd_model *m, const float *cells, int n_cells, float *logit, needle_error *err);

/* Contrastive embedding = pooled W, L2-normalised (contrastive_dim floats).
 * Needle 3: the embedding head (code 1), y / sqrt(|y|^2 + 1e-12).  Both
 * generations' heads dispatch here on the config's generation. */
int nd_head_contrastive(const nd_model *m, const float *cells, int n_cells, float *emb, needle_error *err);

/* Needle 3 router: 3 raw logits (the stored calibration, m->weights.router.calibration,
 * is not applied). */
int nd_head_router(const nd_model *m, const float *cells, int n_cells, float logits[3], needle_error *err);

#endif
