/* test_near_duplicate.c - a call that repeats an earlier one but for one
 * string value, one of the two inside the other, is dropped
 * (nd_drop_near_duplicates, src/agent/repair.h): what counts as a near copy
 * and what does not, the first call kept, and the bundled model end to end
 * (the one call left gets the label the request names); and the arguments
 * put back in the schema's order after the repairs (nd_order_arguments),
 * where the grammar writes them, so that every repaired answer stays a
 * sentence of the tools' grammar. */
#include "agent/repair.h"
#include "repair_check.h"

static int near(nd_json *calls, const nd_json *tools, void *ctx)
{
    (void)tools;
    (void)ctx;
    return nd_drop_near_duplicates(calls);
}

/* The calls after the rule, written compactly, then '|' and how many were dropped. */
static const char *after(const char *calls_json) { return drop_apply(NULL, calls_json, near, NULL); }

#define AFTER(calls, want) CHECKF(strcmp(after(calls), want) == 0, "%s -> %s", calls, after(calls))

#define ALARM(label) "{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"08:15\",\"label\":\"" label "\"}}"
#define LIGHTS(room, on) "{\"name\":\"set_lights\",\"arguments\":{\"room\":\"" room "\",\"on\":" on "}}"

static void test_near_copies_dropped(void)
{
    AFTER("[" ALARM("to set") "," ALARM("to") "]", "[" ALARM("to set") "]|1");
    AFTER("[" LIGHTS("kids' gym", "false") "," LIGHTS("gym", "false") "]", "[" LIGHTS("kids' gym", "false") "]|1");
    AFTER("[" LIGHTS("gym", "false") "," LIGHTS("kids' gym", "false") "]", "[" LIGHTS("gym", "false") "]|1"); /* the first kept */
    AFTER("[" ALARM("a b") "," ALARM("a") "," ALARM("b") "]", "[" ALARM("a b") "]|2");
    /* an exact copy too */
    AFTER("[" ALARM("x") "," ALARM("x") "]", "[" ALARM("x") "]|1");
}

static void test_what_stays(void)
{
    const char *two_rooms = "[" LIGHTS("porch", "false") "," LIGHTS("kids' gym", "false") "]";
    char want[512];
    snprintf(want, sizeof want, "%s|0", two_rooms);
    AFTER(two_rooms, want); /* neither inside the other */
    const char *two_settings = "[" LIGHTS("gym", "false") "," LIGHTS("kids' gym", "true") "]";
    snprintf(want, sizeof want, "%s|0", two_settings);
    AFTER(two_settings, want); /* two values differ */
    const char *two_tools = "[" LIGHTS("gym", "false") ",{\"name\":\"other\",\"arguments\":{\"room\":\"gym\",\"on\":false}}]";
    snprintf(want, sizeof want, "%s|0", two_tools);
    AFTER(two_tools, want);
    const char *more_keys = "[" LIGHTS("gym", "false") ",{\"name\":\"set_lights\",\"arguments\":{\"room\":\"gym\",\"on\":false,\"x\":1}}]";
    snprintf(want, sizeof want, "%s|0", more_keys);
    AFTER(more_keys, want);
    const char *numbers = "[{\"name\":\"t\",\"arguments\":{\"n\":12}},{\"name\":\"t\",\"arguments\":{\"n\":1}}]";
    snprintf(want, sizeof want, "%s|0", numbers);
    AFTER(numbers, want); /* only strings */
    AFTER("[]", "[]|0");
    AFTER("[" ALARM("") "," ALARM("a") "]", "[" ALARM("") "," ALARM("a") "]|0"); /* an empty string is in every string */
}

/* Through the public API: two near copies become one call, and it gets the label named. */
static void test_bundled_model_one_alarm(void)
{
    const char *req[] = {"don't forget to set an alarm for 8:15, label it standup"};
    char *env = bundled_envelope(NULL, NULL, 0, req, 1);
    CHECKF(env && strstr(env, "\"function_calls\":[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"08:15\",\"label\":"
                              "\"standup\"}}]"),
           "%s", env ? env : "(none)");
    needle_free(env);
}

static int order(nd_json *calls, const nd_json *tools, void *ctx)
{
    (void)ctx;
    nd_order_arguments(calls, tools);
    return 0;
}

static void test_arguments_in_schema_order(void)
{
    const char *tools = "[{\"name\":\"t\",\"parameters\":{\"type\":\"object\",\"properties\":{"
                        "\"a\":{\"type\":\"number\"},\"b\":{\"type\":\"string\"},\"c\":{\"type\":\"string\"}}}}]";
    const char *got = drop_apply(tools, "[{\"name\":\"t\",\"arguments\":{\"c\":\"x\",\"z\":1,\"a\":2,\"y\":3,\"b\":\"w\"}},"
                                        "{\"name\":\"unknown\",\"arguments\":{\"c\":1,\"a\":2}}]", order, NULL);
    CHECKF(!strcmp(got, "[{\"name\":\"t\",\"arguments\":{\"a\":2,\"b\":\"w\",\"c\":\"x\",\"z\":1,\"y\":3}},"
                        "{\"name\":\"unknown\",\"arguments\":{\"c\":1,\"a\":2}}]|0"),
           "%s", got);
    /* end to end: the unit the request names is added after the mode the model wrote, and moved */
    const char *req[] = {"switch the AC to cool, 24C please"};
    char *env = bundled_envelope(NULL, NULL, 0, req, 1);
    if (env && strstr(env, "\"mode\":\"cool\"") && strstr(env, "\"unit\":\"celsius\""))
        CHECKF(strstr(env, "\"temperature\":24,\"unit\":\"celsius\",\"mode\":\"cool\""), "%s", env);
    else
        CHECKF(0, "the bundled model no longer answers with both here: %s", env ? env : "(none)");
    needle_free(env);
}

int main(void)
{
    RUN(test_near_copies_dropped);
    RUN(test_what_stays);
    RUN(test_bundled_model_one_alarm);
    RUN(test_arguments_in_schema_order);
    return check_summary();
}
