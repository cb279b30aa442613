/* chat.c - rendering and encoding the chat layout (see chat.h for the layout). */
#include "text/chat.h"

#include <stdint.h>
#include <string.h>

#include "core/error.h"

static const char *or_empty(const char *s) { return s ? s : ""; }

int nd_chat_layout_resolve(int requested, int needle_version)
{
    if (requested == NEEDLE_LAYOUT_2_0_8 || requested == NEEDLE_LAYOUT_2_0_15) return requested;
    /* auto: Needle 3 was only ever trained on the 2.0.15 layout; a Needle 2
     * file cannot say which it was tuned on, and the released weights and
     * the bundled model were trained on 2.0.8 (README, "Chat layouts") */
    return needle_version >= 3 ? NEEDLE_LAYOUT_2_0_15 : NEEDLE_LAYOUT_2_0_8;
}

int nd_chat_layout_parse(const char *name)
{
    if (!name) return -1;
    if (!strcmp(name, "auto")) return NEEDLE_LAYOUT_AUTO;
    if (!strcmp(name, "2.0.8")) return NEEDLE_LAYOUT_2_0_8;
    if (!strcmp(name, "2.0.15")) return NEEDLE_LAYOUT_2_0_15;
    return -1;
}

const char *nd_chat_layout_name(int layout)
{
    return layout == NEEDLE_LAYOUT_2_0_15 ? "2.0.15" : layout == NEEDLE_LAYOUT_AUTO ? "auto" : "2.0.8";
}

int nd_chat_json_ascii(int layout) { return layout != NEEDLE_LAYOUT_2_0_15; }

/* Python's str.isspace() for one code point (what the 2.0.15 reference's
 * str.strip() removes): the ASCII controls 9-13 and 28-31, space, U+0085,
 * and the Unicode space separators and line/paragraph separators. */
static int py_space(uint32_t c)
{
    return (c >= 9 && c <= 13) || (c >= 28 && c <= 32) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

/* The code point starting at s[i] (valid UTF-8 assumed; a stray byte is
 * taken as itself) and its length. */
static uint32_t utf8_at(const unsigned char *s, size_t n, size_t i, size_t *len)
{
    unsigned char b = s[i];
    size_t k = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 1;
    if (i + k > n) k = 1;
    uint32_t c = k == 1 ? b : (uint32_t)(b & (0x7F >> k));
    for (size_t j = 1; j < k; j++) c = (c << 6) | (s[i + j] & 0x3F);
    *len = k;
    return c;
}

/* text without the surrounding whitespace Python's strip() removes: *len set. */
static const char *strip_py(const char *text, size_t *len)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t n = strlen(text), a = 0, k;
    while (a < n && py_space(utf8_at(s, n, a, &k))) a += k;
    size_t b = n;
    while (b > a) {
        size_t start = b - 1; /* back up to the lead byte of the last code point */
        while (start > a && (s[start] & 0xC0) == 0x80 && b - start < 4) start--;
        if (!py_space(utf8_at(s, n, start, &k)) || start + k != b) break;
        b = start;
    }
    *len = b - a;
    return text + a;
}

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

/* The system or reasoning text as the layout writes it: stripped under 2.0.15. */
static const char *layout_text(int layout, const char *text, size_t *len)
{
    text = or_empty(text);
    if (layout == NEEDLE_LAYOUT_2_0_15) return strip_py(text, len);
    *len = strlen(text);
    return text;
}

static void prompt_spans(span_list *l, int layout, const char *system, const char *tools_json, const char *query)
{
    l->n = 0;
    size_t sn;
    system = layout_text(layout, system, &sn);
    if (sn) {
        lit(l, "<|im_start|>system\n");
        l->s[l->n++] = (nd_tok_span){system, sn, 1};
        lit(l, "<|im_end|>\n");
    }
    lit(l, "<|im_start|>user\n<tools>");
    untrusted(l, tools_json);
    lit(l, "</tools>\n");
    untrusted(l, query);
    lit(l, "<|im_end|>\n<|im_start|>assistant\n");
}

static void target_spans(span_list *l, int layout, const char *reasoning, const char *answers_json)
{
    l->n = 0;
    size_t rn;
    reasoning = layout_text(layout, reasoning, &rn);
    if (layout != NEEDLE_LAYOUT_2_0_15) {
        lit(l, "<think>");
        l->s[l->n++] = (nd_tok_span){reasoning, rn, 1};
        lit(l, "</think>\n<tool_call>");
    } else if (rn) {
        lit(l, "<think>\n");
        l->s[l->n++] = (nd_tok_span){reasoning, rn, 1};
        lit(l, "\n</think>\n<tool_call>");
    } else {
        lit(l, "<tool_call>");
    }
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
void nd_chat_render_prompt(nd_buf *out, int layout, const char *system, const char *tools_json, const char *query)
{
    span_list l;
    prompt_spans(&l, layout, system, tools_json, query);
    render(out, &l);
}

void nd_chat_render_target(nd_buf *out, int layout, const char *reasoning, const char *answers_json)
{
    span_list l;
    target_spans(&l, layout, reasoning, answers_json);
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

int nd_chat_prompt_ids(nd_tokenizer *t, int layout, const char *system, const char *tools_json, const char *query,
                       nd_ids *ids, needle_error *err)
{
    ids->len = 0;
    span_list l;
    prompt_spans(&l, layout, system, tools_json, query);
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
        prompt_spans(&l, ex->layout, ex->system, ex->tools_json, ex->query);
        rc = append_segment(t, &l, ids, mask, 0, err);
    }
    if (!rc && prompt_len) *prompt_len = ids->len;
    if (!rc) {
        target_spans(&l, ex->layout, ex->reasoning, ex->answers_json);
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
