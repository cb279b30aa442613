/* file_kind.c - a small sniffer for the file kinds needle reads. */
#include "core/file_kind.h"

#include <unistd.h>

#include "core/file.h"

#define CACT_TAG 0x05E12A83u
#define CACT_TAG_V3 0x05E12A84u /* Needle 3 */

nd_file_kind nd_file_kind_of(const uint8_t *b, size_t n)
{
    if (n == 0) return ND_KIND_EMPTY;
    uint32_t tag = n >= 4 ? (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24 : 0;
    if (n >= 4 && (tag == CACT_TAG || tag == CACT_TAG_V3)) return ND_KIND_CACT;
    if (n >= 9 && b[8] == '{') {
        uint64_t len = 0;
        for (int i = 7; i >= 0; i--) len = (len << 8) | b[i];
        if (len >= 2 && len < ((uint64_t)1 << 40)) return ND_KIND_SAFETENSORS;
    }
    size_t i = 0;
    while (i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r')) i++;
    if (i < n && (b[i] == '{' || b[i] == '[')) return ND_KIND_JSON;
    /* a SentencePiece ModelProto starts with field 1 (repeated pieces): tag 0x0a, then a
     * varint length, then the piece message whose own field 1 (the piece text) is 0x0a */
    if (n >= 4 && b[0] == 0x0a) {
        size_t p = 1;
        while (p < n && (b[p] & 0x80)) p++;
        if (p + 1 < n && b[p + 1] == 0x0a) return ND_KIND_SENTENCEPIECE;
    }
    for (i = 0; i < n; i++)
        if (b[i] < 0x20 && b[i] != '\n' && b[i] != '\r' && b[i] != '\t') return ND_KIND_UNKNOWN;
    return ND_KIND_TEXT;
}

const char *nd_file_kind_phrase(nd_file_kind k)
{
    switch (k) {
    case ND_KIND_EMPTY: return "an empty file";
    case ND_KIND_CACT: return "a .cact model file";
    case ND_KIND_SAFETENSORS: return "a safetensors checkpoint";
    case ND_KIND_JSON: return "a JSON text file";
    case ND_KIND_SENTENCEPIECE: return "a SentencePiece tokenizer model";
    case ND_KIND_TEXT: return "a text file";
    default: return "a file of unknown kind";
    }
}

nd_file_kind nd_file_kind_of_path(const char *path)
{
    int fd = nd_open_regular(path, NULL);
    if (fd < 0) return ND_KIND_UNKNOWN;
    uint8_t head[64];
    size_t got = 0;
    while (got < sizeof head) {
        ssize_t r = read(fd, head + got, sizeof head - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    return nd_file_kind_of(head, got);
}
