/* test_copy_values.c - grounded decoding: free string values are copies of the copy source.
 *
 * The expected verdicts follow the rule stated in grammar/copy_source.h (a
 * non-empty piece of the source, case as written, from a word start - or
 * + # @ $ ( before one - to a word end), checked here by an independent brute
 * force over every piece of the source, not by running the code under test. */
#include <stdlib.h>
#include <string.h>

#include "grammar/copy_source.h"
#include "grammar/grammar.h"
#include "grammar/schema.h"
#include "grammar/token_mask.h"
#include "check.h"
#include "grammar_check.h"
#include "synthetic_vocab.h"
#include "core/json.h"

static const char *LIGHTS =
    "[{\"name\":\"set_lights\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"room\":{\"type\":\"string\"},\"on\":{\"type\":\"boolean\"},"
    "\"color\":{\"type\":\"string\",\"enum\":[\"warm white\",\"red\"]},"
    "\"code\":{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}$\"},"
    "\"short\":{\"type\":\"string\",\"maxLength\":3},"
    "\"extra\":{\"type\":\"object\"}},"
    "\"required\":[\"room\",\"on\"]}}]";

/* The call list with room set to the JSON string body `room`. */
static int room_ok(const nd_grammar *g, const char *room)
{
    char buf[512];
    snprintf(buf, sizeof buf, "[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"%s\",\"on\":true}}]", room);
    return accepts(g, buf);
}

static int set_source(nd_grammar *g, const char *text)
{
    return nd_grammar_set_copy_source(g, text, text ? strlen(text) : 0);
}

/* The rule, written out again for the brute force. */
static int word_ch(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}
static int rule_allows(const char *src, size_t i, size_t j)
{
    size_t n = strlen(src);
    if (j <= i) return 0;
    for (size_t k = i; k < j; k++)
        if (src[k] == '"' || src[k] == '\\' || (unsigned char)src[k] < 0x20) return 0;
    unsigned char first = (unsigned char)src[i], last = (unsigned char)src[j - 1];
    int start = (word_ch(first) || strchr("+#@$(", first)) && (i == 0 || !word_ch((unsigned char)src[i - 1]));
    int end = (word_ch(last) || strchr(".!?)'", last)) && (j == n || !word_ch((unsigned char)src[j]));
    return start && end;
}

/* 1 when some occurrence of v[0..len) in src satisfies the rule. */
static int rule_accepts(const char *src, const char *v, size_t len)
{
    size_t n = strlen(src);
    for (size_t i = 0; i + len <= n; i++)
        if (len && memcmp(src + i, v, len) == 0 && rule_allows(src, i, i + len)) return 1;
    return 0;
}

static void test_free_string_is_a_copy(void)
{
    nd_grammar *g = tools_grammar(LIGHTS);
    if (!g) { CHECK(0); return; }
    const char *src = "Switch on the lamp in Tobi's bedroom, please. Call +44 20 7946!";
    CHECK(set_source(g, src) == 0);
    CHECK(nd_grammar_copy_active(g));
    CHECK(room_ok(g, "Tobi's bedroom"));
    CHECK(room_ok(g, "lamp"));
    CHECK(room_ok(g, "Tobi"));              /* the ' ends a word */
    CHECK(room_ok(g, "please."));
    CHECK(room_ok(g, "+44 20 7946!"));
    CHECK(!room_ok(g, ""));                 /* never empty */
    CHECK(!room_ok(g, "tobi's bedroom"));   /* case as written */
    CHECK(!room_ok(g, "kitchen"));          /* not said */
    CHECK(!room_ok(g, "bed"));              /* not a word end */
    CHECK(!room_ok(g, "obi's bedroom"));    /* not a word start */
    CHECK(!room_ok(g, " lamp"));
    CHECK(!room_ok(g, "bedroom,"));         /* a comma does not end a value */
    CHECK(!room_ok(g, "lamp  in"));
    /* every piece of the source: accepted exactly when the rule allows it */
    size_t n = strlen(src);
    int mismatches = 0, allowed = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j <= n; j++) {
            char v[128];
            memcpy(v, src + i, j - i);
            v[j - i] = 0;
            int want = rule_accepts(src, v, j - i), got = room_ok(g, v);
            allowed += want;
            if (want != got) {
                if (mismatches < 5) fprintf(stderr, "  piece \"%s\": want %d got %d\n", v, want, got);
                mismatches++;
            }
        }
    CHECKF(mismatches == 0 && allowed > 20, "%d mismatches, %d allowed", mismatches, allowed);
    /* the closing quote is refused on an empty value, and only word-end pieces may close */
    nd_grammar_state s;
    nd_grammar_start(g, &s);
    const char *pre = "[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"";
    CHECK(nd_grammar_advance(g, &s, pre, strlen(pre)) == 0);
    uint32_t bits[8];
    nd_grammar_allowed_bytes(g, &s, bits);
    CHECK(!(bits['"' / 32] >> ('"' % 32) & 1));
    CHECK(bits['T' / 32] >> ('T' % 32) & 1);
    CHECK(!(bits['x' / 32] >> ('x' % 32) & 1)); /* no word of the source starts with x */
    /* an escape may only spell a character of the source, and only as json.dumps would: T is
     * written as itself (\u0054 is refused), so no escape can start this value */
    nd_grammar_allowed_bytes(g, &s, bits);
    CHECK(!(bits['\\' / 32] >> ('\\' % 32) & 1));
    CHECK(!room_ok(g, "\\u0054obi"));
    CHECK(room_ok(g, "Tobi"));
    /* enum, pattern and length-bounded strings, booleans and free maps stay as declared */
    CHECK(accepts(g, "[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"lamp\",\"on\":false,\"color\":\"warm white\","
                     "\"code\":\"QX\",\"short\":\"zzz\",\"extra\":{\"k\":\"never said\"}}}]"));
    /* [] is always possible */
    CHECK(accepts(g, "[]"));
    nd_grammar_free(g);
}

/* Non-ASCII characters are copied raw or as \u escapes; cut-out characters never. */
static void test_unicode_and_cut_outs(void)
{
    nd_grammar *g = tools_grammar(LIGHTS);
    if (!g) { CHECK(0); return; }
    CHECK(set_source(g, "message Zo\xc3\xab: \"meet at 5\"\nthen stop") == 0);
    CHECK(room_ok(g, "Zo\xc3\xab"));
    CHECK(room_ok(g, "Zo\\u00eb"));
    CHECK(room_ok(g, "meet at 5"));
    CHECK(!room_ok(g, "Zo\\u00ebx"));
    CHECK(!room_ok(g, "5\\\"\\nthen"));           /* across the cut-out quote and newline */
    CHECK(!room_ok(g, "5\\\" then"));
    CHECK(!room_ok(g, "Zoe"));
    /* nothing to copy: the constraint is off, so required strings stay possible */
    CHECK(set_source(g, "\"\" ,, \n") == 0);
    CHECK(!nd_grammar_copy_active(g));
    CHECK(room_ok(g, "anything"));
    CHECK(set_source(g, NULL) == 0);
    CHECK(!nd_grammar_copy_active(g));
    CHECK(room_ok(g, "kitchen"));
    nd_grammar_free(g);
}

/* No state reachable under a copy source is a dead end (the grammar's promise). */
static void test_no_dead_ends(void)
{
    nd_grammar *g = tools_grammar(LIGHTS);
    if (!g) { CHECK(0); return; }
    static const char *sources[] = {"a", "lights on in the hall. then, the end!", "x y z, ab. ab! (ab) 'ab'",
                                    "caf\xc3\xa9 \xe6\x9d\xb1\xe4\xba\xac \xf0\x9f\x98\x80 ok", "...,,,  a"};
    unsigned rng = 12345;
    int dead = 0, finished = 0;
    for (size_t k = 0; k < sizeof sources / sizeof *sources; k++) {
        CHECK(set_source(g, sources[k]) == 0);
        for (int walk = 0; walk < 200; walk++) {
            nd_grammar_state s;
            nd_grammar_start(g, &s);
            for (int step = 0; step < 400; step++) {
                uint32_t bits[8];
                nd_grammar_allowed_bytes(g, &s, bits);
                int allowed[256], na = 0;
                for (int b = 0; b < 256; b++)
                    if (bits[b / 32] >> (b % 32) & 1) allowed[na++] = b;
                if (!na) {
                    if (nd_grammar_complete(g, &s)) finished++;
                    else dead++;
                    break;
                }
                rng = rng * 1103515245u + 12345u;
                /* lean towards closing so walks end */
                int b = allowed[(rng >> 8) % (unsigned)na];
                for (int i = 0; i < na && (rng >> 20) % 3 == 0; i++)
                    if (allowed[i] == '"' || allowed[i] == '}' || allowed[i] == ']') b = allowed[i];
                char c = (char)b;
                if (nd_grammar_advance(g, &s, &c, 1) < 0) { dead++; break; }
            }
        }
    }
    CHECKF(dead == 0 && finished > 100, "%d dead ends, %d finished walks", dead, finished);
    nd_grammar_free(g);
}

/* The mask cache must not hand out a mask computed under another copy source:
 * the state bytes at the start of a copy are the same for every source. */
static void test_mask_cache_across_sources(void)
{
    nd_grammar *g = tools_grammar(LIGHTS);
    if (!g) { CHECK(0); return; }
    static const char *multi[] = {"kitchen", "Tobi", "'s", " bedroom", "hall", "\",\"on\":", "true}}]", "lamp"};
    synthetic_vocab voc = synthetic_vocab_build(multi, (int)(sizeof multi / sizeof *multi));
    nd_token_trie *trie = voc.trie;
    needle_error err = {0};
    nd_mask_cache *cache = NULL;
    CHECK(trie && nd_mask_cache_new(g, trie, 16, &cache, &err) == 0);
    if (!cache) { synthetic_vocab_free(&voc); nd_grammar_free(g); return; }
    uint32_t *fresh = calloc(nd_token_mask_words(trie), sizeof *fresh);
    const char *pre = "[{\"name\":\"set_lights\",\"arguments\":{\"room\":\"";
    static const char *turns[] = {"turn off the kitchen lights", "lights on in Tobi's bedroom", "kitchen again"};
    for (int t = 0; t < 3; t++) {
        CHECK(set_source(g, turns[t]) == 0);
        nd_grammar_state s;
        nd_grammar_start(g, &s);
        CHECK(nd_grammar_advance(g, &s, pre, strlen(pre)) == 0);
        const uint32_t *m = nd_mask_cache_get(cache, &s);
        nd_token_mask(g, &s, trie, fresh);
        CHECKF(m && memcmp(m, fresh, nd_token_mask_words(trie) * 4) == 0, "turn %d: cached mask differs", t);
        int kitchen = (fresh[(256 + 0) / 32] >> ((256 + 0) % 32)) & 1;
        int tobi = (fresh[(256 + 1) / 32] >> ((256 + 1) % 32)) & 1;
        CHECKF(kitchen == (t != 1) && tobi == (t == 1), "turn %d: kitchen %d Tobi %d", t, kitchen, tobi);
    }
    free(fresh);
    nd_mask_cache_free(cache);
    synthetic_vocab_free(&voc);
    nd_grammar_free(g);
}

/* The automaton alone: word counts and steps. */
static void test_copy_source_unit(void)
{
    nd_copy_source *c = NULL;
    CHECK(nd_copy_source_build("", 0, &c) == 0 && c == NULL);
    CHECK(nd_copy_source_build("  ,\"\n", 5, &c) == 0 && c == NULL);
    CHECK(nd_copy_source_build("go to the hall", 14, &c) == 0 && c != NULL);
    if (!c) return;
    CHECK(nd_copy_word_count(c) == 4);
    uint32_t a = 0, b = 0;
    CHECK(!nd_copy_can_end(c, a, b));
    CHECK(nd_copy_step(c, &a, &b, 'h') == 0);
    CHECK(!nd_copy_can_end(c, a, b));
    CHECK(nd_copy_step(c, &a, &b, 'x') < 0 && b == 1); /* refused: state unchanged */
    CHECK(nd_copy_step(c, &a, &b, 'a') == 0 && nd_copy_step(c, &a, &b, 'l') == 0 && nd_copy_step(c, &a, &b, 'l') == 0);
    CHECK(nd_copy_can_end(c, a, b));
    CHECK(nd_copy_step(c, &a, &b, ' ') < 0); /* the text ends after "hall" */
    CHECK(nd_copy_range_viable(c, 0, 0, 'g', 'g') && !nd_copy_range_viable(c, 0, 0, 'o', 'o'));
    CHECK(nd_copy_range_viable(c, 0, 0, 0, 0x10FFFF));
    nd_copy_source_free(c);
    /* a run of signs starts a copy at every sign: more word starts than half the bytes
     * (the fuzzer found the old len/2 bound overflowed; ASan builds catch a regression) */
    c = NULL;
    CHECK(nd_copy_source_build("@@@@@@@@@@$$$$$$$$$$", 20, &c) == 0 && c != NULL);
    if (c) CHECK(nd_copy_word_count(c) == 20);
    nd_copy_source_free(c);
}

int main(void)
{
    RUN(test_copy_source_unit);
    RUN(test_free_string_is_a_copy);
    RUN(test_unicode_and_cut_outs);
    RUN(test_no_dead_ends);
    RUN(test_mask_cache_across_sources);
    return check_summary();
}
