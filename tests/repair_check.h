/* repair_check.h - what the value-repair tests share (test_name_span,
 * test_said_choice, test_clock_time, test_said_number, test_said_quantity,
 * test_said_date, test_said_list, test_said_colour, test_near_duplicate, test_ask_again,
 * test_lean_call): run one repair, check or
 * dropping rule on a call list and show the result, and
 * send requests to the bundled model through the public API. */
#ifndef REPAIR_CHECK_H
#define REPAIR_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/json.h"
#include "needle.h"

/* A check on a call list that changes nothing (nd_refusal_signs, nd_made_up_call): 1 a sign, 0 none,
 * -1 out of memory. */
typedef int (*sign_fn)(const nd_json *calls, const nd_json *tools, const char *request);

/* fn on calls_json under tools_json for request; -2 when a text does not parse. */
static inline int sign_apply(sign_fn fn, const char *tools_json, const char *calls_json, const char *request)
{
    nd_json *calls = NULL, *tools = NULL;
    needle_error err;
    int r = -2;
    if (nd_json_parse(calls_json, strlen(calls_json), NULL, &calls, &err) == 0 &&
        nd_json_parse(tools_json, strlen(tools_json), NULL, &tools, &err) == 0)
        r = fn(calls, tools, request);
    nd_json_free(calls);
    nd_json_free(tools);
    return r;
}

/* One repair: changes calls (parsed) under tools, appends to the paths list,
 * returns how many arguments it changed or -1. */
typedef int (*repair_fn)(nd_json *calls, const nd_json *tools, nd_buf *paths, int *n_paths, void *ctx);

/* The calls after the repair, written compactly, then '|' and the paths list
 * ("[]" when none); "(error)" when a text does not parse, the repair fails
 * or its count disagrees with the paths it listed. */
static inline const char *repair_apply(const char *tools_json, const char *calls_json, repair_fn fn, void *ctx)
{
    static char out[1024];
    nd_json *calls = NULL, *tools = NULL;
    needle_error err;
    snprintf(out, sizeof out, "(error)");
    if (nd_json_parse(calls_json, strlen(calls_json), NULL, &calls, &err) == 0 &&
        nd_json_parse(tools_json, strlen(tools_json), NULL, &tools, &err) == 0) {
        nd_buf paths, b;
        nd_buf_init(&paths);
        nd_buf_init(&b);
        int np = 0;
        int n = fn(calls, tools, &paths, &np, ctx);
        nd_buf_puts(&paths, np ? "]" : "[]");
        nd_json_write(&b, calls, 0);
        if (n >= 0 && n == np && b.data && paths.data) snprintf(out, sizeof out, "%s|%s", b.data, paths.data);
        nd_buf_free(&paths);
        nd_buf_free(&b);
    }
    nd_json_free(calls);
    nd_json_free(tools);
    return out;
}

/* A check that names one argument outside the schema without changing the
 * calls (nd_clock_time_outside, nd_colour_outside, nd_choice_outside): the
 * "tool.key" it wrote to outside, "" when none. */
typedef int (*outside_fn)(nd_json *calls, const nd_json *tools, const char *request, char *outside, size_t outside_size);

/* The "tool.key" the check names for calls and request under tools ("" for
 * none); "(error)" when a text does not parse, and a note when the check
 * changed the calls or its return value disagrees with what it wrote. */
static inline const char *outside_apply(const char *tools_json, const char *calls_json, const char *request, outside_fn fn)
{
    static char out[260];
    nd_json *calls = NULL, *tools = NULL;
    needle_error err;
    snprintf(out, sizeof out, "(error)");
    if (nd_json_parse(calls_json, strlen(calls_json), NULL, &calls, &err) == 0 &&
        nd_json_parse(tools_json, strlen(tools_json), NULL, &tools, &err) == 0) {
        nd_buf before, after;
        nd_buf_init(&before);
        nd_buf_init(&after);
        nd_json_write(&before, calls, 0);
        int r = fn(calls, tools, request, out, sizeof out);
        nd_json_write(&after, calls, 0);
        if (r != (out[0] != '\0') || !before.data || !after.data || strcmp(before.data, after.data))
            snprintf(out, sizeof out, "(changed the calls, or returned %d with that name)", r);
        nd_buf_free(&before);
        nd_buf_free(&after);
    }
    nd_json_free(calls);
    nd_json_free(tools);
    return out;
}

/* A rule that drops calls or arguments (nd_drop_near_duplicates,
 * nd_drop_unsaid_lists, ...): changes calls (parsed) under tools (NULL when
 * tools_json is NULL), returns how many it dropped or -1. */
typedef int (*drop_fn)(nd_json *calls, const nd_json *tools, void *ctx);

/* The calls after the rule, written compactly, then '|' and how many it
 * dropped; "(error)" when a text does not parse. */
static inline const char *drop_apply(const char *tools_json, const char *calls_json, drop_fn fn, void *ctx)
{
    static char out[1024];
    nd_json *calls = NULL, *tools = NULL;
    needle_error err;
    snprintf(out, sizeof out, "(error)");
    if (nd_json_parse(calls_json, strlen(calls_json), NULL, &calls, &err) == 0 &&
        (!tools_json || nd_json_parse(tools_json, strlen(tools_json), NULL, &tools, &err) == 0)) {
        int n = fn(calls, tools, ctx);
        nd_buf b;
        nd_buf_init(&b);
        nd_json_write(&b, calls, 0);
        if (b.data) snprintf(out, sizeof out, "%s|%d", b.data, n);
        nd_buf_free(&b);
    }
    nd_json_free(calls);
    nd_json_free(tools);
    return out;
}

/* One string argument after a repair: the call {"name":tool,"arguments":
 * {key:value, rest}} (rest: more members, "" for none) is repaired for ctx
 * (the request), and the key's value is returned as written (JSON escapes
 * kept), followed by " *" when the repair listed an argument. */
static inline const char *repair_string_after(const char *tools, repair_fn fn, void *ctx, const char *tool,
                                              const char *key, const char *value, const char *rest)
{
    static char calls[1024], out[1024];
    snprintf(calls, sizeof calls, "[{\"name\":\"%s\",\"arguments\":{\"%s\":\"%s\"%s%s}}]", tool, key, value,
             rest[0] ? "," : "", rest);
    const char *r = repair_apply(tools, calls, fn, ctx);
    char open[64];
    snprintf(open, sizeof open, "\"%s\":\"", key);
    const char *t = strstr(r, open);
    if (!t) return r;
    t += strlen(open);
    const char *e = t;
    while (*e && !(*e == '"' && e[-1] != '\\')) e++;
    snprintf(out, sizeof out, "%.*s%s", (int)(e - t), t, strstr(r, "|[]") ? "" : " *");
    return out;
}

/* The demo tools (models/tools.json), read once. */
static inline const char *demo_tools(void)
{
    static char demo[1 << 16];
    if (!demo[0]) {
        FILE *f = fopen("models/tools.json", "rb");
        size_t n = f ? fread(demo, 1, sizeof demo - 1, f) : 0;
        if (f) fclose(f);
        demo[n] = 0;
    }
    return demo;
}

/* The envelope of one first request to a session of the bundled model with
 * options so (tools_json NULL: the demo tools); needle_free it. */
static inline char *first_envelope(needle_session_options so, const char *request)
{
    needle_model_options mo = {.threads = 1};
    needle_model *m = NULL;
    needle_error err = {0};
    CHECKF(needle_model_open("models/needle-default.cact", NULL, &mo, &m, &err) == 0, "open: %s", err.message);
    if (!m) return NULL;
    if (!so.tools_json) so.tools_json = demo_tools();
    needle_session *s = NULL;
    char *env = NULL;
    CHECKF(needle_session_open(m, &so, &s, &err) == 0, "session: %s", err.message);
    if (s) CHECKF(needle_session_send(s, request, &env, &err) == 0 && env, "send: %s", err.message);
    needle_session_close(s);
    needle_model_close(m);
    return env;
}

/* Does opening a session of the bundled model with so (demo tools) fail
 * with NEEDLE_EINVAL and a message naming `option`? */
static inline int option_refused(needle_session_options so, const char *option)
{
    needle_model_options mo = {.threads = 1};
    needle_model *m = NULL;
    needle_error err = {0};
    if (needle_model_open("models/needle-default.cact", NULL, &mo, &m, &err) != 0) return 0;
    so.tools_json = demo_tools();
    needle_session *s = NULL;
    int refused = needle_session_open(m, &so, &s, &err) == NEEDLE_EINVAL && strstr(err.message, option) != NULL;
    needle_session_close(s);
    needle_model_close(m);
    return refused;
}

/* Send the requests in turn to one session of the bundled model (tools NULL:
 * the demo tools; grounded as needle_session_options.grounded_decoding) and
 * return the last envelope (needle_free it), or NULL with a failed check. */
static inline char *bundled_envelope(const char *tools, const char *system, int grounded, const char *const *requests, int n)
{
    needle_model_options mo = {.threads = 1};
    needle_model *m = NULL;
    needle_error err = {0};
    CHECKF(needle_model_open("models/needle-default.cact", NULL, &mo, &m, &err) == 0, "open: %s", err.message);
    if (!m) return NULL;
    needle_session_options so = {.tools_json = tools ? tools : demo_tools(), .system = system, .grounded_decoding = grounded};
    needle_session *s = NULL;
    CHECKF(needle_session_open(m, &so, &s, &err) == 0, "session: %s", err.message);
    char *env = NULL;
    for (int i = 0; s && i < n; i++) {
        needle_free(env);
        env = NULL;
        CHECKF(needle_session_send(s, requests[i], &env, &err) == 0 && env, "send: %s", err.message);
    }
    needle_session_close(s);
    needle_model_close(m);
    return env;
}

#endif
