/* heads_train_v3.h - training the Needle 3 embedding and confidence heads on
 * a frozen body (the `needle train-heads` path for a v3 checkpoint).
 *
 * A v3 probe head (SPEC-needle3 5.3 item 7) reads cells C[t][r] (T tokens,
 * R = L+1 rows of d: x0 and the lane mean after each layer):
 *   a_rp = softmax_t(C[t][r] . P[r,p] / sqrt(d))      (k probes per row r)
 *   n_rp = rmsunit(sum_t a_t C[t][r]),  R_rp = n_rp * g[r,p]
 *   u_i  = R . U_i / sqrt(d) + beta_i,  w_i = softmax over all (r,p)
 *   pooled_i = sum_{r,p} w_i[r,p] R_rp                 (q queries)
 *   y = W pooled + b
 * The body is frozen (the reference stops the gradient at the cells), so the
 * cells of every example are computed once and the head's parameters are
 * trained with the analytic backward below (held to finite differences and to
 * jax.grad of the reference's probe_pool in the tests).
 *
 * Training signals:
 *  - confidence: one logit, the logistic loss against "the agent's answer to
 *    this row equals the row's answers" (as the Needle 2 head, heads_train.h);
 *  - embedding: the reference gives this head a learnable temperature and a
 *    logit bias that starts at log 10 / -10 and that its exporter drops (SPEC-
 *    needle3 1.2): the parameters of a pairwise sigmoid contrastive loss
 *    (SigLIP, whose published initialisation is exactly t = log 10, b = -10).
 *    The loss: every (query, candidate tool) pair of a batch, candidates = the
 *    batch's distinct tools, logit = exp(log_temp) * cos + bias, label +1 for
 *    the query's own tool and -1 for the others, sum of softplus(-label *
 *    logit) divided by the number of queries (inferred: the reference ships
 *    no head training code);
 *  - router: three logits with a calibration row (0.90, 0.00, 0.60) whose
 *    meaning the reference does not define, so there is no label to train it
 *    against: it is copied through unchanged. */
#ifndef ND_HEADS_TRAIN_V3_H
#define ND_HEADS_TRAIN_V3_H

#include <stddef.h>

#include "core/rng.h"
#include "model/weights.h"
#include "needle.h"
#include "train/heads_train.h"

typedef struct nd_head3 {
    int R, k, q, d, out;
    float *flat; /* n floats, the order below (one vector for the optimizer) */
    size_t n;
    float *probes;     /* [R*k, d] (row r*k+p) */
    float *gain;       /* [R*k] */
    float *query;      /* [q, d] */
    float *row_bias;   /* [q, R*k] */
    float *W;          /* [out, q*d] */
    float *bias;       /* [out] (the embedding head keeps it at zero) */
    float *log_temp;   /* embedding: the contrastive temperature (log) */
    float *logit_bias; /* embedding: the contrastive logit bias */
} nd_head3;

int nd_head3_alloc(nd_head3 *h, int R, int k, int q, int d, int out, needle_error *err);
void nd_head3_free(nd_head3 *h);

/* Forward of one example's cells (T tokens of R rows) into y[out]; the
 * intermediates the backward needs are kept in *rec (free with
 * nd_head3_rec_free). */
typedef struct nd_head3_rec {
    int T;
    float *a;      /* [R*k, T] token attention */
    float *nrm;    /* [R*k, d] rmsunit rows before the gain */
    float *rinv;   /* [R*k] */
    float *rows;   /* [R*k, d] after the gain */
    float *w;      /* [q, R*k] */
    float *pooled; /* [q*d] */
} nd_head3_rec;

int nd_head3_forward(const nd_head3 *h, const nd_cells *c, nd_head3_rec *rec, float *y);
/* Accumulate dL/dparams into grad (h->n floats) given dy = dL/dy. */
void nd_head3_backward(const nd_head3 *h, const nd_cells *c, const nd_head3_rec *rec, const float *dy, float *grad);
void nd_head3_rec_free(nd_head3_rec *rec);

/* Mean logistic loss of the confidence head (out 1) over idx[0..n) with
 * labels y; gradient added to grad when grad != NULL; logits may be NULL. */
double nd_conf3_loss(const nd_head3 *h, const nd_cells *cells, const int *y, const int *idx, int n, float *grad,
                     float *logits);

/* The embedding head's sigmoid contrastive loss (above) for queries
 * q[idx[i]] whose tool is tool_of[idx[i]]; *top1 (may be NULL): how many
 * queries rank their own tool first among the batch's distinct tools. */
double nd_embed3_loss(const nd_head3 *h, const nd_cells *queries, const nd_cells *tools, const int *tool_of,
                      const int *idx, int n, float *grad, int *top1);

/* What nd_heads_train gathered (cells, labels, the split), for the v3 fit. */
typedef struct nd_heads_data {
    const nd_cells *ccells;          /* confidence: the cells of each answered turn */
    const int *label;                /* 1: the answer was right */
    const double *geo;               /* geometric mean of the call-token probabilities */
    const int *conf_tr, *conf_ho;    /* row indices, training and held out */
    int nct, ncho;
    const nd_cells *qcells, *tcells; /* embedding: query cells per row, tool cells per tool */
    const int *tool_of;
    const int *con_tr, *con_ho;
    int nkt, nkho;
} nd_heads_data;

/* Initialise both heads from the model (the reference's initialisation where
 * a head is absent), train them, fill the report and write out_path: the
 * input checkpoint with the embedding and confidence head tensors replaced
 * (reference layout and names) and everything else unchanged. */
int nd_heads3_fit(const nd_weights *w, const nd_heads_data *data, const nd_heads_train_options *o, nd_rng *rng,
                  const char *in_path, const char *out_path, nd_heads_report *rep,
                  needle_error *err);

#endif
