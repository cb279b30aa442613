/* context_budget.h - how many tokens the system text, the tools block and each
 * turn may take; checked before anything is evaluated (issue 20, D2).
 *
 * A model is trained on rows of at most max_seq_len positions (C): prompt
 * and answer.  A session pins [BOS] + system block + tools block (P tokens)
 * as KV sinks, and each turn's new tokens (a request or a tool result with
 * its turn markers, Q tokens) follow in the sliding window.  The limits:
 *
 *   P     <= C - ND_REQUEST_RESERVE   (room is left for a short request)
 *   P + Q <= C                        (every turn: the prompt fits the context)
 *
 * The answer is generated after the prompt in the sliding window (it may run
 * past C when the prompt nearly fills it, as a long conversation does).
 * Memory and prefill time are thus bounded by C whatever the input: the
 * sinks never exceed C, and the attention of the pinned block is at most
 * C x C.  A window smaller than C is the user's choice to slide: older turns
 * fall out of it, the limits stay.
 *
 * A further request of a conversation whose positions would run past C
 * (keeping ND_ANSWER_RESERVE for the answer) starts a new conversation: the
 * pinned block and that request at fresh positions, as a model trained on
 * rows of at most C positions was never shown a position beyond them.
 *
 * Anything longer is refused with one line naming the part, its length in
 * tokens, the excess and the limit, e.g.
 *   tools: the tools block is 13923 tokens, 13514 over the limit of 473
 *   (max_seq_len 512 less 32 reserved for the request and 7 for the prompt
 *   layout and system text)
 * (one line in practice).  With tool retrieval only the selected tools are
 * pinned: each declared tool must fit alone (else the same error names the
 * tool), and the selection is narrowed, lowest score first, until the block
 * fits.  Without retrieval (five tools or fewer, or a model without the
 * contrastive head) the whole block must fit.
 *
 * Counting costs one tokenizer pass.  A text longer than ND_EXACT_COUNT_BYTES
 * whose lower bound (bytes / the longest piece's bytes: no token covers more
 * bytes of text) is already over its limit is refused from its byte length
 * alone ("at least N tokens"), so a 10 MB description or a 1 MB query is
 * refused in milliseconds. */
#ifndef ND_CONTEXT_BUDGET_H
#define ND_CONTEXT_BUDGET_H

#include <stddef.h>

#include "needle.h"

#define ND_REQUEST_RESERVE 32                    /* tokens the pinned block leaves for a request at least */
#define ND_ANSWER_RESERVE 64                     /* positions a further request leaves for its answer */
#define ND_EXACT_COUNT_BYTES ((size_t)256 << 10) /* longer texts may be refused by their byte length */

typedef struct nd_budget {
    int context; /* max_seq_len */
    int frame;   /* [BOS] + the prompt layout around an empty tools block */
    int system;  /* the system block's tokens (0: none) */
} nd_budget;

/* Token counts of the layout and of the system text; refuses a system text
 * that leaves no room for tools and a request. */
int nd_budget_init(needle_model *m, const char *system, nd_budget *b, needle_error *err);

/* The pinned prefix length P of a prompt with this system text and tools block:
 * [BOS] + enc(... </tools>). */
int nd_budget_prefix_len(needle_model *m, const char *system, const char *tools_block, int *prefix_len,
                         needle_error *err);

/* Whether tools_block (a JSON array text) fits with the system text: 0 and
 * *prefix_len = P when it does; NEEDLE_ELIMIT with the message when it does
 * not.  what names the part in the message: NULL for "the tools block", or
 * e.g. "tool 17 (\"lookup\")".  With fits_only set, a block that does not fit
 * returns NEEDLE_ELIMIT without writing a message (retrieval narrowing). */
int nd_budget_check_tools(needle_model *m, const nd_budget *b, const char *system, const char *tools_block,
                          const char *what, int fits_only, int *prefix_len, needle_error *err);

/* The most tokens a turn's segment may have after a pinned prefix of
 * prefix_len tokens. */
int nd_budget_request_limit(const nd_budget *b, int prefix_len);

/* Refuse a turn's text from its byte length alone when it is certainly over
 * the limit and long enough that counting would cost (label: "query",
 * "tool result").  prefix_len < 0: not known yet (before tool retrieval), the
 * smallest possible pinned block is assumed. */
int nd_budget_precheck_request(const needle_model *m, const nd_budget *b, int prefix_len, size_t text_bytes,
                               const char *label, needle_error *err);

/* Refuse a turn whose segment (seg_tokens, counted) does not fit after the
 * pinned prefix. */
int nd_budget_check_request(const nd_budget *b, int prefix_len, size_t seg_tokens, const char *label,
                            needle_error *err);

#endif
