/* decode_tables.c - the per-model tables constrained decoding needs, built
 * once when a model is opened and shared by every session on it: the marker
 * ids, the forced pieces of the target layout (as the exact ids training
 * produced), the byte trie of ordinary tokens and the reasoning mask. */
#include <stdlib.h>
#include <string.h>

#include "agent/session.h"
#include "core/error.h"
#include "text/chat.h"

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
    nd_chat_render_target(&b, NEEDLE_LAYOUT_2_0_8, "", "[]");
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
    m->id_think_open = think_open;
    m->id_call_open = call_open;
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
    m->max_piece_bytes = 1;
    for (int id = 0; id < ntok; id++) {
        int plen = 0;
        if (nd_tokenizer_piece(m->tok, id, &plen) && plen > m->max_piece_bytes) m->max_piece_bytes = plen;
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
