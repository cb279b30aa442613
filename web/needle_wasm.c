/* needle_wasm.c - the few entry points the JavaScript API (web/needle.mjs)
 * calls: flat arguments only (pointers to UTF-8 strings and bytes), so no
 * JavaScript code depends on the layout of a C struct.  Built only by
 * `make wasm`; it uses nothing but the public API of needle.h.  Errors are
 * kept in one buffer that needle_wasm_error returns (the build is single-
 * threaded: one model call at a time). */
#include <stdlib.h>
#include <string.h>

#include "needle.h"

static needle_error last;

const char *needle_wasm_error(void) { return last.message; }

/* A model from the bytes of a .cact (copied); NULL on error. */
needle_model *needle_wasm_model_open(const void *bytes, int size)
{
    needle_model *m = NULL;
    needle_model_options o = {.threads = 1};
    memset(&last, 0, sizeof last);
    if (needle_model_open_memory(bytes, (size_t)size, &o, &m, &last) != 0) return NULL;
    return m;
}

void needle_wasm_model_close(needle_model *m) { needle_model_close(m); }

/* A session with the given tools (a JSON array; NULL or "" for none) and
 * system facts (NULL or ""); max_new_tokens <= 0: the default. */
needle_session *needle_wasm_session_open(needle_model *m, const char *tools_json, const char *system, int max_new_tokens)
{
    needle_session *s = NULL;
    needle_session_options o = {.tools_json = tools_json && *tools_json ? tools_json : NULL,
                                .system = system && *system ? system : NULL,
                                .max_new_tokens = max_new_tokens > 0 ? max_new_tokens : 0};
    memset(&last, 0, sizeof last);
    if (needle_session_open(m, &o, &s, &last) != 0) return NULL;
    return s;
}

void needle_wasm_session_close(needle_session *s) { needle_session_close(s); }

void needle_wasm_session_reset(needle_session *s) { needle_session_reset(s); }

/* One turn (is_tool_result 0: user text; 1: a tool's JSON result): the
 * envelope, to be freed with needle_wasm_free; NULL on error. */
char *needle_wasm_send(needle_session *s, int is_tool_result, const char *text)
{
    char *env = NULL;
    memset(&last, 0, sizeof last);
    int rc = needle_session_turn(s, is_tool_result, text, 0, &env, &last);
    if (rc != 0 && !env) return NULL;
    return env;
}

void needle_wasm_free(void *p) { needle_free(p); }
