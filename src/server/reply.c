/* reply.c - response bodies: JSON taken from a buffer, OpenAI error objects. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/json.h"
#include "server/server_internal.h"

void nd_reply_take(nd_reply *r, int status, const char *content_type, nd_buf *b)
{
    free(r->body);
    r->status = b->oom ? 500 : status;
    r->content_type = content_type;
    r->len = b->oom ? 0 : b->len;
    r->body = b->oom ? NULL : nd_buf_take(b);
    nd_buf_free(b);
}

void nd_reply_error(nd_reply *r, int status, const char *type, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    nd_buf b;
    nd_buf_init(&b);
    nd_buf_puts(&b, "{\"error\":{\"message\":");
    nd_json_write_string(&b, msg, strlen(msg), 0);
    nd_buf_puts(&b, ",\"type\":");
    nd_json_write_string(&b, type, strlen(type), 0);
    nd_buf_puts(&b, ",\"param\":null,\"code\":");
    if (code) nd_json_write_string(&b, code, strlen(code), 0);
    else nd_buf_puts(&b, "null");
    nd_buf_puts(&b, "}}\n");
    nd_reply_take(r, status, "application/json", &b);
}

uint64_t nd_hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t nd_hash_str(uint64_t h, const char *s)
{
    h = nd_hash_bytes(h, s ? s : "", s ? strlen(s) : 0);
    return nd_hash_bytes(h, s ? "\x01" : "\x02", 1); /* NULL and "" hash apart */
}

double nd_rss_mb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0.0;
    long size = 0, rss = 0;
    int n = fscanf(f, "%ld %ld", &size, &rss);
    fclose(f);
    if (n != 2) return 0.0;
    return (double)rss * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}
