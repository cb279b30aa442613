/* cmd_eval.c - `needle eval`: score a model on a JSONL test set, print JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval.h"
#include "cli/cli.h"
#include "core/buf.h"
#include "core/file.h"
#include "needle.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: needle eval --model FILE [--tokenizer TOK.model] [--tools-from-data | --tools FILE.json]\n"
            "                   [--max-new-tokens N] [--threads N] [--show-failures N] DATA.jsonl\n"
            "Answer every row {query, tools, answers|function_calls, system?} through a session, as\n"
            "`needle run` would, and print one JSON object: rows, tool_name_accuracy,\n"
            "exact_call_accuracy (names and arguments equal as JSON values, call order ignored),\n"
            "argument precision/recall/F1 over (tool, key, value) triples, refusal_accuracy (rows\n"
            "expecting [] answered []), false_refusal_rate, schema_valid_rate, mean_decode_tps.\n"
            "--tools-from-data declares each row's own tools; otherwise every row gets --tools\n"
            "(default models/tools.json).  Malformed rows are reported on stderr and skipped;\n"
            "--show-failures N prints the first N wrong answers to stderr.\n");
}

int cmd_eval(int argc, char **argv)
{
    const char *model = NULL, *tokenizer = NULL, *tools_path = NULL, *data = NULL, *v;
    nd_eval_opts o;
    memset(&o, 0, sizeof o);
    o.report = stderr;
    needle_model_options mo;
    memset(&mo, 0, sizeof mo);
    for (int i = 1; i < argc; i++) {
        int bad = 0;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--tools-from-data")) {
            o.tools_from_data = 1;
        } else if ((v = cli_flag_value(argc, argv, &i, "--model"))) {
            model = v;
        } else if ((v = cli_flag_value(argc, argv, &i, "--tokenizer"))) {
            tokenizer = v;
        } else if ((v = cli_flag_value(argc, argv, &i, "--tools"))) {
            tools_path = v;
        } else if ((v = cli_flag_value(argc, argv, &i, "--max-new-tokens"))) {
            bad = cli_parse_int(v, 0, 1 << 20, &o.max_new_tokens);
        } else if ((v = cli_flag_value(argc, argv, &i, "--threads"))) {
            bad = cli_parse_int(v, 0, 1 << 20, &mo.threads);
        } else if ((v = cli_flag_value(argc, argv, &i, "--show-failures"))) {
            bad = cli_parse_int(v, 0, 1 << 20, &o.show_failures);
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "needle eval: unknown option %s\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!data) {
            data = argv[i];
        } else {
            usage(stderr);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "needle eval: bad value for %s\n", argv[i]);
            return 2;
        }
    }
    if (!model || !data) {
        usage(stderr);
        return 2;
    }
    char *tools_text = NULL;
    if (!o.tools_from_data) {
        if (!tools_path) tools_path = "models/tools.json";
        needle_error rerr = {0, ""};
        if (nd_read_file(tools_path, &tools_text, NULL, &rerr)) {
            fprintf(stderr, "needle eval: %s\n", rerr.message);
            return 1;
        }
        o.tools_json = tools_text;
    }
    needle_error err = {0, ""};
    needle_model *m = NULL;
    nd_eval_result r;
    memset(&r, 0, sizeof r);
    int status = 1;
    if (needle_model_open(model, tokenizer, &mo, &m, &err) == 0 && nd_eval_file(m, data, &o, &r, &err) == 0) {
        nd_buf b;
        nd_buf_init(&b);
        nd_eval_write_json(&b, &r);
        if (!b.oom) {
            printf("%s\n", b.data);
            status = 0;
        }
        nd_buf_free(&b);
    }
    if (status) fprintf(stderr, "needle eval: %s\n", err.message[0] ? err.message : "out of memory");
    needle_model_close(m);
    free(tools_text);
    return status;
}
