/* test_eval.c - `needle eval` scoring and row handling.
 *
 * Scoring is checked on handmade predictions (no model); the row handling
 * (parsing, counting, malformed lines, the session path) on the golden
 * random-weight model, whose calls are whatever the grammar lets through. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval.h"
#include "check.h"
#include "core/json.h"

#define DEMO_TOOLS                                                                                              \
    "[{\"name\":\"set_lights\",\"description\":\"lights\",\"parameters\":{\"type\":\"object\",\"properties\":"  \
    "{\"room\":{\"type\":\"string\"},\"on\":{\"type\":\"boolean\"}},\"required\":[\"room\",\"on\"]}},"          \
    "{\"name\":\"set_alarm\",\"description\":\"alarm\",\"parameters\":{\"type\":\"object\",\"properties\":"     \
    "{\"time\":{\"type\":\"string\"}},\"required\":[\"time\"]}}]"

static nd_json *parse(const char *s)
{
    nd_json *v = NULL;
    needle_error e;
    if (nd_json_parse(s, strlen(s), "test", &v, &e)) {
        fprintf(stderr, "test JSON: %s\n", e.message);
        return NULL;
    }
    return v;
}

/* Score one (pred, gold) pair into r; returns the exact flag. */
static int score(const char *pred, const char *gold, int success, nd_eval_result *r)
{
    nd_json *p = parse(pred), *g = parse(gold), *t = parse(DEMO_TOOLS);
    int x = -1;
    if (p && g && t) x = nd_eval_score(p, g, t, success, r);
    nd_json_free(p);
    nd_json_free(g);
    nd_json_free(t);
    return x;
}

static void test_exact_ignores_call_and_key_order(void)
{
    nd_eval_result r;
    memset(&r, 0, sizeof r);
    const char *gold = "[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"kitchen\",\"on\":false}},"
                       "{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:00\"}}]";
    const char *pred = "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:00\"}},"
                       "{\"name\":\"set_lights\",\"arguments\":{\"on\":false,\"room\":\"kitchen\"}}]";
    CHECK(score(pred, gold, 1, &r) == 1);
    CHECK(r.rows == 1 && r.exact_ok == 1 && r.name_ok == 1 && r.on_topic == 1 && r.off_topic == 0);
    CHECKF(r.arg_tp == 3 && r.arg_pred == 3 && r.arg_gold == 3, "tp %ld pred %ld gold %ld", r.arg_tp, r.arg_pred,
           r.arg_gold);
}

static void test_wrong_value_counts_names_and_triples(void)
{
    nd_eval_result r;
    memset(&r, 0, sizeof r);
    const char *gold = "[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"kitchen\",\"on\":false}}]";
    CHECK(score("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"bedroom\",\"on\":false}}]", gold, 1, &r) == 0);
    CHECK(r.name_ok == 1 && r.exact_ok == 0);
    CHECK(r.arg_tp == 1 && r.arg_pred == 2 && r.arg_gold == 2);
    CHECK(r.schema_valid == 1);
    /* numbers compare by value: 1.0 == 1 */
    memset(&r, 0, sizeof r);
    CHECK(score("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":1.0}}]",
                "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":1}}]", 1, &r) == 1);
    /* a wrong tool: the name misses, and its argument triples do not count */
    memset(&r, 0, sizeof r);
    CHECK(score("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"kitchen\"}}]", gold, 1, &r) == 0);
    CHECK(r.name_ok == 0 && r.arg_tp == 0 && r.arg_pred == 1 && r.arg_gold == 2);
    /* one call too many is not exact, even though every expected call is there */
    memset(&r, 0, sizeof r);
    CHECK(score("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"kitchen\",\"on\":false}},"
                "{\"name\":\"set_lights\",\"arguments\":{\"room\":\"kitchen\",\"on\":false}}]",
                gold, 1, &r) == 0);
    CHECK(r.name_ok == 0 && r.arg_tp == 2 && r.arg_pred == 4);
}

static void test_refusals(void)
{
    nd_eval_result r;
    memset(&r, 0, sizeof r);
    CHECK(score("[]", "[]", 1, &r) == 1);
    CHECK(r.off_topic == 1 && r.refusal_ok == 1 && r.name_ok == 1 && r.schema_valid == 1);
    CHECK(score("[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:00\"}}]", "[]", 1, &r) == 0);
    CHECK(r.off_topic == 2 && r.refusal_ok == 1);
    CHECK(score("[]", "[{\"name\":\"set_alarm\",\"arguments\":{\"time\":\"07:00\"}}]", 1, &r) == 0);
    CHECK(r.on_topic == 1 && r.false_refusals == 1);
    /* a failed turn is never right, even when its (empty) calls would be */
    CHECK(score("[]", "[]", 0, &r) == 0);
    CHECK(r.refusal_ok == 1 && r.off_topic == 3 && r.schema_valid == 3);
}

static void test_schema_validity(void)
{
    nd_eval_result r;
    memset(&r, 0, sizeof r);
    /* an undeclared tool, a missing required key and a wrong type are all invalid */
    score("[{\"name\":\"open_door\",\"arguments\":{}}]", "[]", 1, &r);
    score("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"hall\"}}]", "[]", 1, &r);
    score("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"hall\",\"on\":\"no\"}}]", "[]", 1, &r);
    CHECKF(r.schema_valid == 0, "%d valid", r.schema_valid);
    score("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"hall\",\"on\":true}}]", "[]", 1, &r);
    CHECK(r.schema_valid == 1);
}

static void test_json_output(void)
{
    nd_eval_result r;
    memset(&r, 0, sizeof r);
    score("[]", "[]", 1, &r);
    score("[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"hall\",\"on\":true}}]",
          "[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"hall\",\"on\":false}}]", 1, &r);
    nd_buf b;
    nd_buf_init(&b);
    nd_eval_write_json(&b, &r);
    nd_json *v = parse(b.data);
    CHECKF(v != NULL, "%s", b.data);
    if (v) {
        const nd_json *rows = nd_json_get(v, "rows"), *ex = nd_json_get(v, "exact_call_accuracy");
        const nd_json *f1 = nd_json_get(v, "argument_f1"), *ref = nd_json_get(v, "refusal_accuracy");
        CHECK(rows && rows->num == 2);
        CHECK(ex && fabs(ex->num - 0.5) < 1e-9);
        CHECK(f1 && fabs(f1->num - 0.5) < 1e-9); /* 1 of 2 triples both ways */
        CHECK(ref && ref->num == 1.0);
        CHECK(nd_json_get(v, "mean_decode_tps") && nd_json_get(v, "mean_decode_tps")->type == ND_JSON_NULL);
    }
    nd_json_free(v);
    nd_buf_free(&b);
}

static void test_file_rows_with_random_model(void)
{
    const char *path = "build-eval-test.jsonl";
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    /* 3 good rows: on-topic, off-topic with no tools (the grammar forces []), tools as a string */
    fprintf(f, "{\"query\":\"turn off the kitchen lights\",\"tools\":%s,\"answers\":"
               "[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"kitchen\",\"on\":false}}]}\n", DEMO_TOOLS);
    fprintf(f, "{\"query\":\"tell me a joke\",\"tools\":[],\"answers\":[],\"system\":\"date: 2026-03-14\"}\n");
    fprintf(f, "\n");
    fprintf(f, "{\"query\":\"wake me at 7\",\"tools\":\"[]\",\"function_calls\":\"[]\"}\n");
    /* 5 malformed rows */
    fprintf(f, "this is not json\n");
    fprintf(f, "{\"query\":\"no answers\",\"tools\":[]}\n");
    fprintf(f, "{\"query\":\"bad answer\",\"tools\":[],\"answers\":[{\"name\":3}]}\n");
    fprintf(f, "{\"query\":\"tools not array\",\"tools\":{\"a\":1},\"answers\":[]}\n");
    fprintf(f, "[1,2,3]\n");
    fclose(f);

    needle_model *m = NULL;
    needle_error err = {0, ""};
    needle_model_options mo = {.threads = 1};
    int rc = needle_model_open("tests/golden/tiny_w4.cact", NULL, &mo, &m, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc) {
        remove(path);
        return;
    }
    FILE *report = tmpfile();
    nd_eval_opts o = {.tools_from_data = 1, .max_new_tokens = 24, .report = report};
    nd_eval_result r;
    memset(&r, 0, sizeof r);
    rc = nd_eval_file(m, path, &o, &r, &err);
    CHECKF(rc == 0, "%s", err.message);
    CHECKF(r.lines == 8 && r.rows == 3 && r.malformed == 5, "lines %d rows %d malformed %d", r.lines, r.rows,
           r.malformed);
    CHECK(r.on_topic == 1 && r.off_topic == 2);
    CHECKF(r.refusal_ok == 2, "refusals %d", r.refusal_ok); /* no tools: [] is the only sentence */
    CHECK(r.errors == 0);
    CHECK(r.tps_n == 3);
    /* every malformed line is reported once, as FILE:LINE: skipped: why */
    if (report) {
        rewind(report);
        char line[1024];
        int n = 0, line5 = 0;
        while (fgets(line, sizeof line, report))
            if (strstr(line, ": skipped: ")) {
                n++;
                if (!strncmp(line, "build-eval-test.jsonl:5: skipped: ", 34)) line5 = 1;
            }
        CHECKF(n == 5, "%d skipped lines reported", n);
        CHECK(line5);
        fclose(report);
    }
    /* a tools file that is not JSON fails the row loudly, not silently */
    nd_eval_opts o2 = {.tools_json = "[not json", .report = NULL};
    nd_eval_result r2;
    memset(&r2, 0, sizeof r2);
    nd_eval_file(m, path, &o2, &r2, &err);
    CHECK(r2.rows == 0);
    CHECK(nd_eval_file(m, "no/such/file.jsonl", &o, &r2, &err) == NEEDLE_EIO);
    needle_model_close(m);
    remove(path);
}

int main(void)
{
    RUN(test_exact_ignores_call_and_key_order);
    RUN(test_wrong_value_counts_names_and_triples);
    RUN(test_refusals);
    RUN(test_schema_validity);
    RUN(test_json_output);
    RUN(test_file_rows_with_random_model);
    return check_summary();
}
