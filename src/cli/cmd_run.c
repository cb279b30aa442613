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
#include "core/buf.h"
#include "core/error.h"
#include "needle.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: needle run [--model FILE] [--tokenizer TOK.model] [--tools FILE.json] [--system TEXT]\n"
            "                  [--max-new-tokens N] [--max-reasoning-tokens N] [--temperature T] [--top-p P]\n"
            "                  [--seed N] [--window W] [--threads N] [--tool-index FILE] [--stats] [QUERY]\n"
            "Answer QUERY with tool calls and print the JSON envelope.  Without QUERY, read turns from\n"
            "stdin, one per line: lines starting with '{' or '[' are tool results, others user requests.\n"
            "--model defaults to models/needle-default.cact and --tools to models/tools.json (looked up\n"
            "next to the executable's parent directory, then the current directory) when they exist.\n"
            "--stats prints the mask cost and decode speed of each turn to stderr.\n"
            "With more than five tools the contrastive head shows the model only the top five per\n"
            "conversation; --tool-index FILE keeps the tool embeddings on disk between runs.\n");
}

/* models/NAME next to the repository root (the executable's directory's
 * parent), else in the current directory; NULL when neither exists. */
char *cli_default_file(const char *name)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            slash = strrchr(exe, '/');
            if (slash) *slash = '\0';
            else strcpy(exe, ".");
            nd_buf b;
            nd_buf_init(&b);
            nd_buf_printf(&b, "%s/models/%s", exe[0] ? exe : "/", name);
            if (!b.oom && access(b.data, R_OK) == 0) return nd_buf_take(&b);
            nd_buf_free(&b);
        }
    }
    nd_buf b;
    nd_buf_init(&b);
    nd_buf_printf(&b, "models/%s", name);
    if (!b.oom && access(b.data, R_OK) == 0) return nd_buf_take(&b);
    nd_buf_free(&b);
    return NULL;
}

static int parse_float(const char *s, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < 0) return -1;
    *out = (float)v;
    return 0;
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
static int run_stdin(needle_session *s, int stats)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int failures = 0;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
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
            if (stats) print_stats(s);
        }
        fflush(stdout);
        needle_free(env);
    }
    free(line);
    (void)failures; /* every line was answered: the envelopes say what failed */
    return 0;
}

int cmd_run(int argc, char **argv)
{
    const char *model = NULL, *tokenizer = NULL, *tools_path = NULL, *system = NULL, *query = NULL, *v;
    needle_session_options so;
    memset(&so, 0, sizeof so);
    needle_model_options mo;
    memset(&mo, 0, sizeof mo);
    int stats = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int bad = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if ((v = cli_flag_value(argc, argv, &i, "--model"))) {
            model = v;
        } else if ((v = cli_flag_value(argc, argv, &i, "--tokenizer"))) {
            tokenizer = v;
        } else if ((v = cli_flag_value(argc, argv, &i, "--tools"))) {
            tools_path = v;
        } else if ((v = cli_flag_value(argc, argv, &i, "--system"))) {
            system = v;
        } else if ((v = cli_flag_value(argc, argv, &i, "--max-new-tokens"))) {
            bad = cli_parse_int(v, 1, 1 << 20, &so.max_new_tokens);
        } else if ((v = cli_flag_value(argc, argv, &i, "--max-reasoning-tokens"))) {
            bad = cli_parse_int(v, 1, 1 << 20, &so.max_reasoning_tokens);
        } else if ((v = cli_flag_value(argc, argv, &i, "--temperature"))) {
            bad = parse_float(v, &so.temperature);
        } else if ((v = cli_flag_value(argc, argv, &i, "--top-p"))) {
            bad = parse_float(v, &so.top_p) || so.top_p > 1.0f;
        } else if ((v = cli_flag_value(argc, argv, &i, "--seed"))) {
            char *end;
            errno = 0;
            unsigned long long x = strtoull(v, &end, 10);
            bad = errno || end == v || *end || v[0] == '-';
            so.seed = (uint64_t)x;
        } else if ((v = cli_flag_value(argc, argv, &i, "--window"))) {
            bad = cli_parse_int(v, 1, 1 << 22, &mo.kv_window);
        } else if ((v = cli_flag_value(argc, argv, &i, "--threads"))) {
            bad = cli_parse_int(v, 1, 1024, &mo.threads);
        } else if ((v = cli_flag_value(argc, argv, &i, "--tool-index"))) {
            so.tool_index_path = v;
        } else if (!strcmp(a, "--stats")) {
            stats = 1;
        } else if (!strcmp(a, "--")) {
            if (i + 1 < argc) query = argv[++i];
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "needle run: unknown option '%s' (or missing value)\n", a);
            usage(stderr);
            return 2;
        } else if (!query) {
            query = a;
        } else {
            usage(stderr);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "needle run: bad value '%s' for %s\n", argv[i], a);
            return 2;
        }
    }

    char *model_default = NULL, *tools_default = NULL;
    if (!model) {
        model = model_default = cli_default_file("needle-default.cact");
        if (!model) {
            fprintf(stderr, "needle run: no model: pass --model FILE.cact (the bundled default "
                            "models/needle-default.cact is not present in this checkout)\n");
            return 2;
        }
    }
    if (!tools_path) tools_path = tools_default = cli_default_file("tools.json");

    needle_error err = {0};
    char *tools_json = NULL;
    int status = 1;
    needle_model *m = NULL;
    needle_session *s = NULL;
    if (tools_path && nd_read_file(tools_path, &tools_json, NULL, &err)) {
        cli_fail("run", err.message);
        goto out;
    }
    if (needle_model_open(model, tokenizer, &mo, &m, &err)) {
        cli_fail("run", err.message);
        goto out;
    }
    so.system = system;
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
        needle_free(env);
    } else {
        run_stdin(s, stats);
    }
    status = 0;
out:
    needle_session_close(s);
    needle_model_close(m);
    free(tools_json);
    free(model_default);
    free(tools_default);
    return status;
}
