/* session.c - one conversation: tools, prompt rendering, KV reuse across
 * turns, and the turn itself (the per-model tables are in decode_tables.c, the
 * token loop in decode_loop.c).  The layout and the choices are described in
 * session.h and README.md, "Multi-turn layout". */
#include "agent/session.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/ask_again.h"
#include "agent/lean_call.h"
#include "agent/message_frame.h"
#include "agent/clock_time.h"
#include "agent/decode_loop.h"
#include "agent/envelope.h"
#include "agent/grounding.h"
#include "agent/message_span.h"
#include "agent/name_span.h"
#include "agent/place_span.h"
#include "agent/range_guard.h"
#include "agent/repair.h"
#include "agent/said_choice.h"
#include "agent/said_colour.h"
#include "agent/said_date.h"
#include "agent/said_flag.h"
#include "agent/said_label.h"
#include "agent/said_list.h"
#include "agent/said_number.h"
#include "agent/said_quantity.h"
#include "agent/said_unit.h"
#include "agent/reroute.h"
#include "agent/split_turn.h"
#include "agent/unused_number.h"
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

/* The whole tools array is pinned: it must fit the context with the system text. */
static int check_whole_block(needle_session *s, const nd_json *tools, int *prefix_len, needle_error *err)
{
    nd_buf b;
    nd_buf_init(&b);
    nd_json_write(&b, tools, 1);
    int rc = b.oom ? nd_errorf(err, NEEDLE_ENOMEM, "tools: out of memory")
                   : nd_budget_check_tools(s->model, &s->budget, s->system, b.data, NULL, 0, prefix_len, err);
    nd_buf_free(&b);
    return rc;
}

/* With retrieval each declared tool must fit alone (a tool that can never be
 * shown is an error now, not a surprise at some later request).  A tool of no
 * more bytes than the room left fits without counting: a token covers at
 * least one byte of the block. */
static int check_each_tool(needle_session *s, const nd_json *tools, needle_error *err)
{
    const nd_budget *bg = &s->budget;
    int room = bg->context - ND_REQUEST_RESERVE - bg->frame - bg->system;
    nd_buf b;
    nd_buf_init(&b);
    int rc = 0;
    for (size_t i = 0; i < tools->count && !rc; i++) {
        nd_buf_reset(&b);
        nd_buf_putc(&b, '[');
        nd_json_write(&b, &tools->items[i], 1);
        nd_buf_putc(&b, ']');
        if (b.oom) {
            rc = nd_errorf(err, NEEDLE_ENOMEM, "tools: out of memory");
            break;
        }
        if (b.len <= (size_t)(room > 0 ? room : 0)) continue;
        const nd_json *name = tools->items[i].type == ND_JSON_OBJECT ? nd_json_get(&tools->items[i], "name") : NULL;
        char what[300];
        if (name && name->type == ND_JSON_STRING)
            snprintf(what, sizeof what, "tool %zu (\"%.200s%s\") alone", i, name->str, name->len > 200 ? "..." : "");
        else
            snprintf(what, sizeof what, "tool %zu alone", i);
        int P = 0;
        rc = nd_budget_check_tools(s->model, bg, s->system, b.data, what, 0, &P, err);
    }
    nd_buf_free(&b);
    return rc;
}

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
    /* more than five tools and a head to rank them with: retrieval pins only
     * the selected ones, so each tool must fit alone; otherwise the whole
     * block is pinned and must fit (context_budget.h).  After the schemas:
     * a broken schema is reported as such whatever its length. */
    int use_retrieval = tools->count > ND_RETRIEVAL_TOP_K && s->model->net->weights.contrastive.present;
    int prefix_len = -1;
    if ((rc = use_retrieval ? check_each_tool(s, tools, err) : check_whole_block(s, tools, &prefix_len, err)) != 0) {
        nd_grammar_free(g);
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
    if (use_retrieval &&
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
    s->prefix_len = prefix_len; /* with retrieval: known once the tools are selected */
    return 0;
}

/* Rank the declared tools for the first request of a conversation and
 * render / compile only the top ones (in declared order), so an unselected
 * tool is neither shown to the model nor reachable by the grammar. */
static int select_tools(needle_session *s, const char *query, needle_error *err)
{
    int idx[ND_RETRIEVAL_TOP_K];
    const nd_retriever *r = s->retr;
    float *q = malloc(sizeof(float) * (size_t)r->dim);
    if (!q) return nd_errorf(err, NEEDLE_ENOMEM, "retrieval: out of memory");
    int rc = nd_retrieval_embed_text(s->model->net, s->model->tok, query, q, err);
    if (rc) {
        free(q);
        return rc;
    }
    /* the best ND_RETRIEVAL_TOP_K, fewer while their block does not fit the
     * context (each tool fits alone: load_tools checked) */
    nd_buf b;
    nd_buf_init(&b);
    int n = 0, prefix_len = -1;
    for (int k = ND_RETRIEVAL_TOP_K; k >= 1; k--) {
        n = nd_retrieval_top_k(r->emb, r->n_tools, r->dim, q, k, idx);
        nd_buf_reset(&b);
        nd_buf_putc(&b, '[');
        for (int i = 0; i < n; i++) {
            if (i) nd_buf_putc(&b, ',');
            /* the retriever's texts are ASCII-escaped; the 2.0.15 layout renders raw UTF-8 */
            if (nd_chat_json_ascii(s->model->layout)) nd_buf_puts(&b, r->texts[idx[i]]);
            else nd_json_write(&b, &s->tools->items[idx[i]], 0);
        }
        nd_buf_putc(&b, ']');
        if (b.oom) {
            rc = nd_errorf(err, NEEDLE_ENOMEM, "tools: out of memory");
            break;
        }
        rc = nd_budget_check_tools(s->model, &s->budget, s->system, b.data, NULL, k > 1, &prefix_len, err);
        if (rc != NEEDLE_ELIMIT || k == 1) break;
    }
    free(q);
    if (rc) {
        nd_buf_free(&b);
        return rc;
    }
    if (n == s->n_selected && !memcmp(idx, s->selected, sizeof(int) * (size_t)n)) { /* same block */
        nd_buf_free(&b);
        s->prefix_len = prefix_len;
        return 0;
    }
    nd_grammar *g = NULL;
    if ((rc = nd_grammar_compile_subset(s->tools, idx, (size_t)n, &g, err)) != 0) {
        nd_buf_free(&b);
        return rc;
    }
    nd_mask_cache *mc = NULL;
    if ((rc = nd_mask_cache_new(g, s->model->trie, ND_MASK_CACHE_ENTRIES, &mc, err)) != 0) {
        nd_buf_free(&b);
        nd_grammar_free(g);
        return rc;
    }
    nd_mask_cache_free(s->masks);
    nd_grammar_free(s->grammar);
    free(s->tools_compact);
    s->masks = mc;
    s->grammar = g;
    s->tools_compact = nd_buf_take(&b);
    memcpy(s->selected, idx, sizeof(int) * (size_t)n);
    s->n_selected = n;
    s->prefix_len = prefix_len;
    return 0;
}

/* [BOS] + enc(system block + "<|im_start|>user\n<tools>" TOOLS "</tools>"):
 * the pinned prefix.  Markers split the text before encoding, so these ids
 * are exactly the first ids of every prompt whatever the query; we find them
 * as the prompt with an empty query cut after its last </tools>. */
static int compute_prefix_len(needle_session *s, needle_error *err)
{
    return nd_budget_prefix_len(s->model, s->system, s->tools_compact, &s->prefix_len, err);
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
    if (opt->split_requests < -1 || opt->split_requests > 1)
        return nd_errorf(err, NEEDLE_EINVAL, "session: split_requests %d must be -1 (off), 0 (default) or 1 (on)",
                         opt->split_requests);
    if (opt->ask_again < -1 || opt->ask_again > 1)
        return nd_errorf(err, NEEDLE_EINVAL, "session: ask_again %d must be -1 (off), 0 (default) or 1 (on)",
                         opt->ask_again);
    if (opt->grounded_decoding < -1 || opt->grounded_decoding > 1)
        return nd_errorf(err, NEEDLE_EINVAL, "session: grounded_decoding %d must be -1 (off), 0 (default) or 1 (on)",
                         opt->grounded_decoding);
    needle_session *s = calloc(1, sizeof *s);
    if (!s) return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory");
    s->model = m;
    s->max_new_tokens = opt->max_new_tokens > 0 ? opt->max_new_tokens : 256;
    s->max_reasoning_tokens = opt->max_reasoning_tokens > 0 ? opt->max_reasoning_tokens : 64;
    s->seed = opt->seed;
    s->strict = opt->strict != 0;
    s->split = opt->split_requests >= 0 ? ND_SPLIT_DEPTH : 0;
    s->ask_again = opt->ask_again >= 0;
    s->message_frame = s->ask_again;
    s->lean_call = s->ask_again ? ND_LEAN_CALL_MIN : 0.0;
    /* strict sessions default to free values: their withholding relies on the
     * ungrounded-value flags that copying would make rare (docs/envelope.md) */
    s->grounded_chosen = opt->grounded_decoding != 0;
    if (opt->grounded_decoding != 0) s->grounded = opt->grounded_decoding > 0;
    else s->grounded = s->strict ? 0 : NEEDLE_GROUNDED_DECODING_DEFAULT;
    nd_buf_init(&s->heard);
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
    if (!rc) rc = nd_budget_init(m, s->system, &s->budget, err);
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
    nd_buf_free(&s->heard);
    free(s->last_request);
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

/* A further user turn: the same shape as a tool result, encoded on its own
 * and appended to ids. */
static int encode_follow_up(needle_session *s, const char *text, nd_ids *ids, needle_error *err)
{
    nd_buf b;
    nd_buf_init(&b);
    nd_buf_puts(&b, "\n<|im_start|>user\n");
    nd_buf_puts(&b, text);
    nd_buf_puts(&b, "<|im_end|>\n<|im_start|>assistant\n");
    int rc = b.oom ? nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory")
                   : nd_tokenizer_encode(s->model->tok, b.data, b.len, ids, err);
    nd_buf_free(&b);
    return rc;
}

/* Whether a further request would carry the conversation's positions past
 * max_seq_len, keeping ND_ANSWER_RESERVE for its answer (context_budget.h):
 * *outgrows is then set and the caller starts a new conversation. */
static int follow_up_outgrows_context(needle_session *s, const char *text, int *outgrows, needle_error *err)
{
    *outgrows = 0;
    nd_ids seg;
    nd_ids_init(&seg);
    int rc = encode_follow_up(s, text, &seg, err);
    if (!rc) {
        size_t end = (size_t)nd_state_position(s->st) + s->pending.len + seg.len + ND_ANSWER_RESERVE;
        *outgrows = end > (size_t)s->budget.context;
    }
    nd_ids_free(&seg);
    return rc;
}

/* The new turn's ids go to s->pending (after any undecided leftovers). */
static int queue_turn(needle_session *s, int kind, const char *text, needle_error *err)
{
    nd_tokenizer *tok = s->model->tok;
    const char *label = kind == ND_TURN_TOOL_RESULT ? "tool result" : "query";
    size_t before = s->pending.len;
    nd_ids v;
    nd_ids_init(&v);
    int rc = 0;
    if (!s->started) s->heard.len = 0; /* a new conversation: nothing said yet */
    nd_buf_puts(&s->heard, text);
    nd_buf_putc(&s->heard, '\n');
    if (kind != ND_TURN_TOOL_RESULT) {
        char *r = dup_string(text);
        if (r) { free(s->last_request); s->last_request = r; }
    }
    if (s->heard.oom) { rc = nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory"); goto done; }
    if (!s->started) {
        if (s->prefix_len < 0 && (rc = compute_prefix_len(s, err)) != 0) goto done;
        if ((rc = nd_chat_prompt_ids(tok, s->model->layout, s->system, s->tools_compact, text, &v, err)) != 0) goto done;
        /* the pinned block must really be a prefix of this prompt */
        int sinks = s->prefix_len;
        if (sinks > (int)v.len || (sinks > 0 && v.data[sinks - 1] != s->model->id_tools_close)) sinks = 0;
        if ((rc = nd_budget_check_request(&s->budget, s->prefix_len, v.len - (size_t)s->prefix_len, label, err)) != 0)
            goto done;
        if ((rc = fresh_state(s, sinks, err)) != 0) goto done;
        s->pending.len = 0;
        rc = nd_ids_append(&s->pending, &v, err);
    } else if (kind == ND_TURN_TOOL_RESULT) {
        rc = nd_chat_append_tool_result(tok, text, &s->pending, err);
    } else {
        rc = encode_follow_up(s, text, &s->pending, err);
    }
    /* a later turn: its own segment against the same pinned block */
    if (!rc && s->started)
        rc = nd_budget_check_request(&s->budget, s->prefix_len, s->pending.len - before, label, err);
done:
    nd_ids_free(&v);
    return rc;
}

/* ------------------------------------------------------------------ the turn */

/* Grounded decoding: this turn's free string values may only copy what the
 * conversation said (user texts, tool results) and the system facts. */
static int set_copy_source(needle_session *s, needle_error *err)
{
    if (!s->grounded) {
        int rc = nd_grammar_copy_active(s->grammar) ? nd_grammar_set_copy_source(s->grammar, NULL, 0) : 0;
        return rc ? nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory") : 0;
    }
    nd_buf b;
    nd_buf_init(&b);
    if (s->system) {
        nd_buf_puts(&b, s->system);
        nd_buf_putc(&b, '\n');
    }
    if (s->heard.data) nd_buf_append(&b, s->heard.data, s->heard.len);
    int rc = b.oom ? NEEDLE_ENOMEM : nd_grammar_set_copy_source(s->grammar, b.data ? b.data : "", b.len);
    nd_buf_free(&b);
    return rc ? nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory building the copy source") : 0;
}

static int validate_text(const char *text, const char *what, needle_error *err)
{
    if (!text) return nd_errorf(err, NEEDLE_EINVAL, "%s: NULL text", what);
    size_t n = strlen(text), bad = nd_utf8_first_invalid(text, n);
    if (bad != n) return nd_errorf(err, NEEDLE_EUTF8, "%s: invalid UTF-8 at byte %zu", what, bad);
    return 0;
}

/* The call a messaging frame spells out for the latest request (message_frame.h),
 * written into calls (replacing what was there) with its two arguments in
 * completed (a JSON list), when the request does not say not to send it.
 * 1 when taken, 0 when not. */
/* A second answer (parts, asked again, leaned to, rerouted) becomes the turn's:
 * its calls and confidence.  1, or NEEDLE_ENOMEM. */
static int take_second_answer(nd_buf *calls, const nd_split_answer *second, double *confidence, needle_error *err)
{
    calls->len = 0;
    nd_buf_append(calls, second->calls.data, second->calls.len);
    *confidence = second->confidence;
    return calls->oom ? nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory taking a second answer") : 1;
}

static int take_message_frame(needle_session *s, nd_buf *calls, nd_buf *completed)
{
    const char *tool = NULL, *person = NULL, *text = NULL;
    char *framed = nd_message_frame_call(s->tools, s->last_request, nd_chat_json_ascii(s->model->layout), &tool,
                                         &person, &text);
    if (!framed) return 0;
    nd_json *fc = NULL;
    needle_error perr;
    int taken = nd_json_parse(framed, strlen(framed), NULL, &fc, &perr) == 0 && !nd_request_negates(s->last_request, fc);
    nd_json_free(fc);
    if (taken) {
        int n = 0;
        nd_repair_note(completed, &n, tool, person);
        nd_repair_note(completed, &n, tool, text);
        nd_buf_putc(completed, ']');
        calls->len = 0;
        nd_buf_puts(calls, framed);
        if (calls->oom || completed->oom) taken = 0, calls->len = 0;
    }
    free(framed);
    return taken;
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
    int has_head = s->model->net->weights.confidence.present || s->model->net->weights.router.present;
    int cells_ok = has_head || s->keep_cells;
    s->cells_len = 0;
    s->turn_ids.len = 0;

    /* a text certainly too long is refused before it is tokenized or embedded */
    rc = nd_budget_precheck_request(s->model, &s->budget, s->started || !s->retr ? s->prefix_len : -1, strlen(text),
                                    kind == ND_TURN_TOOL_RESULT ? "tool result" : "query", err);
    if (rc) {
        free(result_compact);
        return rc;
    }
    /* a further request that would outgrow the context starts a new
     * conversation with the tools it already has (no new selection: the
     * conversation goes on, only its earlier turns are out of sight) */
    int keep_selection = s->hold_selection;
    s->hold_selection = 0;
    if (s->started && kind == ND_TURN_USER) {
        if ((rc = follow_up_outgrows_context(s, text, &keep_selection, err)) != 0) return rc;
        if (keep_selection) {
            s->started = 0;
            s->pending.len = 0;
        }
    }
    /* a new conversation ranks the tools for its first request */
    if (!s->started && s->retr && !keep_selection && (rc = select_tools(s, text, err)) != 0) {
        free(result_compact);
        return rc;
    }

    /* prefill: the new turn's ids */
    int first_turn = !s->started;
    size_t keep_pending = s->pending.len;
    rc = queue_turn(s, kind, text, err);
    free(result_compact);
    if (rc) {
        s->pending.len = s->started ? keep_pending : 0;
        return rc;
    }
    if ((rc = set_copy_source(s, err)) != 0) {
        s->started = 0;
        s->pending.len = 0;
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
    r.bent_at = -1;
    r.p_call = NAN;
    nd_buf_init(&r.reasoning);
    nd_buf_init(&r.calls);
    rc = nd_decode_turn(s, max_new, &cells_ok, &r, err);
    if (!rc && r.fail_code == NEEDLE_ELIMIT && !s->answering_again && first_turn && kind == ND_TURN_USER &&
        (s->grounded || !s->grounded_chosen)) {
        /* Copying can push a small model off its track until it runs out of
         * tokens (call after call of copied words), and so can free values
         * (a string that repeats pieces of a name: "Siobhán" as "Sánánesnes...").
         * The first turn of a conversation is answered again once with the
         * other decoding (free values after copying; copying after free values
         * unless the caller turned it off): the cache then holds only that
         * turn, so starting over loses nothing (a turn that fails both ways
         * costs twice). */
        nd_buf_free(&r.reasoning);
        nd_buf_free(&r.calls);
        s->started = 0;
        s->pending.len = 0;
        int grounded = s->grounded;
        s->grounded = !grounded;
        s->answering_again = 1;
        s->hold_selection = keep_selection; /* a restarted conversation keeps its tools */
        rc = nd_session_turn(s, kind, text, max_new_tokens, envelope, err);
        s->answering_again = 0;
        s->grounded = grounded;
        return rc;
    }
    /* A turn that ran out of tokens inside a value whose schema refused the
     * model's own token there (range_guard.h: an e-mail address it cannot
     * write, a pattern it keeps missing, "uuuumumum..." until the budget ends)
     * wanted a value outside the schema, and the contract answers that with no
     * call (validation.out_of_schema names the argument) rather than an error.
     * The half-written call stays out of the cache, as for any turn that ran
     * out: the next send starts afresh.  Its confidence is the written tokens'
     * (as for any withheld call); the heads read a complete turn's cells,
     * which this turn never had. */
    char runaway_bent[260] = "";
    if (!rc && r.fail_code == NEEDLE_ELIMIT && r.bent_at >= 0 && (size_t)r.bent_at <= r.calls.len && r.calls.data) {
        nd_range_path(r.calls.data, (size_t)r.bent_at, runaway_bent, sizeof runaway_bent);
        r.fail_code = 0;
        r.fail_msg[0] = '\0';
        r.calls.len = 0;
        nd_buf_puts(&r.calls, "[]"); /* (an out of memory shows as a parse failure below) */
        r.bent_at = -1;               /* an offset into the text just replaced */
        cells_ok = 0;
        s->started = 0;
        s->pending.len = 0;
    }
    if (!rc && !r.fail_code && !runaway_bent[0]) {
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
    int has_router = 0;
    double router_logits[3] = {0, 0, 0}, router_cal[3] = {0, 0, 0};
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
        /* Needle 3: the router head over the same cells, reported raw */
        const nd_head_weights *router = &s->model->net->weights.router;
        if (router->present && cells_ok && s->cells_len > 0) {
            const nd_config *c = &s->model->net->weights.cfg;
            float lg[3];
            needle_error herr;
            if (nd_head_router(s->model->net, s->cells, (int)(s->cells_len / (size_t)c->d_model), lg, &herr) == 0) {
                has_router = 1;
                for (int i = 0; i < 3; i++) {
                    router_logits[i] = lg[i];
                    router_cal[i] = router->calibration ? router->calibration[i] : 0.0;
                }
            }
        }
    } else {
        /* a turn that ran out of budget leaves a half-written assistant turn in
         * the cache: the conversation ends here and the next send starts afresh */
        s->started = 0;
        s->pending.len = 0;
    }
    /* the grounding checks; a strict session withholds what they flag */
    nd_grounding g;
    memset(&g, 0, sizeof g);
    nd_buf_init(&g.ungrounded);
    nd_buf completed; /* the arguments whose values were taken from the request (validation.completed) */
    nd_buf_init(&completed);
    nd_buf unused; /* the numbers the request says that no call uses (unused_number.h) */
    nd_buf_init(&unused);
    int n_unused = 0;
    nd_split_answer split; /* the request answered in two parts (split_turn.h) */
    nd_split_answer_init(&split);
    int split_taken = 0, asked_again = 0, leaned = 0, framed = 0, rerouted = 0;
    nd_buf framed_completed; /* the two arguments a messaging frame gave (message_frame.h) */
    nd_buf_init(&framed_completed);
    const char *suppressed = NULL;
    if (!r.fail_code) {
        nd_json *calls = NULL;
        needle_error perr;
        if (nd_json_parse(r.calls.data ? r.calls.data : "[]", r.calls.len, NULL, &calls, &perr) == 0) {
            char bent[260] = ""; /* the argument whose value the schema bent while decoding (range_guard.h) */
            /* (a repeat cut may have removed the bent value with the repeat; read
             * before the names below change the text's offsets) */
            if (r.bent_at >= 0 && (size_t)r.bent_at < r.calls.len)
                nd_range_path(r.calls.data, (size_t)r.bent_at, bent, sizeof bent);
            /* Values the request states are taken from it where the model's differ
             * (every session, strict included; user turns): a name copied in part is finished (name_span.h), a
             * message's text is taken whole (message_span.h), a place named in part too
             * (place_span.h), the label named is written (said_label.h), an
             * optional choice named is added (said_choice.h), a list of choices named
             * written (said_list.h), a yes/no setting named by its key set
             * (said_flag.h), a temperature unit a number's symbol names given
             * (said_unit.h), the clock time said is
             * written (clock_time.h), a duration or volume is converted to the
             * argument's unit (said_quantity.h), a decimal cut to its whole part
             * restored (said_number.h), the date said is written or added
             * (said_date.h), and after the grounding checks, the
             * one number said replaces the one number not said (said_number.h). */
            int repair = kind == ND_TURN_USER && calls->type == ND_JSON_ARRAY && calls->count > 0;
            int n_completed = 0, changed = 0;
            if (repair) {
                /* a near copy of an earlier call is dropped first (repair.h), so that the
                 * one-call rules below see the one call meant */
                int near = nd_drop_near_duplicates(calls);
                int a = nd_complete_names(calls, s->tools, s->last_request, &completed, &n_completed);
                int t = a < 0 ? -1 : nd_complete_message_text(calls, s->tools, s->last_request, &completed, &n_completed);
                /* a recipient or text that is a piece of the request's messaging frame (message_frame.h) */
                int mf = t < 0 ? -1 : !s->message_frame ? 0 : nd_fix_framed_message(calls, s->tools, s->last_request, &completed, &n_completed);
                int p = mf < 0 ? -1 : nd_complete_place_names(calls, s->tools, s->last_request, &completed, &n_completed);
                int l = p < 0 ? -1 : nd_fix_said_label(calls, s->tools, s->last_request, &completed, &n_completed);
                int b = l < 0 ? -1 : nd_add_said_choices(calls, s->tools, s->last_request, &completed, &n_completed);
                /* a choice written into the wrong argument moves to its own (said_choice.h) */
                int mc = b < 0 ? -1 : nd_move_misplaced_choices(calls, s->tools, &completed, &n_completed);
                int li = mc < 0 ? -1 : nd_fix_said_lists(calls, s->tools, s->last_request, &completed, &n_completed);
                int f = li < 0 ? -1 : nd_fix_said_flags(calls, s->tools, s->last_request, &completed, &n_completed);
                int u = f < 0 ? -1 : nd_fix_said_units(calls, s->tools, s->last_request, &completed, &n_completed);
                /* an optional choice the request never says is dropped (said_choice.h) */
                int un = u < 0 ? -1 : nd_drop_unsaid_choices(calls, s->tools, s->last_request);
                /* and an optional list none of whose items it says (said_list.h) */
                int ul = un < 0 ? -1 : nd_drop_unsaid_lists(calls, s->tools, s->last_request);
                /* a choice dropped as unsaid gives way to the one the request says (said_choice.h) */
                int b2 = ul < 0 ? -1 : nd_add_said_choices(calls, s->tools, s->last_request, &completed, &n_completed);
                /* a value the schema bent while decoding that ends as one the request says
                 * ("300ml" after the model reached for 3000) was the model's slip, not the user's ask */
                if (b2 >= 0 && bent[0] && nd_bent_value_said(calls, s->tools, s->last_request, bent)) bent[0] = '\0';
                int c = b2 < 0 ? -1 : nd_fix_clock_time(calls, s->tools, s->last_request, &completed, &n_completed);
                /* a duration or volume in the argument's unit (said_quantity.h); one the
                 * schema refuses is a value outside the schema, as a bent one */
                char outside[260];
                int q = c < 0 ? -1 : nd_fix_said_quantity(calls, s->tools, s->last_request, &completed, &n_completed,
                                                          outside, sizeof outside);
                if (outside[0] && !bent[0]) memcpy(bent, outside, sizeof outside);
                /* a clock time that does not exist ("7:75") is one too (clock_time.h) */
                if (q >= 0 && !bent[0] && nd_clock_time_outside(calls, s->tools, s->last_request, outside, sizeof outside))
                    memcpy(bent, outside, sizeof outside);
                /* and so is a colour the tool's colour choices lack ("gold": said_colour.h) */
                int col = q < 0 || bent[0] ? 0 : nd_colour_outside(calls, s->tools, s->last_request, outside, sizeof outside);
                if (col > 0) memcpy(bent, outside, sizeof outside);
                /* and a choice named next to its name that the enum lacks ("vacation mode": said_choice.h) */
                int cho = q < 0 || col < 0 || bent[0] ? 0 : nd_choice_outside(calls, s->tools, s->last_request, outside, sizeof outside);
                if (cho > 0) memcpy(bent, outside, sizeof outside);
                /* and a currency its currency choices lack ("45 CHF": said_choice.h) */
                int cur = q < 0 || col < 0 || cho < 0 || bent[0] ? 0 : nd_currency_outside(calls, s->tools, s->last_request, outside, sizeof outside);
                if (cur > 0) memcpy(bent, outside, sizeof outside);
                /* a decimal cut to its whole part (said_number.h) */
                int dec = q < 0 || col < 0 || cho < 0 ? -1 : nd_fix_said_decimal(calls, s->tools, s->last_request, &completed, &n_completed);
                /* the date said, written or added (said_date.h) */
                int e = dec < 0 ? -1 : nd_fix_said_date(calls, s->tools, s->last_request, s->system, &completed, &n_completed);
                changed = a < 0 || t < 0 || mf < 0 || p < 0 || l < 0 || b < 0 || mc < 0 || li < 0 || f < 0 || u < 0 || un < 0 ||
                                  ul < 0 || b2 < 0 || c < 0 || q < 0 || dec < 0 || e < 0
                              ? -1
                              : near + a + t + mf + p + l + b + mc + li + f + u + un + ul + b2 + c + q + dec + e;
            }
            const char *request = kind == ND_TURN_TOOL_RESULT ? NULL : s->last_request;
            nd_grounding_free(&g);
            int grc = changed < 0 ? 0 : nd_grounding_check(calls, s->tools, s->heard.data, request, s->system, bent[0] ? bent : NULL, &g);
            if (repair && changed >= 0 && !grc) {
                int d = nd_fix_said_number(calls, s->tools, s->last_request, g.ungrounded.data, &completed, &n_completed);
                /* the unit said with the number now written ("sixty-eight point five degrees F") */
                if (d > 0 && nd_fix_said_units(calls, s->tools, s->last_request, &completed, &n_completed) < 0) d = -1;
                if (d > 0) { /* the checks again, on the number written */
                    nd_grounding_free(&g);
                    grc = nd_grounding_check(calls, s->tools, s->heard.data, request, s->system, bent[0] ? bent : NULL, &g);
                }
                changed = d < 0 ? -1 : changed + d;
                /* an optional value the request does not say is dropped, and the checks run again (repair.h) */
                int dropped = changed < 0 || grc ? 0 : nd_drop_ungrounded_optional(calls, s->tools, g.ungrounded.data, g.out_of_schema.data);
                if (dropped > 0) {
                    nd_grounding_free(&g);
                    grc = nd_grounding_check(calls, s->tools, s->heard.data, request, s->system, bent[0] ? bent : NULL, &g);
                    changed += dropped;
                }
            }
            nd_buf_puts(&completed, n_completed ? "]" : "[]");
            if (changed > 0) {
                /* the members a repair added go where the schema (and the grammar) puts them */
                nd_order_arguments(calls, s->tools);
                r.calls.len = 0;
                nd_json_write(&r.calls, calls, nd_chat_json_ascii(s->model->layout));
            }
            /* the argument a runaway turn was writing when its budget ended (above) */
            if (!grc && runaway_bent[0]) grc = nd_grounding_add_out_of_schema(&g, runaway_bent);
            /* a request's numbers that no call uses: the calls do something else (unused_number.h) */
            if (!grc && changed >= 0 && kind == ND_TURN_USER)
                n_unused = nd_numbers_unused(calls, s->last_request, &unused);
            if (changed < 0 || grc || r.calls.oom || completed.oom || n_unused < 0) {
                nd_json_free(calls);
                nd_buf_free(&r.reasoning);
                nd_buf_free(&r.calls);
                nd_grounding_free(&g);
                nd_buf_free(&completed);
                nd_buf_free(&unused);
                return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory in the grounding checks");
            }
            int flagged = calls->type == ND_JSON_ARRAY && calls->count > 0 && (g.n_ungrounded || g.negation);
            /* a call the checks doubt is less likely right, whatever the token probabilities say */
            if (flagged && !isnan(confidence)) confidence *= 0.5;
            /* a request that says not to act, a value outside the schema (the
             * decoder saw the schema bend it, or the checks found a number not said
             * where the request says one the schema refuses), or a required value
             * filled with a placeholder (not given), or numbers said that no call
             * uses: the behaviour contract answers each with no call, in every
             * session; the calls stay in the envelope's suppressed_calls */
            if ((g.negation || g.n_out_of_schema || g.n_missing || n_unused > 0) && calls->type == ND_JSON_ARRAY &&
                calls->count > 0) {
                suppressed = r.calls.data;
                r.calls.len = 0;
            }
            if (s->strict && flagged) {
                suppressed = r.calls.data;
                r.calls.len = 0; /* the envelope says [] */
            }
            /* a second look at a first request (the parts share a scratch session):
             * answered with two calls or fewer, one that asks for two things or one
             * action on two objects is answered part by part (split_turn.h); answered
             * with no call, it is asked again (ask_again.h), then answered with the call
             * the model nearly made (lean_call.h) */
            /* (calls withheld only for numbers they leave unused still get split: "radio to
             * 95.8 and call Priya" answered with the call alone is answered part by part) */
            int unused_only = suppressed && n_unused > 0 && !g.n_out_of_schema && !g.n_missing && !(s->strict && flagged);
            int first_request = first_turn && kind == ND_TURN_USER && !g.negation && !runaway_bent[0] &&
                                calls->type == ND_JSON_ARRAY;
            int second_look = first_request && (!suppressed || unused_only);
            int taken = 0;
            if (second_look && s->split && calls->count <= 2) {
                taken = nd_answer_in_parts(s, s->last_request, calls, completed.data, confidence, max_new, &split, err);
                split_taken = taken > 0;
            }
            if (second_look && !taken && !suppressed && s->ask_again && calls->count == 0) {
                taken = nd_answer_again(s, s->last_request, max_new, &split, err);
                asked_again = taken > 0;
            }
            if (second_look && !taken && !suppressed && s->lean_call > 0 && calls->count == 0 && r.p_call >= s->lean_call) {
                taken = nd_answer_leaning(s, s->last_request, max_new, &split, err);
                leaned = taken > 0;
            }
            if (taken > 0) {
                suppressed = NULL; /* the parts' answer replaces the withheld one */
                n_unused = 0;
                taken = take_second_answer(&r.calls, &split, &confidence, err);
            }
            /* the answer, first or second, one call to a tool while the request names
             * another tool's choice: asked again with those tools alone (reroute.h) */
            /* (calls withheld as placeholders count as no call: the model reached for a tool it had no values for) */
            int placeholders_only = suppressed && g.n_missing && !g.n_out_of_schema && n_unused <= 0 && !(s->strict && flagged);
            if (first_request && (!suppressed || placeholders_only) && taken >= 0 && !split_taken && s->ask_again) {
                nd_json *now = NULL;
                needle_error jerr;
                /* (withheld calls still name the tools the model reached for: those are not asked) */
                const char *answer = suppressed ? suppressed : r.calls.data ? r.calls.data : "[]";
                size_t answer_len = suppressed ? strlen(suppressed) : r.calls.data ? r.calls.len : 2;
                if (nd_json_parse(answer, answer_len, NULL, &now, &jerr) == 0) {
                    /* (placeholders for a tool the request names: the values were not given, and
                     * no other tool is asked: "add Heroes to a playlist") */
                    int named = suppressed ? nd_request_names_a_called_tool(now, s->tools, s->last_request) : 0;
                    int again = named < 0 ? nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory asking again")
                                : now->type == ND_JSON_ARRAY && (now->count == 1 || suppressed) && !named
                                    ? nd_answer_rerouted(s, s->last_request, now, max_new, &split, err)
                                    : 0;
                    if (again > 0) {
                        rerouted = asked_again = 1;
                        leaned = 0;
                        suppressed = NULL;
                        again = take_second_answer(&r.calls, &split, &confidence, err);
                    }
                    if (again < 0) taken = again;
                } else if (jerr.code == NEEDLE_ENOMEM) {
                    taken = nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory asking again");
                }
                nd_json_free(now);
            }
            if (taken < 0) {
                nd_json_free(calls);
                nd_buf_free(&r.reasoning);
                nd_buf_free(&r.calls);
                nd_grounding_free(&g);
                nd_buf_free(&completed);
                nd_buf_free(&unused);
                nd_buf_free(&framed_completed);
                nd_split_answer_free(&split);
                return taken;
            }
            /* a first request still answered with no call (none written, or its calls
             * withheld as placeholders or for a "don't" that may be the message's own)
             * and said in a messaging frame ("text mom that I'll be late") is answered
             * with the call the frame spells out, unless it says not to send it */
            int empty = calls->type == ND_JSON_ARRAY && (calls->count == 0 || suppressed);
            if (first_turn && kind == ND_TURN_USER && s->message_frame && !taken && empty && !g.n_out_of_schema &&
                !(s->strict && flagged))
                framed = take_message_frame(s, &r.calls, &framed_completed);
            if (framed > 0) suppressed = NULL;
        }
        nd_json_free(calls);
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
        .calls = r.fail_code ? NULL : suppressed ? "[]" : (r.calls.data ? r.calls.data : ""),
        .calls_len = suppressed ? 2 : r.calls.len,
        .reasoning = r.reasoning.data ? reason : NULL,
        .reasoning_len = reason_len,
        .confidence = confidence,
        .has_router = has_router,
        .router_logits = {router_logits[0], router_logits[1], router_logits[2]},
        .router_calibration = {router_cal[0], router_cal[1], router_cal[2]},
        .prefill_tps = t_prefill > 0 ? n_prefill / t_prefill : 0.0,
        .decode_tps = r.t_decode > 0 ? r.generated / r.t_decode : 0.0,
        .peak_ram_mb = nd_peak_ram_mb(),
        .ungrounded = (split_taken && !split.keeps_whole) || asked_again || leaned || framed > 0 ? "[]" : g.ungrounded.data,
        .negation = framed > 0 ? 0 : g.negation,
        .out_of_schema = g.out_of_schema.data,
        .missing = framed > 0 || rerouted ? "[]" : g.missing.data,
        .unused_numbers = framed > 0 || n_unused <= 0 ? "[]" : unused.data,
        .completed = framed > 0 ? framed_completed.data : split_taken || asked_again || leaned ? split.completed.data : completed.data,
        .split = split_taken ? split.parts.data : NULL,
        .asked_again = asked_again,
        .leaned = leaned,
        .suppressed_calls = suppressed,
    };
    s->last_mask_seconds = r.t_mask;
    s->last_decode_seconds = r.t_decode;
    s->last_new_tokens = r.generated;
    s->last_loop_breaks = r.loop_breaks;
    s->last_repeat_cuts = r.repeat_cuts;
    s->last_call_logp_mean = r.logp_n > 0 ? r.logp_sum / r.logp_n : NAN;
    nd_buf out;
    nd_buf_init(&out);
    nd_envelope_write(&out, &env);
    nd_grounding_free(&g);
    nd_buf_free(&completed);
    nd_buf_free(&unused);
    nd_buf_free(&framed_completed);
    nd_split_answer_free(&split);
    nd_buf_free(&r.reasoning);
    nd_buf_free(&r.calls);
    if (out.oom) {
        nd_buf_free(&out);
        return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory writing the envelope");
    }
    *envelope = nd_buf_take(&out);
    return 0;
}
