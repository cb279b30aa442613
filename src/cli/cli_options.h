/* cli_options.h - the options several subcommands share, parsed in one place
 * with the strict number parser (core/number.h), so every command spells,
 * range-checks and reports them the same way. */
#ifndef ND_CLI_OPTIONS_H
#define ND_CLI_OPTIONS_H

#include <stdint.h>

#include "needle.h"

enum {
    CLI_MODEL = 1 << 0,          /* --model FILE (default $NEEDLE_MODEL, then the bundled model) */
    CLI_TOKENIZER = 1 << 1,      /* --tokenizer TOK.model */
    CLI_TOOLS = 1 << 2,          /* --tools FILE.json */
    CLI_SYSTEM = 1 << 3,         /* --system TEXT */
    CLI_THREADS = 1 << 4,        /* --threads N */
    CLI_WINDOW = 1 << 5,         /* --window W */
    CLI_KV_BITS = 1 << 6,        /* --kv-bits 32|8 */
    CLI_MAX_NEW_TOKENS = 1 << 7, /* --max-new-tokens N */
    CLI_SEED = 1 << 8,           /* --seed N */
    CLI_LAYOUT = 1 << 9,         /* --layout auto|2.0.8|2.0.15 */
    CLI_ACTS = 1 << 10,          /* --acts a8|float */
    CLI_COPY_VALUES = 1 << 11,   /* --copy-values on|off (grounded decoding) */
    CLI_SPLIT = 1 << 12,         /* --split on|off (a two-part request answered in parts) */
    CLI_ASK_AGAIN = 1 << 13,     /* --ask-again on|off (a request answered with no call asked again) */
};

typedef struct cli_common {
    unsigned accept;       /* the CLI_* options this subcommand takes */
    const char *model;     /* NULL when not given */
    const char *tokenizer; /* NULL: the one inside the model */
    const char *tools;     /* NULL when not given */
    const char *system;    /* NULL when not given */
    int threads;           /* 0: automatic */
    int window;            /* 0: the model's */
    int kv_bits;           /* 0: the model's */
    int max_new_tokens;    /* 0: the default */
    uint64_t seed;
    int have_seed;
    int layout;            /* NEEDLE_LAYOUT_*; 0 (auto): what the model expects */
    int acts;              /* NEEDLE_ACTS_A8 (default) or NEEDLE_ACTS_FLOAT */
    int copy_values;       /* needle_session_options.grounded_decoding: 1 on, -1 off, 0 not given */
    int split;             /* needle_session_options.split_requests: 1 on, -1 off, 0 not given */
    int ask_again;         /* needle_session_options.ask_again: 1 on, -1 off, 0 not given */
} cli_common;

/* Limits the shared numeric options are checked against. */
#define CLI_MAX_THREADS 1024
#define CLI_MAX_WINDOW (1 << 20)
#define CLI_MAX_NEW_TOKENS_LIMIT (1 << 20)

void cli_common_init(cli_common *c, unsigned accept);

/* If argv[*i] is a shared option this command accepts ("--name V" or
 * "--name=V"), store it, advance *i past its value and return 1; 0 when it is
 * not one; -1 after printing "needle CMD: --threads: 'x' is not an integer"
 * (bad or missing value). */
int cli_common_parse(cli_common *c, const char *cmd, int argc, char **argv, int *i);

/* The model to open: --model, else $NEEDLE_MODEL, else the bundled
 * models/needle-default.cact; NULL (message printed) when there is none.
 * *owned receives any heap string to free. */
const char *cli_model_path(const cli_common *c, const char *cmd, char **owned);

/* models/NAME next to the repository root (the executable's directory's
 * parent), else in the current directory; a heap string or NULL. */
char *cli_default_file(const char *name);
/* The same for any path relative to the repository root ("tests/golden/tok8k.model"). */
char *cli_repo_file(const char *rel);

/* Read a tools file: a regular file of at most ND_LIMIT_TOOLS_BYTES with no
 * NUL byte (text after a NUL would otherwise be silently ignored). */
int cli_read_tools(const char *path, char **out, needle_error *err);

/* Strict numeric option values; on failure print "needle CMD: MESSAGE" and return -1. */
int cli_int(const char *cmd, const char *name, const char *v, int lo, int hi, int *out);
int cli_double(const char *cmd, const char *name, const char *v, double lo, double hi, double *out);
int cli_u64(const char *cmd, const char *name, const char *v, uint64_t *out);

#endif
