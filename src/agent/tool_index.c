/* tool_index.c - reading and writing the tool-embedding index (layout in tool_index.h). */
#include "agent/tool_index.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"

static const char MAGIC[8] = {'N', 'D', 'T', 'O', 'O', 'L', 'I', 'X'};
#define HEADER_BYTES 32u

uint64_t nd_fnv1a64(const void *data, size_t n, uint64_t h)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void wr64(uint8_t *p, uint64_t v)
{
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}
static float rdf32(const uint8_t *p)
{
    uint32_t u = rd32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

void nd_tool_index_init(nd_tool_index *ix, uint64_t model_fp, int dim)
{
    memset(ix, 0, sizeof *ix);
    ix->model_fp = model_fp;
    ix->dim = dim;
}

void nd_tool_index_free(nd_tool_index *ix)
{
    if (!ix) return;
    free(ix->keys);
    free(ix->emb);
    ix->keys = NULL;
    ix->emb = NULL;
    ix->n = ix->cap = 0;
}

int nd_tool_index_add(nd_tool_index *ix, uint64_t key, const float *emb, needle_error *err)
{
    if (ix->n >= ND_TOOL_INDEX_MAX_ENTRIES)
        return nd_errorf(err, NEEDLE_ELIMIT, "tool index: more than %d entries", ND_TOOL_INDEX_MAX_ENTRIES);
    if (ix->n == ix->cap) {
        int cap = ix->cap ? ix->cap * 2 : 16;
        uint64_t *k = realloc(ix->keys, sizeof(uint64_t) * (size_t)cap);
        if (!k) return nd_errorf(err, NEEDLE_ENOMEM, "tool index: out of memory");
        ix->keys = k;
        float *e = realloc(ix->emb, sizeof(float) * (size_t)cap * (size_t)ix->dim);
        if (!e) return nd_errorf(err, NEEDLE_ENOMEM, "tool index: out of memory");
        ix->emb = e;
        ix->cap = cap;
    }
    ix->keys[ix->n] = key;
    memcpy(ix->emb + (size_t)ix->n * ix->dim, emb, sizeof(float) * (size_t)ix->dim);
    ix->n++;
    return 0;
}

const float *nd_tool_index_find(const nd_tool_index *ix, uint64_t key)
{
    for (int i = 0; i < ix->n; i++)
        if (ix->keys[i] == key) return ix->emb + (size_t)i * ix->dim;
    return NULL;
}

int nd_tool_index_parse(const uint8_t *data, size_t size, const char *where, nd_tool_index *ix, needle_error *err)
{
    nd_tool_index_init(ix, 0, 0);
    if (size < HEADER_BYTES + 8)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: %zu bytes is shorter than the %u-byte header and checksum", where,
                         size, HEADER_BYTES + 8);
    if (memcmp(data, MAGIC, 8) != 0) return nd_errorf(err, NEEDLE_EFORMAT, "%s: not a tool index (bad magic at byte 0)", where);
    uint32_t version = rd32(data + 8), dim = rd32(data + 12), n = rd32(data + 24);
    if (version != ND_TOOL_INDEX_VERSION)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: version %u at byte 8 (expected %d)", where, version,
                         ND_TOOL_INDEX_VERSION);
    if (dim == 0 || dim > ND_TOOL_INDEX_MAX_DIM)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: embedding width %u at byte 12 out of range", where, dim);
    if (n > ND_TOOL_INDEX_MAX_ENTRIES)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: %u entries at byte 24 exceed the limit %d", where, n,
                         ND_TOOL_INDEX_MAX_ENTRIES);
    /* both bounded above, so this cannot overflow a 64-bit size */
    size_t entry = 8 + 4 * (size_t)dim;
    size_t want = HEADER_BYTES + (size_t)n * entry + 8;
    if (size != want)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: %zu bytes, but %u entries of width %u need %zu (truncated?)", where,
                         size, n, dim, want);
    uint64_t sum = nd_fnv1a64(data, size - 8, ND_FNV_OFFSET);
    if (sum != rd64(data + size - 8))
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: checksum mismatch at byte %zu", where, size - 8);
    nd_tool_index_init(ix, rd64(data + 16), (int)dim);
    float *tmp = malloc(sizeof(float) * dim);
    if (!tmp) return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", where);
    int rc = 0;
    for (uint32_t i = 0; i < n && !rc; i++) {
        const uint8_t *p = data + HEADER_BYTES + (size_t)i * entry;
        for (uint32_t j = 0; j < dim; j++) {
            tmp[j] = rdf32(p + 8 + 4 * (size_t)j);
            if (!isfinite(tmp[j])) {
                rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: non-finite value in entry %u at byte %zu", where, i,
                               (size_t)(p - data) + 8 + 4 * (size_t)j);
                break;
            }
        }
        if (!rc) rc = nd_tool_index_add(ix, rd64(p), tmp, err);
    }
    free(tmp);
    if (rc) nd_tool_index_free(ix);
    return rc;
}

int nd_tool_index_read(const char *path, nd_tool_index *ix, needle_error *err)
{
    nd_tool_index_init(ix, 0, 0);
    nd_mapping map;
    int rc = nd_map_file(path, &map, err);
    if (rc) return rc;
    rc = nd_tool_index_parse(map.data, map.size, path, ix, err);
    nd_unmap_file(&map);
    return rc;
}

int nd_tool_index_write(const char *path, const nd_tool_index *ix, needle_error *err)
{
    if (ix->dim <= 0 || ix->dim > ND_TOOL_INDEX_MAX_DIM || ix->n < 0 || ix->n > ND_TOOL_INDEX_MAX_ENTRIES)
        return nd_errorf(err, NEEDLE_EINVAL, "%s: tool index of %d entries of width %d cannot be written", path, ix->n,
                         ix->dim);
    size_t entry = 8 + 4 * (size_t)ix->dim;
    size_t size = HEADER_BYTES + (size_t)ix->n * entry + 8;
    uint8_t *buf = calloc(1, size);
    if (!buf) return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path);
    memcpy(buf, MAGIC, 8);
    wr32(buf + 8, ND_TOOL_INDEX_VERSION);
    wr32(buf + 12, (uint32_t)ix->dim);
    wr64(buf + 16, ix->model_fp);
    wr32(buf + 24, (uint32_t)ix->n);
    for (int i = 0; i < ix->n; i++) {
        uint8_t *p = buf + HEADER_BYTES + (size_t)i * entry;
        wr64(p, ix->keys[i]);
        for (int j = 0; j < ix->dim; j++) {
            uint32_t u;
            memcpy(&u, &ix->emb[(size_t)i * ix->dim + j], 4);
            wr32(p + 8 + 4 * (size_t)j, u);
        }
    }
    wr64(buf + size - 8, nd_fnv1a64(buf, size - 8, ND_FNV_OFFSET));
    nd_atomic_file af;
    int rc = nd_atomic_open(&af, path, err);
    if (!rc) {
        if (fwrite(buf, 1, size, af.fp) != size) {
            nd_atomic_abort(&af);
            rc = nd_errorf(err, NEEDLE_EIO, "%s: write failed", path);
        } else {
            rc = nd_atomic_commit(&af, err);
        }
    }
    free(buf);
    return rc;
}
