/* render_rows.c - print the training ids and loss mask of every JSONL row as
 * the fine-tuning data path builds them (src/train/data.c, text/chat.c), for
 * tests/python/test_layout_oracle.py to compare with the reference.
 *
 *   render_rows TOK.model auto|2.0.8|2.0.15 ROWS.jsonl
 * One output line per input line: {"ids":[...],"mask":[...]} or {"error":"..."}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/file.h"
#include "core/json.h"
#include "text/chat.h"
#include "train/data.h"

int main(int argc, char **argv)
{
    if (argc != 4 || nd_chat_layout_parse(argv[2]) < 0) {
        fprintf(stderr, "usage: render_rows TOK.model auto|2.0.8|2.0.15 ROWS.jsonl\n");
        return 2;
    }
    int layout = nd_chat_layout_resolve(nd_chat_layout_parse(argv[2]), 2);
    needle_error err = {0, ""};
    nd_tokenizer *tok = NULL;
    char *text = NULL;
    size_t len = 0;
    if (nd_tokenizer_load_spm(argv[1], &tok, &err) ||
        nd_read_file_max(argv[3], (size_t)1 << 30, "rows", &text, &len, &err)) {
        fprintf(stderr, "render_rows: %s\n", err.message);
        nd_tokenizer_free(tok);
        return 1;
    }
    for (size_t at = 0; at < len;) {
        size_t end = at;
        while (end < len && text[end] != '\n') end++;
        if (end > at) {
            nd_example ex;
            if (nd_example_from_json_line_layout(text + at, end - at, "row", tok, layout, &ex, &err)) {
                nd_json_print_error_line(stdout, err.message);
            } else {
                printf("{\"ids\":[");
                for (int i = 0; i < ex.len; i++) printf(i ? ",%d" : "%d", (int)ex.ids[i]);
                printf("],\"mask\":[");
                for (int i = 0; i < ex.len; i++) printf(i ? ",%d" : "%d", (int)ex.mask[i]);
                printf("]}\n");
                free(ex.ids);
                free(ex.mask);
            }
        }
        at = end + 1;
    }
    free(text);
    nd_tokenizer_free(tok);
    return 0;
}
