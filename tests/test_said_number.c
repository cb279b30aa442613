/* test_said_number.c - the one number a request says, written over a number
 * it does not say (src/agent/said_number.h): the numbers read (digits,
 * thousands, decimals, words, "a hundred and fifty"), the ones left out
 * (negative, times, dates, ordinals, a converting unit after, the bare
 * "one"), the repair rules (one call, one ungrounded number, one candidate,
 * the schema's type and bounds, numbers the call already uses), a decimal
 * cut to its whole part restored (not times, not two decimals, the schema's
 * type and bounds), and the bundled model through the public API. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/said_number.h"
#include "repair_check.h"

/* The numbers said, written "a,b,c". */
static const char *said(const char *req)
{
    static char out[256];
    double v[16];
    int n = nd_numbers_said(req, v, 16);
    out[0] = 0;
    for (int i = 0; i < n; i++) snprintf(out + strlen(out), sizeof out - strlen(out), "%s%g", i ? "," : "", v[i]);
    return out;
}

#define SAID(req, want) CHECKF(strcmp(said(req), want) == 0, "%s -> %s, want %s", req, said(req), want)

static void test_numbers_read(void)
{
    SAID("thermostat to 25 degrees", "25");
    SAID("log 1,867 millilitres and 42.99 dollars", "1867,42.99");
    SAID("twenty five degrees, twenty-one, seventeen", "25,21,17");
    SAID("a hundred and fifty percent", "150");
    SAID("three hundred and twelve", "312");
    SAID("twenty-eight point five degrees C", "28.5");  /* digits after "point", a word each */
    SAID("eighty point two five, then nine", "80.25,9");
    SAID("the point is five", "5");                     /* no number before "point" */
    SAID("volume to -10", "");                       /* negative */
    SAID("minus five degrees", "");
    SAID("alarm at 7:30 on 2026-07-01", "");          /* time, date */
    SAID("on the 14th and the 2nd", "");              /* ordinals */
    SAID("timer for two hours", "");                  /* a unit that converts */
    SAID("half a litre, 3 kg, 2 km", "");
    SAID("play the one with 12 songs", "12");         /* the bare "one" */
    SAID("", "");
    CHECK(nd_numbers_said(NULL, NULL, 0) == 0);
}

static const char *TOOLS =
    "[{\"name\":\"set_thermostat\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"temperature\":{\"type\":\"integer\",\"minimum\":10,\"maximum\":30},\"fan\":{\"type\":\"number\"},"
    "\"note\":{\"type\":\"string\"}}}},"
    "{\"name\":\"pick\",\"parameters\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"enum\":[1,5]}}}}]";

typedef struct {
    const char *request, *ungrounded;
} number_case;
static int number_fix(nd_json *calls, const nd_json *tools, nd_buf *paths, int *np, void *ctx)
{
    const number_case *c = ctx;
    return nd_fix_said_number(calls, tools, c->request, c->ungrounded, paths, np);
}
#define fix(calls, req, ung) repair_apply(TOOLS, calls, number_fix, &(number_case){req, ung})

#define FIXES(calls, req, ung, want) CHECKF(strcmp(fix(calls, req, ung), want) == 0, "%s -> %s", req, fix(calls, req, ung))

static void test_calls_repaired(void)
{
    const char *c = "[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":29}}]";
    const char *t = "[\"set_thermostat.temperature\"]";
    FIXES(c, "thermostat to twenty five degrees", t,
          "[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":25}}]|[\"set_thermostat.temperature\"]");
    /* not ungrounded: kept */
    FIXES(c, "thermostat to twenty five degrees", "[]", "[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":29}}]|[]");
    /* two candidates, none, or one the schema refuses (150 > 30, 21.5 not an integer) */
    FIXES(c, "thermostat to 25, or 26", t, "[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":29}}]|[]");
    FIXES(c, "warmer please", t, "[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":29}}]|[]");
    FIXES(c, "thermostat to 150", t, "[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":29}}]|[]");
    FIXES(c, "thermostat to 21.5", t, "[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":29}}]|[]");
    /* the same number said twice is one candidate */
    FIXES(c, "25 degrees, yes 25", t,
          "[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":25}}]|[\"set_thermostat.temperature\"]");
    /* a number the call already uses, in another number or a string, is not a candidate */
    FIXES("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":29,\"fan\":3}}]", "fan 3 and 22 degrees", t,
          "[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":22,\"fan\":3}}]|[\"set_thermostat.temperature\"]");
    FIXES("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":29,\"note\":\"room 12\"}}]", "room 12 to 22", t,
          "[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":22,\"note\":\"room 12\"}}]|[\"set_thermostat.temperature\"]");
    /* decimals where the type is number */
    FIXES("[{\"name\":\"set_thermostat\",\"arguments\":{\"fan\":2}}]", "fan to 2.5", "[\"set_thermostat.fan\"]",
          "[{\"name\":\"set_thermostat\",\"arguments\":{\"fan\":2.5}}]|[\"set_thermostat.fan\"]");
    /* two numbers not said, two calls, an enum: left alone */
    FIXES("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":29,\"fan\":7}}]", "22 degrees",
          "[\"set_thermostat.temperature\",\"set_thermostat.fan\"]",
          "[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":29,\"fan\":7}}]|[]");
    FIXES("[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":29}},{\"name\":\"pick\",\"arguments\":{\"n\":1}}]",
          "22 degrees", t,
          "[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":29}},{\"name\":\"pick\",\"arguments\":{\"n\":1}}]|[]");
    FIXES("[{\"name\":\"pick\",\"arguments\":{\"n\":1}}]", "pick 5", "[\"pick.n\"]", "[{\"name\":\"pick\",\"arguments\":{\"n\":1}}]|[]");
}

static const char *RADIO_TOOLS =
    "[{\"name\":\"tune_radio\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"frequency\":{\"type\":\"number\",\"minimum\":87.5,\"maximum\":108},"
    "\"preset\":{\"type\":\"integer\"}}}}]";

static int decimal_fix(nd_json *calls, const nd_json *tools, nd_buf *paths, int *np, void *req)
{
    return nd_fix_said_decimal(calls, tools, (const char *)req, paths, np);
}

#define DECIMAL(calls, req, want)                                                                                       \
    CHECKF(strcmp(repair_apply(RADIO_TOOLS, calls, decimal_fix, (void *)(req)), want) == 0, "%s -> %s", req,           \
           repair_apply(RADIO_TOOLS, calls, decimal_fix, (void *)(req)))

static void test_decimal_restored(void)
{
    const char *f98 = "[{\"name\":\"tune_radio\",\"arguments\":{\"frequency\":98}}]";
    const char *kept = "[{\"name\":\"tune_radio\",\"arguments\":{\"frequency\":98}}]|[]";
    DECIMAL(f98, "put the radio on 98.4",
            "[{\"name\":\"tune_radio\",\"arguments\":{\"frequency\":98.4}}]|[\"tune_radio.frequency\"]");
    DECIMAL(f98, "radio to 98.40, thanks",
            "[{\"name\":\"tune_radio\",\"arguments\":{\"frequency\":98.4}}]|[\"tune_radio.frequency\"]");
    DECIMAL(f98, "Radio to 98.4.",
            "[{\"name\":\"tune_radio\",\"arguments\":{\"frequency\":98.4}}]|[\"tune_radio.frequency\"]");
    DECIMAL(f98, "radio to 98", kept);                  /* no decimal said */
    DECIMAL(f98, "radio to 98.4 or 98.6", kept);        /* two decimals with that whole part */
    DECIMAL(f98, "radio to 98.4, yes 98.4",             /* one decimal said twice */
            "[{\"name\":\"tune_radio\",\"arguments\":{\"frequency\":98.4}}]|[\"tune_radio.frequency\"]");
    DECIMAL(f98, "radio to 97.4", kept);                /* another whole part */
    DECIMAL(f98, "wake me at 98.30", kept);             /* a clock time ("at") */
    DECIMAL(f98, "98.30 pm", kept);                     /* a clock time (pm) */
    DECIMAL(f98, "version 98.4.1", kept);               /* not a plain decimal */
    DECIMAL("[{\"name\":\"tune_radio\",\"arguments\":{\"frequency\":108}}]", "radio to 108.5",
            "[{\"name\":\"tune_radio\",\"arguments\":{\"frequency\":108}}]|[]"); /* above the maximum */
    DECIMAL("[{\"name\":\"tune_radio\",\"arguments\":{\"preset\":3}}]", "preset 3.5",
            "[{\"name\":\"tune_radio\",\"arguments\":{\"preset\":3}}]|[]"); /* an integer */
    DECIMAL("[{\"name\":\"tune_radio\",\"arguments\":{\"frequency\":98.4}}]", "radio to 98.4",
            "[{\"name\":\"tune_radio\",\"arguments\":{\"frequency\":98.4}}]|[]"); /* already the decimal */
    DECIMAL("[{\"name\":\"tune_radio\",\"arguments\":{\"frequency\":98}},{\"name\":\"tune_radio\",\"arguments\":{}}]",
            "radio to 98.4",
            "[{\"name\":\"tune_radio\",\"arguments\":{\"frequency\":98}},{\"name\":\"tune_radio\",\"arguments\":{}}]|[]");
}

static void test_bundled_model_number_is_read(void)
{
    const char *req[] = {"set the thermostat to twenty five degrees celsius"};
    char *env = bundled_envelope(NULL, NULL, 0, req, 1);
    CHECKF(env && strstr(env, "\"temperature\":25") && strstr(env, "\"ungrounded\":[]"), "%s", env ? env : "(none)");
    needle_free(env);
}

int main(void)
{
    RUN(test_numbers_read);
    RUN(test_calls_repaired);
    RUN(test_decimal_restored);
    RUN(test_bundled_model_number_is_read);
    return check_summary();
}
