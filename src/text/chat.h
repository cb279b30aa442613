/* chat.h - the chat layout of SPEC section 7: prompt and target strings, the
 * training ids with their loss mask, and the project's multi-turn layout.
 *
 * Single turn (what the released model was trained on):
 *   prompt = [<|im_start|>system\n SYSTEM <|im_end|>\n]            (only when SYSTEM is non-empty)
 *            <|im_start|>user\n<tools> TOOLS </tools>\n QUERY <|im_end|>\n<|im_start|>assistant\n
 *   target = <think> REASONING </think>\n<tool_call> ANSWERS </tool_call><|im_end|>
 *   ids    = [BOS] + encode(prompt) + encode(target) + [EOS]
 * prompt and target are encoded separately, so the target starts with its own
 * U+2581 piece; the loss covers the target's tokens and EOS only.
 * TOOLS and ANSWERS must already be compact JSON (separators "," and ":",
 * non-ASCII as \uXXXX, key order kept): they are inserted verbatim.
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

typedef struct nd_chat_example {
    const char *system;       /* NULL or "" for none */
    const char *tools_json;   /* compact JSON array of tool schemas */
    const char *query;        /* the user's text */
    const char *reasoning;    /* NULL or "" for none */
    const char *answers_json; /* compact JSON array of calls; "[]" when off-topic */
} nd_chat_example;

/* Append the prompt / target / tool-result strings to out (NULL strings count as ""). */
void nd_chat_render_prompt(nd_buf *out, const char *system, const char *tools_json, const char *query);
void nd_chat_render_target(nd_buf *out, const char *reasoning, const char *answers_json);
void nd_chat_render_tool_result(nd_buf *out, const char *result_json);

/* Build ids = [BOS] + enc(prompt) + enc(target) + [EOS] into ids (cleared
 * first) and the matching 0/1 loss mask into mask (same length; 1 on target
 * tokens and EOS).  *prompt_len (may be NULL) receives 1 + len(enc(prompt)),
 * the position of the first target token. */
int nd_chat_build_ids(nd_tokenizer *t, const nd_chat_example *ex, nd_ids *ids, nd_ids *mask, size_t *prompt_len,
                      needle_error *err);
/* Only the prompt's ids, [BOS] + enc(prompt), for inference (ids cleared first). */
int nd_chat_prompt_ids(nd_tokenizer *t, const char *system, const char *tools_json, const char *query, nd_ids *ids,
                       needle_error *err);
/* Append enc(tool-result segment) to ids (the multi-turn layout above). */
int nd_chat_append_tool_result(nd_tokenizer *t, const char *result_json, nd_ids *ids, needle_error *err);

#endif
