/* weights.c - open either weight format by its first bytes; free either. */
#include "model/weights.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define CACT_MAGIC 0x05E12A83u

int nd_weights_load(const char *path, nd_weights *w, needle_error *err)
{
    memset(w, 0, sizeof *w);
    FILE *fp = fopen(path, "rb");
    if (!fp) return nd_errorf(err, NEEDLE_EIO, "%s: cannot open: %s", path, strerror(errno));
    unsigned char b[4] = {0, 0, 0, 0};
    size_t got = fread(b, 1, 4, fp);
    fclose(fp);
    uint32_t magic = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    /* a .cact starts with its u32 tag; a safetensors file with a u64 header
     * length, which cannot equal the tag for any file we could map */
    if (got == 4 && magic == CACT_MAGIC) return nd_weights_load_cact(path, w, err);
    return nd_weights_load_safetensors(path, w, err);
}

void nd_weights_free(nd_weights *w)
{
    if (!w) return;
    free(w->layers);
    free(w->owned);
    nd_unmap_file(&w->map);
    memset(w, 0, sizeof *w);
}
