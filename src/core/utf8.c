/* utf8.c - the one UTF-8 codec of the library (see utf8.h). */
#include "core/utf8.h"

size_t nd_utf8_valid_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (n < 3 || (s[2] & 0xC0) != 0x80) return 0;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c == 0xE0) lo = 0xA0;      /* no overlongs */
        if (c == 0xED) hi = 0x9F;      /* no surrogates */
        return (s[1] >= lo && s[1] <= hi) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (n < 4 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c == 0xF0) lo = 0x90;      /* no overlongs */
        if (c == 0xF4) hi = 0x8F;      /* nothing past U+10FFFF */
        return (s[1] >= lo && s[1] <= hi) ? 4 : 0;
    }
    return 0; /* continuation byte, overlong lead C0/C1, or F5..FF */
}

size_t nd_utf8_first_invalid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) { /* the common case, without a call */
            i++;
            continue;
        }
        size_t k = nd_utf8_valid_len(p + i, n - i);
        if (!k) return i;
        i += k;
    }
    return n;
}

size_t nd_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (n == 0) { *cp = 0; return 0; }
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    size_t len = (size_t)nd_utf8_seq_len((unsigned char)c);
    if (len > n) { *cp = 0xFFFD; return n; }
    uint32_t v = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) v = (v << 6) | (s[i] & 0x3F);
    *cp = v;
    return len;
}

size_t nd_utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

void nd_utf8_append_repaired(nd_buf *out, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t bad = i + nd_utf8_first_invalid(s + i, n - i);
        nd_buf_append(out, s + i, bad - i);
        if (bad >= n) break;
        nd_buf_puts(out, "\xEF\xBF\xBD");
        /* skip the offending lead byte and any continuation bytes after it */
        i = bad + 1;
        while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
    }
}
