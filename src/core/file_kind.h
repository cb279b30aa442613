/* file_kind.h - tell what kind of file a path holds from its first bytes, so a
 * reader handed the wrong kind can say "X is a .cact model, not a safetensors
 * checkpoint" instead of reporting a nonsense header length. */
#ifndef ND_FILE_KIND_H
#define ND_FILE_KIND_H

#include <stddef.h>
#include <stdint.h>

typedef enum nd_file_kind {
    ND_KIND_UNKNOWN = 0,
    ND_KIND_EMPTY,
    ND_KIND_CACT,         /* starts with the .cact u32 tag */
    ND_KIND_SAFETENSORS,  /* u64 header length, then '{' */
    ND_KIND_JSON,         /* first non-blank byte is '{' or '[' */
    ND_KIND_SENTENCEPIECE, /* protobuf: field 1 (pieces), length-delimited */
    ND_KIND_TEXT,         /* printable text, none of the above */
} nd_file_kind;

/* Classify a buffer holding the first bytes (at least 16 when the file has them). */
nd_file_kind nd_file_kind_of(const uint8_t *head, size_t n);
/* A short phrase naming the kind: "a .cact model file", "a JSON text file", ... */
const char *nd_file_kind_phrase(nd_file_kind k);
/* Read the first bytes of PATH (regular files only, never blocking) and classify
 * them; ND_KIND_UNKNOWN when the file cannot be read. */
nd_file_kind nd_file_kind_of_path(const char *path);

#endif
