/* tool_catalogue.h - the test catalogue of tools, shared by the retrieval and
 * tool-index tests: the first n tools of tools/gen_data.py's catalogue as a
 * compact JSON array (heap string, NULL on failure).  When change_index is a
 * valid index, that tool's description gets "Edited. " prepended, so a test can
 * change one schema and leave the others as they were. */
#ifndef TOOL_CATALOGUE_H
#define TOOL_CATALOGUE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/file.h"
#include "core/json.h"

static char *tool_catalogue_load(int n, int change_index)
{
    char dir[] = "/tmp/needle_catalogue_XXXXXX";
    if (!mkdtemp(dir)) return NULL;
    char path[256], cmd[512];
    snprintf(path, sizeof path, "%s/all.json", dir);
    snprintf(cmd, sizeof cmd, "python3 tools/gen_data.py --write-all-tools %s >/dev/null 2>&1", path);
    char *out = NULL;
    if (system(cmd) == 0) {
        char *text = NULL;
        size_t len = 0;
        needle_error err = {0};
        nd_json *all = NULL;
        if (nd_read_file(path, &text, &len, &err) == 0 && nd_json_parse(text, len, path, &all, &err) == 0 &&
            all->type == ND_JSON_ARRAY && (int)all->count >= n) {
            const char *key = "\"description\":\"";
            nd_buf b;
            nd_buf_init(&b);
            nd_buf_putc(&b, '[');
            for (int i = 0; i < n; i++) {
                if (i) nd_buf_putc(&b, ',');
                nd_buf item;
                nd_buf_init(&item);
                nd_json_write(&item, &all->items[i], 1);
                char *at = i == change_index && item.data ? strstr(item.data, key) : NULL;
                if (at) { /* the same tool with an edited description */
                    size_t head = (size_t)(at - item.data) + strlen(key);
                    nd_buf_append(&b, item.data, head);
                    nd_buf_puts(&b, "Edited. ");
                    nd_buf_puts(&b, item.data + head);
                } else {
                    nd_buf_puts(&b, item.data ? item.data : "");
                }
                nd_buf_free(&item);
            }
            nd_buf_putc(&b, ']');
            out = nd_buf_take(&b);
        }
        nd_json_free(all);
        free(text);
    }
    unlink(path);
    rmdir(dir);
    return out;
}

#endif
