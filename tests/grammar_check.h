/* grammar_check.h - the grammar helpers shared by the grammar tests
 * (test_grammar.c, test_copy_values.c, test_schema.c): compile a tools
 * array from JSON text, and ask whether a whole text is accepted. */
#ifndef ND_TEST_GRAMMAR_CHECK_H
#define ND_TEST_GRAMMAR_CHECK_H

#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "grammar/grammar.h"

/* The grammar of a JSON tools array, or NULL (the reason on stderr). */
static inline nd_grammar *tools_grammar(const char *json)
{
    nd_json *doc = NULL;
    needle_error err = {0};
    if (nd_json_parse(json, strlen(json), "test", &doc, &err) < 0) {
        fprintf(stderr, "  json: %s\n", err.message);
        return NULL;
    }
    nd_grammar *g = NULL;
    if (nd_grammar_compile(doc, &g, &err) < 0) fprintf(stderr, "  compile: %s\n", err.message);
    nd_json_free(doc);
    return g;
}

/* 1 when the whole text is accepted and complete. */
static inline int accepts(const nd_grammar *g, const char *text)
{
    nd_grammar_state s;
    nd_grammar_start(g, &s);
    if (nd_grammar_advance(g, &s, text, strlen(text)) < 0) return 0;
    return nd_grammar_complete(g, &s);
}

#endif
