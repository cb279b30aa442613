/* cli_options.c - one parser for the options the subcommands share. */
#include "cli/cli_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/file.h"
#include "core/number.h"
#include "text/chat.h"

void cli_common_init(cli_common *c, unsigned accept)
{
    memset(c, 0, sizeof *c);
    c->accept = accept;
}

int cli_int(const char *cmd, const char *name, const char *v, int lo, int hi, int *out)
{
    needle_error e = {0};
    if (!nd_parse_int(v, lo, hi, name, out, &e)) return 0;
    fprintf(stderr, "needle %s: %s\n", cmd, e.message);
    return -1;
}

int cli_double(const char *cmd, const char *name, const char *v, double lo, double hi, double *out)
{
    needle_error e = {0};
    if (!nd_parse_double(v, lo, hi, name, out, &e)) return 0;
    fprintf(stderr, "needle %s: %s\n", cmd, e.message);
    return -1;
}

int cli_u64(const char *cmd, const char *name, const char *v, uint64_t *out)
{
    needle_error e = {0};
    if (!nd_parse_u64(v, name, out, &e)) return 0;
    fprintf(stderr, "needle %s: %s\n", cmd, e.message);
    return -1;
}

/* "--name V" or "--name=V": the value (advancing *i), NULL when argv[*i] is
 * another option; *missing set when it is this option without a value. */
static const char *value_of(int argc, char **argv, int *i, const char *name, int *missing)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] != '\0') return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    (*i)++;
    return argv[*i];
}

/* "on" -> 1, "off" -> -1 (0 stays "not given"); anything else is a one-line error and -1. */
static int on_off(const char *cmd, const char *name, const char *v, int *out)
{
    if (!strcmp(v, "on")) *out = 1;
    else if (!strcmp(v, "off")) *out = -1;
    else {
        fprintf(stderr, "needle %s: %s: '%s' is not allowed (allowed on or off)\n", cmd, name, v);
        return -1;
    }
    return 0;
}

int cli_common_parse(cli_common *c, const char *cmd, int argc, char **argv, int *i)
{
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {
        {CLI_MODEL, "--model"},         {CLI_TOKENIZER, "--tokenizer"}, {CLI_TOOLS, "--tools"},
        {CLI_SYSTEM, "--system"},       {CLI_THREADS, "--threads"},     {CLI_WINDOW, "--window"},
        {CLI_KV_BITS, "--kv-bits"},     {CLI_MAX_NEW_TOKENS, "--max-new-tokens"}, {CLI_SEED, "--seed"},
        {CLI_LAYOUT, "--layout"},
        {CLI_ACTS, "--acts"},           {CLI_COPY_VALUES, "--copy-values"}, {CLI_SPLIT, "--split"},
        {CLI_ASK_AGAIN, "--ask-again"},
    };
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        if (!(c->accept & names[k].bit)) continue;
        int missing = 0;
        const char *v = value_of(argc, argv, i, names[k].name, &missing);
        if (missing) {
            fprintf(stderr, "needle %s: %s needs a value\n", cmd, names[k].name);
            return -1;
        }
        if (!v) continue;
        int bad = 0;
        switch (names[k].bit) {
        case CLI_MODEL: c->model = v; break;
        case CLI_TOKENIZER: c->tokenizer = v; break;
        case CLI_TOOLS: c->tools = v; break;
        case CLI_SYSTEM: c->system = v; break;
        case CLI_THREADS: bad = cli_int(cmd, "--threads", v, 1, CLI_MAX_THREADS, &c->threads); break;
        case CLI_WINDOW: bad = cli_int(cmd, "--window", v, 1, CLI_MAX_WINDOW, &c->window); break;
        case CLI_KV_BITS:
            bad = cli_int(cmd, "--kv-bits", v, 8, 32, &c->kv_bits);
            if (!bad && c->kv_bits != 8 && c->kv_bits != 32) {
                fprintf(stderr, "needle %s: --kv-bits: '%s' is not allowed (allowed 8 or 32)\n", cmd, v);
                bad = -1;
            }
            break;
        case CLI_MAX_NEW_TOKENS:
            bad = cli_int(cmd, "--max-new-tokens", v, 1, CLI_MAX_NEW_TOKENS_LIMIT, &c->max_new_tokens);
            break;
        case CLI_ACTS:
            if (!strcmp(v, "a8")) c->acts = NEEDLE_ACTS_A8;
            else if (!strcmp(v, "float")) c->acts = NEEDLE_ACTS_FLOAT;
            else {
                fprintf(stderr, "needle %s: --acts: '%s' is not allowed (allowed a8 or float)\n", cmd, v);
                bad = -1;
            }
            break;
        case CLI_COPY_VALUES: bad = on_off(cmd, "--copy-values", v, &c->copy_values); break;
        case CLI_SPLIT: bad = on_off(cmd, "--split", v, &c->split); break;
        case CLI_ASK_AGAIN: bad = on_off(cmd, "--ask-again", v, &c->ask_again); break;
        case CLI_SEED:
            bad = cli_u64(cmd, "--seed", v, &c->seed);
            c->have_seed = !bad;
            break;
        case CLI_LAYOUT:
            c->layout = nd_chat_layout_parse(v);
            if (c->layout < 0) {
                fprintf(stderr, "needle %s: --layout: '%s' is not allowed (allowed auto, 2.0.8, 2.0.15)\n", cmd, v);
                bad = -1;
            }
            break;
        }
        return bad ? -1 : 1;
    }
    return 0;
}

char *cli_default_file(const char *name)
{
    char rel[1024];
    snprintf(rel, sizeof rel, "models/%s", name);
    char *found = cli_repo_file(rel);
    if (found) return found;
    /* an installed CLI (make install): PREFIX/bin/needle finds PREFIX/share/needle/models */
    snprintf(rel, sizeof rel, "share/needle/models/%s", name);
    return cli_repo_file(rel);
}

char *cli_repo_file(const char *rel)
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
            nd_buf_printf(&b, "%s/%s", exe[0] ? exe : "/", rel);
            if (!b.oom && access(b.data, R_OK) == 0) return nd_buf_take(&b);
            nd_buf_free(&b);
        }
    }
    nd_buf b;
    nd_buf_init(&b);
    nd_buf_printf(&b, "%s", rel);
    if (!b.oom && access(b.data, R_OK) == 0) return nd_buf_take(&b);
    nd_buf_free(&b);
    return NULL;
}

const char *cli_model_path(const cli_common *c, const char *cmd, char **owned)
{
    *owned = NULL;
    if (c->model) return c->model;
    const char *env = getenv("NEEDLE_MODEL");
    if (env && *env) return env;
    *owned = cli_default_file("needle-default.cact");
    if (*owned) return *owned;
    fprintf(stderr,
            "needle %s: no model: pass --model FILE.cact or set NEEDLE_MODEL (the bundled default "
            "models/needle-default.cact is not present in this checkout)\n",
            cmd);
    return NULL;
}

int cli_read_tools(const char *path, char **out, needle_error *err)
{
    size_t len = 0;
    int rc = nd_read_file_max(path, ND_LIMIT_TOOLS_BYTES, "tools file", out, &len, err);
    if (rc) return rc;
    size_t nul = strlen(*out);
    if (nul != len) {
        free(*out);
        *out = NULL;
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: a NUL byte at byte %zu (a tools file is JSON text)", path, nul);
    }
    return 0;
}
