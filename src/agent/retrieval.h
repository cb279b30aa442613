/* retrieval.h - choosing which declared tools the model sees (SPEC 4 "Heads", SPEC 10).
 *
 * With more than ND_RETRIEVAL_TOP_K declared tools, only the top five by the
 * contrastive head are rendered in the tools block and compiled into the
 * grammar, so an unselected tool can neither be read nor called.
 *
 * What is embedded: a text t becomes [BOS] + enc(t) (the same encoding as a
 * prompt: dummy prefix, markers atomic); the model runs over it with full
 * attention and the contrastive head pools the cells of every token into its
 * L2-normalised output (contrastive_dim floats).  A tool's text is its
 * compact JSON exactly as it appears in the tools block (separators "," and
 * ":", non-ASCII as \uXXXX, key order kept); a query's text is the user's
 * text as sent.  Texts longer than max_seq_len tokens keep their first
 * max_seq_len tokens.  Score = dot product of the two unit vectors.
 *
 * A model without the contrastive head renders every tool (nothing to rank
 * with); the session decides that, this module only ranks. */
#ifndef ND_RETRIEVAL_H
#define ND_RETRIEVAL_H

#include <stdint.h>

#include "core/json.h"
#include "model/model.h"
#include "needle.h"
#include "text/tokenizer.h"

#define ND_RETRIEVAL_TOP_K 5

/* The head cells (SPEC 4) of ids[0..T) / of [BOS] + enc(text), run with full
 * attention: *cells is malloc'd, n_cells = T*(L+1) vectors of d_model. */
int nd_retrieval_cells_ids(const nd_model *net, const int *ids, int T, float **cells, int *n_cells,
                           needle_error *err);
int nd_retrieval_cells_text(const nd_model *net, nd_tokenizer *tok, const char *text, float **cells, int *n_cells,
                            needle_error *err);
/* The contrastive embedding of ids[0..T) (dim = contrastive head's out_dim). */
int nd_retrieval_embed_ids(const nd_model *net, const int *ids, int T, float *emb, needle_error *err);
/* The embedding of [BOS] + enc(text). */
int nd_retrieval_embed_text(const nd_model *net, nd_tokenizer *tok, const char *text, float *emb, needle_error *err);

/* The indices of the k best-scoring of n embeddings (rows of dim floats)
 * against query, returned in ascending index order (= declared order); ties
 * go to the lower index.  Returns how many were written (min(k, n)). */
int nd_retrieval_top_k(const float *embs, int n, int dim, const float *query, int k, int *out);

/* A fingerprint of everything an embedding depends on: the config, the
 * tokenizer's pieces, the contrastive head in full, every small vector of the
 * body in full and a few evenly spaced rows of every matrix.  Sampling keeps
 * it to milliseconds on a 45M-parameter model; any fine-tune changes the
 * sampled rows too. */
uint64_t nd_retrieval_model_fingerprint(const nd_model *net, const nd_tokenizer *tok);
/* The key of one tool in the index: a fingerprint of its compact JSON. */
uint64_t nd_retrieval_text_key(const char *text, size_t len);

/* Embeddings of a session's declared tools. */
typedef struct nd_retriever {
    int n_tools, dim;
    float *emb;        /* [n_tools, dim] */
    char **texts;      /* each tool's compact JSON (what the tools block renders) */
    int embedded;      /* tools the model had to embed (the rest came from the index file) */
    int index_written; /* 1 when the index file was (re)written */
    char warning[600]; /* non-empty when the index file was unusable (and rebuilt) or could not be written */
} nd_retriever;

/* Embed every item of the tools array, reusing the index at index_path
 * (NULL: none).  A missing index is created; a corrupt, truncated or foreign
 * one (another model) is rebuilt and noted in ->warning; an index that cannot
 * be written is also only a warning.  Errors are the model's (memory). */
int nd_retriever_build(const nd_model *net, nd_tokenizer *tok, const nd_json *tools, const char *index_path,
                       nd_retriever **out, needle_error *err);
void nd_retriever_free(nd_retriever *r);
/* Rank the tools for a query: out receives up to k indices in declared order. */
int nd_retriever_select(const nd_retriever *r, const nd_model *net, nd_tokenizer *tok, const char *query, int k,
                        int *out, needle_error *err);

#endif
