/* test_chat.c - the chat layout (SPEC section 7): rendered strings written
 * out by hand from the SPEC, and ids compared with what the SentencePiece
 * library returns for the same strings (read off the library by hand). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "text/chat.h"

#define MODEL "tests/golden/tok8k.model"

static const char *TOOLS = "[{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}]";
static const char *ANSWERS = "[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Z\\u00fcrich\"}}]";
static const char *SYSTEM = "date: 2026-07-21; locale: en-US";
static const char *QUERY = "weather in Z\xc3\xbcrich?";

static void test_render_strings(void)
{
    nd_buf b;
    nd_buf_init(&b);
    nd_chat_render_prompt(&b, NEEDLE_LAYOUT_2_0_8, NULL, "[]", "hi");
    CHECK(strcmp(b.data, "<|im_start|>user\n<tools>[]</tools>\nhi<|im_end|>\n<|im_start|>assistant\n") == 0);
    nd_buf_reset(&b);
    nd_chat_render_prompt(&b, NEEDLE_LAYOUT_2_0_8, "", "[]", "hi"); /* an empty system is no system turn */
    CHECK(strcmp(b.data, "<|im_start|>user\n<tools>[]</tools>\nhi<|im_end|>\n<|im_start|>assistant\n") == 0);
    nd_buf_reset(&b);
    nd_chat_render_prompt(&b, NEEDLE_LAYOUT_2_0_8, "date: x", "[]", "hi");
    CHECK(strcmp(b.data, "<|im_start|>system\ndate: x<|im_end|>\n<|im_start|>user\n<tools>[]</tools>\nhi<|im_end|>\n"
                         "<|im_start|>assistant\n") == 0);
    nd_buf_reset(&b);
    nd_chat_render_target(&b, NEEDLE_LAYOUT_2_0_8, NULL, "[]");
    CHECK(strcmp(b.data, "<think></think>\n<tool_call>[]</tool_call><|im_end|>") == 0);
    nd_buf_reset(&b);
    nd_chat_render_target(&b, NEEDLE_LAYOUT_2_0_8, "city", "[1]");
    CHECK(strcmp(b.data, "<think>city</think>\n<tool_call>[1]</tool_call><|im_end|>") == 0);
    nd_buf_reset(&b);
    nd_chat_render_tool_result(&b, "{\"temp\":21}");
    CHECK(strcmp(b.data, "\n<|im_start|>user\n<tool_result>{\"temp\":21}</tool_result><|im_end|>\n<|im_start|>assistant\n") == 0);
    nd_buf_free(&b);
}

/* The 2.0.15 layout (SPEC 12), written out by hand: system and reasoning are
 * stripped (Python str.strip(): ASCII and Unicode whitespace), the system
 * block only when something is left, the think block only with reasoning. */
static void test_render_strings_2_0_15(void)
{
    const int L = NEEDLE_LAYOUT_2_0_15;
    nd_buf b;
    nd_buf_init(&b);
    nd_chat_render_prompt(&b, L, " \n\t", "[]", "hi"); /* whitespace only: no system turn */
    CHECK(strcmp(b.data, "<|im_start|>user\n<tools>[]</tools>\nhi<|im_end|>\n<|im_start|>assistant\n") == 0);
    nd_buf_reset(&b);
    /* U+00A0 and U+3000 are whitespace to str.strip(); the query is not stripped */
    nd_chat_render_prompt(&b, L, "\xc2\xa0 date: x\n\xe3\x80\x80", "[]", " hi ");
    CHECK(strcmp(b.data, "<|im_start|>system\ndate: x<|im_end|>\n<|im_start|>user\n<tools>[]</tools>\n hi <|im_end|>\n"
                         "<|im_start|>assistant\n") == 0);
    nd_buf_reset(&b);
    nd_chat_render_target(&b, L, NULL, "[]");
    CHECK(strcmp(b.data, "<tool_call>[]</tool_call><|im_end|>") == 0);
    nd_buf_reset(&b);
    nd_chat_render_target(&b, L, "  \n", "[]");
    CHECK(strcmp(b.data, "<tool_call>[]</tool_call><|im_end|>") == 0);
    nd_buf_reset(&b);
    nd_chat_render_target(&b, L, "\n city \n", "[1]");
    CHECK(strcmp(b.data, "<think>\ncity\n</think>\n<tool_call>[1]</tool_call><|im_end|>") == 0);
    nd_buf_reset(&b);
    /* "\xc3\xa9" (U+00E9) is not whitespace: kept whole at either end */
    nd_chat_render_target(&b, L, "\xc3\xa9t\xc3\xa9", "[]");
    CHECK(strcmp(b.data, "<think>\n\xc3\xa9t\xc3\xa9\n</think>\n<tool_call>[]</tool_call><|im_end|>") == 0);
    nd_buf_free(&b);
    CHECK(nd_chat_json_ascii(NEEDLE_LAYOUT_2_0_8) == 1 && nd_chat_json_ascii(L) == 0);
    CHECK(nd_chat_layout_parse("2.0.15") == L && nd_chat_layout_parse("auto") == 0 && nd_chat_layout_parse("2.1") < 0);
    CHECK(nd_chat_layout_resolve(NEEDLE_LAYOUT_AUTO, 2) == NEEDLE_LAYOUT_2_0_8);
    CHECK(nd_chat_layout_resolve(NEEDLE_LAYOUT_AUTO, 3) == L);
    CHECK(nd_chat_layout_resolve(L, 2) == L);
}

/* SentencePiece (tok8k.model) on the rendered prompt and target of the example above. */
static const int PROMPT_IDS[] = {8071, 4, 1403, 24, 533, 8092, 8071, 8100, 8094, 8100, 8120, 8098, 8094, 8124, 8098, 8100,
                                 8099, 8151, 1728, 8092, 723, 8098, 1129, 5, 24, 4, 893, 24, 8, 826, 485, 371, 709, 8097,
                                 1911, 401, 710, 405, 409, 371, 654, 401, 673, 405, 1355, 405, 409, 371, 500, 727, 2809, 9,
                                 24, 1911, 335, 948, 7514, 8166, 5, 24, 4, 1195, 24};
static const int TARGET_IDS[] = {8071, 6, 1355, 7, 24, 10, 826, 485, 371, 709, 8097, 1911, 401, 1275,
                                 405, 1355, 371, 8156, 8141, 8087, 8094, 8094, 8091, 1327, 350, 1627, 11, 5};
static const int RESULT_IDS[] = {8071, 24, 4, 893, 24, 12, 375, 1015, 307, 8100, 8099, 8136, 13, 5, 24, 4, 1195, 24};
#define COUNT(a) (sizeof a / sizeof a[0])

static void test_build_ids_and_mask(void)
{
    nd_tokenizer *t = NULL;
    needle_error err = {0};
    if (nd_tokenizer_load_spm(MODEL, &t, &err)) {
        CHECKF(0, "%s", err.message);
        return;
    }
    nd_chat_example ex = {NEEDLE_LAYOUT_2_0_8, SYSTEM, TOOLS, QUERY, "city", ANSWERS};
    nd_ids ids, mask;
    nd_ids_init(&ids);
    nd_ids_init(&mask);
    size_t plen = 0;
    int rc = nd_chat_build_ids(t, &ex, &ids, &mask, &plen, &err);
    CHECKF(rc == 0, "%s", err.message);
    size_t np = COUNT(PROMPT_IDS), nt = COUNT(TARGET_IDS);
    CHECKF(ids.len == 1 + np + nt + 1, "len %zu", ids.len);
    CHECK(mask.len == ids.len);
    CHECK(plen == 1 + np);
    if (ids.len == 1 + np + nt + 1 && mask.len == ids.len) {
        CHECK(ids.data[0] == 2);
        CHECK(memcmp(ids.data + 1, PROMPT_IDS, sizeof PROMPT_IDS) == 0);
        CHECK(memcmp(ids.data + 1 + np, TARGET_IDS, sizeof TARGET_IDS) == 0);
        CHECK(ids.data[ids.len - 1] == 1);
        int mask_ok = 1;
        for (size_t i = 0; i < mask.len; i++) mask_ok &= mask.data[i] == (i >= 1 + np ? 1 : 0);
        CHECK(mask_ok);
    }

    /* The prompt alone, for inference, is the first 1+np ids. */
    nd_ids p;
    nd_ids_init(&p);
    CHECK(nd_chat_prompt_ids(t, NEEDLE_LAYOUT_2_0_8, SYSTEM, TOOLS, QUERY, &p, &err) == 0);
    CHECK(p.len == 1 + np && p.data[0] == 2 && memcmp(p.data + 1, PROMPT_IDS, sizeof PROMPT_IDS) == 0);

    /* A tool result segment appended after an assistant turn. */
    size_t before = p.len;
    CHECK(nd_chat_append_tool_result(t, "{\"temp\":21}", &p, &err) == 0);
    CHECK(p.len == before + COUNT(RESULT_IDS) && memcmp(p.data + before, RESULT_IDS, sizeof RESULT_IDS) == 0);

    /* Invalid UTF-8 in the query is the tokenizer's error, passed through. */
    nd_chat_example bad = {NEEDLE_LAYOUT_2_0_8, NULL, "[]", "\xff", NULL, "[]"};
    CHECK(nd_chat_build_ids(t, &bad, &ids, &mask, NULL, &err) == NEEDLE_EUTF8);

    nd_ids_free(&p);
    nd_ids_free(&ids);
    nd_ids_free(&mask);
    nd_tokenizer_free(t);
}

int main(void)
{
    RUN(test_render_strings);
    RUN(test_render_strings_2_0_15);
    RUN(test_build_ids_and_mask);
    return check_summary();
}
