/* test_message_frame.c - a messaging request answered with no call, read by
 * its frame (src/agent/message_frame.h): the frames and recipients it reads,
 * the text cut as the message rule cuts it (nd_message_text_at), what it
 * never reads (pronouns, no text, "tell Ana about ...", courtesy words
 * alone), which tools it answers with, the model's own message call mended
 * from the frame, and the bundled model end to end
 * (the frame taken, a negated request not, --ask-again off). */
#include "agent/message_frame.h"
#include "agent/message_span.h"
#include "repair_check.h"

static const char *SEND =
    "[{\"name\":\"set_lights\",\"parameters\":{\"type\":\"object\",\"properties\":{\"room\":{\"type\":\"string\"}}}},"
    "{\"name\":\"send_message\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"recipient\":{\"type\":\"string\"},\"text\":{\"type\":\"string\"}},\"required\":[\"recipient\",\"text\"]}}]";

/* "recipient|text" the frame reads from request under tools, or "-" when none. */
static const char *framed(const char *tools_json, const char *request)
{
    static char out[512];
    nd_json *tools = NULL;
    needle_error err;
    snprintf(out, sizeof out, "(error)");
    if (nd_json_parse(tools_json, strlen(tools_json), NULL, &tools, &err) != 0) return out;
    const char *tool = NULL, *pk = NULL, *tk = NULL;
    char *call = nd_message_frame_call(tools, request, 0, &tool, &pk, &tk);
    nd_json *c = NULL;
    snprintf(out, sizeof out, "-");
    if (call && nd_json_parse(call, strlen(call), NULL, &c, &err) == 0) {
        const nd_json *args = nd_json_get(&c->items[0], "arguments");
        const nd_json *p = nd_json_get(args, pk), *t = nd_json_get(args, tk);
        snprintf(out, sizeof out, "%s|%s", p ? p->str : "?", t ? t->str : "?");
    }
    nd_json_free(c);
    free(call);
    nd_json_free(tools);
    return out;
}

#define FRAMED(req, want) CHECKF(!strcmp(framed(SEND, req), want), "%s -> %s", req, framed(SEND, req))

static void test_frames_read(void)
{
    FRAMED("text mom that I'll be late", "mom|I'll be late");
    FRAMED("send Kwame a message saying the keys are under the blue pot", "Kwame|the keys are under the blue pot");
    FRAMED("tell Ingrid Solberg I've booked the cabin", "Ingrid Solberg|I've booked the cabin");
    FRAMED("message Dr. Achebe: can we move my appointment to Friday?", "Dr. Achebe|can we move my appointment to Friday?");
    FRAMED("write to Bj\xC3\xB6rn: running 15 minutes behind, sorry", "Bj\xC3\xB6rn|running 15 minutes behind, sorry");
    FRAMED("shoot a message to the carpool group saying no school tomorrow", "the carpool group|no school tomorrow");
    FRAMED("pls txt Oskar 'dont wait for me'", "Oskar|dont wait for me");
    FRAMED("tell my sister happy birthday", "my sister|happy birthday");
    FRAMED("Let my landlord know the boiler is leaking again", "my landlord|the boiler is leaking again");
    FRAMED("let Hamid know that I'm outside", "Hamid|I'm outside");
    FRAMED("Hi! text Henna: the meeting moved to Thursday, would you?", "Henna|the meeting moved to Thursday");
    FRAMED("send a text to Siobh\xC3\xA1n - happy graduation!!", "Siobh\xC3\xA1n|happy graduation!!");
    FRAMED("message Coach Reyes saying Leo is sick today", "Coach Reyes|Leo is sick today");
    FRAMED("text Ambar \xE2\x80\x9Cgood luck!\xE2\x80\x9D thanks", "Ambar|good luck!");
    FRAMED("text Priya that the parcel arrived and then turn off the lights", "Priya|the parcel arrived");
    FRAMED("could you please msg the team chat: standup moved to 10", "the team chat|standup moved to 10");
    /* send's kin, more fillers, a filler ending its own sentence, "the" and one word before a mark */
    FRAMED("I think we should send a text message to Isabelle Gomez: \"where are you?\"", "Isabelle Gomez|where are you?");
    FRAMED("Hi! fire off the message to Dr. Knutsson saying \"feed the dog\" thanks", "Dr. Knutsson|feed the dog");
    FRAMED("okay so fire off a text message to Hilda Granados saying mr here", "Hilda Granados|mr here");
    FRAMED("send out a quick text for Lea: dad is leaving", "Lea|dad is leaving");
    FRAMED("I was wondering if you could tell Mika that get well soon", "Mika|get well soon");
    FRAMED("Hi again. Go ahead and send a message to Coach Keane: start without me", "Coach Keane|start without me");
    FRAMED("Could you please get word to Imran that sorted after work", "Imran|sorted after work");
    FRAMED("message the plumber saying the door code is 4417", "the plumber|the door code is 4417");
    FRAMED("time to let the babysitter know bedtime is 8", "the babysitter|bedtime is 8");
    FRAMED("shoot off the message to Mr. Lord that says flight delayed", "Mr. Lord|flight delayed");
    /* a request that takes itself back ends the message there (and its negation is the request's) */
    FRAMED("Send a text message to Gina that says start without me... actually no, don't", "Gina|start without me");
}

static void test_what_is_never_read(void)
{
    const char *none[] = {
        "tell her I said thanks",          /* a pronoun */
        "tell me a joke",                  /* a pronoun */
        "text Fatima",                     /* no text */
        "send a message saying I'm late",  /* no recipient */
        "tell Ana about the party",        /* not a message's first word */
        "Hey, message mom pls",            /* courtesy alone */
        "text 'unclosed quote",            /* no recipient, and the quote never closes */
        "message Leo 'hi",                 /* a quote never closed */
        "turn on the lights and text",     /* no frame at the start */
        "text the kitchen lights off",     /* "the" without a group word or a mark */
        "tell the kids dinner is ready",   /* "the" and a word, no mark */
        "send the photos to Ana",          /* not a message noun */
        "fire the intern: he is late",     /* a verb of send's kin needs a message noun */
    };
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) FRAMED(none[i], "-");
}

static void test_tools_it_answers_with(void)
{
    /* OpenAI-wrapped, other key names */
    const char *wrapped = "[{\"type\":\"function\",\"function\":{\"name\":\"sms\",\"parameters\":{\"type\":\"object\","
                          "\"properties\":{\"to\":{\"type\":\"string\"},\"body\":{\"type\":\"string\"}}}}}]";
    CHECKF(!strcmp(framed(wrapped, "text Ana that hi there"), "Ana|hi there"), "%s", framed(wrapped, "text Ana that hi there"));
    /* the arguments in the schema's order */
    nd_json *t = NULL;
    needle_error e;
    const char *text_first = "[{\"name\":\"sms\",\"parameters\":{\"type\":\"object\",\"properties\":{"
                             "\"body\":{\"type\":\"string\"},\"to\":{\"type\":\"string\"}}}}]";
    CHECK(nd_json_parse(text_first, strlen(text_first), NULL, &t, &e) == 0);
    char *call = nd_message_frame_call(t, "text Ana that hi there", 0, NULL, NULL, NULL);
    CHECKF(call && !strcmp(call, "[{\"name\":\"sms\",\"arguments\":{\"body\":\"hi there\",\"to\":\"Ana\"}}]"), "%s",
           call ? call : "(null)");
    free(call);
    nd_json_free(t);
    /* no messaging tool; another required argument; two messaging tools; a restricted text */
    const char *no[] = {
        "[{\"name\":\"set_lights\",\"parameters\":{\"type\":\"object\",\"properties\":{\"room\":{\"type\":\"string\"}}}}]",
        "[{\"name\":\"email\",\"parameters\":{\"type\":\"object\",\"properties\":{\"to\":{\"type\":\"string\"},"
        "\"body\":{\"type\":\"string\"},\"subject\":{\"type\":\"string\"}},\"required\":[\"to\",\"body\",\"subject\"]}}]",
        "[{\"name\":\"a\",\"parameters\":{\"type\":\"object\",\"properties\":{\"to\":{\"type\":\"string\"},\"text\":{\"type\":\"string\"}}}},"
        "{\"name\":\"b\",\"parameters\":{\"type\":\"object\",\"properties\":{\"to\":{\"type\":\"string\"},\"text\":{\"type\":\"string\"}}}}]",
        "[{\"name\":\"a\",\"parameters\":{\"type\":\"object\",\"properties\":{\"to\":{\"type\":\"string\"},"
        "\"text\":{\"type\":\"string\",\"enum\":[\"hi\"]}}}}]",
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        CHECKF(!strcmp(framed(no[i], "text Ana that hi"), "-"), "tools %zu -> %s", i, framed(no[i], "text Ana that hi"));
}

static void test_message_text_at(void)
{
    const char *r = "text Ana 'see you at 8' please";
    char *m = nd_message_text_at(r, 9);
    CHECKF(m && !strcmp(m, "see you at 8"), "%s", m ? m : "(null)");
    free(m);
    r = "text Ana that see you soon, thanks!";
    m = nd_message_text_at(r, 14);
    CHECKF(m && !strcmp(m, "see you soon"), "%s", m ? m : "(null)");
    free(m);
    CHECK(nd_message_text_at("text Ana that please", 14) == NULL);
}

static int frame_fix(nd_json *calls, const nd_json *tools, nd_buf *paths, int *np, void *request)
{
    return nd_fix_framed_message(calls, tools, (const char *)request, paths, np);
}

/* The model's own message call: a value that is a piece of the frame's, or a
 * placeholder, becomes the frame's; anything else stays. */
static void test_calls_mended(void)
{
    const char *got = repair_apply(SEND, "[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"Yusuf\",\"text\":\"back\"}}]",
                                   frame_fix, (void *)"text Yusuf come round the back");
    CHECKF(!strcmp(got, "[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"Yusuf\",\"text\":\"come round the back\"}}]|"
                        "[\"send_message.text\"]"),
           "%s", got);
    got = repair_apply(SEND, "[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"Ingrid\",\"text\":\"Ingrid\"}}]",
                       frame_fix, (void *)"tell Ingrid Solberg I've booked the cabin");
    CHECKF(!strcmp(got, "[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"Ingrid Solberg\",\"text\":"
                        "\"I've booked the cabin\"}}]|[\"send_message.recipient\",\"send_message.text\"]"),
           "%s", got);
    /* not a piece: the model's words stay (another recipient, a paraphrase) */
    const char *other = "[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"Mia\",\"text\":\"see you\"}}]";
    char want[512];
    snprintf(want, sizeof want, "%s|[]", other);
    got = repair_apply(SEND, other, frame_fix, (void *)"text Yusuf come round the back");
    CHECKF(!strcmp(got, want), "%s", got);
    /* another tool, or no frame: nothing */
    other = "[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"back\"}}]";
    snprintf(want, sizeof want, "%s|[]", other);
    got = repair_apply(SEND, other, frame_fix, (void *)"text Yusuf come round the back");
    CHECKF(!strcmp(got, want), "%s", got);
    other = "[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"Yusuf\",\"text\":\"back\"}}]";
    snprintf(want, sizeof want, "%s|[]", other);
    got = repair_apply(SEND, other, frame_fix, (void *)"Yusuf wants the back door open");
    CHECKF(!strcmp(got, want), "%s", got);
}

/* Through the public API: the bundled model answers these with no call. */
static void test_bundled_model(void)
{
    needle_session_options so = {0};
    char *env = first_envelope(so, "text mom that I'll be late");
    CHECKF(env && strstr(env, "\"recipient\":\"mom\",\"text\":\"I'll be late\"") &&
               strstr(env, "\"completed\":[\"send_message.recipient\",\"send_message.text\"]"),
           "%s", env ? env : "(none)");
    needle_free(env);
    /* a negation outside the message: no call */
    env = first_envelope(so, "please don't text Rohan that I'm sick");
    CHECKF(env && strstr(env, "\"function_calls\":[]") && strstr(env, "\"negation\":true"), "%s", env ? env : "(none)");
    needle_free(env);
    /* a "don't" inside the quoted message is the message's */
    env = first_envelope(so, "pls txt Oskar 'dont wait for me'");
    CHECKF(env && strstr(env, "\"text\":\"dont wait for me\"") && strstr(env, "\"negation\":false"), "%s", env ? env : "(none)");
    needle_free(env);
    /* off with --ask-again off */
    so.ask_again = -1;
    env = first_envelope(so, "text mom that I'll be late");
    CHECKF(env && strstr(env, "\"function_calls\":[]"), "%s", env ? env : "(none)");
    needle_free(env);
}

int main(void)
{
    RUN(test_frames_read);
    RUN(test_what_is_never_read);
    RUN(test_tools_it_answers_with);
    RUN(test_message_text_at);
    RUN(test_calls_mended);
    RUN(test_bundled_model);
    return check_summary();
}
