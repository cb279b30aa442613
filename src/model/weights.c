/* weights.c - open either weight format by its first bytes; free either. */
#include "model/weights.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "core/file_kind.h"
#include "model/cact/cact.h"

static int load_any(const char *path, int lazy_heads, nd_weights *w, needle_error *err)
{
    memset(w, 0, sizeof *w);
    /* never blocks: a FIFO, device or directory is refused with what it is */
    int fd = nd_open_regular(path, err);
    if (fd < 0) return NEEDLE_EIO;
    close(fd);
    /* a .cact starts with its u32 tag; a safetensors file with a u64 header
     * length, which cannot equal the tag for any file we could map */
    nd_file_kind k = nd_file_kind_of_path(path);
    if (k == ND_KIND_CACT) return nd_weights_load_cact_opt(path, lazy_heads, w, err);
    if (k > ND_KIND_EMPTY && k != ND_KIND_SAFETENSORS) /* unknown bytes: the loader says what is wrong */
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: is %s, not a model (.cact or .safetensors)", path,
                         nd_file_kind_phrase(k));
    return nd_weights_load_safetensors(path, w, err);
}

int nd_weights_load(const char *path, nd_weights *w, needle_error *err) { return load_any(path, 0, w, err); }

int nd_weights_load_lazy_heads(const char *path, nd_weights *w, needle_error *err)
{
    return load_any(path, 1, w, err);
}

void nd_weights_free(nd_weights *w)
{
    if (!w) return;
    nd_lazy_heads_free(w->lazy_heads);
    free(w->layers);
    free(w->owned);
    nd_unmap_file(&w->map);
    memset(w, 0, sizeof *w);
}
