/* test_unused_number.c - numbers the request says that no call uses
 * (src/agent/unused_number.h): which numbers are read (digits, units, money,
 * not times, dates, ordinals, spans of days or identifiers), when a call uses
 * one (the value, digits in a string, a unit step, a clock time as HHMM, the
 * count of calls), and the session withholding such calls end to end. */
#include "agent/unused_number.h"
#include "repair_check.h"

/* The numbers listed for calls_json and request ("" when none). */
static const char *unused(const char *calls_json, const char *request)
{
    static char out[256];
    nd_json *calls = NULL;
    needle_error err;
    snprintf(out, sizeof out, "(error)");
    if (nd_json_parse(calls_json, strlen(calls_json), NULL, &calls, &err) == 0) {
        nd_buf b;
        nd_buf_init(&b);
        int n = nd_numbers_unused(calls, request, &b);
        snprintf(out, sizeof out, "%s", n > 0 && b.data ? b.data : n == 0 ? "" : "(failed)");
        if (n == 0 && b.len) snprintf(out, sizeof out, "(wrote without counting)");
        nd_buf_free(&b);
    }
    nd_json_free(calls);
    return out;
}

#define UNUSED(calls, req, want) CHECKF(strcmp(unused(calls, req), want) == 0, "%s -> %s, want %s", req, unused(calls, req), want)

static const char *METRIC = "[{\"name\":\"get_metric\",\"arguments\":{\"metric\":\"heart_rate\"}}]";

static void test_numbers_no_call_uses(void)
{
    UNUSED(METRIC, "alert me if my heart rate passes 250", "[\"250\"]");
    UNUSED(METRIC, "log 5 litres of water", "[\"5\"]");
    UNUSED(METRIC, "log 300ml of water and 1,200 steps", "[\"300\",\"1,200\"]");
    UNUSED(METRIC, "spent $42.99 and £7", "[\"42.99\",\"7\"]");
    UNUSED(METRIC, "heart rate over 170bpm", "[\"170\"]");
}

/* numbers that are not quantities are not read */
static void test_numbers_not_read(void)
{
    UNUSED(METRIC, "heart rate at 7:30", "");
    UNUSED(METRIC, "heart rate on 2026-12-14", "");
    UNUSED(METRIC, "heart rate at 7 pm", "");
    UNUSED(METRIC, "heart rate at 4.45pm", "");
    UNUSED(METRIC, "heart rate at 1 o'clock", "");
    UNUSED(METRIC, "heart rate on the 14th", "");
    UNUSED(METRIC, "heart rate over the last 3 days", "");
    UNUSED(METRIC, "heart rate in Room 4B", "");
    UNUSED(METRIC, "heart rate for A1 and B12", "");
    UNUSED(METRIC, "heart rate from 5-10", "");
    UNUSED(METRIC, "heart rate, twenty five", ""); /* words are not read */
    UNUSED(METRIC, "heart rate", "");
}

/* a call uses a number by value, inside a string, a unit step away, as a clock time or by counting the calls */
static void test_numbers_used(void)
{
    UNUSED("[{\"name\":\"a\",\"arguments\":{\"max_bpm\":170}}]", "alert over 170 bpm", "");
    UNUSED("[{\"name\":\"a\",\"arguments\":{\"amount_ml\":1200}}]", "I had 1.2 litres", "");
    UNUSED("[{\"name\":\"a\",\"arguments\":{\"minutes\":120}}]", "for 2 hours", "");
    UNUSED("[{\"name\":\"a\",\"arguments\":{\"level\":0.5}}]", "volume to 50%", "");
    UNUSED("[{\"name\":\"a\",\"arguments\":{\"t\":-20}}]", "minus 20 please", "");
    UNUSED("[{\"name\":\"a\",\"arguments\":{\"text\":\"I'll be there in 5\"}}]", "text Bo I'll be there in 5", "");
    UNUSED("[{\"name\":\"a\",\"arguments\":{\"phone\":\"+234 803 555 0199\"}}]", "save +234 803 555 0199", "");
    UNUSED("[{\"name\":\"a\",\"arguments\":{\"time\":\"14:30\"}}]", "meet at 1430", "");
    UNUSED("[{\"name\":\"a\",\"arguments\":{\"time\":\"07:00\"}},{\"name\":\"a\",\"arguments\":{\"time\":\"08:00\"}}]",
           "set 2 alarms, at 7am and 8am", "");
    UNUSED("[{\"name\":\"tool_17\",\"arguments\":{}}]", "do task number 17", ""); /* in the tool's name */
    UNUSED("[{\"name\":\"tool_75\",\"arguments\":{}}]", "do task number 17", "[\"17\"]");
    /* one number used is enough */
    UNUSED("[{\"name\":\"a\",\"arguments\":{\"level\":20}}]", "pause it and set 20, not 30", "");
    /* no calls, no request */
    UNUSED("[]", "log 5 litres", "");
    CHECK(nd_numbers_unused(NULL, "5", NULL) == 0);
}

/* Through the public API: the bundled model answers get_weather {"location": "Paris"}, which leaves the 3 unused:
 * withheld, the call in suppressed_calls. */
static void test_session_withholds(void)
{
    const char *tools = "[{\"name\":\"get_weather\",\"description\":\"Get the weather for a place\",\"parameters\":{"
                        "\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\"}},\"required\":[\"location\"]}}]";
    const char *req[] = {"what's the weather in Paris for 3 people"};
    char *env = bundled_envelope(tools, NULL, 0, req, 1);
    CHECKF(env && strstr(env, "\"unused_numbers\":[\"3\"]") && strstr(env, "\"function_calls\":[]") &&
               strstr(env, "\"suppressed_calls\":[{\"name\":\"get_weather\""),
           "%s", env ? env : "(none)");
    needle_free(env);
    /* the same without the number: the call stands */
    const char *plain[] = {"what's the weather in Paris"};
    env = bundled_envelope(tools, NULL, 0, plain, 1);
    CHECKF(env && strstr(env, "\"function_calls\":[{\"name\":\"get_weather\"") && strstr(env, "\"unused_numbers\":[]"),
           "%s", env ? env : "(none)");
    needle_free(env);
}

int main(void)
{
    RUN(test_numbers_no_call_uses);
    RUN(test_numbers_not_read);
    RUN(test_numbers_used);
    RUN(test_session_withholds);
    return check_summary();
}
