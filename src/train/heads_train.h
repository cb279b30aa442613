/* heads_train.h - training the confidence and contrastive heads on a frozen body.
 *
 * Both heads read fixed "cells" (SPEC 4: per token x0 and the lane mean after
 * every layer), so with the body frozen the cells of every example are
 * computed once, and the head's few parameters (probes (P,d), proj, bias,
 * log_temp) are trained with analytic gradients in plain C:
 *
 *   pooled_k = sum_c w_kc cell_c,  w_k = softmax_c(cell_c . p_k / sqrt(d))
 *   dL/dp_k  = sum_c w_kc (g_k . cell_c - g_k . pooled_k) cell_c / sqrt(d),  g_k = dL/dpooled_k
 *
 * Confidence: each row is answered by the agent exactly as `needle run`
 * does (greedy, grammar-constrained); the label is 1 when the produced call
 * list equals the row's answers (JSON equality, list order kept), else 0;
 * the loss is the logistic loss of the head's logit, over the cells of that
 * turn (prompt and whole assistant turn, what the session pools at run time).
 *
 * Contrastive: each row with at least one call gives a pair (query text, the
 * compact JSON of its first call's tool), embedded as retrieval does
 * (agent/retrieval.h); InfoNCE over a batch with the other distinct tools of
 * the batch as negatives, logits exp(log_temp) * cosine.
 *
 * Calibration is reported as expected calibration error (10 equal-width
 * bins) on held-out rows, before and after, for the head's probability and
 * for the envelope's confidence min(geometric mean of call-token
 * probabilities, head probability). */
#ifndef ND_HEADS_TRAIN_H
#define ND_HEADS_TRAIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "needle.h"

/* One head's trainable parameters, in one flat vector (for the optimizer). */
typedef struct nd_head_params {
    int P, d, out;
    float *flat;   /* n floats: probes | W | bias | log_temp */
    size_t n;
    float *probes; /* [P, d] */
    float *W;      /* [out, P*d] (row r gives output r) */
    float *bias;   /* [out] */
    float *log_temp; /* 1 float (contrastive only; kept at 0 for confidence) */
} nd_head_params;

int nd_head_params_alloc(nd_head_params *h, int P, int d, int out, needle_error *err);
void nd_head_params_free(nd_head_params *h);

/* Cells of one example: n vectors of d floats. */
typedef struct nd_cells {
    float *x;
    int n;
} nd_cells;

/* Pooling forward: pooled [P*d]; wts [P*n] receives the attention weights
 * (needed by the backward pass). */
void nd_head_pool_fwd(const nd_head_params *h, const nd_cells *c, float *pooled, float *wts);
/* Pooling backward: accumulate dL/dprobes into gprobes [P*d]. */
void nd_head_pool_bwd(const nd_head_params *h, const nd_cells *c, const float *pooled, const float *wts,
                      const float *dpooled, float *gprobes);

/* Mean logistic loss of the confidence head over examples idx[0..n) with
 * labels y; adds the gradient to grad (h->n floats) when grad != NULL;
 * logits (may be NULL) receives each example's logit. */
double nd_conf_loss(const nd_head_params *h, const nd_cells *cells, const int *y, const int *idx, int n,
                    float *grad, float *logits);

/* Mean InfoNCE loss for queries q[idx[i]] whose correct tool is
 * tool_of[idx[i]] among the distinct tools of the batch; adds the gradient
 * when grad != NULL; *top1 (may be NULL) receives how many queries ranked
 * their tool first among those candidates. */
double nd_contrastive_loss(const nd_head_params *h, const nd_cells *queries, const nd_cells *tools,
                           const int *tool_of, const int *idx, int n, float *grad, int *top1);

/* Expected calibration error with `bins` equal-width bins over [0,1]:
 * sum_b (n_b/N) |mean(y in b) - mean(p in b)|; NAN when n == 0. */
double nd_ece(const double *p, const int *y, int n, int bins);

typedef struct nd_heads_train_options {
    int epochs;         /* 0: 40 */
    double lr;          /* 0: 3e-3 (Adam) */
    int batch;          /* 0: 16 */
    double holdout;     /* share of rows held out for the report; 0: 0.2 */
    int max_rows;       /* 0: every row */
    int max_new_tokens; /* per labelling turn; 0: 256 */
    size_t max_cell_mb; /* memory for cached cells; 0: 2048 (rows past it are not used) */
    uint64_t seed;
    int skip_confidence, skip_contrastive;
    FILE *log;          /* progress lines (NULL: quiet) */
} nd_heads_train_options;

typedef struct nd_heads_report {
    int rows, failed_turns, conf_train, conf_held, conf_correct;
    double conf_loss_before, conf_loss_after; /* training rows */
    double held_loss_before, held_loss_after;
    double ece_before, ece_after;         /* held-out, head probability */
    double env_ece_before, env_ece_after; /* held-out, envelope confidence */
    int con_train, con_held, con_tools;
    double con_loss_before, con_loss_after; /* training pairs, full-batch candidates */
    double con_top1_before, con_top1_after; /* held-out queries against the held-out rows' distinct tools */
} nd_heads_report;

/* The whole `needle train-heads`: load a .safetensors checkpoint (heads are
 * initialised as the reference does when absent), train, write a copy with
 * the new heads (every other tensor and the metadata unchanged). */
int nd_heads_train(const char *model_path, const char *tokenizer_path, const char *data_path, const char *out_path,
                   const nd_heads_train_options *opt, nd_heads_report *rep, needle_error *err);

#endif
