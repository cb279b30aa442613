/* file.h - bounded, non-blocking readers and atomic replacement for writers. */
#ifndef ND_FILE_H
#define ND_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "needle.h"

/* Size limits for inputs read whole into memory; the error names the limit.
 * Model files are mapped, not read, and are bounded by the file itself. */
#define ND_LIMIT_TOOLS_BYTES ((size_t)16 << 20)   /* a tools JSON file: 16 MiB */
#define ND_LIMIT_CONFIG_BYTES ((size_t)1 << 20)   /* a model config JSON: 1 MiB */
#define ND_LIMIT_DATA_BYTES ((size_t)2 << 30)     /* a JSONL dataset: 2 GiB */
#define ND_LIMIT_TEXT_BYTES ((size_t)64 << 20)    /* any other text input: 64 MiB */

/* Open PATH read-only, refusing (with a message naming the path and what it is)
 * anything but a regular file; never blocks on a FIFO or device.  Returns the
 * descriptor or -1 with err filled. */
int nd_open_regular(const char *path, needle_error *err);

/* A read-only view of a whole file (memory-mapped; empty files have data == NULL). */
typedef struct nd_mapping {
    const uint8_t *data;
    size_t size;
    int mapped; /* 1: munmap on close, 0: heap copy or empty */
} nd_mapping;

int nd_map_file(const char *path, nd_mapping *out, needle_error *err);
void nd_unmap_file(nd_mapping *m);

/* Atomic writes: create a fresh temp file next to PATH (PATH.tmp.<pid>.<random>,
 * O_CREAT|O_EXCL|O_NOFOLLOW, unique per call, so concurrent writers and planted
 * symlinks cannot collide with it), write, then commit fsyncs it and renames it
 * over PATH (and fsyncs the directory); abort removes the temp file.  Readers
 * never see a half file.  Opening also removes temp files of this naming
 * scheme for PATH whose owning process is dead (left by a kill -9). */
typedef struct nd_atomic_file {
    FILE *fp;
    char path[4096];
    char tmp_path[4200];
} nd_atomic_file;

int nd_atomic_open(nd_atomic_file *af, const char *path, needle_error *err);
int nd_atomic_commit(nd_atomic_file *af, needle_error *err);
void nd_atomic_abort(nd_atomic_file *af);
/* Remove PATH.tmp.<pid>.<random> files whose process is gone; returns how many. */
int nd_atomic_clean_stale(const char *path);

/* Read a whole regular file of at most max_bytes into a NUL-terminated heap
 * buffer; `what` names the kind in the limit message ("tools file"). */
int nd_read_file_max(const char *path, size_t max_bytes, const char *what, char **out, size_t *out_len,
                     needle_error *err);
/* nd_read_file_max with ND_LIMIT_TEXT_BYTES. */
int nd_read_file(const char *path, char **out, size_t *out_len, needle_error *err);

#endif
