/* test_said_date.c - the date a request says (src/agent/said_date.h): ISO
 * dates, month names with days and years, the next such day from today,
 * relative dates against the system's date fact (today, tomorrow, in N
 * days / weeks, weekdays with this / next), what is not read (no system
 * date for relative ones, two dates, impossible days), and the call: a
 * date argument written or added, only one date argument, one call, the
 * schema's format or pattern; then the bundled model end to end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/said_date.h"
#include "repair_check.h"

static const char *said(const char *req, const char *system)
{
    static char out[16];
    if (!nd_date_said(req, system, out)) snprintf(out, sizeof out, "-");
    return out;
}

#define SAID(req, sys, want) CHECKF(strcmp(said(req, sys), want) == 0, "%s -> %s, want %s", req, said(req, sys), want)

static void test_dates_read(void)
{
    const char *thu = "date: 2026-12-03 (Thursday)";
    SAID("forecast for 2026-07-01 please", NULL, "2026-07-01");
    SAID("weather on 19 August 2028", NULL, "2028-08-19");
    SAID("weather on June 2nd 2028", NULL, "2028-06-02");
    SAID("the 14th of February", thu, "2027-02-14");     /* the next such day */
    SAID("on December 25th", thu, "2026-12-25");
    SAID("on the 3rd of December", thu, "2026-12-03");   /* today counts */
    SAID("weather today", thu, "2026-12-03");
    SAID("rain tonight?", thu, "2026-12-03");
    SAID("is it going to rain tomorrow", thu, "2026-12-04");
    SAID("the day after tomorrow", thu, "2026-12-05");
    SAID("how was it yesterday", thu, "2026-12-02");
    SAID("in 5 days", thu, "2026-12-08");
    SAID("in two weeks", thu, "2026-12-17");
    SAID("in a week", thu, "2026-12-10");
    SAID("this Saturday", thu, "2026-12-05");
    SAID("next Tuesday", thu, "2026-12-08");
    SAID("on Thursday", thu, "2026-12-10");                /* the next Thursday, not today */
    SAID("this Thursday", thu, "2026-12-03");
    SAID("on 31 December 2026, i.e. 2026-12-31", NULL, "2026-12-31"); /* the same date twice */
}

static void test_what_is_not_read(void)
{
    SAID("weather tomorrow", NULL, "-");                   /* no date fact */
    SAID("on the 14th of February", NULL, "-");             /* no year, no today */
    SAID("today or tomorrow", "date: 2026-12-03", "-");     /* two dates */
    SAID("on 2026-02-30", NULL, "-");                       /* no such day */
    SAID("on February 30", "date: 2026-12-03", "-");
    SAID("weather in Lisbon", "date: 2026-12-03", "-");
    SAID("room 12 at 7:30", "date: 2026-12-03", "-");
    CHECK(!nd_date_said(NULL, NULL, (char[11]){0}));
}

static const char *TOOLS =
    "[{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\"},"
    "\"date\":{\"type\":\"string\",\"format\":\"date\"}},\"required\":[\"location\"]}},"
    "{\"name\":\"add_event\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"day\":{\"type\":\"string\",\"pattern\":\"^[0-9]{4}-[0-9]{2}-[0-9]{2}$\"}}}},"
    "{\"name\":\"trip\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"from\":{\"type\":\"string\",\"format\":\"date\"},\"to\":{\"type\":\"string\",\"format\":\"date\"}}}}]";

static int date_fix(nd_json *calls, const nd_json *tools, nd_buf *paths, int *np, void *request)
{
    return nd_fix_said_date(calls, tools, (const char *)request, "date: 2026-12-03 (Thursday)", paths, np);
}
#define fix(calls, req) repair_apply(TOOLS, calls, date_fix, (void *)(req))

#define FIXES(calls, req, want) CHECKF(strcmp(fix(calls, req), want) == 0, "%s -> %s", req, fix(calls, req))

static void test_calls_repaired(void)
{
    /* added when left out, written when wrong, kept when right */
    FIXES("[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\"}}]", "Oslo tomorrow",
          "[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\",\"date\":\"2026-12-04\"}}]|[\"get_weather.date\"]");
    FIXES("[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\",\"date\":\"2026-12-07\"}}]", "Oslo this Saturday",
          "[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\",\"date\":\"2026-12-05\"}}]|[\"get_weather.date\"]");
    FIXES("[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\",\"date\":\"2026-12-04\"}}]", "Oslo tomorrow",
          "[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\",\"date\":\"2026-12-04\"}}]|[]");
    /* a pattern that takes the date */
    FIXES("[{\"name\":\"add_event\",\"arguments\":{}}]", "party on 19 August 2028",
          "[{\"name\":\"add_event\",\"arguments\":{\"day\":\"2028-08-19\"}}]|[\"add_event.day\"]");
    /* no date said, two date arguments, two calls: left alone */
    FIXES("[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\"}}]", "Oslo weather",
          "[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\"}}]|[]");
    FIXES("[{\"name\":\"trip\",\"arguments\":{}}]", "trip tomorrow", "[{\"name\":\"trip\",\"arguments\":{}}]|[]");
    FIXES("[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\"}},{\"name\":\"add_event\",\"arguments\":{}}]",
          "Oslo tomorrow",
          "[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\"}},{\"name\":\"add_event\",\"arguments\":{}}]|[]");
}

static void test_bundled_model_date_added(void)
{
    const char *req[] = {"check the forecast for Nairobi next Tuesday"};
    char *env = bundled_envelope(NULL, "date: 2026-12-03 (Thursday)", 0, req, 1);
    CHECKF(env && strstr(env, "\"date\":\"2026-12-08\"") && strstr(env, "\"get_weather.date\""), "%s", env ? env : "(none)");
    needle_free(env);
}

int main(void)
{
    RUN(test_dates_read);
    RUN(test_what_is_not_read);
    RUN(test_calls_repaired);
    RUN(test_bundled_model_date_added);
    return check_summary();
}
