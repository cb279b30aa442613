/* test_lean_call.c - a first request answered with no call the model nearly
 * made is answered with that call (src/agent/lean_call.h): each sign of a
 * call made up to fill a list that may not be empty (a tool the request does
 * not name, one value in two places, a free-text value the request does not
 * say) and the clean answers it lets through; and the bundled model end to
 * end (leaned and taken, a made-up call not taken, off with ask_again; a side
 * of a two-part request leaning). */
#include "agent/lean_call.h"
#include "repair_check.h"

static const char *TOOLS =
    "[{\"name\":\"set_lights\",\"description\":\"Turn a room's lights on or off, or set brightness or colour\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"room\":{\"type\":\"string\"},\"on\":{\"type\":\"boolean\"},\"brightness\":{\"type\":\"integer\"},"
    "\"color\":{\"type\":\"string\",\"enum\":[\"white\",\"blue\",\"green\"]}},\"required\":[\"room\"]}},"
    "{\"name\":\"set_heart_rate_alert\",\"description\":\"Alert when the pulse passes a limit\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"max_bpm\":{\"type\":\"integer\"}},\"required\":[\"max_bpm\"]}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"navigate_to\",\"description\":\"Start turn-by-turn navigation\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"destination\":{\"type\":\"string\"}},\"required\":[\"destination\"]}}}]";

/* nd_made_up_call on calls for request: 1 a sign, 0 none. */
static int made_up(const char *calls_json, const char *request)
{
    return sign_apply(nd_made_up_call, TOOLS, calls_json, request);
}

#define MADE_UP(calls, req, want) CHECKF(made_up(calls, req) == (want), "%s / %s -> %d", calls, req, made_up(calls, req))

static void test_clean_answers(void)
{
    /* named by a choice of the tool ("green"), by its name ("heart rate alert"), by its description
     * ("pulse"), by a word sharing five letters with one ("navigate" / "navigation") */
    MADE_UP("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"hallway\",\"on\":true,\"color\":\"green\"}}]",
            "paint the hallway green", 0);
    MADE_UP("[{\"name\":\"set_heart_rate_alert\",\"arguments\":{\"max_bpm\":150}}]", "max heart rate alert 150", 0);
    MADE_UP("[{\"name\":\"set_heart_rate_alert\",\"arguments\":{\"max_bpm\":150}}]", "warn me if my pulse goes over 150", 0);
    MADE_UP("[{\"name\":\"navigate_to\",\"arguments\":{\"destination\":\"Gare de Lyon\"}}]", "navigate me to gare de lyon", 0);
}

static void test_signs(void)
{
    /* no word of the request names the tool: the verbs every tool shares do not count */
    MADE_UP("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"back door\"}}]", "lock the back door", 1);
    MADE_UP("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"kitchen\"}}]", "please turn on the kitchen", 1);
    /* one value in two places */
    MADE_UP("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"blue\",\"on\":true,\"color\":\"blue\"}}]",
            "make the lights blue", 1);
    /* a free-text value the request does not say (the system facts gave it) */
    MADE_UP("[{\"name\":\"navigate_to\",\"arguments\":{\"destination\":\"Europe\"}}]", "start turn-by-turn navigation", 1);
    /* a free-text value that is a piece of a word of the request */
    MADE_UP("[{\"name\":\"navigate_to\",\"arguments\":{\"destination\":\"jo\"}}]", "navigate to jo@kite.io", 1);
    MADE_UP("[{\"name\":\"navigate_to\",\"arguments\":{\"destination\":\"Lyon\"}}]", "navigate to Lyonnais", 1);
    MADE_UP("[{\"name\":\"navigate_to\",\"arguments\":{\"destination\":\"Lyon\"}}]", "navigate to 'Lyon', fast", 0);
    /* a free-text value made of the tool's own words: the request named the tool, not a value */
    MADE_UP("[{\"name\":\"navigate_to\",\"arguments\":{\"destination\":\"navigation\"}}]", "start navigation", 1);
    MADE_UP("[{\"name\":\"navigate_to\",\"arguments\":{\"destination\":\"the navigation\"}}]", "start the navigation", 1);
    /* a 1 nobody said; said as "a", it stands */
    MADE_UP("[{\"name\":\"set_heart_rate_alert\",\"arguments\":{\"max_bpm\":1}}]", "change the heart rate alert", 1);
    MADE_UP("[{\"name\":\"set_heart_rate_alert\",\"arguments\":{\"max_bpm\":1}}]", "heart rate alert at a beat", 0);
    MADE_UP("[{\"name\":\"nope\",\"arguments\":{}}]", "nope", 1); /* an undeclared tool */
    MADE_UP("{}", "anything", 1);                                     /* not a list */
}

static void test_bundled_model(void)
{
    /* the model writes [] with a call at 0.25 of the first token's probability: leaned, taken */
    char *on = first_envelope((needle_session_options){0}, "paint the hallway green");
    CHECKF(on && strstr(on, "\"function_calls\":[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"hallway\",\"on\":true,\"color\":\"green\"}}]") &&
               strstr(on, "\"leaned\":true") && strstr(on, "\"asked_again\":false"),
           "%s", on ? on : "(none)");
    needle_free(on);
    /* off with ask_again: the model's own answer */
    char *off = first_envelope((needle_session_options){.ask_again = -1}, "paint the hallway green");
    CHECKF(off && strstr(off, "\"function_calls\":[]") && strstr(off, "\"leaned\":false"), "%s", off ? off : "(none)");
    needle_free(off);
    /* a call at 0.41, but made up (set_lights for a door): not taken */
    char *door = first_envelope((needle_session_options){0}, "lock the back door");
    CHECKF(door && strstr(door, "\"function_calls\":[]") && strstr(door, "\"leaned\":false"), "%s", door ? door : "(none)");
    needle_free(door);
    /* a request the model answers with a call does not lean */
    char *call = first_envelope((needle_session_options){0}, "turn off the kitchen lights");
    CHECKF(call && strstr(call, "\"type\":\"call\"") && strstr(call, "\"leaned\":false"), "%s", call ? call : "(none)");
    needle_free(call);
}

static void test_sides(void)
{
    /* the right side alone ("thermostat to 68F") is answered with no call the model nearly made: it
     * leans, and the two parts are taken */
    static const char *Q = "study lights to 30% and thermostat to 68F";
    char *on = first_envelope((needle_session_options){0}, Q);
    CHECKF(on && strstr(on, "{\"name\":\"set_lights\",\"arguments\":{\"room\":\"study\",\"on\":true,\"brightness\":30}},"
                           "{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":68,\"unit\":\"fahrenheit\"}}") &&
               strstr(on, "\"split\":[\"study lights to 30%\",\"thermostat to 68F\"]"),
           "%s", on ? on : "(none)");
    needle_free(on);
    /* without asking again no side leans: the model's own single call */
    char *off = first_envelope((needle_session_options){.ask_again = -1}, Q);
    CHECKF(off && strstr(off, "\"split\":[]") && !strstr(off, "set_thermostat"), "%s", off ? off : "(none)");
    needle_free(off);
}

int main(void)
{
    RUN(test_clean_answers);
    RUN(test_signs);
    RUN(test_bundled_model);
    RUN(test_sides);
    return check_summary();
}
