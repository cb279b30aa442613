/* buf.c - growable byte buffer. */
#include "core/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nd_buf_init(nd_buf *b) { memset(b, 0, sizeof *b); }

void nd_buf_free(nd_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

void nd_buf_reset(nd_buf *b)
{
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}

static int reserve(nd_buf *b, size_t extra)
{
    if (b->oom) return 0;
    if (b->len + extra + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) {
        if (cap > ((size_t)-1) / 2) { b->oom = 1; return 0; }
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p) { b->oom = 1; return 0; }
    b->data = p;
    b->cap = cap;
    return 1;
}

void nd_buf_append(nd_buf *b, const void *data, size_t n)
{
    if (!reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void nd_buf_puts(nd_buf *b, const char *s) { nd_buf_append(b, s, strlen(s)); }
void nd_buf_putc(nd_buf *b, char c) { nd_buf_append(b, &c, 1); }

void nd_buf_printf(nd_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) { nd_buf_append(b, small, (size_t)n); return; }
    if (!reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *nd_buf_take(nd_buf *b)
{
    char *p = b->data;
    if (!p) { p = malloc(1); if (p) p[0] = '\0'; }
    memset(b, 0, sizeof *b);
    return p;
}
