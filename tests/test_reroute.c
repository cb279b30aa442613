/* test_reroute.c - one call to a tool while the request names another tool's
 * choice (src/agent/reroute.h): which tools the sign names (choices of five
 * letters or more, said as words, forms or symbols, that the called tool
 * lacks, not spoken of inside a message), and the bundled model end to end
 * (asked again with those tools alone; off with ask_again). */
#include "agent/reroute.h"
#include "repair_check.h"

static const char *rerouted_under(const char *tools_json, const char *calls_json, const char *request);

/* The names of the tools the sign gives under the demo tools, comma-separated ("" none, "(error)"). */
static const char *rerouted(const char *calls_json, const char *request)
{
    return rerouted_under(demo_tools(), calls_json, request);
}

static const char *rerouted_under(const char *tools_json, const char *calls_json, const char *request)
{
    static char out[256];
    nd_json *calls = NULL, *tools = NULL, *subset = NULL;
    needle_error err;
    snprintf(out, sizeof out, "(error)");
    if (nd_json_parse(calls_json, strlen(calls_json), NULL, &calls, &err) == 0 &&
        nd_json_parse(tools_json, strlen(tools_json), NULL, &tools, &err) == 0) {
        int r = nd_reroute_tools(calls, tools, request, &subset);
        out[0] = '\0';
        for (size_t i = 0; r > 0 && subset && i < subset->count; i++) {
            const nd_json *name = nd_json_get(&subset->items[i], "name");
            snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", i ? "," : "", name ? name->str : "?");
        }
        if (r < 0 || (r > 0) != (subset != NULL)) snprintf(out, sizeof out, "(returned %d)", r);
    }
    nd_json_free(calls);
    nd_json_free(tools);
    nd_json_free(subset);
    return out;
}

#define REROUTES(calls, req, want) CHECKF(strcmp(rerouted(calls, req), want) == 0, "%s -> %s, want %s", req, rerouted(calls, req), want)

static const char *LIGHTS = "[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"Reno\",\"on\":false}}]";
static const char *MESSAGE = "[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"Hobart\",\"text\":\"celsius\"}}]";

static void test_the_tools_named(void)
{
    REROUTES(LIGHTS, "temperature in Reno in fahrenheit", "set_thermostat,get_weather");
    REROUTES(LIGHTS, "what's it like in Reno, 68F?", "set_thermostat,get_weather"); /* a symbol says fahrenheit */
    REROUTES(MESSAGE, "What's it like outside in Hobart, in celsius", "set_thermostat,get_weather"); /* the choice alone */
    REROUTES(LIGHTS, "Reno, warm white please", "");    /* set_lights' own choice */
    REROUTES(LIGHTS, "Reno in fahrenheits", "set_thermostat,get_weather"); /* a form of the choice */
}

static void test_what_names_no_other_tool(void)
{
    /* the called tool has the choice too; a message that speaks of it; short choices; nothing said */
    REROUTES("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":20}}]", "20 in celsius", "");
    REROUTES("[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"mom\",\"text\":\"the heating is on\"}}]",
             "text mom that the heating is on", "");
    REROUTES(LIGHTS, "Reno lights off, it is cool", "");   /* "cool": a choice of four letters, said for another reason */
    REROUTES(LIGHTS, "Reno lights off, heating on", "");   /* "heat": the same */
    REROUTES(LIGHTS, "Reno lights off", "");
    /* a word of the called tool's own (its name, description or argument names): "track" and "playlist"
     * are add_to_playlist's arguments before they are play_media's choices */
    const char *media = "[{\"name\":\"add_to_playlist\",\"parameters\":{\"type\":\"object\",\"properties\":{"
                        "\"track\":{\"type\":\"string\"},\"playlist\":{\"type\":\"string\"}}}},"
                        "{\"name\":\"play_media\",\"parameters\":{\"type\":\"object\",\"properties\":{"
                        "\"query\":{\"type\":\"string\"},\"type\":{\"type\":\"string\",\"enum\":[\"track\","
                        "\"playlist\",\"album\"]}}}}]";
    const char *add = "[{\"name\":\"add_to_playlist\",\"arguments\":{\"track\":\"Golden Mirror\",\"playlist\":\"Road\"}}]";
    const char *got = rerouted_under(media, add, "put the track Golden Mirror to my Road playlist");
    CHECKF(!strcmp(got, ""), "%s", got);
    got = rerouted_under(media, add, "play the album Golden Mirror");
    CHECKF(!strcmp(got, "play_media"), "%s", got);
    REROUTES(LIGHTS, "Reno lights red", "");                /* set_lights' own choice */
}

/* Every called tool is left out, and its choices and messages with it (the session asks only for an
 * answer of one call, no call, or calls withheld as placeholders); with no call, every tool may be named. */
static void test_several_calls_and_none(void)
{
    REROUTES("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"Reno\",\"on\":false}},"
             "{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"Al\",\"text\":\"hi\"}}]",
             "Reno in fahrenheit", "set_thermostat,get_weather");
    REROUTES("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"Reno\",\"on\":false}},"
             "{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Reno\"}}]", "Reno in fahrenheit", "");
    REROUTES("[]", "Reno in fahrenheit", "set_thermostat,get_weather");
    REROUTES("[]", "Reno, please", "");
}

/* The bundled model answers "temperature in Reno in fahrenheit" with set_lights: asked again with
 * set_thermostat and get_weather alone, it calls get_weather; without ask_again, set_lights stays. */
static void test_bundled_model(void)
{
    needle_session_options so = {0};
    char *env = first_envelope(so, "temperature in Reno in fahrenheit");
    CHECKF(env && strstr(env, "\"function_calls\":[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Reno\"") &&
               strstr(env, "\"asked_again\":true"),
           "%s", env ? env : "(none)");
    needle_free(env);
    so.ask_again = -1;
    env = first_envelope(so, "temperature in Reno in fahrenheit");
    CHECKF(env && !strstr(env, "get_weather") && strstr(env, "\"asked_again\":false"), "%s", env ? env : "(none)");
    needle_free(env);
    /* answered with a message to a placeholder (withheld): asked again with the tools that take fahrenheit */
    so.ask_again = 0;
    so.system = "date: 2026-09-08 (Tuesday)";
    env = first_envelope(so, "forecast for Wellington tomorrow in fahrenheit");
    CHECKF(env && strstr(env, "\"function_calls\":[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Wellington\","
                              "\"date\":\"2026-09-09\",\"unit\":\"fahrenheit\"}}]") &&
               strstr(env, "\"missing\":[]") && strstr(env, "\"suppressed_calls\":[]"),
           "%s", env ? env : "(none)");
    needle_free(env);
}

int main(void)
{
    RUN(test_the_tools_named);
    RUN(test_what_names_no_other_tool);
    RUN(test_several_calls_and_none);
    RUN(test_bundled_model);
    return check_summary();
}
