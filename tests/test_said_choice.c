/* test_said_choice.c - an optional enum value the request names is added to
 * the call (src/agent/said_choice.h): single and multi-word values, case,
 * whole words only, a one-word value said in its "-ing" form, what is left alone (two values said, a required or
 * present argument, a word inside a copied value, two calls, non-enum
 * strings), the path list, and the envelope through the public API. */
#include "agent/said_choice.h"
#include "repair_check.h"

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

static int choices(nd_json *calls, const nd_json *tools, nd_buf *paths, int *np, void *request)
{
    return nd_add_said_choices(calls, tools, (const char *)request, paths, np);
}
#define add(calls, req) repair_apply(TOOLS, calls, choices, (void *)(req))

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

/* "heating" says heat, "charging" charge; never a part of another word */
static void test_ing_forms(void)
{
    const char *tools = "[{\"name\":\"set_thermostat\",\"parameters\":{\"type\":\"object\",\"properties\":{"
                        "\"temperature\":{\"type\":\"number\"},\"mode\":{\"type\":\"string\",\"enum\":[\"heat\","
                        "\"cool\",\"charge\"]}}}}]";
    const char *c = "[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":21}}]";
    const char *want[][2] = {
        {"Set the heating to twenty-one", "{\"temperature\":21,\"mode\":\"heat\"}}]|[\"set_thermostat.mode\"]"},
        {"cooling at 21 please", "{\"temperature\":21,\"mode\":\"cool\"}}]|[\"set_thermostat.mode\"]"},
        {"charging at 21", "{\"temperature\":21,\"mode\":\"charge\"}}]|[\"set_thermostat.mode\"]"},
        {"preheating to 21", "{\"temperature\":21}}]|[]"},          /* not the whole word */
        {"heating or cooling, 21", "{\"temperature\":21}}]|[]"},    /* two values said */
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char expect[256];
        snprintf(expect, sizeof expect, "[{\"name\":\"set_thermostat\",\"arguments\":%s", want[i][1]);
        const char *got = repair_apply(tools, c, choices, (void *)want[i][0]);
        CHECKF(strcmp(got, expect) == 0, "%s -> %s", want[i][0], got);
    }
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
    const char *tools = "[{\"name\":\"start_vacuum\",\"description\":\"Start the robot vacuum\",\"parameters\":{"
                        "\"type\":\"object\",\"properties\":{\"room\":{\"type\":\"string\"},\"mode\":{\"type\":\"string\","
                        "\"enum\":[\"quiet\",\"turbo\"]}},\"required\":[\"room\"]}}]";
    const char *req[] = {"vacuum the hallway on turbo"};
    char *env = bundled_envelope(tools, NULL, 0, req, 1);
    /* whatever the model writes for the room, a call that left the mode out gets "turbo" */
    const char *fc = env ? strstr(env, "\"function_calls\":[{") : NULL;
    CHECKF(fc && strstr(env, "\"mode\":\"turbo\""), "%s", env ? env : "(none)");
    if (env && strstr(env, "\"completed\":[\"start_vacuum.mode\"]"))
        CHECK(strstr(env, "\"mode\":\"turbo\"}}]") != NULL); /* added after the model's own arguments */
    needle_free(env);
}

int main(void)
{
    RUN(test_choices_said_are_added);
    RUN(test_ing_forms);
    RUN(test_what_is_left_alone);
    RUN(test_envelope_reports_the_added_choice);
    return check_summary();
}
