/* json_canon.c - test helper: read JSON on stdin, print it compactly.
 *
 *   json_canon [--no-ascii]  < in.json  > out.json
 * Exit 0 with the compact text, or 1 with the parser's message on stderr.
 * tests/python/test_json_oracle.py compares the output with Python's
 * json.dumps(..., separators=(",",":"), ensure_ascii=True/False). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/json.h"

int main(int argc, char **argv)
{
    int ascii_only = !(argc > 1 && strcmp(argv[1], "--no-ascii") == 0);
    nd_buf in;
    nd_buf_init(&in);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) nd_buf_append(&in, chunk, n);
    if (in.oom) { fprintf(stderr, "out of memory\n"); return 1; }
    nd_json *v = NULL;
    needle_error err;
    int rc = nd_json_parse(in.data ? in.data : "", in.len, "stdin", &v, &err);
    nd_buf_free(&in);
    if (rc) {
        fprintf(stderr, "%s (%s)\n", err.message, needle_strerror(rc));
        return 1;
    }
    nd_buf out;
    nd_buf_init(&out);
    nd_json_write(&out, v, ascii_only);
    fwrite(out.data, 1, out.len, stdout);
    nd_buf_free(&out);
    nd_json_free(v);
    return 0;
}
