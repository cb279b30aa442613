/* fuzz_schema.c - hostile schemas and hostile output bytes.
 *
 * The input is split at the first NUL: before it, a JSON document compiled both
 * as a tools array and as a single schema; after it, bytes fed to the automaton.
 * Nothing may crash, and every state reached must leave some byte allowed or
 * be complete (the automaton's no-dead-end promise).  The tools grammar is
 * driven twice: as declared, and with the output bytes also as its copy source
 * (grounded decoding), so free strings must be copies of hostile text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "grammar/schema.h"
#include "core/json.h"

static void drive(const nd_grammar *g, const uint8_t *bytes, size_t n)
{
    nd_grammar_state s;
    nd_grammar_start(g, &s);
    for (size_t i = 0; i < n && i < 256; i++) {
        uint32_t bits[8];
        nd_grammar_allowed_bytes(g, &s, bits);
        int any = 0;
        for (int w = 0; w < 8; w++) any |= bits[w] != 0;
        if (!any && !nd_grammar_complete(g, &s)) abort(); /* a dead end */
        /* follow the input byte when allowed, else the first allowed byte */
        unsigned b = bytes[i];
        if (!(bits[b / 32] >> (b % 32) & 1)) {
            if (!any) return;
            for (b = 0; b < 256 && !(bits[b / 32] >> (b % 32) & 1); b++) {}
        }
        char c = (char)b;
        if (nd_grammar_advance(g, &s, &c, 1) < 0) abort(); /* allowed_bytes promised it */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t jlen = nul ? (size_t)(nul - data) : size;
    nd_json *doc = NULL;
    needle_error err;
    if (nd_json_parse((const char *)data, jlen, NULL, &doc, &err) < 0) return 0;
    const uint8_t *rest = nul ? nul + 1 : data + size;
    size_t rlen = (size_t)(data + size - rest);
    nd_grammar *g = NULL;
    if (nd_grammar_compile(doc, &g, &err) == 0) {
        drive(g, rest, rlen);
        if (nd_grammar_set_copy_source(g, (const char *)rest, rlen) == 0) drive(g, rest, rlen);
        nd_grammar_free(g);
    }
    if (nd_schema_compile_value(doc, "schema", &g, &err) == 0) {
        drive(g, rest, rlen);
        nd_grammar_free(g);
    }
    nd_json_free(doc);
    return 0;
}
