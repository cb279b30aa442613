/* test_ask_again.c - a first request the model answers with no call is
 * asked again (src/agent/ask_again.h): each sign of a request the contract
 * refuses (a capitalised start taken as a value, function words as a value,
 * an unknown word next to a choice key, an impossible date, a number or a
 * duration not used, "minus", a required choice not said) and the clean
 * answers it lets through; the option; and the bundled model end to end
 * (asked again and taken, not taken for an invalid request, off). */
#include "agent/ask_again.h"
#include "repair_check.h"

static const char *TOOLS =
    "[{\"name\":\"set_lights\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"room\":{\"type\":\"string\"},\"on\":{\"type\":\"boolean\"},\"brightness\":{\"type\":\"integer\"},"
    "\"color\":{\"type\":\"string\",\"enum\":[\"white\",\"warm white\",\"red\"]}},\"required\":[\"room\"]}},"
    "{\"name\":\"set_thermostat\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"temperature\":{\"type\":\"number\"},\"mode\":{\"type\":\"string\",\"enum\":[\"heat\",\"cool\",\"auto\"]},"
    "\"timer_minutes\":{\"type\":\"integer\"}},\"required\":[\"temperature\"]}},"
    "{\"name\":\"get_metric\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"metric\":{\"type\":\"string\",\"enum\":[\"steps\",\"calories\",\"heart_rate\"]},"
    "\"period\":{\"type\":\"string\",\"enum\":[\"today\",\"yesterday\"]}},\"required\":[\"metric\"]}},"
    "{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"location\":{\"type\":\"string\"},\"date\":{\"type\":\"string\",\"format\":\"date\"},"
    "\"time\":{\"type\":\"string\"}}}}]";

/* nd_refusal_signs on calls for request: 1 a sign, 0 none. */
static int signs(const char *calls_json, const char *request)
{
    return sign_apply(nd_refusal_signs, TOOLS, calls_json, request);
}

#define SIGN(calls, req, want) CHECKF(signs(calls, req) == (want), "%s / %s -> %d", calls, req, signs(calls, req))
#define LIGHT(room) "[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"" room "\",\"on\":false}}]"

static void test_clean_answers(void)
{
    SIGN(LIGHT("kitchen"), "kitchen lights off please", 0);            /* a lower-case start is the place */
    SIGN(LIGHT("Grandad's room"), "Please shut the lights in Grandad's room", 0);
    SIGN("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":19.5}}]", "thermostat 19.5 celsius", 0);
    SIGN("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":21,\"mode\":\"heat\"}}]",
         "twenty-one on heat mode", 0);
    SIGN("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":20,\"timer_minutes\":90}}]",
         "20 degrees for an hour and a half", 0);                        /* a duration in the call's unit */
    SIGN("[{\"name\":\"get_metric\",\"arguments\":{\"metric\":\"calories\"}}]", "calories burned this week", 0);
    SIGN("[{\"name\":\"get_weather\",\"arguments\":{\"time\":\"16:10\"}}]", "weather at ten past four pm", 0);
    SIGN("[{\"name\":\"get_weather\",\"arguments\":{}}]", "weather please", 0);
}

static void test_signs(void)
{
    SIGN(LIGHT("Trn"), "Trn the lights off, ty", 1);                    /* a capitalised start */
    SIGN(LIGHT("Hey"), "Right then. Hey, what movies are on", 1);      /* ... of a sentence */
    SIGN(LIGHT("off"), "let's switch off the lights", 1);               /* function words */
    SIGN(LIGHT("great if"), "it'd be great if the lights went off", 1); /* ... one last */
    SIGN("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":20}}]", "thermostat to 20 degrees on eco mode", 1);
    SIGN(LIGHT("kitchen"), "kitchen lights off, color maroon", 1);      /* an unknown word by a choice key */
    SIGN("[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Rome\"}}]", "weather in Rome on February 30th", 1);
    SIGN("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":200}}]", "heat to 200 for 5 hours", 1);
    SIGN("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":20}}]", "thermostat to 20, fan 3", 1);
    SIGN("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":5}}]", "thermostat to minus 5", 1);
    SIGN("[{\"name\":\"get_metric\",\"arguments\":{\"metric\":\"steps\",\"period\":\"yesterday\"}}]",
         "look up the metric with period yesterday", 1);               /* a required choice not said */
    SIGN("[{\"name\":\"nope\",\"arguments\":{}}]", "anything", 1);       /* an undeclared tool */
}


static void test_bundled_model(void)
{
    /* off: the model's own answer, no call */
    char *off = first_envelope((needle_session_options){.ask_again = -1}, "thermostat 18.5 celsius");
    CHECKF(off && strstr(off, "\"function_calls\":[]") && strstr(off, "\"asked_again\":false"), "%s", off ? off : "(none)");
    needle_free(off);
    /* on (the default): asked again, and the answer taken */
    char *on = first_envelope((needle_session_options){0}, "thermostat 18.5 celsius");
    CHECKF(on && strstr(on, "\"function_calls\":[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":18.5,\"unit\":\"celsius\"}}]") &&
               strstr(on, "\"asked_again\":true") && strstr(on, "\"type\":\"call\""),
           "%s", on ? on : "(none)");
    needle_free(on);
    /* an invalid request asked again is still answered with no call */
    char *eco = first_envelope((needle_session_options){0}, "thermostat to 20 degrees on eco mode");
    CHECKF(eco && strstr(eco, "\"function_calls\":[]") && strstr(eco, "\"asked_again\":false"), "%s", eco ? eco : "(none)");
    needle_free(eco);
    /* a request the model answers with a call is not asked again */
    char *call = first_envelope((needle_session_options){0}, "turn off the kitchen lights");
    CHECKF(call && strstr(call, "\"asked_again\":false"), "%s", call ? call : "(none)");
    needle_free(call);
}

static void test_bad_option(void)
{
    CHECK(option_refused((needle_session_options){.ask_again = 2}, "ask_again"));
    CHECK(option_refused((needle_session_options){.ask_again = -2}, "ask_again"));
    CHECK(!option_refused((needle_session_options){.ask_again = -1}, "ask_again"));
}

int main(void)
{
    RUN(test_clean_answers);
    RUN(test_signs);
    RUN(test_bundled_model);
    RUN(test_bad_option);
    return check_summary();
}
