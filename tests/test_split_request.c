/* test_split_request.c - a request that asks for two things answered one part
 * at a time (src/agent/split_request.h, split_turn.h): where a request may be
 * cut and in which order, the places it must not be cut, and through the
 * public API the bundled model's answer, its validation.split, the option
 * that turns it off and the turns it does not touch. */
#include "agent/split_request.h"
#include "repair_check.h"

/* Every cut of request, as "left|right" joined by " ; " (calls: the model's
 * answer as JSON, or NULL). */
static const char *cuts(const char *request, const char *calls_json)
{
    static char out[2048];
    nd_json *calls = NULL;
    needle_error err;
    if (calls_json && nd_json_parse(calls_json, strlen(calls_json), NULL, &calls, &err)) return "(bad calls)";
    nd_split_point p[ND_SPLIT_MAX_POINTS];
    int n = nd_split_points(request, calls, p, ND_SPLIT_MAX_POINTS);
    nd_json_free(calls);
    out[0] = '\0';
    size_t len = strlen(request), used = 0;
    for (int i = 0; i < n; i++) {
        if (!(p[i].left_begin <= p[i].left_end && p[i].left_end <= p[i].right_begin &&
              p[i].right_begin <= p[i].right_end && p[i].right_end <= len))
            return "(bad bounds)";
        used += (size_t)snprintf(out + used, sizeof out - used, "%s%.*s|%.*s", i ? " ; " : "",
                                 (int)(p[i].left_end - p[i].left_begin), request + p[i].left_begin,
                                 (int)(p[i].right_end - p[i].right_begin), request + p[i].right_begin);
        if (used >= sizeof out) return "(too long)";
    }
    return out;
}

#define CUTS(req, calls, want) CHECKF(strcmp(cuts(req, calls), want) == 0, "%s -> %s", req, cuts(req, calls))

static void test_where_a_request_is_cut(void)
{
    CUTS("set the thermostat to 20 and turn on the hallway lights", NULL,
         "set the thermostat to 20|turn on the hallway lights");
    CUTS("lights off in the office, then set an alarm for 9:30 pm", NULL,
         "lights off in the office|set an alarm for 9:30 pm");
    CUTS("unlock the garage and then vacuum the garage", NULL, "unlock the garage|vacuum the garage");
    CUTS("hmm, change the thermostat to 30, plus switch off the balcony lights", NULL,
         "hmm, change the thermostat to 30|switch off the balcony lights");
    CUTS("turn on the playroom lights; turn the shed lights on", NULL, "turn on the playroom lights|turn the shed lights on");
    CUTS("Hmm, turn on the south patio & the porch lights", NULL, "Hmm, turn on the south patio|the porch lights");
    /* a number's decimal point is not a sentence end */
    CUTS("radio to 95.8 and call Priya on speaker", NULL, "radio to 95.8|call Priya on speaker");
}

static void test_strongest_join_first(void)
{
    /* "also" before the sentence end, "then" before "and" */
    CUTS("Turn the lights off in the balcony. Also shut off the lounge lights", NULL,
         "Turn the lights off in the balcony|shut off the lounge lights ; "
         "Turn the lights off in the balcony|Also shut off the lounge lights");
    CUTS("dim the den and the hall, then text Ana we are home", NULL,
         "dim the den and the hall|text Ana we are home ; dim the den|the hall, then text Ana we are home");
    /* "and then" / "and also" are one join, not "and" and "then" */
    CUTS("lock the front door and also start the vacuum", NULL, "lock the front door|start the vacuum");
}

static void test_where_it_is_not_cut(void)
{
    /* a string value the model wrote across the join */
    CUTS("play Simon and Art Garfunkel", "[{\"name\":\"play\",\"arguments\":{\"query\":\"Simon and Art Garfunkel\"}}]", "");
    CUTS("play Simon and Art Garfunkel", NULL, "play Simon|Art Garfunkel");
    CUTS("text mom that I'll be late and pick up milk",
         "[{\"name\":\"send\",\"arguments\":{\"to\":\"mom\",\"text\":\"I'll be late and pick up milk\"}}]", "");
    CUTS("vacuum the den and the big hall", "[{\"name\":\"vacuum\",\"arguments\":{\"rooms\":[\"den and the big hall\"]}}]",
         "");
    /* inside quotes */
    CUTS("text mom \"I'll be late and pick up milk\" now", NULL, "");
    CUTS("text mom \xe2\x80\x9cI'll be late and pick up milk\xe2\x80\x9d now", NULL, "");
    /* one number in words; a title's full stop */
    CUTS("log one hundred and twenty ml of water", NULL, "");
    CUTS("hmm, phone Ms. Andersson please", NULL, "");
    /* a lone word next to the cut, on either side */
    CUTS("pause and set the volume to 20", NULL, "");
    CUTS("Quick favour. Oh and set the sleep timer", NULL, "Quick favour|Oh and set the sleep timer");
    CUTS("set the volume to 20 and go", NULL, "");
    /* the right side qualifies the left */
    CUTS("phone someone from the contacts and called Amber", NULL, "");
    CUTS("set a timer for pasta and with sound on", NULL, "");
    /* nothing to cut */
    CUTS("", NULL, "");
    CUTS("and then", NULL, "");
    CUTS("turn on the lights and", NULL, "");
    CUTS("grand theft and android phones", NULL, "grand theft|android phones"); /* whole words only: "grand" */
}

static void test_at_most_max_points(void)
{
    nd_split_point p[2];
    CHECK(nd_split_points("turn on the den and the hall and the porch and the attic", NULL, p, 2) == 2);
    CHECK(nd_split_points("turn on the den and the hall", NULL, p, 0) == 0);
    CHECK(nd_split_points(NULL, NULL, p, 2) == 0);
}

/* The other objects of one call: "key:V-first|reduced request" or
 * "key:V-second|reduced request", joined by " ; ". */
static const char *objects(const char *request, const char *call_json)
{
    static char out[2048];
    nd_json *call = NULL;
    needle_error err;
    if (nd_json_parse(call_json, strlen(call_json), NULL, &call, &err)) return "(bad call)";
    nd_other_object o[ND_OTHER_OBJECT_MAX];
    int n = nd_other_objects(request, call, o, ND_OTHER_OBJECT_MAX);
    out[0] = '\0';
    size_t len = strlen(request), used = 0;
    for (int i = 0; i < n; i++) {
        if (!(o[i].cut_begin < o[i].cut_end && o[i].cut_end <= len && o[i].value_begin < o[i].value_end)) {
            nd_json_free(call);
            return "(bad bounds)";
        }
        used += (size_t)snprintf(out + used, sizeof out - used, "%s%s:%s|%.*s%s", i ? " ; " : "", o[i].key,
                                 o[i].value_first ? "first" : "second", (int)o[i].cut_begin, request,
                                 request + o[i].cut_end);
        if (used >= sizeof out) break;
    }
    nd_json_free(call);
    return out;
}

#define OBJECTS(req, call, want) CHECKF(strcmp(objects(req, call), want) == 0, "%s -> %s", req, objects(req, call))

static void test_one_action_two_objects(void)
{
    OBJECTS("yes, call Filippo & Londisizwe for me", "{\"name\":\"call\",\"arguments\":{\"name\":\"Filippo\"}}",
            "name:first|yes, call Londisizwe for me");
    /* the far side's filler word that V's side has goes too */
    OBJECTS("what's the weather in Lisbon and in Porto", "{\"name\":\"w\",\"arguments\":{\"location\":\"Lisbon\"}}",
            "location:first|what's the weather in Porto");
    OBJECTS("um, turn the west closet and also the porch lights off",
            "{\"name\":\"l\",\"arguments\":{\"room\":\"west closet\",\"on\":false}}",
            "room:first|um, turn the porch lights off");
    /* V after the join, up to two filler words between */
    OBJECTS("switch off the lights in Jon's room and also the new driveway.",
            "{\"name\":\"l\",\"arguments\":{\"room\":\"new driveway\"}}", "room:second|switch off the lights in Jon's room.");
    OBJECTS("Could you navigate to Vanuatu and Reunion now", "{\"name\":\"n\",\"arguments\":{\"destination\":\"reunion\"}}",
            "destination:second|Could you navigate to Vanuatu now");
    /* a clock time said without its leading zero ("6:00" for "06:00"); the said form only when the
     * written one is not in the request */
    OBJECTS("alarms at 6:00 and 6:10 please", "{\"name\":\"a\",\"arguments\":{\"time\":\"06:00\"}}",
            "time:first|alarms at 6:10 please");
    OBJECTS("alarms at 06:00 and 6:10", "{\"name\":\"a\",\"arguments\":{\"time\":\"06:00\"}}",
            "time:first|alarms at 6:10");
    OBJECTS("alarms at 16:00 and 6:10", "{\"name\":\"a\",\"arguments\":{\"time\":\"06:00\"}}", "");
    /* not next to a join, inside a word, or not a string */
    OBJECTS("turn on the kitchen lights and make them blue", "{\"name\":\"l\",\"arguments\":{\"room\":\"kitchen\"}}", "");
    OBJECTS("call Anna and Bo", "{\"name\":\"c\",\"arguments\":{\"name\":\"Ann\"}}", "");
    OBJECTS("set 20 and 21", "{\"name\":\"t\",\"arguments\":{\"v\":20}}", "");
    OBJECTS("call Bo and", "{\"name\":\"c\",\"arguments\":{\"name\":\"Bo\"}}", "");
    OBJECTS("call Bo and Al", "{\"name\":\"c\",\"arguments\":{\"name\":\"\"}}", "");
    OBJECTS("call Bo and Al", "{\"name\":\"c\"}", "");
}

static void test_the_other_object_flanks_the_join(void)
{
    const char *req = "turn the back driveway & the porch lights off";
    nd_json *call = NULL;
    needle_error err;
    const char *text = "{\"name\":\"l\",\"arguments\":{\"room\":\"back driveway\"}}";
    CHECK(nd_json_parse(text, strlen(text), NULL, &call, &err) == 0);
    nd_other_object o[ND_OTHER_OBJECT_MAX];
    CHECK(nd_other_objects(req, call, o, ND_OTHER_OBJECT_MAX) == 1);
    CHECK(nd_other_object_flanks(req, &o[0], "porch", 5));        /* past "the" */
    CHECK(nd_other_object_flanks(req, &o[0], "the porch", 9));
    CHECK(!nd_other_object_flanks(req, &o[0], "lights", 6));      /* further on */
    CHECK(!nd_other_object_flanks(req, &o[0], "por", 3));         /* part of a word */
    nd_json_free(call);
    const char *second = "navigate to Vanuatu and Reunion now";
    text = "{\"name\":\"n\",\"arguments\":{\"to\":\"Reunion\"}}";
    CHECK(nd_json_parse(text, strlen(text), NULL, &call, &err) == 0);
    CHECK(nd_other_objects(second, call, o, ND_OTHER_OBJECT_MAX) == 1 && !o[0].value_first);
    CHECK(nd_other_object_flanks(second, &o[0], "Vanuatu", 7));
    CHECK(!nd_other_object_flanks(second, &o[0], "to Vanuat", 9));
    nd_json_free(call);
    /* the other time, said without its leading zero */
    const char *times = "alarms at 6:00 and 6:10 please";
    text = "{\"name\":\"a\",\"arguments\":{\"time\":\"06:00\"}}";
    CHECK(nd_json_parse(text, strlen(text), NULL, &call, &err) == 0);
    CHECK(nd_other_objects(times, call, o, ND_OTHER_OBJECT_MAX) == 1);
    CHECK(nd_other_object_flanks(times, &o[0], "06:10", 5));
    CHECK(nd_other_object_flanks(times, &o[0], "6:10", 4));
    CHECK(!nd_other_object_flanks(times, &o[0], "16:10", 5));
    nd_json_free(call);
}

/* Through the public API, the bundled model on the demo tools. */
static char *send_first(int split, const char *request)
{
    return first_envelope((needle_session_options){.split_requests = split}, request);
}

static void test_the_bundled_model_answers_in_parts(void)
{
    const char *req = "set the thermostat to 30 and switch off the balcony lights";
    char *on = send_first(0, req);
    /* each part alone: the model's answer to each (measured on every kernel path) */
    CHECKF(on && strstr(on, "\"function_calls\":[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":30}},"
                            "{\"name\":\"set_lights\",\"arguments\":{\"room\":\"balcony\",\"on\":false}}]"),
           "%s", on ? on : "(none)");
    CHECKF(on && strstr(on, "\"split\":[\"set the thermostat to 30\",\"switch off the balcony lights\"]"), "%s",
           on ? on : "(none)");
    CHECK(on && strstr(on, "\"type\":\"call\"") && strstr(on, "\"ungrounded\":[]"));
    needle_free(on);
    /* off: whatever the model writes, nothing is answered in parts */
    char *off = send_first(-1, req);
    CHECKF(off && strstr(off, "\"split\":[]"), "%s", off ? off : "(none)");
    needle_free(off);
    /* one action, two objects: the request without the object the model wrote, answered alone */
    char *two = send_first(0, "what's the weather in Lisbon and in Porto");
    CHECKF(two && strstr(two, "\"function_calls\":[{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Lisbon\"}},"
                             "{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Porto\"}}]") &&
               strstr(two, "\"split\":[\"what's the weather in Lisbon and in Porto\",\"what's the weather in Porto\"]"),
           "%s", two ? two : "(none)");
    needle_free(two);
    /* the request without the object is asked again when the model answers it with no call
     * ("lights on in the dining room" alone gets [], as "please ..." its call); not with ask_again off */
    char *again = send_first(0, "lights on in the kitchen and the dining room");
    CHECKF(again && strstr(again, "{\"name\":\"set_lights\",\"arguments\":{\"room\":\"kitchen\",\"on\":true}},"
                                  "{\"name\":\"set_lights\",\"arguments\":{\"room\":\"dining room\",\"on\":true}}"),
           "%s", again ? again : "(none)");
    needle_free(again);
    again = first_envelope((needle_session_options){.ask_again = -1}, "lights on in the kitchen and the dining room");
    CHECKF(again && !strstr(again, "dining room\",\"on\":true"), "%s", again ? again : "(none)");
    needle_free(again);
    /* a value that names one of the tool's fields is not another object */
    char *field = send_first(0, "can you please turn the lights on in the upstairs conservatory and brightness 100 percent");
    CHECKF(field && !strstr(field, "\"room\":\"brightness\""), "%s", field ? field : "(none)");
    needle_free(field);
    /* two calls: the parts check the model's values ("twenty-eight point five"
     * read as 21.5, the 21 taken from the alarm's time) */
    char *both = send_first(0, "set an alarm at 21:15, then set the thermostat to 28.5");
    CHECKF(both && strstr(both, "\"function_calls\":[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"21:15\"}},"
                              "{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":28.5}}]") &&
               strstr(both, "\"split\":[\"set an alarm at 21:15\",\"set the thermostat to 28.5\"]"),
           "%s", both ? both : "(none)");
    needle_free(both);
    /* two calls and a side that only names an object ("the lower basement
     * lights"): answered alone it has no action, so the model's calls stand */
    char *objects = send_first(0, "Could you please turn on the little laundry room and the lower basement lights thanks");
    CHECKF(objects && strstr(objects, "\"split\":[]") && !strstr(objects, "\"on\":false"), "%s",
           objects ? objects : "(none)");
    needle_free(objects);
    /* a request with no join is left to the model */
    char *one = send_first(0, "turn on the hallway lights");
    CHECKF(one && strstr(one, "\"split\":[]"), "%s", one ? one : "(none)");
    needle_free(one);
}

static void test_bad_option_and_later_turns(void)
{
    needle_model_options mo = {.threads = 1};
    needle_model *m = NULL;
    needle_error err = {0};
    CHECK(needle_model_open("models/needle-default.cact", NULL, &mo, &m, &err) == 0);
    if (!m) return;
    needle_session *s = NULL;
    needle_session_options bad = {.tools_json = demo_tools(), .split_requests = 2};
    CHECK(needle_session_open(m, &bad, &s, &err) == NEEDLE_EINVAL && strstr(err.message, "split_requests"));
    /* a later request of the conversation is not cut: its parts would lose
     * the conversation (two of the demo tools, so that the conversation fits
     * the bundled model's 512 positions and is not restarted) */
    nd_json *demo = NULL;
    nd_buf two;
    nd_buf_init(&two);
    CHECK(nd_json_parse(demo_tools(), strlen(demo_tools()), NULL, &demo, &err) == 0 && demo->count >= 2);
    if (demo) {
        nd_buf_putc(&two, '[');
        nd_json_write(&two, &demo->items[0], 0);
        nd_buf_putc(&two, ',');
        nd_json_write(&two, &demo->items[1], 0);
        nd_buf_putc(&two, ']');
    }
    nd_json_free(demo);
    needle_session_options so = {.tools_json = two.data};
    CHECK(needle_session_open(m, &so, &s, &err) == 0);
    char *env = NULL;
    if (s) {
        CHECK(needle_session_send(s, "turn off the kitchen lights", &env, &err) == 0);
        needle_free(env);
        env = NULL;
        CHECK(needle_session_send(s, "set the thermostat to 20 and turn on the hallway lights", &env, &err) == 0);
        CHECKF(env && strstr(env, "\"split\":[]"), "%s", env ? env : "(none)");
        needle_free(env);
    }
    needle_session_close(s);
    needle_model_close(m);
    nd_buf_free(&two);
}

int main(void)
{
    RUN(test_where_a_request_is_cut);
    RUN(test_strongest_join_first);
    RUN(test_where_it_is_not_cut);
    RUN(test_at_most_max_points);
    RUN(test_one_action_two_objects);
    RUN(test_the_other_object_flanks_the_join);
    RUN(test_the_bundled_model_answers_in_parts);
    RUN(test_bad_option_and_later_turns);
    return check_summary();
}
