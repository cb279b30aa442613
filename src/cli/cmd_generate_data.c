/* cmd_generate_data.c - `needle generate-data`: training data for your own tools.
 *
 * The generator is a Python program (tools/generate_data.py; it uses Faker and
 * num2words, development dependencies that the library never needs).  This
 * command finds it and runs it with the same arguments:
 *   $NEEDLE_DATAGEN, else ../tools/generate_data.py next to the executable
 *   (build/needle -> tools/), else tools/generate_data.py in the current directory;
 * the interpreter is $NEEDLE_PYTHON, else python3 from PATH.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "core/buf.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: needle generate-data --tools T.json --out DIR [--examples 1000] [--seed 0]\n"
            "                            [--system S] [--endpoint URL --model NAME [--api-key-env VAR]]\n"
            "Write DIR/train.jsonl, val.jsonl, test.jsonl (80/10/10) and stats.json: requests for your\n"
            "tools in the fine-tuning format, in every behaviour category (positive, parallel, missing,\n"
            "irrelevant, negation, invalid, multi-turn), from nothing but the tools' JSON Schemas.\n"
            "Runs tools/generate_data.py (needs python3 with faker and num2words: pip install faker\n"
            "num2words); NEEDLE_DATAGEN=PATH names the script, NEEDLE_PYTHON the interpreter.\n"
            "--endpoint: an OpenAI-compatible chat endpoint paraphrases some requests (key from the\n"
            "environment variable --api-key-env, default NEEDLE_DATAGEN_API_KEY).\n"
            "--max-tokens N (default 512, the bundled model's context; 0: no limit): rows longer than N\n"
            "tokens as `needle finetune` renders them (counted with --tokenizer, default the bundled\n"
            "model's) are drawn again, so the trainer skips none.\n");
}

/* The generator script, or NULL (heap string). */
static char *find_script(void)
{
    const char *env = getenv("NEEDLE_DATAGEN");
    if (env && *env) return access(env, R_OK) == 0 ? strdup(env) : NULL;
    return cli_repo_file("tools/generate_data.py"); /* next to the executable's repository, else ./ */
}

int cmd_generate_data(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    }
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    char *script = find_script();
    if (!script) {
        const char *env = getenv("NEEDLE_DATAGEN");
        fprintf(stderr, "needle generate-data: %s%s not found (set NEEDLE_DATAGEN to tools/generate_data.py)\n",
                env && *env ? env : "tools/generate_data.py", env && *env ? "" : " next to the executable");
        return 1;
    }
    const char *python = getenv("NEEDLE_PYTHON");
    if (!python || !*python) python = "python3";
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args) {
        free(script);
        return cli_fail("generate-data", "out of memory");
    }
    args[0] = (char *)python;
    args[1] = script;
    for (int i = 1; i < argc; i++) args[i + 1] = argv[i];
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* the generator counts each row's tokens with this very executable (--max-tokens) */
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n > 0) {
            self[n] = 0;
            setenv("NEEDLE_EXE", self, 1);
        }
        execvp(python, args);
        fprintf(stderr, "needle generate-data: cannot run %s (%s); the generator needs python3 with faker and "
                        "num2words\n", python, strerror(errno));
        _exit(127);
    }
    int status = 0, rc = 1;
    if (pid < 0) fprintf(stderr, "needle generate-data: cannot start %s (%s)\n", python, strerror(errno));
    else if (waitpid(pid, &status, 0) == pid && WIFEXITED(status)) rc = WEXITSTATUS(status) == 0 ? 0 : 1;
    free(args);
    free(script);
    return rc;
}
