/* chat.c - rendering and encoding the chat layout (see chat.h for the layout). */
#include "text/chat.h"

#include <string.h>

#include "core/error.h"

static const char *or_empty(const char *s) { return s ? s : ""; }

void nd_chat_render_prompt(nd_buf *out, const char *system, const char *tools_json, const char *query)
{
    if (system && system[0]) {
        nd_buf_puts(out, "<|im_start|>system\n");
        nd_buf_puts(out, system);
        nd_buf_puts(out, "<|im_end|>\n");
    }
    nd_buf_puts(out, "<|im_start|>user\n<tools>");
    nd_buf_puts(out, or_empty(tools_json));
    nd_buf_puts(out, "</tools>\n");
    nd_buf_puts(out, or_empty(query));
    nd_buf_puts(out, "<|im_end|>\n<|im_start|>assistant\n");
}

void nd_chat_render_target(nd_buf *out, const char *reasoning, const char *answers_json)
{
    nd_buf_puts(out, "<think>");
    nd_buf_puts(out, or_empty(reasoning));
    nd_buf_puts(out, "</think>\n<tool_call>");
    nd_buf_puts(out, or_empty(answers_json));
    nd_buf_puts(out, "</tool_call><|im_end|>");
}

void nd_chat_render_tool_result(nd_buf *out, const char *result_json)
{
    nd_buf_puts(out, "\n<|im_start|>user\n<tool_result>");
    nd_buf_puts(out, or_empty(result_json));
    nd_buf_puts(out, "</tool_result><|im_end|>\n<|im_start|>assistant\n");
}

/* Encode a rendered segment and append its ids (and mask values when mask is non-NULL). */
static int append_segment(nd_tokenizer *t, const nd_buf *text, nd_ids *ids, nd_ids *mask, int mask_value,
                          needle_error *err)
{
    if (text->oom) return nd_errorf(err, NEEDLE_ENOMEM, "chat: out of memory rendering the layout");
    size_t before = ids->len;
    int rc = nd_tokenizer_encode(t, text->data ? text->data : "", text->len, ids, err);
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
    nd_buf b;
    nd_buf_init(&b);
    nd_chat_render_prompt(&b, system, tools_json, query);
    int rc = push_special(ids, NULL, nd_tokenizer_bos(t), 0, "BOS", err);
    if (!rc) rc = append_segment(t, &b, ids, NULL, 0, err);
    nd_buf_free(&b);
    return rc;
}

int nd_chat_build_ids(nd_tokenizer *t, const nd_chat_example *ex, nd_ids *ids, nd_ids *mask, size_t *prompt_len,
                      needle_error *err)
{
    ids->len = 0;
    mask->len = 0;
    nd_buf b;
    nd_buf_init(&b);
    int rc = push_special(ids, mask, nd_tokenizer_bos(t), 0, "BOS", err);
    if (!rc) {
        nd_chat_render_prompt(&b, ex->system, ex->tools_json, ex->query);
        rc = append_segment(t, &b, ids, mask, 0, err);
    }
    if (!rc && prompt_len) *prompt_len = ids->len;
    if (!rc) {
        nd_buf_reset(&b);
        nd_chat_render_target(&b, ex->reasoning, ex->answers_json);
        rc = append_segment(t, &b, ids, mask, 1, err);
    }
    if (!rc) rc = push_special(ids, mask, nd_tokenizer_eos(t), 1, "EOS", err);
    nd_buf_free(&b);
    return rc;
}

int nd_chat_append_tool_result(nd_tokenizer *t, const char *result_json, nd_ids *ids, needle_error *err)
{
    nd_buf b;
    nd_buf_init(&b);
    nd_chat_render_tool_result(&b, result_json);
    int rc = append_segment(t, &b, ids, NULL, 0, err);
    nd_buf_free(&b);
    return rc;
}
