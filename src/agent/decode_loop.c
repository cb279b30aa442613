/* decode_loop.c - one assistant turn token by token: the forced parts of the
 * target layout, free reasoning under the reasoning mask, the call list under
 * the grammar's token mask (with the greedy fast path and the repeat guard),
 * and the evaluation of each decided token into the KV state. */
#include "agent/decode_loop.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/range_guard.h"
#include "agent/repeat_guard.h"
#include "core/error.h"

/* The head cells of one turn are kept for the confidence head; past this
 * many floats (64 MiB) the head is skipped for that turn rather than let a
 * very long prompt grow memory without bound. */
#define ND_MAX_CELL_FLOATS ((size_t)16 << 20)

int nd_ids_append(nd_ids *dst, const nd_ids *src, needle_error *err)
{
    for (size_t i = 0; i < src->len; i++)
        if (nd_ids_push(dst, src->data[i])) return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory");
    return 0;
}

/* Evaluate every pending token; s->logits receives the last one's row.
 * When the model has a confidence head, the cells are kept for it. */
int nd_eval_pending(needle_session *s, int *cells_ok, needle_error *err)
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
    if (!rc) rc = nd_ids_append(&s->turn_ids, &s->pending, err);
    s->pending.len = 0;
    return rc;
}

/* OPEN: the forced pieces before <think> (the U+2581 piece); CHOOSE: the
 * model picks <think> or <tool_call>; REASON: free text up to </think>; MID:
 * the rest of "</think>\n<tool_call>"; JSON: the call list under the
 * grammar; CLOSE: "</tool_call><|im_end|>". */
enum { PH_OPEN, PH_CHOOSE, PH_REASON, PH_MID, PH_JSON, PH_CLOSE, PH_DONE };


/* The U+2581 piece(s) before the first marker: open_think without its <think>. */
static nd_forced open_prefix(const needle_model *m)
{
    nd_forced f = m->open_think;
    f.n--;
    return f;
}

/* The 2.0.15 layout: <think> or <tool_call>, whichever the model prefers
 * (under the sampler).  The 2.0.8 layout always writes the think block. */
static int choose_opening(needle_session *s)
{
    const needle_model *m = s->model;
    if (m->layout != NEEDLE_LAYOUT_2_0_15) return m->id_think_open;
    memset(s->mask, 0, sizeof(uint32_t) * nd_mask_words(m->vocab));
    nd_mask_set(s->mask, m->id_think_open);
    nd_mask_set(s->mask, m->id_call_open);
    int tok = nd_sampler_pick(&s->sampler, s->logits, s->mask);
    return tok == m->id_call_open ? tok : m->id_think_open;
}

static const nd_forced *forced_of(const needle_model *m, const nd_forced *open, int phase)
{
    switch (phase) {
    case PH_OPEN: return open;
    case PH_MID: return &m->think_to_call;
    case PH_CLOSE: return &m->close_call;
    default: return NULL;
    }
}

/* tok when it is an ordinary token the grammar accepts from gs, else -1. */
static int if_accepted(needle_session *s, const nd_grammar_state *gs, int tok)
{
    const needle_model *m = s->model;
    if (tok < 0 || tok == m->id_think_close || !nd_mask_test(m->reason_mask, tok)) return -1; /* not ordinary */
    int len = 0;
    const char *bytes = nd_tokenizer_token_bytes(m->tok, tok, &len);
    if (!bytes || len <= 0) return -1;
    nd_grammar_state probe;
    nd_grammar_state_copy(&probe, gs);
    return nd_grammar_advance(s->grammar, &probe, bytes, (size_t)len) == 0 ? tok : -1;
}

/* The range guard (range_guard.h): the grammar let `got` through where the
 * model's own best token was `want`.  When the grammar refused `want` while a
 * number was being written, or inside a string its schema closes (enum,
 * const, pattern, format), the schema bent the value the model meant: the
 * offset is noted in r->bent_at.  want_ok: if_accepted's answer for want, or
 * -2 when not probed yet. */
static void note_bent_value(needle_session *s, const nd_grammar_state *gs, const nd_json_lexpos *lex,
                            nd_turn_result *r, int want, int want_ok, const char *got, int got_len)
{
    const needle_model *m = s->model;
    if (want == m->id_think_close || !nd_mask_test(m->reason_mask, want)) return; /* not an ordinary token */
    int wlen = 0;
    const char *wbytes = nd_tokenizer_token_bytes(m->tok, want, &wlen);
    if (!wbytes || wlen <= 0) return;
    const char *text = r->calls.data ? r->calls.data : "";
    int candidate;
    if (lex->in_string) {
        char path[260];
        nd_range_path(text, r->calls.len, path, sizeof path);
        candidate = nd_range_closed_string(s->tools, path);
    } else {
        candidate = nd_range_refused(lex, text, r->calls.len, wbytes, (size_t)wlen, got, got_len > 0 ? (size_t)got_len : 0);
    }
    if (!candidate) return;
    if (want_ok == -2) want_ok = if_accepted(s, gs, want);
    if (want_ok < 0) r->bent_at = (long)r->calls.len;
}

/* The item guard (repeat_guard.h): when the call list has just repeated an
 * array item or a call, end the list before the repeat if the grammar accepts
 * that ending; the text and grammar state then hold the shortened list.  The
 * cache keeps the tokens as they were generated (the turn ends here). */
static int end_at_repeat(needle_session *s, nd_turn_result *r, nd_grammar_state *gs)
{
    size_t cut;
    char closers[ND_REPEAT_MAX_DEPTH + 1];
    if (r->calls.oom || !nd_repeat_item_cut(r->calls.data, r->calls.len, &cut, closers, sizeof closers)) return 0;
    nd_grammar_state probe;
    nd_grammar_start(s->grammar, &probe);
    size_t nc = strlen(closers);
    if (nd_grammar_advance(s->grammar, &probe, r->calls.data, cut) != 0 ||
        nd_grammar_advance(s->grammar, &probe, closers, nc) != 0 || !nd_grammar_complete(s->grammar, &probe))
        return 0;
    r->calls.len = cut;
    nd_buf_append(&r->calls, closers, nc);
    nd_grammar_state_copy(gs, &probe);
    r->repeat_cuts++;
    return 1;
}

/* Does the token's text close the list ("]", "[]")?  Before the first call
 * opens, such a token is the empty answer. */
static int closes_list(const needle_model *m, int tok)
{
    int len = 0;
    const char *bytes = nd_tokenizer_token_bytes(m->tok, tok, &len);
    return bytes && len > 0 && memchr(bytes, ']', (size_t)len) != NULL;
}

/* r->p_call at the list's first token: of the probability the grammar's mask
 * leaves, the share of tokens that open a call ("[{") against those that
 * close the list empty ("[]").  (A token that does neither, such as "[" alone,
 * counts for neither.) */
static void note_call_probability(needle_session *s, const uint32_t *mask, nd_turn_result *r)
{
    const needle_model *m = s->model;
    float mx = -INFINITY;
    for (int i = 0; i < m->vocab; i++)
        if (nd_mask_test(mask, i) && s->logits[i] > mx) mx = s->logits[i];
    if (!isfinite(mx)) return;
    double p_open = 0, p_close = 0;
    for (int i = 0; i < m->vocab; i++) {
        if (!nd_mask_test(mask, i)) continue;
        int len = 0;
        const char *bytes = nd_tokenizer_token_bytes(m->tok, i, &len);
        if (!bytes || len <= 0) continue;
        double p = exp((double)s->logits[i] - mx);
        if (memchr(bytes, '{', (size_t)len)) p_open += p;
        else if (memchr(bytes, ']', (size_t)len)) p_close += p;
    }
    if (p_open + p_close > 0) r->p_call = p_open / (p_open + p_close);
}

int nd_decode_turn(needle_session *s, int max_new, int *cells_ok, nd_turn_result *r, needle_error *err)
{
    const needle_model *m = s->model;
    nd_grammar_state gs;
    nd_grammar_start(s->grammar, &gs);
    nd_forced open = open_prefix(m);
    int phase = open.n > 0 ? PH_OPEN : PH_CHOOSE, fi = 0, reason_n = 0;
    /* leave room for the forced parts and at least one JSON token */
    int reason_cap = max_new - m->open_think.n - m->think_to_call.n - 1;
    if (reason_cap > s->max_reasoning_tokens) reason_cap = s->max_reasoning_tokens;
    if (reason_cap < 0) reason_cap = 0;
    double t0 = nd_now_seconds();
    int32_t hist[ND_REPEAT_HISTORY]; /* the latest call-list ids, for the loop guard */
    int hn = 0;
    nd_json_lexpos lex = {0, 0}; /* inside a string of the call list or not, for the range guard */
    while (phase != PH_DONE) {
        /* the closers after a complete call list are protocol, not budget */
        if (phase != PH_CLOSE && r->generated >= max_new) {
            r->fail_code = NEEDLE_ELIMIT;
            snprintf(r->fail_msg, sizeof r->fail_msg,
                     "max_new_tokens (%d) reached before the call list was complete", max_new);
            break;
        }
        const nd_forced *f = forced_of(m, &open, phase);
        int tok;
        if (f) {
            tok = f->ids[fi++];
        } else {
            int rc = nd_eval_pending(s, cells_ok, err);
            if (rc) return rc;
            if (phase == PH_CHOOSE) {
                tok = choose_opening(s);
            } else if (phase == PH_REASON) {
                tok = reason_n >= reason_cap ? m->id_think_close : nd_sampler_pick(&s->sampler, s->logits, m->reason_mask);
                if (tok < 0) tok = m->id_think_close; /* nothing usable: end the thought */
            } else { /* PH_JSON */
                double tm = nd_now_seconds();
                int ban = nd_repeat_next(hist, hn); /* a token that would continue a loop, or -1 */
                int want = nd_sampler_best(&s->sampler, s->logits, NULL); /* the model's own best token */
                int want_ok = -2; /* -2: not probed yet; else if_accepted's answer */
                /* before a call opens, a session that must call bans the list's closers */
                int no_empty = s->force_call && !(r->calls.data && memchr(r->calls.data, '{', r->calls.len));
                /* the list's first token: how much did the model want a call?  (only a
                 * session that may lean asks: the mask costs a session that never does) */
                if (r->calls.len == 0 && s->lean_call > 0) {
                    const uint32_t *first = nd_mask_cache_get(s->masks, &gs);
                    if (!first) return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory computing the token mask");
                    note_call_probability(s, first, r);
                }
                /* greedy fast path: when the unmasked best token is one the
                 * grammar accepts, it is also the masked best (same lowest-id
                 * tie rule), and no mask is needed */
                tok = s->sampler.temperature <= 0.0f ? (want_ok = if_accepted(s, &gs, want)) : -1;
                if (tok >= 0 && (tok == ban || (no_empty && closes_list(m, tok)))) tok = -1;
                if (tok < 0) {
                    const uint32_t *mask = nd_mask_cache_get(s->masks, &gs);
                    if (!mask) return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory computing the token mask");
                    if ((ban >= 0 && nd_mask_test(mask, ban)) || no_empty) { /* the grammar mask minus the banned tokens */
                        memcpy(s->mask, mask, sizeof(uint32_t) * nd_mask_words(m->vocab));
                        if (ban >= 0 && nd_mask_test(mask, ban)) {
                            s->mask[ban >> 5] &= ~(1u << (ban & 31));
                            r->loop_breaks++;
                        }
                        for (int i = 0; no_empty && i < m->vocab; i++)
                            if (nd_mask_test(s->mask, i) && closes_list(m, i)) s->mask[i >> 5] &= ~(1u << (i & 31));
                        mask = s->mask;
                    }
                    tok = nd_sampler_pick(&s->sampler, s->logits, mask);
                }
                r->t_mask += nd_now_seconds() - tm;
                if (tok < 0) {
                    r->fail_code = NEEDLE_EUNSUPPORTED;
                    snprintf(r->fail_msg, sizeof r->fail_msg,
                             "no vocabulary token can continue the call list at byte %zu", r->calls.len);
                    break;
                }
                int len = 0;
                const char *bytes = nd_tokenizer_token_bytes(m->tok, tok, &len);
                if (tok != want && want != ban && r->bent_at < 0 && want >= 0) /* did the schema bend a value? */
                    note_bent_value(s, &gs, &lex, r, want, want_ok, bytes, len);
                if (nd_grammar_advance(s->grammar, &gs, bytes, (size_t)len) != 0) {
                    r->fail_code = NEEDLE_EFORMAT;
                    snprintf(r->fail_msg, sizeof r->fail_msg, "the grammar refused token %d it had allowed", tok);
                    break;
                }
                nd_buf_append(&r->calls, bytes, (size_t)len);
                nd_json_lexpos_feed(&lex, bytes, (size_t)len);
                if (hn == ND_REPEAT_HISTORY) memmove(hist, hist + 1, sizeof(int32_t) * --hn);
                hist[hn++] = tok;
                r->logp_sum += nd_log_softmax_at(s->logits, m->vocab, tok);
                r->logp_n++;
                if (end_at_repeat(s, r, &gs)) { /* a repeated item or call: the list ends before it */
                    if (nd_ids_push(&s->pending, tok)) return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory");
                    r->generated++;
                    phase = PH_CLOSE;
                    fi = 0;
                    continue;
                }
            }
        }
        if (nd_ids_push(&s->pending, tok)) return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory");
        r->generated++;
        if (phase == PH_CHOOSE) {
            phase = tok == m->id_call_open ? PH_JSON : PH_REASON;
        } else if (phase == PH_REASON) {
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
            phase = phase == PH_OPEN ? PH_CHOOSE : phase == PH_MID ? PH_JSON : PH_DONE;
            fi = 0;
        }
        if (phase == PH_JSON && nd_grammar_complete(s->grammar, &gs)) {
            phase = PH_CLOSE;
            fi = 0;
        }
    }
    r->t_decode = nd_now_seconds() - t0;
    if (r->reasoning.oom || r->calls.oom) return nd_errorf(err, NEEDLE_ENOMEM, "session: out of memory");
    return 0;
}
