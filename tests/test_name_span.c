/* test_name_span.c - finishing a name the model copied in part
 * (src/agent/name_span.h): the widening rule on request/value pairs (names
 * on either side, non-ASCII capitals, what stops it: lower case, function
 * words, days, sentence starts, clause punctuation, quotes, "&", the word
 * limit), the call walk (free strings only, arrays of them, the paths
 * reported), and the envelope of the bundled model through the public API
 * with copying on and off. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/name_span.h"
#include "repair_check.h"

/* The widened value, or "" when nothing changes. */
static const char *widen(const char *request, const char *value)
{
    static char out[256];
    char *w = nd_name_span_widen(request, value, strlen(value));
    snprintf(out, sizeof out, "%s", w ? w : "");
    free(w);
    return out;
}

#define WIDENS(req, val, want) CHECKF(strcmp(widen(req, val), want) == 0, "%s | %s -> \"%s\"", req, val, widen(req, val))
#define KEEPS(req, val) WIDENS(req, val, "")

static void test_names_widen_on_both_sides(void)
{
    WIDENS("call Dmitri Volkov", "Dmitri", "Dmitri Volkov");
    WIDENS("text Thandiwe Mokoena 'the vet said Biscuit is fine'", "Mokoena", "Thandiwe Mokoena");
    WIDENS("could you send a text to Barbro - see you at Sundin Airport asap", "see you at Sundin",
           "see you at Sundin Airport");
    WIDENS("alright, change an alarm named Little Harbor, at 8:00", "Little", "Little Harbor");
    WIDENS("weather for American Samoa asap", "Samoa", "American Samoa");
    WIDENS("please call Mary Jane Watson Parker now", "Jane", "Mary Jane Watson Parker");
    /* capitals beyond ASCII */
    WIDENS("message Terézia Petruška with the text thanks", "Petruška", "Terézia Petruška");
    WIDENS("call Ó Grialais now", "Grialais", "Ó Grialais");
    WIDENS("позвони Ивану Петрову", "Ивану", "Ивану Петрову");
    /* at most ND_NAME_SPAN_MAX_WORDS words on a side */
    WIDENS("call Xa Xb Xc Xd Xe Xf", "Xa", "Xa Xb Xc Xd Xe");
}

static void test_particles_and_house_numbers(void)
{
    /* a lower-case particle between capitalised words is inside the name, on either side */
    WIDENS("take me to Gare de Lyon", "Gare", "Gare de Lyon");
    WIDENS("play Kind of Blue", "Blue", "Kind of Blue");
    WIDENS("put on Ludwig van Beethoven please", "Beethoven", "Ludwig van Beethoven");
    /* ... but not at the name's end, not lower-case on the far side, not another word */
    KEEPS("call Anna de la", "Anna");
    KEEPS("call Anna of the team", "Anna");
    KEEPS("call Anna and Ben", "Anna");
    /* a house number takes the name after it; a name does not take a number after it */
    WIDENS("directions to 14 Harrow Lane avoiding tolls", "14", "14 Harrow Lane");
    KEEPS("set Harrow Lane 14 as home", "Harrow Lane");
    KEEPS("turn it up to 14 please", "14");
    KEEPS("meet at 1430 Harrow", "143");
    /* a number written in groups (a phone number) is finished on either side */
    WIDENS("New contact: Ifeoma Chukwu, +234 803 555 0199", "+234 803 555", "+234 803 555 0199");
    WIDENS("save Pierre's number, 06 12 34 56 78", "12 34", "06 12 34 56 78");
    KEEPS("call 0800 555 1234, then 5 more", "0800 555 1234");   /* a comma ends it */
    KEEPS("room 4 12 people", "12");                              /* a single digit is not a group */
    KEEPS("dial 12345678 99", "99");                              /* nor eight digits */
}

/* The value's own edge word may start a sentence: the model chose it, so its capital is the name's. */
static void test_value_starting_a_sentence(void)
{
    WIDENS("Receipt: Café Lumière, 14.50 EUR, 2026-11-28. Food. Log it.", "Café", "Café Lumière");
    WIDENS("lodging expense: Hotel Sakura, ¥18400", "Hotel", "Hotel Sakura");
    WIDENS("hi: Maria Lopez asked", "Maria", "Maria Lopez");
    WIDENS("Dmitri Volkov needs a lift", "Dmitri", "Dmitri Volkov");
    /* ... but a neighbour starting a sentence still does not join, nor a function word */
    KEEPS("hi: Maria Lopez asked", "Lopez");
    KEEPS("Thanks. Maria Lopez asked for you", "Lopez");
    KEEPS("Then Maria called", "Maria");
    KEEPS("To Maria: call", "Maria");
    KEEPS("Food. Log it.", "Food");
    /* a day the model chose may begin a title, not end a name */
    WIDENS("shuffle my Sunday Cleaning playlist", "Sunday", "Sunday Cleaning");
    KEEPS("call Maria Monday", "Monday");
}

static void test_what_stops_a_name(void)
{
    KEEPS("Give me cyan lighting in the games room", "games"); /* lower case says nothing */
    KEEPS("call Dmitri Volkov", "Dmitri Volkov");              /* already whole */
    KEEPS("so To Eritrea, get directions", "Eritrea");         /* a function word */
    KEEPS("call Maria Monday", "Maria");                       /* a day */
    KEEPS("remind Maria in March", "Maria");
    KEEPS("Dmitri Volkov needs a lift", "Volkov");             /* the request's first word */
    KEEPS("Thanks. Maria Lopez asked for you", "Lopez");       /* a sentence's first word */
    KEEPS("hi: Maria Lopez asked", "Lopez");
    KEEPS("message Farida, Casablanca is hot", "Farida");      /* a comma between */
    KEEPS("text Anna \"Happy Birthday\"", "Anna");             /* a quotation starts */
    KEEPS("call Gerda & Jorge", "Gerda");                      /* "&" is not a name */
    WIDENS("Phone Gerda Grinius & Jorge Walker", "Grinius", "Gerda Grinius");
    KEEPS("navigate to Okonkwo's Pharmacy", "Okonkwo");        /* not at a word's edge */
    KEEPS("call Dmitri Volkov", "Boris");                      /* not in the request */
    KEEPS("call Dmitri Volkov", "mitri");
    KEEPS("call Anna I think", "Anna");                        /* "I" */
    KEEPS("", "x");
    CHECK(nd_name_span_widen(NULL, "x", 1) == NULL && nd_name_span_widen("call X Y", "X", 0) == NULL);
}

static const char *TOOLS =
    "[{\"name\":\"send_message\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"recipient\":{\"type\":\"string\"},\"text\":{\"type\":\"string\"},"
    "\"channel\":{\"type\":\"string\",\"enum\":[\"Volkov\",\"sms\"]},"
    "\"code\":{\"type\":\"string\",\"maxLength\":20},"
    "\"cc\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}}}}]";

static int names(nd_json *calls, const nd_json *tools, nd_buf *paths, int *np, void *request)
{
    return nd_complete_names(calls, tools, (const char *)request, paths, np);
}

static void test_calls_widen_free_strings_only(void)
{
    const char *req = "text Dmitri Volkov and cc Anna Berg, the code is Sky Blue";
    const char *c = "[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"Dmitri\",\"channel\":\"Volkov\","
                    "\"code\":\"Sky\",\"cc\":[\"Berg\",\"Dmitri Volkov\"]}},"
                    "{\"name\":\"undeclared\",\"arguments\":{\"recipient\":\"Dmitri\"}}]";
    const char *want = "[{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"Dmitri Volkov\",\"channel\":\"Volkov\","
                       "\"code\":\"Sky\",\"cc\":[\"Anna Berg\",\"Dmitri Volkov\"]}},"
                       "{\"name\":\"undeclared\",\"arguments\":{\"recipient\":\"Dmitri\"}}]"
                       "|[\"send_message.recipient\",\"send_message.cc\"]";
    const char *got = repair_apply(TOOLS, c, names, (void *)req);
    CHECKF(strcmp(got, want) == 0, "%s", got);
    /* the widened calls again: nothing left to widen, an empty list */
    char again[1024];
    snprintf(again, sizeof again, "%.*s", (int)(strchr(want, '|') - want), want);
    got = repair_apply(TOOLS, again, names, (void *)req);
    CHECKF(strncmp(got, again, strlen(again)) == 0 && !strcmp(got + strlen(again), "|[]"), "%s", got);
}

/* Declarations in the OpenAI wrapper are read the same way. */
static void test_openai_wrapped_tools(void)
{
    const char *t = "[{\"type\":\"function\",\"function\":{\"name\":\"call_contact\",\"parameters\":{"
                    "\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}}}}}]";
    const char *got = repair_apply(t, "[{\"name\":\"call_contact\",\"arguments\":{\"name\":\"Volkov\"}}]", names,
                                   (void *)"please call Dmitri Volkov");
    CHECKF(!strcmp(got, "[{\"name\":\"call_contact\",\"arguments\":{\"name\":\"Dmitri Volkov\"}}]|[\"call_contact.name\"]"),
           "%s", got);
}

/* The bundled model on a demo tool: the recipient every call has ("" when the
 * calls differ or there are none), the number of calls, and how many entries
 * validation.completed lists as "send_message.recipient" (-1 when it lists
 * something else; the message text widened by message_span.h is not counted).
 * The number of calls is the model's own: one on the AVX-512 and AVX2 kernel
 * paths, the same call twice on the portable one. */
static void send_one(int grounded, const char **recipient, int *n_calls, int *n_completed)
{
    const char *req[] = {"text Thandiwe Mokoena 'the vet said Biscuit is fine'"};
    char *env = bundled_envelope(NULL, NULL, grounded, req, 1);
    nd_json *j = NULL;
    needle_error perr;
    static char rec[128];
    rec[0] = 0;
    *recipient = rec;
    *n_calls = *n_completed = -1;
    if (env && nd_json_parse(env, strlen(env), NULL, &j, &perr) == 0) {
        const nd_json *fc = nd_json_get(j, "function_calls");
        *n_calls = fc && fc->type == ND_JSON_ARRAY ? (int)fc->count : -1;
        for (int k = 0; k < *n_calls; k++) {
            const nd_json *args = nd_json_get(&fc->items[k], "arguments");
            const nd_json *r = args ? nd_json_get(args, "recipient") : NULL;
            const char *v = r && r->type == ND_JSON_STRING ? r->str : "";
            if (k == 0) snprintf(rec, sizeof rec, "%s", v);
            else if (strcmp(rec, v)) rec[0] = 0;
        }
        const nd_json *v = nd_json_get(j, "validation");
        const nd_json *c = v ? nd_json_get(v, "completed") : NULL;
        *n_completed = c && c->type == ND_JSON_ARRAY ? 0 : -1;
        for (size_t k = 0; c && c->type == ND_JSON_ARRAY && k < c->count && *n_completed >= 0; k++) {
            const nd_json *e = &c->items[k];
            if (e->type == ND_JSON_STRING && !strcmp(e->str, "send_message.recipient")) (*n_completed)++;
            else if (!(e->type == ND_JSON_STRING && !strcmp(e->str, "send_message.text"))) *n_completed = -1;
        }
    }
    nd_json_free(j);
    needle_free(env);
}

static void test_bundled_model_names_are_finished(void)
{
    const char *rec = "";
    int calls = -2, nc = -2;
    /* copying on (the default): the model writes "Mokoena", the envelope "Thandiwe Mokoena",
     * in every call, each listed */
    send_one(0, &rec, &calls, &nc);
    CHECKF(strcmp(rec, "Thandiwe Mokoena") == 0 && calls >= 1 && nc == calls, "recipient \"%s\", %d calls, completed %d",
           rec, calls, nc);
    /* copying off: the model writes a recipient of its own that the request does not
     * hold, so there is nothing to finish (the rule runs in every session) */
    send_one(-1, &rec, &calls, &nc);
    CHECKF(nc == 0, "completed %d (recipient \"%s\")", nc, rec);
}

int main(void)
{
    RUN(test_names_widen_on_both_sides);
    RUN(test_particles_and_house_numbers);
    RUN(test_value_starting_a_sentence);
    RUN(test_what_stops_a_name);
    RUN(test_calls_widen_free_strings_only);
    RUN(test_openai_wrapped_tools);
    RUN(test_bundled_model_names_are_finished);
    return check_summary();
}
