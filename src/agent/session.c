/* session.c - one conversation: prompt rendering, KV reuse, the decoding loop.
 * (The layout and the choices are described in session.h and README.md,
 * "Multi-turn layout".) */
#include "agent/session.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/envelope.h"
#include "agent/repeat_guard.h"
#include "core/error.h"
#include "core/utf8.h"
#include "model/heads.h"
#include "text/chat.h"

/* The head cells of one turn are kept for the confidence head; past this
 * many floats (64 MiB) the head is skipped for that turn rather than let a
 * very long prompt grow memory without bound. */
#define ND_MAX_CELL_FLOATS ((size_t)16 << 20)
/* Grammar states recur (the start of each call, enum positions): cache masks. */
#define ND_MASK_CACHE_ENTRIES 256

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *dup_string(const char *s)
{
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

/* ------------------------------------------------------------------ model tables */

static int marker_id(const nd_tokenizer *t, const char *text, needle_error *err)
{
    int id = nd_tokenizer_piece_id(t, text, strlen(text));
    if (id < 0 || nd_tokenizer_type(t, id) != ND_PIECE_MARKER)
        return nd_errorf(err, NEEDLE_EFORMAT, "tokenizer: the chat marker %s is missing (not a Needle vocabulary)",
                         text);
    return id;
}

static int index_of(const nd_ids *v, size_t from, int id)
{
    for (size_t i = from; i < v->len; i++)
        if (v->data[i] == id) return (int)i;
    return -1;
}

static int take_forced(nd_forced *f, const nd_ids *v, int from, int to_incl, needle_error *err)
{
    if (from < 0 || to_incl < from || to_incl - from + 1 > ND_MAX_FORCED)
        return nd_errorf(err, NEEDLE_EFORMAT, "tokenizer: unexpected encoding of the target template");
    f->n = to_incl - from + 1;
    memcpy(f->ids, v->data + from, sizeof(int) * (size_t)f->n);
    return 0;
}

/* Find the fixed parts of the target exactly as training encodes them: encode
 * a template target the way nd_chat_build_ids does (on its own, so it starts
 * with the dummy-prefix piece) and cut it at the markers. */
static int derive_forced(needle_model *m, needle_error *err)
{
    int think_open = marker_id(m->tok, "<think>", err);
    if (think_open < 0) return think_open;
    int think_close = marker_id(m->tok, "</think>", err);
    if (think_close < 0) return think_close;
    int call_open = marker_id(m->tok, "<tool_call>", err);
    if (call_open < 0) return call_open;
    int call_close = marker_id(m->tok, "</tool_call>", err);
    if (call_close < 0) return call_close;
    int im_end = marker_id(m->tok, "<|im_end|>", err);
    if (im_end < 0) return im_end;
    int tools_close = marker_id(m->tok, "</tools>", err);
    if (tools_close < 0) return tools_close;

    nd_buf b;
    nd_buf_init(&b);
    nd_chat_render_target(&b, "", "[]");
    nd_ids v;
    nd_ids_init(&v);
    int rc = b.oom ? nd_errorf(err, NEEDLE_ENOMEM, "agent: out of memory")
                   : nd_tokenizer_encode(m->tok, b.data, b.len, &v, err);
    nd_buf_free(&b);
    if (!rc) {
        int i_open = index_of(&v, 0, think_open);
        int i_tc = i_open < 0 ? -1 : index_of(&v, (size_t)i_open, think_close);
        int i_call = i_tc < 0 ? -1 : index_of(&v, (size_t)i_tc, call_open);
        int i_close = i_call < 0 ? -1 : index_of(&v, (size_t)i_call, call_close);
        if (i_close < 0 || v.data[v.len - 1] != im_end)
            rc = nd_errorf(err, NEEDLE_EFORMAT, "tokenizer: unexpected encoding of the target template");
        if (!rc) rc = take_forced(&m->open_think, &v, 0, i_open, err);
        if (!rc) rc = take_forced(&m->think_to_call, &v, i_tc, i_call, err);
        if (!rc) rc = take_forced(&m->close_call, &v, i_close, (int)v.len - 1, err);
    }
    nd_ids_free(&v);
    m->id_think_close = think_close;
    m->id_tools_close = tools_close;
    return rc;
}

/* Ordinary tokens (normal pieces and bytes) are what free text and JSON are
 * made of; markers, control and unknown tokens never appear inside them. */
static int ordinary_token(const nd_tokenizer *t, int id)
{
    int ty = nd_tokenizer_type(t, id);
    return ty == ND_PIECE_NORMAL || ty == ND_PIECE_BYTE;
}

int nd_agent_model_prepare(needle_model *m, needle_error *err)
{
    m->vocab = m->net->weights.cfg.vocab_size;
    int ntok = nd_tokenizer_size(m->tok);
    if (ntok <= 0 || ntok > m->vocab)
        return nd_errorf(err, NEEDLE_EFORMAT, "model: the tokenizer has %d pieces but the network's vocabulary is %d",
                         ntok, m->vocab);
    int rc = derive_forced(m, err);
    if (rc) return rc;

    int *ids = malloc(sizeof(int) * (size_t)ntok);
    const char **bytes = malloc(sizeof(char *) * (size_t)ntok);
    size_t *lens = malloc(sizeof(size_t) * (size_t)ntok);
    m->reason_mask = calloc(nd_mask_words(m->vocab), sizeof(uint32_t));
    if (!ids || !bytes || !lens || !m->reason_mask) {
        rc = nd_errorf(err, NEEDLE_ENOMEM, "model: out of memory building the token tables");
        goto done;
    }
    size_t n = 0;
    for (int id = 0; id < ntok; id++) {
        int len = 0;
        const char *p = nd_tokenizer_token_bytes(m->tok, id, &len);
        if (!ordinary_token(m->tok, id) || !p || len <= 0) continue;
        ids[n] = id;
        bytes[n] = p;
        lens[n] = (size_t)len;
        n++;
        nd_mask_set(m->reason_mask, id);
    }
    nd_mask_set(m->reason_mask, m->id_think_close);
    rc = nd_token_trie_build(ids, bytes, lens, n, m->vocab, &m->trie, err);
done:
    free(ids);
    free(bytes);
    free(lens);
    return rc;
}

void nd_agent_model_release(needle_model *m)
{
    nd_token_trie_free(m->trie);
    free(m->reason_mask);
    m->trie = NULL;
    m->reason_mask = NULL;
}

/* ------------------------------------------------------------------ tools */

/* Parse the caller's tools strictly, compile the grammar, and keep the
 * training form of the array (compact, non-ASCII escaped, key order kept). */
static int load_tools(needle_session *s, const char *tools_json, needle_error *err)
{
    const char *text = tools_json ? tools_json : "[]";
    nd_json *tools = NULL;
    int rc = nd_json_parse(text, strlen(text), "tools", &tools, err);
    if (rc) return rc;
    if (tools->type != ND_JSON_ARRAY) {
        nd_json_free(tools);
        return nd_errorf(err, NEEDLE_ESCHEMA, "tools: expected a JSON array of tools at byte 0");
    }
    nd_grammar *g = NULL;
    if ((rc = nd_grammar_compile(tools, &g, err)) != 0) {
        nd_json_free(tools);
        return rc;
    }
    nd_mask_cache *mc = NULL;
    if ((rc = nd_mask_cache_new(g, s->model->trie, ND_MASK_CACHE_ENTRIES, &mc, err)) != 0) {
        nd_grammar_free(g);
        nd_json_free(tools);
        return rc;
    }
    nd_buf b;
    nd_buf_init(&b);
    nd_json_write(&b, tools, 1);
    if (b.oom) {
        nd_buf_free(&b);
        nd_mask_cache_free(mc);
        nd_grammar_free(g);
        nd_json_free(tools);
        return nd_errorf(err, NEEDLE_ENOMEM, "tools: out of memory");
    }
    /* more than five tools and a head to rank them with: embed them now
     * (or load them from the index), select per conversation */
    nd_retriever *retr = NULL;
    if (tools->count > ND_RETRIEVAL_TOP_K && s->model->net->weights.contrastive.present &&
        (rc = nd_retriever_build(s->model->net, s->model->tok, tools, s->tool_index_path, &retr, err)) != 0) {
        nd_buf_free(&b);
        nd_mask_cache_free(mc);
        nd_grammar_free(g);
        nd_json_free(tools);
        return rc;
    }
    /* only now replace the old tools: a failed call leaves the session as it was */
    nd_retriever_free(s->retr);
    s->retr = retr;
    s->n_selected = 0;
    nd_mask_cache_free(s->masks);
    nd_grammar_free(s->grammar);
    nd_json_free(s->tools);
    free(s->tools_compact);
    s->masks = mc;
    s->grammar = g;
    s->tools = tools;
    s->tools_compact = nd_buf_take(&b);
    s->started = 0;
    s->pending.len = 0;
    s->prefix_len = -1; /* recomputed at the next turn */
    return 0;
}

/* Rank the declared tools for the first request of a conversation and
 * render / compile only the top ones (in declared order), so an unselected
 * tool is neither shown to the model nor reachable by the grammar. */
static int select_tools(needle_session *s, const char *query, needle_error *err)
{
    int idx[ND_RETRIEVAL_TOP_K];
    int n = nd_retriever_select(s->retr, s->model->net, s->model->tok, query, ND_RETRIEVAL_TOP_K, idx, err);
    if (n < 0) return n;
    if (n == s->n_selected && !memcmp(idx, s->selected, sizeof(int) * (size_t)n)) return 0; /* same block */
    nd_grammar *g = NULL;
    int rc = nd_grammar_compile_subset(s->tools, idx, (size_t)n, &g, err);
    if (rc) return rc;
    nd_mask_cache *mc = NULL;
    if ((rc = nd_mask_cache_new(g, s->model->trie, ND_MASK_CACHE_ENTRIES, &mc, err)) != 0) {
        nd_grammar_free(g);
        return rc;
    }
    nd_buf b;
    nd_buf_init(&b);
    nd_buf_putc(&b, '[');
    for (int i = 0; i < n; i++) {
        if (i) nd_buf_putc(&b, ',');
        nd_buf_puts(&b, s->retr->texts[idx[i]]);
    }
    nd_buf_putc(&b, ']');
    if (b.oom) {
        nd_buf_free(&b);
        nd_mask_cache_free(mc);
        nd_grammar_free(g);
        return nd_errorf(err, NEEDLE_ENOMEM, "tools: out of memory");
    }
    nd_mask_cache_free(s->masks);
    nd_grammar_free(s->grammar);
    free(s->tools_compact);
    s->masks = mc;
    s->grammar = g;
    s->tools_compact = nd_buf_take(&b);
    memcpy(s->selected, idx, sizeof(int) * (size_t)n);
    s->n_selected = n;
    s->prefix_len = -1;
    return 0;
}

/* [BOS] + enc(system block + "<|im_start|>user\n<tools>" TOOLS "</tools>"):
 * the pinned prefix.  Markers split the text before encoding, so these ids
 * are exactly the first ids of every prompt whatever the query; we find them
 * as the prompt with an empty query cut after its last </tools>. */
static int compute_prefix_len(needle_session *s, needle_error *err)
{
    nd_ids v;
    nd_ids_init(&v);
    int rc = nd_chat_prompt_ids(s->model->tok, s->system, s->tools_compact, "", &v, err);
    if (!rc) {
        s->prefix_len = 0;
        for (size_t i = v.len; i-- > 0;)
            if (v.data[i] == s->model->id_tools_close) {
                s->prefix_len = (int)i + 1;
                break;
            }
    }
    nd_ids_free(&v);
    return rc;
}

/* ------------------------------------------------------------------ open/close */

int nd_session_open(needle_model *m, const needle_session_options *opt, needle_session **out, needle_error *err)
{
    *out = NULL;
    if (!m) return nd_errorf(err, NEEDLE_EINVAL, "session: no model");
    needle_session_options defaults;
    memset(&defaults, 0, sizeof defaults);
    if (!opt) opt = &defaults;
    if (opt->max_new_tokens < 0 || opt->max_reasoning_tokens < 0)
        return nd_errorf(err, NEEDLE_EINVAL, "session: max_new_tokens %d / max_reasoning_tokens %d must be >= 0",
                         opt->max_new_tokens, opt->max_reasoning_tokens);
    if (opt->system && nd_utf8_first_invalid(opt->system, strlen(opt->system)) != strlen(opt->system))
        return nd_errorf(err, NEEDLE_EUTF8, "system: invalid UTF-8 at byte %zu",
                         nd_utf8_first_invalid(opt->system, strlen(opt->system)));
    needle_session *s = calloc(1, sizeof *s);
    if (!s) return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory");
    s->model = m;
    s->max_new_tokens = opt->max_new_tokens > 0 ? opt->max_new_tokens : 256;
    s->max_reasoning_tokens = opt->max_reasoning_tokens > 0 ? opt->max_reasoning_tokens : 64;
    s->seed = opt->seed;
    s->prefix_len = -1;
    nd_ids_init(&s->pending);
    nd_ids_init(&s->turn_ids);
    int rc = nd_sampler_init(&s->sampler, m->vocab, opt->temperature, opt->top_p, opt->seed, err);
    if (rc) {
        free(s);
        return rc;
    }
    s->logits = malloc(sizeof(float) * (size_t)m->vocab);
    s->mask = malloc(sizeof(uint32_t) * nd_mask_words(m->vocab));
    if (!s->logits || !s->mask) rc = nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory");
    if (!rc && opt->system && opt->system[0] && !(s->system = dup_string(opt->system)))
        rc = nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory");
    if (!rc && opt->tool_index_path && opt->tool_index_path[0] &&
        !(s->tool_index_path = dup_string(opt->tool_index_path)))
        rc = nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory");
    if (!rc) rc = load_tools(s, opt->tools_json, err);
    if (rc) {
        nd_session_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void nd_session_free(needle_session *s)
{
    if (!s) return;
    nd_state_free(s->st);
    nd_mask_cache_free(s->masks);
    nd_grammar_free(s->grammar);
    nd_json_free(s->tools);
    free(s->tools_compact);
    nd_retriever_free(s->retr);
    free(s->tool_index_path);
    free(s->system);
    nd_sampler_free(&s->sampler);
    nd_ids_free(&s->pending);
    nd_ids_free(&s->turn_ids);
    free(s->logits);
    free(s->mask);
    free(s->cells);
    free(s);
}

int nd_session_set_tools(needle_session *s, const char *tools_json, needle_error *err)
{
    if (!s) return nd_errorf(err, NEEDLE_EINVAL, "session: NULL session");
    return load_tools(s, tools_json, err);
}

/* The KV cache is emptied and the prompt (tool block included) is evaluated
 * again at the next turn: the engine cannot truncate a cache back to the
 * sinks, because the engram history of the last positions would be lost. */
void nd_session_reset(needle_session *s)
{
    if (!s) return;
    s->started = 0;
    s->pending.len = 0;
    nd_sampler_reseed(&s->sampler, s->seed);
}

/* ------------------------------------------------------------------ evaluation */

/* Make sure the KV state exists with room for `sinks` pinned positions, and is empty. */
static int fresh_state(needle_session *s, int sinks, needle_error *err)
{
    if (s->st && sinks <= s->sinks_reserved) {
        nd_state_reset(s->st);
        return nd_state_set_sinks(s->st, sinks, err);
    }
    nd_state_free(s->st);
    s->st = NULL;
    nd_state_options so = {.window = s->model->window, .sinks = sinks, .max_chunk = 0};
    int rc = nd_state_create(s->model->net, &so, &s->st, err);
    if (rc) return rc;
    s->sinks_reserved = sinks;
    return 0;
}

static int append_ids(nd_ids *dst, const nd_ids *src, needle_error *err)
{
    for (size_t i = 0; i < src->len; i++)
        if (nd_ids_push(dst, src->data[i])) return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory");
    return 0;
}

/* Evaluate every pending token; s->logits receives the last one's row.
 * When the model has a confidence head, the cells are kept for it. */
static int eval_pending(needle_session *s, int *cells_ok, needle_error *err)
{
    int T = (int)s->pending.len;
    if (T == 0) return 0;
    float *cells = NULL;
    const nd_config *c = &s->model->net->weights.cfg;
    if (*cells_ok) {
        size_t per = (size_t)(c->num_layers + 1) * (size_t)c->d_model;
        size_t need = s->cells_len + (size_t)T * per;
        if (need > ND_MAX_CELL_FLOATS) {
            *cells_ok = 0;
        } else {
            if (need > s->cells_cap) {
                size_t cap = s->cells_cap ? s->cells_cap : per * 64;
                while (cap < need) cap *= 2;
                if (cap > ND_MAX_CELL_FLOATS) cap = ND_MAX_CELL_FLOATS;
                float *p = realloc(s->cells, cap * sizeof(float));
                if (!p) return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory for head cells");
                s->cells = p;
                s->cells_cap = cap;
            }
            cells = s->cells + s->cells_len;
            s->cells_len = need;
        }
    }
    int rc = nd_state_eval(s->st, s->pending.data, T, NULL, s->logits, cells, err);
    if (!rc) rc = append_ids(&s->turn_ids, &s->pending, err);
    s->pending.len = 0;
    return rc;
}

/* The new turn's ids go to s->pending (after any undecided leftovers). */
static int queue_turn(needle_session *s, int kind, const char *text, needle_error *err)
{
    nd_tokenizer *tok = s->model->tok;
    nd_ids v;
    nd_ids_init(&v);
    int rc = 0;
    if (!s->started) {
        if (s->prefix_len < 0 && (rc = compute_prefix_len(s, err)) != 0) goto done;
        if ((rc = nd_chat_prompt_ids(tok, s->system, s->tools_compact, text, &v, err)) != 0) goto done;
        /* the pinned block must really be a prefix of this prompt */
        int sinks = s->prefix_len;
        if (sinks > (int)v.len || (sinks > 0 && v.data[sinks - 1] != s->model->id_tools_close)) sinks = 0;
        if ((rc = fresh_state(s, sinks, err)) != 0) goto done;
        s->pending.len = 0;
        rc = append_ids(&s->pending, &v, err);
    } else if (kind == ND_TURN_TOOL_RESULT) {
        rc = nd_chat_append_tool_result(tok, text, &s->pending, err);
    } else {
        /* a further user turn: the same shape as a tool result, encoded on its own */
        nd_buf b;
        nd_buf_init(&b);
        nd_buf_puts(&b, "\n<|im_start|>user\n");
        nd_buf_puts(&b, text);
        nd_buf_puts(&b, "<|im_end|>\n<|im_start|>assistant\n");
        rc = b.oom ? nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory")
                   : nd_tokenizer_encode(tok, b.data, b.len, &s->pending, err);
        nd_buf_free(&b);
    }
done:
    nd_ids_free(&v);
    return rc;
}

/* ------------------------------------------------------------------ decoding */

enum { PH_OPEN, PH_REASON, PH_MID, PH_JSON, PH_CLOSE, PH_DONE };

typedef struct turn_result {
    int fail_code;
    char fail_msg[256];
    nd_buf reasoning, calls;
    double logp_sum;
    int logp_n;
    int generated;
    int loop_breaks; /* steps where the repeat guard banned a looping token */
    double t_decode, t_mask;
} turn_result;

static const nd_forced *forced_of(const needle_model *m, int phase)
{
    switch (phase) {
    case PH_OPEN: return &m->open_think;
    case PH_MID: return &m->think_to_call;
    case PH_CLOSE: return &m->close_call;
    default: return NULL;
    }
}

/* The unmasked greedy choice when the grammar accepts it from gs, else -1. */
static int greedy_if_accepted(needle_session *s, const nd_grammar_state *gs)
{
    const needle_model *m = s->model;
    int tok = nd_sampler_pick(&s->sampler, s->logits, NULL);
    if (tok < 0 || tok == m->id_think_close || !nd_mask_test(m->reason_mask, tok)) return -1; /* not ordinary */
    int len = 0;
    const char *bytes = nd_tokenizer_token_bytes(m->tok, tok, &len);
    if (!bytes || len <= 0) return -1;
    nd_grammar_state probe;
    nd_grammar_state_copy(&probe, gs);
    return nd_grammar_advance(s->grammar, &probe, bytes, (size_t)len) == 0 ? tok : -1;
}

static int decode_turn(needle_session *s, int max_new, int *cells_ok, turn_result *r, needle_error *err)
{
    const needle_model *m = s->model;
    nd_grammar_state gs;
    nd_grammar_start(s->grammar, &gs);
    int phase = PH_OPEN, fi = 0, reason_n = 0;
    /* leave room for the forced parts and at least one JSON token */
    int reason_cap = max_new - m->open_think.n - m->think_to_call.n - 1;
    if (reason_cap > s->max_reasoning_tokens) reason_cap = s->max_reasoning_tokens;
    if (reason_cap < 0) reason_cap = 0;
    double t0 = now_seconds();
    int32_t hist[ND_REPEAT_HISTORY]; /* the latest call-list ids, for the loop guard */
    int hn = 0;
    while (phase != PH_DONE) {
        /* the closers after a complete call list are protocol, not budget */
        if (phase != PH_CLOSE && r->generated >= max_new) {
            r->fail_code = NEEDLE_ELIMIT;
            snprintf(r->fail_msg, sizeof r->fail_msg,
                     "max_new_tokens (%d) reached before the call list was complete", max_new);
            break;
        }
        const nd_forced *f = forced_of(m, phase);
        int tok;
        if (f) {
            tok = f->ids[fi++];
        } else {
            int rc = eval_pending(s, cells_ok, err);
            if (rc) return rc;
            if (phase == PH_REASON) {
                tok = reason_n >= reason_cap ? m->id_think_close : nd_sampler_pick(&s->sampler, s->logits, m->reason_mask);
                if (tok < 0) tok = m->id_think_close; /* nothing usable: end the thought */
            } else { /* PH_JSON */
                double tm = now_seconds();
                int ban = nd_repeat_next(hist, hn); /* a token that would continue a loop, or -1 */
                /* greedy fast path: when the unmasked best token is one the
                 * grammar accepts, it is also the masked best (same lowest-id
                 * tie rule), and no mask is needed */
                tok = s->sampler.temperature <= 0.0f ? greedy_if_accepted(s, &gs) : -1;
                if (tok >= 0 && tok == ban) tok = -1;
                if (tok < 0) {
                    const uint32_t *mask = nd_mask_cache_get(s->masks, &gs);
                    if (!mask) return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory computing the token mask");
                    if (ban >= 0 && nd_mask_test(mask, ban)) { /* the grammar mask minus the looping token */
                        memcpy(s->mask, mask, sizeof(uint32_t) * nd_mask_words(m->vocab));
                        s->mask[ban >> 5] &= ~(1u << (ban & 31));
                        mask = s->mask;
                        r->loop_breaks++;
                    }
                    tok = nd_sampler_pick(&s->sampler, s->logits, mask);
                }
                r->t_mask += now_seconds() - tm;
                if (tok < 0) {
                    r->fail_code = NEEDLE_EUNSUPPORTED;
                    snprintf(r->fail_msg, sizeof r->fail_msg,
                             "no vocabulary token can continue the call list at byte %zu", r->calls.len);
                    break;
                }
                int len = 0;
                const char *bytes = nd_tokenizer_token_bytes(m->tok, tok, &len);
                if (nd_grammar_advance(s->grammar, &gs, bytes, (size_t)len) != 0) {
                    r->fail_code = NEEDLE_EFORMAT;
                    snprintf(r->fail_msg, sizeof r->fail_msg, "the grammar refused token %d it had allowed", tok);
                    break;
                }
                nd_buf_append(&r->calls, bytes, (size_t)len);
                if (hn == ND_REPEAT_HISTORY) memmove(hist, hist + 1, sizeof(int32_t) * --hn);
                hist[hn++] = tok;
                r->logp_sum += nd_log_softmax_at(s->logits, m->vocab, tok);
                r->logp_n++;
            }
        }
        if (nd_ids_push(&s->pending, tok)) return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory");
        r->generated++;
        if (phase == PH_REASON) {
            if (tok == m->id_think_close) {
                phase = PH_MID;
                fi = 1; /* think_to_call starts with the </think> just chosen */
            } else {
                int len = 0;
                const char *bytes = nd_tokenizer_token_bytes(m->tok, tok, &len);
                nd_buf_append(&r->reasoning, bytes, (size_t)len);
                reason_n++;
            }
        }
        if (f && fi >= f->n) {
            phase = phase == PH_OPEN ? PH_REASON : phase == PH_MID ? PH_JSON : PH_DONE;
            fi = 0;
        }
        if (phase == PH_JSON && nd_grammar_complete(s->grammar, &gs)) {
            phase = PH_CLOSE;
            fi = 0;
        }
    }
    r->t_decode = now_seconds() - t0;
    if (r->reasoning.oom || r->calls.oom) return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory");
    return 0;
}

static int validate_text(const char *text, const char *what, needle_error *err)
{
    if (!text) return nd_errorf(err, NEEDLE_EINVAL, "%s: NULL text", what);
    size_t n = strlen(text), bad = nd_utf8_first_invalid(text, n);
    if (bad != n) return nd_errorf(err, NEEDLE_EUTF8, "%s: invalid UTF-8 at byte %zu", what, bad);
    return 0;
}

int nd_session_turn(needle_session *s, int kind, const char *text, int max_new_tokens, char **envelope,
                    needle_error *err)
{
    if (envelope) *envelope = NULL;
    if (!s || !envelope) return nd_errorf(err, NEEDLE_EINVAL, "session: NULL argument");
    const char *what = kind == ND_TURN_TOOL_RESULT ? "tool result" : "user text";
    int rc = validate_text(text, what, err);
    if (rc) return rc;
    char *result_compact = NULL;
    if (kind == ND_TURN_TOOL_RESULT) {
        if (!s->started)
            return nd_errorf(err, NEEDLE_ESTATE, "tool result: no call is waiting for a result (send a request first)");
        nd_json *j = NULL;
        if ((rc = nd_json_parse(text, strlen(text), "tool result", &j, err)) != 0) return rc;
        nd_buf b;
        nd_buf_init(&b);
        nd_json_write(&b, j, 1);
        nd_json_free(j);
        if (b.oom) {
            nd_buf_free(&b);
            return nd_errorf(err, NEEDLE_ENOMEM, "tool result: out of memory");
        }
        result_compact = nd_buf_take(&b);
        text = result_compact;
    }
    int max_new = max_new_tokens > 0 ? max_new_tokens : s->max_new_tokens;
    int has_head = s->model->net->weights.confidence.present;
    int cells_ok = has_head || s->keep_cells;
    s->cells_len = 0;
    s->turn_ids.len = 0;

    /* a new conversation ranks the tools for its first request */
    if (!s->started && s->retr && (rc = select_tools(s, text, err)) != 0) return rc;

    /* prefill: the new turn's ids */
    size_t keep_pending = s->pending.len;
    rc = queue_turn(s, kind, text, err);
    free(result_compact);
    if (rc) {
        s->pending.len = s->started ? keep_pending : 0;
        return rc;
    }
    int n_prefill = (int)s->pending.len;
    double t0 = now_seconds();
    rc = eval_pending(s, &cells_ok, err);
    double t_prefill = now_seconds() - t0;
    if (rc) {
        s->started = 0; /* the cache may hold half a turn: start over next time */
        return rc;
    }
    s->started = 1;

    turn_result r;
    memset(&r, 0, sizeof r);
    nd_buf_init(&r.reasoning);
    nd_buf_init(&r.calls);
    rc = decode_turn(s, max_new, &cells_ok, &r, err);
    if (!rc && !r.fail_code) {
        /* evaluate the closers now: the next turn starts from a complete cache,
         * and the head sees the whole call */
        rc = eval_pending(s, &cells_ok, err);
    }
    if (rc) {
        s->started = 0;
        s->pending.len = 0;
        nd_buf_free(&r.reasoning);
        nd_buf_free(&r.calls);
        return rc;
    }
    double confidence = NAN;
    if (!r.fail_code) {
        confidence = r.logp_n > 0 ? exp(r.logp_sum / r.logp_n) : NAN;
        if (has_head && cells_ok && s->cells_len > 0) {
            const nd_config *c = &s->model->net->weights.cfg;
            int n_cells = (int)(s->cells_len / (size_t)c->d_model);
            float logit = 0.0f;
            needle_error herr;
            if (nd_head_confidence(s->model->net, s->cells, n_cells, &logit, &herr) == 0) {
                double p = 1.0 / (1.0 + exp(-(double)logit));
                if (isnan(confidence) || p < confidence) confidence = p;
            }
        }
    } else {
        /* a turn that ran out of budget leaves a half-written assistant turn in
         * the cache: the conversation ends here and the next send starts afresh */
        s->started = 0;
        s->pending.len = 0;
    }
    nd_envelope env = {
        .success = !r.fail_code,
        .error = r.fail_code ? r.fail_msg : NULL,
        .error_code = r.fail_code,
        .calls = r.fail_code ? NULL : (r.calls.data ? r.calls.data : ""),
        .calls_len = r.calls.len,
        .reasoning = r.reasoning.data,
        .reasoning_len = r.reasoning.len,
        .confidence = confidence,
        .prefill_tps = t_prefill > 0 ? n_prefill / t_prefill : 0.0,
        .decode_tps = r.t_decode > 0 ? r.generated / r.t_decode : 0.0,
        .peak_ram_mb = nd_peak_ram_mb(),
    };
    s->last_mask_seconds = r.t_mask;
    s->last_decode_seconds = r.t_decode;
    s->last_new_tokens = r.generated;
    s->last_loop_breaks = r.loop_breaks;
    s->last_call_logp_mean = r.logp_n > 0 ? r.logp_sum / r.logp_n : NAN;
    nd_buf out;
    nd_buf_init(&out);
    nd_envelope_write(&out, &env);
    nd_buf_free(&r.reasoning);
    nd_buf_free(&r.calls);
    if (out.oom) {
        nd_buf_free(&out);
        return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory writing the envelope");
    }
    *envelope = nd_buf_take(&out);
    return 0;
}
