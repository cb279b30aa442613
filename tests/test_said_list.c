/* test_said_list.c - the values a list argument names are written into the
 * call (src/agent/said_list.h): values in the request's order, plurals,
 * weekday sets and ranges, words inside the call's own strings, the schema's
 * item bounds, what is left alone (nothing said, the same list, two calls,
 * lists that are not string enums), and the bundled model end to end. */
#include "agent/said_list.h"
#include "repair_check.h"

static const char *TOOLS =
    "[{\"name\":\"set_alarm\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"time\":{\"type\":\"string\"},\"label\":{\"type\":\"string\"},"
    "\"days\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"enum\":[\"Monday\",\"Tuesday\",\"Wednesday\","
    "\"Thursday\",\"Friday\",\"Saturday\",\"Sunday\"]},\"maxItems\":7}},\"required\":[\"time\"]}},"
    "{\"name\":\"navigate_to\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"destination\":{\"type\":\"string\"},"
    "\"avoid\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"enum\":[\"tolls\",\"highways\",\"ferries\",\"dirt_roads\"]},"
    "\"maxItems\":2},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}}}}]";

static int lists(nd_json *calls, const nd_json *tools, nd_buf *paths, int *np, void *request)
{
    return nd_fix_said_lists(calls, tools, (const char *)request, paths, np);
}

/* The "days" written for an alarm call at 06:20 (args: more members), "-" when unchanged. */
static const char *days_after(const char *request, const char *args)
{
    static char calls[512], out[512];
    snprintf(calls, sizeof calls, "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"06:20\"%s}}]", args);
    const char *r = repair_apply(TOOLS, calls, lists, (void *)request);
    const char *d = strstr(r, "\"days\":[");
    if (strstr(r, "|[]") || !d) return "-";
    const char *e = strchr(d, ']');
    snprintf(out, sizeof out, "%.*s", (int)(e - d - 8), d + 8);
    return out;
}

#define DAYS(req, args, want) CHECKF(strcmp(days_after(req, args), want) == 0, "%s -> %s", req, days_after(req, args))

static void test_days_said(void)
{
    DAYS("set an alarm for 7 pm on Tuesdays and Thursdays named choir", "", "\"Tuesday\",\"Thursday\"");
    DAYS("alarm every Sunday", "", "\"Sunday\"");
    DAYS("every Monday, Saturday & Sunday at 8:30", "", "\"Monday\",\"Saturday\",\"Sunday\"");
    DAYS("Sunday and Monday at 6", "", "\"Sunday\",\"Monday\""); /* the request's order */
    DAYS("set a weekday alarm for 6:20 am", "", "\"Monday\",\"Tuesday\",\"Wednesday\",\"Thursday\",\"Friday\"");
    DAYS("alarm on weekends", "", "\"Saturday\",\"Sunday\"");
    DAYS("alarm at 6:20 every day", "",
         "\"Monday\",\"Tuesday\",\"Wednesday\",\"Thursday\",\"Friday\",\"Saturday\",\"Sunday\"");
    DAYS("daily alarm at 6:20", "", "\"Monday\",\"Tuesday\",\"Wednesday\",\"Thursday\",\"Friday\",\"Saturday\",\"Sunday\"");
    DAYS("alarm Monday to Friday", "", "\"Monday\",\"Tuesday\",\"Wednesday\",\"Thursday\",\"Friday\"");
    DAYS("alarm Tuesday through Thursday", "", "\"Tuesday\",\"Wednesday\",\"Thursday\"");
    DAYS("alarm Monday-Wednesday", "", "\"Monday\",\"Tuesday\",\"Wednesday\"");
    DAYS("alarm Friday to Monday", "", "\"Friday\",\"Saturday\",\"Sunday\",\"Monday\""); /* over the weekend */
    /* the model's wrong list is replaced; its right one is kept */
    DAYS("on Tuesdays and Thursdays", ",\"days\":[\"Tuesday\",\"Saturday\"]", "\"Tuesday\",\"Thursday\"");
    DAYS("on Tuesdays and Thursdays", ",\"days\":[\"Tuesday\",\"Thursday\"]", "-");
    /* nothing said; words that only look like days */
    DAYS("alarm at 6:20", "", "-");
    DAYS("alarm for the sundial tour", "", "-");
    /* a word inside the call's own string (the label) says no day */
    DAYS("alarm Friday at 6 called weekend trip", ",\"label\":\"weekend trip\"", "\"Friday\"");
    DAYS("alarm called weekend trip", ",\"label\":\"weekend trip\"", "-");
}

#define LISTS(calls, req, want)                                                                                       \
    CHECKF(strcmp(repair_apply(TOOLS, calls, lists, (void *)(req)), want) == 0, "%s -> %s", req,                     \
           repair_apply(TOOLS, calls, lists, (void *)(req)))

static void test_other_lists(void)
{
    const char *nav = "[{\"name\":\"navigate_to\",\"arguments\":{\"destination\":\"Harrow Lane\"}}]";
    LISTS(nav, "directions to 14 Harrow Lane avoiding tolls",
          "[{\"name\":\"navigate_to\",\"arguments\":{\"destination\":\"Harrow Lane\",\"avoid\":[\"tolls\"]}}]"
          "|[\"navigate_to.avoid\"]");
    /* '_' read as a space; a singular said for a plural value is not the value */
    LISTS(nav, "to Harrow Lane, no highways or dirt roads",
          "[{\"name\":\"navigate_to\",\"arguments\":{\"destination\":\"Harrow Lane\",\"avoid\":[\"highways\",\"dirt_roads\"]}}]"
          "|[\"navigate_to.avoid\"]");
    LISTS(nav, "to Harrow Lane, no toll roads", "[{\"name\":\"navigate_to\",\"arguments\":{\"destination\":\"Harrow Lane\"}}]|[]");
    /* more items than maxItems: left alone */
    LISTS(nav, "avoid tolls, highways and ferries",
          "[{\"name\":\"navigate_to\",\"arguments\":{\"destination\":\"Harrow Lane\"}}]|[]");
    /* a word inside the destination is not an item */
    LISTS("[{\"name\":\"navigate_to\",\"arguments\":{\"destination\":\"Ferries Terminal\"}}]", "take me to Ferries Terminal",
          "[{\"name\":\"navigate_to\",\"arguments\":{\"destination\":\"Ferries Terminal\"}}]|[]");
    /* two calls, undeclared tools, empty lists */
    LISTS("[{\"name\":\"navigate_to\",\"arguments\":{}},{\"name\":\"navigate_to\",\"arguments\":{}}]", "avoid tolls",
          "[{\"name\":\"navigate_to\",\"arguments\":{}},{\"name\":\"navigate_to\",\"arguments\":{}}]|[]");
    LISTS("[{\"name\":\"other\",\"arguments\":{}}]", "avoid tolls", "[{\"name\":\"other\",\"arguments\":{}}]|[]");
    LISTS("[]", "avoid tolls", "[]|[]");
}

static int drop_lists(nd_json *calls, const nd_json *tools, void *request)
{
    return nd_drop_unsaid_lists(calls, tools, (const char *)request);
}

/* The calls after nd_drop_unsaid_lists, and how many it removed ("calls|n"). */
static const char *after_drop(const char *calls_json, const char *request)
{
    return drop_apply(TOOLS, calls_json, drop_lists, (void *)request);
}

#define DROP(calls, req, want) CHECKF(strcmp(after_drop(calls, req), want) == 0, "%s -> %s", req, after_drop(calls, req))
/* left as it is: the same calls back, none removed */
static int kept(const char *calls, const char *req)
{
    char want[1024];
    snprintf(want, sizeof want, "%s|0", calls);
    return strcmp(after_drop(calls, req), want) == 0;
}
#define KEEP(calls, req) CHECKF(kept(calls, req), "%s -> %s", req, after_drop(calls, req))

/* An optional list none of whose items the request says is removed; one it says (in any of
 * the ways above) is kept, and so is a required one. */
static void test_unsaid_list_dropped(void)
{
    const char *pay = "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"20:45\",\"label\":\"pay rent\",\"days\":[\"Saturday\"]}}]";
    DROP(pay, "alright, set the alarm titled \"pay rent\", at 8.45pm asap",
         "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"20:45\",\"label\":\"pay rent\"}}]|1");
    KEEP(pay, "pay rent alarm at 8.45pm on Saturdays");
    const char *week = "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"15:30\",\"days\":[\"Monday\",\"Tuesday\"]}}]";
    KEEP(week, "alarm at 3:30pm on weekdays");
    KEEP(week, "alarm at 3:30pm Monday to Wednesday"); /* said, if not as written: said_list's job */
    DROP(week, "alarm at 3:30pm", "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"15:30\"}}]|1");
    /* a day inside the call's own label says no day */
    DROP("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"09:00\",\"label\":\"Monday blues\",\"days\":[\"Monday\"]}}]",
         "alarm at 9 called Monday blues",
         "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"09:00\",\"label\":\"Monday blues\"}}]|1");
    /* other lists; a free list (no enum) is not read; two calls are left alone */
    DROP("[{\"name\":\"navigate_to\",\"arguments\":{\"destination\":\"Harrow Lane\",\"avoid\":[\"ferries\"],\"tags\":[\"x\"]}}]",
         "directions to Harrow Lane",
         "[{\"name\":\"navigate_to\",\"arguments\":{\"destination\":\"Harrow Lane\",\"tags\":[\"x\"]}}]|1");
    KEEP("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"09:00\",\"days\":[\"Monday\"]}},"
         "{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"10:00\",\"days\":[\"Monday\"]}}]",
         "alarms at 9 and 10");
    /* required lists stay */
    static const char *req_tools =
        "[{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{\"days\":{\"type\":\"array\","
        "\"items\":{\"type\":\"string\",\"enum\":[\"Monday\",\"Friday\"]}}},\"required\":[\"days\"]}}]";
    nd_json *calls = NULL, *tools = NULL;
    needle_error err;
    const char *c = "[{\"name\":\"f\",\"arguments\":{\"days\":[\"Monday\"]}}]";
    if (nd_json_parse(c, strlen(c), NULL, &calls, &err) == 0 && nd_json_parse(req_tools, strlen(req_tools), NULL, &tools, &err) == 0)
        CHECKF(nd_drop_unsaid_lists(calls, tools, "do it") == 0, "a required list was dropped");
    else
        CHECKF(0, "parse: %s", err.message);
    nd_json_free(calls);
    nd_json_free(tools);
}

/* Through the public API: whatever time the model writes, one set_alarm call gets the weekdays. */
static void test_bundled_model_days(void)
{
    const char *req[] = {"set a weekday alarm for 6:20 am"};
    char *env = bundled_envelope(NULL, NULL, 0, req, 1);
    if (env && strstr(env, "\"function_calls\":[{\"name\":\"set_alarm\"") && !strstr(env, "}},{"))
        CHECKF(strstr(env, "\"days\":[\"Monday\",\"Tuesday\",\"Wednesday\",\"Thursday\",\"Friday\"]"), "%s", env);
    else
        CHECKF(0, "the bundled model no longer answers with one set_alarm call: %s", env ? env : "(none)");
    needle_free(env);
}

int main(void)
{
    RUN(test_days_said);
    RUN(test_other_lists);
    RUN(test_unsaid_list_dropped);
    RUN(test_bundled_model_days);
    return check_summary();
}
