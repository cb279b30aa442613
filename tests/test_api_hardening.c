/* test_api_hardening.c - the public API under careless use: a failed
 * needle_init keeps the working session, and an empty request is refused
 * instead of answered with an invented call. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "needle.h"

#define MODEL "tests/golden/tiny_w4.cact"

static const char *TOOLS =
    "[{\"name\":\"set_lights\",\"description\":\"Turn lights on or off\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"room\":{\"enum\":[\"kitchen\",\"hall\"]},\"on\":{\"type\":\"boolean\"}},"
    "\"required\":[\"room\",\"on\"]}}]";

static void test_failed_init_keeps_the_working_session(void)
{
    char out[8192];
    setenv("NEEDLE_MODEL", MODEL, 1);
    CHECK(needle_init(NULL, TOOLS, NULL) == 0);
    CHECK(needle_complete("turn on the kitchen lights", 64, out, sizeof out) > 0);
    /* bad tools: init fails ... */
    CHECK(needle_init(NULL, "[{\"name\":", NULL) == NEEDLE_EJSON);
    /* ... and the session that worked still answers */
    int len = needle_complete("turn off the hall lights", 64, out, sizeof out);
    CHECKF(len > 0, "needle_complete after a failed init returned %d", len);
    unsetenv("NEEDLE_MODEL");
}

static void test_empty_request_refused(void)
{
    char out[8192];
    CHECK(needle_complete("", 64, out, sizeof out) == NEEDLE_EINVAL);
    CHECK(needle_complete(" \t\n", 64, out, sizeof out) == NEEDLE_EINVAL);
    needle_model *m = NULL;
    needle_session *s = NULL;
    needle_error err = {0};
    CHECK(needle_model_open(MODEL, NULL, NULL, &m, &err) == 0);
    needle_session_options so;
    memset(&so, 0, sizeof so);
    so.tools_json = TOOLS;
    CHECK(m && needle_session_open(m, &so, &s, &err) == 0);
    char *env = (char *)1;
    CHECK(s && needle_session_send(s, "   ", &env, &err) == NEEDLE_EINVAL);
    CHECK(env == NULL && strstr(err.message, "empty"));
    /* a real request still works after the refusal */
    CHECK(s && needle_session_send(s, "turn on the kitchen lights", &env, &err) == 0 && env);
    needle_free(env);
    needle_session_close(s);
    needle_model_close(m);
}

int main(void)
{
    RUN(test_failed_init_keeps_the_working_session);
    RUN(test_empty_request_refused);
    return check_summary();
}
