/* cmd_run.c - `needle run`: answer requests with tool calls, one JSON envelope each.
 *
 *   needle run [--model FILE] [--tokenizer TOK.model] [--tools FILE.json] [--system "date: ..."]
 *              [--max-new-tokens N] [--max-reasoning-tokens N] [--temperature T --top-p P] [--seed N]
 *              [--window W] [--threads N] [--tool-index FILE] [--stats] ["query"]
 *
 * With a query: one turn, its envelope on stdout.  Without: turns are read
 * from stdin one per line; a line starting with `{` or `[` is a tool's result
 * for the previous call, any other non-empty line is a user request; one
 * envelope line is written per turn (an input error gives a success:false
 * envelope for that line, so the output stays line-aligned).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/envelope.h"
#include "agent/session.h"
#include "cli/cli.h"
#include "cli/cli_options.h"
#include "core/buf.h"
#include "core/error.h"
#include "needle.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: needle run [--model FILE] [--tokenizer TOK.model] [--tools FILE.json] [--system TEXT]\n"
            "                  [--max-new-tokens N] [--max-reasoning-tokens N] [--temperature T] [--top-p P]\n"
            "                  [--seed N] [--window W] [--threads N] [--acts a8|float] [--tool-index FILE] [--strict]\n"
            "                  [--copy-values on|off] [--split on|off] [--ask-again on|off] [--stats] [--layout auto|2.0.8|2.0.15]\n"
            "                  [QUERY]\n"
            "Answer QUERY with tool calls and print the JSON envelope.  Without QUERY, read turns from\n"
            "stdin, one per line: lines starting with '{' or '[' are tool results, others user requests.\n"
            "--model defaults to $NEEDLE_MODEL, else models/needle-default.cact, and --tools to\n"
            "models/tools.json (looked up"
            " next to the executable's parent directory, then the current directory) when they exist.\n"
            "The exit status is 1 when a turn's envelope says \"success\":false (stdin mode: any turn);\n"
            "every envelope field is described in docs/envelope.md.\n"
            "--stats prints the mask cost and decode speed of each turn to stderr.\n"
            "--strict withholds calls with an argument value the request does not say: they move to\n"
            "\"suppressed_calls\", as every turn's calls do when the request says not to act, asks for a\n"
            "value outside the schema, or leaves a required value to a placeholder (docs/envelope.md).\n"
            "--copy-values on|off: on (the default without --strict), a free-text argument value (a string\n"
            "with no enum, pattern, format or length bounds) can only be a copy of whole words said in the\n"
            "conversation or the system facts; off, any text (docs/envelope.md, \"Grounded decoding\").\n"
            "--split on|off: on (the default), a first request answered with one call or none that can\n"
            "be cut in two (\"... and then ...\", \"... plus ...\") is answered one part at a time, and the\n"
            "parts' calls are taken when both call something (validation.split; docs/envelope.md).\n"
            "--ask-again on|off: on (the default), a first request the model answers with no call is\n"
            "asked again as \"please \" and the request, and that answer taken when it calls something\n"
            "grounded with no sign of a request to refuse (validation.asked_again; docs/envelope.md);\n"
            "still with no call, a request in a messaging frame (\"text mom that I'll be late\") gets the\n"
            "call the frame spells out (docs/envelope.md, \"A messaging request read by its frame\"),\n"
            "and where the model gave a call at least 0.1 of its probability, the call it nearly made\n"
            "is taken when the request names the tool and says its values (validation.leaned); a\n"
            "request answered with one call to a tool while it names another tool's choice\n"
            "(\"temperature in Reno in fahrenheit\" -> set_lights) is asked again with those tools alone.\n"
            "With more than five tools the contrastive head shows the model only the top five per\n"
            "conversation; --tool-index FILE keeps the tool embeddings on disk between runs.\n"
            "--layout: the chat layout the model was trained on (default auto: 2.0.8 for Needle 2 files,\n"
            "as the released and bundled models were trained; use 2.0.15 for a model fine-tuned with\n"
            "cactus-needle 2.0.15 or `needle finetune --layout 2.0.15`).\n");
}

/* The envelope's success field (always its second key). */
static int envelope_failed(const char *env)
{
    /* the type's value is "call" or "respond", so the first match is the key itself */
    const char *p = env ? strstr(env, ",\"success\":") : NULL;
    return p && strncmp(p + 11, "false", 5) == 0;
}

/* An envelope for a turn the session refused (bad input), so stdin mode
 * still answers every line. */
static void print_error_envelope(const needle_error *err)
{
    nd_envelope e;
    memset(&e, 0, sizeof e);
    e.success = 0;
    e.error = err->message;
    e.error_code = err->code;
    e.confidence = NAN;
    e.peak_ram_mb = nd_peak_ram_mb();
    nd_buf b;
    nd_buf_init(&b);
    nd_envelope_write(&b, &e);
    if (!b.oom) printf("%s\n", b.data);
    nd_buf_free(&b);
}

static void print_stats(const needle_session *s)
{
    const needle_session *x = s;
    double frac = x->last_decode_seconds > 0 ? x->last_mask_seconds / x->last_decode_seconds : 0.0;
    fprintf(stderr, "needle run: %d new tokens in %.3f s (%.1f tok/s), mask %.3f s (%.1f%% of decode)%s\n",
            x->last_new_tokens, x->last_decode_seconds,
            x->last_decode_seconds > 0 ? x->last_new_tokens / x->last_decode_seconds : 0.0, x->last_mask_seconds,
            100.0 * frac, x->last_loop_breaks ? ", loop guard used" : "");
}

/* Read stdin line by line: one turn each. */
/* The longest stdin line taken (a request or a tool result): 16 MiB. */
#define STDIN_LINE_MAX ((size_t)16 << 20)

/* One line of stdin into *line (without the newline), at most STDIN_LINE_MAX
 * bytes kept: a longer line is read to its end and reported as too long (*n
 * set to -2), so an endless line cannot take all memory.  -1 at end of input. */
static ssize_t read_line(char **line, size_t *cap, int *too_long)
{
    size_t n = 0;
    int c, any = 0;
    *too_long = 0;
    while ((c = getchar()) != EOF) {
        any = 1;
        if (c == '\n') break;
        if (n >= STDIN_LINE_MAX) {
            *too_long = 1;
            continue;
        }
        if (n + 2 > *cap) {
            size_t nc = *cap ? *cap * 2 : 4096;
            char *p = realloc(*line, nc);
            if (!p) {
                *too_long = 1;
                continue;
            }
            *line = p;
            *cap = nc;
        }
        (*line)[n++] = (char)c;
    }
    if (!any) return -1;
    if (!*line) { /* an empty line before any allocation */
        *line = malloc(1);
        if (!*line) return -1;
        *cap = 1;
    }
    (*line)[n] = '\0';
    return (ssize_t)n;
}

static int run_stdin(needle_session *s, int stats)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int failures = 0, too_long = 0;
    while ((n = read_line(&line, &cap, &too_long)) >= 0) {
        if (too_long) {
            needle_error e = {.code = NEEDLE_ELIMIT};
            snprintf(e.message, sizeof e.message, "stdin: a line longer than the %zu MiB allowed",
                     STDIN_LINE_MAX >> 20);
            print_error_envelope(&e);
            failures++;
            fflush(stdout);
            continue;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        if (n == 0) continue;
        if ((size_t)n != strlen(line)) { /* an embedded NUL: not text */
            needle_error e = {.code = NEEDLE_EUTF8};
            snprintf(e.message, sizeof e.message, "stdin: a NUL byte inside the line");
            print_error_envelope(&e);
            failures++;
            continue;
        }
        needle_error err = {0};
        char *env = NULL;
        int rc = (line[0] == '{' || line[0] == '[') ? needle_session_tool_result(s, line, &env, &err)
                                                    : needle_session_send(s, line, &env, &err);
        if (rc) {
            print_error_envelope(&err);
            failures++;
        } else {
            printf("%s\n", env);
            if (envelope_failed(env)) failures++;
            if (stats) print_stats(s);
        }
        fflush(stdout);
        needle_free(env);
    }
    free(line);
    /* every line was answered (the envelopes say what failed); the status says whether any failed */
    return failures ? 1 : 0;
}

int cmd_run(int argc, char **argv)
{
    const char *query = NULL, *v;
    cli_common c;
    cli_common_init(&c, CLI_MODEL | CLI_TOKENIZER | CLI_TOOLS | CLI_SYSTEM | CLI_THREADS | CLI_WINDOW |
                            CLI_MAX_NEW_TOKENS | CLI_SEED | CLI_LAYOUT | CLI_ACTS | CLI_COPY_VALUES | CLI_SPLIT |
                                CLI_ASK_AGAIN);
    needle_session_options so;
    memset(&so, 0, sizeof so);
    needle_model_options mo;
    memset(&mo, 0, sizeof mo);
    int stats = 0, extra_words = 0;
    nd_buf words; /* every positional word, to show the quoted form of an unquoted request */
    nd_buf_init(&words);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int bad = 0, shared;
        double x = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if ((shared = cli_common_parse(&c, "run", argc, argv, &i)) != 0) {
            if (shared < 0) {
                nd_buf_free(&words);
                return 2;
            }
        } else if (!strcmp(a, "--strict")) {
            so.strict = 1;
        } else if ((v = cli_flag_value(argc, argv, &i, "--max-reasoning-tokens"))) {
            bad = cli_int("run", "--max-reasoning-tokens", v, 1, 1 << 20, &so.max_reasoning_tokens);
        } else if ((v = cli_flag_value(argc, argv, &i, "--temperature"))) {
            bad = cli_double("run", "--temperature", v, 0.0, 100.0, &x);
            so.temperature = (float)x;
        } else if ((v = cli_flag_value(argc, argv, &i, "--top-p"))) {
            bad = cli_double("run", "--top-p", v, 0.0, 1.0, &x);
            so.top_p = (float)x;
        } else if ((v = cli_flag_value(argc, argv, &i, "--tool-index"))) {
            so.tool_index_path = v;
        } else if (!strcmp(a, "--stats")) {
            stats = 1;
        } else if (!strcmp(a, "--")) {
            for (int k = i + 1; k < argc; k++) {
                if (!query) query = argv[k];
                else extra_words++;
                nd_buf_printf(&words, "%s%s", words.len ? " " : "", argv[k]);
            }
            break;
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "needle run: unknown option '%s' (or missing value)\n", a);
            usage(stderr);
            nd_buf_free(&words);
            return 2;
        } else {
            if (!query) query = a;
            else extra_words++;
            nd_buf_printf(&words, "%s%s", words.len ? " " : "", a);
        }
        if (bad) {
            nd_buf_free(&words);
            return 2;
        }
    }
    if (extra_words) {
        fprintf(stderr,
                "needle run: the request came as %d separate arguments; quote it as one:\n"
                "  needle run \"%s\"\n",
                extra_words + 1, words.oom ? query : words.data);
        nd_buf_free(&words);
        return 2;
    }
    nd_buf_free(&words);
    so.max_new_tokens = c.max_new_tokens;
    so.seed = c.seed;
    so.grounded_decoding = c.copy_values;
    so.split_requests = c.split;
    so.ask_again = c.ask_again;
    mo.kv_window = c.window;
    mo.threads = c.threads;
    mo.layout = c.layout;
    mo.acts = c.acts;

    char *model_default = NULL, *tools_default = NULL;
    const char *model = cli_model_path(&c, "run", &model_default);
    if (!model) return 2;
    const char *tools_path = c.tools;
    if (!tools_path) tools_path = tools_default = cli_default_file("tools.json");

    needle_error err = {0};
    char *tools_json = NULL;
    int status = 1;
    needle_model *m = NULL;
    needle_session *s = NULL;
    if (tools_path && cli_read_tools(tools_path, &tools_json, &err)) {
        cli_fail("run", err.message);
        goto out;
    }
    if (needle_model_open(model, c.tokenizer, &mo, &m, &err)) {
        cli_fail("run", err.message);
        goto out;
    }
    so.system = c.system;
    so.tools_json = tools_json;
    if (needle_session_open(m, &so, &s, &err)) {
        cli_fail("run", err.message);
        goto out;
    }
    if (s->retr && s->retr->warning[0]) fprintf(stderr, "needle run: warning: %s\n", s->retr->warning);
    if (stats && s->retr)
        fprintf(stderr, "needle run: %d tools, %d embedded by the model, %d from the index\n", s->retr->n_tools,
                s->retr->embedded, s->retr->n_tools - s->retr->embedded);
    if (query) {
        char *env = NULL;
        if (needle_session_send(s, query, &env, &err)) {
            cli_fail("run", err.message);
            goto out;
        }
        printf("%s\n", env);
        if (stats) print_stats(s);
        /* the envelope is printed either way; the status tells scripts the turn failed */
        status = envelope_failed(env) ? 1 : 0;
        needle_free(env);
    } else {
        status = run_stdin(s, stats);
    }
out:
    needle_session_close(s);
    needle_model_close(m);
    free(tools_json);
    free(model_default);
    free(tools_default);
    return status;
}
