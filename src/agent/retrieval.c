/* retrieval.c - contrastive embeddings of tools and queries, top-k, the index round trip. */
#include "agent/retrieval.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/tool_index.h"
#include "core/buf.h"
#include "core/error.h"
#include "model/heads.h"
#include "model/params.h"

/* ------------------------------------------------------------------ embedding */

int nd_retrieval_cells_ids(const nd_model *net, const int *ids, int T, float **cells, int *n_cells,
                           needle_error *err)
{
    *cells = NULL;
    *n_cells = 0;
    const nd_config *c = &net->weights.cfg;
    if (T <= 0 || T > c->max_seq_len)
        return nd_errorf(err, NEEDLE_EINVAL, "retrieval: %d tokens to embed (1..%d)", T, c->max_seq_len);
    /* a window of T: every token sees every earlier one, as in training */
    nd_state_options so = {.window = T, .sinks = 0, .max_chunk = 0};
    nd_state *st = NULL;
    int rc = nd_state_create(net, &so, &st, err);
    if (rc) return rc;
    size_t n = (size_t)T * (size_t)(c->num_layers + 1);
    float *out = malloc(sizeof(float) * n * (size_t)c->d_model);
    uint8_t *want = calloc((size_t)T, 1); /* no logits: only the cells are read */
    if (!out || !want) rc = nd_errorf(err, NEEDLE_ENOMEM, "retrieval: out of memory for %d tokens", T);
    if (!rc) rc = nd_state_eval(st, ids, T, want, NULL, out, err);
    free(want);
    nd_state_free(st);
    if (rc) {
        free(out);
        return rc;
    }
    *cells = out;
    *n_cells = (int)n;
    return 0;
}

/* Many texts embedded one after another (a tool catalogue) share one state
 * and one cells buffer: the state is created once with a window of
 * max_seq_len and reset per text.  A text of T <= max_seq_len tokens sees
 * exactly what a state with a window of T shows it (every earlier token),
 * and the cache holds positions in order, so the embeddings are the same. */
typedef struct embedder {
    const nd_model *net;
    nd_state *st;
    float *cells;  /* [max_seq_len * (L+1) * d] */
    uint8_t *want; /* [max_seq_len] zeros: no logits */
    nd_ids ids;
} embedder;

static void embedder_free(embedder *e)
{
    nd_state_free(e->st);
    free(e->cells);
    free(e->want);
    nd_ids_free(&e->ids);
}

static int embedder_init(embedder *e, const nd_model *net, needle_error *err)
{
    memset(e, 0, sizeof *e);
    e->net = net;
    nd_ids_init(&e->ids);
    const nd_config *c = &net->weights.cfg;
    nd_state_options so = {.window = c->max_seq_len, .sinks = 0, .max_chunk = 0};
    int rc = nd_state_create(net, &so, &e->st, err);
    if (rc) return rc;
    e->cells = malloc(sizeof(float) * (size_t)c->max_seq_len * (size_t)(c->num_layers + 1) * (size_t)c->d_model);
    e->want = calloc((size_t)c->max_seq_len, 1);
    if (!e->cells || !e->want) {
        embedder_free(e);
        return nd_errorf(err, NEEDLE_ENOMEM, "retrieval: out of memory");
    }
    return 0;
}

/* The embedding of [BOS] + enc(text) (cut to max_seq_len tokens). */
static int embedder_text(embedder *e, nd_tokenizer *tok, const char *text, float *emb, needle_error *err)
{
    const nd_config *c = &e->net->weights.cfg;
    e->ids.len = 0;
    if (nd_ids_push(&e->ids, nd_tokenizer_bos(tok))) return nd_errorf(err, NEEDLE_ENOMEM, "retrieval: out of memory");
    int rc = nd_tokenizer_encode(tok, text, strlen(text), &e->ids, err);
    if (rc) return rc;
    int T = (int)e->ids.len > c->max_seq_len ? c->max_seq_len : (int)e->ids.len;
    nd_state_reset(e->st);
    if ((rc = nd_state_eval(e->st, e->ids.data, T, e->want, NULL, e->cells, err)) != 0) return rc;
    return nd_head_contrastive(e->net, e->cells, T * (c->num_layers + 1), emb, err);
}

int nd_retrieval_cells_text(const nd_model *net, nd_tokenizer *tok, const char *text, float **cells, int *n_cells,
                            needle_error *err)
{
    nd_ids v;
    nd_ids_init(&v);
    int rc = nd_ids_push(&v, nd_tokenizer_bos(tok)) ? nd_errorf(err, NEEDLE_ENOMEM, "retrieval: out of memory") : 0;
    if (!rc) rc = nd_tokenizer_encode(tok, text, strlen(text), &v, err);
    if (!rc) {
        int T = (int)v.len, cap = net->weights.cfg.max_seq_len;
        rc = nd_retrieval_cells_ids(net, v.data, T > cap ? cap : T, cells, n_cells, err);
    }
    nd_ids_free(&v);
    return rc;
}

int nd_retrieval_embed_ids(const nd_model *net, const int *ids, int T, float *emb, needle_error *err)
{
    if (!net->weights.contrastive.present)
        return nd_errorf(err, NEEDLE_EUNSUPPORTED, "retrieval: the model has no contrastive head");
    float *cells = NULL;
    int n = 0;
    int rc = nd_retrieval_cells_ids(net, ids, T, &cells, &n, err);
    if (!rc) rc = nd_head_contrastive(net, cells, n, emb, err);
    free(cells);
    return rc;
}

int nd_retrieval_embed_text(const nd_model *net, nd_tokenizer *tok, const char *text, float *emb, needle_error *err)
{
    if (!net->weights.contrastive.present)
        return nd_errorf(err, NEEDLE_EUNSUPPORTED, "retrieval: the model has no contrastive head");
    float *cells = NULL;
    int n = 0;
    int rc = nd_retrieval_cells_text(net, tok, text, &cells, &n, err);
    if (!rc) rc = nd_head_contrastive(net, cells, n, emb, err);
    free(cells);
    return rc;
}

/* ------------------------------------------------------------------ ranking */

static float dot(const float *a, const float *b, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return (float)s;
}

int nd_retrieval_top_k(const float *embs, int n, int dim, const float *query, int k, int *out)
{
    if (k > n) k = n;
    if (k <= 0) return 0;
    /* selection by repeated scans: n is a tool catalogue (tens), k is 5 */
    float *score = malloc(sizeof(float) * (size_t)n);
    char *taken = calloc((size_t)n, 1);
    if (!score || !taken) {
        free(score);
        free(taken);
        /* out of memory: fall back to the first k, which is still a valid selection */
        for (int i = 0; i < k; i++) out[i] = i;
        return k;
    }
    for (int i = 0; i < n; i++) score[i] = dot(embs + (size_t)i * dim, query, dim);
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!taken[i] && (best < 0 || score[i] > score[best])) best = i;
        taken[best] = 1;
    }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (taken[i]) out[m++] = i;
    free(score);
    free(taken);
    return m;
}

/* ------------------------------------------------------------------ fingerprints */

static uint64_t hash_floats(uint64_t h, const float *x, size_t n)
{
    return x ? nd_fnv1a64(x, sizeof(float) * n, h) : nd_fnv1a64("-", 1, h);
}

static uint64_t hash_int(uint64_t h, int64_t v) { return nd_fnv1a64(&v, sizeof v, h); }

/* A matrix by its shape, kind and `rows_sampled` evenly spaced dequantised rows. */
static uint64_t hash_matrix(uint64_t h, const nd_matrix *m, int rows_sampled)
{
    h = hash_int(h, m->kind);
    h = hash_int(h, m->rows);
    h = hash_int(h, m->cols);
    h = hash_int(h, m->kind == ND_MAT_CQ ? m->cq_bits : 32);
    if (m->rows <= 0 || m->cols <= 0) return h;
    if (m->kind == ND_MAT_F32 ? !m->f32 : !m->cq_idx) return h;
    float *row = malloc(sizeof(float) * (size_t)m->cols);
    if (!row) return h;
    int n = rows_sampled < m->rows ? rows_sampled : m->rows;
    for (int i = 0; i < n; i++) {
        int r = (int)((int64_t)i * m->rows / n);
        nd_matrix_dequant_rows(m, r, 1, row);
        h = hash_floats(h, row, (size_t)m->cols);
    }
    free(row);
    return h;
}

/* One instance of a body parameter: vectors and scalars whole, matrices by sampled rows. */
static uint64_t hash_param(uint64_t h, const nd_weights *w, const nd_param_desc *p, int index, int rows)
{
    const void *f = nd_param_field_c(p, nd_param_base_c(w, p, index));
    if (p->kind == ND_KIND_MATRIX) return hash_matrix(h, f, rows);
    if (p->kind == ND_KIND_SCALAR) return hash_floats(h, f, 1);
    return hash_floats(h, *(const float *const *)f, (size_t)nd_param_elems(p, &w->cfg, -1));
}

/* One layer, in the fingerprint's fixed order: the per-layer vectors, the
 * scalars, the stacked (mHC) vectors, then the matrices, each in table order. */
static uint64_t hash_layer(uint64_t h, const nd_weights *w, int l, int rows)
{
    for (int pass = 0; pass < 4; pass++)
        for (int i = 0; i < ND_P_COUNT; i++) {
            const nd_param_desc *p = &nd_params[i];
            if (p->scope != ND_SCOPE_LAYER || !nd_param_in_config(p, &w->cfg)) continue;
            int want = p->kind == ND_KIND_VECTOR ? (p->stacked ? 2 : 0) : p->kind == ND_KIND_SCALAR ? 1 : 3;
            if (want == pass) h = hash_param(h, w, p, l, rows);
        }
    return h;
}

uint64_t nd_retrieval_model_fingerprint(const nd_model *net, const nd_tokenizer *tok)
{
    const nd_weights *w = &net->weights;
    const nd_config *c = &w->cfg;
    uint64_t h = nd_fnv1a64("needle-retrieval-v1", 19, ND_FNV_OFFSET);
    char *cfg = nd_config_to_json(c);
    if (cfg) h = nd_fnv1a64(cfg, strlen(cfg), h);
    free(cfg);
    int ntok = nd_tokenizer_size(tok);
    h = hash_int(h, ntok);
    for (int id = 0; id < ntok; id++) {
        int len = 0;
        const char *p = nd_tokenizer_piece(tok, id, &len);
        if (p && len > 0) h = nd_fnv1a64(p, (size_t)len, h);
        h = hash_int(h, nd_tokenizer_type(tok, id));
    }
    const nd_head_weights *ch = &w->contrastive;
    nd_weights_heads_ready(w); /* the head's values go into the key */
    h = hash_int(h, ch->present);
    if (ch->present) {
        h = hash_int(h, ch->num_probes);
        h = hash_int(h, ch->out_dim);
        if (c->generation == 3) { /* the Needle 3 embedding head (model/params.def HEAD_* lines of ND_GEN_3) */
            size_t rk = (size_t)(c->num_layers + 1) * (size_t)ch->num_probes;
            h = hash_int(h, ch->num_queries);
            h = hash_matrix(h, &ch->layer_probes, ch->layer_probes.rows);
            h = hash_floats(h, ch->gain, rk);
            h = hash_matrix(h, &ch->query, ch->query.rows);
            h = hash_floats(h, ch->row_bias, rk * (size_t)ch->num_queries);
            h = hash_matrix(h, &ch->pool_proj, ch->pool_proj.rows);
        } else {
            h = hash_floats(h, ch->probes, (size_t)ch->num_probes * c->d_model);
            h = hash_matrix(h, &ch->proj, ch->proj.rows); /* every row: the head is small */
        }
    }
    const int S = 4; /* rows sampled per body matrix */
    /* the body, walking model/params.def: global tensors where they stand,
     * all layers at the first layer line, all sites at the first site line */
    for (int i = 0; i < ND_P_COUNT; i++) {
        const nd_param_desc *p = &nd_params[i];
        if (!nd_param_in_config(p, c) || p->scope == ND_SCOPE_HEAD) continue;
        if (p->scope == ND_SCOPE_GLOBAL) h = hash_param(h, w, p, 0, S);
        if (p->scope == ND_SCOPE_LAYER && (i == 0 || nd_params[i - 1].scope != ND_SCOPE_LAYER) && w->layers)
            for (int l = 0; l < c->num_layers; l++) h = hash_layer(h, w, l, S);
        if (p->scope == ND_SCOPE_SITE && (i == 0 || nd_params[i - 1].scope != ND_SCOPE_SITE))
            for (int s = 0; s < c->num_sites; s++) {
                h = hash_int(h, w->sites[s].layer);
                for (int k = 0; k < ND_P_COUNT; k++)
                    if (nd_params[k].scope == ND_SCOPE_SITE && nd_param_in_config(&nd_params[k], c))
                        h = hash_param(h, w, &nd_params[k], s, S);
            }
    }
    return h;
}

uint64_t nd_retrieval_text_key(const char *text, size_t len)
{
    return nd_fnv1a64(text, len, nd_fnv1a64("tool-v1", 7, ND_FNV_OFFSET));
}

/* ------------------------------------------------------------------ the retriever */

void nd_retriever_free(nd_retriever *r)
{
    if (!r) return;
    for (int i = 0; r->texts && i < r->n_tools; i++) free(r->texts[i]);
    free(r->texts);
    free(r->emb);
    free(r);
}

/* Load the index when it is usable for this model; otherwise say why in
 * r->warning and leave ix empty (to be rebuilt). */
static void load_index(nd_retriever *r, const char *path, uint64_t model_fp, nd_tool_index *ix)
{
    nd_tool_index_init(ix, model_fp, r->dim);
    if (access(path, F_OK) != 0) return; /* first use: nothing to warn about */
    needle_error e = {0};
    nd_tool_index got;
    if (nd_tool_index_read(path, &got, &e) != 0) {
        snprintf(r->warning, sizeof r->warning, "tool index %s is unusable (%s): rebuilt", path, e.message);
        return;
    }
    if (got.model_fp != model_fp || got.dim != r->dim) {
        snprintf(r->warning, sizeof r->warning,
                 "tool index %s was built for another model (fingerprint %016llx, width %d): rebuilt", path,
                 (unsigned long long)got.model_fp, got.dim);
        nd_tool_index_free(&got);
        return;
    }
    *ix = got;
}

int nd_retriever_build(const nd_model *net, nd_tokenizer *tok, const nd_json *tools, const char *index_path,
                       nd_retriever **out, needle_error *err)
{
    *out = NULL;
    const nd_head_weights *ch = &net->weights.contrastive;
    if (!ch->present) return nd_errorf(err, NEEDLE_EUNSUPPORTED, "retrieval: the model has no contrastive head");
    if (!tools || tools->type != ND_JSON_ARRAY) return nd_errorf(err, NEEDLE_EINVAL, "retrieval: tools is not an array");
    if (ch->out_dim <= 0 || ch->out_dim > ND_TOOL_INDEX_MAX_DIM)
        return nd_errorf(err, NEEDLE_EFORMAT, "retrieval: contrastive width %d out of range", ch->out_dim);
    nd_retriever *r = calloc(1, sizeof *r);
    if (!r) return nd_errorf(err, NEEDLE_ENOMEM, "retrieval: out of memory");
    r->n_tools = (int)tools->count;
    r->dim = ch->out_dim;
    r->emb = calloc((size_t)r->n_tools * (size_t)r->dim + 1, sizeof(float));
    r->texts = calloc((size_t)r->n_tools + 1, sizeof(char *));
    int rc = (!r->emb || !r->texts) ? nd_errorf(err, NEEDLE_ENOMEM, "retrieval: out of memory") : 0;
    for (int i = 0; i < r->n_tools && !rc; i++) {
        nd_buf b;
        nd_buf_init(&b);
        nd_json_write(&b, &tools->items[i], 1);
        if (b.oom) {
            nd_buf_free(&b);
            rc = nd_errorf(err, NEEDLE_ENOMEM, "retrieval: out of memory");
        } else {
            r->texts[i] = nd_buf_take(&b);
        }
    }
    if (rc) {
        nd_retriever_free(r);
        return rc;
    }

    uint64_t model_fp = index_path ? nd_retrieval_model_fingerprint(net, tok) : 0;
    nd_tool_index old;
    nd_tool_index_init(&old, model_fp, r->dim);
    if (index_path) load_index(r, index_path, model_fp, &old);
    int file_was_good = index_path && !r->warning[0] && access(index_path, F_OK) == 0;

    embedder em;
    int have_em = 0;
    for (int i = 0; i < r->n_tools && !rc; i++) {
        float *e = r->emb + (size_t)i * r->dim;
        const float *hit = nd_tool_index_find(&old, nd_retrieval_text_key(r->texts[i], strlen(r->texts[i])));
        if (hit) {
            memcpy(e, hit, sizeof(float) * (size_t)r->dim);
        } else {
            if (!have_em && (rc = embedder_init(&em, net, err)) != 0) break;
            have_em = 1;
            rc = embedder_text(&em, tok, r->texts[i], e, err);
            r->embedded++;
        }
    }
    if (have_em) embedder_free(&em);

    /* write when anything was new or the file was bad: the current tools first,
     * then earlier entries (other tool sets) while there is room */
    if (!rc && index_path && (r->embedded > 0 || !file_was_good)) {
        nd_tool_index ix;
        nd_tool_index_init(&ix, model_fp, r->dim);
        needle_error e = {0};
        int wrc = 0;
        for (int i = 0; i < r->n_tools && !wrc; i++) {
            uint64_t key = nd_retrieval_text_key(r->texts[i], strlen(r->texts[i]));
            if (!nd_tool_index_find(&ix, key)) wrc = nd_tool_index_add(&ix, key, r->emb + (size_t)i * r->dim, &e);
        }
        for (int i = 0; i < old.n && !wrc && ix.n < ND_TOOL_INDEX_MAX_ENTRIES; i++)
            if (!nd_tool_index_find(&ix, old.keys[i]))
                wrc = nd_tool_index_add(&ix, old.keys[i], old.emb + (size_t)i * r->dim, &e);
        if (!wrc) wrc = nd_tool_index_write(index_path, &ix, &e);
        if (wrc) {
            size_t used = strlen(r->warning);
            snprintf(r->warning + used, sizeof r->warning - used, "%stool index not saved: %s", used ? "; " : "",
                     e.message);
        } else {
            r->index_written = 1;
        }
        nd_tool_index_free(&ix);
    }
    nd_tool_index_free(&old);
    if (rc) {
        nd_retriever_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

int nd_retriever_select(const nd_retriever *r, const nd_model *net, nd_tokenizer *tok, const char *query, int k,
                        int *out, needle_error *err)
{
    float *q = malloc(sizeof(float) * (size_t)r->dim);
    if (!q) return nd_errorf(err, NEEDLE_ENOMEM, "retrieval: out of memory");
    int rc = nd_retrieval_embed_text(net, tok, query, q, err);
    if (!rc) rc = nd_retrieval_top_k(r->emb, r->n_tools, r->dim, q, k, out);
    free(q);
    return rc;
}
