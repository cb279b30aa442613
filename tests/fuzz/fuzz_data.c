/* fuzz_data.c - libFuzzer harness for the fine-tuning data loader: arbitrary
 * bytes as one JSONL row (the row parser + chat renderer + tokenizer), then as
 * a whole JSONL file through nd_dataset_load_jsonl, then every example into a
 * padded batch.  Malformed rows must fail cleanly; accepted rows must be
 * [BOS] ... [EOS] with in-vocabulary ids and a 0/1 loss mask.  Run from the
 * repository root (it reads tests/golden/tok8k.model). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "text/tokenizer.h"
#include "train/data.h"

static nd_tokenizer *tok;

static void check_example(const nd_example *ex)
{
    int V = nd_tokenizer_size(tok);
    if (ex->len < 2 || ex->ids[0] != 2 || ex->ids[ex->len - 1] != 1 || ex->mask[0] != 0) abort();
    for (int i = 0; i < ex->len; i++)
        if (ex->ids[i] < 0 || ex->ids[i] >= V || ex->mask[i] > 1) abort();
}

static void check_batch(const nd_dataset *ds)
{
    int V = nd_tokenizer_size(tok);
    enum { B = 2, T = 32 };
    int32_t ids[B * T], tg[B * T];
    for (int i = 0; i < ds->n; i++) {
        int idx[1] = {i};
        long real = nd_make_batch(ds, idx, 1, B, T, 0, ids, tg);
        if (real != (ds->ex[i].len < T ? ds->ex[i].len : T)) abort();
        for (int j = 0; j < B * T; j++)
            if (tg[j] < -1 || tg[j] >= V || ids[j] < 0 || ids[j] >= V) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    needle_error err;
    if (!tok && nd_tokenizer_load_spm("tests/golden/tok8k.model", &tok, &err) != 0) abort();
    /* one row: copied so reads past `size` are caught exactly */
    char *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    nd_example ex;
    if (nd_example_from_json_line(copy, size, "fuzz", tok, &ex, &err) == 0) {
        check_example(&ex);
        free(ex.ids);
        free(ex.mask);
    } else if (ex.ids || ex.mask || ex.len || err.message[0] == '\0') {
        abort(); /* a failure leaves nothing behind and says why */
    }
    free(copy);
    /* the same bytes as a JSONL file (lines, CRLF, blank lines, max_len) */
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_data_%d.jsonl", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    nd_dataset ds;
    int max_len = 16 + (size ? data[0] : 0) * 4;
    if (nd_dataset_load_jsonl(path, tok, max_len, NULL, &ds, &err) == 0) {
        if (ds.n < 1 || ds.n + ds.malformed + ds.too_long != ds.lines) abort();
        for (int i = 0; i < ds.n; i++) {
            check_example(&ds.ex[i]);
            if (ds.ex[i].len > max_len) abort();
        }
        check_batch(&ds);
        nd_dataset_free(&ds);
    }
    remove(path);
    return 0;
}
