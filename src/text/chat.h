/* chat.h - the chat layouts of SPEC sections 7 and 12: prompt and target
 * strings, the training ids with their loss mask, and the project's
 * multi-turn layout.  Two single-turn layouts, one renderer (a parameter):
 *
 * 2.0.8 (NEEDLE_LAYOUT_2_0_8; what the released Needle 2 weights and the
 * bundled model were trained on):
 *   prompt = [<|im_start|>system\n SYSTEM <|im_end|>\n]            (only when SYSTEM is non-empty)
 *            <|im_start|>user\n<tools> TOOLS </tools>\n QUERY <|im_end|>\n<|im_start|>assistant\n
 *   target = <think> REASONING </think>\n<tool_call> ANSWERS </tool_call><|im_end|>
 *   TOOLS and ANSWERS compact JSON with non-ASCII as \uXXXX.
 * 2.0.15 (NEEDLE_LAYOUT_2_0_15; cactus-needle 2.0.15 and Needle 3):
 *   SYSTEM and REASONING are stripped of surrounding whitespace; the system
 *   block appears only when the stripped SYSTEM is non-empty; the target is
 *   [<think>\n REASONING \n</think>\n] <tool_call> ANSWERS </tool_call><|im_end|>
 *   with the think block only when the stripped REASONING is non-empty;
 *   TOOLS and ANSWERS compact JSON in raw UTF-8.
 * Both: ids = [BOS] + encode(prompt) + encode(target) + [EOS].
 * prompt and target are encoded separately, so the target starts with its own
 * U+2581 piece; the loss covers the target's tokens and EOS only.
 * TOOLS and ANSWERS must already be compact JSON (separators "," and ":",
 * key order kept, escaped as nd_chat_json_ascii says): they are inserted verbatim.
 * Everything the caller supplies (SYSTEM, TOOLS, QUERY, RESULT_JSON, and in
 * training rows REASONING and ANSWERS) is encoded as plain text: a marker
 * spelled inside it is ordinary characters, never a control id
 * (nd_tokenizer_encode_spans), so untrusted text cannot fake a turn boundary.
 *
 * Multi-turn (defined by this project; the released engine's is not public).
 * An assistant turn ends at its <|im_end|> (the stop token).  A tool's result
 * goes back as a user turn, followed by the opening of the next assistant turn:
 *
 *   \n<|im_start|>user\n<tool_result>RESULT_JSON</tool_result><|im_end|>\n<|im_start|>assistant\n
 *
 * The leading "\n" closes the previous assistant line, as every earlier turn
 * ends with "<|im_end|>\n".  The segment is encoded on its own (like the
 * target), so its ids start with a lone U+2581 piece, and it is appended to
 * the ids of the conversation so far; the model then generates the next
 * target (<think>...</think>\n<tool_call>...</tool_call><|im_end|>), or a
 * final answer.  RESULT_JSON is compact JSON like TOOLS.
 */
#ifndef ND_CHAT_H
#define ND_CHAT_H

#include <stddef.h>

#include "core/buf.h"
#include "needle.h"
#include "text/tokenizer.h"

/* Every `layout` argument below is a concrete layout, NEEDLE_LAYOUT_2_0_8 (0
 * counts as 2.0.8) or NEEDLE_LAYOUT_2_0_15.  What NEEDLE_LAYOUT_AUTO means for a model of Needle generation `needle_version` (2 or 3). */
int nd_chat_layout_resolve(int requested, int needle_version);
/* "auto", "2.0.8", "2.0.15" <-> NEEDLE_LAYOUT_*; parse returns -1 for anything else. */
int nd_chat_layout_parse(const char *name);
const char *nd_chat_layout_name(int layout);
/* Whether the layout's JSON (tools, answers, tool results) escapes non-ASCII as \uXXXX. */
int nd_chat_json_ascii(int layout);

typedef struct nd_chat_example {
    int layout;               /* NEEDLE_LAYOUT_2_0_8 (also 0) or NEEDLE_LAYOUT_2_0_15 */
    const char *system;       /* NULL or "" for none */
    const char *tools_json;   /* compact JSON array of tool schemas */
    const char *query;        /* the user's text */
    const char *reasoning;    /* NULL or "" for none */
    const char *answers_json; /* compact JSON array of calls; "[]" when off-topic */
} nd_chat_example;

/* Append the prompt / target / tool-result strings to out (NULL strings count as ""). */
void nd_chat_render_prompt(nd_buf *out, int layout, const char *system, const char *tools_json, const char *query);
void nd_chat_render_target(nd_buf *out, int layout, const char *reasoning, const char *answers_json);
void nd_chat_render_tool_result(nd_buf *out, const char *result_json);

/* Build ids = [BOS] + enc(prompt) + enc(target) + [EOS] into ids (cleared
 * first) and the matching 0/1 loss mask into mask (same length; 1 on target
 * tokens and EOS).  *prompt_len (may be NULL) receives 1 + len(enc(prompt)),
 * the position of the first target token. */
int nd_chat_build_ids(nd_tokenizer *t, const nd_chat_example *ex, nd_ids *ids, nd_ids *mask, size_t *prompt_len,
                      needle_error *err);
/* Only the prompt's ids, [BOS] + enc(prompt), for inference (ids cleared first). */
int nd_chat_prompt_ids(nd_tokenizer *t, int layout, const char *system, const char *tools_json, const char *query,
                       nd_ids *ids, needle_error *err);
/* Append enc(tool-result segment) to ids (the multi-turn layout above). */
int nd_chat_append_tool_result(nd_tokenizer *t, const char *result_json, nd_ids *ids, needle_error *err);

#endif
