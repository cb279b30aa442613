/* test_said_quantity.c - durations and volumes the request says, in the unit
 * the argument takes (src/agent/said_quantity.h): the quantities read (with
 * articles, halves, quarters, "and a half", decimals, words), the argument's
 * unit from its key or description, the repair and its limits (one call,
 * one quantity of the kind, one argument of the kind, integers), a quantity
 * the schema refuses reported as outside, and the bundled model end to end
 * through the grounding checks (a converted value is grounded). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/said_quantity.h"
#include "repair_check.h"

static const char *said(const char *req, char kind)
{
    static char out[256];
    double v[8];
    int n = nd_quantities_said(req, kind, v, 8);
    out[0] = 0;
    for (int i = 0; i < n; i++) snprintf(out + strlen(out), sizeof out - strlen(out), "%s%g", i ? "," : "", v[i]);
    return out;
}

#define SAID(req, kind, want) CHECKF(strcmp(said(req, kind), want) == 0, "%s -> %s, want %s", req, said(req, kind), want)

static void test_quantities_read(void)
{
    SAID("sleep timer for an hour", 't', "60");
    SAID("for 5 hours", 't', "300");
    SAID("forty five minutes", 't', "45");
    SAID("half an hour", 't', "30");
    SAID("a quarter of an hour", 't', "15");
    SAID("three quarters of an hour", 't', "45");
    SAID("an hour and a half", 't', "90");
    SAID("2 and a half hours", 't', "150");
    SAID("90 seconds", 't', "1.5");
    SAID("one hour and 20 minutes", 't', "60,20"); /* two quantities: no single one */
    SAID("half a litre", 'v', "500");
    SAID("a quarter litre", 'v', "250");
    SAID("1.2 litres of water", 'v', "1200");
    SAID("1867 ml", 'v', "1867");
    SAID("1867 ml", 't', "");                      /* another kind */
    SAID("quarter past seven", 't', "");           /* no unit */
    SAID("the hour is late", 't', "");
    SAID("", 't', "");
}

static const char *TOOLS =
    "[{\"name\":\"set_sleep_timer\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"minutes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":120}}}},"
    "{\"name\":\"log_water\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"amount\":{\"type\":\"number\",\"description\":\"how much, in ml\"}}}},"
    "{\"name\":\"two_durations\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"work_minutes\":{\"type\":\"integer\"},\"rest_minutes\":{\"type\":\"integer\"}}}}]";

typedef struct {
    const char *request;
    char *outside;
} quantity_case;
static int quantity_fix(nd_json *calls, const nd_json *tools, nd_buf *paths, int *np, void *ctx)
{
    quantity_case *c = ctx;
    return nd_fix_said_quantity(calls, tools, c->request, paths, np, c->outside, 64);
}
#define fix(calls, req, out) repair_apply(TOOLS, calls, quantity_fix, &(quantity_case){req, out})

#define FIXES(calls, req, want, want_outside)                                                          \
    do {                                                                                               \
        char o_[64];                                                                                   \
        const char *got_ = fix(calls, req, o_);                                                        \
        CHECKF(strcmp(got_, want) == 0 && strcmp(o_, want_outside) == 0, "%s -> %s (outside \"%s\")", req, got_, o_); \
    } while (0)

static void test_calls_repaired(void)
{
    const char *t = "[{\"name\":\"set_sleep_timer\",\"arguments\":{\"minutes\":15}}]";
    FIXES(t, "sleep timer for an hour",
          "[{\"name\":\"set_sleep_timer\",\"arguments\":{\"minutes\":60}}]|[\"set_sleep_timer.minutes\"]", "");
    /* the schema's maximum refuses 300 minutes: reported outside, left as written */
    FIXES(t, "set the sleep timer for 5 hours", "[{\"name\":\"set_sleep_timer\",\"arguments\":{\"minutes\":15}}]|[]",
          "set_sleep_timer.minutes");
    /* 90 seconds is not a whole number of minutes; two quantities; none */
    FIXES(t, "timer for 90 seconds", "[{\"name\":\"set_sleep_timer\",\"arguments\":{\"minutes\":15}}]|[]", "");
    FIXES(t, "an hour, no, 20 minutes", "[{\"name\":\"set_sleep_timer\",\"arguments\":{\"minutes\":15}}]|[]", "");
    FIXES(t, "sleep timer please", "[{\"name\":\"set_sleep_timer\",\"arguments\":{\"minutes\":15}}]|[]", "");
    /* the unit from the description; decimals where the type is number */
    FIXES("[{\"name\":\"log_water\",\"arguments\":{\"amount\":1000}}]", "log half a litre",
          "[{\"name\":\"log_water\",\"arguments\":{\"amount\":500}}]|[\"log_water.amount\"]", "");
    FIXES("[{\"name\":\"log_water\",\"arguments\":{\"amount\":1}}]", "I had 1.25 litres",
          "[{\"name\":\"log_water\",\"arguments\":{\"amount\":1250}}]|[\"log_water.amount\"]", "");
    /* two arguments of one kind: which one? */
    FIXES("[{\"name\":\"two_durations\",\"arguments\":{\"work_minutes\":5,\"rest_minutes\":1}}]", "work for an hour",
          "[{\"name\":\"two_durations\",\"arguments\":{\"work_minutes\":5,\"rest_minutes\":1}}]|[]", "");
    /* two calls: left alone */
    FIXES("[{\"name\":\"set_sleep_timer\",\"arguments\":{\"minutes\":15}},{\"name\":\"log_water\",\"arguments\":{\"amount\":1}}]",
          "an hour",
          "[{\"name\":\"set_sleep_timer\",\"arguments\":{\"minutes\":15}},{\"name\":\"log_water\",\"arguments\":{\"amount\":1}}]|[]", "");
}

/* End to end: a converted value is written, and the grounding checks see it as said. */
static void test_session_converts_and_grounds(void)
{
    const char *tools = "[{\"name\":\"set_sleep_timer\",\"description\":\"Stop playback after a number of minutes\","
                        "\"parameters\":{\"type\":\"object\",\"properties\":{\"minutes\":{\"type\":\"integer\","
                        "\"minimum\":1,\"maximum\":120}},\"required\":[\"minutes\"]}}]";
    /* the bundled model calls; whatever number it writes, the call comes out as 45
     * minutes, grounded */
    const char *first[] = {"sleep timer for three quarters of an hour"};
    char *env = bundled_envelope(tools, NULL, 0, first, 1);
    CHECKF(env && strstr(env, "\"minutes\":45") && strstr(env, "\"ungrounded\":[]") &&
               strstr(env, "\"completed\":[\"set_sleep_timer.minutes\"]"),
           "%s", env ? env : "(none)");
    needle_free(env);
    /* then 300 minutes is outside the schema: the model's call (5) is withheld */
    const char *both[] = {"sleep timer for three quarters of an hour", "now make it 5 hours"};
    env = bundled_envelope(tools, NULL, 0, both, 2);
    CHECKF(env && strstr(env, "\"out_of_schema\":[\"set_sleep_timer.minutes\"]") && strstr(env, "\"function_calls\":[]") &&
               strstr(env, "\"suppressed_calls\":[{"),
           "%s", env ? env : "(none)");
    needle_free(env);
}

int main(void)
{
    RUN(test_quantities_read);
    RUN(test_calls_repaired);
    RUN(test_session_converts_and_grounds);
    return check_summary();
}
