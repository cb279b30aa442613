/* test_agent.c - the agent's sessions on the random-weight golden model.
 *
 * Random weights are the hardest case for constrained decoding: nothing but
 * the grammar keeps the output valid.  These tests check the layout the model
 * is fed (against the training layout of text/chat.h and SentencePiece's ids
 * for the fixed parts), that every envelope parses and names declared tools,
 * KV reuse across turns, reset, sampling reproducibility, the token budget,
 * bounded memory past the window, and input errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/sampler.h"
#include "agent/session.h"
#include "check.h"
#include "core/json.h"
#include "model/heads.h"
#include "needle.h"
#include "text/chat.h"

#define MODEL "tests/golden/tiny_w4.cact"

/* Every argument is bounded (enums, booleans, bounded integers), so even a
 * random model finishes its calls well within the budget; FREE_TOOLS has a
 * free string, where a random model may ramble until the budget runs out. */
static const char *TOOLS =
    "[{\"name\":\"set_lights\",\"description\":\"Turn a room's lights on or off\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"room\":{\"type\":\"string\",\"enum\":[\"kitchen\",\"hall\",\"bedroom\"]},\"on\":{\"type\":"
    "\"boolean\"}},\"required\":[\"room\",\"on\"]}},"
    "{\"name\":\"get_weather\",\"description\":\"Weather f\xC3\xBCr a city\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"enum\":[\"Paris\",\"Z\xC3\xBCrich\"]},\"days\":{\"type\":\"integer\",\"minimum\":1,"
    "\"maximum\":7}},\"required\":[\"city\"]}}]";
static const char *FREE_TOOLS =
    "[{\"name\":\"set_lights\",\"parameters\":{\"type\":\"object\",\"properties\":{\"room\":{\"type\":\"string\"},"
    "\"on\":{\"type\":\"boolean\"}},\"required\":[\"room\",\"on\"]}}]";
#define BUDGET 512

static needle_model *open_model(int window)
{
    needle_model_options mo = {.threads = 1, .kv_window = window};
    needle_model *m = NULL;
    needle_error err = {0};
    int rc = needle_model_open(MODEL, NULL, &mo, &m, &err);
    CHECKF(rc == 0, "open: %s", err.message);
    return m;
}

static needle_session *open_session(needle_model *m, const char *system, const char *tools, int max_new)
{
    needle_session_options so = {.system = system, .tools_json = tools, .max_new_tokens = max_new};
    needle_session *s = NULL;
    needle_error err = {0};
    int rc = needle_session_open(m, &so, &s, &err);
    CHECKF(rc == 0, "session: %s", err.message);
    return s;
}

/* Parse an envelope and check its shape; returns the parsed value (caller frees). */
static int free_strings; /* the session uses FREE_TOOLS */
static nd_json *check_envelope(const char *env, int expect_success)
{
    nd_json *j = NULL;
    needle_error err = {0};
    int rc = nd_json_parse(env, strlen(env), "envelope", &j, &err);
    CHECKF(rc == 0, "envelope does not parse: %s: %s", err.message, env);
    if (rc) return NULL;
    const nd_json *type = nd_json_get(j, "type"), *succ = nd_json_get(j, "success"),
                  *calls = nd_json_get(j, "function_calls"), *reasoning = nd_json_get(j, "reasoning"),
                  *conf = nd_json_get(j, "confidence"), *code = nd_json_get(j, "error_code"),
                  *error = nd_json_get(j, "error");
    CHECK(type && type->type == ND_JSON_STRING);
    CHECK(calls && calls->type == ND_JSON_ARRAY);
    CHECK(reasoning && reasoning->type == ND_JSON_STRING);
    CHECK(nd_json_get(j, "prefill_tps") && nd_json_get(j, "decode_tps") && nd_json_get(j, "peak_ram_mb"));
    CHECK(succ && (succ->type == ND_JSON_TRUE || succ->type == ND_JSON_FALSE));
    if (!type || !calls || !succ || !conf || !code || !error) return j;
    CHECK(!strcmp(type->str, calls->count ? "call" : "respond"));
    if (expect_success >= 0) CHECKF((succ->type == ND_JSON_TRUE) == expect_success, "%s", env);
    if (succ->type == ND_JSON_TRUE) {
        CHECK(code->type == ND_JSON_NULL && error->type == ND_JSON_NULL);
        CHECKF(conf->type == ND_JSON_NUMBER && conf->num > 0 && conf->num <= 1, "%s", env);
    } else {
        CHECK(code->type == ND_JSON_NUMBER && code->num < 0 && error->type == ND_JSON_STRING);
    }
    for (size_t i = 0; i < calls->count; i++) {
        const nd_json *c = &calls->items[i], *name = nd_json_get(c, "name"), *args = nd_json_get(c, "arguments");
        CHECK(c->type == ND_JSON_OBJECT && c->count == 2);
        CHECK(name && name->type == ND_JSON_STRING && args && args->type == ND_JSON_OBJECT);
        if (name && name->type == ND_JSON_STRING)
            CHECKF(!strcmp(name->str, "set_lights") || !strcmp(name->str, "get_weather"), "name %s", name->str);
        if (name && args && !strcmp(name->str, "set_lights")) {
            const nd_json *room = nd_json_get(args, "room"), *on = nd_json_get(args, "on");
            CHECK(room && room->type == ND_JSON_STRING);
            if (room && room->type == ND_JSON_STRING && !free_strings)
                CHECKF(!strcmp(room->str, "kitchen") || !strcmp(room->str, "hall") || !strcmp(room->str, "bedroom"),
                       "room %s", room->str);
            CHECK(on && (on->type == ND_JSON_TRUE || on->type == ND_JSON_FALSE));
        }
        if (name && args && !strcmp(name->str, "get_weather")) {
            const nd_json *days = nd_json_get(args, "days"), *city = nd_json_get(args, "city");
            CHECK(city && city->type == ND_JSON_STRING);
            if (city && city->type == ND_JSON_STRING)
                CHECKF(!strcmp(city->str, "Paris") || !strcmp(city->str, "Z\xC3\xBCrich"), "city %s", city->str);
            if (days) CHECKF(days->type == ND_JSON_NUMBER && days->num >= 1 && days->num <= 7, "days %g", days->num);
        }
    }
    return j;
}

static const char *field_str(const nd_json *j, const char *k)
{
    const nd_json *v = j ? nd_json_get(j, k) : NULL;
    return v && v->type == ND_JSON_STRING ? v->str : "";
}

/* The fixed parts of the target, as SentencePiece itself encodes
 * "<think>...</think>\n<tool_call>...</tool_call><|im_end|>" with tok8k.model:
 * [U+2581=8071, <think>=6] ... [</think>=7, <0x0A>=24, <tool_call>=10] ... [</tool_call>=11, <|im_end|>=5]. */
static void test_forced_parts_match_sentencepiece(void)
{
    needle_model *m = open_model(0);
    if (!m) return;
    CHECK(m->open_think.n == 2 && m->open_think.ids[0] == 8071 && m->open_think.ids[1] == 6);
    CHECK(m->think_to_call.n == 3 && m->think_to_call.ids[0] == 7 && m->think_to_call.ids[1] == 24 &&
          m->think_to_call.ids[2] == 10);
    CHECK(m->close_call.n == 2 && m->close_call.ids[0] == 11 && m->close_call.ids[1] == 5);
    CHECK(m->id_tools_close == 9);
    needle_model_close(m);
}

/* The ids fed to the model are [BOS] + enc(prompt) exactly as training builds
 * them, then a target that decodes to the training target layout. */
static void test_first_turn_layout(void)
{
    needle_model *m = open_model(0);
    if (!m) return;
    needle_session *s = open_session(m, "date: 2025-01-01; locale: de_CH", TOOLS, BUDGET);
    if (!s) { needle_model_close(m); return; }
    char *env = NULL;
    needle_error err = {0};
    int rc = needle_session_send(s, "Wie ist das Wetter in Z\xC3\xBCrich?", &env, &err);
    CHECKF(rc == 0, "%s", err.message);
    nd_json *j = env ? check_envelope(env, 1) : NULL;

    /* the tools as training writes them: compact, non-ASCII escaped, key order kept */
    CHECK(strstr(s->tools_compact, "Weather f\\u00fcr a city") != NULL);
    CHECK(strstr(s->tools_compact, "{\"name\":\"set_lights\",\"description\"") == s->tools_compact + 1);
    nd_ids want;
    nd_ids_init(&want);
    CHECK(nd_chat_prompt_ids(m->tok, NEEDLE_LAYOUT_2_0_8, "date: 2025-01-01; locale: de_CH", s->tools_compact,
                             "Wie ist das Wetter in Z\xC3\xBCrich?", &want, &err) == 0);
    CHECK(s->turn_ids.len > want.len);
    int same = s->turn_ids.len > want.len;
    for (size_t i = 0; same && i < want.len; i++) same = s->turn_ids.data[i] == want.data[i];
    CHECK(same);
    /* the pinned block ends at </tools> */
    CHECK(s->prefix_len > 0 && s->prefix_len < (int)want.len && want.data[s->prefix_len - 1] == m->id_tools_close);
    CHECK(nd_state_sinks(s->st) == s->prefix_len);
    /* the generated part decodes to the target layout */
    if (same && j) {
        nd_buf text, expect;
        nd_buf_init(&text);
        nd_buf_init(&expect);
        CHECK(nd_tokenizer_decode(m->tok, s->turn_ids.data + want.len, s->turn_ids.len - want.len, &text, &err) == 0);
        /* <think> REASONING </think>\n<tool_call> JSON </tool_call><|im_end|>, where JSON
         * may spell strings differently (escapes) but means the envelope's calls */
        nd_chat_render_target(&expect, NEEDLE_LAYOUT_2_0_8, field_str(j, "reasoning"), "");
        const char *tail = "</tool_call><|im_end|>";
        size_t head_len = expect.len - strlen(tail);
        CHECKF(text.len > expect.len && !memcmp(text.data, expect.data, head_len), "decoded %s", text.data);
        CHECK(text.len > expect.len && !memcmp(text.data + text.len - strlen(tail), tail, strlen(tail)));
        if (text.len > expect.len) {
            nd_json *calls = NULL;
            CHECK(nd_json_parse(text.data + head_len, text.len - expect.len, NULL, &calls, &err) == 0);
            /* the calls as written: the envelope's, or the ones it withheld (a value
             * outside the schema: a random model's choices are often refused) */
            const nd_json *fc = nd_json_get(j, "function_calls"), *sup = nd_json_get(j, "suppressed_calls");
            const nd_json *written = fc && fc->type == ND_JSON_ARRAY && fc->count == 0 && sup &&
                                             sup->type == ND_JSON_ARRAY && sup->count > 0 ? sup : fc;
            CHECK(calls && nd_json_equal(calls, written));
            nd_json_free(calls);
        }
        CHECK(s->turn_ids.data[want.len] == 8071 && s->turn_ids.data[want.len + 1] == 6);
        CHECK(s->turn_ids.data[s->turn_ids.len - 1] == 5 && s->turn_ids.data[s->turn_ids.len - 2] == 11);
        /* everything was evaluated: the cache holds the whole turn */
        CHECK(nd_state_position(s->st) == (int)s->turn_ids.len);
        /* the confidence head saw every token of the turn, and the envelope's
         * confidence is at most its probability */
        const nd_config *c = &m->net->weights.cfg;
        CHECK(m->net->weights.confidence.present);
        CHECK(s->cells_len == s->turn_ids.len * (size_t)(c->num_layers + 1) * (size_t)c->d_model);
        float logit = 0;
        CHECK(nd_head_confidence(m->net, s->cells, (int)(s->cells_len / (size_t)c->d_model), &logit, &err) == 0);
        double p = 1.0 / (1.0 + exp(-(double)logit)), conf = nd_json_get(j, "confidence")->num;
        CHECKF(conf > 0 && conf <= p * (1 + 1e-5), "confidence %g vs head %g", conf, p);
        nd_buf_free(&text);
        nd_buf_free(&expect);
    }
    nd_ids_free(&want);
    nd_json_free(j);
    needle_free(env);
    needle_session_close(s);
    needle_model_close(m);
}

/* A tool result continues the conversation: only its new ids are evaluated. */
static void test_multi_turn_reuses_cache(void)
{
    needle_model *m = open_model(0);
    if (!m) return;
    needle_session *s = open_session(m, NULL, TOOLS, BUDGET);
    if (!s) { needle_model_close(m); return; }
    char *env = NULL;
    needle_error err = {0};
    CHECK(needle_session_send(s, "turn on the kitchen lights", &env, &err) == 0);
    nd_json_free(env ? check_envelope(env, 1) : NULL);
    needle_free(env);
    int pos1 = nd_state_position(s->st);
    CHECK(pos1 == (int)s->turn_ids.len);

    CHECK(needle_session_tool_result(s, "{ \"ok\" : true, \"room\": \"K\xC3\xBC" "che\" }", &env, &err) == 0);
    nd_json_free(env ? check_envelope(env, 1) : NULL);
    needle_free(env);
    /* the turn started with enc(tool-result segment) of the compact result */
    nd_ids seg;
    nd_ids_init(&seg);
    CHECK(nd_chat_append_tool_result(m->tok, "{\"ok\":true,\"room\":\"K\\u00fcche\"}", &seg, &err) == 0);
    int same = s->turn_ids.len > seg.len;
    for (size_t i = 0; same && i < seg.len; i++) same = s->turn_ids.data[i] == seg.data[i];
    CHECK(same);
    CHECKF(nd_state_position(s->st) == pos1 + (int)s->turn_ids.len, "pos %d != %d + %zu",
           nd_state_position(s->st), pos1, s->turn_ids.len);
    /* a further user turn works too */
    CHECK(needle_session_send(s, "and the bedroom", &env, &err) == 0);
    nd_json_free(env ? check_envelope(env, 1) : NULL);
    needle_free(env);
    nd_ids_free(&seg);
    needle_session_close(s);
    needle_model_close(m);
}

/* Greedy decoding is deterministic, and a reset forgets the conversation. */
static void test_reset_repeats(void)
{
    needle_model *m = open_model(0);
    if (!m) return;
    needle_session *s = open_session(m, NULL, TOOLS, BUDGET);
    if (!s) { needle_model_close(m); return; }
    char *e1 = NULL, *e2 = NULL, *e3 = NULL;
    needle_error err = {0};
    CHECK(needle_session_send(s, "weather in Paris", &e1, &err) == 0);
    CHECK(needle_session_tool_result(s, "[1,2]", &e2, &err) == 0);
    needle_session_reset(s);
    CHECK(needle_session_tool_result(s, "[1,2]", &e3, &err) == NEEDLE_ESTATE); /* nothing to answer now */
    CHECK(needle_session_send(s, "weather in Paris", &e3, &err) == 0);
    nd_json *a = e1 ? check_envelope(e1, 1) : NULL, *b = e3 ? check_envelope(e3, 1) : NULL;
    if (a && b) {
        CHECK(nd_json_equal(nd_json_get(a, "function_calls"), nd_json_get(b, "function_calls")));
        CHECK(!strcmp(field_str(a, "reasoning"), field_str(b, "reasoning")));
        CHECK(nd_json_get(a, "confidence")->num == nd_json_get(b, "confidence")->num);
    }
    nd_json_free(a);
    nd_json_free(b);
    needle_free(e1);
    needle_free(e2);
    needle_free(e3);
    needle_session_close(s);
    needle_model_close(m);
}

/* Sampling: the same seed gives the same turn; output stays valid. */
static void test_sampling_seeded(void)
{
    needle_model *m = open_model(0);
    if (!m) return;
    char *env[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        needle_session_options so = {.tools_json = TOOLS, .temperature = 1.5f, .top_p = 0.9f, .seed = 42,
                                      .max_new_tokens = BUDGET};
        needle_session *s = NULL;
        needle_error err = {0};
        CHECK(needle_session_open(m, &so, &s, &err) == 0);
        if (!s) break;
        for (int t = 0; t < 3; t++) {
            needle_free(env[k]);
            env[k] = NULL;
            CHECK(needle_session_send(s, "lights off in the hall please", &env[k], &err) == 0);
            nd_json_free(env[k] ? check_envelope(env[k], -1) : NULL);
        }
        needle_session_close(s);
    }
    if (env[0] && env[1]) {
        nd_json *a = check_envelope(env[0], -1), *b = check_envelope(env[1], -1);
        if (a && b) {
            CHECK(nd_json_equal(nd_json_get(a, "function_calls"), nd_json_get(b, "function_calls")));
            CHECK(!strcmp(field_str(a, "reasoning"), field_str(b, "reasoning")));
        }
        nd_json_free(a);
        nd_json_free(b);
    }
    needle_free(env[0]);
    needle_free(env[1]);
    needle_model_close(m);
}

/* Out of budget: success false with NEEDLE_ELIMIT, still valid JSON. */
static void test_budget(void)
{
    needle_model *m = open_model(0);
    if (!m) return;
    needle_session *s = open_session(m, NULL, TOOLS, 8);
    if (!s) { needle_model_close(m); return; }
    char *env = NULL;
    needle_error err = {0};
    CHECK(needle_session_send(s, "turn on the kitchen lights", &env, &err) == 0);
    nd_json *j = env ? check_envelope(env, 0) : NULL;
    if (j) {
        CHECK(nd_json_get(j, "error_code")->num == NEEDLE_ELIMIT);
        CHECK(nd_json_get(j, "function_calls")->count == 0);
        CHECK(nd_json_get(j, "confidence")->type == ND_JSON_NULL);
    }
    nd_json_free(j);
    needle_free(env);
    /* the conversation ended with the failure: a result has nothing to answer */
    CHECK(needle_session_tool_result(s, "{}", &env, &err) == NEEDLE_ESTATE);
    needle_session_close(s);
    needle_model_close(m);
}

/* No tools: the only valid answer is the empty call list. */
static void test_no_tools(void)
{
    needle_model *m = open_model(0);
    if (!m) return;
    needle_session *s = open_session(m, NULL, NULL, BUDGET);
    if (!s) { needle_model_close(m); return; }
    char *env = NULL;
    needle_error err = {0};
    CHECK(needle_session_send(s, "hello", &env, &err) == 0);
    nd_json *j = env ? check_envelope(env, 1) : NULL;
    if (j) CHECK(!strcmp(field_str(j, "type"), "respond"));
    nd_json_free(j);
    needle_free(env);
    needle_session_close(s);
    needle_model_close(m);
}

/* A conversation far longer than a tiny window keeps working with a flat cache. */
static void test_longer_than_window(void)
{
    needle_model *m = open_model(8);
    if (!m) return;
    needle_session *s = open_session(m, NULL, FREE_TOOLS, 40);
    free_strings = 1;
    if (!s) { needle_model_close(m); return; }
    char *env = NULL;
    needle_error err = {0};
    CHECK(needle_session_send(s, "switch the garden lights on", &env, &err) == 0);
    nd_json_free(env ? check_envelope(env, -1) : NULL);
    needle_free(env);
    size_t bytes = s->st ? nd_state_bytes(s->st) : 0;
    CHECK(s->st && nd_state_window(s->st) == 8);
    int turns_ok = 0;
    for (int t = 0; t < 12; t++) {
        if (needle_session_tool_result(s, "{\"status\":\"done\",\"details\":[1,2,3,4,5,6,7,8]}", &env, &err) != 0) {
            /* a turn that ran out of budget ends the conversation: start a new one */
            CHECKF(err.code == NEEDLE_ESTATE, "%s", err.message);
            CHECK(needle_session_send(s, "switch the garden lights on", &env, &err) == 0);
        }
        nd_json_free(env ? check_envelope(env, -1) : NULL);
        needle_free(env);
        env = NULL;
        turns_ok++;
    }
    CHECK(turns_ok == 12);
    CHECK(s->st && nd_state_bytes(s->st) == bytes);
    CHECK(s->st && nd_state_position(s->st) > 8 * 10);
    free_strings = 0;
    needle_session_close(s);
    needle_model_close(m);
}

/* The 2.0.15 layout (SPEC 12): raw UTF-8 tools, the stripped system, and a
 * target that starts [U+2581] then <think> or <tool_call> - the model picks
 * (this random-weight model picks <tool_call>, which 2.0.8 never allows). */
static void test_layout_2_0_15(void)
{
    needle_model_options mo = {.threads = 1, .layout = NEEDLE_LAYOUT_2_0_15};
    needle_model *m = NULL;
    needle_error err = {0};
    CHECKF(needle_model_open(MODEL, NULL, &mo, &m, &err) == 0, "open: %s", err.message);
    if (!m) return;
    CHECK(m->layout == NEEDLE_LAYOUT_2_0_15);
    needle_session *s = open_session(m, "  date: 2025-01-01\n", TOOLS, BUDGET);
    if (!s) { needle_model_close(m); return; }
    char *env = NULL;
    CHECKF(needle_session_send(s, "Wie ist das Wetter in Z\xC3\xBCrich?", &env, &err) == 0, "%s", err.message);
    nd_json *j = env ? check_envelope(env, 1) : NULL;
    CHECK(strstr(s->tools_compact, "Weather f\xC3\xBCr a city") != NULL);
    nd_ids want;
    nd_ids_init(&want);
    CHECK(nd_chat_prompt_ids(m->tok, NEEDLE_LAYOUT_2_0_15, "date: 2025-01-01", s->tools_compact,
                             "Wie ist das Wetter in Z\xC3\xBCrich?", &want, &err) == 0);
    int same = s->turn_ids.len > want.len + 2;
    for (size_t i = 0; same && i < want.len; i++) same = s->turn_ids.data[i] == want.data[i];
    CHECK(same);
    if (same) {
        CHECK(s->turn_ids.data[want.len] == 8071);
        int opening = s->turn_ids.data[want.len + 1];
        CHECKF(opening == m->id_think_open || opening == m->id_call_open, "opening %d", opening);
        CHECKF(opening == m->id_call_open, "this model was seen to choose <tool_call>; got %d", opening);
        CHECK(s->turn_ids.data[s->turn_ids.len - 1] == 5 && s->turn_ids.data[s->turn_ids.len - 2] == 11);
    }
    nd_ids_free(&want);
    nd_json_free(j);
    needle_free(env);
    needle_session_close(s);
    needle_model_close(m);
    /* a layout value outside NEEDLE_LAYOUT_* is refused */
    mo.layout = 7;
    CHECK(needle_model_open(MODEL, NULL, &mo, &m, &err) == NEEDLE_EINVAL && strstr(err.message, "layout"));
}

static void test_input_errors(void)
{
    needle_model *m = open_model(0);
    if (!m) return;
    needle_session_options so = {0};
    needle_session *s = NULL;
    needle_error err = {0};
    so.tools_json = "[{\"name\":\"x\",";
    CHECK(needle_session_open(m, &so, &s, &err) == NEEDLE_EJSON && !s);
    CHECK(strstr(err.message, "tools") != NULL);
    so.tools_json = "{\"name\":\"x\"}";
    CHECK(needle_session_open(m, &so, &s, &err) == NEEDLE_ESCHEMA && !s);
    so.tools_json = "[{\"name\":\"x\",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"not\":{}}}}}]";
    CHECKF(needle_session_open(m, &so, &s, &err) == NEEDLE_ESCHEMA && !s, "%s", err.message);
    so.tools_json = "[\"\xFF\"]";
    CHECK(needle_session_open(m, &so, &s, &err) == NEEDLE_EUTF8 && !s);
    so.tools_json = TOOLS;
    so.system = "date: \xC3";
    CHECK(needle_session_open(m, &so, &s, &err) == NEEDLE_EUTF8 && !s);
    so.system = NULL;
    CHECK(needle_session_open(m, &so, &s, &err) == 0 && s);
    if (s) {
        char *env = NULL;
        CHECK(needle_session_send(s, "caf\xC3\x28", &env, &err) == NEEDLE_EUTF8 && !env);
        CHECK(strstr(err.message, "byte 3") != NULL);
        CHECK(needle_session_tool_result(s, "{}", &env, &err) == NEEDLE_ESTATE && !env);
        CHECK(needle_session_send(s, NULL, &env, &err) == NEEDLE_EINVAL);
        CHECK(needle_session_send(s, "hi", &env, &err) == 0 && env);
        needle_free(env);
        env = NULL;
        CHECK(needle_session_tool_result(s, "{\"a\":1,}", &env, &err) == NEEDLE_EJSON && !env);
        /* a refused result leaves the conversation usable */
        CHECK(needle_session_tool_result(s, "{\"a\":1}", &env, &err) == 0 && env);
        nd_json_free(env ? check_envelope(env, -1) : NULL);
        needle_free(env);
        /* a bad replacement keeps the old tools */
        CHECK(needle_session_set_tools(s, "[", &err) == NEEDLE_EJSON);
        CHECK(strstr(s->tools_compact, "set_lights") != NULL);
        CHECK(needle_session_set_tools(s, "[]", &err) == 0 && !strcmp(s->tools_compact, "[]"));
        needle_session_close(s);
    }
    needle_model_close(m);
}

/* The sampler on its own: greedy ties go to the lowest id; the mask is obeyed. */
static void test_sampler(void)
{
    nd_sampler sm;
    needle_error err = {0};
    CHECK(nd_sampler_init(&sm, 70, 0.0f, 0.0f, 1, &err) == 0);
    float logits[70];
    for (int i = 0; i < 70; i++) logits[i] = (float)(i % 7);
    uint32_t mask[3] = {0, 0, 0};
    CHECK(nd_sampler_pick(&sm, logits, NULL) == 6);
    CHECK(nd_sampler_pick(&sm, logits, mask) == -1);
    nd_mask_set(mask, 40);
    nd_mask_set(mask, 65);
    CHECK(nd_sampler_pick(&sm, logits, mask) == 40); /* 40%7=5 > 65%7=2 */
    nd_sampler_free(&sm);
    CHECK(nd_sampler_init(&sm, 70, 1.0f, 0.5f, 3, &err) == 0);
    for (int k = 0; k < 200; k++) {
        int t = nd_sampler_pick(&sm, logits, mask);
        CHECK(t == 40 || t == 65);
    }
    nd_sampler_free(&sm);
    double lp = nd_log_softmax_at(logits, 70, 6);
    double z = 0;
    for (int i = 0; i < 70; i++) z += exp(logits[i]);
    CHECK(fabs(lp - (6.0 - log(z))) < 1e-6);
}

int main(void)
{
    RUN(test_sampler);
    RUN(test_forced_parts_match_sentencepiece);
    RUN(test_first_turn_layout);
    RUN(test_layout_2_0_15);
    RUN(test_multi_turn_reuses_cache);
    RUN(test_reset_repeats);
    RUN(test_sampling_seeded);
    RUN(test_budget);
    RUN(test_no_tools);
    RUN(test_longer_than_window);
    RUN(test_input_errors);
    return check_summary();
}
