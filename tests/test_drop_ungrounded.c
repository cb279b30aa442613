/* test_drop_ungrounded.c - an optional argument the grounding checks find
 * ungrounded is dropped (nd_drop_ungrounded_optional, src/agent/repair.h):
 * optional ones only, not the values outside the schema, every call, and the
 * bundled model end to end (a made-up date leaves the weather calls). */
#include "agent/repair.h"
#include "repair_check.h"

static const char *TOOLS =
    "[{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"location\":{\"type\":\"string\"},\"date\":{\"type\":\"string\",\"format\":\"date\"},"
    "\"brightness\":{\"type\":\"integer\",\"maximum\":100}},\"required\":[\"location\"]}}]";

typedef struct {
    const char *ungrounded, *outside;
} lists;

static int drop(nd_json *calls, const nd_json *tools, nd_buf *paths, int *np, void *ctx)
{
    (void)paths;
    (void)np;
    const lists *l = ctx;
    int n = nd_drop_ungrounded_optional(calls, tools, l->ungrounded, l->outside);
    return n < 0 ? -1 : 0;
}

#define DROPS(calls, ung, out, want)                                                                                  \
    CHECKF(strcmp(repair_apply(TOOLS, calls, drop, &(lists){ung, out}), want) == 0, "%s -> %s", calls,                 \
           repair_apply(TOOLS, calls, drop, &(lists){ung, out}))

static void test_dropped(void)
{
    const char *w = "[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\",\"date\":\"2028-08-23\"}}]";
    DROPS(w, "[\"get_weather.date\"]", "[]", "[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\"}}]|[]");
    /* grounded: kept; required: kept (the checks report it) */
    DROPS(w, "[]", "[]", "[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\",\"date\":\"2028-08-23\"}}]|[]");
    DROPS(w, "[\"get_weather.location\"]", "[]",
          "[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\",\"date\":\"2028-08-23\"}}]|[]");
    /* a value outside the schema stays: the turn is refused for it */
    DROPS("[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\",\"brightness\":100}}]",
          "[\"get_weather.brightness\"]", "[\"get_weather.brightness\"]",
          "[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\",\"brightness\":100}}]|[]");
    /* every call; a key that only starts like a listed one is not it */
    DROPS("[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"A\",\"date\":\"2028-08-23\"}},"
          "{\"name\":\"get_weather\",\"arguments\":{\"location\":\"B\",\"date\":\"2028-08-23\"}}]",
          "[\"get_weather.date\",\"get_weather.date\"]", "[]",
          "[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"A\"}},{\"name\":\"get_weather\",\"arguments\":"
          "{\"location\":\"B\"}}]|[]");
    DROPS(w, "[\"get_weather.dat\"]", "[]", "[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\",\"date\":\"2028-08-23\"}}]|[]");
    DROPS("[{\"name\":\"other\",\"arguments\":{\"date\":\"x\"}}]", "[\"other.date\"]", "[]",
          "[{\"name\":\"other\",\"arguments\":{\"date\":\"x\"}}]|[]");
}

/* Through the public API: no date is said, so none is sent. */
static void test_bundled_model(void)
{
    const char *req[] = {"Look up the weather forecast in Ritaborough and also Sihombing Park for me"};
    char *env = bundled_envelope(NULL, NULL, 0, req, 1);
    CHECKF(env && strstr(env, "\"function_calls\":[{") && !strstr(env, "\"date\":\""), "%s", env ? env : "(none)");
    needle_free(env);
}

int main(void)
{
    RUN(test_dropped);
    RUN(test_bundled_model);
    return check_summary();
}
