/* fuzz_tool_index.c - the tool-embedding index parser on arbitrary bytes:
 * it must refuse or accept without reading out of bounds or crashing, and
 * what it accepts must be searchable by its own keys. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/tool_index.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nd_tool_index ix;
    needle_error err;
    if (nd_tool_index_parse(data, size, "fuzz", &ix, &err) == 0) {
        if (ix.n > 0 && !nd_tool_index_find(&ix, ix.keys[0])) abort();
        nd_tool_index_free(&ix);
    }
    return 0;
}
