/* test_said_choice.c - an optional enum value the request names is added to
 * the call (src/agent/said_choice.h): single and multi-word values, case,
 * whole words only, what is left alone (two values said, a required or
 * present argument, a word inside a copied value, two calls, non-enum
 * strings), the path list, and the envelope through the public API. */
#include <stdlib.h>
#include <string.h>

#include "agent/said_choice.h"
#include "check.h"
#include "core/json.h"
#include "needle.h"

static const char *TOOLS =
    "[{\"name\":\"set_climate\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"temperature\":{\"type\":\"number\"},"
    "\"fan\":{\"type\":\"string\",\"enum\":[\"low\",\"medium\",\"high\",\"auto\"]},"
    "\"zone\":{\"type\":\"string\",\"enum\":[\"driver\",\"rear seats\"]},"
    "\"mode\":{\"type\":\"string\",\"enum\":[\"eco\",\"comfort\"]},"
    "\"note\":{\"type\":\"string\"},"
    "\"code\":{\"type\":\"string\",\"enum\":[\"high\"],\"pattern\":\"^h\"}},"
    "\"required\":[\"temperature\",\"mode\"]}},"
    "{\"name\":\"send_message\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"text\":{\"type\":\"string\"},\"channel\":{\"type\":\"string\",\"enum\":[\"sms\",\"high priority\"]}}}}]";

/* The calls after adding the choices said in request, written compactly, with
 * the paths list after a '|' (or "(error)"). */
static const char *add(const char *calls_json, const char *request)
{
    static char out[1024];
    nd_json *calls = NULL, *tools = NULL;
    needle_error err;
    snprintf(out, sizeof out, "(error)");
    if (nd_json_parse(calls_json, strlen(calls_json), NULL, &calls, &err) == 0 &&
        nd_json_parse(TOOLS, strlen(TOOLS), NULL, &tools, &err) == 0) {
        nd_buf paths, b;
        nd_buf_init(&paths);
        nd_buf_init(&b);
        int np = 0;
        int n = nd_add_said_choices(calls, tools, request, &paths, &np);
        nd_buf_puts(&paths, np ? "]" : "[]");
        nd_json_write(&b, calls, 0);
        if (n == np) snprintf(out, sizeof out, "%s|%s", b.data, paths.data);
        nd_buf_free(&paths);
        nd_buf_free(&b);
    }
    nd_json_free(calls);
    nd_json_free(tools);
    return out;
}

#define ADDS(calls, req, want) CHECKF(strcmp(add(calls, req), want) == 0, "%s -> %s", req, add(calls, req))

static const char *CLIMATE = "[{\"name\":\"set_climate\",\"arguments\":{\"temperature\":19.5,\"mode\":\"eco\"}}]";

static void test_choices_said_are_added(void)
{
    ADDS(CLIMATE, "climate to 19.5 with the fan on high",
         "[{\"name\":\"set_climate\",\"arguments\":{\"temperature\":19.5,\"mode\":\"eco\",\"fan\":\"high\"}}]"
         "|[\"set_climate.fan\"]");
    /* case ignored, punctuation around the word, a multi-word value with any spacing */
    ADDS(CLIMATE, "Fan: HIGH, and warm the Rear   Seats please",
         "[{\"name\":\"set_climate\",\"arguments\":{\"temperature\":19.5,\"mode\":\"eco\",\"fan\":\"high\","
         "\"zone\":\"rear seats\"}}]|[\"set_climate.fan\",\"set_climate.zone\"]");
}

static void test_what_is_left_alone(void)
{
    const char *same = "[{\"name\":\"set_climate\",\"arguments\":{\"temperature\":19.5,\"mode\":\"eco\"}}]|[]";
    ADDS(CLIMATE, "climate to 19.5 please", same);            /* nothing said */
    ADDS(CLIMATE, "fan low, no, high", same);                  /* two values said: no choice */
    ADDS(CLIMATE, "the highest setting", same);                /* not a whole word */
    ADDS(CLIMATE, "rear seat heating", same);                  /* part of a multi-word value */
    ADDS(CLIMATE, "comfort mode at 19.5", same);               /* required (present anyway) */
    /* an argument the call has is kept as the model wrote it */
    ADDS("[{\"name\":\"set_climate\",\"arguments\":{\"temperature\":19.5,\"mode\":\"eco\",\"fan\":\"low\"}}]",
         "fan on high", "[{\"name\":\"set_climate\",\"arguments\":{\"temperature\":19.5,\"mode\":\"eco\",\"fan\":\"low\"}}]|[]");
    /* the word is part of a value the call already has */
    ADDS("[{\"name\":\"set_climate\",\"arguments\":{\"temperature\":19.5,\"mode\":\"eco\",\"note\":\"fan on high\"}}]",
         "note: fan on high",
         "[{\"name\":\"set_climate\",\"arguments\":{\"temperature\":19.5,\"mode\":\"eco\",\"note\":\"fan on high\"}}]|[]");
    ADDS("[{\"name\":\"send_message\",\"arguments\":{\"text\":\"send it high priority\"}}]", "text: send it high priority",
         "[{\"name\":\"send_message\",\"arguments\":{\"text\":\"send it high priority\"}}]|[]");
    /* two calls: the word may belong to the other action */
    ADDS("[{\"name\":\"set_climate\",\"arguments\":{\"temperature\":19.5,\"mode\":\"eco\"}},"
         "{\"name\":\"send_message\",\"arguments\":{\"text\":\"hi\"}}]",
         "fan high and text hi",
         "[{\"name\":\"set_climate\",\"arguments\":{\"temperature\":19.5,\"mode\":\"eco\"}},"
         "{\"name\":\"send_message\",\"arguments\":{\"text\":\"hi\"}}]|[]");
    /* undeclared tools and empty lists */
    ADDS("[{\"name\":\"other\",\"arguments\":{}}]", "fan high", "[{\"name\":\"other\",\"arguments\":{}}]|[]");
    ADDS("[]", "fan high", "[]|[]");
}

/* Through the public API: a tool whose optional enum the request names. */
static void test_envelope_reports_the_added_choice(void)
{
    needle_model *m = NULL;
    needle_error err = {0};
    needle_model_options mo = {.threads = 1};
    CHECKF(needle_model_open("models/needle-default.cact", NULL, &mo, &m, &err) == 0, "%s", err.message);
    if (!m) return;
    const char *tools = "[{\"name\":\"start_vacuum\",\"description\":\"Start the robot vacuum\",\"parameters\":{"
                        "\"type\":\"object\",\"properties\":{\"room\":{\"type\":\"string\"},\"mode\":{\"type\":\"string\","
                        "\"enum\":[\"quiet\",\"turbo\"]}},\"required\":[\"room\"]}}]";
    needle_session_options so = {.tools_json = tools};
    needle_session *s = NULL;
    CHECK(needle_session_open(m, &so, &s, &err) == 0);
    char *env = NULL;
    if (s) CHECK(needle_session_send(s, "vacuum the hallway on turbo", &env, &err) == 0);
    /* whatever the model writes for the room, a call that left the mode out gets "turbo" */
    const char *fc = env ? strstr(env, "\"function_calls\":[{") : NULL;
    CHECKF(fc && strstr(env, "\"mode\":\"turbo\""), "%s", env ? env : "(none)");
    if (env && strstr(env, "\"completed\":[\"start_vacuum.mode\"]"))
        CHECK(strstr(env, "\"mode\":\"turbo\"}}]") != NULL); /* added after the model's own arguments */
    needle_free(env);
    needle_session_close(s);
    needle_model_close(m);
}

int main(void)
{
    RUN(test_choices_said_are_added);
    RUN(test_what_is_left_alone);
    RUN(test_envelope_reports_the_added_choice);
    return check_summary();
}
