/* test_json.c - the strict JSON parser and the compact writer.
 *
 * Expected writer outputs below are derived by hand from Python's rules for
 * json.dumps(obj, separators=(",",":"), ensure_ascii=True): escapes \" \\ \n
 * \r \t \b \f, other characters below 0x20 and DEL as \u00xx (lowercase hex),
 * everything non-ASCII as \uxxxx, above U+FFFF as a surrogate pair.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/json.h"

static nd_json *parse_ok(const char *text)
{
    nd_json *v = NULL;
    needle_error err = {0, ""};
    int rc = nd_json_parse(text, strlen(text), NULL, &v, &err);
    CHECKF(rc == 0 && v, "parse failed for <%s>: %s", text, err.message);
    return rc == 0 ? v : NULL;
}

/* Parse, write compactly, compare with the expected text. */
static void round_trip(const char *text, const char *expected, int ascii_only)
{
    nd_json *v = parse_ok(text);
    if (!v) return;
    nd_buf b;
    nd_buf_init(&b);
    nd_json_write(&b, v, ascii_only);
    CHECKF(b.data && strcmp(b.data, expected) == 0, "<%s> wrote <%s>, expected <%s>", text, b.data ? b.data : "",
           expected);
    /* the output parses back to an equal value */
    nd_json *w = NULL;
    needle_error err;
    CHECKF(nd_json_parse(b.data, b.len, NULL, &w, &err) == 0, "reparse: %s", err.message);
    CHECK(nd_json_equal(v, w));
    nd_json_free(w);
    nd_json_free(v);
    nd_buf_free(&b);
}

static void test_scalars(void)
{
    nd_json *v = parse_ok(" null ");
    CHECK(v && v->type == ND_JSON_NULL);
    nd_json_free(v);
    v = parse_ok("true");
    CHECK(v && v->type == ND_JSON_TRUE);
    nd_json_free(v);
    v = parse_ok("\t\r\nfalse\n");
    CHECK(v && v->type == ND_JSON_FALSE);
    nd_json_free(v);
    v = parse_ok("-12.5e+2");
    CHECK(v && v->type == ND_JSON_NUMBER && v->num == -1250.0 && strcmp(v->str, "-12.5e+2") == 0);
    nd_json_free(v);
    v = parse_ok("0");
    CHECK(v && v->num == 0.0 && v->len == 1);
    nd_json_free(v);
    v = parse_ok("-0.0");
    CHECK(v && v->num == 0.0 && strcmp(v->str, "-0.0") == 0);
    nd_json_free(v);
    v = parse_ok("1E400"); /* valid grammar; the value overflows, the literal is kept */
    CHECK(v && v->num > 1e308 && strcmp(v->str, "1E400") == 0);
    nd_json_free(v);
    v = parse_ok("100000.0");
    CHECK(v && v->num == 100000.0);
    nd_json_free(v);
}

static void test_strings(void)
{
    nd_json *v = parse_ok("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"");
    CHECK(v && v->type == ND_JSON_STRING && v->len == 12 && memcmp(v->str, "a\"b\\c/d\b\f\n\r\t", 12) == 0);
    nd_json_free(v);
    /* \u escapes: BMP, embedded NUL, surrogate pair -> UTF-8 */
    v = parse_ok("\"\\u00e9\\u0000\\u20AC\\ud83d\\ude00\"");
    CHECK(v && v->len == 2 + 1 + 3 + 4);
    if (v) CHECK(memcmp(v->str, "\xC3\xA9\0\xE2\x82\xAC\xF0\x9F\x98\x80", 10) == 0);
    nd_json_free(v);
    /* raw UTF-8 kept as is: 2, 3 and 4 byte forms, and the edges of validity */
    v = parse_ok("\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xEF\xBF\xBF\xF4\x8F\xBF\xBF\xED\x9F\xBF\xEE\x80\x80\"");
    CHECK(v && v->len == 2 + 3 + 4 + 3 + 4 + 3 + 3);
    nd_json_free(v);
    v = parse_ok("\"\"");
    CHECK(v && v->len == 0 && v->str && v->str[0] == '\0');
    nd_json_free(v);
}

static void test_containers(void)
{
    nd_json *v = parse_ok("{\"a\":[1,2,{\"b\":null}],\"c\":{},\"d\":[], \"e\" : \"x\"}");
    CHECK(v && v->type == ND_JSON_OBJECT && v->count == 4);
    if (!v) return;
    const nd_json *a = nd_json_get(v, "a");
    CHECK(a && a->type == ND_JSON_ARRAY && a->count == 3);
    if (a) {
        CHECK(a->items[1].num == 2.0);
        CHECK(nd_json_get(&a->items[2], "b") && nd_json_get(&a->items[2], "b")->type == ND_JSON_NULL);
    }
    CHECK(nd_json_get(v, "c") && nd_json_get(v, "c")->count == 0);
    CHECK(nd_json_get(v, "zz") == NULL);
    CHECK(nd_json_get(a, "a") == NULL); /* not an object */
    CHECK(strcmp(v->keys[3], "e") == 0); /* order kept */
    /* offsets point at the value */
    const nd_json *e = nd_json_get(v, "e");
    CHECK(e && e->offset == 43);
    nd_json_free(v);
}

static void test_depth_limit(void)
{
    char deep[2 * ND_JSON_MAX_DEPTH + 10];
    size_t n = 0;
    for (int i = 0; i < ND_JSON_MAX_DEPTH; i++) deep[n++] = '[';
    for (int i = 0; i < ND_JSON_MAX_DEPTH; i++) deep[n++] = ']';
    deep[n] = '\0';
    nd_json *v = parse_ok(deep);
    nd_json_free(v);
    /* one more level is refused with ELIMIT, not a crash */
    char deeper[2 * ND_JSON_MAX_DEPTH + 10];
    n = 0;
    for (int i = 0; i <= ND_JSON_MAX_DEPTH; i++) deeper[n++] = '[';
    for (int i = 0; i <= ND_JSON_MAX_DEPTH; i++) deeper[n++] = ']';
    needle_error err;
    v = NULL;
    CHECK(nd_json_parse(deeper, n, NULL, &v, &err) == NEEDLE_ELIMIT && v == NULL);
    /* a very deep input (far past any stack worry) also fails cleanly */
    size_t big = 1000000;
    char *s = malloc(big);
    if (s) {
        memset(s, '[', big);
        CHECK(nd_json_parse(s, big, NULL, &v, &err) == NEEDLE_ELIMIT);
        memset(s, '{', big);
        CHECK(nd_json_parse(s, big, NULL, &v, &err) == NEEDLE_EJSON);
        free(s);
    }
}

static void test_size_limit(void)
{
    needle_error err;
    nd_json *v = NULL;
    /* the length check comes before any read, so a short buffer is enough */
    CHECK(nd_json_parse("0", (size_t)ND_JSON_MAX_BYTES + 1, NULL, &v, &err) == NEEDLE_ELIMIT);
}

static const struct {
    const char *text;
    size_t len; /* 0: strlen */
    int code;
} invalid[] = {
    {"", 0, NEEDLE_EJSON},
    {"   ", 0, NEEDLE_EJSON},
    {"[1,]", 0, NEEDLE_EJSON},
    {"{\"a\":1,}", 0, NEEDLE_EJSON},
    {"[,1]", 0, NEEDLE_EJSON},
    {"[1 2]", 0, NEEDLE_EJSON},
    {"{\"a\" 1}", 0, NEEDLE_EJSON},
    {"{a:1}", 0, NEEDLE_EJSON},
    {"{'a':1}", 0, NEEDLE_EJSON},
    {"{\"a\":1,\"a\":2}", 0, NEEDLE_EJSON},
    {"{\"a\":1,\"b\":{\"c\":1,\"c\":1}}", 0, NEEDLE_EJSON},
    {"01", 0, NEEDLE_EJSON},
    {"-01", 0, NEEDLE_EJSON},
    {"00", 0, NEEDLE_EJSON},
    {"1.", 0, NEEDLE_EJSON},
    {".5", 0, NEEDLE_EJSON},
    {"1e", 0, NEEDLE_EJSON},
    {"1e+", 0, NEEDLE_EJSON},
    {"+1", 0, NEEDLE_EJSON},
    {"-", 0, NEEDLE_EJSON},
    {"0x10", 0, NEEDLE_EJSON},
    {"NaN", 0, NEEDLE_EJSON},
    {"Infinity", 0, NEEDLE_EJSON},
    {"-Infinity", 0, NEEDLE_EJSON},
    {"tru", 0, NEEDLE_EJSON},
    {"nul", 0, NEEDLE_EJSON},
    {"True", 0, NEEDLE_EJSON},
    {"truex", 0, NEEDLE_EJSON},
    {"1 2", 0, NEEDLE_EJSON},
    {"[1]]", 0, NEEDLE_EJSON},
    {"[1", 0, NEEDLE_EJSON},
    {"{\"a\":1", 0, NEEDLE_EJSON},
    {"{\"a\":", 0, NEEDLE_EJSON},
    {"{\"a\"", 0, NEEDLE_EJSON},
    {"\"abc", 0, NEEDLE_EJSON},
    {"\"abc\\\"", 0, NEEDLE_EJSON},
    {"\"a\tb\"", 0, NEEDLE_EJSON},
    {"\"a\nb\"", 0, NEEDLE_EJSON},
    {"\"\x1f\"", 0, NEEDLE_EJSON},
    {"\"a\0b\"", 5, NEEDLE_EJSON},
    {"[1]\0", 4, NEEDLE_EJSON},
    {"\"\\x41\"", 0, NEEDLE_EJSON},
    {"\"\\u12\"", 0, NEEDLE_EJSON},
    {"\"\\u12G4\"", 0, NEEDLE_EJSON},
    {"\"\\U0041\"", 0, NEEDLE_EJSON},
    {"\"\\'\"", 0, NEEDLE_EJSON},
    {"// c\n1", 0, NEEDLE_EJSON},
    {"/* c */1", 0, NEEDLE_EJSON},
    {"[1,/*c*/2]", 0, NEEDLE_EJSON},
    {"\xEF\xBB\xBF{}", 0, NEEDLE_EJSON}, /* a BOM is not JSON text */
    {"\v1", 0, NEEDLE_EJSON},
    {"\xC2\xA0" "1", 0, NEEDLE_EJSON}, /* NBSP is not JSON whitespace */
    /* surrogate escapes */
    {"\"\\ud800\"", 0, NEEDLE_EUTF8},
    {"\"\\udc00\"", 0, NEEDLE_EUTF8},
    {"\"\\ud800\\u0041\"", 0, NEEDLE_EUTF8},
    {"\"\\ud800\\ud800\"", 0, NEEDLE_EUTF8},
    {"\"\\ud800x\"", 0, NEEDLE_EUTF8},
    {"\"\\ude00\\ud83d\"", 0, NEEDLE_EUTF8},
    /* UTF-8: overlongs, surrogates, > U+10FFFF, truncation, stray bytes */
    {"\"\xC0\xAF\"", 0, NEEDLE_EUTF8},
    {"\"\xC1\xBF\"", 0, NEEDLE_EUTF8},
    {"\"\xE0\x80\xAF\"", 0, NEEDLE_EUTF8},
    {"\"\xE0\x9F\xBF\"", 0, NEEDLE_EUTF8},
    {"\"\xF0\x80\x80\xAF\"", 0, NEEDLE_EUTF8},
    {"\"\xF0\x8F\xBF\xBF\"", 0, NEEDLE_EUTF8},
    {"\"\xED\xA0\x80\"", 0, NEEDLE_EUTF8},
    {"\"\xED\xBF\xBF\"", 0, NEEDLE_EUTF8},
    {"\"\xF4\x90\x80\x80\"", 0, NEEDLE_EUTF8},
    {"\"\xF5\x80\x80\x80\"", 0, NEEDLE_EUTF8},
    {"\"\xFF\"", 0, NEEDLE_EUTF8},
    {"\"\x80\"", 0, NEEDLE_EUTF8},
    {"\"\xC3\"", 0, NEEDLE_EUTF8},
    {"\"\xE2\x82\"", 0, NEEDLE_EUTF8},
    {"\"\xF0\x9F\x98\"", 0, NEEDLE_EUTF8},
    {"\"\xC3\x41\"", 0, NEEDLE_EUTF8},
};

static void test_invalid(void)
{
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        size_t len = invalid[i].len ? invalid[i].len : strlen(invalid[i].text);
        nd_json *v = (nd_json *)1;
        needle_error err = {0, ""};
        int rc = nd_json_parse(invalid[i].text, len, NULL, &v, &err);
        CHECKF(rc == invalid[i].code, "case %zu: rc=%d want %d (%s)", i, rc, invalid[i].code, err.message);
        CHECKF(v == NULL, "case %zu: out not cleared", i);
        CHECKF(err.code == rc && strstr(err.message, " at line ") && strstr(err.message, "(byte "),
               "case %zu: message <%s>", i, err.message);
    }
}

static void test_error_position(void)
{
    needle_error err;
    nd_json *v;
    const char *t = "{\n  \"a\": 1,\n  \"b\": [1, 2,]\n}";
    CHECK(nd_json_parse(t, strlen(t), "tools.json", &v, &err) == NEEDLE_EJSON);
    CHECKF(strncmp(err.message, "tools.json: ", 12) == 0, "%s", err.message);
    /* the ']' after the trailing comma: line 3, column 14, byte 25 */
    CHECKF(strstr(err.message, "at line 3 column 14 (byte 25)") != NULL, "%s", err.message);
    const char *d = "{\"k\":1,\n\"k\":2}";
    CHECK(nd_json_parse(d, strlen(d), NULL, &v, &err) == NEEDLE_EJSON);
    CHECKF(strstr(err.message, "duplicate") && strstr(err.message, "\"k\"") && strstr(err.message, "line 2 column 5"),
           "%s", err.message);
    /* columns count characters, not bytes */
    const char *u = "[\"\xC3\xA9\xC3\xA9\",x]";
    CHECK(nd_json_parse(u, strlen(u), NULL, &v, &err) == NEEDLE_EJSON);
    CHECKF(strstr(err.message, "line 1 column 7 (byte 8)") != NULL, "%s", err.message);
}

static void test_duplicate_keys_many(void)
{
    /* more than the pairwise threshold: exercises the hashed path */
    nd_buf b;
    nd_buf_init(&b);
    nd_buf_putc(&b, '{');
    for (int i = 0; i < 500; i++) nd_buf_printf(&b, "%s\"k%d\":%d", i ? "," : "", i, i);
    nd_buf_putc(&b, '}');
    nd_json *v = NULL;
    needle_error err;
    CHECK(nd_json_parse(b.data, b.len, NULL, &v, &err) == 0 && v && v->count == 500);
    if (v) CHECK(nd_json_get(v, "k499") && nd_json_get(v, "k499")->num == 499.0);
    nd_json_free(v);
    b.len--; /* drop '}' */
    nd_buf_puts(&b, ",\"k123\":0}");
    CHECK(nd_json_parse(b.data, b.len, NULL, &v, &err) == NEEDLE_EJSON);
    CHECKF(strstr(err.message, "\"k123\"") != NULL, "%s", err.message);
    /* keys differing only after an embedded NUL are distinct */
    const char *t = "{\"a\\u0000b\":1,\"a\\u0000c\":2,\"a\":3}";
    CHECK(nd_json_parse(t, strlen(t), NULL, &v, &err) == 0);
    nd_json_free(v);
    nd_buf_free(&b);
}

static void test_writer_python_rules(void)
{
    /* compact separators, key order kept, numbers as written */
    round_trip(" { \"b\" : [ 1 , 2.50 , -0 , 1E5 ] , \"a\" : { } , \"c\" : [ ] , \"t\":true,\"n\":null } ",
               "{\"b\":[1,2.50,-0,1E5],\"a\":{},\"c\":[],\"t\":true,\"n\":null}", 1);
    /* the named escapes; '/' is not escaped by Python */
    round_trip("\"q\\\" b\\\\ s\\/ n\\n r\\r t\\t b\\b f\\f\"", "\"q\\\" b\\\\ s/ n\\n r\\r t\\t b\\b f\\f\"", 1);
    /* other control characters and DEL: \u00xx lowercase */
    round_trip("\"\\u0000\\u0001\\u001F\\u007f\\u001b\"", "\"\\u0000\\u0001\\u001f\\u007f\\u001b\"", 1);
    /* non-ASCII: \uxxxx lowercase; astral as a surrogate pair */
    round_trip("\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xE4\xB8\xAD\"",
               "\"caf\\u00e9 \\u20ac \\ud83d\\ude00 \\u4e2d\"", 1);
    round_trip("\"\\uFFFF\\u0080\\u07ff\\u0800\"", "\"\\uffff\\u0080\\u07ff\\u0800\"", 1);
    round_trip("\"\xF4\x8F\xBF\xBF\"", "\"\\udbff\\udfff\"", 1);
    round_trip("{\"\xC3\xA9\":\"\\u00E9\"}", "{\"\\u00e9\":\"\\u00e9\"}", 1);
    /* ensure_ascii=False: non-ASCII and DEL raw, controls still escaped */
    round_trip("\"\\u00e9\\u007f\\u0001\\ud83d\\ude00\"", "\"\xC3\xA9\x7f\\u0001\xF0\x9F\x98\x80\"", 0);
}

static void test_writer_raw_bytes(void)
{
    /* bytes that are not UTF-8 become U+FFFD so the output stays valid JSON */
    nd_buf b;
    nd_buf_init(&b);
    nd_json_write_string(&b, "a\xFF" "b\xC3", 4, 1);
    CHECKF(strcmp(b.data, "\"a\\ufffdb\\ufffd\"") == 0, "%s", b.data);
    nd_buf_reset(&b);
    nd_json_write_string(&b, "a\0b", 3, 1);
    CHECKF(b.len == 10 && memcmp(b.data, "\"a\\u0000b\"", 10) == 0, "%s", b.data);
    nd_buf_free(&b);
}

static void test_writer_built_numbers(void)
{
    /* a number node made in code (no literal) writes its shortest round-trip form */
    nd_json n;
    memset(&n, 0, sizeof n);
    n.type = ND_JSON_NUMBER;
    nd_buf b;
    nd_buf_init(&b);
    n.num = 0.1;
    nd_json_write(&b, &n, 1);
    CHECKF(strcmp(b.data, "0.1") == 0, "%s", b.data);
    nd_buf_reset(&b);
    n.num = 42;
    nd_json_write(&b, &n, 1);
    CHECKF(strcmp(b.data, "42") == 0, "%s", b.data);
    nd_buf_reset(&b);
    n.num = 1.0 / 3.0;
    nd_json_write(&b, &n, 1);
    CHECKF(strtod(b.data, NULL) == 1.0 / 3.0, "%s", b.data);
    nd_buf_free(&b);
}

static void test_equal(void)
{
    nd_json *a = parse_ok("{\"x\":[1,{\"y\":\"z\"}],\"w\":1.0}");
    nd_json *b = parse_ok("{\"w\":1e0,\"x\":[1.00,{\"y\":\"z\"}]}");
    nd_json *c = parse_ok("{\"w\":1,\"x\":[{\"y\":\"z\"},1]}");
    nd_json *d = parse_ok("{\"w\":1,\"x\":[1,{\"y\":\"z\"}],\"v\":null}");
    nd_json *e = parse_ok("{\"w\":1,\"x\":[1,{\"y\":\"z\\u0000\"}]}");
    CHECK(nd_json_equal(a, b));
    CHECK(nd_json_equal(b, a));
    CHECK(!nd_json_equal(a, c)); /* array order matters */
    CHECK(!nd_json_equal(a, d));
    CHECK(!nd_json_equal(d, a));
    CHECK(!nd_json_equal(a, e));
    CHECK(nd_json_equal(a, a));
    nd_json_free(a);
    nd_json_free(b);
    nd_json_free(c);
    nd_json_free(d);
    nd_json_free(e);
}

/* nd_json_object_put: a member's value replaced (any type to any type), or a member appended */
static void test_object_put(void)
{
    nd_json *obj = parse_ok("{\"a\":1,\"b\":[\"x\",{\"y\":2}]}");
    if (!obj) return;
    nd_json *list = parse_ok("[\"Monday\",\"Friday\"]"), *flag = parse_ok("true");
    CHECK(list && nd_json_object_put(obj, "b", list) == 0); /* replaces the nested array (its contents freed) */
    CHECK(flag && nd_json_object_put(obj, "speaker", flag) == 0);
    nd_buf b;
    nd_buf_init(&b);
    nd_json_write(&b, obj, 0);
    CHECKF(b.data && strcmp(b.data, "{\"a\":1,\"b\":[\"Monday\",\"Friday\"],\"speaker\":true}") == 0, "%s",
           b.data ? b.data : "(null)");
    CHECK(nd_json_get(obj, "speaker") && nd_json_get(obj, "speaker")->type == ND_JSON_TRUE);
    /* nd_json_array_remove: the element's contents freed, the rest moved down; out of range ignored */
    nd_json *arr = (nd_json *)nd_json_get(obj, "b");
    nd_json_array_remove(arr, 0);
    nd_json_array_remove(arr, 5);
    CHECK(arr->count == 1 && arr->items[0].type == ND_JSON_STRING && !strcmp(arr->items[0].str, "Friday"));
    /* nd_json_object_remove: the member's key and value freed, the rest moved down */
    nd_json_object_remove(obj, 0);
    nd_json_object_remove(obj, 9);
    CHECK(obj->count == 2 && !strcmp(obj->keys[0], "b") && !strcmp(obj->keys[1], "speaker") && obj->key_lens[1] == 7 &&
          nd_json_get(obj, "a") == NULL);
    nd_buf_free(&b);
    nd_json_free(obj);
}

int main(void)
{
    RUN(test_scalars);
    RUN(test_strings);
    RUN(test_containers);
    RUN(test_depth_limit);
    RUN(test_size_limit);
    RUN(test_invalid);
    RUN(test_error_position);
    RUN(test_duplicate_keys_many);
    RUN(test_writer_python_rules);
    RUN(test_writer_raw_bytes);
    RUN(test_writer_built_numbers);
    RUN(test_equal);
    RUN(test_object_put);
    return check_summary();
}
