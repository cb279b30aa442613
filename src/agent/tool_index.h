/* tool_index.h - the persistent tool-embedding index (needle_session_options.tool_index_path).
 *
 * Embedding a tool runs the whole model over its schema text, so a catalogue of
 * dozens of tools costs seconds at every start.  The index keeps the
 * embeddings on disk, keyed by a fingerprint of the model and one of each
 * tool's text: a matching file loads without running the model, and a tool
 * whose schema changed simply misses and is embedded again.
 *
 * File layout (little-endian):
 *   0   "NDTOOLIX"          8-byte magic
 *   8   u32 version (1)
 *   12  u32 dim             embedding width (the contrastive head's output)
 *   16  u64 model_fp        fingerprint of the model the embeddings came from
 *   24  u32 n               number of entries
 *   28  u32 0               reserved
 *   32  n x { u64 key, f32 emb[dim] }   key = fingerprint of the tool's compact JSON
 *   end u64 checksum        FNV-1a 64 of every byte before it
 * The size must match n and dim exactly, so a truncated or extended file is
 * refused rather than half read. */
#ifndef ND_TOOL_INDEX_H
#define ND_TOOL_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "needle.h"

#define ND_TOOL_INDEX_VERSION 1
#define ND_TOOL_INDEX_MAX_DIM 4096
/* Entries kept in one file: the current tools plus earlier ones (so switching
 * between tool sets does not re-embed), the oldest dropped past this. */
#define ND_TOOL_INDEX_MAX_ENTRIES 4096

typedef struct nd_tool_index {
    uint64_t model_fp;
    int dim, n, cap;
    uint64_t *keys; /* n */
    float *emb;     /* n * dim */
} nd_tool_index;

/* 64-bit FNV-1a, continued from h (start with ND_FNV_OFFSET). */
#define ND_FNV_OFFSET 0xcbf29ce484222325ull
uint64_t nd_fnv1a64(const void *data, size_t n, uint64_t h);

void nd_tool_index_init(nd_tool_index *ix, uint64_t model_fp, int dim);
void nd_tool_index_free(nd_tool_index *ix);
/* Append an entry (the embedding is copied); NEEDLE_ENOMEM / NEEDLE_ELIMIT. */
int nd_tool_index_add(nd_tool_index *ix, uint64_t key, const float *emb, needle_error *err);
/* The embedding stored under key, or NULL. */
const float *nd_tool_index_find(const nd_tool_index *ix, uint64_t key);

/* Parse a whole file image; every size, count and value is checked
 * (NEEDLE_EFORMAT naming the byte offset).  ix is initialised by the call. */
int nd_tool_index_parse(const uint8_t *data, size_t size, const char *where, nd_tool_index *ix, needle_error *err);
int nd_tool_index_read(const char *path, nd_tool_index *ix, needle_error *err);
/* Write atomically (a reader never sees half a file). */
int nd_tool_index_write(const char *path, const nd_tool_index *ix, needle_error *err);

#endif
