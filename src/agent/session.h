/* session.h - the tool-calling agent: a model with its tokenizer, and one
 * conversation on it (prompt rendering, KV reuse across turns, the
 * constrained decoding loop).  api.c exposes these as the public
 * needle_model / needle_session handles.
 *
 * A turn's assistant text is one of the training target layouts (SPEC 7, 12):
 *
 *   <think> REASONING </think>\n<tool_call> JSON_ARRAY </tool_call><|im_end|>
 *   <tool_call> JSON_ARRAY </tool_call><|im_end|>
 *
 * The 2.0.8 layout always writes the first form.  Under the 2.0.15 layout
 * the model chooses <think> or <tool_call> after the leading U+2581 piece (a
 * model tuned on it writes no think block when it has no reasoning; its
 * "<think>\n R \n</think>" is the first form with the newlines inside
 * REASONING, which is stripped before it is reported).
 * The fixed parts are forced as exactly the token ids that training produced
 * for them (found once per model by encoding a template target), REASONING is
 * free text (no marker or control token) of at most max_reasoning_tokens, and
 * JSON_ARRAY is generated token by token under the grammar's allowed-token
 * mask, so it always parses and satisfies the declared schemas.
 *
 * Memory stays bounded: everything up to and including `</tools>` is pinned as
 * KV sinks and later positions live in a window that the engine slides.  The
 * pinned block and each turn are bounded by the model's context
 * (context_budget.h), checked before anything is evaluated.
 */
#ifndef ND_SESSION_H
#define ND_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"
#include "agent/context_budget.h"
#include "agent/retrieval.h"
#include "agent/sampler.h"
#include "grammar/token_mask.h"
#include "core/json.h"
#include "model/model.h"
#include "model/weights.h"
#include "needle.h"
#include "text/tokenizer.h"

/* The forced pieces of the target, as token ids. */
#define ND_MAX_FORCED 8
typedef struct nd_forced {
    int ids[ND_MAX_FORCED];
    int n;
} nd_forced;

/* A loaded model: network, tokenizer and the per-vocabulary tables decoding
 * needs.  Read-only once opened, shared by every session on it. */
struct needle_model {
    nd_model *net;
    nd_weights mem_weights;  /* needle_model_open_memory: weights over `blob` */
    int has_mem_weights;
    uint8_t *blob;           /* the copied .cact bytes (memory open only) */
    nd_tokenizer *tok;
    int vocab;               /* logits row length (the network's vocab_size) */
    int window;              /* KV window for new sessions */

    nd_token_trie *trie;     /* ordinary tokens' bytes, for the grammar mask */
    uint32_t *reason_mask;   /* tokens allowed inside <think> (ordinary + </think>) */
    int layout;              /* NEEDLE_LAYOUT_2_0_8 or _2_0_15: how prompts are rendered */
    nd_forced open_think;    /* [U+2581] <think>        (start of every target) */
    nd_forced think_to_call; /* </think> \n <tool_call> */
    int id_think_open;       /* <think>: the target may begin with it ... */
    int id_call_open;        /* ... or with <tool_call> (2.0.15: no reasoning, no think block) */
    nd_forced close_call;    /* </tool_call> <|im_end|> */
    int id_think_close;      /* </think> */
    int id_tools_close;      /* </tools> */
    int max_piece_bytes;     /* the longest piece: no token covers more bytes of text (context_budget.h) */
};

/* Build the decoding tables for m->tok / m->net (called by the openers). */
int nd_agent_model_prepare(needle_model *m, needle_error *err);
void nd_agent_model_release(needle_model *m);

struct needle_session {
    needle_model *model;
    char *system;          /* NULL: none */
    nd_budget budget;      /* token counts of the layout and the system text */
    char *tools_compact;   /* the training form of the tools array */
    nd_json *tools;        /* every declared tool */
    nd_grammar *grammar;   /* over the rendered tools only */
    /* Tool retrieval (more than ND_RETRIEVAL_TOP_K tools and a contrastive
     * head): the top five for the first request of a conversation are
     * rendered and compiled, and kept for the whole conversation, because the
     * tools block is the pinned start of the KV cache.  A new conversation
     * (reset, set_tools, or after a failed turn) selects again. */
    char *tool_index_path; /* NULL: no persistent index */
    nd_retriever *retr;    /* NULL: every tool is rendered */
    int selected[ND_RETRIEVAL_TOP_K], n_selected; /* declared indices rendered now (retrieval only) */
    int hold_selection; /* the next new conversation keeps them (a conversation restarted past the context) */
    int keep_cells;        /* keep the turn's cells without a confidence head (heads training) */
    int strict;            /* withhold flagged calls (agent/grounding.h) */
    int split;             /* how many times a first request may be cut (split_turn.h); 0: never */
    int ask_again;         /* a first request answered with no call is asked again (ask_again.h) */
    int message_frame;     /* and then read by its messaging frame (message_frame.h); on with ask_again */
    double lean_call;      /* with ask_again: a first request answered with no call while the model
                              gave a call at least this probability is answered with the call it
                              nearly made (lean_call.h); 0: never */
    int force_call;        /* this session's call lists are never empty (a scratch session of lean_call.c) */
    int lean_says_flags;   /* a leaned call's yes/no settings must be said (the sides of split_turn.c) */
    int grounded;          /* grounded decoding: free string values are copies of `heard` and the system
                              facts (grammar.h, nd_grammar_set_copy_source), set anew each turn */
    int grounded_chosen;   /* the caller set grounded decoding on or off (not the default) */
    int answering_again;   /* a first turn that ran out of tokens is being answered with the other
                              decoding (nd_session_turn): it is not answered a third time */
    nd_buf heard;          /* this conversation's user texts and tool results, for the grounding checks */
    char *last_request;    /* the latest user text (negation is judged on it) */
    nd_mask_cache *masks;
    int max_new_tokens, max_reasoning_tokens;
    uint64_t seed;
    nd_sampler sampler;

    nd_state *st;           /* created at the first turn (its sink count is known then) */
    int sinks_reserved;     /* sinks the state was created with */
    int prefix_len;         /* [BOS] + enc(... </tools>): the pinned tool block */
    int started;            /* a conversation is under way (the KV holds it) */
    nd_ids pending;         /* decided tokens not yet evaluated */
    nd_ids turn_ids;        /* every token evaluated in the last turn (tests check the layout) */

    float *logits;          /* one vocabulary row */
    uint32_t *mask;         /* scratch mask (vocab bits) */
    float *cells;           /* this turn's head cells (confidence head only) */
    size_t cells_len, cells_cap; /* in floats */

    /* measurements of the last turn, for tests and `needle run --stats` */
    double last_mask_seconds, last_decode_seconds;
    int last_new_tokens;
    int last_loop_breaks; /* tokens the repeat guard banned in the last turn (repeat_guard.h) */
    int last_repeat_cuts; /* call lists the item guard ended at a repeated item or call (repeat_guard.h) */
    double last_call_logp_mean; /* mean unmasked log-probability of the call tokens (NAN: none) */
};

/* Open / close a conversation (options as in needle_session_options). */
int nd_session_open(needle_model *m, const needle_session_options *opt, needle_session **out, needle_error *err);
void nd_session_free(needle_session *s);
int nd_session_set_tools(needle_session *s, const char *tools_json, needle_error *err);
void nd_session_reset(needle_session *s);

enum { ND_TURN_USER = 0, ND_TURN_TOOL_RESULT = 1 };
/* One turn: kind says whether text is the user's request or a tool's JSON
 * result.  max_new_tokens <= 0 uses the session's.  On success *envelope is a
 * heap string (free()).  Input errors (bad UTF-8, bad JSON, wrong state)
 * return their code without an envelope; model-side failures (budget
 * exhausted) return 0 with a "success":false envelope. */
int nd_session_turn(needle_session *s, int kind, const char *text, int max_new_tokens, char **envelope,
                    needle_error *err);

#endif
