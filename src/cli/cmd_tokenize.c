/* cmd_tokenize.c - `needle tokenize`: text -> ids, or --decode ids -> text.
 *
 *   needle tokenize --model FILE.cact|TOK.model [--bos] [TEXT|-]
 *   needle tokenize --model FILE.cact|TOK.model --decode [IDS|-]
 *   needle tokenize --model FILE.cact|TOK.model --rows [--layout L]
 *
 * Encoding prints the ids as one JSON array and a newline.  Decoding reads a
 * JSON array or a comma list and prints the text exactly (no newline added,
 * so the output round-trips byte for byte).  Without TEXT/IDS, or with "-",
 * the input is read from stdin (whole; for encoding, byte for byte).
 * --rows reads fine-tuning rows (JSONL) from stdin and answers each line as
 * soon as it is read with {"tokens":N} (the row's length as `needle finetune`
 * renders it) or {"error":"..."}: the generator asks it, row by row, whether a
 * row fits the model's context.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "model/cact/cact.h"
#include "io/spm_model.h"
#include "text/chat.h"
#include "text/tokenizer.h"
#include "train/data.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: needle tokenize --model FILE.cact|TOK.model [--bos] [TEXT|-]\n"
            "       needle tokenize --model FILE.cact|TOK.model --decode [IDS|-]\n"
            "Encode TEXT (or stdin) to ids printed as a JSON array; --bos prepends the BOS id.\n"
            "--decode reads ids (JSON array or comma list) and prints the text they decode to.\n"
            "       needle tokenize --model FILE.cact|TOK.model --rows [--layout auto|2.0.8|2.0.15]\n"
            "--rows: for each fine-tuning row (JSONL) on stdin, print {\"tokens\":N}, its length as\n"
            "`needle finetune` renders it (layout auto: Needle 2's), or {\"error\":\"...\"}, one line\n"
            "per row, flushed as each row is read.\n");
}

/* The tokenizer of a .cact (its last directory record, SPEC 8) or of a
 * SentencePiece .model, chosen by the file's first bytes. */
static int load_tokenizer(const char *path, nd_tokenizer **out, needle_error *err)
{
    nd_mapping m;
    int rc = nd_map_file(path, &m, err);
    if (rc) return rc;
    nd_vocab v;
    if (nd_cact_sniff(m.data, m.size)) {
        nd_cact_file f;
        rc = nd_cact_parse(m.data, m.size, path, &f, err);
        if (rc == 0) {
            if (f.hdr.num_tensors == 0 || f.records[f.hdr.num_tensors - 1].dtype != ND_CACT_RAW) {
                rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: the last directory record is not the RAW tokenizer", path);
            } else {
                const nd_cact_record *r = &f.records[f.hdr.num_tensors - 1];
                rc = nd_vocab_from_blob(f.data + r->offset, (size_t)r->nbytes, path, &v, err);
            }
            nd_cact_close(&f);
        }
    } else {
        rc = nd_vocab_from_spm(m.data, m.size, path, &v, err);
    }
    nd_unmap_file(&m);
    if (rc) return rc;
    rc = nd_tokenizer_create(&v, out, err);
    nd_vocab_free(&v);
    return rc;
}

static int read_stdin(nd_buf *b)
{
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) nd_buf_append(b, chunk, n);
    return ferror(stdin) || b->oom ? -1 : 0;
}

/* Ids from "[1,2,3]" or "1,2,3" (surrounding whitespace allowed). */
static int parse_ids(const char *s, size_t len, nd_ids *ids, needle_error *err)
{
    while (len && strchr(" \t\r\n", s[len - 1])) len--;
    while (len && strchr(" \t\r\n", *s)) s++, len--;
    if (len && s[0] == '[') {
        nd_json *j = NULL;
        int rc = nd_json_parse(s, len, "ids", &j, err);
        if (rc) return rc;
        if (j->type != ND_JSON_ARRAY) rc = nd_errorf(err, NEEDLE_EINVAL, "ids: not a JSON array");
        for (size_t i = 0; !rc && i < j->count; i++) {
            const nd_json *x = &j->items[i];
            if (x->type != ND_JSON_NUMBER || !(x->num >= -2147483648.0 && x->num <= 2147483647.0) ||
                x->num != (double)(int)x->num)
                rc = nd_errorf(err, NEEDLE_EINVAL, "ids: element %zu is not an integer", i);
            else if (nd_ids_push(ids, (int)x->num))
                rc = nd_errorf(err, NEEDLE_ENOMEM, "ids: out of memory");
        }
        nd_json_free(j);
        return rc;
    }
    char *copy = strndup(s, len);
    if (!copy) return nd_errorf(err, NEEDLE_ENOMEM, "ids: out of memory");
    int *list = NULL;
    int n = len ? cli_parse_int_list(copy, &list) : 0;
    free(copy);
    if (n < 0) return nd_errorf(err, NEEDLE_EINVAL, "ids: expected a JSON array or a comma list of integers");
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        if (nd_ids_push(ids, list[i])) rc = nd_errorf(err, NEEDLE_ENOMEM, "ids: out of memory");
    free(list);
    return rc;
}

/* --rows: answer each stdin line as it arrives (a coprocess for the generator). */
static int count_rows(nd_tokenizer *t, int layout)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long lineno = 0;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
        if (n == 0) continue;
        char where[48];
        snprintf(where, sizeof where, "stdin:%ld", lineno);
        needle_error err = {0};
        nd_example ex;
        if (nd_example_from_json_line_layout(line, (size_t)n, where, t, layout, &ex, &err)) {
            nd_json_print_error_line(stdout, err.message);
        } else {
            printf("{\"tokens\":%d}\n", ex.len);
            free(ex.ids);
            free(ex.mask);
        }
        if (fflush(stdout)) break;
    }
    free(line);
    return ferror(stdin) || ferror(stdout) ? cli_fail("tokenize", "--rows: cannot read stdin or write stdout") : 0;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *input = NULL, *v;
    int decode = 0, bos = 0, rows = 0, layout = NEEDLE_LAYOUT_AUTO;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if ((v = cli_flag_value(argc, argv, &i, "--model"))) {
            model = v;
        } else if (!strcmp(argv[i], "--decode")) {
            decode = 1;
        } else if (!strcmp(argv[i], "--bos")) {
            bos = 1;
        } else if (!strcmp(argv[i], "--rows")) {
            rows = 1;
        } else if ((v = cli_flag_value(argc, argv, &i, "--layout"))) {
            if ((layout = nd_chat_layout_parse(v)) < 0) {
                fprintf(stderr, "needle tokenize: --layout: expected auto, 2.0.8 or 2.0.15, not '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(argv[i], "--")) {
            if (i + 1 < argc) input = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            fprintf(stderr, "needle tokenize: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!input) {
            input = argv[i];
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (!model) {
        usage(stderr);
        return 2;
    }

    needle_error err = {0};
    nd_tokenizer *t = NULL;
    if (load_tokenizer(model, &t, &err)) return cli_fail("tokenize", err.message);
    if (rows) {
        int rc = count_rows(t, nd_chat_layout_resolve(layout, 2));
        nd_tokenizer_free(t);
        return rc;
    }

    nd_buf in;
    nd_buf_init(&in);
    if (!input || !strcmp(input, "-")) {
        if (read_stdin(&in)) {
            nd_tokenizer_free(t);
            nd_buf_free(&in);
            return cli_fail("tokenize", "cannot read stdin");
        }
    } else {
        nd_buf_puts(&in, input);
    }
    const char *text = in.data ? in.data : "";

    int status = 0;
    nd_ids ids;
    nd_ids_init(&ids);
    nd_buf out;
    nd_buf_init(&out);
    if (decode) {
        if (parse_ids(text, in.len, &ids, &err) || nd_tokenizer_decode(t, ids.data, ids.len, &out, &err))
            status = cli_fail("tokenize", err.message);
        else
            fwrite(out.data ? out.data : "", 1, out.len, stdout);
    } else {
        if (bos && nd_tokenizer_bos(t) >= 0) nd_ids_push(&ids, nd_tokenizer_bos(t));
        if (nd_tokenizer_encode(t, text, in.len, &ids, &err)) {
            status = cli_fail("tokenize", err.message);
        } else {
            nd_buf_putc(&out, '[');
            for (size_t i = 0; i < ids.len; i++) nd_buf_printf(&out, i ? ",%d" : "%d", ids.data[i]);
            nd_buf_puts(&out, "]\n");
            fwrite(out.data, 1, out.len, stdout);
        }
    }
    if (!status && (fflush(stdout) || out.oom)) status = cli_fail("tokenize", strerror(errno ? errno : ENOMEM));
    nd_buf_free(&out);
    nd_ids_free(&ids);
    nd_buf_free(&in);
    nd_tokenizer_free(t);
    return status;
}
