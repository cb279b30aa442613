/* test_message_span.c - a message's text copied only in part is taken whole
 * (src/agent/message_span.h): the end of the request, quotation marks, the
 * word that introduces the message, courtesy words and marks at the end, a
 * second request after it, what is left alone, and the bundled model end to
 * end through the public API. */
#include "agent/message_span.h"
#include "repair_check.h"

static const char *TOOLS =
    "[{\"name\":\"send_message\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"recipient\":{\"type\":\"string\"},\"text\":{\"type\":\"string\"},"
    "\"Note\":{\"type\":\"string\"},\"code\":{\"type\":\"string\",\"pattern\":\"^[a-z ]+$\"},"
    "\"label\":{\"type\":\"string\"}},\"required\":[\"recipient\",\"text\"]}}]";

static int messages(nd_json *calls, const nd_json *tools, nd_buf *paths, int *np, void *request)
{
    return nd_complete_message_text(calls, tools, (const char *)request, paths, np);
}
#define widen(calls, req) repair_apply(TOOLS, calls, messages, (void *)(req))

/* The text after the repair of {"text":VALUE,"recipient":"x"} for request. */
static const char *text_of(const char *value, const char *request)
{
    return repair_string_after(TOOLS, messages, (void *)request, "send_message", "text", value, "\"recipient\":\"x\"");
}

#define TEXT(value, req, want) CHECKF(strcmp(text_of(value, req), want) == 0, "%s / %s -> %s", value, req, text_of(value, req))

static void test_to_the_end_of_the_request(void)
{
    /* " *": the argument is listed in validation.completed */
    TEXT("the boiler", "Let my landlord know the boiler is leaking again", "the boiler is leaking again *");
    TEXT("happy", "send a text to Siob\xc3\xa1n - happy graduation!!", "happy graduation!! *");
    TEXT("flight lands at", "can you text Aunt Pilar that the flight lands at 9", "the flight lands at 9 *");
    TEXT("running late", "Um, message Roslyn that running late, start brunch without me, would you?",
         "running late, start brunch without me *");
    TEXT("are we still", "drop Achille a line saying are we still on for Wednesday? real quick",
         "are we still on for Wednesday? *");
    TEXT("see you", "alright, text Gbolahan that see you at Kathu!", "see you at Kathu *");
    TEXT("the kids", "fire off a text to Damian saying the kids are with Emil tonight, thanks.",
         "the kids are with Emil tonight *");
}

static void test_quotation_marks(void)
{
    TEXT("the vet", "text Thandiwe Mokoena 'the vet said Biscuit is fine'", "the vet said Biscuit is fine *");
    TEXT("happy birthday", "send Sharon a text saying \"happy birthday Judith!\" please", "happy birthday Judith! *");
    TEXT("dinner", "message Margot: \xe2\x80\x9c" "dinner is at 7:20\xe2\x80\x9d thx", "dinner is at 7:20 *");
    /* apostrophes inside words are no quotation marks */
    TEXT("I'll be", "text mom that I'll be late", "I'll be late *");
    TEXT("we're", "tell Bo's mum that we're on our way", "we're on our way *");
}

static void test_where_it_stops(void)
{
    /* a second request after the message */
    TEXT("hi", "text Bo hi and then turn on the lights", "hi");
    TEXT("on my", "text Bo that on my way, then set an alarm for 7", "on my way *");
    TEXT("on my", "text Bo that on my way; lights off", "on my way *");
    /* another introducing word between: the message starts after it */
    TEXT("pls text", "Let Katherine know that pls text when you land!", "pls text when you land *");
    TEXT("text when", "Let Katherine know that pls text when you land!", "pls text when you land *");
}

static void test_what_is_left_alone(void)
{
    TEXT("hello", "say hello to Bo", "hello to Bo *"); /* (to the end: "say" introduces it) */
    TEXT("the whole thing", "text Bo the whole thing", "the whole thing");         /* already whole */
    TEXT("late", "late, so late: text Bo late", "late");                          /* said twice */
    TEXT("lat", "text Bo that I am late", "lat");                                 /* not at word edges */
    TEXT("nowhere", "text Bo that I am late", "nowhere");                         /* not said */
    TEXT("x", "write to x: running late", "x"); /* repeats the recipient: a placeholder, grounding.c's */
    /* not a message key, a restricted string, two calls */
    CHECK(strcmp(widen("[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"x\",\"text\":\"y\",\"label\":\"the\"}}]",
                       "text x that y, label the big one"),
                 "[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"x\",\"text\":\"y, label the big one\",\"label\":\"the\"}}]"
                 "|[\"send_message.text\"]") == 0);
    CHECK(strcmp(widen("[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"x\",\"text\":\"t\",\"code\":\"ab\"}}]",
                       "text x that t code ab cd"),
                 "[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"x\",\"text\":\"t code ab cd\",\"code\":\"ab\"}}]"
                 "|[\"send_message.text\"]") == 0);
    CHECK(strcmp(widen("[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"x\",\"Note\":\"the\"}}]",
                       "note for x saying the plan is off"),
                 "[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"x\",\"Note\":\"the plan is off\"}}]"
                 "|[\"send_message.Note\"]") == 0);
    const char *two = "[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"x\",\"text\":\"hi\"}},"
                      "{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"y\",\"text\":\"hi\"}}]";
    char want[512];
    snprintf(want, sizeof want, "%s|[]", two);
    CHECK(strcmp(widen(two, "text x and y that hi there"), want) == 0);
    CHECK(nd_message_span_widen("text x", "", 0) == NULL);
}

/* Through the public API: the bundled model writes part of the message. */
static void test_envelope_reports_the_whole_message(void)
{
    const char *req[] = {"can you text Aunt Pilar that the flight lands at 9"};
    char *env = bundled_envelope(NULL, NULL, 0, req, 1);
    CHECKF(env && strstr(env, "\"text\":\"the flight lands at 9\""), "%s", env ? env : "(none)");
    CHECKF(env && strstr(env, "\"send_message.text\""), "%s", env ? env : "(none)");
    needle_free(env);
}

int main(void)
{
    RUN(test_to_the_end_of_the_request);
    RUN(test_quotation_marks);
    RUN(test_where_it_stops);
    RUN(test_what_is_left_alone);
    RUN(test_envelope_reports_the_whole_message);
    return check_summary();
}
