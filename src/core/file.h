/* file.h - whole-file mapping for readers, atomic replacement for writers. */
#ifndef ND_FILE_H
#define ND_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "needle.h"

/* A read-only view of a whole file (memory-mapped; empty files have data == NULL). */
typedef struct nd_mapping {
    const uint8_t *data;
    size_t size;
    int mapped; /* 1: munmap on close, 0: heap copy or empty */
} nd_mapping;

int nd_map_file(const char *path, nd_mapping *out, needle_error *err);
void nd_unmap_file(nd_mapping *m);

/* Atomic writes: open PATH.tmp.<pid>, write, then commit renames it over PATH
 * after fflush+fsync; abort removes the temp file.  Readers never see a half file. */
typedef struct nd_atomic_file {
    FILE *fp;
    char path[4096];
    char tmp_path[4200];
} nd_atomic_file;

int nd_atomic_open(nd_atomic_file *af, const char *path, needle_error *err);
int nd_atomic_commit(nd_atomic_file *af, needle_error *err);
void nd_atomic_abort(nd_atomic_file *af);

/* Read a whole (small) file into a NUL-terminated heap buffer. */
int nd_read_file(const char *path, char **out, size_t *out_len, needle_error *err);

#endif
