/* buf.h - a growable byte buffer for building text and binary output. */
#ifndef ND_BUF_H
#define ND_BUF_H

#include <stddef.h>

typedef struct nd_buf {
    char *data; /* always NUL-terminated when non-NULL */
    size_t len, cap;
    int oom; /* sticky: set when an allocation failed; later appends do nothing */
} nd_buf;

void nd_buf_init(nd_buf *b);
void nd_buf_free(nd_buf *b);
void nd_buf_reset(nd_buf *b);
void nd_buf_append(nd_buf *b, const void *data, size_t n);
void nd_buf_puts(nd_buf *b, const char *s);
void nd_buf_putc(nd_buf *b, char c);
void nd_buf_printf(nd_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Detach the data (caller frees); the buffer is left empty. */
char *nd_buf_take(nd_buf *b);

#endif
