/* test_said_choice.c - an optional enum value the request names is added to
 * the call (src/agent/said_choice.h): single and multi-word values, case,
 * whole words only, a one-word value said in its "-ing" form, what is left alone (two values said, a required or
 * present argument, a word inside a copied value, two calls, non-enum
 * strings), the path list, optional choices the request never says dropped
 * (and the ways a choice is said: words, forms, unit and currency symbols),
 * the envelope through the public API, and a choice named next to its name
 * that the enum lacks (outside the schema); a currency code said by its
 * symbol, a currency the enum of codes lacks, and a bent value that ends as
 * one the request says. */
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

static int drop_unsaid(nd_json *calls, const nd_json *tools, nd_buf *paths, int *np, void *request)
{
    (void)paths;
    (void)np;
    int n = nd_drop_unsaid_choices(calls, tools, (const char *)request);
    return n < 0 ? -1 : 0; /* (nothing listed: the count is checked below) */
}

/* The call's arguments after dropping the choices a request never says. */
static const char *kept(const char *tools, const char *call_args, const char *request)
{
    static char calls[512], out[512];
    snprintf(calls, sizeof calls, "[{\"name\":\"t\",\"arguments\":%s}]", call_args);
    const char *r = repair_apply(tools, calls, drop_unsaid, (void *)request);
    const char *a = strstr(r, "\"arguments\":"), *bar = strrchr(r, '|');
    if (!a || !bar) return r;
    snprintf(out, sizeof out, "%.*s", (int)(bar - a - 14), a + 12);
    return out;
}

static void test_unsaid_choices_dropped(void)
{
    const char *tools = "[{\"name\":\"t\",\"parameters\":{\"type\":\"object\",\"properties\":{"
                        "\"temperature\":{\"type\":\"number\"},"
                        "\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]},"
                        "\"mode\":{\"type\":\"string\",\"enum\":[\"heat\",\"cool\",\"this_week\"]},"
                        "\"currency\":{\"type\":\"string\",\"enum\":[\"USD\",\"EUR\",\"GBP\",\"JPY\",\"CAD\"]},"
                        "\"zone\":{\"type\":\"string\",\"enum\":[\"all\",\"driver\"]},"
                        "\"note\":{\"type\":\"string\"}},\"required\":[\"zone\"]}}]";
    struct {
        const char *args, *request, *want;
    } cases[] = {
        /* not said: dropped */
        {"{\"temperature\":23,\"unit\":\"celsius\",\"mode\":\"heat\"}", "put the heat on at 23 degrees",
         "{\"temperature\":23,\"mode\":\"heat\"}"},
        {"{\"currency\":\"GBP\"}", "log 40 at the deli", "{}"},
        /* said: words, forms, '_' as a space */
        {"{\"unit\":\"celsius\"}", "weather in celsius", "{\"unit\":\"celsius\"}"},
        {"{\"mode\":\"heat\"}", "set the heating to 21", "{\"mode\":\"heat\"}"},
        {"{\"mode\":\"cool\"}", "it cooled down, 21", "{\"mode\":\"cool\"}"},
        {"{\"mode\":\"this_week\"}", "steps this week", "{\"mode\":\"this_week\"}"},
        /* temperature symbols */
        {"{\"unit\":\"fahrenheit\"}", "set it to 68F", "{\"unit\":\"fahrenheit\"}"},
        {"{\"unit\":\"fahrenheit\"}", "set it to 68 \xc2\xb0" "F", "{\"unit\":\"fahrenheit\"}"},
        {"{\"unit\":\"celsius\"}", "twenty point five degrees C", "{\"unit\":\"celsius\"}"},
        {"{\"unit\":\"celsius\"}", "set it to 20, see you", "{}"}, /* no C after a number */
        /* currency symbols and names */
        {"{\"currency\":\"USD\"}", "log $42.99 at Staples", "{\"currency\":\"USD\"}"},
        {"{\"currency\":\"USD\"}", "log 42 dollars", "{\"currency\":\"USD\"}"},
        {"{\"currency\":\"EUR\"}", "14.50 \xe2\x82\xac at the caf\xc3\xa9", "{\"currency\":\"EUR\"}"},
        {"{\"currency\":\"GBP\"}", "\xc2\xa3" "63 to Addison Lee", "{\"currency\":\"GBP\"}"},
        {"{\"currency\":\"JPY\"}", "Hotel Sakura, \xc2\xa5" "18400", "{\"currency\":\"JPY\"}"},
        {"{\"currency\":\"CAD\"}", "CA$61.8 for food", "{\"currency\":\"CAD\"}"},
        {"{\"currency\":\"CAD\"}", "27.80 Canadian dollars", "{\"currency\":\"CAD\"}"},
        {"{\"currency\":\"EUR\"}", "eur 20", "{\"currency\":\"EUR\"}"},
        /* required choices and free strings stay */
        {"{\"zone\":\"all\",\"note\":\"x\"}", "nothing said", "{\"zone\":\"all\",\"note\":\"x\"}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *got = kept(tools, cases[i].args, cases[i].request);
        CHECKF(strcmp(got, cases[i].want) == 0, "%s / %s -> %s", cases[i].args, cases[i].request, got);
    }
    /* two calls: each loses the choices the request never says, and keeps the ones it says anywhere */
    nd_json *calls = NULL, *t = NULL;
    needle_error err;
    const char *two = "[{\"name\":\"t\",\"arguments\":{\"unit\":\"celsius\"}},{\"name\":\"t\",\"arguments\":{\"unit\":\"celsius\"}}]";
    if (nd_json_parse(two, strlen(two), NULL, &calls, &err) == 0 && nd_json_parse(tools, strlen(tools), NULL, &t, &err) == 0)
        CHECK(nd_drop_unsaid_choices(calls, t, "nothing said") == 2 && nd_json_get(&calls->items[0], "arguments")->count == 0 &&
              nd_json_get(&calls->items[1], "arguments")->count == 0);
    nd_json_free(calls);
    calls = NULL;
    if (nd_json_parse(two, strlen(two), NULL, &calls, &err) == 0)
        CHECK(nd_drop_unsaid_choices(calls, t, "20 celsius here and there") == 0);
    nd_json_free(calls);
    nd_json_free(t);
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

/* The "tool.key" nd_choice_outside names ("" for none). */
static const char *choice_outside_of(const char *calls_json, const char *request)
{
    return outside_apply(TOOLS, calls_json, request, nd_choice_outside);
}

#define CHOICE_OUTSIDE(calls, req, want) \
    CHECKF(strcmp(choice_outside_of(calls, req), want) == 0, "%s -> %s, want %s", req, choice_outside_of(calls, req), want)

/* A choice named next to the choice's name that the enum lacks: outside the schema. */
static void test_choices_outside_the_enum(void)
{
    const char *no_mode = "[{\"name\":\"set_climate\",\"arguments\":{\"temperature\":19}}]";
    CHOICE_OUTSIDE(no_mode, "climate to 19 vacation mode please", "set_climate.mode");
    CHOICE_OUTSIDE(no_mode, "climate to 19, mode turbo", "set_climate.mode");       /* the word after the name */
    CHOICE_OUTSIDE(CLIMATE, "climate to 19.5 in turbo mode", "set_climate.mode");   /* a value the request does not say */
    CHOICE_OUTSIDE(no_mode, "climate 19 for the passenger zone", "set_climate.zone");
    CHOICE_OUTSIDE(no_mode, "climate 19 with the max fan", ""); /* a name of three letters is not read */
    /* not judged: the value said, a stem of one, words that name no choice, short words, no name said */
    CHOICE_OUTSIDE(CLIMATE, "climate to 19.5 in eco mode", "");
    CHOICE_OUTSIDE(no_mode, "climate to 19 in comforting mode", "");
    CHOICE_OUTSIDE(no_mode, "climate to 19, same mode as before", "");
    CHOICE_OUTSIDE(no_mode, "climate to 19 in the mode you like", "");
    CHOICE_OUTSIDE(no_mode, "climate to 19, ok mode", "");
    CHOICE_OUTSIDE(no_mode, "climate to 19 on vacation", "");
    CHOICE_OUTSIDE(no_mode, "climate mode", "");                               /* the tool's own word */
    CHOICE_OUTSIDE("[{\"name\":\"set_climate\",\"arguments\":{\"temperature\":19}},"
                   "{\"name\":\"set_climate\",\"arguments\":{\"temperature\":20}}]", "19 then 20 vacation mode", "");
    CHOICE_OUTSIDE(no_mode, "", "");
}

static const char *EXPENSE_TOOLS =
    "[{\"name\":\"log_expense\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"merchant\":{\"type\":\"string\"},\"amount\":{\"type\":\"number\",\"maximum\":2000},"
    "\"currency\":{\"type\":\"string\",\"enum\":[\"USD\",\"EUR\",\"GBP\",\"JPY\",\"CAD\"]},"
    "\"category\":{\"type\":\"string\",\"enum\":[\"food\",\"travel\",\"office\"]},"
    "\"ref\":{\"type\":\"string\",\"enum\":[\"ABC\",\"XYZ\"]}},\"required\":[\"merchant\",\"amount\"]}},"
    "{\"name\":\"set_blinds\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"room\":{\"type\":\"string\"},\"position\":{\"type\":\"integer\",\"maximum\":100}}}},"
    "{\"name\":\"set_oven\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"temperature\":{\"type\":\"integer\",\"maximum\":250},"
    "\"mode\":{\"type\":\"string\",\"enum\":[\"bake\",\"fan\",\"grill\"]}}}}]";

static const char *EXPENSE = "[{\"name\":\"log_expense\",\"arguments\":{\"merchant\":\"Staples\",\"amount\":42.99}}]";

static const char *with_currency(const char *request)
{
    return repair_apply(EXPENSE_TOOLS, EXPENSE, choices, (void *)request);
}

/* A currency code is said by its symbol or name too, when it is added. */
static void test_currency_said_by_symbol(void)
{
    const char *usd = "[{\"name\":\"log_expense\",\"arguments\":{\"merchant\":\"Staples\",\"amount\":42.99,"
                      "\"currency\":\"USD\"}}]|[\"log_expense.currency\"]";
    CHECKF(strcmp(with_currency("log $42.99 at Staples"), usd) == 0, "%s", with_currency("log $42.99 at Staples"));
    CHECKF(strcmp(with_currency("42.99 dollars at Staples"), usd) == 0, "%s", with_currency("42.99 dollars at Staples"));
    CHECK(strstr(with_currency("£42.99 at Staples"), "\"currency\":\"GBP\"") != NULL);
    CHECK(strstr(with_currency("CAD 42.99 at Staples"), "\"currency\":\"CAD\"") != NULL);
    /* "C$" says CAD, and its "$" says USD: two said, none added */
    CHECK(strstr(with_currency("C$42.99 at Staples"), "currency") == NULL);
    CHECK(strstr(with_currency("42.99 at Staples"), "currency") == NULL);
}

static const char *currency_outside_of(const char *calls_json, const char *request)
{
    return outside_apply(EXPENSE_TOOLS, calls_json, request, nd_currency_outside);
}

#define CURRENCY_OUTSIDE(req, want) \
    CHECKF(strcmp(currency_outside_of(EXPENSE, req), want) == 0, "%s -> %s", req, currency_outside_of(EXPENSE, req))

/* A currency the enum of codes lacks is a value outside the schema. */
static void test_currency_outside_the_enum(void)
{
    CURRENCY_OUTSIDE("log an expense at Migros of 45 CHF", "log_expense.currency");
    CURRENCY_OUTSIDE("Staples, INR 4299", "log_expense.currency");
    CURRENCY_OUTSIDE("\xE2\x82\xB9" "4299 at Staples", "log_expense.currency");
    CURRENCY_OUTSIDE("4299 rupees at Staples", "log_expense.currency");
    CURRENCY_OUTSIDE("30 Swiss francs at Migros", "log_expense.currency");
    /* the enum's own currencies, other capitals, words holding a name, lower-case codes: nothing */
    CURRENCY_OUTSIDE("45 EUR at Migros", "");
    CURRENCY_OUTSIDE("$45 at the NYC store", "");
    CURRENCY_OUTSIDE("45 at CHFX Ltd", "");
    CURRENCY_OUTSIDE("45 at the franchise", "");
    CURRENCY_OUTSIDE("45 chf at Migros", "");
    /* an enum of other capitals ("ref": ABC, XYZ) is not one of currencies */
    CHECK(strcmp(outside_apply("[{\"name\":\"t\",\"parameters\":{\"type\":\"object\",\"properties\":{"
                               "\"ref\":{\"type\":\"string\",\"enum\":[\"ABC\",\"XYZ\"]}}}}]",
                               "[{\"name\":\"t\",\"arguments\":{}}]", "ref 45 CHF", nd_currency_outside),
                 "") == 0);
}

/* Was the bent argument's final value said (1) or not (0)? -2 when a text does not parse. */
static int bent_said(const char *calls_json, const char *request, const char *path)
{
    nd_json *calls = NULL, *tools = NULL;
    needle_error err;
    int r = -2;
    if (nd_json_parse(calls_json, strlen(calls_json), NULL, &calls, &err) == 0 &&
        nd_json_parse(EXPENSE_TOOLS, strlen(EXPENSE_TOOLS), NULL, &tools, &err) == 0)
        r = nd_bent_value_said(calls, tools, request, path);
    nd_json_free(calls);
    nd_json_free(tools);
    return r;
}

/* A value the grammar bent that ends as one the request says was the model's slip. */
static void test_bent_value_said(void)
{
    const char *oven = "[{\"name\":\"set_oven\",\"arguments\":{\"temperature\":200,\"mode\":\"grill\"}}]";
    CHECK(bent_said(oven, "grill at 200 for a quarter of an hour", "set_oven.mode") == 1);
    CHECK(bent_said(oven, "grill at 200 for a quarter of an hour", "set_oven.temperature") == 1);
    CHECK(bent_said(oven, "bake at 200", "set_oven.mode") == 0);   /* the choice not said */
    CHECK(bent_said(oven, "grill at 2000", "set_oven.temperature") == 0);
    CHECK(bent_said(oven, "grill at minus 200", "set_oven.temperature") == 0); /* the sign was what bent */
    const char *blinds = "[{\"name\":\"set_blinds\",\"arguments\":{\"room\":\"kitchen\",\"position\":19}},"
                         "{\"name\":\"set_oven\",\"arguments\":{\"temperature\":190}}]";
    CHECK(bent_said(blinds, "close the kitchen blinds and preheat the oven to 190", "set_blinds.position") == 0);
    /* the number belongs to another argument of the turn */
    const char *both = "[{\"name\":\"set_blinds\",\"arguments\":{\"room\":\"den\",\"position\":50}},"
                       "{\"name\":\"set_oven\",\"arguments\":{\"temperature\":50}}]";
    CHECK(bent_said(both, "blinds to 50 and the oven to 500", "set_oven.temperature") == 0);
    /* two calls bear the argument; a free string; no such argument; a path without a tool */
    const char *two = "[{\"name\":\"set_oven\",\"arguments\":{\"temperature\":200}},"
                      "{\"name\":\"set_oven\",\"arguments\":{\"temperature\":180}}]";
    CHECK(bent_said(two, "oven to 200, then to 180", "set_oven.temperature") == 0);
    CHECK(bent_said("[{\"name\":\"set_blinds\",\"arguments\":{\"room\":\"den\"}}]", "den blinds", "set_blinds.room") == 0);
    CHECK(bent_said(oven, "grill at 200", "set_oven.timer") == 0);
    CHECK(bent_said(oven, "grill at 200", "mode") == 0);
}

static int misplaced(nd_json *calls, const nd_json *tools, nd_buf *paths, int *np, void *ctx)
{
    (void)ctx;
    return nd_move_misplaced_choices(calls, tools, paths, np);
}

/* A choice written into the wrong (optional, free-text) argument moves to its own. */
static void test_misplaced_choices(void)
{
    const char *alarm = "[{\"name\":\"set_alarm\",\"parameters\":{\"type\":\"object\",\"properties\":{"
                        "\"time\":{\"type\":\"string\"},\"label\":{\"type\":\"string\"},"
                        "\"days\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"enum\":[\"Monday\",\"Saturday\"]}},"
                        "\"tone\":{\"type\":\"string\",\"enum\":[\"chime\",\"bell\"]}},\"required\":[\"time\"]}}]";
    const char *got = repair_apply(alarm, "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"06:20\",\"label\":\"saturday\"}}]",
                                   misplaced, NULL);
    CHECKF(!strcmp(got, "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"06:20\",\"days\":[\"Saturday\"]}}]|[\"set_alarm.days\"]"),
           "%s", got);
    got = repair_apply(alarm, "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"06:20\",\"label\":\"Bell\"}}]", misplaced, NULL);
    CHECKF(!strcmp(got, "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"06:20\",\"tone\":\"bell\"}}]|[\"set_alarm.tone\"]"),
           "%s", got);
    /* left alone: the choice's argument already there, a value that is not a whole choice, a required argument */
    const char *same[] = {
        "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"06:20\",\"label\":\"Monday\",\"days\":[\"Saturday\"]}}]",
        "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"06:20\",\"label\":\"Saturday run\"}}]",
        "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"Monday\"}}]",
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        char want[512];
        snprintf(want, sizeof want, "%s|[]", same[i]);
        got = repair_apply(alarm, same[i], misplaced, NULL);
        CHECKF(!strcmp(got, want), "%s -> %s", same[i], got);
    }
}

int main(void)
{
    RUN(test_choices_said_are_added);
    RUN(test_ing_forms);
    RUN(test_what_is_left_alone);
    RUN(test_unsaid_choices_dropped);
    RUN(test_envelope_reports_the_added_choice);
    RUN(test_choices_outside_the_enum);
    RUN(test_currency_said_by_symbol);
    RUN(test_currency_outside_the_enum);
    RUN(test_bent_value_said);
    RUN(test_misplaced_choices);
    return check_summary();
}
