/* api_turn.c - needle_session_turn (include/needle.h): a turn with its own
 * token budget, which bindings need for a per-call max_new_tokens. */
#include "agent/session.h"
#include "core/error.h"
#include "needle.h"

int needle_session_turn(needle_session *s, int is_tool_result, const char *text, int max_new_tokens, char **envelope,
                        needle_error *err)
{
    if (!s) return nd_errorf(err, NEEDLE_EINVAL, "session: NULL handle");
    if (is_tool_result != 0 && is_tool_result != 1)
        return nd_errorf(err, NEEDLE_EINVAL, "session: is_tool_result must be 0 or 1 (got %d)", is_tool_result);
    return nd_session_turn(s, is_tool_result ? ND_TURN_TOOL_RESULT : ND_TURN_USER, text, max_new_tokens, envelope,
                           err);
}
