/* fuzz_json.c - libFuzzer harness for the JSON parser and writer.
 *
 * Properties: parsing never crashes or leaks; a parsed value written out
 * (ASCII-only and raw) parses again to an equal value, and writing that
 * again gives identical text (the writer is a fixed point). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"

static void check_round_trip(const nd_json *v, int ascii_only)
{
    nd_buf a, b;
    nd_buf_init(&a);
    nd_buf_init(&b);
    nd_json_write(&a, v, ascii_only);
    nd_json *w = NULL;
    needle_error err;
    if (a.oom || nd_json_parse(a.data, a.len, NULL, &w, &err) != 0) abort();
    if (!nd_json_equal(v, w)) abort();
    nd_json_write(&b, w, ascii_only);
    if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0) abort();
    nd_json_free(w);
    nd_buf_free(&a);
    nd_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nd_json *v = NULL;
    needle_error err;
    if (nd_json_parse((const char *)data, size, "fuzz", &v, &err) != 0) {
        if (v || err.code == 0 || !memchr(err.message, '\0', sizeof err.message)) abort();
        return 0;
    }
    check_round_trip(v, 1);
    check_round_trip(v, 0);
    nd_json_free(v);
    return 0;
}
