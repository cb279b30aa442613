/* test_schema.c - what the schema compiler accepts, refuses, and how it says so. */
#include <string.h>

#include "grammar/grammar.h"
#include "grammar/schema.h"
#include "check.h"
#include "grammar_check.h"
#include "core/buf.h"
#include "core/json.h"

/* Compile a tools array; returns the code and copies the message. */
static int compile_tools(const char *json, char *msg, size_t msg_size)
{
    nd_json *doc = NULL;
    needle_error err = {0};
    if (nd_json_parse(json, strlen(json), "test", &doc, &err) < 0) return -100;
    nd_grammar *g = NULL;
    int rc = nd_grammar_compile(doc, &g, &err);
    snprintf(msg, msg_size, "%s", err.message);
    nd_grammar_free(g);
    nd_json_free(doc);
    return rc;
}

static int param_error(const char *params, const char *want_in_message)
{
    char json[2048], msg[512];
    snprintf(json, sizeof json, "[{\"name\":\"a\",\"parameters\":{}},{\"name\":\"f\",\"parameters\":%s}]", params);
    int rc = compile_tools(json, msg, sizeof msg);
    int ok = rc == NEEDLE_ESCHEMA && strstr(msg, want_in_message) != NULL;
    if (!ok) fprintf(stderr, "  rc=%d message: %s (wanted %s)\n", rc, msg, want_in_message);
    return ok;
}

static void test_unsupported_keywords_name_the_path(void)
{
    CHECK(param_error("{\"type\":\"object\",\"properties\":{\"when\":{\"not\":{\"type\":\"string\"}}}}",
                      "tools[1].parameters.properties.when: unsupported keyword \"not\""));
    CHECK(param_error("{\"type\":\"object\",\"patternProperties\":{\"^x\":{}}}", "tools[1].parameters: unsupported keyword \"patternProperties\""));
    /* uniqueItems is checked after decoding where properties and items lead to it; elsewhere an error */
    {
        char msg[512];
        CHECKF(compile_tools("[{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{\"l\":{\"type\":"
                             "\"array\",\"uniqueItems\":true,\"items\":{\"type\":\"array\",\"uniqueItems\":true}}}}}]",
                             msg, sizeof msg) == 0, "%s", msg);
        /* told by where the compiler is, not by the path's text: a property named like a keyword */
        CHECKF(compile_tools("[{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{\"oneOffer\":{\"type\":"
                             "\"array\",\"uniqueItems\":true}}}}]",
                             msg, sizeof msg) == 0, "%s", msg);
    }
    /* tuple items (the agent's checks read "items" as one schema) */
    CHECK(param_error("{\"type\":\"object\",\"properties\":{\"l\":{\"type\":\"array\",\"items\":[{\"type\":\"array\",\"uniqueItems\":true}]}}}",
                      "uniqueItems"));
    CHECK(param_error("{\"type\":\"object\",\"properties\":{\"m\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"array\",\"uniqueItems\":true}}}}",
                      "uniqueItems"));
    CHECK(param_error("{\"type\":\"object\",\"properties\":{\"l\":{\"anyOf\":[{\"type\":\"array\",\"uniqueItems\":true},{\"type\":\"null\"}]}}}",
                      "uniqueItems"));
    CHECK(param_error("{\"$defs\":{\"u\":{\"type\":\"array\",\"uniqueItems\":true}},\"type\":\"object\",\"properties\":{\"l\":{\"$ref\":\"#/$defs/u\"}}}",
                      "uniqueItems"));
    CHECK(param_error("{\"if\":{},\"then\":{}}", "unsupported keyword \"if\""));
    CHECK(param_error("{\"type\":\"object\",\"dependentRequired\":{}}", "dependentRequired"));
    CHECK(param_error("{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}}}",
                      "tools[1].parameters.properties.p.pattern: unsupported construct: backreference"));
    CHECK(param_error("{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"string\",\"pattern\":\"a(?=b)\"}}}", "lookaround"));
    CHECK(param_error("{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"string\",\"pattern\":\"a^b\"}}}", "anchors"));
    CHECK(param_error("{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"string\",\"format\":\"idn-email\"}}}", "unsupported format"));
    CHECK(param_error("{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"number\",\"multipleOf\":0.3}}}", "multipleOf"));
    /* a power of ten below one needs bounds on its grid (else a prefix could have no completion) */
    CHECK(param_error("{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"number\",\"multipleOf\":0.01,\"minimum\":0.005}}}",
                      "minimum 0.005 is not a multiple of multipleOf 0.01"));
    CHECK(param_error("{\"type\":\"object\",\"properties\":{\"p\":{\"$ref\":\"#/$defs/missing\"}}}", "cannot resolve"));
    CHECK(param_error("{\"type\":\"object\",\"properties\":{},\"required\":[\"x\"]}", "not a declared property"));
    CHECK(param_error("{\"type\":\"wat\"}", "unknown type"));
}

static void test_unsatisfiable_is_an_error(void)
{
    CHECK(param_error("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":5,\"maximum\":3}},\"required\":[\"n\"]}",
                      "no value satisfies"));
    CHECK(param_error("{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"minLength\":3,\"maxLength\":2}},\"required\":[\"s\"]}",
                      "no value satisfies"));
    /* infinite recursion through a required property has no finite value */
    CHECK(param_error("{\"$defs\":{\"T\":{\"type\":\"object\",\"properties\":{\"t\":{\"$ref\":\"#/$defs/T\"}},\"required\":[\"t\"]}},"
                      "\"type\":\"object\",\"properties\":{\"t\":{\"$ref\":\"#/$defs/T\"}},\"required\":[\"t\"]}",
                      "no value satisfies"));
    CHECK(param_error("{\"$defs\":{\"A\":{\"$ref\":\"#/$defs/B\"},\"B\":{\"$ref\":\"#/$defs/A\"}},\"$ref\":\"#/$defs/A\"}", "$ref cycle"));
}

static void test_tools_array_shape(void)
{
    char msg[512];
    CHECK(compile_tools("{}", msg, sizeof msg) == NEEDLE_ESCHEMA);
    CHECK(compile_tools("[{\"parameters\":{}}]", msg, sizeof msg) == NEEDLE_ESCHEMA && strstr(msg, "tools[0].name"));
    CHECK(compile_tools("[{\"name\":\"x\"},{\"name\":\"x\"}]", msg, sizeof msg) == NEEDLE_ESCHEMA && strstr(msg, "declared twice"));
    CHECK(compile_tools("[]", msg, sizeof msg) == 0); /* no tools: only [] */
    /* annotations and Pydantic-style schemas compile */
    CHECK(compile_tools("[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"title\":\"F\",\"type\":\"object\","
                        "\"properties\":{\"x\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}],\"default\":null,\"title\":\"X\"},"
                        "\"m\":{\"allOf\":[{\"$ref\":\"#/$defs/M\"}],\"description\":\"d\"}},"
                        "\"$defs\":{\"M\":{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"integer\"}},\"required\":[\"k\"]}},"
                        "\"examples\":[1],\"x-extra\":true}}}]", msg, sizeof msg) == 0);
}

static void test_subset(void)
{
    const char *json = "[{\"name\":\"a\"},{\"name\":\"b\"},{\"name\":\"c\"}]";
    nd_json *doc = NULL;
    needle_error err = {0};
    CHECK(nd_json_parse(json, strlen(json), "t", &doc, &err) == 0);
    nd_grammar *g = NULL;
    int idx[] = {2, 0};
    CHECK(nd_grammar_compile_subset(doc, idx, 2, &g, &err) == 0);
    if (g) {
        CHECK(nd_grammar_tool_count(g) == 2 && strcmp(nd_grammar_tool_name(g, 0), "c") == 0);
        nd_grammar_state s;
        nd_grammar_start(g, &s);
        const char *ok = "[{\"name\":\"c\",\"arguments\":{}}]";
        CHECK(nd_grammar_advance(g, &s, ok, strlen(ok)) == 0 && nd_grammar_complete(g, &s));
        nd_grammar_start(g, &s);
        const char *bad = "[{\"name\":\"b\"";
        CHECK(nd_grammar_advance(g, &s, bad, strlen(bad)) < 0);
    }
    nd_grammar_free(g);
    int bad_idx[] = {7};
    CHECK(nd_grammar_compile_subset(doc, bad_idx, 1, &g, &err) == NEEDLE_EINVAL);
    nd_json_free(doc);
}

/* Many properties compile in linear time (issue 20, D2: 10,000 properties took
 * seconds, then hours in decoding): "required" in any order still marks the
 * right keys, and a key declared by two allOf members is still refused. */
static void test_many_properties(void)
{
    enum { N = 3000 };
    nd_buf b;
    nd_buf_init(&b);
    nd_buf_puts(&b, "[{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < N; i++) nd_buf_printf(&b, "%s\"p%d\":{\"type\":\"integer\"}", i ? "," : "", i);
    nd_buf_puts(&b, "},\"required\":[");
    for (int i = N - 1, first = 1; i >= 0; i--)
        if (i % 1000 == 7) {
            nd_buf_printf(&b, "%s\"p%d\"", first ? "" : ",", i);
            first = 0;
        }
    nd_buf_puts(&b, "]}}]");
    CHECK(!b.oom);
    nd_json *doc = NULL;
    needle_error err = {0};
    nd_grammar *g = NULL;
    CHECK(nd_json_parse(b.data, b.len, "test", &doc, &err) == 0);
    CHECK(doc && nd_grammar_compile(doc, &g, &err) == 0);
    if (g) {
        CHECK(accepts(g, "[{\"name\":\"f\",\"arguments\":{\"p7\":1,\"p1007\":2,\"p2007\":3}}]"));
        CHECK(accepts(g, "[{\"name\":\"f\",\"arguments\":{\"p0\":0,\"p7\":1,\"p1007\":2,\"p2007\":3,\"p2999\":9}}]"));
        CHECK(!accepts(g, "[{\"name\":\"f\",\"arguments\":{\"p7\":1,\"p2007\":3}}]")); /* p1007 missing */
        CHECK(!accepts(g, "[{\"name\":\"f\",\"arguments\":{\"p7\":1,\"p1007\":2,\"p2007\":3,\"p3000\":4}}]"));
    }
    nd_grammar_free(g);
    nd_json_free(doc);
    nd_buf_free(&b);
    CHECK(param_error("{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{}}},"
                      "{\"type\":\"object\",\"properties\":{\"c\":{},\"b\":{}}}]}",
                      "properties.b: declared twice in allOf"));
}

int main(void)
{
    RUN(test_unsupported_keywords_name_the_path);
    RUN(test_many_properties);
    RUN(test_unsatisfiable_is_an_error);
    RUN(test_tools_array_shape);
    RUN(test_subset);
    return check_summary();
}
