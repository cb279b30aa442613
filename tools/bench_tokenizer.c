/* bench_tokenizer.c - encode speed of the C tokenizer.
 *
 *   bench_tokenizer MODEL TEXT_FILE [REPEATS]
 *
 * Encodes every line of TEXT_FILE (newlines kept out) REPEATS times and
 * prints one JSON line: lines, bytes, tokens per pass, best seconds per pass,
 * tokens/s and MB/s.  tools/bench_tokenizer.py runs it next to the
 * sentencepiece library on the same lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/file.h"
#include "text/tokenizer.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_tokenizer MODEL TEXT_FILE [REPEATS]\n");
        return 2;
    }
    int repeats = argc > 3 ? atoi(argv[3]) : 5;
    if (repeats < 1) repeats = 1;
    needle_error err = {0};
    nd_tokenizer *t = NULL;
    if (nd_tokenizer_load_spm(argv[1], &t, &err)) {
        fprintf(stderr, "bench_tokenizer: %s\n", err.message);
        return 1;
    }
    char *text = NULL;
    size_t len = 0;
    if (nd_read_file(argv[2], &text, &len, &err)) {
        fprintf(stderr, "bench_tokenizer: %s\n", err.message);
        nd_tokenizer_free(t);
        return 1;
    }
    nd_tok_scratch s;
    nd_tok_scratch_init(&s);
    nd_ids ids;
    nd_ids_init(&ids);
    double best = 1e30;
    size_t tokens = 0, lines = 0;
    for (int r = 0; r < repeats; r++) {
        tokens = lines = 0;
        double t0 = now();
        for (size_t pos = 0; pos < len;) {
            const char *nl = memchr(text + pos, '\n', len - pos);
            size_t end = nl ? (size_t)(nl - text) : len;
            ids.len = 0;
            if (nd_tokenizer_encode_scratch(t, &s, text + pos, end - pos, &ids, &err)) {
                fprintf(stderr, "bench_tokenizer: line %zu: %s\n", lines + 1, err.message);
                return 1;
            }
            tokens += ids.len;
            lines++;
            pos = end + 1;
        }
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    printf("{\"lines\":%zu,\"bytes\":%zu,\"tokens\":%zu,\"seconds\":%.6f,\"tokens_per_s\":%.0f,\"mb_per_s\":%.2f}\n",
           lines, len, tokens, best, (double)tokens / best, (double)len / best / 1e6);
    nd_ids_free(&ids);
    nd_tok_scratch_free(&s);
    free(text);
    nd_tokenizer_free(t);
    return 0;
}
