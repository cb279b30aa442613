/* test_grounding.c - the envelope's grounding checks (agent/grounding.h), the
 * item guard that ends a call list at a repeated item or call
 * (nd_repeat_item_cut), and the strict session option end to end on the
 * bundled model. */
#include <stdlib.h>
#include <string.h>

#include "agent/envelope.h"
#include "agent/grounding.h"
#include "agent/repeat_guard.h"
#include "check.h"
#include "repair_check.h"
#include "core/json.h"
#include "agent/said_number.h"
#include "needle.h"

static const char *TOOLS =
    "[{\"name\":\"send_message\",\"parameters\":{\"type\":\"object\",\"properties\":{\"recipient\":{\"type\":"
    "\"string\"},\"text\":{\"type\":\"string\"}},\"required\":[\"recipient\",\"text\"]}},"
    "{\"name\":\"set_alarm\",\"parameters\":{\"type\":\"object\",\"properties\":{\"time\":{\"type\":\"string\"},"
    "\"days\":{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"type\":\"string\",\"enum\":[\"Monday\",\"Friday\"]}},"
    "\"rings\":{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"type\":\"object\",\"properties\":{"
    "\"at\":{\"type\":\"number\"},\"tone\":{\"type\":\"string\"}}}}}}},"
    "{\"name\":\"set_thermostat\",\"parameters\":{\"type\":\"object\",\"properties\":{\"temperature\":{\"type\":"
    "\"number\"},\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]}}}},"
    "{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"location\":{\"type\":"
    "\"string\"},\"date\":{\"type\":\"string\",\"format\":\"date\"}}}},"
    "{\"name\":\"set_timer\",\"parameters\":{\"type\":\"object\",\"properties\":{\"minutes\":{\"type\":"
    "\"integer\"},\"on\":{\"type\":\"boolean\"}}}},"
    "{\"name\":\"set_blinds\",\"parameters\":{\"type\":\"object\",\"properties\":{\"position\":{\"type\":"
    "\"integer\",\"minimum\":0,\"maximum\":100,\"description\":\"how open (0 closed, 100 fully open)\"}}}},"
    "{\"name\":\"set_volume\",\"parameters\":{\"type\":\"object\",\"properties\":{\"level\":{\"type\":"
    "\"integer\",\"minimum\":0,\"maximum\":100}}}},"
    "{\"name\":\"set_oven\",\"parameters\":{\"type\":\"object\",\"properties\":{\"temperature\":{\"type\":"
    "\"integer\",\"minimum\":50,\"exclusiveMaximum\":250}}}}]";

/* The ungrounded list (a JSON array text) for calls answering request; with
 * out_of_schema, that list instead. */
static char *grounding_list(const char *calls_json, const char *request, const char *system, int *negation,
                            int out_of_schema)
{
    nd_json *calls = NULL, *tools = NULL;
    needle_error e;
    if (nd_json_parse(calls_json, strlen(calls_json), NULL, &calls, &e) ||
        nd_json_parse(TOOLS, strlen(TOOLS), NULL, &tools, &e)) {
        nd_json_free(calls);
        return NULL;
    }
    nd_grounding g;
    char *out = NULL;
    if (nd_grounding_check(calls, tools, request, request, system, NULL, &g) == 0) {
        out = strdup(out_of_schema ? g.out_of_schema.data : g.ungrounded.data);
        if (negation) *negation = g.negation;
    }
    nd_grounding_free(&g);
    nd_json_free(calls);
    nd_json_free(tools);
    return out;
}

static char *ungrounded(const char *calls_json, const char *request, const char *system, int *negation)
{
    return grounding_list(calls_json, request, system, negation, 0);
}

#define EXPECT_UNGROUNDED(calls, request, system, want)                                      \
    do {                                                                                     \
        char *got_ = ungrounded(calls, request, system, NULL);                               \
        CHECKF(got_ && !strcmp(got_, want), "%s -> %s, want %s", request, got_ ? got_ : "(error)", want); \
        free(got_);                                                                          \
    } while (0)

static void test_strings_copied_or_not(void)
{
    EXPECT_UNGROUNDED("[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"mom\",\"text\":\"I'll be late\"}}]",
                      "text mom that I'll be late", NULL, "[]");
    /* the values a small model recalls from its training lists instead of the request */
    EXPECT_UNGROUNDED("[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"Maya\",\"text\":\"I'll call you back "
                      "later\"}}]",
                      "text mom that I'll be late", NULL, "[\"send_message.recipient\",\"send_message.text\"]");
    /* case, punctuation, plurals and function words do not matter; non-Latin names are compared as written */
    EXPECT_UNGROUNDED("[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"Thandiwe Mokoena\",\"text\":\"the "
                      "keys are under the mat\"}}]",
                      "Tell THANDIWE MOKOENA: keys under mat!", NULL, "[]");
    EXPECT_UNGROUNDED("[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"東京\"}}]", "weather in 東京?", NULL,
                      "[]");
    EXPECT_UNGROUNDED("[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Paris\"}}]", "weather in 東京?", NULL,
                      "[\"get_weather.location\"]");
    /* a value said in the system facts is grounded too */
    EXPECT_UNGROUNDED("[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Lagos\"}}]", "what's the weather here",
                      "location: Lagos", "[]");
}

static void test_numbers_in_digits_words_and_units(void)
{
    const char *t72 = "[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":72,\"unit\":\"fahrenheit\"}}]";
    EXPECT_UNGROUNDED(t72, "make it 72F in here", NULL, "[]"); /* the enum unit is a choice, never flagged */
    EXPECT_UNGROUNDED(t72, "set the heat to seventy-two", NULL, "[]");
    EXPECT_UNGROUNDED(t72, "set the heat to 68", NULL, "[\"set_thermostat.temperature\"]");
    EXPECT_UNGROUNDED("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":21.5}}]", "21.5 degrees please",
                      NULL, "[]");
    EXPECT_UNGROUNDED("[{\"name\":\"set_timer\",\"arguments\":{\"minutes\":90,\"on\":true}}]",
                      "timer for an hour and a half", NULL, "[]");
    EXPECT_UNGROUNDED("[{\"name\":\"set_timer\",\"arguments\":{\"minutes\":150}}]", "a hundred and fifty minute timer",
                      NULL, "[]");
    /* the parts of a number in words are not said by it: "seventy-three" says 73, not 70 or 3 */
    EXPECT_UNGROUNDED("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":70}}]",
                      "set the volume seventy-three percent", NULL, "[\"set_thermostat.temperature\"]");
    EXPECT_UNGROUNDED("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":5}}]",
                      "timer for fifty five", NULL, "[\"set_thermostat.temperature\"]");
    EXPECT_UNGROUNDED("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":73}}]",
                      "set the volume seventy-three percent", NULL, "[]");
    EXPECT_UNGROUNDED("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":70}}]",
                      "seventy, no, seventy-three", NULL, "[]"); /* said alone as well */
    /* "point" and a digit word each: 28.5 (and the whole 28) said, 22.5 not */
    EXPECT_UNGROUNDED("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":28.5}}]",
                      "the thermostat at twenty-eight point five degrees", NULL, "[]");
    EXPECT_UNGROUNDED("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":22.5}}]",
                      "the thermostat at twenty-eight point five degrees", NULL, "[\"set_thermostat.temperature\"]");
    EXPECT_UNGROUNDED("[{\"name\":\"set_timer\",\"arguments\":{\"minutes\":25}}]", "timer for ten minutes", NULL,
                      "[\"set_timer.minutes\"]");
}

/* 60, 100, 1000 and 3600 are not grounded in every request (a one converts only by the unit said
 * right after it), so a value the schema cut ("300 degrees" -> 100) is flagged; states a parameter's
 * description names, and the schema's maximum said as "max", are grounded. */
static void test_numbers_named_by_units_and_states(void)
{
#define BLINDS(p) "[{\"name\":\"set_blinds\",\"arguments\":{\"position\":" #p "}}]"
#define TIMER(m) "[{\"name\":\"set_timer\",\"arguments\":{\"minutes\":" #m "}}]"
    EXPECT_UNGROUNDED(TIMER(100), "timer for 300 minutes", NULL, "[\"set_timer.minutes\"]");
    EXPECT_UNGROUNDED(TIMER(60), "timer for ten minutes", NULL, "[\"set_timer.minutes\"]");
    EXPECT_UNGROUNDED(TIMER(1000), "a timer please", NULL, "[\"set_timer.minutes\"]");
    EXPECT_UNGROUNDED(TIMER(60), "timer for an hour", NULL, "[]");
    EXPECT_UNGROUNDED(TIMER(60), "timer for 1 hour", NULL, "[]"); /* "1" before the unit, as "one" */
    EXPECT_UNGROUNDED(TIMER(60), "timer for 2 hours", NULL, "[\"set_timer.minutes\"]");
    EXPECT_UNGROUNDED(TIMER(1), "a timer please", NULL, "[]");
    EXPECT_UNGROUNDED(BLINDS(0), "close the bedroom blinds", NULL, "[]");
    EXPECT_UNGROUNDED(BLINDS(0), "open the bedroom blinds", NULL, "[\"set_blinds.position\"]");
    EXPECT_UNGROUNDED(BLINDS(100), "open the blinds all the way", NULL, "[]");
    EXPECT_UNGROUNDED(BLINDS(100), "fully open the blinds", NULL, "[]");
    EXPECT_UNGROUNDED(BLINDS(100), "open the blinds to 30%", NULL, "[\"set_blinds.position\"]");
    EXPECT_UNGROUNDED(BLINDS(50), "blinds halfway please", NULL, "[]");
    EXPECT_UNGROUNDED("[{\"name\":\"set_volume\",\"arguments\":{\"level\":100}}]", "volume to max", NULL, "[]");
    EXPECT_UNGROUNDED("[{\"name\":\"set_volume\",\"arguments\":{\"level\":100}}]", "volume up", NULL,
                      "[\"set_volume.level\"]");
#undef BLINDS
#undef TIMER
}

#define EXPECT_OUT_OF_RANGE(calls, request, want)                                            \
    do {                                                                                     \
        char *got_ = grounding_list(calls, request, NULL, NULL, 1);                          \
        CHECKF(got_ && !strcmp(got_, want), "%s -> %s, want %s", request, got_ ? got_ : "(error)", want); \
        free(got_);                                                                          \
    } while (0)

static void test_numbers_said_outside_the_schema(void)
{
    const char *vol15 = "[{\"name\":\"set_volume\",\"arguments\":{\"level\":15}}]";
    /* the user asked for 150, the model wrote 15: not said, and 150 is over the maximum */
    EXPECT_OUT_OF_RANGE(vol15, "volume to 150 percent", "[\"set_volume.level\"]");
    EXPECT_OUT_OF_RANGE(vol15, "volume to a hundred and fifty", "[\"set_volume.level\"]");
    /* said: a grounded value is never out of range, whatever else the request says */
    EXPECT_OUT_OF_RANGE(vol15, "volume to 15, not 150", "[]");
    /* not said, but every number said fits the schema: only ungrounded */
    EXPECT_OUT_OF_RANGE(vol15, "volume to 40", "[]");
    EXPECT_OUT_OF_RANGE(vol15, "turn the volume up", "[]");
    /* negative numbers: "-10" and "minus 10" under minimum 0 */
    EXPECT_OUT_OF_RANGE(vol15, "volume to -10", "[\"set_volume.level\"]");
    EXPECT_OUT_OF_RANGE(vol15, "volume to minus 10", "[\"set_volume.level\"]");
    /* a hyphen inside a word is not a sign */
    EXPECT_OUT_OF_RANGE(vol15, "set the volume to level-10", "[]");
    /* the 1 that goes without saying is not said: minimum 50 does not refuse it */
    const char *oven = "[{\"name\":\"set_oven\",\"arguments\":{\"temperature\":180}}]";
    EXPECT_OUT_OF_RANGE(oven, "preheat an oven", "[]");
    /* exclusive bounds: 250 is outside exclusiveMaximum 250; 30 under minimum 50 */
    EXPECT_OUT_OF_RANGE(oven, "oven to 250", "[\"set_oven.temperature\"]");
    EXPECT_OUT_OF_RANGE(oven, "oven to 30 please", "[\"set_oven.temperature\"]");
    EXPECT_OUT_OF_RANGE(oven, "oven to 200", "[]");
    /* a number in words is one number: "one hundred and twenty-two" is 122, inside the
     * bounds, not also 1, 2 and 20 below the minimum (the model's 180 is ungrounded,
     * not out of schema); "half" is not 0.5 */
    EXPECT_OUT_OF_RANGE(oven, "oven to one hundred and twenty-two degrees", "[]");
    EXPECT_OUT_OF_RANGE(oven, "oven to half of two hundred and fifty", "[\"set_oven.temperature\"]");
    EXPECT_OUT_OF_RANGE(oven, "oven to twenty degrees", "[\"set_oven.temperature\"]");
    /* the argument the decoder saw the schema bend comes first, and once */
    nd_json *calls = NULL, *tools = NULL;
    needle_error e;
    CHECK(nd_json_parse(vol15, strlen(vol15), NULL, &calls, &e) == 0 && nd_json_parse(TOOLS, strlen(TOOLS), NULL, &tools, &e) == 0);
    nd_grounding g;
    CHECK(nd_grounding_check(calls, tools, "volume to 150", "volume to 150", NULL, "set_volume.level", &g) == 0);
    CHECK(g.n_out_of_schema == 1 && strcmp(g.out_of_schema.data, "[\"set_volume.level\"]") == 0);
    nd_grounding_free(&g);
    CHECK(nd_grounding_check(calls, tools, "volume to 15", "volume to 15", NULL, "set_thermostat.unit", &g) == 0);
    CHECKF(strcmp(g.out_of_schema.data, "[\"set_thermostat.unit\"]") == 0, "%s", g.out_of_schema.data);
    nd_grounding_free(&g);
    nd_json_free(calls);
    nd_json_free(tools);
    /* no bounds in the schema: nothing is outside */
    EXPECT_OUT_OF_RANGE("[{\"name\":\"set_timer\",\"arguments\":{\"minutes\":5}}]", "timer for 500 minutes", "[]");
    /* the argument left out (or its number written without the sign) while the request sets it,
     * next to its name, to a value the schema refuses */
    const char *vol = "[{\"name\":\"set_volume\",\"arguments\":{}}]";
    EXPECT_OUT_OF_RANGE(vol, "put the level at 150 percent", "[\"set_volume.level\"]");
    EXPECT_OUT_OF_RANGE(vol, "200% level asap", "[\"set_volume.level\"]");
    EXPECT_OUT_OF_RANGE("[{\"name\":\"set_volume\",\"arguments\":{\"level\":10}}]", "level -10 please",
                        "[\"set_volume.level\"]");
    EXPECT_OUT_OF_RANGE(vol, "level to 40", "[]");                 /* inside the bounds */
    EXPECT_OUT_OF_RANGE(vol, "volume to 150 in the kitchen", "[]"); /* the name "level" not said */
    EXPECT_OUT_OF_RANGE(vol, "level 7-10, and then about 150 guests", "[]"); /* a range, and a number far away */
    EXPECT_OUT_OF_RANGE(vol, "level at 12:30", "[]");              /* a time, not a number */
    EXPECT_OUT_OF_RANGE("[{\"name\":\"set_volume\",\"arguments\":{}},{\"name\":\"set_volume\",\"arguments\":{}}]",
                        "level 150 and level 200", "[]");         /* two calls: whose number? */
    /* the numbers read next to a name */
    double near[8];
    CHECK(nd_numbers_near_key("brightness to 101 percent", "brightness", near, 8) == 1 && near[0] == 101);
    CHECK(nd_numbers_near_key("set it to -10% brightness", "brightness", near, 8) == 1 && near[0] == -10);
    CHECK(nd_numbers_near_key("fan speed 3", "fan_speed", near, 8) == 1 && near[0] == 3);
    CHECK(nd_numbers_near_key("on the 14th, brightness 2,500 at 7:30 from 2026-07-01", "brightness", near, 8) == 0);
    CHECK(nd_numbers_near_key("nothing here", "brightness", near, 8) == 0);
    CHECK(nd_numbers_near_key("brightness 5 6 7 8 9", "brightness", near, 2) == 2);
}

/* The missing list for calls under tools PH_TOOLS. */
static const char *PH_TOOLS =
    "[{\"name\":\"set_lights\",\"parameters\":{\"type\":\"object\",\"properties\":{\"room\":{\"type\":\"string\"},"
    "\"scene\":{\"type\":\"string\"},\"mode\":{\"type\":\"string\",\"enum\":[\"lights\",\"dim\"]}},"
    "\"required\":[\"room\",\"mode\"]}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"add_to_playlist\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"track\":{\"type\":\"string\"},\"playlist\":{\"type\":\"string\"}},"
    "\"required\":[\"track\",\"playlist\"]}}}]";

/* The missing list nd_grounding_check reports for calls under tools, what was
 * heard and the latest request (strdup'ed; NULL on an error). */
static char *missing_for_tools(const char *tools_json, const char *calls_json, const char *heard, const char *request)
{
    nd_json *calls = NULL, *tools = NULL;
    needle_error e;
    char *out = NULL;
    if (nd_json_parse(calls_json, strlen(calls_json), NULL, &calls, &e) == 0 &&
        nd_json_parse(tools_json, strlen(tools_json), NULL, &tools, &e) == 0) {
        nd_grounding g;
        if (nd_grounding_check(calls, tools, heard, request, NULL, NULL, &g) == 0) out = strdup(g.missing.data);
        nd_grounding_free(&g);
    }
    nd_json_free(calls);
    nd_json_free(tools);
    return out;
}

static char *missing_list(const char *calls_json)
{
    return missing_for_tools(PH_TOOLS, calls_json, "whatever was said", "whatever was said");
}

#define EXPECT_MISSING(calls, want)                                                           \
    do {                                                                                      \
        char *got_ = missing_list(calls);                                                     \
        CHECKF(got_ && !strcmp(got_, want), "%s -> %s, want %s", calls, got_ ? got_ : "(error)", want); \
        free(got_);                                                                           \
    } while (0)

static void test_placeholder_values_are_missing(void)
{
    /* a word of the tool's name, in any case, plural or not */
    EXPECT_MISSING("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"lights\",\"mode\":\"dim\"}}]", "[\"set_lights.room\"]");
    EXPECT_MISSING("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"Light\",\"mode\":\"dim\"}}]", "[\"set_lights.room\"]");
    EXPECT_MISSING("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"set\",\"mode\":\"dim\"}}]", "[\"set_lights.room\"]");
    /* a real value, several words, an enum (a choice), an optional key: not placeholders */
    EXPECT_MISSING("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"kitchen\",\"mode\":\"lights\"}}]", "[]");
    EXPECT_MISSING("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"lights room\",\"mode\":\"dim\"}}]", "[]");
    EXPECT_MISSING("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"kitchen\",\"scene\":\"lights\",\"mode\":\"dim\"}}]", "[]");
    EXPECT_MISSING("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"ligh\",\"mode\":\"dim\"}}]", "[]");
    /* the same string as another argument (OpenAI-wrapped declaration) */
    EXPECT_MISSING("[{\"name\":\"add_to_playlist\",\"arguments\":{\"track\":\"Heroes\",\"playlist\":\"Heroes\"}}]",
                   "[\"add_to_playlist.track\",\"add_to_playlist.playlist\"]");
    EXPECT_MISSING("[{\"name\":\"add_to_playlist\",\"arguments\":{\"track\":\"Heroes\",\"playlist\":\"Road Trip\"}}]", "[]");
    /* whole words of another required value (case ignored); a piece of a word is not */
    EXPECT_MISSING("[{\"name\":\"add_to_playlist\",\"arguments\":{\"track\":\"eta\",\"playlist\":\"traffic is bad, ETA 8:50\"}}]",
                   "[\"add_to_playlist.track\"]");
    EXPECT_MISSING("[{\"name\":\"add_to_playlist\",\"arguments\":{\"track\":\"Road\",\"playlist\":\"Railroad Trip\"}}]", "[]");
    /* an optional argument repeating a required one says nothing about the required one */
    EXPECT_MISSING("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"den\",\"scene\":\"den\",\"mode\":\"dim\"}}]", "[]");
    /* an undeclared tool has no required keys to check */
    EXPECT_MISSING("[{\"name\":\"undeclared\",\"arguments\":{\"room\":\"undeclared\"}}]", "[]");
    /* words with no value of their own ("switch off the lights now" -> room "off") */
    EXPECT_MISSING("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"off\",\"mode\":\"dim\"}}]", "[\"set_lights.room\"]");
    EXPECT_MISSING("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"for me\",\"mode\":\"dim\"}}]", "[\"set_lights.room\"]");
    EXPECT_MISSING("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"at 6\",\"mode\":\"dim\"}}]", "[\"set_lights.room\"]");
    EXPECT_MISSING("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"Off Broadway studio\",\"mode\":\"dim\"}}]", "[]");
    /* another required value padded with such words and the tool's name */
    EXPECT_MISSING("[{\"name\":\"add_to_playlist\",\"arguments\":{\"track\":\"Heroes to the playlist\",\"playlist\":\"Heroes\"}}]",
                   "[\"add_to_playlist.track\"]");
    EXPECT_MISSING("[{\"name\":\"add_to_playlist\",\"arguments\":{\"track\":\"Heroes Forever\",\"playlist\":\"Heroes\"}}]", "[]");
    EXPECT_MISSING("[{\"name\":\"add_to_playlist\",\"arguments\":{\"track\":\"Road Trip Heroes\",\"playlist\":\"Road Trip Heroes\"}}]",
                   "[\"add_to_playlist.track\",\"add_to_playlist.playlist\"]");
}

/* Required numbers and clock times the model wrote while the request says no
 * number at all: missing (the request gave no value). */
static const char *NUM_TOOLS =
    "[{\"name\":\"set_thermostat\",\"parameters\":{\"type\":\"object\",\"properties\":{\"temperature\":{\"type\":\"number\"},"
    "\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"temperature\"]}},"
    "{\"name\":\"set_alarm\",\"parameters\":{\"type\":\"object\",\"properties\":{\"time\":{\"type\":\"string\","
    "\"pattern\":\"^([01][0-9]|2[0-3]):[0-5][0-9]$\"},\"label\":{\"type\":\"string\"}},\"required\":[\"time\"]}},"
    "{\"name\":\"book_table\",\"parameters\":{\"type\":\"object\",\"properties\":{\"at\":{\"type\":\"string\",\"format\":\"time\"},"
    "\"code\":{\"type\":\"string\",\"pattern\":\"^[A-Z]{3}$\"},\"guests\":{\"type\":\"integer\"}},\"required\":[\"at\",\"code\"]}}]";

static char *missing_for(const char *calls_json, const char *heard, const char *request)
{
    return missing_for_tools(NUM_TOOLS, calls_json, heard, request);
}

/* The missing list for calls under tools, the request also what was heard. */
#define EXPECT_MISSING_WITH(tools, calls, request, want)                                                    \
    do {                                                                                                     \
        char *got_ = missing_for_tools(tools, calls, request, request);                                      \
        CHECKF(got_ && !strcmp(got_, want), "%s | %s -> %s, want %s", request, calls, got_ ? got_ : "(error)", want); \
        free(got_);                                                                                          \
    } while (0)
#define EXPECT_MISSING_SAID(calls, request, want) EXPECT_MISSING_WITH(NUM_TOOLS, calls, request, want)

static void test_required_numbers_not_said_are_missing(void)
{
    const char *t61 = "[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":61,\"unit\":\"fahrenheit\"}}]";
    EXPECT_MISSING_SAID(t61, "set the thermostat to fahrenheit", "[\"set_thermostat.temperature\"]");
    EXPECT_MISSING_SAID(t61, "set the thermostat to 22 in fahrenheit", "[]");      /* a number said: misread, not missing */
    EXPECT_MISSING_SAID(t61, "set the thermostat to twenty, fahrenheit", "[]");
    EXPECT_MISSING_SAID(t61, "sixty one degrees fahrenheit", "[]");                /* grounded */
    const char *a0000 = "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"00:00\",\"label\":\"The Season Song\"}}]";
    EXPECT_MISSING_SAID(a0000, "set the alarm for The Season Song", "[\"set_alarm.time\"]");
    EXPECT_MISSING_SAID(a0000, "set the alarm for The Season Song at half past", "[]");
    const char *a1100 = "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"11:00\"}}]";
    EXPECT_MISSING_SAID(a1100, "alarm at noon", "[]");                           /* "noon" says a time */
    EXPECT_MISSING_SAID(a1100, "wake me at midnight", "[]");
    /* a time by format; a pattern that takes no clock time (code) and an optional integer are not read */
    EXPECT_MISSING_SAID("[{\"name\":\"book_table\",\"arguments\":{\"at\":\"19:00\",\"code\":\"ABC\",\"guests\":4}}]",
                        "book a table at Nando's", "[\"book_table.at\"]");
    /* said earlier in the conversation: grounded, so not missing */
    char *got = missing_for(t61, "set the thermostat to 61\nnow in fahrenheit", "now in fahrenheit");
    CHECKF(got && !strcmp(got, "[]"), "%s", got ? got : "(error)");
    free(got);
}

/* A required value that starts with the request's own capitalised first
 * word: missing, unless the next word names the tool or its description. */
static const char *OPEN_TOOLS =
    "[{\"name\":\"send_message\",\"description\":\"Send a text message\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"recipient\":{\"type\":\"string\"},\"text\":{\"type\":\"string\"}},"
    "\"required\":[\"recipient\",\"text\"]}},"
    "{\"name\":\"set_lights\",\"description\":\"Turn a room's lights on or off\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"room\":{\"type\":\"string\"},\"on\":{\"type\":\"boolean\"}},\"required\":[\"room\",\"on\"]}}]";

#define EXPECT_OPENING(calls, request, want) EXPECT_MISSING_WITH(OPEN_TOOLS, calls, request, want)

static void test_opening_word_is_missing(void)
{
    const char *tell = "[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"Tell\",\"text\":\"running late\"}}]";
    EXPECT_OPENING(tell, "Tell Geoffrey running late", "[\"send_message.recipient\"]");
    EXPECT_OPENING(tell, "tell Geoffrey running late", "[]");          /* not capitalised */
    EXPECT_OPENING(tell, "Please Tell Geoffrey running late", "[]");   /* not the first word */
    EXPECT_OPENING("[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"Mom\",\"text\":\"At noon, lunch\"}}]",
                   "At noon, text Mom lunch", "[\"send_message.text\"]"); /* the value starts with it */
    EXPECT_OPENING("[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"Tellurium\",\"text\":\"hi\"}}]",
                   "Tell Tellurium hi", "[]");                          /* a longer word is not the word */
    /* the next word names the tool or its description: a place or a room meant */
    const char *kitchen = "[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"Kitchen\",\"on\":false}}]";
    EXPECT_OPENING(kitchen, "Kitchen lights off", "[]");
    EXPECT_OPENING(kitchen, "Kitchen light off", "[]");
    EXPECT_OPENING(kitchen, "Kitchen please", "[\"set_lights.room\"]");
    EXPECT_OPENING("[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"Maya\",\"text\":\"hi\"}}]",
                   "Maya text: hi", "[]");
}

static void test_times(void)
{
    const char *c0730 = "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:30\"}}]";
    const char *c1930 = "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"19:30\"}}]";
    EXPECT_UNGROUNDED(c0730, "alarm at 7:30", NULL, "[]");
    EXPECT_UNGROUNDED(c0730, "wake me at half past seven", NULL, "[]");
    EXPECT_UNGROUNDED(c1930, "alarm 7.30pm", NULL, "[]");
    EXPECT_UNGROUNDED(c1930, "alarm at 1930", NULL, "[]");
    EXPECT_UNGROUNDED("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"11:45\"}}]", "alarm at quarter to noon", NULL,
                      "[]");
    EXPECT_UNGROUNDED("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"12:00\"}}]", "remind me at noon", NULL, "[]");
    EXPECT_UNGROUNDED("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"00:00\",\"days\":[\"Friday\"]}}]",
                      "set an alarm for half past seven", NULL, "[\"set_alarm.time\"]");
    EXPECT_UNGROUNDED(c0730, "alarm at 8:30", NULL, "[\"set_alarm.time\"]");
    /* RFC 3339's full-time (format "time"): the seconds, fraction and zone are never said */
    const char *z0730 = "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:30:00Z\"}}]";
    const char *o1930 = "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"19:30:00.5+02:00\"}}]";
    EXPECT_UNGROUNDED(z0730, "alarm at 7:30", NULL, "[]");
    EXPECT_UNGROUNDED(o1930, "alarm 7.30pm", NULL, "[]");
    EXPECT_UNGROUNDED(z0730, "alarm at 8:30", NULL, "[\"set_alarm.time\"]");
    EXPECT_UNGROUNDED("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:30:00Zulu\"}}]", "alarm at 7:30", NULL,
                      "[\"set_alarm.time\"]"); /* not a clock value: a string the request never says */
}

/* uniqueItems (enforced after decoding): an array that repeats an item is outside the schema */
static void test_unique_items(void)
{
    char *got = grounding_list("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:30\",\"days\":[\"Monday\",\"Friday\","
                               "\"Monday\"]}}]", "alarm at 7:30 on Monday and Friday", NULL, NULL, 1);
    CHECKF(got && !strcmp(got, "[\"set_alarm.days\"]"), "%s", got ? got : "(error)");
    free(got);
    got = grounding_list("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:30\",\"days\":[\"Monday\",\"Friday\"]}}]",
                         "alarm at 7:30 on Monday and Friday", NULL, NULL, 1);
    CHECKF(got && !strcmp(got, "[]"), "%s", got ? got : "(error)");
    free(got);
    /* objects equal whatever their key order, numbers by value */
    got = grounding_list("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:30\",\"rings\":[{\"at\":1,\"tone\":\"bell\"},"
                         "{\"tone\":\"bell\",\"at\":1.0}]}}]", "alarm at 7:30, ring 1 bell", NULL, NULL, 1);
    CHECKF(got && !strcmp(got, "[\"set_alarm.rings\"]"), "%s", got ? got : "(error)");
    free(got);
    got = grounding_list("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:30\",\"rings\":[{\"at\":1,\"tone\":\"bell\"},"
                         "{\"at\":2,\"tone\":\"bell\"}]}}]", "alarm at 7:30, ring 1 and 2 bell", NULL, NULL, 1);
    CHECKF(got && !strcmp(got, "[]"), "%s", got ? got : "(error)");
    free(got);
}

/* An argument added to the closed out_of_schema list after the checks (a runaway turn) */
static void test_out_of_schema_added_after_the_checks(void)
{
    nd_json *calls = NULL;
    needle_error e;
    CHECK(nd_json_parse("[]", 2, NULL, &calls, &e) == 0);
    nd_grounding g;
    CHECK(nd_grounding_check(calls, NULL, "hi", "hi", NULL, NULL, &g) == 0);
    CHECK(strcmp(g.out_of_schema.data, "[]") == 0);
    CHECK(nd_grounding_add_out_of_schema(&g, "a.b") == 0 && strcmp(g.out_of_schema.data, "[\"a.b\"]") == 0);
    CHECK(nd_grounding_add_out_of_schema(&g, "c.d") == 0 && strcmp(g.out_of_schema.data, "[\"a.b\",\"c.d\"]") == 0);
    CHECK(nd_grounding_add_out_of_schema(&g, "a.b") == 0 && g.n_out_of_schema == 2);
    nd_grounding_free(&g);
    nd_json_free(calls);
}

static void test_dates(void)
{
    const char *sys = "date: 2026-06-12 (Friday)";
    EXPECT_UNGROUNDED("[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\",\"date\":\"2026-06-13\"}}]",
                      "weather in Oslo tomorrow", sys, "[]");
    EXPECT_UNGROUNDED("[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\",\"date\":\"2026-06-17\"}}]",
                      "weather in Oslo on Wednesday", sys, "[]");
    EXPECT_UNGROUNDED("[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\",\"date\":\"2026-06-15\"}}]",
                      "Oslo weather in 3 days", sys, "[]");
    EXPECT_UNGROUNDED("[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\",\"date\":\"2026-07-27\"}}]",
                      "Oslo weather on July 27th", sys, "[]");
    EXPECT_UNGROUNDED("[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\",\"date\":\"2026-06-14\"}}]",
                      "weather in Oslo tomorrow", sys, "[\"get_weather.date\"]");
    EXPECT_UNGROUNDED("[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\",\"date\":\"2026-06-16\"}}]",
                      "weather in Oslo on Wednesday", sys, "[\"get_weather.date\"]");
}

static void test_negation(void)
{
    const char *lights = "[{\"name\":\"set_timer\",\"arguments\":{\"minutes\":5}}]";
    int neg = -1;
    char *u;
    const char *negated[] = {"don't set a timer for 5 minutes", "Do NOT start a 5 minute timer",
                             "set a 5 minute timer... actually no, never mind", "no need to set a 5 minute timer",
                             "please don\xe2\x80\x99t set a timer for 5 minutes"};
    for (size_t i = 0; i < sizeof negated / sizeof negated[0]; i++) {
        u = ungrounded(lights, negated[i], NULL, &neg);
        CHECKF(neg == 1, "%s", negated[i]);
        free(u);
    }
    const char *positive[] = {"don't forget to set a 5 minute timer", "set a 5 minute timer", "5 minute timer, don't let me forget",
                              "set a 5 minute timer, if you don't mind"};
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++) {
        u = ungrounded(lights, positive[i], NULL, &neg);
        CHECKF(neg == 0, "%s", positive[i]);
        free(u);
    }
    /* a negation inside the message being sent is content, not a refusal */
    u = ungrounded("[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"Ana\",\"text\":\"don't wait up\"}}]",
                   "tell Ana don't wait up", NULL, &neg);
    CHECK(neg == 0);
    CHECK(u && !strcmp(u, "[]"));
    free(u);
    CHECK(nd_request_negates("don't turn on the lights", NULL) == 1);
    CHECK(nd_request_negates("turn on the lights", NULL) == 0);
    CHECK(nd_request_negates("Ok, I didn't ask you to get directions to Leeds", NULL) == 1);
    CHECK(nd_request_negates("I did not ask for the lights", NULL) == 1);
    CHECK(nd_request_negates("let's not adjust the thermostat to 70", NULL) == 1);
    CHECK(nd_request_negates("better not turn the flashlight off", NULL) == 1);
    CHECK(nd_request_negates("I'd rather not set an alarm", NULL) == 1);
    CHECK(nd_request_negates("let's set an alarm", NULL) == 0);
    CHECK(nd_request_negates(NULL, NULL) == 0);
}

/* nd_repeat_item_cut on a text that has just finished an element */
static int cut_of(const char *text, char *kept, size_t cap)
{
    size_t cut = 0;
    char closers[ND_REPEAT_MAX_DEPTH + 1];
    if (!nd_repeat_item_cut(text, strlen(text), &cut, closers, sizeof closers)) return 0;
    snprintf(kept, cap, "%.*s%s", (int)cut, text, closers);
    return 1;
}

static void test_repeated_items_and_calls_end_the_list(void)
{
    char kept[512];
    CHECK(!cut_of("[{\"name\":\"set_alarm\",\"arguments\":{\"days\":[\"Monday\",\"Friday\",", kept, sizeof kept));
    CHECK(cut_of("[{\"name\":\"set_alarm\",\"arguments\":{\"days\":[\"Monday\",\"Friday\",\"Monday\",", kept,
                 sizeof kept));
    CHECK(!strcmp(kept, "[{\"name\":\"set_alarm\",\"arguments\":{\"days\":[\"Monday\",\"Friday\"]}}]"));
    /* a repeated last item before ']' is dropped the same way */
    CHECK(cut_of("[{\"name\":\"a\",\"arguments\":{\"x\":[1,2,2]", kept, sizeof kept));
    CHECK(!strcmp(kept, "[{\"name\":\"a\",\"arguments\":{\"x\":[1,2]}}]"));
    /* a repeated call: dropped, and the list ends */
    const char *call = "{\"name\":\"set_timer\",\"arguments\":{\"minutes\":5}}";
    char text[512];
    snprintf(text, sizeof text, "[%s,{\"name\":\"b\",\"arguments\":{}},%s,", call, call);
    CHECK(cut_of(text, kept, sizeof kept));
    snprintf(text, sizeof text, "[%s,{\"name\":\"b\",\"arguments\":{}}]", call);
    CHECK(!strcmp(kept, text));
    /* equal items of different arrays, commas and brackets inside strings: no repeat */
    CHECK(!cut_of("[{\"name\":\"a\",\"arguments\":{\"x\":[1,2],\"y\":[1,", kept, sizeof kept));
    CHECK(!cut_of("[{\"name\":\"a\",\"arguments\":{\"x\":[\"a,b\",\"a]\",\"a,b]\",", kept, sizeof kept));
    CHECK(!cut_of("[{\"name\":\"a\",\"arguments\":{\"x\":[\"\\\"q\",\"q\",", kept, sizeof kept));
    CHECK(!cut_of("", kept, sizeof kept));
}

static void test_envelope_fields(void)
{
    nd_envelope e;
    memset(&e, 0, sizeof e);
    e.success = 1;
    e.calls = "[]";
    e.calls_len = 2;
    e.ungrounded = "[\"a.b\"]";
    e.negation = 1;
    e.out_of_schema = "[\"a.b\"]";
    e.missing = "[\"a.d\"]";
    e.unused_numbers = "[\"250\"]";
    e.completed = "[\"a.c\"]";
    e.split = "[\"a b\",\"c d\"]";
    e.asked_again = 1;
    e.leaned = 1;
    e.suppressed_calls = "[{\"name\":\"a\",\"arguments\":{\"b\":1}}]";
    nd_buf b;
    nd_buf_init(&b);
    nd_envelope_write(&b, &e);
    CHECK(strstr(b.data, ",\"validation\":{\"ungrounded\":[\"a.b\"],\"negation\":true,\"out_of_schema\":[\"a.b\"],"
                         "\"missing\":[\"a.d\"],\"unused_numbers\":[\"250\"],\"completed\":[\"a.c\"],\"split\":[\"a b\",\"c d\"],\"asked_again\":true,\"leaned\":true},\"suppressed_calls\":[{\"name\":\"a\",\"arguments\":{\"b\":1}}]}") != NULL);
    nd_buf_free(&b);
    /* nothing given, or text that is not a JSON array: [] (the envelope stays valid JSON) */
    e.ungrounded = NULL;
    e.negation = 0;
    e.out_of_schema = "[1,";
    e.completed = NULL;
    e.split = "[\"a\"";
    e.asked_again = 0;
    e.leaned = 0;
    e.missing = "nope";
    e.unused_numbers = NULL;
    e.suppressed_calls = "{oops";
    nd_buf_init(&b);
    nd_envelope_write(&b, &e);
    CHECK(strstr(b.data, "\"validation\":{\"ungrounded\":[],\"negation\":false,\"out_of_schema\":[],\"missing\":[],"
                         "\"unused_numbers\":[],\"completed\":[],\"split\":[],\"asked_again\":false,\"leaned\":false},\"suppressed_calls\":[]}") != NULL);
    nd_buf_free(&b);
}

/* End to end on the bundled model: --strict withholds a negated request's call. */
static void test_sessions_withhold_negated_requests(void)
{
    needle_model *m = NULL;
    needle_error err;
    needle_model_options mo = {.threads = 1};
    if (needle_model_open("models/needle-default.cact", NULL, &mo, &m, &err)) {
        CHECKF(0, "%s", err.message);
        return;
    }
    const char *tools = "[{\"name\":\"set_lights\",\"description\":\"Turn a room's lights on or off\",\"parameters\":{"
                        "\"type\":\"object\",\"properties\":{\"room\":{\"type\":\"string\"},\"on\":{\"type\":"
                        "\"boolean\"}},\"required\":[\"room\",\"on\"]}}]";
    for (int strict = 0; strict <= 1; strict++) {
        needle_session_options so = {.tools_json = tools, .strict = strict};
        needle_session *s = NULL;
        CHECK(needle_session_open(m, &so, &s, &err) == 0);
        if (!s) break;
        char *env = NULL;
        /* whatever the model answers, no session returns a call for a negated request
         * (strict or not, since 2026-12-06); a withheld call stays in suppressed_calls */
        CHECK(needle_session_send(s, "please don't turn off the kitchen lights", &env, &err) == 0);
        CHECK(env && strstr(env, "\"negation\":true"));
        CHECK(env && strstr(env, "\"function_calls\":[]"));
        /* a flagged call's confidence is halved: at most 0.5 */
        const char *cf = env ? strstr(env, "\"confidence\":") : NULL;
        if (env && !strstr(env, "\"suppressed_calls\":[]") && cf && strncmp(cf + 13, "null", 4))
            CHECKF(strtod(cf + 13, NULL) <= 0.5, "%s", cf);
        needle_free(env);
        env = NULL;
        CHECK(needle_session_send(s, "turn off the kitchen lights", &env, &err) == 0);
        CHECK(env && strstr(env, "\"validation\":{\"ungrounded\":[],\"negation\":false,\"out_of_schema\":[],"
                                 "\"missing\":[],\"unused_numbers\":[],\"completed\":[],\"split\":[],\"asked_again\":false,\"leaned\":false}"));
        CHECK(env && strstr(env, "\"suppressed_calls\":[]"));
        needle_free(env);
        needle_session_close(s);
    }
    needle_model_close(m);
}

/* End to end on the bundled model: "turn the lights on" names no room, and the
 * model fills the required room with "lights", its tool's own word; every
 * session withholds the call and names the argument as missing. */
static void test_sessions_withhold_placeholders(void)
{
    const char *tools = "[{\"name\":\"set_lights\",\"description\":\"Turn a room's lights on or off\",\"parameters\":{"
                        "\"type\":\"object\",\"properties\":{\"room\":{\"type\":\"string\"},\"on\":{\"type\":"
                        "\"boolean\"}},\"required\":[\"room\",\"on\"]}}]";
    const char *turns[] = {"turn the lights on", "turn the kitchen lights on"};
    char *env = bundled_envelope(tools, NULL, 0, turns, 1);
    CHECKF(env && strstr(env, "\"function_calls\":[]") && strstr(env, "\"missing\":[\"set_lights.room\"]") &&
               strstr(env, "\"suppressed_calls\":[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"lights\""),
           "%s", env ? env : "(none)");
    needle_free(env);
    /* then a room said, in the same conversation: the call stands */
    env = bundled_envelope(tools, NULL, 0, turns, 2);
    CHECKF(env && strstr(env, "\"missing\":[]") && strstr(env, "\"room\":\"kitchen\""), "%s", env ? env : "(none)");
    needle_free(env);
}

int main(void)
{
    RUN(test_strings_copied_or_not);
    RUN(test_numbers_in_digits_words_and_units);
    RUN(test_numbers_named_by_units_and_states);
    RUN(test_numbers_said_outside_the_schema);
    RUN(test_unique_items);
    RUN(test_out_of_schema_added_after_the_checks);
    RUN(test_placeholder_values_are_missing);
    RUN(test_required_numbers_not_said_are_missing);
    RUN(test_opening_word_is_missing);
    RUN(test_times);
    RUN(test_dates);
    RUN(test_negation);
    RUN(test_repeated_items_and_calls_end_the_list);
    RUN(test_envelope_fields);
    RUN(test_sessions_withhold_negated_requests);
    RUN(test_sessions_withhold_placeholders);
    return check_summary();
}
