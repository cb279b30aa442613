/* context_budget.c - the token limits of context_budget.h and their messages. */
#include "agent/context_budget.h"

#include <string.h>

#include "agent/session.h"
#include "core/error.h"
#include "text/chat.h"

/* The fewest tokens a text of `bytes` bytes can take: a token covers at most
 * the longest piece's bytes. */
static size_t tokens_at_least(const needle_model *m, size_t bytes)
{
    size_t w = m->max_piece_bytes > 0 ? (size_t)m->max_piece_bytes : 1;
    return (bytes + w - 1) / w;
}

int nd_budget_prefix_len(needle_model *m, const char *system, const char *tools_block, int *prefix_len,
                         needle_error *err)
{
    nd_ids v;
    nd_ids_init(&v);
    int rc = nd_chat_prompt_ids(m->tok, m->layout, system, tools_block, "", &v, err);
    if (!rc) {
        /* markers split the text before encoding, so these ids are the first
         * ids of every prompt whatever the query: cut after the last </tools> */
        *prefix_len = 0;
        for (size_t i = v.len; i-- > 0;)
            if (v.data[i] == m->id_tools_close) {
                *prefix_len = (int)i + 1;
                break;
            }
    }
    nd_ids_free(&v);
    return rc;
}

/* The room for the system text and the tools block together. */
static int pinned_limit(const nd_budget *b) { return b->context - ND_REQUEST_RESERVE - b->frame; }

int nd_budget_init(needle_model *m, const char *system, nd_budget *b, needle_error *err)
{
    memset(b, 0, sizeof *b);
    b->context = m->net->weights.cfg.max_seq_len;
    int rc = nd_budget_prefix_len(m, NULL, "", &b->frame, err);
    if (rc) return rc;
    if (!system || !system[0]) return 0;
    int limit = pinned_limit(b);
    size_t bytes = strlen(system);
    size_t least = tokens_at_least(m, bytes);
    if (bytes > ND_EXACT_COUNT_BYTES && least > (size_t)(limit > 0 ? limit : 0))
        return nd_errorf(err, NEEDLE_ELIMIT,
                         "system: the system text is at least %zu tokens (%zu bytes), over the limit of %d "
                         "(max_seq_len %d less %d reserved for the request and %d for the prompt layout)",
                         least, bytes, limit, b->context, ND_REQUEST_RESERVE, b->frame);
    int with_system = 0;
    if ((rc = nd_budget_prefix_len(m, system, "", &with_system, err)) != 0) return rc;
    b->system = with_system - b->frame;
    if (b->system > limit)
        return nd_errorf(err, NEEDLE_ELIMIT,
                         "system: the system text is %d tokens, %d over the limit of %d "
                         "(max_seq_len %d less %d reserved for the request and %d for the prompt layout)",
                         b->system, b->system - limit, limit, b->context, ND_REQUEST_RESERVE, b->frame);
    return 0;
}

int nd_budget_check_tools(needle_model *m, const nd_budget *b, const char *system, const char *tools_block,
                          const char *what, int fits_only, int *prefix_len, needle_error *err)
{
    *prefix_len = -1;
    int limit = pinned_limit(b) - b->system;
    char part[320];
    snprintf(part, sizeof part, "%s", what ? what : "the tools block");
    size_t bytes = strlen(tools_block);
    size_t least = tokens_at_least(m, bytes);
    if (bytes > ND_EXACT_COUNT_BYTES && least > (size_t)(limit > 0 ? limit : 0)) {
        if (fits_only) return NEEDLE_ELIMIT;
        return nd_errorf(err, NEEDLE_ELIMIT,
                         "tools: %s is at least %zu tokens (%zu bytes), over the limit of %d (max_seq_len %d less %d "
                         "reserved for the request and %d for the prompt layout and system text)",
                         part, least, bytes, limit, b->context, ND_REQUEST_RESERVE, b->frame + b->system);
    }
    int P = 0;
    int rc = nd_budget_prefix_len(m, system, tools_block, &P, err);
    if (rc) return rc;
    int tokens = P - b->frame - b->system;
    if (tokens > limit) {
        if (fits_only) return NEEDLE_ELIMIT;
        return nd_errorf(err, NEEDLE_ELIMIT,
                         "tools: %s is %d tokens, %d over the limit of %d (max_seq_len %d less %d reserved for the "
                         "request and %d for the prompt layout and system text)",
                         part, tokens, tokens - limit, limit, b->context, ND_REQUEST_RESERVE, b->frame + b->system);
    }
    *prefix_len = P;
    return 0;
}

int nd_budget_request_limit(const nd_budget *b, int prefix_len) { return b->context - prefix_len; }

int nd_budget_precheck_request(const needle_model *m, const nd_budget *b, int prefix_len, size_t text_bytes,
                               const char *label, needle_error *err)
{
    /* before retrieval the block is at least the layout, the system text and "[]" */
    int known = prefix_len >= 0;
    int P = known ? prefix_len : b->frame + b->system + 1;
    int limit = nd_budget_request_limit(b, P);
    size_t least = tokens_at_least(m, text_bytes);
    if (text_bytes <= ND_EXACT_COUNT_BYTES || least <= (size_t)(limit > 0 ? limit : 0)) return 0;
    return nd_errorf(err, NEEDLE_ELIMIT,
                     "%s: the turn is at least %zu tokens (%zu bytes), over the limit of %d (max_seq_len %d less %s%d "
                     "tokens of system text and tools)",
                     label, least, text_bytes, limit, b->context, known ? "" : "at least ", P);
}

int nd_budget_check_request(const nd_budget *b, int prefix_len, size_t seg_tokens, const char *label,
                            needle_error *err)
{
    int limit = nd_budget_request_limit(b, prefix_len);
    if (seg_tokens <= (size_t)(limit > 0 ? limit : 0)) return 0;
    return nd_errorf(err, NEEDLE_ELIMIT,
                     "%s: the turn is %zu tokens, %zu over the limit of %d (max_seq_len %d less %d tokens of system "
                     "text and tools)",
                     label, seg_tokens, seg_tokens - (size_t)(limit > 0 ? limit : 0), limit, b->context, prefix_len);
}
