/* fuzz_safetensors.c - libFuzzer harness for the safetensors reader.
 *
 * Any input: nd_st_parse either fails with a message or yields tensors whose
 * every element can be read inside the buffer (ASan checks the bounds); a
 * "config" metadata value goes through the config parser too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nd_safetensors st;
    needle_error err;
    if (nd_st_parse(data, size, "fuzz", &st, &err) != 0) {
        if (err.code == 0 || st.tensors) abort();
        return 0;
    }
    volatile float sink = 0;
    for (size_t i = 0; i < st.count; i++) {
        const nd_st_tensor *t = &st.tensors[i];
        if (t->data < data || t->data + t->nbytes > data + size) abort();
        size_t n = t->numel < 4096 ? t->numel : 4096;
        for (size_t k = 0; k < n; k++) sink += nd_st_get_f32(t, k);
        if (t->numel) sink += nd_st_get_f32(t, t->numel - 1);
    }
    const char *cfg = nd_st_meta(&st, "config");
    if (cfg) {
        nd_config c;
        (void)nd_config_from_json(&c, cfg, strlen(cfg), "fuzz", &err);
    }
    (void)sink;
    nd_st_close(&st);
    return 0;
}
