/* embed.c - needle_model_embed: a text's embedding from the model's head.
 *
 * Needle 2 models embed with the contrastive head, the same vector tool
 * retrieval ranks with (retrieval.h says exactly which tokens are fed:
 * [BOS] + enc(text), full attention, cut to max_seq_len tokens).  The model
 * is read-only here, so any number of threads may embed at once. */
#include "agent/retrieval.h"
#include "agent/session.h"
#include "core/error.h"

int needle_model_embed_dim(const needle_model *m)
{
    if (!m || !m->net->weights.contrastive.present) return 0;
    return m->net->weights.contrastive.out_dim;
}

int needle_model_embed(needle_model *m, const char *text, float *out, int dim, needle_error *err)
{
    nd_error_clear(err);
    if (!m || !text || !out) return nd_errorf(err, NEEDLE_EINVAL, "embed: model, text and out are required");
    int have = needle_model_embed_dim(m);
    if (have == 0) return nd_errorf(err, NEEDLE_EUNSUPPORTED, "embed: the model has no embedding head");
    if (dim != have)
        return nd_errorf(err, NEEDLE_EINVAL, "embed: out holds %d floats but the embedding has %d", dim, have);
    return nd_retrieval_embed_text(m->net, m->tok, text, out, err);
}
