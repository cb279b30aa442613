/* test_said_colour.c - a colour the tool's colour choices lack
 * (src/agent/said_colour.h): which arguments are colour choices, which words
 * of the request are colours outside them, what is not judged (shades of a
 * colour the enum has, colours inside a value the call holds, two calls),
 * that the calls are never changed; then the bundled model end to end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/said_colour.h"
#include "repair_check.h"

static const char *TOOLS =
    "[{\"name\":\"set_lights\",\"parameters\":{\"type\":\"object\",\"properties\":{\"room\":{\"type\":\"string\"},"
    "\"color\":{\"type\":\"string\",\"enum\":[\"white\",\"warm white\",\"red\",\"green\",\"blue\"]}},\"required\":[\"room\"]}},"
    "{\"name\":\"paint\",\"parameters\":{\"type\":\"object\",\"properties\":{\"shade\":{\"type\":\"string\","
    "\"enum\":[\"Red\",\"Yellow\",\"Black\"]}}}},"
    "{\"name\":\"set_mode\",\"parameters\":{\"type\":\"object\",\"properties\":{\"mode\":{\"type\":\"string\","
    "\"enum\":[\"eco\",\"red alert\"]}}}}]";

/* The "tool.key" nd_colour_outside names ("" for none). */
static const char *outside_of(const char *calls_json, const char *request)
{
    return outside_apply(TOOLS, calls_json, request, nd_colour_outside);
}

#define OUTSIDE(calls, req, want) CHECKF(strcmp(outside_of(calls, req), want) == 0, "%s -> %s, want %s", req, outside_of(calls, req), want)

static const char *LIGHTS = "[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"hallway\"}}]";

static void test_colours_outside(void)
{
    OUTSIDE(LIGHTS, "change the hallway lights to gold", "set_lights.color");
    OUTSIDE(LIGHTS, "make the hallway lights Turquoise at 50%", "set_lights.color");
    OUTSIDE("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"hallway\",\"color\":\"red\"}}]",
            "hallway lights in coral color", "set_lights.color"); /* whatever colour the model wrote */
    OUTSIDE(LIGHTS, "hallway lights purple", "set_lights.color");  /* a basic colour the enum lacks */
    /* a choice found by its values, not its key ("shade": two basic colours) */
    OUTSIDE("[{\"name\":\"paint\",\"arguments\":{}}]", "paint it magenta", "paint.shade");
}

static void test_not_judged(void)
{
    OUTSIDE(LIGHTS, "hallway lights blue", "");                   /* the enum has it */
    OUTSIDE(LIGHTS, "hallway lights warm white", "");
    OUTSIDE(LIGHTS, "hallway lights lime green", "");             /* a shade of a colour it has */
    OUTSIDE(LIGHTS, "hallway lights on please", "");              /* no colour said */
    OUTSIDE("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"Violet's room\"}}]", "lights on in Violet's room", "");
    OUTSIDE("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"gold room\"}}]", "the gold room lights on", "");
    /* an enum that is no colour choice ("red alert" alone is one basic colour), two calls, an unknown tool */
    OUTSIDE("[{\"name\":\"set_mode\",\"arguments\":{\"mode\":\"eco\"}}]", "eco mode, the orange one", "");
    OUTSIDE("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"a\"}},{\"name\":\"set_lights\",\"arguments\":{\"room\":\"b\"}}]",
            "lights a and b gold", "");
    OUTSIDE("[{\"name\":\"other\",\"arguments\":{}}]", "gold", "");
    OUTSIDE(LIGHTS, "", "");
}

/* Through the public API: no call, the colour choice named outside the schema. */
static void test_bundled_model(void)
{
    const char *req[] = {"change the hallway lights to gold"};
    char *env = bundled_envelope(NULL, NULL, 0, req, 1);
    CHECKF(env && strstr(env, "\"function_calls\":[]") && strstr(env, "\"out_of_schema\":[\"set_lights.color\"]"), "%s",
           env ? env : "(none)");
    needle_free(env);
    const char *ok[] = {"make the bedroom lights blue"};
    env = bundled_envelope(NULL, NULL, 0, ok, 1);
    CHECKF(env && strstr(env, "\"color\":\"blue\"") && strstr(env, "\"out_of_schema\":[]"), "%s", env ? env : "(none)");
    needle_free(env);
}

int main(void)
{
    RUN(test_colours_outside);
    RUN(test_not_judged);
    RUN(test_bundled_model);
    return check_summary();
}
