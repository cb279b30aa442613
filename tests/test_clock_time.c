/* test_clock_time.c - the clock time a request says (src/agent/clock_time.h):
 * every spoken and written form it reads, the half of the day (am/pm after
 * the time, a cue elsewhere, "at night"), what it refuses to guess (no half
 * of the day, two times, amounts, dates, quantities), and the repair of a
 * call: one HH:MM argument, a pattern that must accept the time, one call
 * only, the path reported, a time with no half of the day written as said
 * only over a value that is neither half's; then the bundled model through the public API. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/clock_time.h"
#include "repair_check.h"

static int hm(int h, int m) { return h * 60 + m; }

#define SAYS(req, want) CHECKF(nd_clock_time_said(req) == (want), "%s -> %d, want %d", req, nd_clock_time_said(req), want)

static void test_times_read(void)
{
    SAYS("alarm for half past seven in the morning", hm(7, 30));
    SAYS("I need an alarm at quarter to nine in the evening", hm(20, 45));
    SAYS("alarm at ten past four in the afternoon for school pickup", hm(16, 10));
    SAYS("wake me at twenty minutes past five in the morning", hm(5, 20));
    SAYS("alarm 20 to 6 pm", hm(17, 40));
    SAYS("quarter past twelve am", hm(0, 15));
    SAYS("alarm at midnight", hm(0, 0));
    SAYS("lunch reminder at noon", hm(12, 0));
    SAYS("set alarm for seven thirty am", hm(7, 30));
    SAYS("alarm at twelve forty pm", hm(12, 40));
    SAYS("seven oh five in the morning", hm(7, 5));
    SAYS("Adjust the alarm at 9:40 PM", hm(21, 40));
    SAYS("alarm at 8.45pm asap", hm(20, 45));
    SAYS("meeting at 8.45 in the evening", hm(20, 45));
    SAYS("alarm at 5am", hm(5, 0));
    SAYS("alarm at 7 p.m. please", hm(19, 0));
    SAYS("seven o'clock tonight", hm(19, 0));
    SAYS("at 7 in the morning", hm(7, 0));
    SAYS("Please set an alarm for 13:15 called take meds", hm(13, 15));
    SAYS("alarm at 00:30", hm(0, 30));
    SAYS("alarm at 2:30 at night", hm(2, 30));
    SAYS("alarm at 11 at night", hm(23, 0));
    SAYS("alarm at 12 at night", hm(0, 0));
}

static void test_what_is_not_guessed(void)
{
    SAYS("alarm at 7", -1);                               /* morning or evening? */
    SAYS("alarm at 7:30", -1);
    SAYS("alarm at 7 in the morning and 8 in the evening", -1); /* two times */
    SAYS("alarm at 6 in the morning, no, in the evening", -1);  /* cues disagree */
    SAYS("log 18.20 euros for lunch this afternoon", -1);       /* an amount */
    SAYS("lunch cost $12.30 this afternoon", -1);
    SAYS("timer for 5 minutes this morning", -1);               /* a quantity */
    SAYS("on 2026-07-01 in the morning", -1);                   /* a date */
    SAYS("at 25:00 in the evening", -1);
    SAYS("thirteen pm", -1);
    SAYS("", -1);
    CHECK(nd_clock_time_said(NULL) == -1);
}

static const char *TOOLS =
    "[{\"name\":\"set_alarm\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"time\":{\"type\":\"string\",\"pattern\":\"^([01][0-9]|2[0-3]):[0-5][0-9]$\"},\"label\":{\"type\":\"string\"}},"
    "\"required\":[\"time\"]}},"
    "{\"name\":\"half_hours\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"time\":{\"type\":\"string\",\"pattern\":\"^[0-2][0-9]:(00|30)$\"}}}},"
    "{\"name\":\"free\",\"parameters\":{\"type\":\"object\",\"properties\":{\"time\":{\"type\":\"string\"}}}}]";

static int clock_fix(nd_json *calls, const nd_json *tools, nd_buf *paths, int *np, void *request)
{
    return nd_fix_clock_time(calls, tools, (const char *)request, paths, np);
}
#define fix(calls, req) repair_apply(TOOLS, calls, clock_fix, (void *)(req))

#define FIXES(calls, req, want) CHECKF(strcmp(fix(calls, req), want) == 0, "%s -> %s", req, fix(calls, req))

static void test_calls_repaired(void)
{
    const char *c = "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:00\",\"label\":\"gym\"}}]";
    FIXES(c, "gym alarm at half past seven in the morning",
          "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:30\",\"label\":\"gym\"}}]|[\"set_alarm.time\"]");
    /* already right: unchanged */
    FIXES(c, "gym alarm at 7 am", "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:00\",\"label\":\"gym\"}}]|[]");
    /* no half of the day said: the time as said replaces one that is neither half's ... */
    FIXES(c, "gym alarm at 7:30",
          "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:30\",\"label\":\"gym\"}}]|[\"set_alarm.time\"]");
    FIXES("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"00:00\"}}]", "alarm at quarter past six",
          "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"06:15\"}}]|[\"set_alarm.time\"]");
    /* ... and either half's is kept (the model may know the half the request leaves unsaid) */
    FIXES("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"18:15\"}}]", "alarm at quarter past six",
          "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"18:15\"}}]|[]");
    FIXES("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"06:15\"}}]", "alarm at quarter past six",
          "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"06:15\"}}]|[]");
    /* two times, or cues that disagree: nothing to read */
    FIXES("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"00:00\"}}]", "alarm at 6:10 or at 7:20",
          "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"00:00\"}}]|[]");
    FIXES("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"00:00\"}}]", "this morning, alarm at 6:15 tonight",
          "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"00:00\"}}]|[]");
    /* the pattern must accept the time read; a free string is left to copying */
    FIXES("[{\"name\":\"half_hours\",\"arguments\":{\"time\":\"07:00\"}}]", "at 7:45 am",
          "[{\"name\":\"half_hours\",\"arguments\":{\"time\":\"07:00\"}}]|[]");
    FIXES("[{\"name\":\"half_hours\",\"arguments\":{\"time\":\"07:00\"}}]", "at 7:30 pm",
          "[{\"name\":\"half_hours\",\"arguments\":{\"time\":\"19:30\"}}]|[\"half_hours.time\"]");
    FIXES("[{\"name\":\"free\",\"arguments\":{\"time\":\"07:00\"}}]", "at 7:30 pm",
          "[{\"name\":\"free\",\"arguments\":{\"time\":\"07:00\"}}]|[]");
    /* two calls, or no HH:MM value: left alone */
    FIXES("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:00\"}},{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"08:00\"}}]",
          "at 7:30 pm",
          "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:00\"}},{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"08:00\"}}]|[]");
    FIXES("[{\"name\":\"set_alarm\",\"arguments\":{\"label\":\"7\"}}]", "at 7:30 pm",
          "[{\"name\":\"set_alarm\",\"arguments\":{\"label\":\"7\"}}]|[]");
}

/* The "tool.key" nd_clock_time_outside names for calls and request ("" for none). */
static const char *outside_of(const char *calls_json, const char *request)
{
    return outside_apply(TOOLS, calls_json, request, nd_clock_time_outside);
}

#define OUTSIDE(calls, req, want) CHECKF(strcmp(outside_of(calls, req), want) == 0, "%s -> %s", req, outside_of(calls, req))

/* A clock time that does not exist is a value outside the schema, whatever time the model wrote. */
static void test_impossible_times(void)
{
    CHECK(nd_clock_time_impossible("alarm at 7:75"));
    CHECK(nd_clock_time_impossible("set an alarm at 31:15 on Tuesdays"));
    CHECK(nd_clock_time_impossible("adjust the alarm at 13:60?"));
    CHECK(nd_clock_time_impossible("wake me up at 31 o'clock"));
    CHECK(nd_clock_time_impossible("alarm at 7.75 pm"));
    CHECK(nd_clock_time_impossible("alarm at 8.61"));
    /* times that exist, amounts, and numbers that are no times */
    CHECK(!nd_clock_time_impossible("alarm at 7:45"));
    CHECK(!nd_clock_time_impossible("alarm at 23:59 and 0:00"));
    CHECK(!nd_clock_time_impossible("it cost 18.75 euros"));
    CHECK(!nd_clock_time_impossible("send $12:99 to Ana"));
    CHECK(!nd_clock_time_impossible("wake me at 24 o'clock"));
    CHECK(!nd_clock_time_impossible("a 1.5 hour nap"));
    CHECK(!nd_clock_time_impossible(""));
    CHECK(!nd_clock_time_impossible(NULL));
    const char *c = "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:07\"}}]";
    OUTSIDE(c, "alarm at 7:75", "set_alarm.time");
    OUTSIDE(c, "alarm at 7:07", "");
    /* a time argument without a pattern, two calls, or no HH:MM value: nothing named */
    OUTSIDE("[{\"name\":\"free\",\"arguments\":{\"time\":\"07:07\"}}]", "alarm at 7:75", "");
    OUTSIDE("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:07\"}},{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"08:00\"}}]",
            "alarms at 7:75 and 8:00", "");
    OUTSIDE("[{\"name\":\"set_alarm\",\"arguments\":{\"label\":\"x\"}}]", "alarm at 7:75", "");
}

/* Through the public API: the request is answered with no call, the model's call withheld. */
static void test_bundled_model_impossible_time(void)
{
    const char *req[] = {"alarm at 7:75"};
    char *env = bundled_envelope(NULL, NULL, 0, req, 1);
    CHECKF(env && strstr(env, "\"function_calls\":[]") && strstr(env, "\"out_of_schema\":[\"set_alarm.time\"]"), "%s",
           env ? env : "(none)");
    needle_free(env);
}

static void test_bundled_model_time_is_read(void)
{
    const char *req[] = {"wake me at quarter to nine in the evening"};
    char *env = bundled_envelope(NULL, NULL, 0, req, 1);
    CHECKF(env && strstr(env, "\"time\":\"20:45\""), "%s", env ? env : "(none)");
    needle_free(env);
}

int main(void)
{
    RUN(test_times_read);
    RUN(test_what_is_not_guessed);
    RUN(test_calls_repaired);
    RUN(test_impossible_times);
    RUN(test_bundled_model_impossible_time);
    RUN(test_bundled_model_time_is_read);
    return check_summary();
}
