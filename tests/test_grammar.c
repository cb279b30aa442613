/* test_grammar.c - the byte automaton and the token mask, on hand-written cases.
 *
 * Expected accept/reject verdicts come from the JSON Schema rules themselves
 * (e.g. maxLength 3 rejects a 4-character string), not from running the code. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/grammar.h"
#include "grammar/regex.h"
#include "grammar/schema.h"
#include "grammar/token_mask.h"
#include "check.h"
#include "grammar_check.h"
#include "synthetic_vocab.h"
#include "core/json.h"
#include "io/spm_model.h"

static nd_grammar *value_grammar(const char *json)
{
    nd_json *doc = NULL;
    needle_error err = {0};
    if (nd_json_parse(json, strlen(json), "test", &doc, &err) < 0) return NULL;
    nd_grammar *g = NULL;
    if (nd_schema_compile_value(doc, "schema", &g, &err) < 0) fprintf(stderr, "  compile: %s\n", err.message);
    nd_json_free(doc);
    return g;
}

/* 1 when the text is a viable prefix (accepted so far, complete or not). */
static int prefix_ok(const nd_grammar *g, const char *text)
{
    nd_grammar_state s;
    nd_grammar_start(g, &s);
    return nd_grammar_advance(g, &s, text, strlen(text)) == 0;
}

static const char *WEATHER =
    "[{\"name\":\"get_weather\",\"description\":\"d\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"city\":{\"type\":\"string\",\"maxLength\":5},\"unit\":{\"enum\":[\"c\",\"f\"]},"
    "\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":14}},\"required\":[\"city\"]}},"
    "{\"name\":\"ping\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}]";

static void test_call_structure(void)
{
    nd_grammar *g = tools_grammar(WEATHER);
    CHECK(g != NULL);
    if (!g) return;
    CHECK(accepts(g, "[]"));
    CHECK(accepts(g, "[{\"name\":\"ping\",\"arguments\":{}}]"));
    CHECK(accepts(g, "[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}]"));
    CHECK(accepts(g, "[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\",\"unit\":\"c\",\"days\":14}},"
                     "{\"name\":\"ping\",\"arguments\":{}}]"));
    CHECK(!accepts(g, "[{\"name\":\"get_weather\",\"arguments\":{}}]"));             /* city required */
    CHECK(!accepts(g, "[{\"name\":\"nope\",\"arguments\":{}}]"));                    /* undeclared tool */
    CHECK(!accepts(g, "[{\"name\":\"ping\",\"arguments\":{\"x\":1}}]"));             /* closed object */
    CHECK(!accepts(g, "[ ]"));                                                       /* compact only */
    CHECK(!accepts(g, "[{\"name\":\"get_weather\",\"arguments\":{\"days\":3,\"city\":\"a\"}}]")); /* order */
    CHECK(!accepts(g, "[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Berlin\"}}]"));  /* maxLength 5 */
    CHECK(!accepts(g, "[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"a\",\"days\":15}}]"));
    CHECK(!accepts(g, "[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"a\",\"days\":0}}]"));
    CHECK(!accepts(g, "[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"a\",\"unit\":\"k\"}}]"));
    /* viability: "1" may still become 10..14, "2" can only be 2 (20+ is out of range) */
    CHECK(prefix_ok(g, "[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"a\",\"days\":1"));
    CHECK(!prefix_ok(g, "[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"a\",\"days\":20"));
    CHECK(!prefix_ok(g, "[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"a\",\"days\":-"));
    /* the sixth character of city is refused at once, not at the closing quote */
    CHECK(prefix_ok(g, "[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"abcde"));
    CHECK(!prefix_ok(g, "[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"abcdef"));
    /* after the final ] nothing may follow */
    nd_grammar_state s;
    nd_grammar_start(g, &s);
    CHECK(nd_grammar_advance(g, &s, "[]", 2) == 0);
    CHECK(nd_grammar_finished(g, &s));
    CHECK(nd_grammar_advance(g, &s, ",", 1) < 0);
    nd_grammar_free(g);
}

static void test_allowed_bytes(void)
{
    nd_grammar *g = tools_grammar(WEATHER);
    if (!g) { CHECK(0); return; }
    nd_grammar_state s;
    nd_grammar_start(g, &s);
    uint32_t bits[8];
    nd_grammar_allowed_bytes(g, &s, bits);
    int n = 0;
    for (int b = 0; b < 256; b++) n += bits[b / 32] >> (b % 32) & 1;
    CHECK(n == 1 && (bits['[' / 32] >> ('[' % 32) & 1));
    CHECK(nd_grammar_advance(g, &s, "[", 1) == 0);
    nd_grammar_allowed_bytes(g, &s, bits);
    CHECK(bits['{' / 32] >> ('{' % 32) & 1);
    CHECK(bits[']' / 32] >> (']' % 32) & 1);
    CHECK(!(bits[' ' / 32] >> (' ' % 32) & 1));
    CHECK(!nd_grammar_complete(g, &s));
    nd_grammar_free(g);
}

static void test_strings_and_escapes(void)
{
    nd_grammar *g = value_grammar("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}");
    if (!g) { CHECK(0); return; }
    CHECK(accepts(g, "\"ab\""));
    CHECK(accepts(g, "\"\\u00e9t\\u00e9\""));       /* 3 code points, escaped */
    CHECK(accepts(g, "\"\xc3\xa9t\xc3\xa9\""));     /* the same as raw UTF-8 */
    CHECK(accepts(g, "\"\\ud83d\\ude00x\""));        /* a surrogate pair is one code point */
    CHECK(!accepts(g, "\"a\""));
    CHECK(!accepts(g, "\"abcd\""));
    CHECK(!prefix_ok(g, "\"\xc3\x28"));             /* bad continuation byte */
    CHECK(!prefix_ok(g, "\"\xe0\x80"));             /* overlong */
    CHECK(!prefix_ok(g, "\"\xed\xa0"));             /* UTF-8 surrogate */
    CHECK(!prefix_ok(g, "\"\\udc00"));              /* lone low surrogate */
    CHECK(!prefix_ok(g, "\"a\n"));                  /* raw control character */
    CHECK(!prefix_ok(g, "\"\\x"));                  /* not a JSON escape */
    /* only the escapes json.dumps writes (grammar.c): \u for controls and from DEL up */
    CHECK(accepts(g, "\"a\\\"b\""));                   /* \" */
    CHECK(accepts(g, "\"a\\\\b\""));                  /* \\ */
    CHECK(accepts(g, "\"a\\nb\""));
    CHECK(accepts(g, "\"a\\u0001\""));
    CHECK(accepts(g, "\"a\\u007f\""));
    CHECK(!prefix_ok(g, "\"a\\u0041"));             /* "A" has a shorter spelling */
    CHECK(!prefix_ok(g, "\"a\\u0020"));
    CHECK(!prefix_ok(g, "\"a\\u000a"));             /* a newline is \n */
    CHECK(!prefix_ok(g, "\"a\\u005c"));             /* a backslash is \\ */
    CHECK(!prefix_ok(g, "\"a\\u004"));              /* no allowed \u004X */
    CHECK(prefix_ok(g, "\"a\\u007"));               /* \u007f */
    CHECK(!prefix_ok(g, "\"a\\/"));                 /* "/" is written as itself */
    nd_grammar_free(g);

    g = value_grammar("{\"type\":\"string\",\"pattern\":\"^[a-c]+$\"}");
    if (!g) { CHECK(0); return; }
    CHECK(accepts(g, "\"abc\""));
    CHECK(!prefix_ok(g, "\"\\u0061"));  /* "a" is written as itself */
    CHECK(!prefix_ok(g, "\"\\"));       /* no escape spells a character of [a-c] */
    CHECK(!accepts(g, "\"\""));
    CHECK(!prefix_ok(g, "\"d"));
    nd_grammar_free(g);

    g = value_grammar("{\"type\":\"string\",\"pattern\":\"^[\\\\u00e0-\\\\u00ff]+$\"}");
    if (!g) { CHECK(0); return; }
    CHECK(accepts(g, "\"\\u00e9\""));
    CHECK(!prefix_ok(g, "\"\\u1"));   /* no code point U+1xxx is in [U+E0-U+FF] */
    CHECK(prefix_ok(g, "\"\\u00e"));
    nd_grammar_free(g);

    g = value_grammar("{\"enum\":[\"caf\xc3\xa9\",\"tea\"]}");
    if (!g) { CHECK(0); return; }
    CHECK(accepts(g, "\"caf\\u00e9\""));
    CHECK(accepts(g, "\"caf\xc3\xa9\""));
    CHECK(!accepts(g, "\"t\\u0065a\""));  /* "e" is written as itself */
    CHECK(!accepts(g, "\"cafe\""));
    nd_grammar_free(g);

    /* a quote inside an enum value is \" only: no \u may start there (a dead end once) */
    g = value_grammar("{\"enum\":[\"quo\\\"te\",\"x\"]}");
    if (!g) { CHECK(0); return; }
    CHECK(accepts(g, "\"quo\\\"te\""));
    CHECK(prefix_ok(g, "\"quo\\"));
    CHECK(!prefix_ok(g, "\"quo\\u"));
    nd_grammar_free(g);
}

static void test_date_format(void)
{
    /* days follow the month's length; February 29 only in leap years (schema.c) */
    nd_grammar *g = value_grammar("{\"type\":\"string\",\"format\":\"date\"}");
    CHECK(g != NULL);
    if (!g) return;
    CHECK(accepts(g, "\"2026-01-31\""));
    CHECK(accepts(g, "\"2026-04-30\""));
    CHECK(accepts(g, "\"2026-12-29\""));
    CHECK(accepts(g, "\"2026-02-28\""));
    CHECK(!accepts(g, "\"2026-04-31\""));
    CHECK(!accepts(g, "\"2026-02-30\""));
    CHECK(!accepts(g, "\"2026-13-01\""));
    CHECK(!accepts(g, "\"2026-00-10\""));
    CHECK(accepts(g, "\"2028-02-29\""));
    CHECK(accepts(g, "\"2000-02-29\""));
    CHECK(!accepts(g, "\"1900-02-29\""));
    CHECK(!accepts(g, "\"2027-02-29\""));
    CHECK(!accepts(g, "\"2028-02-30\""));
    /* February 29 against the Gregorian rule, every year 0000-9999 */
    int wrong = 0;
    for (int y = 0; y <= 9999; y++) {
        char text[32];
        snprintf(text, sizeof text, "\"%04d-02-29\"", y);
        int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        if (accepts(g, text) != leap) wrong++;
    }
    CHECK(wrong == 0);
    nd_grammar_free(g);

    g = value_grammar("{\"type\":\"string\",\"format\":\"date-time\"}");
    CHECK(g != NULL);
    if (!g) return;
    CHECK(accepts(g, "\"2024-02-29T07:30:00Z\""));
    CHECK(!accepts(g, "\"2023-02-29T07:30:00Z\""));
    nd_grammar_free(g);
}

/* uri (RFC 3986's outline), hostname (RFC 1123 labels), ipv4 (dotted quad, 0-255) */
static void test_net_formats(void)
{
    nd_grammar *g = value_grammar("{\"type\":\"string\",\"format\":\"uri\"}");
    CHECK(g != NULL);
    if (!g) return;
    CHECK(accepts(g, "\"https://example.com/a/b?q=1&r=%20x#top\""));
    CHECK(accepts(g, "\"mailto:ana@example.org\""));
    CHECK(accepts(g, "\"urn:isbn:0451450523\""));
    CHECK(!accepts(g, "\"example.com\""));        /* no scheme */
    CHECK(!accepts(g, "\"https://a b.com\""));    /* a space */
    CHECK(!accepts(g, "\"1http://x\""));          /* a scheme starts with a letter */
    CHECK(!accepts(g, "\"https:\""));             /* nothing after the scheme */
    nd_grammar_free(g);
    g = value_grammar("{\"type\":\"string\",\"format\":\"hostname\"}");
    CHECK(g != NULL);
    if (!g) return;
    CHECK(accepts(g, "\"api.example.org\""));
    CHECK(accepts(g, "\"localhost\""));
    CHECK(accepts(g, "\"a-1.b2\""));
    CHECK(!accepts(g, "\"-a.com\""));
    CHECK(!accepts(g, "\"a-.com\""));
    CHECK(!accepts(g, "\"a..com\""));
    CHECK(!accepts(g, "\"a_b.com\""));
    nd_grammar_free(g);
    g = value_grammar("{\"type\":\"string\",\"format\":\"ipv4\"}");
    CHECK(g != NULL);
    if (!g) return;
    CHECK(accepts(g, "\"192.168.0.1\""));
    CHECK(accepts(g, "\"255.255.255.255\""));
    CHECK(accepts(g, "\"0.0.0.0\""));
    CHECK(!accepts(g, "\"256.1.1.1\""));
    CHECK(!accepts(g, "\"01.2.3.4\""));
    CHECK(!accepts(g, "\"1.2.3\""));
    nd_grammar_free(g);
}

/* multipleOf 0.01 (money): at most two fraction digits, no exponent, bounds kept */
static void test_decimal_multiple(void)
{
    nd_grammar *g = value_grammar("{\"type\":\"number\",\"multipleOf\":0.01,\"minimum\":0,\"maximum\":500}");
    if (!g) { CHECK(0); return; }
    CHECK(accepts(g, "12.34"));
    CHECK(accepts(g, "0.5"));
    CHECK(accepts(g, "500"));
    CHECK(accepts(g, "19.99"));
    CHECK(accepts(g, "0.01"));
    CHECK(!accepts(g, "12.345"));
    CHECK(!prefix_ok(g, "12.345"));
    CHECK(prefix_ok(g, "12.3"));
    CHECK(!accepts(g, "500.01"));
    CHECK(!accepts(g, "-1"));
    CHECK(!accepts(g, "1e2"));
    nd_grammar_free(g);
    g = value_grammar("{\"type\":\"number\",\"multipleOf\":0.1,\"exclusiveMinimum\":0,\"maximum\":1}");
    if (!g) { CHECK(0); return; }
    CHECK(accepts(g, "0.1"));
    CHECK(accepts(g, "1"));
    CHECK(!accepts(g, "0"));
    CHECK(!accepts(g, "0.0"));
    CHECK(!accepts(g, "0.15"));
    CHECK(prefix_ok(g, "0."));
    nd_grammar_free(g);
    /* an integer schema with it: every integer is a multiple */
    g = value_grammar("{\"type\":\"integer\",\"multipleOf\":0.01,\"minimum\":1,\"maximum\":9}");
    if (!g) { CHECK(0); return; }
    CHECK(accepts(g, "7"));
    CHECK(!accepts(g, "7.5"));
    nd_grammar_free(g);
}

static void test_numbers(void)
{
    nd_grammar *g = value_grammar("{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120,\"multipleOf\":5}");
    if (!g) { CHECK(0); return; }
    CHECK(accepts(g, "0"));
    CHECK(accepts(g, "-5"));
    CHECK(accepts(g, "115"));
    CHECK(!accepts(g, "12"));
    CHECK(!accepts(g, "125"));
    CHECK(!accepts(g, "01"));
    CHECK(!prefix_ok(g, "-1"));   /* -1x is below -5 and -1 is not a multiple of 5 */
    CHECK(!prefix_ok(g, "2."));
    nd_grammar_free(g);

    g = value_grammar("{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":1.5}");
    if (!g) { CHECK(0); return; }
    CHECK(accepts(g, "1.5"));
    CHECK(accepts(g, "0.001"));
    CHECK(!accepts(g, "0"));
    CHECK(!accepts(g, "0.0"));
    CHECK(!accepts(g, "1.51"));
    CHECK(!prefix_ok(g, "2"));
    CHECK(!prefix_ok(g, "-"));
    nd_grammar_free(g);

    g = value_grammar("{\"type\":\"number\"}");
    if (!g) { CHECK(0); return; }
    CHECK(accepts(g, "-0.5e+10"));
    CHECK(accepts(g, "3"));
    CHECK(!accepts(g, "3."));
    CHECK(!accepts(g, "+3"));
    CHECK(!accepts(g, ".5"));
    nd_grammar_free(g);
}

static void test_composites(void)
{
    nd_grammar *g = value_grammar(
        "{\"anyOf\":[{\"type\":\"string\",\"maxLength\":2},{\"type\":\"string\",\"pattern\":\"^x+$\"},{\"type\":\"null\"}]}");
    if (!g) { CHECK(0); return; }
    CHECK(accepts(g, "\"ab\""));
    CHECK(accepts(g, "\"xxxxx\""));
    CHECK(accepts(g, "null"));
    CHECK(!accepts(g, "\"abc\""));
    nd_grammar_free(g);

    g = value_grammar("{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":1,\"maxItems\":2}");
    if (!g) { CHECK(0); return; }
    CHECK(accepts(g, "[true]"));
    CHECK(accepts(g, "[true,false]"));
    CHECK(!accepts(g, "[]"));
    CHECK(!prefix_ok(g, "[true,false,"));
    nd_grammar_free(g);

    /* recursion through $defs: bounded by the stack depth, never a dead end */
    g = value_grammar("{\"$defs\":{\"T\":{\"type\":\"object\",\"properties\":{\"kids\":{\"type\":\"array\","
                      "\"items\":{\"$ref\":\"#/$defs/T\"}}}}},\"$ref\":\"#/$defs/T\"}");
    CHECK(g != NULL); /* $defs is not a value keyword: $ref beside it is fine */
    if (g) CHECK(accepts(g, "{\"kids\":[{}]}"));
    nd_grammar_free(g);
    g = value_grammar("{\"$defs\":{\"T\":{\"type\":\"object\",\"properties\":{\"kids\":{\"type\":\"array\","
                      "\"items\":{\"$ref\":\"#/$defs/T\"}}}}},\"type\":\"object\",\"properties\":{\"t\":{\"$ref\":\"#/$defs/T\"}}}");
    if (!g) { CHECK(0); return; }
    CHECK(accepts(g, "{\"t\":{\"kids\":[{},{\"kids\":[]}]}}"));
    /* go as deep as allowed: every state reached must still have an allowed byte */
    nd_grammar_state s;
    nd_grammar_start(g, &s);
    int dead = 0;
    CHECK(nd_grammar_advance(g, &s, "{\"t\":", 5) == 0);
    for (int i = 0; i < 40 && !dead; i++) {
        if (nd_grammar_advance(g, &s, "{\"kids\":[", 9) < 0) break;
        uint32_t bits[8];
        nd_grammar_allowed_bytes(g, &s, bits);
        int any = 0;
        for (int w = 0; w < 8; w++) any |= bits[w] != 0;
        dead = !any;
    }
    CHECK(!dead);
    nd_grammar_free(g);

    g = value_grammar("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}");
    if (!g) { CHECK(0); return; }
    CHECK(accepts(g, "{\"a\":1,\"b\":2}"));
    CHECK(accepts(g, "{}"));
    CHECK(!accepts(g, "{\"a\":\"x\"}"));
    nd_grammar_free(g);
}

/* nd_regex_accepts: the text against the pattern as a JSON Schema reads it (anchors where
 * written, a search where not), and 0 for a pattern that does not compile */
static void test_regex_accepts(void)
{
    const char *clock = "^([01][0-9]|2[0-3]):[0-5][0-9]$";
    CHECK(nd_regex_accepts(clock, strlen(clock), "07:30"));
    CHECK(!nd_regex_accepts(clock, strlen(clock), "7:30"));
    CHECK(!nd_regex_accepts(clock, strlen(clock), "07:30 "));
    CHECK(!nd_regex_accepts(clock, strlen(clock), "24:00"));
    CHECK(nd_regex_accepts("[A-Z]{3}", 8, "ABC"));
    CHECK(nd_regex_accepts("[A-Z]{3}", 8, "xABCx"));
    CHECK(!nd_regex_accepts("[A-Z]{3}", 8, "AB"));
    CHECK(!nd_regex_accepts("([", 2, "x"));
}

static void test_token_mask_synthetic(void)
{
    nd_grammar *g = tools_grammar(WEATHER);
    if (!g) { CHECK(0); return; }
    /* vocabulary: all single bytes, then some multi-byte strings */
    static const char *multi[] = {"[{", "{\"name\":\"", "ping", "get_weather", "\",\"arguments\":{", "}}]", "[]",
                                  "\"city\":\"", " ", "abc", "\xc3\xa9", "1", "14", "15"};
    synthetic_vocab voc = synthetic_vocab_build(multi, (int)(sizeof multi / sizeof *multi));
    if (!voc.trie) { synthetic_vocab_free(&voc); nd_grammar_free(g); return; }
    int n = voc.n;
    const char **bytes = voc.bytes;
    const size_t *lens = voc.lens;
    nd_token_trie *trie = voc.trie;
    needle_error err = {0};
    uint32_t *mask = calloc(nd_token_mask_words(trie), sizeof *mask);
    nd_grammar_state s;
    nd_grammar_start(g, &s);
    /* brute force: a token is allowed iff advancing a copy by its bytes succeeds */
    const char *prefixes[] = {"", "[", "[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"",
                              "[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"ab\",\"days\":1", "[]"};
    for (size_t p = 0; p < sizeof prefixes / sizeof *prefixes; p++) {
        nd_grammar_start(g, &s);
        CHECK(nd_grammar_advance(g, &s, prefixes[p], strlen(prefixes[p])) == 0);
        int count = nd_token_mask(g, &s, trie, mask);
        int expect = 0, mismatches = 0;
        for (int id = 0; id < n; id++) {
            nd_grammar_state t = s;
            int ok = nd_grammar_advance(g, &t, bytes[id], lens[id]) == 0;
            expect += ok;
            if (ok != (int)(mask[id / 32] >> (id % 32) & 1)) mismatches++;
        }
        CHECKF(mismatches == 0 && count == expect, "prefix %zu: %d mismatches, %d vs %d", p, mismatches, count, expect);
    }
    nd_grammar_start(g, &s);
    CHECK(nd_grammar_advance(g, &s, prefixes[3], strlen(prefixes[3])) == 0);
    nd_token_mask(g, &s, trie, mask);
    /* spot checks from the rules: after "days":1, token "1" makes 11 (in range),
     * "14" would make 114 (above 14), and '}' ends the value 1 (days is the
     * last property, so ',' cannot follow) */
    CHECK(mask[(256 + 11) / 32] >> ((256 + 11) % 32) & 1);
    CHECK(!(mask[(256 + 12) / 32] >> ((256 + 12) % 32) & 1));
    CHECK(mask['}' / 32] >> ('}' % 32) & 1);
    CHECK(!(mask[',' / 32] >> (',' % 32) & 1));
    CHECK(!(mask['5' / 32] >> ('5' % 32) & 1));
    /* the cache returns the same mask */
    nd_mask_cache *cache = NULL;
    CHECK(nd_mask_cache_new(g, trie, 16, &cache, &err) == 0);
    const uint32_t *m1 = nd_mask_cache_get(cache, &s);
    CHECK(m1 && memcmp(m1, mask, nd_token_mask_words(trie) * 4) == 0);
    const uint32_t *m2 = nd_mask_cache_get(cache, &s);
    uint64_t hits, misses;
    nd_mask_cache_stats(cache, &hits, &misses);
    CHECK(m2 == m1 && hits == 1 && misses == 1);
    nd_mask_cache_free(cache);
    free(mask);
    synthetic_vocab_free(&voc);
    nd_grammar_free(g);
}

/* The real 8192-piece vocabulary: masks agree with brute force, and the cost. */
static void test_token_mask_real_vocab(void)
{
    nd_vocab v;
    needle_error err = {0};
    if (nd_vocab_load_spm_file("tests/golden/tok8k.model", &v, &err) < 0) {
        CHECKF(0, "%s", err.message);
        return;
    }
    int *ids = malloc((size_t)v.n_pieces * sizeof *ids);
    char **bytes = malloc((size_t)v.n_pieces * sizeof *bytes);
    size_t *lens = malloc((size_t)v.n_pieces * sizeof *lens);
    int n = 0;
    for (int i = 0; i < v.n_pieces; i++) {
        if (v.types[i] != ND_PIECE_NORMAL && v.types[i] != ND_PIECE_BYTE) continue;
        char *b = malloc((size_t)v.piece_lens[i] + 1);
        size_t len = 0;
        if (v.types[i] == ND_PIECE_BYTE) {
            b[len++] = (char)strtol(v.pieces[i] + 3, NULL, 16); /* "<0xHH>" */
        } else {
            for (int k = 0; k < v.piece_lens[i];) {
                if (k + 2 < v.piece_lens[i] && (unsigned char)v.pieces[i][k] == 0xE2 &&
                    (unsigned char)v.pieces[i][k + 1] == 0x96 && (unsigned char)v.pieces[i][k + 2] == 0x81) {
                    b[len++] = ' ';
                    k += 3;
                } else {
                    b[len++] = v.pieces[i][k++];
                }
            }
        }
        ids[n] = i;
        bytes[n] = b;
        lens[n] = len;
        n++;
    }
    nd_token_trie *trie = NULL;
    CHECK(nd_token_trie_build(ids, (const char *const *)bytes, lens, (size_t)n, v.n_pieces, &trie, &err) == 0);
    nd_grammar *g = tools_grammar(WEATHER);
    if (!trie || !g) { CHECK(0); goto out; }
    uint32_t *mask = calloc(nd_token_mask_words(trie), sizeof *mask);
    const char *text = "[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\",\"unit\":\"c\",\"days\":12}}]";
    nd_grammar_state s;
    nd_grammar_start(g, &s);
    double total = 0;
    int steps = 0, mismatches = 0;
    for (size_t i = 0; i <= strlen(text); i++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        nd_token_mask(g, &s, trie, mask);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        total += (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
        steps++;
        if (i % 7 == 0) /* brute force on some steps */
            for (int k = 0; k < n; k++) {
                nd_grammar_state t;
                nd_grammar_state_copy(&t, &s);
                int ok = nd_grammar_advance(g, &t, bytes[k], lens[k]) == 0;
                if (ok != (int)(mask[ids[k] / 32] >> (ids[k] % 32) & 1)) mismatches++;
            }
        if (i < strlen(text)) CHECK(nd_grammar_advance(g, &s, text + i, 1) == 0);
    }
    CHECKF(mismatches == 0, "%d mismatches", mismatches);
    printf("        real vocab: %zu trie nodes, %.1f us per mask (uncached, %d steps)\n", nd_token_trie_node_count(trie),
           total / steps, steps);
    free(mask);
out:
    nd_grammar_free(g);
    nd_token_trie_free(trie);
    for (int i = 0; i < n; i++) free(bytes[i]);
    free(ids);
    free(bytes);
    free(lens);
    nd_vocab_free(&v);
}

int main(void)
{
    RUN(test_call_structure);
    RUN(test_allowed_bytes);
    RUN(test_strings_and_escapes);
    RUN(test_date_format);
    RUN(test_net_formats);
    RUN(test_decimal_multiple);
    RUN(test_numbers);
    RUN(test_composites);
    RUN(test_regex_accepts);
    RUN(test_token_mask_synthetic);
    RUN(test_token_mask_real_vocab);
    return check_summary();
}
