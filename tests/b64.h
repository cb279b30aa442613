/* b64.h - base64 decoding for the tests that read the reference's A8
 * goldens (codes are stored as base64 in the JSON files). */
#ifndef ND_TEST_B64_H
#define ND_TEST_B64_H

#include <stddef.h>
#include <stdint.h>

static inline int b64_value(char ch)
{
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    return ch == '+' ? 62 : ch == '/' ? 63 : -1;
}

/* Decode base64 into out (at most cap bytes); returns the byte count. */
static inline size_t b64_decode(const char *s, size_t n, uint8_t *out, size_t cap)
{
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_value(s[i]);
        if (v < 0) continue; /* padding */
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o < cap) out[o] = (uint8_t)(acc >> bits);
            o++;
        }
    }
    return o;
}

#endif
