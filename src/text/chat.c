/* chat.c - rendering and encoding the chat layout (see chat.h for the layout). */
#include "text/chat.h"

#include <string.h>

#include "core/error.h"

static const char *or_empty(const char *s) { return s ? s : ""; }

/* A layout as spans: the template's own text (markers are markers) and the
 * caller's untrusted text (system, tools, query, tool result, and in training
 * rows the reasoning and answers), where marker spellings stay plain text. */
typedef struct span_list {
    nd_tok_span s[12];
    size_t n;
} span_list;

static void lit(span_list *l, const char *text) { l->s[l->n++] = (nd_tok_span){text, strlen(text), 0}; }
static void untrusted(span_list *l, const char *text)
{
    text = or_empty(text);
    l->s[l->n++] = (nd_tok_span){text, strlen(text), 1};
}

static void prompt_spans(span_list *l, const char *system, const char *tools_json, const char *query)
{
    l->n = 0;
    if (system && system[0]) {
        lit(l, "<|im_start|>system\n");
        untrusted(l, system);
        lit(l, "<|im_end|>\n");
    }
    lit(l, "<|im_start|>user\n<tools>");
    untrusted(l, tools_json);
    lit(l, "</tools>\n");
    untrusted(l, query);
    lit(l, "<|im_end|>\n<|im_start|>assistant\n");
}

static void target_spans(span_list *l, const char *reasoning, const char *answers_json)
{
    l->n = 0;
    lit(l, "<think>");
    untrusted(l, reasoning);
    lit(l, "</think>\n<tool_call>");
    untrusted(l, answers_json);
    lit(l, "</tool_call><|im_end|>");
}

static void tool_result_spans(span_list *l, const char *result_json)
{
    l->n = 0;
    lit(l, "\n<|im_start|>user\n<tool_result>");
    untrusted(l, result_json);
    lit(l, "</tool_result><|im_end|>\n<|im_start|>assistant\n");
}

static void render(nd_buf *out, const span_list *l)
{
    for (size_t i = 0; i < l->n; i++) nd_buf_append(out, l->s[i].text, l->s[i].len);
}

/* The strings are the spans joined: one definition of the layout. */
void nd_chat_render_prompt(nd_buf *out, const char *system, const char *tools_json, const char *query)
{
    span_list l;
    prompt_spans(&l, system, tools_json, query);
    render(out, &l);
}

void nd_chat_render_target(nd_buf *out, const char *reasoning, const char *answers_json)
{
    span_list l;
    target_spans(&l, reasoning, answers_json);
    render(out, &l);
}

void nd_chat_render_tool_result(nd_buf *out, const char *result_json)
{
    span_list l;
    tool_result_spans(&l, result_json);
    render(out, &l);
}

/* Encode one segment's spans and append the ids (and mask values when mask is non-NULL). */
static int append_segment(nd_tokenizer *t, const span_list *l, nd_ids *ids, nd_ids *mask, int mask_value,
                          needle_error *err)
{
    size_t before = ids->len;
    int rc = nd_tokenizer_encode_spans(t, l->s, l->n, ids, err);
    if (rc) return rc;
    if (mask)
        for (size_t i = before; i < ids->len; i++)
            if (nd_ids_push(mask, mask_value)) return nd_errorf(err, NEEDLE_ENOMEM, "chat: out of memory");
    return 0;
}

static int push_special(nd_ids *ids, nd_ids *mask, int id, int mask_value, const char *name, needle_error *err)
{
    if (id < 0) return nd_errorf(err, NEEDLE_EINVAL, "chat: the tokenizer has no %s id", name);
    if (nd_ids_push(ids, id) || (mask && nd_ids_push(mask, mask_value)))
        return nd_errorf(err, NEEDLE_ENOMEM, "chat: out of memory");
    return 0;
}

int nd_chat_prompt_ids(nd_tokenizer *t, const char *system, const char *tools_json, const char *query, nd_ids *ids,
                       needle_error *err)
{
    ids->len = 0;
    span_list l;
    prompt_spans(&l, system, tools_json, query);
    int rc = push_special(ids, NULL, nd_tokenizer_bos(t), 0, "BOS", err);
    if (!rc) rc = append_segment(t, &l, ids, NULL, 0, err);
    return rc;
}

int nd_chat_build_ids(nd_tokenizer *t, const nd_chat_example *ex, nd_ids *ids, nd_ids *mask, size_t *prompt_len,
                      needle_error *err)
{
    ids->len = 0;
    mask->len = 0;
    span_list l;
    int rc = push_special(ids, mask, nd_tokenizer_bos(t), 0, "BOS", err);
    if (!rc) {
        prompt_spans(&l, ex->system, ex->tools_json, ex->query);
        rc = append_segment(t, &l, ids, mask, 0, err);
    }
    if (!rc && prompt_len) *prompt_len = ids->len;
    if (!rc) {
        target_spans(&l, ex->reasoning, ex->answers_json);
        rc = append_segment(t, &l, ids, mask, 1, err);
    }
    if (!rc) rc = push_special(ids, mask, nd_tokenizer_eos(t), 1, "EOS", err);
    return rc;
}

int nd_chat_append_tool_result(nd_tokenizer *t, const char *result_json, nd_ids *ids, needle_error *err)
{
    span_list l;
    tool_result_spans(&l, result_json);
    return append_segment(t, &l, ids, NULL, 0, err);
}
