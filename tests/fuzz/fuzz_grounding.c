/* fuzz_grounding.c - libFuzzer harness for the grounding checks
 * (agent/grounding.c), the range guard's recogniser (agent/range_guard.c) and
 * the name finisher (agent/name_span.c), the message widener
 * (agent/message_span.c), the place widener (agent/place_span.c), the label
 * said (agent/said_label.c), the choices said
 * (agent/said_choice.c), the clock time read (agent/clock_time.c), the
 * number read (agent/said_number.c), the quantities converted
 * (agent/said_quantity.c), the date read (agent/said_date.c) and the cuts
 * of a two-part request (agent/split_request.c) and the messaging frame
 * read (agent/message_frame.c), the numbers no call uses
 * (agent/unused_number.c).
 *
 * The input is split at its first NUL byte: the request text (untrusted user
 * text) and a call list.  Properties: nothing crashes or leaks; every list the
 * checks write is a JSON array of strings; a path reported out of range is
 * also reported ungrounded; the recogniser and the path finder accept any
 * text and any token bytes; a finished name is a piece of the request that
 * holds the value it replaced, and the calls stay valid JSON; a cut's two
 * sides are ordered pieces of the request, neither empty, and the other
 * objects' cuts lie inside it; a framed call is one call whose recipient and
 * text are non-empty pieces of the request. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/clock_time.h"
#include "agent/grounding.h"
#include "agent/message_frame.h"
#include "agent/message_span.h"
#include "agent/name_span.h"
#include "agent/place_span.h"
#include "agent/range_guard.h"
#include "agent/ask_again.h"
#include "agent/repair.h"
#include "agent/said_choice.h"
#include "agent/said_colour.h"
#include "agent/said_date.h"
#include "agent/said_flag.h"
#include "agent/said_list.h"
#include "agent/said_label.h"
#include "agent/said_number.h"
#include "agent/said_quantity.h"
#include "agent/said_unit.h"
#include "agent/split_request.h"
#include "agent/unused_number.h"
#include "core/json.h"

static const char *TOOLS =
    "[{\"name\":\"set_lights\",\"parameters\":{\"type\":\"object\",\"properties\":{\"room\":{\"type\":\"string\"},"
    "\"brightness\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100},\"days\":{\"type\":\"array\",\"items\":"
    "{\"type\":\"number\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":7}},\"at\":{\"type\":\"string\"},"
    "\"mode\":{\"type\":\"string\",\"enum\":[\"on\",\"dim\",\"warm white\"]},"
    "\"wake\":{\"type\":\"string\",\"pattern\":\"^([01][0-9]|2[0-3]):[0-5][0-9]$\"},"
    "\"timer_minutes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":120},"
    "\"day\":{\"type\":\"string\",\"format\":\"date\"},\"text\":{\"type\":\"string\"},\"label\":{\"type\":\"string\"},"
    "\"repeat\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"enum\":[\"Monday\",\"Tuesday\",\"Wednesday\","
    "\"Thursday\",\"Friday\",\"Saturday\",\"Sunday\",\"dirt_roads\"]},\"maxItems\":8},"
    "\"speaker\":{\"type\":\"boolean\"},\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]},"
    "\"level\":{\"type\":\"number\",\"maximum\":1000}}}}]";

static void check_string_array(const nd_buf *b)
{
    nd_json *v = NULL;
    needle_error err;
    if (!b->data || nd_json_parse(b->data, b->len, NULL, &v, &err) != 0 || v->type != ND_JSON_ARRAY) abort();
    for (size_t i = 0; i < v->count; i++)
        if (v->items[i].type != ND_JSON_STRING) abort();
    nd_json_free(v);
}

/* Lists, flags, temperature units and decimals written from the request:
 * each change listed once; a list holds enum values, a flag is a boolean, a
 * unit one of the enum's, a decimal keeps the whole part it replaced. */
static void check_settings(nd_json *wide, const nd_json *tools, const char *request)
{
    nd_buf b;
    nd_buf_init(&b);
    nd_json_write(&b, wide, 0);
    nd_json *before = NULL;
    needle_error err;
    if (b.oom || nd_json_parse(b.data, b.len, NULL, &before, &err) != 0) abort();
    nd_buf_free(&b);
    nd_buf paths;
    nd_buf_init(&paths);
    int np = 0;
    int lists = nd_fix_said_lists(wide, tools, request, &paths, &np);
    if (lists < 0 || np != lists) abort();
    int flags = nd_fix_said_flags(wide, tools, request, &paths, &np);
    if (flags < 0 || np != lists + flags) abort();
    int units = nd_fix_said_units(wide, tools, request, &paths, &np);
    if (units < 0 || np != lists + flags + units) abort();
    int decimals = nd_fix_said_decimal(wide, tools, request, &paths, &np);
    if (decimals < 0 || np != lists + flags + units + decimals) abort();
    nd_buf_puts(&paths, np ? "]" : "[]");
    check_string_array(&paths);
    nd_buf_free(&paths);
    for (size_t c = 0; wide->type == ND_JSON_ARRAY && c < wide->count; c++) {
        const nd_json *a0 = nd_json_get(&before->items[c], "arguments"), *a1 = nd_json_get(&wide->items[c], "arguments");
        if (!a0 || !a1 || a0->type != ND_JSON_OBJECT || a1->type != ND_JSON_OBJECT) continue;
        for (size_t k = 0; k < a1->count; k++) {
            const nd_json *v1 = &a1->items[k], *v0 = nd_json_get(a0, a1->keys[k]);
            if (v0 && nd_json_equal(v0, v1)) continue;
            const char *key = a1->keys[k];
            if (!strcmp(key, "repeat")) {
                if (v1->type != ND_JSON_ARRAY || v1->count == 0 || v1->count > 8) abort();
                for (size_t i = 0; i < v1->count; i++)
                    if (v1->items[i].type != ND_JSON_STRING) abort();
            } else if (!strcmp(key, "speaker")) {
                if (v1->type != ND_JSON_TRUE && v1->type != ND_JSON_FALSE) abort();
            } else if (!strcmp(key, "unit")) {
                if (v1->type != ND_JSON_STRING || (strcmp(v1->str, "celsius") && strcmp(v1->str, "fahrenheit"))) abort();
            } else if (v1->type == ND_JSON_NUMBER && v0 && v0->type == ND_JSON_NUMBER) {
                if ((double)(long long)v1->num != v0->num || v1->num == v0->num) abort();
            } else {
                abort(); /* nothing else changes */
            }
        }
    }
    nd_json_free(before);
    /* an optional choice never said dropped: only from a one-call answer, only members removed */
    size_t members = wide->type == ND_JSON_ARRAY && wide->count == 1 && nd_json_get(&wide->items[0], "arguments") &&
                             nd_json_get(&wide->items[0], "arguments")->type == ND_JSON_OBJECT
                         ? nd_json_get(&wide->items[0], "arguments")->count
                         : 0;
    int unsaid = nd_drop_unsaid_choices(wide, tools, request);
    if (unsaid < 0 || (unsaid > 0 && (members < (size_t)unsaid ||
                                      nd_json_get(&wide->items[0], "arguments")->count != members - (size_t)unsaid)))
        abort();
    /* and an optional list never said: the same */
    members -= (size_t)unsaid;
    int unsaid_lists = nd_drop_unsaid_lists(wide, tools, request);
    if (unsaid_lists < 0 ||
        (unsaid_lists > 0 && (members < (size_t)unsaid_lists ||
                              nd_json_get(&wide->items[0], "arguments")->count != members - (size_t)unsaid_lists)))
        abort();
    /* near copies dropped: never the first call, the rest still calls */
    size_t n_before = wide->type == ND_JSON_ARRAY ? wide->count : 0;
    int dropped = nd_drop_near_duplicates(wide);
    if (dropped < 0 || (wide->type == ND_JSON_ARRAY && wide->count + (size_t)dropped != n_before) ||
        (n_before > 0 && dropped >= (int)n_before))
        abort();
}

/* Finish the names of calls and add the choices the request names (a parsed
 * copy is kept to compare): every changed string of a call's arguments is a
 * piece of the request holding the value it replaced, an added choice is a
 * new member; the paths are a JSON array of strings. */
static void check_names(const nd_json *calls, const nd_json *tools, const char *request)
{
    nd_buf b;
    nd_buf_init(&b);
    nd_json_write(&b, calls, 0);
    nd_json *wide = NULL;
    needle_error err;
    if (b.oom || nd_json_parse(b.data, b.len, NULL, &wide, &err) != 0) abort();
    nd_buf paths;
    nd_buf_init(&paths);
    int np = 0;
    int n = nd_complete_names(wide, tools, request, &paths, &np);
    if (n < 0 || np != n) abort();
    int texts = nd_complete_message_text(wide, tools, request, &paths, &np);
    if (texts < 0 || np != n + texts) abort();
    int places = nd_complete_place_names(wide, tools, request, &paths, &np);
    if (places < 0 || np != n + texts + places) abort();
    int labelled = nd_fix_said_label(wide, tools, request, &paths, &np);
    if (labelled < 0 || np != n + texts + places + labelled) abort();
    char *label = nd_label_said(request);
    if (label && (!label[0] || !strstr(request, label))) abort(); /* a piece of the request */
    free(label);
    n += texts + places + labelled; /* (a widened message or place, like a name, is a piece of the request holding the
                            value, or held by it: a place loses the tool's own noun) */
    int added = nd_add_said_choices(wide, tools, request, &paths, &np);
    if (added < 0 || np != n + added) abort();
    int said = nd_clock_time_said(request);
    if (said < -1 || said >= 24 * 60) abort();
    int timed = nd_fix_clock_time(wide, tools, request, &paths, &np);
    if (timed < 0 || np != n + added + timed) abort();
    if (timed && said < 0) { /* no half of the day said: the time as said, an hour of 1 to 12 */
        const nd_json *args = wide->type == ND_JSON_ARRAY && wide->count == 1 ? nd_json_get(&wide->items[0], "arguments") : NULL;
        const nd_json *wake = args ? nd_json_get(args, "wake") : NULL;
        int hour = wake && wake->type == ND_JSON_STRING && wake->len == 5 ? (wake->str[0] - '0') * 10 + (wake->str[1] - '0') : -1;
        if (hour < 1 || hour > 12) abort();
    }
    char no_such_time[260];
    int impossible = nd_clock_time_outside(wide, tools, request, no_such_time, sizeof no_such_time);
    if (impossible != (no_such_time[0] != '\0') || (impossible && (!nd_clock_time_impossible(request) || !strchr(no_such_time, '.'))))
        abort(); /* a "tool.key", only for a request saying a time that does not exist */
    char colour[260];
    int coloured = nd_colour_outside(wide, tools, request, colour, sizeof colour);
    if (coloured < 0 || coloured != (colour[0] != '\0') || (coloured && !strchr(colour, '.')))
        abort(); /* a "tool.key" or nothing, the calls as they were */
    char choice[260];
    int chosen = nd_choice_outside(wide, tools, request, choice, sizeof choice);
    if (chosen < 0 || chosen != (choice[0] != '\0') || (chosen && !strchr(choice, '.'))) abort();
    char currency[260];
    int cur = nd_currency_outside(wide, tools, request, currency, sizeof currency);
    if (cur < 0 || cur != (currency[0] != '\0') || (cur && !strchr(currency, '.'))) abort();
    int forgiven = nd_bent_value_said(wide, tools, request, "set_lights.brightness");
    if (forgiven != 0 && forgiven != 1) abort();
    double near[8];
    int n_near = nd_numbers_near_key(request, "brightness_level", near, 8);
    if (n_near < 0 || n_near > 8) abort();
    for (int i = 0; i < n_near; i++)
        if (near[i] != near[i]) abort(); /* never NaN */
    double nums[32];
    int n_nums = nd_numbers_said(request, nums, 32);
    if (n_nums < 0 || n_nums > 32) abort();
    for (int i = 0; i < n_nums; i++)
        if (!(nums[i] >= 0)) abort(); /* never negative, never NaN */
    int numbered = nd_fix_said_number(wide, tools, request, "[\"set_lights.brightness\"]", &paths, &np);
    if (numbered < 0 || np != n + added + timed + numbered) abort();
    for (int kind = 0; kind < 2; kind++) {
        double q[16];
        int nq = nd_quantities_said(request, kind ? 'v' : 't', q, 16);
        for (int i = 0; i < nq; i++)
            if (!(q[i] >= 0 && q[i] < 1e300)) abort();
    }
    char outside[64];
    int converted = nd_fix_said_quantity(wide, tools, request, &paths, &np, outside, sizeof outside);
    if (converted < 0 || np != n + added + timed + numbered + converted || strlen(outside) >= sizeof outside) abort();
    char date[11];
    if (nd_date_said(request, "date: 2026-12-06", date) &&
        (strlen(date) != 10 || date[4] != '-' || date[7] != '-'))
        abort();
    int dated = nd_fix_said_date(wide, tools, request, "date: 2026-12-06", &paths, &np);
    if (dated < 0 || np != n + added + timed + numbered + converted + dated) abort();
    nd_buf_puts(&paths, np ? "]" : "[]");
    check_string_array(&paths);
    nd_buf_free(&paths);
    int changed = 0;
    for (size_t c = 0; wide->type == ND_JSON_ARRAY && c < wide->count; c++) {
        const nd_json *a0 = nd_json_get(&calls->items[c], "arguments"), *a1 = nd_json_get(&wide->items[c], "arguments");
        /* (an added choice comes after the call's own arguments) */
        for (size_t k = 0; a0 && a1 && a0->type == ND_JSON_OBJECT && a1->type == ND_JSON_OBJECT && k < a0->count; k++) {
            const nd_json *v0 = &a0->items[k], *v1 = &a1->items[k];
            if (v1->type != ND_JSON_STRING || (v0->len == v1->len && !memcmp(v0->str, v1->str, v0->len))) continue;
            changed++;
            if (timed && v1->len == 5 && v1->str[2] == ':') continue; /* the time read */
            if (!strstr(request, v1->str)) abort();
            if (labelled && (!strcasecmp(a1->keys[k], "label") || !strcasecmp(a1->keys[k], "title")))
                continue; /* the label said replaces the model's */
            if (!strcmp(a1->keys[k], "room") && places)
                continue; /* a place may be replaced by the one the request names: a piece of the request (above) */
            if (!strstr(v1->str, v0->str) && !strstr(v0->str, v1->str)) abort();
        }
    }
    if (changed > n + timed) abort();
    if (added && (wide->count != 1 || nd_json_get(&wide->items[0], "arguments")->count <
                                           nd_json_get(&calls->items[0], "arguments")->count + (size_t)added))
        abort(); /* (a date may be added after the choices) */
    check_settings(wide, tools, request);
    nd_buf_reset(&b);
    nd_json_write(&b, wide, 0);
    nd_json *again = NULL;
    if (b.oom || nd_json_parse(b.data, b.len, NULL, &again, &err) != 0) abort();
    nd_json_free(again);
    nd_json_free(wide);
    nd_buf_free(&b);
}

/* The cuts of a request: ordered, inside it, neither side empty. */
static void check_cuts(const char *request, const nd_json *calls)
{
    nd_split_point p[ND_SPLIT_MAX_POINTS];
    int n = nd_split_points(request, calls, p, ND_SPLIT_MAX_POINTS);
    size_t len = strlen(request);
    if (n < 0 || n > ND_SPLIT_MAX_POINTS) abort();
    for (int i = 0; i < n; i++)
        if (!(p[i].left_begin < p[i].left_end && p[i].left_end <= p[i].right_begin &&
              p[i].right_begin < p[i].right_end && p[i].right_end <= len))
            abort();
    /* one action, two objects: each call's values next to a join */
    for (size_t c = 0; calls && calls->type == ND_JSON_ARRAY && c < calls->count; c++) {
        nd_other_object o[ND_OTHER_OBJECT_MAX];
        int k = nd_other_objects(request, &calls->items[c], o, ND_OTHER_OBJECT_MAX);
        if (k < 0 || k > ND_OTHER_OBJECT_MAX) abort();
        for (int i = 0; i < k; i++) {
            if (!(o[i].value_begin < o[i].value_end && o[i].value_end <= len && o[i].cut_begin < o[i].cut_end &&
                  o[i].cut_end <= len && o[i].far_side <= len && o[i].key))
                abort();
            /* the far side's first bytes, and the whole request, as the other value */
            (void)nd_other_object_flanks(request, &o[i], request + o[i].far_side, len - o[i].far_side);
            (void)nd_other_object_flanks(request, &o[i], request, len);
        }
    }
}

/* Does the request say, next to the name of the argument at path "tool.key",
 * a number that argument's bounds refuse (grounding.c's check of a number
 * left out or written without its sign)? */
static int refused_by_name(const nd_json *tools, const char *path, const char *request)
{
    const char *dot = strchr(path, '.');
    if (!dot) return 0;
    char tool[64];
    size_t n = (size_t)(dot - path);
    if (n >= sizeof tool) return 0;
    memcpy(tool, path, n);
    tool[n] = '\0';
    const nd_json *schema = nd_json_get(nd_json_get(nd_tool_parameters(tools, tool), "properties"), dot + 1);
    double near[16];
    int k = schema ? nd_numbers_near_key(request, dot + 1, near, 16) : 0;
    for (int i = 0; i < k; i++)
        if (nd_schema_bounds_refuse(schema, near[i])) return 1;
    return 0;
}

/* The messaging frame: one call, its two values non-empty pieces of the request. */
static void check_frame(const char *request)
{
    static const char *SEND = "[{\"name\":\"send\",\"parameters\":{\"type\":\"object\",\"properties\":{"
                              "\"to\":{\"type\":\"string\"},\"text\":{\"type\":\"string\"}}}}]";
    nd_json *tools = NULL, *call = NULL;
    needle_error err;
    if (nd_json_parse(SEND, strlen(SEND), NULL, &tools, &err) != 0) abort();
    const char *tool = NULL, *pk = NULL, *tk = NULL;
    char *framed = nd_message_frame_call(tools, request, 0, &tool, &pk, &tk);
    if (framed) {
        if (nd_json_parse(framed, strlen(framed), NULL, &call, &err) != 0 || call->type != ND_JSON_ARRAY || call->count != 1)
            abort();
        const nd_json *args = nd_json_get(&call->items[0], "arguments");
        const nd_json *to = nd_json_get(args, "to"), *text = nd_json_get(args, "text");
        if (!to || !text || to->type != ND_JSON_STRING || text->type != ND_JSON_STRING || !to->len || !text->len ||
            !strstr(request, to->str) || !strstr(request, text->str) || strcmp(tool, "send") || strcmp(pk, "to") ||
            strcmp(tk, "text"))
            abort();
    }
    nd_json_free(call);
    free(framed);
    nd_json_free(tools);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    size_t req_len = strlen(text);
    const char *calls_text = req_len < size ? text + req_len + 1 : "[]";
    size_t calls_len = strlen(calls_text);

    /* the recogniser on the call text and two pieces of the request as tokens */
    nd_json_lexpos p = {0, 0};
    nd_json_lexpos_feed(&p, calls_text, calls_len);
    size_t half = req_len / 2;
    (void)nd_range_refused(&p, calls_text, calls_len, text, half, text + half, req_len - half);
    char path[64];
    nd_range_path(calls_text, calls_len, path, sizeof path);
    if (strlen(path) >= sizeof path) abort();

    nd_json *tools = NULL, *calls = NULL;
    needle_error err;
    if (nd_json_parse(TOOLS, strlen(TOOLS), NULL, &tools, &err) != 0) abort();
    (void)nd_range_closed_string(tools, path);
    /* a bent path as the session passes it: grammar output, so printable here */
    int printable = 1;
    for (const char *c = path; *c; c++) printable &= *c >= 0x20 && *c < 0x7f;
    const char *bent = size > 0 && (data[0] & 1) && printable ? path : NULL;
    if (nd_json_parse(calls_text, calls_len, NULL, &calls, &err) == 0) {
        nd_grounding g;
        if (nd_grounding_check(calls, tools, text, text, "date: 2026-12-06", bent, &g) == 0) {
            check_string_array(&g.ungrounded);
            check_string_array(&g.out_of_schema);
            check_string_array(&g.missing);
            nd_json *oor = NULL;
            if (nd_json_parse(g.out_of_schema.data, g.out_of_schema.len, NULL, &oor, &err) != 0) abort();
            for (size_t i = 0; i < oor->count; i++) /* the bent path, a kind of ungrounded, or a number said by name */
                if (!(bent && strcmp(oor->items[i].str, bent) == 0) && !strstr(g.ungrounded.data, oor->items[i].str) &&
                    !refused_by_name(tools, oor->items[i].str, text))
                    abort();
            nd_json_free(oor);
        }
        nd_grounding_free(&g);
        check_names(calls, tools, text);
        check_cuts(text, calls);
        int sign = nd_refusal_signs(calls, tools, text); /* asked again: a yes or no, never a crash */
        if (sign != 0 && sign != 1) abort();
        nd_buf unused; /* numbers no call uses: a JSON array of strings that are pieces of the request */
        nd_buf_init(&unused);
        int nu = nd_numbers_unused(calls, text, &unused);
        if (nu < 0 || (nu > 0) != (unused.len > 0)) abort();
        if (nu > 0) {
            check_string_array(&unused);
            nd_json *u = NULL;
            if (nd_json_parse(unused.data, unused.len, NULL, &u, &err) != 0 || (int)u->count != nu) abort();
            for (size_t i = 0; i < u->count; i++)
                if (!strstr(text, u->items[i].str)) abort();
            nd_json_free(u);
        }
        nd_buf_free(&unused);
    }
    nd_json_free(calls);
    nd_json_free(tools);
    check_frame(text);
    free(text);
    return 0;
}
