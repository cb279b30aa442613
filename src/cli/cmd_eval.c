/* cmd_eval.c - `needle eval`: score a model on a JSONL test set, print JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval.h"
#include "cli/cli.h"
#include "cli/cli_options.h"
#include "core/buf.h"
#include "core/file.h"
#include "needle.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: needle eval [--model FILE] [--tokenizer TOK.model] [--tools-from-data | --tools FILE.json]\n"
            "                   [--max-new-tokens N] [--threads N] [--acts a8|float] [--show-failures N]\n"
            "                   [--copy-values on|off] [--split on|off] [--ask-again on|off] [--strict]\n"
            "                   [--layout auto|2.0.8|2.0.15] DATA.jsonl\n"
            "Answer every row {query, tools, answers|function_calls, system?} through a session, as\n"
            "`needle run` would, and print one JSON object: rows, tool_name_accuracy,\n"
            "exact_call_accuracy (names and arguments equal as JSON values, call order ignored),\n"
            "argument precision/recall/F1 over (tool, key, value) triples, refusal_accuracy (rows\n"
            "expecting [] answered []), false_refusal_rate, schema_valid_rate, mean_decode_tps.\n"
            "Without --tools, a row that carries \"tools\" is answered with them and the others with\n"
            "models/tools.json; --tools FILE gives every row FILE; --tools-from-data requires each\n"
            "row's own tools.  --model defaults to $NEEDLE_MODEL, then models/needle-default.cact.\n"
            "Malformed rows are reported on stderr and skipped;\n"
            "--show-failures N prints the first N wrong answers to stderr.\n"
            "--copy-values on|off: grounded decoding, as `needle run --copy-values`.\n"
            "--split on|off: two-part requests answered in parts, as `needle run --split`.\n"
            "--ask-again on|off: requests answered with no call asked again (read by their messaging\n"
            "                   frame, answered with the call the model nearly made), as `needle run --ask-again`.\n"
            "--strict: answer as `needle run --strict` (withheld calls count as [] answers).\n"
            "--layout: the chat layout prompts are rendered in (as `needle run --layout`).\n");
}

int cmd_eval(int argc, char **argv)
{
    const char *data = NULL, *v;
    cli_common c;
    cli_common_init(&c, CLI_MODEL | CLI_TOKENIZER | CLI_TOOLS | CLI_THREADS | CLI_MAX_NEW_TOKENS | CLI_LAYOUT |
                                CLI_ACTS | CLI_COPY_VALUES | CLI_SPLIT | CLI_ASK_AGAIN);
    nd_eval_opts o;
    memset(&o, 0, sizeof o);
    o.report = stderr;
    needle_model_options mo;
    memset(&mo, 0, sizeof mo);
    for (int i = 1; i < argc; i++) {
        int bad = 0, shared;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--tools-from-data")) {
            o.tools_from_data = 1;
        } else if ((shared = cli_common_parse(&c, "eval", argc, argv, &i)) != 0) {
            bad = shared < 0;
        } else if (!strcmp(argv[i], "--strict")) {
            o.strict = 1;
        } else if ((v = cli_flag_value(argc, argv, &i, "--show-failures"))) {
            bad = cli_int("eval", "--show-failures", v, 0, 1 << 20, &o.show_failures);
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "needle eval: unknown option %s\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!data) {
            data = argv[i];
        } else {
            fprintf(stderr, "needle eval: one DATA file expected, got '%s' and '%s'\n", data, argv[i]);
            return 2;
        }
        if (bad) return 2;
    }
    if (!data) {
        fprintf(stderr, "needle eval: missing the DATA.jsonl argument\n");
        usage(stderr);
        return 2;
    }
    if (o.tools_from_data && c.tools) {
        fprintf(stderr, "needle eval: give --tools or --tools-from-data, not both\n");
        return 2;
    }
    char *model_default = NULL, *tools_default = NULL;
    const char *model = cli_model_path(&c, "eval", &model_default);
    if (!model) return 2;
    o.max_new_tokens = c.max_new_tokens;
    o.grounded_decoding = c.copy_values;
    o.split_requests = c.split;
    o.ask_again = c.ask_again;
    mo.threads = c.threads;
    mo.layout = c.layout;
    mo.acts = c.acts;
    char *tools_text = NULL;
    const char *tools_path = c.tools;
    if (!o.tools_from_data && !tools_path) {
        /* rows that carry their own tools are scored with them; the others get models/tools.json */
        o.tools_from_data = 2;
        tools_path = tools_default = cli_default_file("tools.json");
    }
    if (tools_path) {
        needle_error rerr = {0, ""};
        if (cli_read_tools(tools_path, &tools_text, &rerr)) {
            fprintf(stderr, "needle eval: %s\n", rerr.message);
            free(model_default);
            free(tools_default);
            return 1;
        }
        o.tools_json = tools_text;
    }
    needle_error err = {0, ""};
    needle_model *m = NULL;
    nd_eval_result r;
    memset(&r, 0, sizeof r);
    int status = 1;
    if (needle_model_open(model, c.tokenizer, &mo, &m, &err) == 0 && nd_eval_file(m, data, &o, &r, &err) == 0) {
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
    free(model_default);
    free(tools_default);
    return status;
}
