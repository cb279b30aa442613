/* session.c - one conversation: tools, prompt rendering, KV reuse across
 * turns, and the turn itself (the per-model tables are in decode_tables.c, the
 * token loop in decode_loop.c).  The layout and the choices are described in
 * session.h and README.md, "Multi-turn layout". */
#include "agent/session.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/decode_loop.h"
#include "agent/envelope.h"
#include "core/error.h"
#include "core/utf8.h"
#include "model/heads.h"
#include "text/chat.h"

/* Grammar states recur (the start of each call, enum positions): cache masks. */
#define ND_MASK_CACHE_ENTRIES 256

static char *dup_string(const char *s)
{
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
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
    nd_json_write(&b, tools, nd_chat_json_ascii(s->model->layout));
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
        /* the retriever's texts are ASCII-escaped; the 2.0.15 layout renders raw UTF-8 */
        if (nd_chat_json_ascii(s->model->layout)) nd_buf_puts(&b, s->retr->texts[idx[i]]);
        else nd_json_write(&b, &s->tools->items[idx[i]], 0);
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
    int rc = nd_chat_prompt_ids(s->model->tok, s->model->layout, s->system, s->tools_compact, "", &v, err);
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

/* ------------------------------------------------------------------ the KV state and the prompt */

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

/* The new turn's ids go to s->pending (after any undecided leftovers). */
static int queue_turn(needle_session *s, int kind, const char *text, needle_error *err)
{
    nd_tokenizer *tok = s->model->tok;
    nd_ids v;
    nd_ids_init(&v);
    int rc = 0;
    if (!s->started) {
        if (s->prefix_len < 0 && (rc = compute_prefix_len(s, err)) != 0) goto done;
        if ((rc = nd_chat_prompt_ids(tok, s->model->layout, s->system, s->tools_compact, text, &v, err)) != 0) goto done;
        /* the pinned block must really be a prefix of this prompt */
        int sinks = s->prefix_len;
        if (sinks > (int)v.len || (sinks > 0 && v.data[sinks - 1] != s->model->id_tools_close)) sinks = 0;
        if ((rc = fresh_state(s, sinks, err)) != 0) goto done;
        s->pending.len = 0;
        rc = nd_ids_append(&s->pending, &v, err);
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

/* ------------------------------------------------------------------ the turn */

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
        nd_json_write(&b, j, nd_chat_json_ascii(s->model->layout));
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
    double t0 = nd_now_seconds();
    rc = nd_eval_pending(s, &cells_ok, err);
    double t_prefill = nd_now_seconds() - t0;
    if (rc) {
        s->started = 0; /* the cache may hold half a turn: start over next time */
        return rc;
    }
    s->started = 1;

    nd_turn_result r;
    memset(&r, 0, sizeof r);
    nd_buf_init(&r.reasoning);
    nd_buf_init(&r.calls);
    rc = nd_decode_turn(s, max_new, &cells_ok, &r, err);
    if (!rc && !r.fail_code) {
        /* evaluate the closers now: the next turn starts from a complete cache,
         * and the head sees the whole call */
        rc = nd_eval_pending(s, &cells_ok, err);
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
    /* the 2.0.15 layout writes "<think>\n R \n</think>": report R without the newlines */
    const char *reason = r.reasoning.data ? r.reasoning.data : "";
    size_t reason_len = r.reasoning.len;
    while (s->model->layout == NEEDLE_LAYOUT_2_0_15 && reason_len && strchr(" \t\r\n", *reason)) {
        reason++;
        reason_len--;
    }
    while (s->model->layout == NEEDLE_LAYOUT_2_0_15 && reason_len && strchr(" \t\r\n", reason[reason_len - 1]))
        reason_len--;
    nd_envelope env = {
        .success = !r.fail_code,
        .error = r.fail_code ? r.fail_msg : NULL,
        .error_code = r.fail_code,
        .calls = r.fail_code ? NULL : (r.calls.data ? r.calls.data : ""),
        .calls_len = r.calls.len,
        .reasoning = r.reasoning.data ? reason : NULL,
        .reasoning_len = reason_len,
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
